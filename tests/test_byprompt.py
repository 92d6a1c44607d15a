"""Per-position acceptance from SGLang's per-request histogram (one reader for both field names),
the lab server returning it as SGLang 0.5.23 does, acceptance by prompt length and category, and
the doctor naming a fall with length / a category gap on the lab server (silent on a control)."""

from __future__ import annotations

import io
import json
import threading
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from eagle3lab.acceptance import byprompt
from eagle3lab.acceptance import stats
from eagle3lab.engines.sglang import meta_info
from eagle3lab.spec import SpecConfig

DATA = Path(__file__).parent / "data"


def recorded():
    return json.loads((DATA / "sglang_0.5.23_generate_histogram.json").read_text())


# --------------------------------------------------------------------------- the reader

def test_recorded_sglang_0_5_23_response_gives_conditional_rates_from_the_summed_histograms():
    rec = recorded()
    obs = meta_info.observe_meta_info([r["meta_info"] for r in rec["response"]], rec["server_info"])
    # summed histograms [7, 2, 1, 3]: 13 steps; 6 accepted >= 1, 4 >= 2, 3 >= 3
    np.testing.assert_allclose(obs.per_position["rate"], [6 / 13, 4 / 6, 3 / 4])
    assert obs.conditional is True and list(obs.per_position["n"]) == [13, 6, 4]
    assert list(obs.distribution["steps"]) == [7, 2, 1, 3]
    assert obs.accept_length == pytest.approx(28 / 13)  # completion_tokens / spec_verify_ct, pooled
    assert (obs.per_position["lo"] <= obs.per_position["rate"]).all()
    assert not any("histogram" in w for w in obs.warnings)


def test_the_old_field_name_reads_the_same():
    rec = recorded()
    metas = [dict(r["meta_info"]) for r in rec["response"]]
    for m in metas:
        m["spec_accept_histogram"] = m.pop("spec_correct_drafts_histogram")
    old = meta_info.observe_meta_info(metas, rec["server_info"])
    new = meta_info.observe_meta_info([r["meta_info"] for r in rec["response"]], rec["server_info"])
    pd.testing.assert_frame_equal(old.per_position, new.per_position)


def test_a_server_without_the_histogram_gives_the_mean_and_says_which_version_adds_it():
    rec = recorded()
    metas = [{k: v for k, v in r["meta_info"].items() if "histogram" not in k} for r in rec["response"]]
    obs = meta_info.observe_meta_info(metas, {**rec["server_info"], "version": "0.5.8"})
    assert obs.per_position is None and obs.accept_length == pytest.approx(28 / 13)
    line = next(w for w in obs.warnings if "histogram" in w)
    assert "0.5.9" in line and "0.5.8" in line and "spec_correct_drafts_histogram" in line


def test_a_tree_gives_the_accepted_length_distribution_labelled_as_such():
    rec = recorded()
    info = {**rec["server_info"], "speculative_eagle_topk": 4, "speculative_num_draft_tokens": 8}
    obs = meta_info.observe_meta_info([r["meta_info"] for r in rec["response"]], info)
    assert obs.per_position is None and list(obs.distribution["steps"]) == [7, 2, 1, 3]
    assert any("tree" in w and "not per-position" in w for w in obs.warnings)


@pytest.mark.parametrize("bad, reason", [
    ([1, 2, 3, 4, 5], "longer than 3 drafts allow"), ([2, -1, 5], "negative count"),
    ([1.5, 2], "not a whole number"), ("1,2", "not a non-empty list"), ([0, 0], "no verify step"),
    ([1, 1], "does not sum to spec_verify_ct"), (None, "no histogram")])
def test_bad_histograms_are_counted_skips_never_tracebacks(bad, reason):
    rec = recorded()
    metas = [dict(r["meta_info"]) for r in rec["response"]]
    metas[1]["spec_correct_drafts_histogram"] = bad
    obs = meta_info.observe_meta_info(metas, rec["server_info"])
    np.testing.assert_allclose(obs.per_position["rate"], [4 / 6, 3 / 4, 3 / 3])  # request 0 alone
    assert any(f"1 of 2 requests left out" in w and reason in w for w in obs.warnings), obs.warnings


def test_histogram_from_counts_grows_the_list_like_sglang():
    assert meta_info.histogram_from_counts([3, 0, 0, 1]) == [2, 1, 0, 1]
    assert meta_info.histogram_from_counts([]) == []


# --------------------------------------------------------------------------- prompts files

def test_prompts_file_with_categories_counts_what_it_leaves_out(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text("\n".join([
        json.dumps({"category": "code", "text": "def f():"}),
        json.dumps({"category": "chat", "messages": [{"role": "user", "content": "hi"},
                                                     {"role": "assistant", "content": "hello"}]}),
        json.dumps({"text": "no category"}), json.dumps({"category": 5, "text": "x"}),
        json.dumps({"category": "code"}), "{not json", json.dumps({"category": "legal", "text": "y"})]))
    pset = byprompt.read_prompts(path, categories=("code", "chat"))
    assert pset.texts == ["def f():", "hi\nhello"] and pset.categories == ["code", "chat"]
    assert pset.skipped == Counter({"no category": 1, "unknown category 5 (not a name)": 1, "no text": 1,
                                    "not valid JSON": 1, "unknown category 'legal' (not one of code, chat)": 1})
    assert "5 line(s) of p.jsonl left out" in pset.skipped_line()
    with pytest.raises(byprompt.PromptsError, match="not found"):
        byprompt.read_prompts(tmp_path / "missing.jsonl")
    (tmp_path / "none.jsonl").write_text(json.dumps({"category": "code"}) + "\n")
    with pytest.raises(byprompt.PromptsError, match="no usable prompt.*no text: 1"):
        byprompt.read_prompts(tmp_path / "none.jsonl")


def test_breakdown_separates_only_what_the_intervals_separate():
    rng = np.random.default_rng(0)
    steps, requests = [], []
    for r in range(24):  # 12 short prompts accepting a lot, 12 long ones accepting little
        long = r >= 12
        acc = rng.binomial(3, 0.2 if long else 0.7, size=30)
        steps += [{"request": r, "accepted": int(a)} for a in acc]
        requests.append({"request": r, "prompt_tokens": 600 if long else 40, "category": "x" if r % 2 else "y"})
    found = byprompt.by_prompt(pd.DataFrame(steps), pd.DataFrame(requests), 3, "test")
    fall = byprompt.length_fall(found)
    assert fall is not None and fall["short"]["length"] == "40-40 tokens" and fall["long"]["length"] == "600-600 tokens"
    assert byprompt.category_gap(found) is None  # x and y both mix short and long... at matched lengths
    assert found.by_category["requests"].sum() == 12  # compared at matched lengths: the short ones


# --------------------------------------------------------------------------- the lab server

@pytest.fixture(scope="module")
def lab_server():
    from eagle3lab.engines.lab import frontend
    from eagle3lab.lab import load_lab

    lab = load_lab("ci")
    frontend.setup_logging(io.StringIO())
    state = frontend.load_state(str(lab.target_dir), str(lab.draft_dir("healthy")),
                                spec=SpecConfig(num_steps=3, topk=1, num_draft_tokens=4),
                                max_prompt_tokens=600, max_new_tokens=48)
    httpd = frontend.make_server(state, "127.0.0.1", 0)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    yield httpd.url, state, lab
    httpd.shutdown()
    httpd.server_close()


def test_lab_server_histogram_over_http_equals_the_engines_step_records(lab_server):
    from eagle3lab.serving import loadtest
    from eagle3lab.serving import server
    from eagle3lab.decoder.speculate import SamplingParams, SpecParams

    url, state, lab = lab_server
    prompts = lab.heldout_prompts(4, 32)
    result, obs = loadtest.measure(server.connect(url), prompts, max_new_tokens=32, progress=False)
    steps = []
    for r, p in enumerate(prompts):  # the engine itself, same prompts, greedy
        gen = state.engine.generate(p, 32, SpecParams.of((3, 1, 4)), SamplingParams(temperature=0.0))
        steps += [{"request": r, "accepted": s.accepted} for s in gen.steps]
        assert result.requests.at[r, "spec_histogram"] == meta_info.histogram_from_counts(
            s.accepted for s in gen.steps)
    expected = stats.per_position(pd.DataFrame(steps), k=3, conditional=True)
    pd.testing.assert_frame_equal(obs.per_position, expected)
    assert obs.source == "meta_info" and obs.n_steps == len(steps)


def test_lab_server_omits_the_histogram_without_speculation(lab_server):
    url, state, lab = lab_server
    spec, state.spec = state.spec, None
    try:
        out = state.run_one(lab.heldout_prompts(1, 32)[0], {"max_new_tokens": 4, "temperature": 0})
    finally:
        state.spec = spec
    assert "spec_correct_drafts_histogram" not in out["meta_info"]


def test_bench_url_prints_per_position_acceptance_and_the_breakdown(lab_server, tmp_path, capsys):
    from eagle3lab.experiments import byprompt_lab
    from eagle3lab.cli import main

    url, state, lab = lab_server
    pset, _ = byprompt_lab.control_prompts(lab, n=4)
    path = byprompt_lab.write_prompts(pset, tmp_path / "p.jsonl")
    code = main(["bench", "--url", url, "--prompts", str(path), "--num-prompts", "4", "--max-new-tokens", "16"])
    out = capsys.readouterr().out
    assert code == 0
    assert "per-position acceptance, conditional P(accept i | 1..i-1 accepted), from each request's " \
           "acceptance histogram (meta_info)" in out
    assert "position 3:" in out and "by prompt length:" in out and "by category:" in out


def test_doctor_names_the_length_fall_and_the_category_gap_on_the_lab_server(lab_server, tmp_path):
    """Measured claim: the lab's drafts, trained on 96-token sequences, accept less on 560-token
    prompts than on 32-token ones, and accept more on the domain-shift numbers than on held-out
    code; the control (code of one length, two arbitrary categories) shows neither."""
    from eagle3lab.experiments import byprompt_lab
    from eagle3lab.doctor import doctor
    from eagle3lab.doctor.prompt_check import CHECK

    url, state, lab = lab_server
    pset, _ = byprompt_lab.lab_prompts(lab)
    path = byprompt_lab.write_prompts(pset, tmp_path / "lab.jsonl")
    report = doctor(lab.draft_dir("healthy"), lab.target_dir, url=url, prompts=str(path), empirical=False)
    found = {f.cause: f for f in report.findings if f.check == CHECK}
    assert set(found) == {"context_length", "distribution_shift"}, report.facts.get("server", {}).get("by_prompt")
    fall = found["context_length"]
    assert "max_position_embeddings is 1024" in fall.evidence and "96-token sequences" in fall.evidence
    assert fall.data["long"]["hi"] < fall.data["short"]["lo"], fall.data
    gap = found["distribution_shift"].data
    assert (gap["low"]["category"], gap["high"]["category"]) == ("code", "numbers"), gap

    control, _ = byprompt_lab.control_prompts(lab)
    path = byprompt_lab.write_prompts(control, tmp_path / "control.jsonl")
    report = doctor(lab.draft_dir("healthy"), lab.target_dir, url=url, prompts=str(path), empirical=False)
    table = report.facts["server"]["by_prompt"]["by_category"]
    assert not [f for f in report.findings if f.check == CHECK], \
        f"negative control: no fall, no gap expected; by category {table}"
    assert any(c.check == CHECK and c.ran for c in report.checks)

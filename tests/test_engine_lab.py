"""The lab engine on the ci lab's trained target and drafts: losslessness, faults, bench."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import torch

from eagle3lab.decoder import FAULTS, SpecEngine, make_lab_engine, run_bench
from eagle3lab.decoder.labbench import bench_prompts, lab_train_seq_len
from eagle3lab.decoder.speculate import SamplingParams
from eagle3lab.spec import SpecParams


def ci_lab():
    """The built ci lab (built now if missing; a stale build is fine for engine tests)."""
    from eagle3lab.lab import load_lab
    from eagle3lab.lab.built import Lab
    from eagle3lab.paths import lab_dir

    path = lab_dir("ci")
    if (path / "manifest.json").is_file():
        return Lab(path)
    return load_lab("ci")


@pytest.fixture(scope="module")
def lab():
    return ci_lab()


@pytest.fixture(scope="module")
def healthy(lab):
    engine, _ = make_lab_engine(lab, [], max_seq_len=512)
    return engine


@pytest.fixture(scope="module")
def prompts(lab):
    return lab.heldout_prompts(20, 32)


@pytest.fixture(scope="module")
def plain_outputs(healthy, prompts):
    return [healthy.generate_plain(p, 40).output_ids for p in prompts]


# chain depths 1, 3, 6 and trees of SGLang shapes; (5, 1, 6) is what SGLang runs for --steps 5.
CONFIGS = [(1, 1, 2), (3, 1, 4), (6, 1, 7), (3, 2, 6), (4, 4, 12), (2, 8, 16)]


@pytest.mark.parametrize("spec", CONFIGS)
def test_greedy_speculative_output_is_token_identical(healthy, prompts, plain_outputs, spec):
    accepted = 0
    for prompt, plain in zip(prompts, plain_outputs):
        out = healthy.generate(prompt, 40, spec)
        assert out.output_ids == plain
        accepted += sum(s.accepted for s in out.steps)
    assert accepted > 0  # drafts were accepted (the KV rollback/compaction paths ran)


def test_trained_draft_beats_wrong_wiring(lab, prompts):
    healthy = run_bench(lab, (3, 1, 4), [], prompts=prompts[:6], max_new_tokens=48, progress=False)
    seed = run_bench(lab, (3, 1, 4), ["wiring-seed"], prompts=prompts[:6], max_new_tokens=48, progress=False)
    no_d2t = run_bench(lab, (3, 1, 4), ["no-d2t"], prompts=prompts[:6], max_new_tokens=48, progress=False)
    assert healthy.lossless and seed.lossless and no_d2t.lossless
    assert seed.plan.draft_name == "seed" and seed.boundaries == [2, lab.num_layers // 2, lab.num_layers - 3]
    assert healthy.accept_length > seed.accept_length
    assert healthy.accept_length > no_d2t.accept_length


@pytest.mark.parametrize("fault", sorted(f for f in FAULTS if FAULTS[f].only_lab is None))  # no-template: test_real_report
def test_every_fault_runs_and_stays_lossless(lab, fault):
    result = run_bench(lab, (3, 1, 4), [fault], n_prompts=1, prompt_tokens=24, max_new_tokens=24,
                       progress=False)
    assert result.lossless is True
    assert list(result.plan.faults) == [fault]
    row = FAULTS[fault]  # the plan does what the fault table says, nothing else
    for key, value in row.plan.items():
        assert getattr(result.plan, key) == (value(lab.num_layers) if callable(value) else value)
    assert result.plan.prompt_kinds == ([row.prompts] if row.prompts else [])
    assert result.accept_length == pytest.approx(1 + result.steps["accepted"].mean())


def test_fault_effects_are_wired(lab):
    n = lab.num_layers
    engine, plan = make_lab_engine(lab, ["embed-patch"], max_seq_len=256)
    assert plan.draft_name == "seed" and list(engine.boundaries) == [0, 2, n // 2]
    engine, _ = make_lab_engine(lab, ["normed-last"], max_seq_len=256)
    assert engine.normed_last
    engine, _ = make_lab_engine(lab, ["no-d2t"], max_seq_len=256)
    assert engine.draft.target_ids.tolist() == list(range(engine.draft.draft_vocab_size))
    q8, _ = make_lab_engine(lab, ["quant-int8"], max_seq_len=256)
    full, _ = make_lab_engine(lab, [], max_seq_len=256)
    w8, w = q8.target.layers[0].qkv, full.target.layers[0].qkv
    assert not torch.equal(w8, w) and (w8 - w).abs().max() < w.abs().max() / 100


def test_prompt_faults_change_the_prompts(lab):
    long = bench_prompts(lab, 2, 32, ["long-context"], long_tokens=4 * lab_train_seq_len(lab))
    assert all(len(p) == 4 * lab_train_seq_len(lab) for p in long)
    shifted = bench_prompts(lab, 3, 32, ["domain-shift"])
    text = lab.tokenizer.decode(shifted[0])
    assert "def " not in text and " the " in text


@pytest.mark.parametrize("greedy_draft", [False, True])
def test_sampling_at_temperature_runs_with_and_without_greedy_draft(lab, prompts, greedy_draft):
    engine, plan = make_lab_engine(lab, ["greedy-draft"] if greedy_draft else [], max_seq_len=256)
    assert engine.greedy_draft is greedy_draft and plan.greedy_draft is greedy_draft
    sp = SamplingParams(temperature=0.8, seed=3)
    a = engine.generate(prompts[0], 32, (3, 1, 4), sp)
    b = engine.generate(prompts[0], 32, (3, 1, 4), SamplingParams(temperature=0.8, seed=3))
    assert a.output_ids == b.output_ids  # seeded
    assert sum(s.accepted for s in a.steps) > 0  # drafts were accepted at T > 0
    tree = engine.generate(prompts[0], 32, (3, 2, 6), sp)
    assert len(tree.output_ids) == 32


def test_bench_result_frames_and_summary(lab, prompts):
    r = run_bench(lab, (3, 1, 4), [], prompts=prompts[:2], max_new_tokens=32, progress=False)
    s = r.summary()
    json.dumps(s)
    for key in ("accept_length", "per_position_unconditional", "tokens_per_s", "baseline_tokens_per_s", "speedup",
                "lossless", "c_draft_ms", "c_verify_ms", "predicted_speedup"):
        assert key in s
    steps = r.steps
    assert set(steps.columns) >= {"request", "step", "accepted", "accept_len", "drafted"}
    assert abs(r.accept_length - (1 + steps["accepted"].mean())) < 1e-9
    pp = r.per_position_unconditional
    assert len(pp) == 3 and all(a >= b for a, b in zip(pp, pp[1:]))
    tokens = r.tokens
    assert set(tokens["kind"]) <= {"prefill", "draft", "bonus", "replacement"}
    per_request = tokens.groupby("request").size()
    assert (per_request == 32).all()
    # every verify step ends in one bonus or replacement token (the last may be cut at 32)
    ends = tokens[tokens["kind"].isin(["bonus", "replacement"])].groupby("request").size()
    n_steps = r.steps.groupby("request").size()
    assert ((ends == n_steps) | (ends == n_steps - 1)).all()
    drafts = tokens[tokens["kind"] == "draft"]
    assert drafts["depth"].between(1, 3).all()


def test_cli_bench_prints_json_last(lab, monkeypatch, capsys):
    import eagle3lab.lab.labs as lab_module
    from eagle3lab.cli import main

    monkeypatch.setattr(lab_module, "load_lab", lambda preset, **kw: lab)
    rc = main(["lab", "bench", "--preset", "ci", "--steps", "2", "--topk", "1", "--draft-tokens", "8",
               "--prompts", "2", "--max-new-tokens", "16", "--json"])
    out, err = capsys.readouterr()
    assert rc == 0
    result = json.loads(out.strip().splitlines()[-1])
    assert result["num_draft_tokens"] == 3  # SGLang's topk=1 adjustment: steps + 1
    assert "adjusted" in err
    assert result["lossless"] is True and len(result["per_position_unconditional"]) == 2


def test_cli_bench_rejects_unknown_fault(capsys):
    from eagle3lab.cli import main

    assert main(["lab", "bench", "--preset", "ci", "--fault", "bogus"]) == 2
    assert "unknown fault" in capsys.readouterr().err


def test_engine_rejects_too_long_requests(healthy):
    with pytest.raises(ValueError, match="exceeds"):
        healthy.generate(list(range(10)), 10_000, (3, 1, 4))
    assert isinstance(healthy, SpecEngine)


def test_cli_bench_on_a_lab_folder(lab, capsys):
    from eagle3lab.cli import main

    rc = main(["lab", "bench", "--lab-dir", str(lab.root), "--steps", "2", "--prompts", "1",
               "--max-new-tokens", "16", "--json"])
    out, _ = capsys.readouterr()
    assert rc == 0 and json.loads(out.strip().splitlines()[-1])["lossless"] is True


def _wiring_benchmark():
    """benchmarks/wiring_sensitivity.py as a module (benchmarks/ is not a package)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "wiring_sensitivity.py"
    spec = importlib.util.spec_from_file_location("wiring_sensitivity", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_wiring_sensitivity_benchmark_runs_on_a_lab(lab, capsys):
    module = _wiring_benchmark()
    assert module.main(["--lab-dir", str(lab.root), "--prompts", "2", "--max-new-tokens", "16",
                        "--spec", "2/1/3"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    runs = {r["run"]: r for r in result["runs"]}
    assert len(runs) == 6 and all(r["lossless"] for r in runs.values())
    zeroed = runs["seed, hidden input zeroed"]
    trained = runs["seed as trained (embed-patch)"]["boundaries"]
    served = runs["seed as served (wiring-seed)"]["boundaries"]
    assert zeroed["boundaries"] == served and trained[0] == 0
    assert runs["seed, slot 0 miswired only"]["boundaries"] == served[:1] + trained[1:]
    assert runs["seed, slots 1+ miswired only"]["boundaries"] == trained[:1] + served[1:]
    assert [s["slot"] for s in result["slots"]] == [0, 1, 2]
    for s in result["slots"]:  # a slot reads the tensor it was trained on iff its cosine is 1
        assert (s["cosine"] == pytest.approx(1.0, abs=1e-5)) is (s["trained"] == s["served"]), s
        assert s["norm_ratio"] > 0
    assert all(s["fc_trained"] > 0 and s["fc_served"] > 0 for s in result["slots"])
    assert set(result["fc_output"]) == {"trained", "served"}


def test_wire_slots_as_trained_reproduces_the_embedding_patch(lab):
    """The benchmark's per-slot rewiring, given the trained boundaries, is the patched server."""
    from eagle3lab.decoder import run_bench
    from eagle3lab.decoder.faults import build_engine, plan_faults

    module = _wiring_benchmark()
    seed = lab.load_draft("seed")
    prompts = lab.heldout_prompts(2, 32)
    patched = run_bench(lab, (3, 1, 4), ["embed-patch"], prompts=prompts, max_new_tokens=24,
                        progress=False)
    engine = build_engine(lab.target, seed, plan_faults(["wiring-seed"], lab.num_layers))
    module.wire_slots(engine, list(seed.train_boundaries))
    rewired = run_bench(lab, (3, 1, 4), ["wiring-seed"], prompts=prompts, engine=engine,
                        max_new_tokens=24, progress=False)
    assert rewired.steps["accepted"].tolist() == patched.steps["accepted"].tolist()
    served = run_bench(lab, (3, 1, 4), ["wiring-seed"], prompts=prompts, max_new_tokens=24,
                       progress=False)
    assert served.steps["accepted"].tolist() != patched.steps["accepted"].tolist()


def _result_with_requests(accepted_by_request: dict[int, list[int]]):
    from eagle3lab.decoder.labbench import LabBenchResult
    from eagle3lab.decoder.faults import plan_faults

    rows = [{"request": r, "accepted": a, "accept_len": a + 1, "drafted": 3}
            for r, accepted in accepted_by_request.items() for a in accepted]
    return LabBenchResult(spec=SpecParams(3, 1, 4), plan=plan_faults([], 8), boundaries=[2, 4, 5],
                       temperature=0.0, steps=pd.DataFrame(rows), tokens=pd.DataFrame(),
                       requests=pd.DataFrame(), lossless=True)


def test_accept_length_interval_spans_the_prompts_spread():
    same = _result_with_requests({0: [1, 2], 1: [2, 1], 2: [1, 2]})
    assert same.accept_length_ci() == pytest.approx((2.5, 2.5))  # every prompt alike: no spread
    mixed = _result_with_requests({0: [0, 0, 0], 1: [3, 3, 3], 2: [0, 1, 0], 3: [2, 0, 1]})
    lo, hi = mixed.accept_length_ci()
    # per-prompt accept lengths are 1.0, 4.0, 1.33 and 2.0: four prompts this far apart allow
    # up to the most the depth allows, so the 95 % interval is cut at k + 1 = 4
    assert 1.0 < lo < mixed.accept_length < hi == 4.0
    assert mixed.accept_length_ci() == (lo, hi)  # deterministic: the same interval every time
    narrower = mixed.accept_length_ci(level=0.5)
    assert 1.0 < narrower[0] < mixed.accept_length < narrower[1] < 4.0
    assert _result_with_requests({0: [1, 2, 3]}).accept_length_ci() is None  # one prompt: no interval


def test_cli_bench_all_prompts_reports_an_interval(lab, monkeypatch, capsys):
    import eagle3lab.lab.labs as lab_module
    from eagle3lab.cli import main

    monkeypatch.setattr(lab_module, "load_lab", lambda preset, **kw: lab)
    rc = main(["lab", "bench", "--preset", "ci", "--steps", "2", "--prompts", "all",
               "--prompt-tokens", "32", "--max-new-tokens", "8", "--json"])
    out, _ = capsys.readouterr()
    result = json.loads(out.strip().splitlines()[-1])
    assert rc == 0 and result["prompts"] == len(lab.heldout_prompts(None, 32)) > 8
    lo, hi = result["accept_length_ci95"]
    assert lo <= result["accept_length"] <= hi
    assert "95% CI over prompts" in out
    with pytest.raises(SystemExit) as exit_info:  # argparse: usage line and exit 2
        main(["lab", "bench", "--preset", "ci", "--prompts", "many"])
    assert exit_info.value.code == 2 and "expected a number or 'all'" in capsys.readouterr().err


# the lab tokenizer's ids around a message in Qwen2's ChatML (byte-level BPE: the markup is plain text)
CHATML_PREFIX = "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
CHATML_SUFFIX = "<|im_end|>\n<|im_start|>assistant\n"


def test_chat_template_fault_changes_what_the_engine_feeds(lab, prompts):
    from eagle3lab.decoder.faults import FaultError, build_engine, plan_faults

    engine, plan = make_lab_engine(lab, ["chat-template"], max_seq_len=256)
    prefix, suffix = engine.prompt_template
    assert (len(prefix), len(suffix)) == (50, 25)
    assert lab.tokenizer.decode(prefix) == CHATML_PREFIX and lab.tokenizer.decode(suffix) == CHATML_SUFFIX
    gen = engine.generate(prompts[0], 8, (3, 1, 4))
    assert gen.prompt_ids == prefix + list(prompts[0]) + suffix
    assert engine.generate_plain(prompts[0], 8).prompt_ids == gen.prompt_ids
    plain, _ = make_lab_engine(lab, [], max_seq_len=256)
    assert plain.generate_plain(prompts[0], 8).prompt_ids == list(prompts[0])
    with pytest.raises(FaultError, match="needs the target's tokenizer"):
        build_engine(lab.target, None, plan_faults(["chat-template"], lab.num_layers))


def test_chat_template_fault_measured_on_the_same_prompts(lab, prompts):
    """The ci target, trained on raw Python source, answers ChatML with newlines only: every draft
    is accepted. The template acts through what the target writes, not through the draft."""
    raw = run_bench(lab, (3, 1, 4), [], prompts=prompts[:8], max_new_tokens=32, progress=False)
    chat = run_bench(lab, (3, 1, 4), ["chat-template"], prompts=prompts[:8], max_new_tokens=32, progress=False)
    assert raw.lossless and chat.lossless
    assert list(chat.requests["prompt_tokens"]) == [len(p) for p in prompts[:8]]  # the caller's prompts
    # Measured on the shipped ci lab (AVX-512, AVX2 and portable kernels alike): ChatML 4.0, every
    # draft accepted (32 tokens in 8 steps of 3 drafts + the bonus), newlines only; raw prompts
    # 256/127 = 2.02 [1.39, 3.66] over the 8 prompts. The claims, not the decimals: the raw
    # interval stays below "all accepted", the ChatML figure lies above the raw interval, and the
    # target answers ChatML with (almost) nothing but newlines.
    lo, hi = raw.accept_length_ci()
    margin = f"raw {raw.accept_length:.3f} [{lo:.2f}, {hi:.2f}], chat-template {chat.accept_length:.3f}"
    assert raw.accept_length < hi < 4.0, margin
    assert hi < chat.accept_length <= 4.0, margin
    newlines = float((chat.tokens["text"] == "\n").mean())
    assert newlines >= 0.9, f"{newlines:.0%} of the ChatML answers' tokens are newlines"

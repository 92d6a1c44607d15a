"""Our SGLang rules against the real thing: SGLang 0.5.23's own ServerArgs resolver.

One subprocess resolves the whole grid (steps x topk x draft tokens, None included) for two
target architectures plus page-size/backend/batch variants; every effective value, every
refusal and every speculative warning (SGLang's wording, in order) must agree.
"""

import itertools

import pytest

from eagle3lab.engines.effective import compare_with_sglang, outcome, resolve_with_sglang
from eagle3lab.engines.sglang.sglang_rules import W_ADJUST
from eagle3lab.spec import SpecConfig

STEPS = [None, 1, 2, 3, 5, 8]
TOPK = [None, 1, 2, 4, 8]
DRAFT = [None, 1, 2, 4, 8, 16, 64]
ARCHS = ["LlamaForCausalLM", "DeepseekV3ForCausalLM"]


def _grid():
    cases = []
    for arch in ARCHS:
        for steps, topk, draft in itertools.product(STEPS, TOPK, DRAFT):
            cases.append((arch, SpecConfig(num_steps=steps, topk=topk, num_draft_tokens=draft,
                                           device="cpu")))
    extras = [
        dict(num_steps=3, topk=4, num_draft_tokens=8, page_size=16),
        dict(num_steps=3, topk=4, num_draft_tokens=8, page_size=16, attention_backend="triton"),
        dict(num_steps=3, topk=4, num_draft_tokens=8, page_size=16, attention_backend="flashinfer"),
        dict(num_steps=3, topk=1, num_draft_tokens=8, page_size=16),
        dict(num_steps=3, topk=2, num_draft_tokens=100, max_running_requests=8, cuda_graph_max_bs=4),
        dict(num_steps=2, topk=1, num_draft_tokens=9, disable_overlap_schedule=True),
        dict(num_steps=1, topk=1, num_draft_tokens=16, device="cuda"),
        dict(device="cuda"),
        dict(num_steps=4, topk=2, num_draft_tokens=6, device="cuda", max_running_requests=4),
        dict(algorithm="EAGLE", num_steps=2, topk=1, num_draft_tokens=5),
        dict(algorithm="NEXTN"),
    ]
    for arch in ARCHS + ["Qwen2ForCausalLM"]:
        for kw in extras:
            cases.append((arch, SpecConfig(**{"device": "cpu", **kw})))
    return cases


@pytest.fixture(scope="module")
def grid():
    cases = _grid()
    real = resolve_with_sglang([spec for _, spec in cases], version="0.5.23",
                               arch=[arch for arch, _ in cases])
    ours = [spec.resolve(engine="sglang", version="0.5.23", arch=arch) for arch, spec in cases]
    return cases, ours, real


@pytest.mark.slow
def test_rules_agree_with_sglang_resolver_over_the_grid(grid):
    cases, ours, real = grid
    assert len(cases) >= 150
    assert real[0].version == "0.5.23", "the cross-check is pinned to sglang 0.5.23"
    mismatches = [(arch, spec, outcome(o), outcome(r))
                  for (arch, spec), o, r in zip(cases, ours, real) if outcome(o) != outcome(r)]
    agree = len(cases) - len(mismatches)
    print(f"agreement with SGLang 0.5.23: {agree}/{len(cases)}")
    assert not mismatches, "\n".join(map(str, mismatches[:5]))


@pytest.mark.slow
def test_grid_exercises_adjustments_refusals_and_auto_choice(grid):
    """The agreement above means something only if the grid hits every rule."""
    cases, _, real = grid
    adjusted = sum(W_ADJUST in r.warnings for r in real)
    refused = {r.error.split(":")[0] for r in real if r.error}
    autos = {(arch, r.triple) for (arch, spec), r in zip(cases, real)
             if spec.num_steps is None and not r.error}
    assert adjusted >= 50
    assert {"AssertionError", "TypeError", "ValueError"} <= refused
    assert ("LlamaForCausalLM", (5, 4, 8)) in autos
    assert ("DeepseekV3ForCausalLM", (3, 1, 4)) in autos


@pytest.mark.slow
def test_seed_bug_in_real_sglang(grid):
    cases, _, real = grid
    for (arch, spec), r in zip(cases, real):
        if (spec.num_steps, spec.topk, spec.num_draft_tokens) == (1, 1, 16):
            assert r.num_draft_tokens == 2 and W_ADJUST in r.warnings
            assert r.changed == {"num_draft_tokens": (16, 2)}
            assert "draft-tokens-adjusted" in {f.code for f in r.findings}



@pytest.mark.slow
def test_compare_with_sglang_frame(grid):
    cases, _, real = grid
    frame = compare_with_sglang([spec for _, spec in cases], [arch for arch, _ in cases],
                                real=real)
    assert len(frame) == len(cases) and frame["agree"].all()
    seed = frame[frame["asked"] == (1, 1, 16)]
    assert len(seed) >= 2 and all(ours == (1, 1, 2) for ours in seed["ours"])
    assert frame["sglang"].astype(str).str.startswith("ValueError").any()

"""The explorers' sparse-MoE step cost (cost.moecurve) is the architecture-aware model's bound
(archcost.StepModel) for every shipped target, and says what it cannot take."""

import pytest

from eagle3lab.cost import costchecks, moecurve
from eagle3lab.cost.archcost import StepModel, expected_union, verify_ratio
from eagle3lab.cost.modelshape import ConfigError
from eagle3lab.cost.moecurve import MoeCurve


@pytest.mark.parametrize("name", costchecks.TARGETS)
def test_a_presets_step_cost_is_the_models_bound_at_every_chain(name):
    model = StepModel(costchecks.target(name), costchecks.target_default_draft(name))
    exact = moecurve.presets(exact=True)[name]
    for k in range(1, 8):
        parts = model.parts(k)
        assert float(exact.verify_cost(k)) == pytest.approx(parts.verify_cost, rel=1e-12), (name, k)
        assert float(exact.step_cost(k)) == pytest.approx(parts.step_cost, rel=1e-12), (name, k)
    # the explorers' inputs show 3 decimals (draft step, expert share): what that rounding moves
    shown = moecurve.presets()[name]
    worst = max(abs(float(shown.step_cost(k)) - model.parts(k).step_cost) for k in range(1, 11))
    assert worst < 0.01, f"{name}: the rounded inputs move the step cost by {worst:.4f} plain steps (margin 0.01)"


def test_kimi_k25_in_the_explorer():
    kimi = moecurve.presets()["kimi-k2.5"]
    assert (kimi.experts, kimi.active, kimi.expert_share, kimi.draft) == (384, 8, 0.36, 0.06)
    assert float(kimi.experts_read(5)) == pytest.approx(384 * (1 - (1 - 8 / 384) ** 6))  # 45.6 of 384
    assert float(kimi.verify_cost(5)) == pytest.approx(0.64 + 0.36 * expected_union(384, 8, 6) / 8, rel=1e-15)
    assert float(kimi.step_cost(5)) == pytest.approx(kimi.fc + 0.3 + float(kimi.verify_cost(5)), rel=1e-15)
    assert float(kimi.speedup(3.0, 5)) == pytest.approx(3.0 / float(kimi.step_cost(5)))
    assert float(kimi.verify_cost(0)) == pytest.approx(1.0, abs=1e-15) and kimi.kind == "decode" and kimi.tokens is None
    assert moecurve.preset_label(kimi) == "kimi-k2.5: 384 experts, 8 active, x 0.360"
    dense = moecurve.presets()["llama-3.1-8b"]
    assert dense.experts == 0 and [float(v) for v in dense.verify_cost([1, 5, 10])] == [1.0, 1.0, 1.0]
    assert "dense" in moecurve.preset_label(dense)


def test_locality_zero_reads_one_expert_set():
    curve = MoeCurve(draft=0.05, experts=128, active=8, expert_share=0.6, locality=0.0)
    assert [float(v) for v in curve.verify_cost([1, 4, 9])] == [1.0, 1.0, 1.0]
    half = MoeCurve(draft=0.05, experts=128, active=8, expert_share=0.6, locality=0.5)
    assert float(half.verify_cost(4)) == verify_ratio(5, 128, 8, 0.6, 0.5)
    assert 1.0 < float(half.verify_cost(4)) < verify_ratio(5, 128, 8, 0.6)


@pytest.mark.parametrize("kwargs, words", [(dict(experts=8, active=9), "within 1 and the routed experts (8)"),
                                           (dict(experts=8, active=0), "within 1 and the routed experts"),
                                           (dict(expert_share=1.2), "within 0 and 1"),
                                           (dict(locality=-0.1), "within 0 and 1")])
def test_a_shape_it_cannot_take_is_a_one_line_error(kwargs, words):
    shape = dict(draft=0.05, experts=64, active=4, expert_share=0.5) | kwargs
    with pytest.raises(ConfigError, match=words.replace("(", r"\(").replace(")", r"\)")):
        MoeCurve(**shape)

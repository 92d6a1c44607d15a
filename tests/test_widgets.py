"""The acceptance explorers react to their inputs the way a user moving them would see, on the
cost model the lab measures (costfit.CostCurve), with fixed axes and the measured point."""

import json
import re

import numpy as np
import pandas as pd
import pytest

from eagle3lab.acceptance import predict as P
from eagle3lab.acceptance import stats as S
from eagle3lab.viz import widgets
from eagle3lab.cost.costfit import CostCurve
from eagle3lab.viz.widgets import AcceptanceExplorer

LAB = CostCurve(draft=0.057, verify=0.938, growth=0.165, fixed=0.104, prefill_base=1.905, prefill_spec=2.181,
                tokens=128, source="test")
MEASURED = {"depth": 5, "accept_length": S.accept_length_from_rates([0.82, 0.10, 0.03, 0.0, 0.0]),
            "speedup": 0.95, "interval": [0.76, 1.20]}


def controls(explorer):
    found = {c.description: c for c in explorer.widget.children if hasattr(c, "description")}
    found.update({c.description: c for c in explorer.positions_box.children})
    return found


def test_controls_have_stable_descriptions_and_update_continuously():
    explorer = AcceptanceExplorer()
    names = controls(explorer)
    for name in ("a", "depth", "draft step", "verify pass", "verify growth", "model", "rates", "p1"):
        assert name in names
    assert explorer.a.continuous_update and explorer.depth.continuous_update
    assert [s.description for s in explorer.position_sliders][:3] == ["p1", "p2", "p3"]


def test_moving_a_changes_numbers_plot_and_summary_on_fixed_axes():
    explorer = AcceptanceExplorer(a=0.6, depth=4, curve=LAB)
    before_png, before_text = explorer.image.value, explorer.summary.value
    limits = [ax.get_ylim() for ax in explorer.figure.axes]
    assert explorer.state()["accept_length"] == pytest.approx(P.expected_accept_length(0.6, 4))
    explorer.a.value = 0.9
    assert explorer.state()["accept_length"] == pytest.approx(P.expected_accept_length(0.9, 4))
    assert explorer.image.value != before_png and explorer.summary.value != before_text
    assert [ax.get_ylim() for ax in explorer.figure.axes] == limits  # the axes do not follow the slider
    assert [int(t) for t in explorer.figure.axes[0].get_xticks()] == list(range(11))
    curve = explorer.figure.axes[0].lines[0].get_ydata()
    assert curve[4] == pytest.approx(P.expected_accept_length(0.9, 4))


def test_the_speedup_is_the_cost_curves_and_the_costs_move_it():
    explorer = AcceptanceExplorer(a=0.8, depth=3, curve=LAB)
    L = P.expected_accept_length(0.8, 3)
    assert explorer.state()["speedup"] == pytest.approx(float(LAB.speedup(L, 3)))
    assert explorer.state()["step_cost"] == pytest.approx(0.104 + 0.057 * 3 + 0.938 + 0.165 * 2)
    explorer.verify.value = 2.0
    dear = explorer.state()
    assert dear["step_cost"] == pytest.approx(0.104 + 0.057 * 3 + 2.0 + 0.165 * 2)
    assert dear["decode_speedup"] == pytest.approx(L / dear["step_cost"])
    explorer.cost_ratio.value = 0.0
    explorer.depth.value = 1
    assert explorer.state()["depth"] == 1


def test_the_old_cost_ratio_alone_prices_a_verify_pass_at_one_target_step():
    explorer = AcceptanceExplorer(a=0.8, depth=3, cost_ratio=0.5)
    assert explorer.state()["speedup"] == pytest.approx(P.expected_accept_length(0.8, 3) / 2.5)
    assert widgets.speedup(2.0, 3, 0.5) == pytest.approx(2.0 / 2.5)


def test_rates_typed_in_set_the_position_sliders():
    explorer = AcceptanceExplorer(rates=[0.7, 0.2, 0.2], depth=3, max_depth=6, curve=LAB)
    assert explorer.model.value == "per-position"
    assert explorer.state()["accept_length"] == pytest.approx(S.accept_length_from_rates([0.7, 0.2, 0.2]))
    explorer.rates_text.value = "0.9, 0.8 0.5"
    assert [s.value for s in explorer.position_sliders] == [0.9, 0.8, 0.5, 0.0, 0.0, 0.0]
    assert explorer.state()["accept_length"] == pytest.approx(S.accept_length_from_rates([0.9, 0.8, 0.5]))
    explorer.rates_text.value = "0.9, lots"
    assert "not numbers" in explorer.summary.value
    explorer.model.value = "i.i.d."
    assert explorer.positions_box.layout.display == "none"
    with pytest.raises(ValueError, match="within 0 and 1"):
        widgets.parse_rates("0.5 1.5")


def test_nan_rates_and_positions_beyond_the_rates_add_nothing():
    explorer = AcceptanceExplorer(rates=[0.8, float("nan"), 0.5], depth=3, max_depth=4)
    assert [s.value for s in explorer.position_sliders] == [0.8, 0.0, 0.5, 0.0]
    assert widgets.chain_rates([0.8, 0.5], a=0.7, max_depth=4) == [0.8, 0.5, 0.0, 0.0]
    assert widgets.chain_rates(None, a=0.7, max_depth=2) == [0.7, 0.7]


def test_the_value_at_the_measured_configuration_is_compared_with_the_measurement():
    rates = [0.82, 0.10, 0.03, 0.0, 0.0]
    explorer = AcceptanceExplorer(rates=rates, depth=5, curve=LAB, measured=MEASURED)
    model = explorer.state()["speedup"]
    assert f"Model {model:.2f}× at depth 5, measured 0.95× [0.76, 1.20]: inside the interval." in explorer.summary.value
    ax = explorer.figure.axes[1]
    assert "measured, 95 % interval" in ax.get_legend_handles_labels()[1]
    explorer.verify.value = 3.0
    assert "is for the lab's own costs: you changed it" in explorer.summary.value
    assert widgets.measured_verdict(1.5, MEASURED).endswith(
        "outside the interval: this run's own step costs differ from the costs calibrated on the report's "
        "configurations.")
    assert "the acceptance here gives 3.00" in widgets.measured_verdict(1.0, MEASURED, accept_length=3.0)
    assert widgets.measured_verdict(1.0, None) == "No speed-up was measured at this configuration here."


def test_in_page_explorer_is_self_contained_and_starts_from_the_python_model():
    x = widgets.explorer_html([0.8, 0.5, float("nan")], depth=3, curve=LAB, measured=MEASURED)
    html = x.html()
    assert "<script>" in html and "src=" not in html and "http" not in html
    data = json.loads(re.search(r"var D = (\{.*?\});\n", html).group(1))
    assert data["accept_length"][:4] == pytest.approx([1.0, 1.8, 2.2, 2.2])  # a NaN position adds nothing
    assert data["speedup"][3] == pytest.approx(float(LAB.speedup(2.2, 3)))
    assert data["cost"]["draft"] == 0.057 and data["measured"] == MEASURED
    assert data["limits"]["speedup"] >= 2.0 and data["limits"]["length"] <= 11  # fixed, set once
    assert 'value="0.80, 0.50, 0.00' in html and 'data-role="verify"' in html
    old = widgets.explorer_html([0.8, 0.5], depth=2, cost_ratio=0.05)
    assert "assumed: a verify pass costs one target step" in old.html()
    observed = pd.DataFrame({"depth": [2], "accept_length": [1.8]})
    assert widgets.explorer_html([0.8], depth=2, observed=observed).measured["accept_length"] == 1.8


def test_curve_frame_is_depth_zero_then_the_model():
    frame = widgets.curve_frame([0.5, 0.5], LAB)
    assert list(frame["depth"]) == [0, 1, 2] and frame.loc[0, "speedup"] == 1.0
    assert frame.loc[2, "accept_length"] == 1.75
    assert frame.loc[2, "decode_speedup"] == pytest.approx(1.75 / float(LAB.step_cost(2)))
    assert np.isclose(frame.loc[1, "speedup"], float(LAB.speedup(1.5, 1)))


def test_a_notebooks_curve_and_point_come_from_the_store_else_from_the_run(tmp_path):
    from types import SimpleNamespace as NS

    from test_costfit import TRUE, _store

    path = tmp_path / "measurements.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in _store()) + "\n")
    curve = widgets.lab_curve(store=path)
    assert curve.step_cost(5) == pytest.approx(float(TRUE.step_cost(5))) and curve.tokens == TRUE.tokens
    run = NS(accept_length=4.0, observation=NS(costs={"draft_over_target": 0.07, "verify_over_plain": 1.4}))
    point = widgets.measured_point(run, "healthy", (5, 1, 6), store=path)
    assert point["accept_length"] == 4.0 and point["speedup"] > 1 and len(point["interval"]) == 2
    alone = widgets.lab_curve(run=run, store=tmp_path / "none.jsonl")
    assert (alone.draft, alone.verify, alone.growth, alone.tokens) == (0.07, 1.4, 0.0, None)
    assert widgets.measured_point(run, "healthy", (5, 1, 6), store=tmp_path / "none.jsonl")["speedup"] is None


def test_the_target_choice_draws_a_sparse_moe_shape_in_the_bound():
    from eagle3lab.cost import moecurve

    explorer = AcceptanceExplorer(rates=[0.82, 0.10, 0.03, 0.0, 0.0], depth=5, curve=LAB, measured=MEASURED)
    names = controls(explorer)
    names.update({c.description: c for c in explorer.moe_box.children if hasattr(c, "description")})
    names.update({c.description: c for c in explorer.moe_box.children[1].children})
    for name in ("target", "preset", "experts E", "active K", "expert share x", "locality"):
        assert name in names
    lab, limits = explorer.state(), [ax.get_ylim() for ax in explorer.figure.axes]
    assert lab["target"] == "lab" and explorer.moe_box.layout.display == "none"
    explorer.target.value = "moe"  # Kimi-K2.5's shape until another is chosen
    kimi = moecurve.presets()["kimi-k2.5"]
    got = explorer.state()
    assert explorer.cost_ratio.value == kimi.draft and explorer.verify.layout.display == "none"
    assert got["step_cost"] == pytest.approx(float(kimi.step_cost(5)), rel=1e-12)
    assert got["verify_cost"] == pytest.approx(float(kimi.verify_cost(5)), rel=1e-12)
    assert got["experts_read"] == pytest.approx(float(kimi.experts_read(5)))
    assert got["speedup"] == pytest.approx(lab["accept_length"] / float(kimi.step_cost(5)))
    assert got["speedup"] < lab["speedup"] and got["step_cost"] > lab["step_cost"]
    assert "bandwidth-bound limit" in explorer.summary.value and "not a measurement" in explorer.summary.value
    assert "is for the lab's own target: you changed it." in explorer.summary.value
    assert explorer.figure.axes[2].get_title().endswith("(bandwidth-bound bound)")
    explorer.preset.value = "qwen3-30b-a3b"
    qwen = moecurve.presets()["qwen3-30b-a3b"]
    assert (explorer.experts.value, explorer.active.value, explorer.share.value) == (128, 8, qwen.expert_share)
    assert explorer.state()["step_cost"] == pytest.approx(float(qwen.step_cost(5)), rel=1e-12)
    assert [ax.get_ylim() for ax in explorer.figure.axes] == limits  # the axes do not follow the target
    explorer.experts.value = 64  # a shape typed in
    assert explorer.preset.value == "custom"
    typed = moecurve.MoeCurve(draft=qwen.draft, experts=64, active=8, expert_share=qwen.expert_share, fc=qwen.fc)
    assert explorer.state()["step_cost"] == pytest.approx(float(typed.step_cost(5)), rel=1e-12)
    explorer.active.value = 100
    assert "within 1 and the routed experts (64)" in explorer.summary.value and "the last valid shape" in explorer.summary.value
    assert explorer.state()["step_cost"] == pytest.approx(float(typed.step_cost(5)), rel=1e-12)
    explorer.target.value = "lab"
    assert explorer.cost_ratio.value == LAB.draft and explorer.state() == lab


def test_an_explorer_can_start_on_a_shape_and_names_the_ones_it_has():
    from eagle3lab.cost import moecurve
    from eagle3lab.cost.modelshape import ConfigError

    explorer = AcceptanceExplorer(a=0.7, depth=3, curve=LAB, target="mixtral-8x7b-v0.1")
    mixtral = moecurve.presets()["mixtral-8x7b-v0.1"]
    assert explorer.state()["step_cost"] == pytest.approx(float(mixtral.step_cost(3)), rel=1e-12)
    html = widgets.explorer_html(depth=3, curve=LAB, target="mixtral-8x7b-v0.1")
    assert html.curves["target0"] == "mixtral-8x7b-v0.1" and "bandwidth-bound limit" in html.html()
    assert html.curves["step_cost"][3] == pytest.approx(float(mixtral.step_cost(3)), rel=1e-12)
    with pytest.raises(ConfigError, match="choose 'lab' or one of llama-3.1-8b, qwen3-30b-a3b"):
        widgets.explorer_html(target="kimi")

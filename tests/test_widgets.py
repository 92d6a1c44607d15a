"""The acceptance explorer reacts to its sliders the way a user moving them would see."""

import pandas as pd
import pytest

from eagle3lab import predict as P, stats as S
from eagle3lab.widgets import AcceptanceExplorer


def controls(explorer):
    return {c.description: c for c in explorer.widget.children if hasattr(c, "description")}


def test_sliders_have_stable_descriptions_and_update_continuously():
    explorer = AcceptanceExplorer()
    names = controls(explorer)
    for name in ("a", "depth", "cost ratio", "model"):
        assert name in names
    assert explorer.a.continuous_update and explorer.depth.continuous_update
    assert [s.description for s in explorer.position_sliders][:3] == ["p1", "p2", "p3"]


def test_moving_a_changes_numbers_plot_and_summary():
    explorer = AcceptanceExplorer(a=0.6, depth=4, cost_ratio=0.05)
    before_png, before_text = explorer.image.value, explorer.summary.value
    assert explorer.state()["accept_length"] == pytest.approx(P.expected_accept_length(0.6, 4))
    explorer.a.value = 0.9
    assert explorer.state()["accept_length"] == pytest.approx(P.expected_accept_length(0.9, 4))
    assert explorer.image.value != before_png
    assert explorer.summary.value != before_text
    curve = explorer.figure.axes[0].lines[0].get_ydata()
    assert curve[4] == pytest.approx(P.expected_accept_length(0.9, 4))


def test_cost_ratio_and_depth_move_the_speedup():
    explorer = AcceptanceExplorer(a=0.8, depth=3, cost_ratio=0.0)
    assert explorer.state()["speedup"] == pytest.approx(explorer.state()["accept_length"])
    explorer.cost_ratio.value = 0.5
    slow = explorer.state()["speedup"]
    assert slow == pytest.approx(P.expected_accept_length(0.8, 3) / 2.5)
    assert explorer.state()["best_depth"] < 10
    explorer.depth.value = 1
    assert explorer.state()["depth"] == 1 and explorer.state()["speedup"] != slow


def test_per_position_mode_uses_position_sliders_and_observed_points():
    observed = pd.DataFrame({"depth": [2, 5], "accept_length": [1.8, 1.9]})
    explorer = AcceptanceExplorer(rates=[0.7, 0.2, 0.2], depth=3, observed=observed, max_depth=6)
    assert explorer.model.value == "per-position"
    assert explorer.state()["accept_length"] == pytest.approx(
        S.accept_length_from_rates([0.7, 0.2, 0.2]))
    explorer.position_sliders[1].value = 0.9
    assert explorer.state()["accept_length"] == pytest.approx(
        S.accept_length_from_rates([0.7, 0.9, 0.2]))
    assert "observed" in explorer.figure.axes[0].get_legend_handles_labels()[1]
    explorer.model.value = "i.i.d."
    assert explorer.positions_box.layout.display == "none"


def test_nan_rates_become_zero_so_sliders_can_show_them():
    from eagle3lab.widgets import AcceptanceExplorer

    explorer = AcceptanceExplorer(rates=[0.8, float("nan"), 0.5], max_depth=3)
    values = [s.value for s in explorer.position_sliders]
    assert values == [0.8, 0.0, 0.5]


def test_in_page_explorer_is_self_contained_and_its_curves_follow_the_cost():
    from eagle3lab import widgets

    x = widgets.explorer_html([0.8, 0.5, float("nan")], depth=3, cost_ratio=0.05)
    html = x.html()
    assert "<script>" in html and "src=" not in html and "http" not in html
    curves = x.curves
    assert curves["accept_length"][:4] == pytest.approx([1.0, 1.8, 2.2, 2.2])  # NaN position adds nothing
    cheap, dear = curves["speedup"][0], curves["speedup"][-1]
    assert max(range(len(cheap)), key=cheap.__getitem__) > max(range(len(dear)), key=dear.__getitem__)

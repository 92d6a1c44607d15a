"""The in-page explorer in a real browser (Debian's chromium, Playwright; no kernel, no network):
its JavaScript computes what the Python model computes for every input a reader can change, its
axes have ticks and stay fixed, and it compares its value at the measured configuration with the
measurement."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from eagle3lab.acceptance import predict
from eagle3lab.cost import moecurve
from eagle3lab.cost.archcost import verify_ratio
from eagle3lab.report import render as report
from eagle3lab.viz import widgets
from eagle3lab.cost.costfit import CostCurve

pytestmark = [pytest.mark.browser]

LAB = CostCurve(draft=0.057, verify=0.938, growth=0.165, fixed=0.104, prefill_base=1.905, prefill_spec=2.181,
                tokens=128, source="test")
RATES = [0.82, 0.10, 0.03, 0.0, 0.0]
L5 = 1 + 0.82 + 0.82 * 0.10 + 0.82 * 0.10 * 0.03
MEASURED = {"depth": 5, "accept_length": L5, "speedup": 0.95, "interval": [0.76, 1.20]}


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    from playwright.sync_api import sync_playwright

    assert Path(report.CHROMIUM).exists(), "chromium missing: apt-get install chromium"
    html = tmp_path_factory.mktemp("explorer") / "explorer.html"
    body = widgets.explorer_html(RATES, depth=5, curve=LAB, measured=MEASURED).html()
    html.write_text(f"<!doctype html><html><head><meta charset='utf-8'></head><body>{body}</body></html>",
                    encoding="utf-8")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=report.CHROMIUM, args=report.CHROMIUM_ARGS)
        try:
            pg = browser.new_page(viewport={"width": 1000, "height": 900})
            pg.route("http*://**", lambda route: route.abort())
            pg.goto(html.resolve().as_uri(), wait_until="load")
            yield pg
        finally:
            browser.close()


def role(page, name):
    return page.locator(f'.eagle3lab-explorer [data-role="{name}"]').first


def set_value(page, name, value):
    """Type a value as a reader would, and fire the events the page listens to."""
    el = role(page, name)
    el.evaluate("(e, v) => { e.value = v; e.dispatchEvent(new Event('input')); e.dispatchEvent(new Event('change')); }",
                str(value))


def reading(page):
    return {r: role(page, r).inner_text() for r in ("accept-length", "speedup", "step-cost", "best-depth",
                                                     "verdict", "depth-value")}


def python_speedup(rates, k, curve=LAB):
    lengths = predict.accept_length_curve(rates)
    return float(curve.speedup(lengths[k - 1], k)), float(lengths[k - 1])


def test_the_page_starts_at_the_measured_configuration_and_says_how_it_compares(page):
    got = reading(page)
    model, length = python_speedup(RATES, 5)
    assert got["accept-length"] == f"{length:.2f}" == f"{L5:.2f}"  # the measured accept length, from its rates
    assert got["speedup"] == f"{model:.2f}"
    assert got["step-cost"] == f"{float(LAB.step_cost(5)):.2f}"
    inside = 0.76 <= model <= 1.20
    assert got["verdict"] == (f"Model {model:.2f}× at depth 5, measured 0.95× [0.76, 1.20]: "
                              + ("inside the interval." if inside else "outside the interval: this run's own step "
                                 "costs differ from the costs calibrated on the report's configurations."))


def test_axes_have_ticks_and_stay_fixed_while_the_inputs_move(page):
    ticks = lambda axis: [t.text_content() for t in page.locator(f'[data-role="{axis}"]').all()]  # noqa: E731
    x = ticks("speedup-xtick")
    y_speed, y_length = ticks("speedup-ytick"), ticks("length-ytick")
    assert x == [str(d) for d in range(11)] and len(y_speed) >= 4 and y_speed[0] == "0"
    set_value(page, "rates", "0.95, 0.95, 0.95, 0.95, 0.95, 0.95")
    set_value(page, "depth", 9)
    set_value(page, "cost", 0.01)
    assert ticks("speedup-ytick") == y_speed and ticks("length-ytick") == y_length
    assert role(page, "depth-value").inner_text() == "9"
    set_value(page, "rates", ", ".join(map(str, RATES)))
    set_value(page, "cost", f"{LAB.draft:.3f}")
    set_value(page, "depth", 5)


@pytest.mark.parametrize("rates", [[0.9, 0.8, 0.7], [0.5] * 10, [0.3, 0.0, 1.0, 1.0]])
def test_typed_rates_give_what_python_gives_at_every_depth(page, rates):
    set_value(page, "rates", ", ".join(map(str, rates)))
    for k in (1, 3, 7):
        set_value(page, "depth", k)
        padded = (rates + [0.0] * 10)[:10]
        model, length = python_speedup(padded, k)
        got = reading(page)
        assert (got["accept-length"], got["speedup"]) == (f"{length:.2f}", f"{model:.2f}"), (rates, k)
    set_value(page, "depth", 5)
    verdict = reading(page)["verdict"]
    assert "is for the measured accept length" in verdict and "the acceptance here gives" in verdict
    set_value(page, "rates", ", ".join(map(str, RATES)))


def test_an_iid_rate_and_the_costs_are_inputs_too(page):
    set_value(page, "mode", "iid")
    set_value(page, "a", 0.75)
    set_value(page, "depth", 5)
    length = predict.expected_accept_length(0.75, 5)
    assert reading(page)["accept-length"] == f"{length:.2f}"  # 3.29: the incident's "about 3.3"
    set_value(page, "verify", 2.0)
    set_value(page, "growth", 0.0)
    curve = CostCurve(draft=LAB.draft, verify=2.0, growth=0.0, fixed=LAB.fixed, prefill_base=LAB.prefill_base,
                      prefill_spec=LAB.prefill_spec, tokens=LAB.tokens)
    got = reading(page)
    assert got["speedup"] == f"{float(curve.speedup(length, 5)):.2f}"
    assert got["step-cost"] == f"{float(curve.step_cost(5)):.2f}"
    assert "is for the lab's own costs: you changed it" in got["verdict"]
    set_value(page, "mode", "per-position")
    set_value(page, "rates", "0.9, oops")
    assert "not numbers" in role(page, "error").inner_text()
    assert "aria-label" in role(page, "plot").evaluate("e => e.outerHTML")


# --------------------------------------------------------------------------- the target choice

def exact(page, name):
    """The number behind a reading, as the page computed it (its `data-value`, full precision)."""
    return float(role(page, name).get_attribute("data-value"))


def set_shape(page, preset=None, experts=None, active=None, share=None, locality=1.0):
    set_value(page, "target", "moe")
    if preset:
        set_value(page, "preset", preset)
    for name, value in (("experts", experts), ("active", active), ("share", share)):
        if value is not None:
            set_value(page, name, value)
    set_value(page, "locality", locality)


def back_to_the_lab(page):
    set_value(page, "locality", 1.0)
    set_value(page, "preset", "kimi-k2.5")
    set_value(page, "target", "lab")
    set_value(page, "rates", ", ".join(map(str, RATES)))
    set_value(page, "depth", 5)


SHAPES = [  # (preset, E, K, x, locality): three shipped shapes, one typed, a dense one typed
    ("kimi-k2.5", None, None, None, 1.0), ("qwen3-30b-a3b", None, None, None, 1.0),
    ("mixtral-8x7b-v0.1", None, None, None, 1.0), (None, 64, 6, 0.45, 0.5), (None, 0, 0, 0.0, 1.0)]


@pytest.mark.parametrize("preset, experts, active, share, locality", SHAPES)
def test_a_sparse_moe_targets_verify_cost_is_what_python_gives_at_every_depth(page, preset, experts, active, share,
                                                                              locality):
    rates = [0.8, 0.6, 0.5, 0.4]
    set_value(page, "rates", ", ".join(map(str, rates)))
    set_shape(page, preset, experts, active, share, locality)
    if preset:
        shape = moecurve.presets()[preset]  # the page's inputs hold it rounded to 3 decimals, as Python does
        assert role(page, "experts").input_value() == str(shape.experts)
        assert role(page, "share").input_value() == f"{shape.expert_share:.3f}"
        assert float(role(page, "cost").input_value()) == shape.draft
    else:
        assert role(page, "preset").input_value() == "custom"  # typing a shape leaves the preset
        shape = replace(moecurve.presets()["kimi-k2.5"], experts=experts, active=active, expert_share=share,
                        locality=locality, target="custom")
    lengths = predict.accept_length_curve((rates + [0.0] * 10)[:10])
    for k in (1, 3, 5, 7, 10):
        set_value(page, "depth", k)
        verify, step = float(shape.verify_cost(k)), float(shape.step_cost(k))
        assert verify == verify_ratio(k + 1, shape.experts, shape.active, shape.expert_share, shape.locality)
        assert exact(page, "verify-cost") == pytest.approx(verify, rel=1e-12), (preset, experts, k)
        assert exact(page, "step-cost") == pytest.approx(step, rel=1e-12), (preset, experts, k)
        assert exact(page, "speedup") == pytest.approx(float(shape.speedup(lengths[k - 1], k)), rel=1e-12)
        got = reading(page)
        assert (got["step-cost"], got["speedup"]) == (f"{step:.2f}", f"{lengths[k - 1] / step:.2f}")
        assert role(page, "verify-cost").inner_text() == f"{verify:.2f}"
        if shape.experts:
            assert exact(page, "experts-read") == pytest.approx(float(shape.experts_read(k)), rel=1e-12)
        else:
            assert verify == 1.0 and role(page, "experts-read").count() == 0
    back_to_the_lab(page)


def path_points(page, name):
    d = role(page, name).get_attribute("d")
    return [tuple(map(float, p[1:].split(","))) for p in d.split(" ")]


def test_switching_target_changes_the_plotted_speedup_on_fixed_axes(page):
    ticks = {axis: [t.text_content() for t in page.locator(f'[data-role="{axis}"]').all()]
             for axis in ("speedup-ytick", "length-ytick", "cost-ytick", "cost-xtick")}
    lab = {c: path_points(page, c) for c in ("speedup-curve", "cost-curve", "verify-curve")}
    before = reading(page)
    assert role(page, "moe-note").is_hidden() and role(page, "experts").is_hidden()
    set_shape(page, "kimi-k2.5")
    kimi = moecurve.presets()["kimi-k2.5"]
    lengths = predict.accept_length_curve(RATES + [0.0] * 5)
    # the plotted speed-up is the decode speed-up L / C(k) of the Kimi-K2.5 shape, on the same axis
    top = widgets.explorer_html(RATES, depth=5, curve=LAB, measured=MEASURED).limits["speedup"]
    plotted = path_points(page, "speedup-curve")
    for k in range(1, 11):
        model = float(kimi.speedup(lengths[k - 1], k))
        assert plotted[k][1] == pytest.approx(240 - 220 * min(model, top) / top, abs=0.051), k
    assert plotted != lab["speedup-curve"] and path_points(page, "verify-curve") != lab["verify-curve"]
    assert reading(page)["speedup"] == f"{float(kimi.speedup(lengths[4], 5)):.2f}" != before["speedup"]
    # the verify pass grows with the union of experts: it rises at every depth
    verify = [y for _, y in path_points(page, "verify-curve")]
    assert all(a > b for a, b in zip(verify[1:], verify[2:]))  # SVG y falls as the cost rises
    note = role(page, "moe-note").inner_text()
    assert role(page, "lab-note").is_hidden() and "bandwidth-bound limit" in note and "not a measurement" in note
    assert role(page, "fc").inner_text() == f"{kimi.fc:.4f}"
    assert "bandwidth-bound bound, not a measurement" in role(page, "summary").inner_text()
    assert reading(page)["verdict"].endswith("is for the lab's own target: you changed it.")
    assert role(page, "measured-speedup").count() == 0  # the lab's measurement is not this target's
    for name in ("qwen3-30b-a3b", "llama-3.1-8b", "gpt-oss-20b"):
        set_value(page, "preset", name)
        assert {a: [t.text_content() for t in page.locator(f'[data-role="{a}"]').all()] for a in ticks} == ticks
    set_value(page, "target", "lab")
    assert float(role(page, "cost").input_value()) == LAB.draft  # the lab's draft step is back
    assert {c: path_points(page, c) for c in lab} == lab and reading(page) == before
    back_to_the_lab(page)


def test_a_shape_a_reader_cannot_have_says_so_and_keeps_the_last_one(page):
    set_shape(page, "kimi-k2.5")
    set_value(page, "depth", 5)
    cost = exact(page, "step-cost")
    set_value(page, "active", 500)
    assert "K within 1 and E" in role(page, "shape-error").inner_text()
    assert exact(page, "step-cost") == cost and role(page, "preset").input_value() == "custom"
    set_value(page, "active", 8)
    assert role(page, "shape-error").inner_text() == "" and exact(page, "step-cost") == cost
    set_value(page, "share", 1.5)
    assert "within 0 and 1" in role(page, "shape-error").inner_text()
    set_value(page, "preset", "kimi-k2.5")
    assert role(page, "shape-error").inner_text() == "" and exact(page, "step-cost") == cost
    back_to_the_lab(page)


def test_a_page_can_start_on_a_shape(page, tmp_path):
    body = widgets.explorer_html(RATES, depth=5, curve=LAB, target="qwen3-30b-a3b").html()
    html = tmp_path / "moe.html"
    html.write_text(f"<!doctype html><html><head><meta charset='utf-8'></head><body>{body}</body></html>",
                    encoding="utf-8")
    qwen = moecurve.presets()["qwen3-30b-a3b"]
    pg = page.context.browser.new_page()  # beside the module's page, in its browser
    try:
        pg.route("http*://**", lambda route: route.abort())
        pg.goto(html.resolve().as_uri(), wait_until="load")
        assert role(pg, "target").input_value() == "moe" and role(pg, "preset").input_value() == "qwen3-30b-a3b"
        assert exact(pg, "step-cost") == pytest.approx(float(qwen.step_cost(5)), rel=1e-12)
        set_value(pg, "target", "lab")
        assert exact(pg, "step-cost") == pytest.approx(float(LAB.step_cost(5)), rel=1e-12)
    finally:
        pg.close()

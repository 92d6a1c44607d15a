"""The in-page explorer in a real browser (Debian's chromium, Playwright; no kernel, no network):
its JavaScript computes what the Python model computes for every input a reader can change, its
axes have ticks and stay fixed, and it compares its value at the measured configuration with the
measurement."""

from __future__ import annotations

from pathlib import Path

import pytest

from eagle3lab.acceptance import predict
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

"""Interactive notebook widgets: what accept length and speed-up to expect, with your own numbers.

Both explorers draw one model (`costfit.CostCurve`): accept length L(k) from an acceptance (an
i.i.d. per-token rate a, or per-position conditional rates; a position beyond the rates given
adds nothing) and the cost of one speculative step in target steps,
C(k) = fixed + draft x k + verify + growth x log2(k + 1); speed-up of total tokens/s for the
report's requests (prefill included) or, without a request size, L / C. Their default costs are the
lab's, calibrated on a report's measured configurations (`costfit.lab_costs`); the measured point
(accept length, speed-up with its interval) is drawn, and the summary says whether the model's
value at the measured configuration lies in its interval, and why not when it does not.

``AcceptanceExplorer`` (ipywidgets, needs a kernel) redraws a PNG on every change;
``explorer_html`` is the same in the page itself (inline SVG and JavaScript, no kernel, no
network), so it also works in the rendered report. Axes stay fixed while you slide.
"""

from __future__ import annotations

import io
import json
from dataclasses import asdict, replace
from typing import Sequence

import numpy as np
import pandas as pd

from eagle3lab.acceptance import predict
from eagle3lab.cost.costfit import CostCurve
from eagle3lab.viz.style import COLORS, apply_style


def chain_rates(rates: Sequence[float] | None, a: float, max_depth: int) -> list[float]:
    """Conditional rates 1..max_depth: the rates given (NaN, never reached: 0; beyond them: 0),
    or the i.i.d. `a` at every position."""
    if rates is None or not len(rates):
        return [float(a)] * max_depth
    given = [0.0 if r is None or not np.isfinite(r) else min(max(float(r), 0.0), 1.0) for r in rates]
    return (given + [0.0] * max_depth)[:max_depth]


def curve_frame(rates: Sequence[float], curve: CostCurve) -> pd.DataFrame:
    """DataFrame(depth, accept_length, step_cost, speedup, decode_speedup) at depths 0..len(rates);
    depth 0 is no speculation (1.0x)."""
    lengths = np.concatenate([[1.0], predict.accept_length_curve(list(rates))])
    depth = np.arange(len(lengths))
    speed = np.concatenate([[1.0], curve.speedup(lengths[1:], depth[1:])])
    decode = np.concatenate([[1.0], curve.decode_speedup(lengths[1:], depth[1:])])
    return pd.DataFrame({"depth": depth, "accept_length": lengths,
                         "step_cost": np.concatenate([[1.0], curve.step_cost(depth[1:])]),
                         "speedup": speed, "decode_speedup": decode})


def speedup(accept_len, depth, cost_ratio):
    """The old explorer's speed-up, L / (1 + k x r): a verify pass priced at one target step and
    nothing else (CostCurve.assumed). Kept for callers; the lab measures more (costfit)."""
    return CostCurve.assumed(cost_ratio).speedup(accept_len, depth)


def measured_verdict(model: float, measured: dict | None, changed: str = "",
                     accept_length: float | None = None) -> str:
    """One sentence: the model's speed-up at the measured configuration against the measured one,
    and why they differ when they do (costs changed, an acceptance that is not the measured one,
    or this run's own step costs)."""
    if not measured or measured.get("speedup") is None:
        return "No speed-up was measured at this configuration here."
    ci = measured.get("interval")
    text = f"measured {measured['speedup']:.2f}×" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")
    if changed:
        return f"Model {model:.2f}× at depth {measured['depth']}; {text} is for the lab's own {changed}: you changed it."
    if accept_length is not None and abs(accept_length - measured["accept_length"]) > 0.005:
        return (f"Model {model:.2f}× at depth {measured['depth']}; {text} is for the measured accept length "
                f"{measured['accept_length']:.2f}, and the acceptance here gives {accept_length:.2f}.")
    if not ci:
        return f"Model {model:.2f}× at depth {measured['depth']}, {text} (no interval: too few prompts)."
    inside = ci[0] <= model <= ci[1]
    return (f"Model {model:.2f}× at depth {measured['depth']}, {text}: " +
            ("inside the interval." if inside else "outside the interval: this run's own step costs differ "
             "from the costs calibrated on the report's configurations."))


class AcceptanceExplorer:
    """Accept length and speed-up versus draft depth, driven by sliders and a text box.

    Controls (stable descriptions, for code and browser tests): ``model`` (``i.i.d.`` or
    ``per-position``), ``a``, ``rates`` (per-position rates typed, comma-separated), ``p1``..``pN``,
    ``depth``, ``draft step``, ``verify pass``, ``verify growth`` (costs in target steps). ``.widget``
    is the VBox to display; ``.image`` the plot; ``.summary`` the text; ``.state()`` the numbers.
    `cost_ratio` alone (no `curve`) is the old model: a verify pass costs one target step.
    """

    def __init__(self, a: float = 0.7, depth: int = 5, cost_ratio: float = 0.05,
                 rates: Sequence[float] | None = None, observed: pd.DataFrame | None = None,
                 max_depth: int = 10, curve: CostCurve | None = None, measured: dict | None = None):
        import ipywidgets as w

        self.max_depth = max(max_depth, depth)
        self.curve0 = curve or CostCurve.assumed(cost_ratio)
        self.measured = measured or _measured_from(observed)
        slider = dict(continuous_update=True, style={"description_width": "90px"}, layout=w.Layout(width="440px"))
        self.a = w.FloatSlider(value=a, min=0.0, max=1.0, step=0.01, description="a", **slider)
        self.depth = w.IntSlider(value=depth, min=1, max=self.max_depth, description="depth", **slider)
        self.cost_ratio = w.FloatSlider(value=self.curve0.draft, min=0.0, max=1.0, step=0.005, readout_format=".3f",
                                        description="draft step", **slider)
        self.verify = w.FloatSlider(value=self.curve0.verify, min=0.0, max=4.0, step=0.01, description="verify pass",
                                    **slider)
        self.growth = w.FloatSlider(value=self.curve0.growth, min=0.0, max=1.0, step=0.005, readout_format=".3f",
                                    description="verify growth", **slider)
        initial = chain_rates(rates, a, self.max_depth)
        self.position_sliders = [w.FloatSlider(value=float(r), min=0.0, max=1.0, step=0.01, description=f"p{i + 1}",
                                               **slider) for i, r in enumerate(initial)]
        self.rates_text = w.Text(value=", ".join(f"{r:.2f}" for r in initial), description="rates",
                                 continuous_update=False, style={"description_width": "90px"},
                                 layout=w.Layout(width="440px"))
        self.model = w.ToggleButtons(options=["i.i.d.", "per-position"],
                                     value="per-position" if rates is not None else "i.i.d.", description="model")
        self.summary, self.image = w.HTML(), w.Image(format="png")
        self.positions_box = w.VBox([self.rates_text, *self.position_sliders])
        self.widget = w.VBox([self.model, self.a, self.positions_box, self.depth, self.cost_ratio, self.verify,
                              self.growth, self.summary, self.image])
        self.figure, self._quiet = None, False
        self._limits = self._fixed_limits()
        for control in [self.a, self.depth, self.cost_ratio, self.verify, self.growth, self.model,
                        *self.position_sliders]:
            control.observe(self._on_change, names="value")
        self.rates_text.observe(self._on_text, names="value")
        self.redraw()

    # -- the numbers
    def rates(self) -> np.ndarray:
        """Conditional per-position rates 1..max_depth of the current model."""
        if self.model.value == "i.i.d.":
            return np.full(self.max_depth, self.a.value)
        return np.array([s.value for s in self.position_sliders])

    def cost_curve(self) -> CostCurve:
        c = self.curve0
        return CostCurve(draft=self.cost_ratio.value, verify=self.verify.value, growth=self.growth.value,
                         fixed=c.fixed, prefill_base=c.prefill_base, prefill_spec=c.prefill_spec, tokens=c.tokens,
                         source=c.source)

    def curve(self) -> pd.DataFrame:
        """DataFrame(depth, accept_length, step_cost, speedup, decode_speedup), depths 0..max_depth."""
        return curve_frame(self.rates(), self.cost_curve())

    def state(self) -> dict:
        curve = self.curve()
        k = self.depth.value
        best = curve.loc[curve["speedup"].idxmax()]
        return {"model": self.model.value, "a": self.a.value, "depth": k, "cost_ratio": self.cost_ratio.value,
                "verify": self.verify.value, "growth": self.growth.value,
                "accept_length": float(curve.loc[k, "accept_length"]), "step_cost": float(curve.loc[k, "step_cost"]),
                "speedup": float(curve.loc[k, "speedup"]), "decode_speedup": float(curve.loc[k, "decode_speedup"]),
                "best_depth": int(best["depth"]), "best_speedup": float(best["speedup"])}

    def _changed(self) -> str:
        c = self.curve0
        cost = any(abs(x - y) > 1e-9 for x, y in ((self.cost_ratio.value, c.draft), (self.verify.value, c.verify),
                                                  (self.growth.value, c.growth)))
        return "costs" if cost else ""

    # -- drawing
    def _on_text(self, change) -> None:
        try:
            values = parse_rates(change["new"])
        except ValueError as exc:
            self.summary.value = f"<b>rates:</b> {exc}"
            return
        self._quiet = True  # one redraw for the whole set, not one per slider
        try:
            for slider, value in zip(self.position_sliders, chain_rates(values, 0.0, self.max_depth)):
                slider.value = value
            self.model.value = "per-position"
        finally:
            self._quiet = False
        self.redraw()

    def _on_change(self, _change=None):
        if not self._quiet:
            self.redraw()

    def _fixed_limits(self) -> tuple[float, float]:
        """Axes fixed at construction, so they do not move while sliding: accept length up to
        depth + 1; speed-up up to the larger of 2, the measured interval, 1.3x the first curve."""
        top = max(2.0, 1.3 * float(self.curve()["speedup"].max()))
        if self.measured and self.measured.get("interval"):
            top = max(top, 1.1 * self.measured["interval"][1])
        return _length_limit(self.curve()["accept_length"], self.measured, self.max_depth), float(np.ceil(top * 2) / 2)

    def redraw(self) -> None:
        s = self.state()
        self.positions_box.layout.display = "none" if self.model.value == "i.i.d." else None
        verdict = ""
        if self.measured and s["depth"] == self.measured.get("depth"):
            verdict = " · " + measured_verdict(s["speedup"], self.measured, self._changed(), s["accept_length"])
        self.summary.value = (
            f"<b>expected accept length</b> {s['accept_length']:.2f} at depth {s['depth']} · "
            f"<b>speed-up</b> {s['speedup']:.2f}× ({self.curve0.kind} tokens/s; decode {s['decode_speedup']:.2f}×) · "
            f"step cost {s['step_cost']:.2f} target steps · best depth {s['best_depth']} "
            f"({s['best_speedup']:.2f}×){verdict}")
        self.figure = self._plot(s)
        buffer = io.BytesIO()
        self.figure.savefig(buffer, format="png", dpi=80)
        self.image.value = buffer.getvalue()

    def _plot(self, s: dict):
        apply_style()
        import matplotlib.pyplot as plt

        curve = self.curve()
        lmax, smax = self._limits
        fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4.2))
        left.plot(curve["depth"], curve["accept_length"], color=COLORS["model"], marker="o", ms=3, label="model")
        left.plot(curve["depth"], curve["depth"] + 1, color=COLORS["baseline"], ls=":", lw=1, label="ceiling k + 1")
        right.plot(curve["depth"], curve["speedup"].clip(upper=smax), color=COLORS["model"], marker="o", ms=3,
                   label=f"model ({self.curve0.kind} tokens/s)")
        if self.measured:
            m = self.measured
            left.scatter([m["depth"]], [m["accept_length"]], s=45, zorder=5, color=COLORS["observed"], label="observed")
            if m.get("speedup") is not None:
                ci = m.get("interval")
                yerr = None if not ci else [[m["speedup"] - ci[0]], [ci[1] - m["speedup"]]]
                right.errorbar([m["depth"]], [m["speedup"]], yerr=yerr, fmt="o", capsize=3, color=COLORS["observed"],
                               label="measured, 95 % interval", zorder=5)
        right.axhline(1.0, color=COLORS["baseline"], ls="--", label="no speculation")
        for ax in (left, right):
            ax.axvline(s["depth"], color=COLORS["accepted"], lw=1)
            ax.set_xlim(0, self.max_depth)
            ax.set_xticks(range(self.max_depth + 1))
        left.set(xlabel="draft depth k", ylabel="accept length", ylim=(0, lmax),
                 title=f"E[L] = {s['accept_length']:.2f} at k = {s['depth']}")
        right.set(xlabel="draft depth k", ylabel="speed-up", ylim=(0, smax),
                  title=f"{s['speedup']:.2f}× at step cost {s['step_cost']:.2f}")
        for ax in (left, right):
            ax.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.2), frameon=False, ncol=2)
        fig.tight_layout()
        plt.close(fig)
        return fig

    def _ipython_display_(self):
        from IPython.display import display

        display(self.widget)


def acceptance_explorer(**kwargs) -> AcceptanceExplorer:
    """Build an AcceptanceExplorer (display it, or its ``.widget``, in a notebook)."""
    return AcceptanceExplorer(**kwargs)


def parse_rates(text: str) -> list[float]:
    """'0.8, 0.5 0.3' -> [0.8, 0.5, 0.3]; a ValueError that says what is wrong otherwise."""
    parts = [p for p in str(text).replace(",", " ").split() if p]
    if not parts:
        raise ValueError("type one rate per draft position, e.g. 0.8, 0.5, 0.3")
    try:
        values = [float(p) for p in parts]
    except ValueError:
        raise ValueError(f"not numbers: {text!r}") from None
    if any(not 0 <= v <= 1 for v in values):
        raise ValueError("each rate must be within 0 and 1")
    return values


def _length_limit(lengths, measured, k_max: int) -> float:
    """The accept-length axis, fixed: 1.5x the starting curve (at least 3, at most depth + 1)."""
    top = max(3.0, 1.5 * float(np.max(lengths)), 1.5 * float(measured["accept_length"]) if measured else 0.0)
    return float(min(k_max + 1.0, np.ceil(top)))


def _measured_from(observed) -> dict | None:
    """The old `observed` frame (depth, accept_length[, speedup]) as a measured point."""
    if observed is None or not len(observed):
        return None
    row = observed.iloc[0]
    return {"depth": int(row["depth"]), "accept_length": float(row["accept_length"]),
            "speedup": float(row["speedup"]) if "speedup" in observed and row["speedup"] == row["speedup"] else None,
            "interval": None}


# --------------------------------------------------------------------------- a notebook's inputs

def lab_curve(run=None, store=None) -> CostCurve:
    """The explorers' step costs for a notebook: calibrated on every configuration of the
    report's measurement store (`costfit.lab_costs`) when there is one with at least 3; else this
    run's own timings (a draft step and a verify pass relative to a plain step, the verify pass
    taken as flat in depth: one configuration cannot say how it grows); else the old assumption."""
    from eagle3lab.cost import costfit
    from eagle3lab.serving import measurements

    store = measurements.active(store)
    records = store.records() if store is not None else []
    if len(costfit.timings(records)) >= 3:
        return costfit.lab_costs(records).curve()
    costs = getattr(getattr(run, "observation", None), "costs", None) or {}
    if costs.get("draft_over_target") and costs.get("verify_over_plain"):
        return CostCurve(draft=float(costs["draft_over_target"]), verify=float(costs["verify_over_plain"]),
                         source="measured by this run alone (a verify pass taken as flat in depth)")
    return CostCurve.assumed(0.1)


def measured_point(run, draft: str, spec, store=None) -> dict | None:
    """The run's configuration as measured in the report's store (speed-up of total tokens/s with
    its interval, `costfit.point_for`), else its accept length alone (no speed-up)."""
    from eagle3lab.cost import costfit
    from eagle3lab.serving import measurements

    store = measurements.active(store)
    accept = getattr(run, "accept_length", None)
    point = costfit.point_for(store.records(), draft, spec, accept) if store is not None else None
    if point is None and accept is not None and accept == accept:
        point = {"depth": int(list(spec)[0]), "accept_length": float(accept), "speedup": None, "interval": None}
    return point


# --------------------------------------------------------------------------- in the page itself

def explorer_curves(rates: Sequence[float] | None, max_depth: int = 10, curve: CostCurve | None = None,
                    a: float = 0.7, cost_ratio: float = 0.05) -> dict:
    """What the in-page explorer starts from, computed here (the page recomputes the same in
    JavaScript when a reader changes an input): rates, accept length and speed-up at depths
    0..max_depth, and the cost curve's parameters."""
    curve = curve or CostCurve.assumed(cost_ratio)
    chain = chain_rates(rates, a, max_depth)
    frame = curve_frame(chain, curve)
    return {"rates": [float(r) for r in chain], "a": a, "mode": "per-position" if rates is not None else "iid",
            "depth": frame["depth"].tolist(), "accept_length": [float(v) for v in frame["accept_length"]],
            "speedup": [float(v) for v in frame["speedup"]], "cost": asdict(curve),
            "measured_positions": 0 if rates is None else len(rates)}


class ExplorerHTML:
    """The acceptance-versus-depth explorer as one self-contained HTML block (inline SVG and
    JavaScript, no network): acceptance (i.i.d. rate or per-position rates typed), depth and the
    step's costs as inputs; accept length and speed-up redrawn in the page on fixed axes."""

    def __init__(self, curves: dict, depth: int, measured: dict | None = None, note: str = ""):
        self.curves, self.depth, self.measured, self.note = curves, int(depth), measured, note
        k_max = len(curves["depth"]) - 1
        top = max(2.0, 1.3 * max(curves["speedup"]))
        if measured and measured.get("interval"):
            top = max(top, 1.1 * measured["interval"][1])
        self.limits = {"length": _length_limit(curves["accept_length"], measured, k_max),
                       "speedup": float(np.ceil(top * 2) / 2)}

    def _repr_html_(self) -> str:
        return self.html()

    def html(self) -> str:
        import uuid

        uid = "e3x" + uuid.uuid4().hex[:8]
        data = json.dumps({**self.curves, "depth0": self.depth, "measured": self.measured, "limits": self.limits})
        k_max = len(self.curves["depth"]) - 1
        c = self.curves["cost"]
        return (_EXPLORER_TEMPLATE.replace("__UID__", uid).replace("__DATA__", data).replace("__KMAX__", str(k_max))
                .replace("__NOTE__", self.note).replace("__DRAFT__", f"{c['draft']:.3f}")
                .replace("__VERIFY__", f"{c['verify']:.3f}").replace("__GROWTH__", f"{c['growth']:.3f}")
                .replace("__RATES__", ", ".join(f"{r:.2f}" for r in self.curves["rates"]))
                .replace("__A__", f"{self.curves['a']:.2f}"))


def explorer_html(rates: Sequence[float] | None = None, depth: int = 5, cost_ratio: float | None = None,
                  observed=None, max_depth: int = 10, curve: CostCurve | None = None, measured: dict | None = None,
                  a: float = 0.7) -> ExplorerHTML:
    """The in-page explorer (display it; nbconvert keeps it). `curve`: the step's costs
    (`costfit.lab_costs(records).curve()`); `measured`: the measured point (`costfit.point_for`,
    depth, accept_length, speedup, interval). Without `curve`, `cost_ratio` with a verify pass
    priced at one target step (an assumption, said in the note)."""
    if curve is None:
        curve = CostCurve.assumed(0.05 if cost_ratio is None else cost_ratio)
    # the page's inputs show 3 decimals: start from exactly what they show
    curve = replace(curve, **{f: round(float(getattr(curve, f)), 3) for f in ("draft", "verify", "growth")})
    curves = explorer_curves(rates, max_depth=max(max_depth, depth), curve=curve, a=a)
    measured = measured or _measured_from(observed)
    where = (f"per-position rates ({curves['measured_positions']} measured positions; deeper positions count as "
             "never accepted)") if rates is not None else f"an i.i.d. rate a = {a:.2f}"
    kind = "total tokens/s of the report's requests, prefill included" if curve.tokens else "decode tokens/s"
    note = (f"Starts from {where} and step costs {curve.source} (in target steps); speed-up of {kind}. "
            "Step cost C(k) = fixed + draft × k + verify + growth × log2(k + 1), fixed = "
            f"{curve.fixed:.3f}.")
    return ExplorerHTML(curves, depth, measured=measured, note=note)


_EXPLORER_TEMPLATE = r"""<div class="eagle3lab-explorer" id="__UID__" style="font:14px sans-serif;max-width:780px;color:#111">
<div><label>acceptance <select data-role="mode"><option value="per-position">per-position rates</option>
<option value="iid">i.i.d. rate a</option></select></label>
 <label data-role="rates-box">rates (position 1, 2, ...) <input type="text" data-role="rates" size="38" value="__RATES__"></label>
 <label data-role="a-box">a <input type="range" data-role="a" min="0" max="1" step="0.01" value="__A__" style="width:180px">
 <span data-role="a-value"></span></label> <span data-role="error" style="color:#b33c00"></span></div>
<div><label>depth k <input type="range" data-role="depth" min="1" max="__KMAX__" step="1" style="width:300px"></label>
 <span data-role="depth-value"></span></div>
<div>cost of one step, in target steps: <label>draft step <input type="range" data-role="cost" min="0" max="0.5"
 step="0.001" value="__DRAFT__" style="width:160px"></label> <span data-role="cost-value"></span>
 · <label>verify pass <input type="number" data-role="verify" min="0" max="10" step="0.01" value="__VERIFY__" style="width:64px"></label>
 · <label>verify growth per doubling <input type="number" data-role="growth" min="0" max="5" step="0.005" value="__GROWTH__" style="width:64px"></label></div>
<p data-role="summary"></p>
<p data-role="verdict" style="font-size:13px"></p>
<svg data-role="plot" role="img" width="740" height="300" viewBox="0 0 740 300" style="background:#fff"></svg>
<p style="font-size:12px;color:#444">__NOTE__ Blue: measured (with its 95 % interval); orange: the model; dashed: no
speculation (1.0×). Axes stay fixed while you move the inputs; a value above an axis is drawn at its top. Runs in this
page: no kernel, no network.</p>
<script>
(function () {
  var D = __DATA__;
  var root = document.getElementById("__UID__");
  var q = function (r) { return root.querySelector('[data-role="' + r + '"]'); };
  var K = D.depth.length - 1, C = D.cost, M = D.measured, LIM = D.limits;
  var mode = q("mode"), rates = q("rates"), a = q("a"), depth = q("depth"), cost = q("cost");
  var verify = q("verify"), growth = q("growth"), svg = q("plot");
  mode.value = D.mode; depth.value = D.depth0;
  var initial = {mode: mode.value, rates: rates.value, a: a.value, cost: cost.value, verify: verify.value,
                 growth: growth.value};
  var good = D.rates.slice();
  function parseRates(text) {
    var parts = text.replace(/,/g, " ").split(/\s+/).filter(function (p) { return p.length; });
    if (!parts.length) { throw "type one rate per draft position, e.g. 0.8, 0.5, 0.3"; }
    var v = parts.map(Number);
    if (v.some(function (x) { return !isFinite(x); })) { throw "not numbers: " + text; }
    if (v.some(function (x) { return x < 0 || x > 1; })) { throw "each rate must be within 0 and 1"; }
    return v;
  }
  function chain() {
    var out = [];
    if (mode.value === "iid") { for (var i = 0; i < K; i++) { out.push(+a.value); } return out; }
    q("error").textContent = "";
    try { good = parseRates(rates.value); } catch (e) { q("error").textContent = e; }
    for (var j = 0; j < K; j++) { out.push(j < good.length ? good[j] : 0); }
    return out;
  }
  function stepCost(k) { return C.fixed + (+cost.value) * k + (+verify.value) + (+growth.value) * Math.log2(k + 1); }
  function speed(L, k) {
    if (k === 0) { return 1; }
    if (!C.tokens) { return L / stepCost(k); }
    var t = C.tokens;
    return (C.prefill_base + t - 1) / (C.prefill_spec + (t - 1) / L * stepCost(k));
  }
  function nice(top) {
    var steps = [0.1, 0.2, 0.25, 0.5, 1, 2, 5, 10];
    for (var i = 0; i < steps.length; i++) { if (top / steps[i] <= 8) { return steps[i]; } }
    return 20;
  }
  function panel(x0, w, ymax, label, id, ys, color) {
    var y0 = 20, h = 220, s = "", step = nice(ymax);
    var X = function (d) { return x0 + w * d / K; }, Y = function (v) { return y0 + h - h * Math.min(v, ymax) / ymax; };
    for (var t = 0; t <= ymax + 1e-9; t += step) {
      s += '<line x1="' + x0 + '" x2="' + (x0 + w) + '" y1="' + Y(t) + '" y2="' + Y(t) + '" stroke="#e5e5e5"/>';
      s += '<text data-role="' + id + '-ytick" x="' + (x0 - 5) + '" y="' + (Y(t) + 4) + '" font-size="10" text-anchor="end">' +
        (+t.toFixed(2)) + '</text>';
    }
    for (var d = 0; d <= K; d++) {
      s += '<line x1="' + X(d) + '" x2="' + X(d) + '" y1="' + (y0 + h) + '" y2="' + (y0 + h + 4) + '" stroke="#555"/>';
      s += '<text data-role="' + id + '-xtick" x="' + X(d) + '" y="' + (y0 + h + 15) + '" font-size="10" text-anchor="middle">' + d + '</text>';
    }
    s += '<rect x="' + x0 + '" y="' + y0 + '" width="' + w + '" height="' + h + '" fill="none" stroke="#999"/>';
    s += '<text x="' + x0 + '" y="13" font-size="12">' + label + '</text>';
    s += '<text x="' + (x0 + w / 2) + '" y="' + (y0 + h + 32) + '" font-size="11" text-anchor="middle">draft depth k</text>';
    s += '<path data-role="' + id + '-curve" d="' + ys.map(function (v, i) { return (i ? "L" : "M") + X(i).toFixed(1) + "," + Y(v).toFixed(1); }).join(" ") +
      '" fill="none" stroke="' + color + '" stroke-width="2"/>';
    return {s: s, X: X, Y: Y};
  }
  function draw() {
    var r = chain(), L = [1], acc = 1, sp = [1];
    for (var i = 0; i < K; i++) { acc *= r[i]; L.push(L[i] + acc); sp.push(speed(L[i + 1], i + 1)); }
    var k = +depth.value, best = 0;
    for (var j = 1; j <= K; j++) { if (sp[j] > sp[best]) { best = j; } }
    q("a-value").textContent = (+a.value).toFixed(2);
    q("cost-value").textContent = (+cost.value).toFixed(3);
    q("depth-value").textContent = k;
    q("rates-box").style.display = mode.value === "iid" ? "none" : "";
    q("a-box").style.display = mode.value === "iid" ? "" : "none";
    var kind = C.tokens ? "total tokens/s" : "decode tokens/s";
    var above = sp[k] > LIM.speedup ? " (above the axis)" : "";
    q("summary").innerHTML = "<b>expected accept length</b> <span data-role=\"accept-length\">" + L[k].toFixed(2) +
      "</span> at depth " + k + " · <b>speed-up</b> <span data-role=\"speedup\">" + sp[k].toFixed(2) + "</span>× (" + kind +
      above + "; decode " + (L[k] / stepCost(k)).toFixed(2) + "×) · step cost <span data-role=\"step-cost\">" +
      stepCost(k).toFixed(2) + "</span> target steps (break-even accept length) · <b>best depth</b> <span data-role=\"best-depth\">" +
      best + "</span> (" + sp[best].toFixed(2) + "×)";
    var changed = [];
    if (mode.value !== initial.mode || rates.value !== initial.rates || a.value !== initial.a) { changed.push("acceptance"); }
    if (cost.value !== initial.cost || verify.value !== initial.verify || growth.value !== initial.growth) { changed.push("costs"); }
    var v = "";
    if (M && M.speedup !== null && M.speedup !== undefined) {
      var ci = M.interval, txt = "measured " + M.speedup.toFixed(2) + "×" + (ci ? " [" + ci[0].toFixed(2) + ", " + ci[1].toFixed(2) + "]" : "");
      var m = sp[M.depth];
      if (k !== M.depth) { v = "Move the depth to " + M.depth + " to compare with the measured configuration (" + txt + ")."; }
      else if (changed.indexOf("costs") >= 0) { v = "Model " + m.toFixed(2) + "× at depth " + M.depth + "; " + txt + " is for the lab's own costs: you changed it."; }
      else if (Math.abs(L[M.depth] - M.accept_length) > 0.005) { v = "Model " + m.toFixed(2) + "× at depth " + M.depth + "; " + txt +
        " is for the measured accept length " + M.accept_length.toFixed(2) + ", and the acceptance here gives " + L[M.depth].toFixed(2) + "."; }
      else if (!ci) { v = "Model " + m.toFixed(2) + "× at depth " + M.depth + ", " + txt + " (no interval: too few prompts)."; }
      else { v = "Model " + m.toFixed(2) + "× at depth " + M.depth + ", " + txt + ": " + (ci[0] <= m && m <= ci[1] ? "inside the interval." :
        "outside the interval: this run's own step costs differ from the costs calibrated on the report's configurations."); }
    }
    q("verdict").textContent = v;
    var left = panel(50, 300, LIM.length, "accept length (tokens per verify step)", "length", L, "#E69F00");
    var right = panel(430, 300, LIM.speedup, "speed-up (" + kind + ")", "speedup", sp, "#E69F00");
    var s = left.s + right.s;
    var y1 = right.Y(1);
    s += '<line x1="430" x2="730" y1="' + y1 + '" y2="' + y1 + '" stroke="#777" stroke-dasharray="4 3"/>';
    [left, right].forEach(function (p) { s += '<line x1="' + p.X(k) + '" x2="' + p.X(k) + '" y1="20" y2="240" stroke="#009E73"/>'; });
    if (M) {
      s += '<circle data-role="measured-length" cx="' + left.X(M.depth) + '" cy="' + left.Y(M.accept_length) + '" r="5" fill="#0072B2"><title>measured accept length ' + M.accept_length.toFixed(2) + '</title></circle>';
      if (M.speedup !== null && M.speedup !== undefined) {
        if (M.interval) {
          s += '<line x1="' + right.X(M.depth) + '" x2="' + right.X(M.depth) + '" y1="' + right.Y(M.interval[0]) + '" y2="' + right.Y(M.interval[1]) + '" stroke="#0072B2" stroke-width="2"/>';
        }
        s += '<circle data-role="measured-speedup" cx="' + right.X(M.depth) + '" cy="' + right.Y(M.speedup) + '" r="5" fill="#0072B2"><title>measured speed-up ' + M.speedup.toFixed(2) + '</title></circle>';
      }
    }
    svg.innerHTML = s;
    svg.setAttribute("aria-label", "Accept length and speed-up (" + kind + ") against draft depth 0 to " + K +
      "; at depth " + k + ": accept length " + L[k].toFixed(2) + ", speed-up " + sp[k].toFixed(2) + "x");
  }
  [mode, rates, a, depth, cost, verify, growth].forEach(function (el) { el.addEventListener("input", draw); el.addEventListener("change", draw); });
  draw();
})();
</script></div>"""

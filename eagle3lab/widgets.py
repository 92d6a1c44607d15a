"""Interactive notebook widgets (ipywidgets).

``AcceptanceExplorer`` answers "what accept length and speed-up should I expect?" while you move
sliders for the per-token acceptance (or each position's rate), the draft depth and the
draft/target cost ratio, with observed points overlaid. The plot is an ``ipywidgets.Image``
(PNG re-rendered on every change), so it updates in JupyterLab, in a rendered page with a live
kernel, and in plain Python tests alike.
"""

from __future__ import annotations

import io
from typing import Sequence

import numpy as np
import pandas as pd

from eagle3lab import predict
from eagle3lab.style import COLORS, apply_style


def speedup(accept_len, depth, cost_ratio):
    """Speed-up over plain decoding: L / (1 + k * c_draft / c_target) (verify ~ one target step)."""
    return np.asarray(accept_len, dtype=float) / (1 + np.asarray(depth, dtype=float) * cost_ratio)


class AcceptanceExplorer:
    """Accept length and speed-up versus draft depth, driven by sliders.

    Sliders (stable descriptions, for code and browser tests): ``a``, ``depth``, ``cost ratio``,
    the ``model`` toggle (``i.i.d.`` or ``per-position``) and ``p1``..``pN`` for per-position
    conditional rates. ``.widget`` is the VBox to display; ``.image`` the plot; ``.summary`` the
    text with expected accept length and speed-up; ``.state()`` the current numbers.
    """

    def __init__(self, a: float = 0.7, depth: int = 5, cost_ratio: float = 0.05,
                 rates: Sequence[float] | None = None, observed: pd.DataFrame | None = None,
                 max_depth: int = 10):
        import ipywidgets as w

        self.max_depth = max_depth
        self.observed = observed
        slider = dict(continuous_update=True, style={"description_width": "80px"},
                      layout=w.Layout(width="420px"))
        self.a = w.FloatSlider(value=a, min=0.0, max=1.0, step=0.01, description="a", **slider)
        self.depth = w.IntSlider(value=depth, min=1, max=max_depth, description="depth", **slider)
        self.cost_ratio = w.FloatSlider(value=cost_ratio, min=0.0, max=1.0, step=0.005,
                                        readout_format=".3f", description="cost ratio", **slider)
        # Positions never reached (NaN in a per-position table) start at 0: a slider needs a number.
        initial = [0.0 if not np.isfinite(r) else min(max(float(r), 0.0), 1.0)
                   for r in (rates if rates is not None else [a] * max_depth)] or [a]
        initial = (initial + [initial[-1]] * max_depth)[:max_depth]
        self.position_sliders = [
            w.FloatSlider(value=float(r), min=0.0, max=1.0, step=0.01, description=f"p{i + 1}",
                          **slider) for i, r in enumerate(initial)]
        self.model = w.ToggleButtons(options=["i.i.d.", "per-position"],
                                     value="per-position" if rates is not None else "i.i.d.",
                                     description="model")
        self.summary = w.HTML()
        self.image = w.Image(format="png")
        self.positions_box = w.VBox(self.position_sliders)
        self.widget = w.VBox([self.model, self.a, self.depth, self.cost_ratio, self.positions_box,
                              self.summary, self.image])
        self.figure = None
        for control in [self.a, self.depth, self.cost_ratio, self.model, *self.position_sliders]:
            control.observe(self._on_change, names="value")
        self.redraw()

    # -- the numbers
    def rates(self) -> np.ndarray:
        """Conditional per-position rates 1..max_depth of the current model."""
        if self.model.value == "i.i.d.":
            return np.full(self.max_depth, self.a.value)
        return np.array([s.value for s in self.position_sliders])

    def curve(self) -> pd.DataFrame:
        """DataFrame(depth, accept_length, speedup) for depths 0..max_depth."""
        lengths = np.concatenate([[1.0], predict.accept_length_curve(self.rates())])
        depth = np.arange(self.max_depth + 1)
        return pd.DataFrame({"depth": depth, "accept_length": lengths,
                             "speedup": speedup(lengths, depth, self.cost_ratio.value)})

    def state(self) -> dict:
        curve = self.curve()
        k = self.depth.value
        best = curve.loc[curve["speedup"].idxmax()]
        return {"model": self.model.value, "a": self.a.value, "depth": k,
                "cost_ratio": self.cost_ratio.value,
                "accept_length": float(curve.loc[k, "accept_length"]),
                "speedup": float(curve.loc[k, "speedup"]),
                "best_depth": int(best["depth"]), "best_speedup": float(best["speedup"])}

    # -- drawing
    def _on_change(self, _change=None):
        self.positions_box.layout.display = "none" if self.model.value == "i.i.d." else None
        self.redraw()

    def redraw(self) -> None:
        s = self.state()
        self.summary.value = (
            f"<b>expected accept length</b> {s['accept_length']:.2f} at depth {s['depth']} · "
            f"<b>speed-up</b> {s['speedup']:.2f}× · best depth {s['best_depth']} "
            f"({s['best_speedup']:.2f}×)")
        self.positions_box.layout.display = "none" if self.model.value == "i.i.d." else None
        self.figure = self._plot(s)
        buffer = io.BytesIO()
        self.figure.savefig(buffer, format="png", dpi=80)
        self.image.value = buffer.getvalue()

    def _plot(self, s: dict):
        apply_style()
        import matplotlib.pyplot as plt

        curve = self.curve()
        fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
        left.plot(curve["depth"], curve["accept_length"], color=COLORS["model"], marker="o", ms=3,
                  label="model")
        left.plot(curve["depth"], curve["depth"] + 1, color=COLORS["baseline"], ls=":", lw=1,
                  label="ceiling k + 1")
        if self.observed is not None and len(self.observed):
            left.scatter(self.observed["depth"], self.observed["accept_length"], s=45, zorder=5,
                         color=COLORS["observed"], label="observed")
        left.axvline(s["depth"], color=COLORS["accepted"], lw=1)
        top = curve["accept_length"].max()
        if self.observed is not None and len(self.observed):
            top = max(top, float(self.observed["accept_length"].max()))
        left.set(xlabel="draft depth k", ylabel="accept length", ylim=(0.9, top * 1.25 + 0.2),
                 title=f"E[L] = {s['accept_length']:.2f} at k = {s['depth']}")
        left.legend(fontsize="small")
        right.plot(curve["depth"], curve["speedup"], color=COLORS["model"], marker="o", ms=3)
        if self.observed is not None and "speedup" in self.observed:
            right.scatter(self.observed["depth"], self.observed["speedup"], s=45, zorder=5,
                          color=COLORS["observed"])
        right.axhline(1.0, color=COLORS["baseline"], ls="--", label="no speculation")
        right.axvline(s["depth"], color=COLORS["accepted"], lw=1)
        right.set(xlabel="draft depth k", ylabel="speed-up",
                  title=f"{s['speedup']:.2f}× at cost ratio {s['cost_ratio']:.3f}")
        right.legend(fontsize="small")
        plt.close(fig)
        return fig

    def _ipython_display_(self):
        from IPython.display import display

        display(self.widget)


def acceptance_explorer(**kwargs) -> AcceptanceExplorer:
    """Build an AcceptanceExplorer (display it, or its ``.widget``, in a notebook)."""
    return AcceptanceExplorer(**kwargs)


# --------------------------------------------------------------------------- in the page itself

COST_GRID = np.round(np.arange(0.0, 0.5001, 0.005), 3)  # the cost ratios the page's slider offers


def explorer_curves(rates: Sequence[float] | None, max_depth: int = 10,
                    cost_grid: Sequence[float] = COST_GRID, a: float = 0.7) -> dict:
    """What the in-page explorer draws, computed here: accept length at depths 0..max_depth
    (from the per-position rates, or i.i.d. `a` without them; a position no step reached adds
    nothing) and the speed-up at every cost ratio of the grid."""
    given = [0.0 if r is None or not np.isfinite(r) else float(r) for r in (rates or [])]
    chain = (given + [0.0] * max_depth)[:max_depth] if given else [a] * max_depth
    lengths = np.concatenate([[1.0], predict.accept_length_curve(chain)])
    depth = np.arange(max_depth + 1)
    grid = [float(c) for c in cost_grid]
    return {"depth": depth.tolist(), "accept_length": [round(float(v), 4) for v in lengths],
            "cost": grid, "speedup": [[round(float(v), 4) for v in speedup(lengths, depth, c)] for c in grid],
            "model": "per-position" if given else f"i.i.d. a = {a:.2f}", "measured_positions": len(given)}


class ExplorerHTML:
    """The acceptance-versus-depth explorer as one self-contained HTML block (inline SVG and
    JavaScript, no network), so it works in the rendered report without a kernel: a slider for the
    cost ratio and one for the depth; the best depth and the curves update in the page."""

    def __init__(self, curves: dict, depth: int, cost_ratio: float, observed=None, note: str = ""):
        self.curves, self.depth, self.note = curves, int(depth), note
        grid = curves["cost"]
        self.cost_index = int(np.argmin([abs(c - cost_ratio) for c in grid]))
        self.cost_ratio = cost_ratio
        self.observed = [] if observed is None or not len(observed) else [
            {"depth": int(d), "accept_length": float(l)}
            for d, l in zip(observed["depth"], observed["accept_length"])]

    def _repr_html_(self) -> str:
        return self.html()

    def html(self) -> str:
        import json
        import uuid

        uid = "e3x" + uuid.uuid4().hex[:8]
        data = json.dumps({**self.curves, "observed": self.observed, "depth0": self.depth,
                           "cost0": self.cost_index})
        k_max = len(self.curves["depth"]) - 1
        return _EXPLORER_TEMPLATE.replace("__UID__", uid).replace("__DATA__", data).replace(
            "__KMAX__", str(k_max)).replace("__NCOST__", str(len(self.curves["cost"]) - 1)).replace(
            "__NOTE__", self.note)


def explorer_html(rates: Sequence[float] | None, depth: int = 5, cost_ratio: float = 0.05,
                  observed=None, max_depth: int = 10) -> ExplorerHTML:
    """The in-page explorer for a notebook's served rates (display it; nbconvert keeps it)."""
    curves = explorer_curves(rates, max_depth=max(max_depth, depth))
    cost = float(np.clip(cost_ratio, COST_GRID[0], COST_GRID[-1]))
    note = (f"Curve from {curves['model']} rates ({curves['measured_positions']} measured positions; "
            f"deeper positions count as never accepted). Cost ratio starts at {cost_ratio:.3f}, the "
            "value this run measured or assumed (see above).")
    return ExplorerHTML(curves, depth, cost, observed=observed, note=note)


_EXPLORER_TEMPLATE = r"""<div class="eagle3lab-explorer" id="__UID__" style="font:14px sans-serif;max-width:760px">
<div><label>cost ratio (draft step / target step)
 <input type="range" data-role="cost" min="0" max="__NCOST__" step="1" style="width:300px"></label>
 <span data-role="cost-value"></span></div>
<div><label>depth k <input type="range" data-role="depth" min="0" max="__KMAX__" step="1"
 style="width:300px"></label> <span data-role="depth-value"></span></div>
<p data-role="summary"></p>
<svg data-role="plot" width="720" height="300" viewBox="0 0 720 300" style="background:#fff"></svg>
<p style="font-size:12px;color:#555">__NOTE__ Orange point: the observed accept length; dashed line: no speculation (1.0×). Runs in
this page: no kernel, no network.</p>
<script>
(function () {
  var D = __DATA__;
  var root = document.getElementById("__UID__");
  var q = function (r) { return root.querySelector('[data-role="' + r + '"]'); };
  var cost = q("cost"), depth = q("depth"), svg = q("plot");
  cost.value = D.cost0; depth.value = D.depth0;
  function path(xs, ys, x0, y0, w, h, ymax) {
    var kmax = xs[xs.length - 1] || 1;
    return xs.map(function (x, i) {
      return (i ? "L" : "M") + (x0 + w * x / kmax).toFixed(1) + "," + (y0 + h - h * ys[i] / ymax).toFixed(1);
    }).join(" ");
  }
  function draw() {
    var c = +cost.value, k = +depth.value, sp = D.speedup[c], L = D.accept_length;
    var best = 0;
    for (var i = 1; i < sp.length; i++) { if (sp[i] > sp[best]) best = i; }
    q("cost-value").textContent = D.cost[c].toFixed(3);
    q("depth-value").textContent = k;
    q("summary").innerHTML = "<b>expected accept length</b> <span data-role=\"accept-length\">" + L[k].toFixed(2) +
      "</span> at depth " + k + " · <b>speed-up</b> <span data-role=\"speedup\">" + sp[k].toFixed(2) +
      "</span>× · <b>best depth</b> <span data-role=\"best-depth\">" + best + "</span> (" + sp[best].toFixed(2) + "×)";
    var lmax = Math.max.apply(null, L.concat(D.observed.map(function (o) { return o.accept_length; }))) * 1.15;
    var smax = Math.max(1.2, Math.max.apply(null, sp) * 1.15);
    var w = 300, h = 220, s = "";
    [[40, "accept length", L, lmax, "#1f77b4"], [400, "speed-up", sp, smax, "#d62728"]].forEach(function (p) {
      var x0 = p[0];
      s += '<rect x="' + x0 + '" y="20" width="' + w + '" height="' + h + '" fill="none" stroke="#999"/>';
      s += '<text x="' + (x0 + 4) + '" y="14">' + p[1] + ' (0 to ' + p[3].toFixed(2) + ')</text>';
      s += '<path data-role="' + (p[1] === "speed-up" ? "speedup-curve" : "length-curve") + '" d="' +
        path(D.depth, p[2], x0, 20, w, h, p[3]) + '" fill="none" stroke="' + p[4] + '" stroke-width="2"/>';
      var xk = x0 + w * k / (D.depth.length - 1);
      s += '<line x1="' + xk + '" x2="' + xk + '" y1="20" y2="' + (20 + h) + '" stroke="#2ca02c"/>';
      D.depth.forEach(function (d) {
        var xd = x0 + w * d / (D.depth.length - 1);
        s += '<text x="' + xd + '" y="' + (20 + h + 14) + '" font-size="10" text-anchor="middle">' + d + '</text>';
      });
      s += '<text x="' + (x0 + w / 2) + '" y="' + (20 + h + 30) + '" font-size="11" text-anchor="middle">draft depth k</text>';
    });
    var y1 = 20 + 220 - 220 * 1 / smax;
    s += '<line x1="400" x2="700" y1="' + y1 + '" y2="' + y1 + '" stroke="#777" stroke-dasharray="4 3"/>';
    D.observed.forEach(function (o) {
      s += '<circle cx="' + (40 + 300 * o.depth / (D.depth.length - 1)) + '" cy="' +
        (20 + 220 - 220 * o.accept_length / lmax) + '" r="5" fill="#ff7f0e"><title>observed</title></circle>';
    });
    svg.innerHTML = s;
  }
  cost.addEventListener("input", draw); depth.addEventListener("input", draw);
  draw();
})();
</script></div>"""

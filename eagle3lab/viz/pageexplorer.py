"""The acceptance explorer in the page itself: inline SVG and JavaScript, no kernel, no network,
so it also works in the rendered report (`widgets.AcceptanceExplorer` is the live one).

It draws `explorermodel`'s numbers; its JavaScript recomputes exactly what the Python computes
when a reader changes an input (tests/test_browser_explorer.py compares them in Chromium). A
reader chooses the target: the lab's (dense, its measured step costs, the default) or a sparse-MoE
target's shape (a preset from the shipped public configs, or experts E, active K and the experts'
byte share x typed), whose verify pass grows with the union of experts its k + 1 tokens read, in
the bandwidth-bound limit (a bound, said on the page). Axes stay fixed while the inputs move.
"""

from __future__ import annotations

import html as htmlib
import json
import uuid
from dataclasses import asdict, replace
from typing import Sequence

from eagle3lab.cost.archcost import BOUND_NOTE
from eagle3lab.cost.costfit import CostCurve
from eagle3lab.cost.moecurve import preset_label, presets
from eagle3lab.viz.explorermodel import (LAB, LAB_LABEL, MOE_LABEL, chain_rates, curve_frame, length_limit,
                                         measured_from, speedup_limit, step_limit, target_curve)

DEFAULT_PRESET = "kimi-k2.5"  # the incident's target: the shape the inputs hold until a reader picks another


def explorer_curves(rates: Sequence[float] | None, max_depth: int = 10, curve: CostCurve | None = None,
                    a: float = 0.7, cost_ratio: float = 0.05, target: str = LAB) -> dict:
    """What the in-page explorer starts from, computed here (the page recomputes the same in
    JavaScript when a reader changes an input): rates, accept length, step cost, verify cost and
    speed-up at depths 0..max_depth for the starting target, the lab's cost curve's parameters and
    every preset's shape."""
    curve = curve or CostCurve.assumed(cost_ratio)
    start = curve if target == LAB else target_curve(target)
    chain = chain_rates(rates, a, max_depth)
    frame = curve_frame(chain, start)
    shapes = {name: {**asdict(c), "label": preset_label(c)} for name, c in presets().items()}
    return {"rates": [float(r) for r in chain], "a": a, "mode": "per-position" if rates is not None else "iid",
            "depth": frame["depth"].tolist(), "accept_length": [float(v) for v in frame["accept_length"]],
            "speedup": [float(v) for v in frame["speedup"]], "step_cost": [float(v) for v in frame["step_cost"]],
            "verify_cost": [float(v) for v in frame["verify_cost"]], "cost": asdict(curve),
            "target0": target, "starts_on_lab": target == LAB,
            "preset0": DEFAULT_PRESET if target == LAB else target, "targets": shapes,
            "measured_positions": 0 if rates is None else len(rates)}


class ExplorerHTML:
    """The acceptance-versus-depth explorer as one self-contained HTML block: the target (the
    lab's, or a sparse-MoE shape), acceptance (i.i.d. rate or per-position rates typed), depth and
    the step's costs as inputs; accept length, speed-up and step cost redrawn on fixed axes."""

    def __init__(self, curves: dict, depth: int, measured: dict | None = None, note: str = ""):
        self.curves, self.depth, self.measured, self.note = curves, int(depth), measured, note
        k_max = len(curves["depth"]) - 1
        start = CostCurve(**curves["cost"]) if curves["target0"] == LAB else target_curve(curves["target0"])
        self.limits = {"length": length_limit(curves["accept_length"], measured, k_max),
                       "speedup": speedup_limit(curves["speedup"], measured), "step": step_limit(start, k_max)}

    def _repr_html_(self) -> str:
        return self.html()

    def html(self) -> str:
        uid = "e3x" + uuid.uuid4().hex[:8]
        data = json.dumps({**self.curves, "depth0": self.depth, "measured": self.measured, "limits": self.limits})
        k_max = len(self.curves["depth"]) - 1
        c, t0 = self.curves["cost"], self.curves["target0"]
        draft = c["draft"] if t0 == LAB else self.curves["targets"][t0]["draft"]
        options = "".join(f'<option value="{htmlib.escape(name)}">{htmlib.escape(s["label"])}</option>'
                           for name, s in self.curves["targets"].items())
        return (_EXPLORER_TEMPLATE.replace("__UID__", uid).replace("__DATA__", data).replace("__KMAX__", str(k_max))
                .replace("__NOTE__", self.note).replace("__MOENOTE__", moe_note()).replace("__PRESETS__", options)
                .replace("__LABLABEL__", LAB_LABEL).replace("__MOELABEL__", MOE_LABEL)
                .replace("__DRAFT__", f"{draft:.3f}")
                .replace("__VERIFY__", f"{c['verify']:.3f}").replace("__GROWTH__", f"{c['growth']:.3f}")
                .replace("__RATES__", ", ".join(f"{r:.2f}" for r in self.curves["rates"]))
                .replace("__A__", f"{self.curves['a']:.2f}"))


def moe_note() -> str:
    """What the page says under a sparse-MoE target: the model, and that it is a bound."""
    return ("Sparse-MoE target, in the " + BOUND_NOTE + ". Step cost C(k) = fc + draft × k + verify(k + 1) "
            "(a chain of depth k verifies k + 1 tokens), verify(n) = (1 − x) + x · U(n) / K, "
            "U(n) = E (1 − (1 − K/E)^(1 + locality (n − 1))) distinct experts per MoE layer; x: the routed "
            "experts' share of a plain step's bytes; fc = <span data-role=\"fc\"></span> (the draft's fc, once a "
            "step). Presets: the shipped public configs, each with an assumed EAGLE-3 draft (one layer, 32k "
            "vocabulary). Speed-up of decode tokens/s.")


def explorer_html(rates: Sequence[float] | None = None, depth: int = 5, cost_ratio: float | None = None,
                  observed=None, max_depth: int = 10, curve: CostCurve | None = None, measured: dict | None = None,
                  a: float = 0.7, target: str = LAB) -> ExplorerHTML:
    """The in-page explorer (display it; nbconvert keeps it). `curve`: the lab's step costs
    (`costfit.lab_costs(records).curve()`); `measured`: the measured point (`costfit.point_for`,
    depth, accept_length, speedup, interval). Without `curve`, `cost_ratio` with a verify pass
    priced at one target step (an assumption, said in the note). `target`: the lab's ("lab", the
    default) or a preset's name to start on (`moecurve.presets`, e.g. "kimi-k2.5")."""
    if curve is None:
        curve = CostCurve.assumed(0.05 if cost_ratio is None else cost_ratio)
    # the page's inputs show 3 decimals: start from exactly what they show
    curve = replace(curve, **{f: round(float(getattr(curve, f)), 3) for f in ("draft", "verify", "growth")})
    curves = explorer_curves(rates, max_depth=max(max_depth, depth), curve=curve, a=a, target=target)
    measured = measured or measured_from(observed)
    where = (f"per-position rates ({curves['measured_positions']} measured positions; deeper positions count as "
             "never accepted)") if rates is not None else f"an i.i.d. rate a = {a:.2f}"
    kind = "total tokens/s of the report's requests, prefill included" if curve.tokens else "decode tokens/s"
    note = (f"Starts from {where}. The lab's target: step costs {curve.source} (in target steps); speed-up of "
            f"{kind}. Step cost C(k) = fixed + draft × k + verify + growth × log2(k + 1), fixed = {curve.fixed:.3f}.")
    return ExplorerHTML(curves, depth, measured=measured, note=note)


_EXPLORER_TEMPLATE = r"""<div class="eagle3lab-explorer" id="__UID__" style="font:14px sans-serif;max-width:780px;color:#111">
<div><label>target <select data-role="target"><option value="lab">__LABLABEL__</option>
<option value="moe">__MOELABEL__</option></select></label></div>
<div data-role="moe-box">shape <select data-role="preset">__PRESETS__<option value="custom">custom (as typed)</option></select>
 · <label>routed experts E <input type="number" data-role="experts" min="0" max="4096" step="1" style="width:64px"></label>
 · <label>active per token K <input type="number" data-role="active" min="0" max="4096" step="1" style="width:52px"></label>
 · <label>experts' share of a step's bytes x <input type="number" data-role="share" min="0" max="1" step="0.001" style="width:64px"></label>
 · <label>routing locality <input type="number" data-role="locality" min="0" max="1" step="0.05" value="1" style="width:52px"></label>
 (1: independent routing, the most experts) <span data-role="shape-error" style="color:#b33c00"></span></div>
<div><label>acceptance <select data-role="mode"><option value="per-position">per-position rates</option>
<option value="iid">i.i.d. rate a</option></select></label>
 <label data-role="rates-box">rates (position 1, 2, ...) <input type="text" data-role="rates" size="38" value="__RATES__"></label>
 <label data-role="a-box">a <input type="range" data-role="a" min="0" max="1" step="0.01" value="__A__" style="width:180px">
 <span data-role="a-value"></span></label> <span data-role="error" style="color:#b33c00"></span></div>
<div><label>depth k <input type="range" data-role="depth" min="1" max="__KMAX__" step="1" style="width:300px"></label>
 <span data-role="depth-value"></span></div>
<div>cost of one step, in target steps: <label>draft step <input type="range" data-role="cost" min="0" max="0.5"
 step="0.001" value="__DRAFT__" style="width:160px"></label> <span data-role="cost-value"></span>
 <span data-role="dense-box">· <label>verify pass <input type="number" data-role="verify" min="0" max="10" step="0.01" value="__VERIFY__" style="width:64px"></label>
 · <label>verify growth per doubling <input type="number" data-role="growth" min="0" max="5" step="0.005" value="__GROWTH__" style="width:64px"></label></span></div>
<p data-role="summary"></p>
<p data-role="verdict" style="font-size:13px"></p>
<svg data-role="plot" role="img" width="740" height="560" viewBox="0 0 740 560" style="background:#fff"></svg>
<p style="font-size:12px;color:#444"><span data-role="lab-note">__NOTE__</span><span data-role="moe-note">__MOENOTE__</span>
Blue: measured (with its 95 % interval; the lab's target); orange: the model; vermillion: the step cost, purple: its verify
pass (one plain step at depth 0); dashed: no speculation (1.0×, one plain step). Axes stay fixed while you move the inputs; a value above an
axis is drawn at its top. Runs in this page: no kernel, no network.</p>
<script>
(function () {
  var D = __DATA__;
  var root = document.getElementById("__UID__");
  var q = function (r) { return root.querySelector('[data-role="' + r + '"]'); };
  var K = D.depth.length - 1, C = D.cost, M = D.measured, LIM = D.limits, T = D.targets;
  var mode = q("mode"), rates = q("rates"), a = q("a"), depth = q("depth"), cost = q("cost");
  var verify = q("verify"), growth = q("growth"), svg = q("plot");
  var target = q("target"), preset = q("preset"), experts = q("experts"), active = q("active"), share = q("share");
  var locality = q("locality");
  mode.value = D.mode; depth.value = D.depth0;
  target.value = D.starts_on_lab ? "lab" : "moe"; preset.value = D.preset0;
  var good = D.rates.slice(), fc = T[D.preset0].fc, shape = null;
  function fill(p) { experts.value = p.experts; active.value = p.active; share.value = p.expert_share.toFixed(3); fc = p.fc; }
  fill(T[D.preset0]);
  function parseRates(text) {
    var parts = text.replace(/,/g, " ").split(/\s+/).filter(function (p) { return p.length; });
    if (!parts.length) { throw "type one rate per draft position, e.g. 0.8, 0.5, 0.3"; }
    var v = parts.map(Number);
    if (v.some(function (x) { return !isFinite(x); })) { throw "not numbers: " + text; }
    if (v.some(function (x) { return x < 0 || x > 1; })) { throw "each rate must be within 0 and 1"; }
    return v;
  }
  function readShape() {
    var s = {E: Number(experts.value), K: Number(active.value), x: Number(share.value), loc: Number(locality.value)};
    q("shape-error").textContent = "";
    if (!Number.isInteger(s.E) || !Number.isInteger(s.K) || s.E < 0 || s.K < 0 || (s.E > 0 && (s.K < 1 || s.K > s.E))) {
      q("shape-error").textContent = "routed experts E and active K are whole numbers, K within 1 and E (E 0: dense)";
    } else if (!(s.x >= 0 && s.x <= 1) || !(s.loc >= 0 && s.loc <= 1)) {
      q("shape-error").textContent = "the experts' share x and the locality are within 0 and 1";
    } else { shape = s; }
    return shape;
  }
  function moe() { return target.value === "moe"; }
  function union(n, s) {
    if (s.E <= 0 || s.K <= 0) { return 0; }
    var m = 1 + s.loc * (Math.max(n, 1) - 1);
    return s.E * (1 - Math.pow(1 - s.K / s.E, m));
  }
  function verifyRatio(n, s) {
    if (s.E <= 0 || s.K <= 0) { return 1; }
    return (1 - s.x) + s.x * union(n, s) / s.K;
  }
  function verifyCost(k) {
    if (k === 0) { return 1; }
    return moe() ? verifyRatio(k + 1, shape) : (+verify.value) + (+growth.value) * Math.log2(k + 1);
  }
  function chain() {
    var out = [];
    if (mode.value === "iid") { for (var i = 0; i < K; i++) { out.push(+a.value); } return out; }
    q("error").textContent = "";
    try { good = parseRates(rates.value); } catch (e) { q("error").textContent = e; }
    for (var j = 0; j < K; j++) { out.push(j < good.length ? good[j] : 0); }
    return out;
  }
  function stepCost(k) {
    if (moe()) { return fc + (+cost.value) * k + verifyRatio(k + 1, shape); }
    return C.fixed + (+cost.value) * k + (+verify.value) + (+growth.value) * Math.log2(k + 1);
  }
  function speed(L, k) {
    if (k === 0) { return 1; }
    if (!C.tokens || moe()) { return L / stepCost(k); }
    var t = C.tokens;
    return (C.prefill_base + t - 1) / (C.prefill_spec + (t - 1) / L * stepCost(k));
  }
  function nice(top) {
    var steps = [0.1, 0.2, 0.25, 0.5, 1, 2, 5, 10];
    for (var i = 0; i < steps.length; i++) { if (top / steps[i] <= 8) { return steps[i]; } }
    return 20;
  }
  function panel(x0, y0, w, ymax, label, id, ys, color) {
    var h = 220, s = "", step = nice(ymax);
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
    s += '<text x="' + x0 + '" y="' + (y0 - 7) + '" font-size="12">' + label + '</text>';
    s += '<text x="' + (x0 + w / 2) + '" y="' + (y0 + h + 32) + '" font-size="11" text-anchor="middle">draft depth k</text>';
    var line = function (vs, role, c) {
      return '<path data-role="' + role + '" d="' + vs.map(function (v, i) { return (i ? "L" : "M") + X(i).toFixed(1) + "," + Y(v).toFixed(1); }).join(" ") +
        '" fill="none" stroke="' + c + '" stroke-width="2"/>';
    };
    s += line(ys, id + "-curve", color);
    return {s: s, X: X, Y: Y, line: line};
  }
  function show() {
    q("rates-box").style.display = mode.value === "iid" ? "none" : "";
    q("a-box").style.display = mode.value === "iid" ? "" : "none";
    q("moe-box").style.display = moe() ? "" : "none";
    q("dense-box").style.display = moe() ? "none" : "";
    q("lab-note").style.display = moe() ? "none" : "";
    q("moe-note").style.display = moe() ? "" : "none";
    q("fc").textContent = fc.toFixed(4);
  }
  function verdict(sp, L) {
    if (!M || M.speedup === null || M.speedup === undefined) { return ""; }
    var changed = [];
    if (moe()) { changed.push("target"); }
    if (Math.abs(+cost.value - C.draft) > 1e-9 || Math.abs(+verify.value - C.verify) > 1e-9 ||
        Math.abs(+growth.value - C.growth) > 1e-9) { changed.push("costs"); }
    var ci = M.interval, txt = "measured " + M.speedup.toFixed(2) + "×" + (ci ? " [" + ci[0].toFixed(2) + ", " + ci[1].toFixed(2) + "]" : "");
    var m = sp[M.depth], k = +depth.value, head = "Model " + m.toFixed(2) + "× at depth " + M.depth;
    if (k !== M.depth) { return "Move the depth to " + M.depth + " to compare with the measured configuration (" + txt + ")."; }
    if (changed.length) { return head + "; " + txt + " is for the lab's own " + changed[0] + ": you changed it."; }
    if (Math.abs(L[M.depth] - M.accept_length) > 0.005) { return head + "; " + txt +
      " is for the measured accept length " + M.accept_length.toFixed(2) + ", and the acceptance here gives " + L[M.depth].toFixed(2) + "."; }
    if (!ci) { return head + ", " + txt + " (no interval: too few prompts)."; }
    return head + ", " + txt + ": " + (ci[0] <= m && m <= ci[1] ? "inside the interval." :
      "outside the interval: this run's own step costs differ from the costs calibrated on the report's configurations.");
  }
  function val(role, v, digits) { return '<span data-role="' + role + '" data-value="' + v + '">' + v.toFixed(digits) + '</span>'; }
  function draw() {
    readShape();
    var r = chain(), L = [1], acc = 1, sp = [1], sc = [1], vc = [1];
    for (var i = 0; i < K; i++) {
      acc *= r[i]; L.push(L[i] + acc); sp.push(speed(L[i + 1], i + 1)); sc.push(stepCost(i + 1)); vc.push(verifyCost(i + 1));
    }
    var k = +depth.value, best = 0;
    for (var j = 1; j <= K; j++) { if (sp[j] > sp[best]) { best = j; } }
    show();
    q("a-value").textContent = (+a.value).toFixed(2);
    q("cost-value").textContent = (+cost.value).toFixed(3);
    q("depth-value").textContent = k;
    var kind = C.tokens && !moe() ? "total tokens/s" : "decode tokens/s";
    var above = sp[k] > LIM.speedup ? " (above the axis)" : "";
    var experts = moe() && shape.E > 0 ? " reading " + val("experts-read", union(k + 1, shape), 1) + " of " + shape.E +
      " routed experts per MoE layer (" + shape.K + " for one token)" : "";
    q("summary").innerHTML = "<b>expected accept length</b> <span data-role=\"accept-length\">" + L[k].toFixed(2) +
      "</span> at depth " + k + " · <b>speed-up</b> " + val("speedup", sp[k], 2) + "× (" + kind +
      above + "; decode " + (L[k] / stepCost(k)).toFixed(2) + "×) · step cost " + val("step-cost", sc[k], 2) +
      " target steps (break-even accept length), of which the verify pass over " + (k + 1) + " tokens " +
      val("verify-cost", vc[k], 2) + experts + " · <b>best depth</b> <span data-role=\"best-depth\">" +
      best + "</span> (" + sp[best].toFixed(2) + "×)" + (moe() ? " · <i>a bandwidth-bound bound, not a measurement</i>" : "");
    q("verdict").textContent = verdict(sp, L);
    var left = panel(50, 20, 300, LIM.length, "accept length (tokens per verify step)", "length", L, "#E69F00");
    var right = panel(430, 20, 300, LIM.speedup, "speed-up (" + kind + ")", "speedup", sp, "#E69F00");
    var low = panel(50, 300, 680, LIM.step, "step cost and its verify pass (target steps" + (moe() ? "; bandwidth-bound bound" : "") + ")",
      "cost", sc, "#D55E00");
    var s = left.s + right.s + low.s + low.line(vc, "verify-curve", "#CC79A7");
    s += '<text x="560" y="316" font-size="11" fill="#D55E00">— step cost</text>' +
      '<text x="560" y="330" font-size="11" fill="#CC79A7">— its verify pass over k + 1 tokens</text>';
    [[right, 430, 730], [low, 50, 730]].forEach(function (p) {
      var y1 = p[0].Y(1);
      s += '<line x1="' + p[1] + '" x2="' + p[2] + '" y1="' + y1 + '" y2="' + y1 + '" stroke="#777" stroke-dasharray="4 3"/>';
    });
    [left, right].forEach(function (p) { s += '<line x1="' + p.X(k) + '" x2="' + p.X(k) + '" y1="20" y2="240" stroke="#009E73"/>'; });
    s += '<line x1="' + low.X(k) + '" x2="' + low.X(k) + '" y1="300" y2="520" stroke="#009E73"/>';
    if (M && !moe()) {
      s += '<circle data-role="measured-length" cx="' + left.X(M.depth) + '" cy="' + left.Y(M.accept_length) + '" r="5" fill="#0072B2"><title>measured accept length ' + M.accept_length.toFixed(2) + '</title></circle>';
      if (M.speedup !== null && M.speedup !== undefined) {
        if (M.interval) {
          s += '<line x1="' + right.X(M.depth) + '" x2="' + right.X(M.depth) + '" y1="' + right.Y(M.interval[0]) + '" y2="' + right.Y(M.interval[1]) + '" stroke="#0072B2" stroke-width="2"/>';
        }
        s += '<circle data-role="measured-speedup" cx="' + right.X(M.depth) + '" cy="' + right.Y(M.speedup) + '" r="5" fill="#0072B2"><title>measured speed-up ' + M.speedup.toFixed(2) + '</title></circle>';
      }
    }
    svg.innerHTML = s;
    svg.setAttribute("aria-label", "Accept length, speed-up (" + kind + ") and step cost against draft depth 0 to " + K +
      (moe() ? " for a sparse-MoE target (bandwidth-bound bound)" : " for the lab's target") + "; at depth " + k +
      ": accept length " + L[k].toFixed(2) + ", speed-up " + sp[k].toFixed(2) + "x, step cost " + sc[k].toFixed(2) +
      ", verify pass " + vc[k].toFixed(2) + " target steps");
  }
  function onTarget() { cost.value = moe() ? (preset.value in T ? T[preset.value].draft.toFixed(3) : cost.value) : C.draft.toFixed(3); draw(); }
  function onPreset() { if (preset.value in T) { fill(T[preset.value]); cost.value = T[preset.value].draft.toFixed(3); } draw(); }
  function onShape() { preset.value = "custom"; draw(); }
  [mode, rates, a, depth, cost, verify, growth, locality].forEach(function (el) { el.addEventListener("input", draw); el.addEventListener("change", draw); });
  [experts, active, share].forEach(function (el) { el.addEventListener("input", onShape); el.addEventListener("change", onShape); });
  target.addEventListener("change", onTarget); preset.addEventListener("change", onPreset);
  readShape(); draw();
})();
</script></div>"""

"""Interactive notebook widgets: what accept length and speed-up to expect, with your own numbers.

Both explorers draw `explorermodel`'s numbers: accept length L(k) from an acceptance (an i.i.d.
per-token rate a, or per-position conditional rates) and the cost of one speculative step in
target steps for the target a reader chooses: the lab's (dense; `costfit.CostCurve`,
C(k) = fixed + draft x k + verify + growth x log2(k + 1), calibrated on a report's measured
configurations, `costfit.lab_costs`; the default), or a sparse-MoE target's shape
(`cost.moecurve.MoeCurve`: experts E, active K, the experts' byte share x; its verify pass reads the
union of experts its k + 1 tokens route to; the bandwidth-bound limit, a bound). The measured point
(accept length, speed-up with its interval) is the lab's; the summary says whether the model's value
at the measured configuration lies in its interval, and why not when it does not.

``AcceptanceExplorer`` (ipywidgets, needs a kernel) redraws a PNG on every change;
``explorer_html`` (`pageexplorer`) is the same in the page itself (inline SVG and JavaScript, no
kernel, no network), so it also works in the rendered report. Axes stay fixed while you slide.
"""

from __future__ import annotations

import io
from typing import Sequence

import numpy as np
import pandas as pd

from eagle3lab.cost.costfit import CostCurve
from eagle3lab.cost.modelshape import ConfigError
from eagle3lab.cost.archcost import BOUND_NOTE
from eagle3lab.cost.moecurve import MoeCurve, preset_label, presets
from eagle3lab.viz.explorermodel import (LAB, LAB_LABEL, MOE_LABEL, chain_rates, curve_frame, length_limit,
                                         measured_from, measured_verdict, parse_rates, speedup, speedup_limit,
                                         step_limit, target_curve)
from eagle3lab.viz.pageexplorer import DEFAULT_PRESET, ExplorerHTML, explorer_curves, explorer_html
from eagle3lab.viz.style import COLORS, apply_style

__all__ = ["AcceptanceExplorer", "ExplorerHTML", "acceptance_explorer", "chain_rates", "curve_frame",
           "explorer_curves", "explorer_html", "lab_curve", "measured_point", "measured_verdict", "parse_rates",
           "speedup"]


class AcceptanceExplorer:
    """Accept length, speed-up and step cost versus draft depth, driven by sliders and a text box.

    Controls (stable descriptions, for code and browser tests): ``target`` (``lab``: the lab's
    dense target, or ``moe``: a sparse-MoE shape), ``preset`` (a shipped target's shape, or
    ``custom``), ``experts E``, ``active K``, ``expert share x``, ``locality``, ``model`` (``i.i.d.``
    or ``per-position``), ``a``, ``rates`` (per-position rates typed, comma-separated),
    ``p1``..``pN``, ``depth``, ``draft step``, ``verify pass``, ``verify growth`` (costs in target
    steps). ``.widget`` is the VBox to display; ``.image`` the plot; ``.summary`` the text;
    ``.state()`` the numbers. `cost_ratio` alone (no `curve`) is the old model: a verify pass costs
    one target step. `target`: "lab" (the default) or a preset's name to start on.
    """

    def __init__(self, a: float = 0.7, depth: int = 5, cost_ratio: float = 0.05,
                 rates: Sequence[float] | None = None, observed: pd.DataFrame | None = None,
                 max_depth: int = 10, curve: CostCurve | None = None, measured: dict | None = None,
                 target: str = LAB):
        import ipywidgets as w

        self.max_depth = max(max_depth, depth)
        self.curve0 = curve or CostCurve.assumed(cost_ratio)
        self.measured = measured or measured_from(observed)
        self.shapes = presets()
        shape = self.shapes[DEFAULT_PRESET] if target == LAB else target_curve(target)
        self._shape, self._fc, self._shape_error = shape, shape.fc, ""
        slider = dict(continuous_update=True, style={"description_width": "90px"}, layout=w.Layout(width="440px"))
        box = dict(style={"description_width": "90px"}, layout=w.Layout(width="240px"))
        own = lambda: {**slider, "layout": w.Layout(width="440px")}  # noqa: E731  a slider hidden on its own
        self.target = w.ToggleButtons(options=[(LAB_LABEL, LAB), (MOE_LABEL, "moe")],
                                      value=LAB if target == LAB else "moe", description="target")
        self.preset = w.Dropdown(options=[(preset_label(c), n) for n, c in self.shapes.items()] + [("custom", "custom")],
                                 value=shape.target, description="preset", style={"description_width": "90px"},
                                 layout=w.Layout(width="440px"))
        self.experts = w.BoundedIntText(value=shape.experts, min=0, max=4096, description="experts E", **box)
        self.active = w.BoundedIntText(value=shape.active, min=0, max=4096, description="active K", **box)
        self.share = w.BoundedFloatText(value=shape.expert_share, min=0.0, max=1.0, step=0.001,
                                        description="expert share x", **box)
        self.locality = w.FloatSlider(value=1.0, min=0.0, max=1.0, step=0.05, description="locality", **own())
        self.a = w.FloatSlider(value=a, min=0.0, max=1.0, step=0.01, description="a", **slider)
        self.depth = w.IntSlider(value=depth, min=1, max=self.max_depth, description="depth", **slider)
        self.cost_ratio = w.FloatSlider(value=self.curve0.draft if target == LAB else shape.draft, min=0.0, max=1.0,
                                        step=0.001, readout_format=".3f", description="draft step", **slider)
        self.verify = w.FloatSlider(value=self.curve0.verify, min=0.0, max=4.0, step=0.01, description="verify pass",
                                    **own())
        self.growth = w.FloatSlider(value=self.curve0.growth, min=0.0, max=1.0, step=0.005, readout_format=".3f",
                                    description="verify growth", **own())
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
        self.moe_box = w.VBox([self.preset, w.HBox([self.experts, self.active, self.share]), self.locality])
        self.widget = w.VBox([self.target, self.moe_box, self.model, self.a, self.positions_box, self.depth,
                              self.cost_ratio, self.verify, self.growth, self.summary, self.image])
        self.figure, self._quiet = None, False
        self._limits = self._fixed_limits()
        for control in [self.a, self.depth, self.cost_ratio, self.verify, self.growth, self.model, self.locality,
                        *self.position_sliders]:
            control.observe(self._on_change, names="value")
        for control in (self.experts, self.active, self.share):
            control.observe(self._on_shape, names="value")
        self.target.observe(self._on_target, names="value")
        self.preset.observe(self._on_preset, names="value")
        self.rates_text.observe(self._on_text, names="value")
        self.redraw()

    # -- the numbers
    def rates(self) -> np.ndarray:
        """Conditional per-position rates 1..max_depth of the current model."""
        if self.model.value == "i.i.d.":
            return np.full(self.max_depth, self.a.value)
        return np.array([s.value for s in self.position_sliders])

    @property
    def is_moe(self) -> bool:
        return self.target.value == "moe"

    def shape_curve(self) -> MoeCurve:
        """The sparse-MoE shape the inputs hold (the last valid one while they hold an invalid one)."""
        try:
            self._shape = MoeCurve(draft=self.cost_ratio.value, experts=int(self.experts.value),
                                   active=int(self.active.value), expert_share=float(self.share.value),
                                   locality=float(self.locality.value), fc=self._fc, target=self.preset.value)
            self._shape_error = ""
        except ConfigError as exc:
            self._shape_error = str(exc)
        return self._shape

    def cost_curve(self) -> CostCurve | MoeCurve:
        if self.is_moe:
            return self.shape_curve()
        c = self.curve0
        return CostCurve(draft=self.cost_ratio.value, verify=self.verify.value, growth=self.growth.value,
                         fixed=c.fixed, prefill_base=c.prefill_base, prefill_spec=c.prefill_spec, tokens=c.tokens,
                         source=c.source)

    def curve(self) -> pd.DataFrame:
        """DataFrame(depth, accept_length, step_cost, verify_cost, speedup, decode_speedup), depths 0..max_depth."""
        return curve_frame(self.rates(), self.cost_curve())

    def state(self) -> dict:
        curve = self.curve()
        k = self.depth.value
        best = curve.loc[curve["speedup"].idxmax()]
        out = {"target": self.target.value, "model": self.model.value, "a": self.a.value, "depth": k,
               "cost_ratio": self.cost_ratio.value, "verify": self.verify.value, "growth": self.growth.value,
               "accept_length": float(curve.loc[k, "accept_length"]), "step_cost": float(curve.loc[k, "step_cost"]),
               "verify_cost": float(curve.loc[k, "verify_cost"]),
               "speedup": float(curve.loc[k, "speedup"]), "decode_speedup": float(curve.loc[k, "decode_speedup"]),
               "best_depth": int(best["depth"]), "best_speedup": float(best["speedup"])}
        if self.is_moe:
            shape = self.shape_curve()
            out.update(preset=self.preset.value, experts=shape.experts, active=shape.active,
                       expert_share=shape.expert_share, locality=shape.locality, fc=shape.fc,
                       experts_read=float(shape.experts_read(k)))
        return out

    @property
    def kind(self) -> str:
        return "decode" if self.is_moe else self.curve0.kind

    def _changed(self) -> str:
        if self.is_moe:
            return "target"
        c = self.curve0
        cost = any(abs(x - y) > 1e-9 for x, y in ((self.cost_ratio.value, c.draft), (self.verify.value, c.verify),
                                                  (self.growth.value, c.growth)))
        return "costs" if cost else ""

    # -- reacting
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

    def _set_quietly(self, **values) -> None:
        self._quiet = True
        try:
            for name, value in values.items():
                getattr(self, name).value = value
        finally:
            self._quiet = False

    def _on_target(self, _change=None) -> None:
        """The draft step follows the target: the lab's, or the chosen preset's."""
        preset = self.shapes.get(self.preset.value)
        if not self.is_moe:
            self._set_quietly(cost_ratio=self.curve0.draft)
        elif preset is not None:
            self._set_quietly(cost_ratio=preset.draft)
        self.redraw()

    def _on_preset(self, change) -> None:
        preset = self.shapes.get(change["new"])
        if preset is not None:
            self._fc = preset.fc
            self._set_quietly(experts=preset.experts, active=preset.active, share=preset.expert_share,
                              cost_ratio=preset.draft)
        self.redraw()

    def _on_shape(self, _change=None) -> None:
        if self._quiet:
            return
        self._set_quietly(preset="custom")
        self.redraw()

    def _fixed_limits(self) -> tuple[float, float, float]:
        """Axes fixed at construction, so they do not move while sliding (`explorermodel`)."""
        curve = self.curve()
        return (length_limit(curve["accept_length"], self.measured, self.max_depth),
                speedup_limit(curve["speedup"], self.measured), step_limit(self.cost_curve(), self.max_depth))

    # -- drawing
    def redraw(self) -> None:
        s = self.state()
        self.positions_box.layout.display = "none" if self.model.value == "i.i.d." else None
        self.moe_box.layout.display = None if self.is_moe else "none"
        for control in (self.verify, self.growth):  # the lab's verify pass: no input of a shape's
            control.layout.display = "none" if self.is_moe else None
        verdict = ""
        if self.measured and s["depth"] == self.measured.get("depth"):
            verdict = " · " + measured_verdict(s["speedup"], self.measured, self._changed(), s["accept_length"])
        experts = ""
        if self.is_moe and s["experts"]:
            experts = (f" reading {s['experts_read']:.1f} of {s['experts']} routed experts per MoE layer "
                       f"({s['active']} for one token)")
        shape = ""
        if self.is_moe:
            error = f" <b>shape:</b> {self._shape_error} (drawn: the last valid shape)." if self._shape_error else ""
            shape = f"<br><i>Sparse-MoE target ({s['preset']}), in the {BOUND_NOTE}.</i>{error}"
        self.summary.value = (
            f"<b>expected accept length</b> {s['accept_length']:.2f} at depth {s['depth']} · "
            f"<b>speed-up</b> {s['speedup']:.2f}× ({self.kind} tokens/s; decode {s['decode_speedup']:.2f}×) · "
            f"step cost {s['step_cost']:.2f} target steps, of which the verify pass over {s['depth'] + 1} tokens "
            f"{s['verify_cost']:.2f}{experts} · best depth {s['best_depth']} ({s['best_speedup']:.2f}×){verdict}{shape}")
        self.figure = self._plot(s)
        buffer = io.BytesIO()
        self.figure.savefig(buffer, format="png", dpi=80)
        self.image.value = buffer.getvalue()

    def _plot(self, s: dict):
        apply_style()
        import matplotlib.pyplot as plt

        curve = self.curve()
        lmax, smax, cmax = self._limits
        fig, (left, right, low) = plt.subplots(1, 3, figsize=(15, 4.2))
        left.plot(curve["depth"], curve["accept_length"], color=COLORS["model"], marker="o", ms=3, label="model")
        left.plot(curve["depth"], curve["depth"] + 1, color=COLORS["baseline"], ls=":", lw=1, label="ceiling k + 1")
        right.plot(curve["depth"], curve["speedup"].clip(upper=smax), color=COLORS["model"], marker="o", ms=3,
                   label=f"model ({self.kind} tokens/s)")
        bound = " (bandwidth-bound bound)" if self.is_moe else ""
        low.plot(curve["depth"], curve["step_cost"].clip(upper=cmax), color=COLORS["rejected"], marker="o", ms=3,
                 label="step cost" + bound)
        low.plot(curve["depth"], curve["verify_cost"].clip(upper=cmax), color=COLORS["bonus"], marker="o", ms=3,
                 label=f"verify pass over k + 1 tokens{bound}")
        if self.measured and not self.is_moe:
            m = self.measured
            left.scatter([m["depth"]], [m["accept_length"]], s=45, zorder=5, color=COLORS["observed"], label="observed")
            if m.get("speedup") is not None:
                ci = m.get("interval")
                yerr = None if not ci else [[m["speedup"] - ci[0]], [ci[1] - m["speedup"]]]
                right.errorbar([m["depth"]], [m["speedup"]], yerr=yerr, fmt="o", capsize=3, color=COLORS["observed"],
                               label="measured, 95 % interval", zorder=5)
        right.axhline(1.0, color=COLORS["baseline"], ls="--", label="no speculation")
        for ax in (left, right, low):
            ax.axvline(s["depth"], color=COLORS["accepted"], lw=1)
            ax.set_xlim(0, self.max_depth)
            ax.set_xticks(range(self.max_depth + 1))
        left.set(xlabel="draft depth k", ylabel="accept length", ylim=(0, lmax),
                 title=f"E[L] = {s['accept_length']:.2f} at k = {s['depth']}")
        right.set(xlabel="draft depth k", ylabel="speed-up", ylim=(0, smax),
                  title=f"{s['speedup']:.2f}× at step cost {s['step_cost']:.2f}")
        low.set(xlabel="draft depth k", ylabel="target steps", ylim=(0, cmax),
                title=f"verify {s['verify_cost']:.2f} of step {s['step_cost']:.2f}" + bound)
        for ax in (left, right, low):
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

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

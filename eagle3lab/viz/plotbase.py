"""What every eagle3lab figure shares: input checks, figure set-up, interval error bars capped at
the axis, alt text, and the check that no label is drawn over a marker or an error bar
(`label_overlaps`, run on every figure by tests/test_plots.py)."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from eagle3lab.errors import EagleLabError
from eagle3lab.viz.style import apply_style, set_alt

LABEL_GAP_PT = 6  # points between an error bar's end (its cap reaches 3 points past it) and a label


class PlotError(EagleLabError):
    """A DataFrame without the columns a plot needs."""


def need(df: pd.DataFrame, columns: Sequence[str], what: str) -> None:
    missing = [c for c in columns if c not in df]
    if missing:
        raise PlotError(f"{what} needs columns {missing}; got {list(df.columns)}")


def figure(nrows: int = 1, ncols: int = 1, **kwargs):
    apply_style()
    import matplotlib.pyplot as plt

    return plt.subplots(nrows, ncols, **kwargs)


def close(fig, alt: str | None = None):
    """Detach from pyplot so figures do not pile up (notebooks still display the returned Figure),
    with its alt text."""
    import matplotlib.pyplot as plt

    plt.close(fig)
    return set_alt(fig, alt) if alt else fig


def ci_errors(table, value: str):
    """Error-bar lengths [below, above] from `<value>_ci95` (None when the table has none)."""
    col = f"{value}_ci95"
    if col not in table:
        return None
    below, above = [], []
    for v, ci in zip(table[value], table[col]):
        has = isinstance(ci, (list, tuple)) and len(ci) == 2 and v == v
        below.append(max(0.0, v - ci[0]) if has else 0.0)
        above.append(max(0.0, ci[1] - v) if has else 0.0)
    return np.array([below, above])


def axis_cap(values, errors, factor: float = 2.0) -> float:
    """Where a value axis ends: the highest interval end, unless that is more than `factor` times
    the highest value (a handful of prompts gives intervals of thousands): then factor x value."""
    values = np.asarray(values, dtype=float)
    top = float(np.nanmax(values)) if values.size and np.isfinite(values).any() else 1.0
    if errors is None:
        return top
    ends = values + np.asarray(errors[1], dtype=float)
    end = float(np.nanmax(ends)) if np.isfinite(ends).any() else top
    return min(end, factor * top) if top > 0 else end


def capped(values, errors, cap: float):
    """Error bars cut at `cap` and the positions whose interval went past it (drawn with an
    arrow-head marker at the cap, so a cut interval is not read as a closed one)."""
    if errors is None:
        return None, np.zeros(len(values), dtype=bool)
    values = np.asarray(values, dtype=float)
    above = np.asarray(errors[1], dtype=float)
    cut = values + above > cap
    return np.array([errors[0], np.where(cut, np.maximum(cap - values, 0.0), above)]), cut


def interval_text(ci) -> str:
    return f" [{ci[0]:.2f}, {ci[1]:.2f}]" if isinstance(ci, (list, tuple)) and len(ci) == 2 else ""


# --------------------------------------------------------------------------- the overlap check

def label_overlaps(fig, pad_px: float = 0.0) -> list[str]:
    """Texts (annotations, legends inside an axes) drawn over a marker or an error bar, as
    "text / what it covers" strings; empty when every label is clear."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)  # a closed figure's
    canvas.draw()
    renderer = canvas.get_renderer()
    found = []
    for ax in fig.axes:
        obstacles = _markers(ax) + _error_bars(ax)
        for label, box in _labels(ax, renderer):
            box = box.padded(pad_px)
            for what, other in obstacles:
                if box.overlaps(other):
                    found.append(f"{label!r} / {what}")
                    break
    return found


def _labels(ax, renderer):
    out = [(t.get_text(), t.get_window_extent(renderer)) for t in ax.texts if t.get_visible() and t.get_text()]
    legend = ax.get_legend()
    if legend is not None and legend.get_visible():
        box = legend.get_window_extent(renderer)
        if box.overlaps(ax.get_window_extent(renderer)):
            out.append(("legend", box))
    return out


def _square(x, y, size_px):
    from matplotlib.transforms import Bbox

    h = size_px / 2
    return Bbox([[x - h, y - h], [x + h, y + h]])


def _markers(ax):
    """A box per drawn marker (lines with markers, scatter points), in display pixels."""
    px = ax.figure.dpi / 72
    out = []
    for line in ax.lines:
        if not line.get_visible() or line.get_marker() in (None, "", "None", " "):
            continue
        xy = ax.transData.transform(np.column_stack([line.get_xdata(), line.get_ydata()]).astype(float))
        for x, y in xy[np.isfinite(xy).all(axis=1)]:
            out.append((f"marker of {line.get_label()!r}", _square(x, y, line.get_markersize() * px)))
    for coll in ax.collections:
        offsets = getattr(coll, "get_offsets", lambda: [])()
        sizes = getattr(coll, "get_sizes", lambda: [])()
        if type(coll).__name__ != "PathCollection" or not len(offsets):
            continue
        xy = coll.get_offset_transform().transform(np.asarray(offsets, dtype=float))
        for i, (x, y) in enumerate(xy):
            if np.isfinite([x, y]).all():
                size = np.sqrt(sizes[i % len(sizes)]) * px if len(sizes) else 6 * px
                out.append(("scatter point", _square(x, y, size)))
    return out


def _error_bars(ax):
    """A box per error-bar segment (LineCollections of ax.errorbar / bar(xerr=...))."""
    from matplotlib.transforms import Bbox

    out = []
    for coll in ax.collections:
        if type(coll).__name__ != "LineCollection":
            continue
        for seg in coll.get_segments():
            xy = coll.get_transform().transform(np.asarray(seg, dtype=float))
            if len(xy) and np.isfinite(xy).all():
                out.append(("error bar", Bbox([xy.min(axis=0) - 1, xy.max(axis=0) + 1])))
    return out

"""Plots of acceptance and speed: each function takes the DataFrames eagle3lab returns and
returns the matplotlib Figure, with alt text that says what it shows (one style: eagle3lab.viz.style;
shared helpers and the label-overlap check: eagle3lab.viz.plotbase). The speed figures live in
`eagle3lab.viz.speedplots` and the token view in `eagle3lab.viz.tokenview`; both are re-exported here.
Legends sit outside the axes (or where no marker is), labels clear of markers and error bars."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from eagle3lab.acceptance import predict
from eagle3lab.viz.plotbase import PlotError, ci_errors as _ci_errors, close as _close, figure as _figure  # noqa: F401
from eagle3lab.viz.plotbase import label_overlaps, need as _need  # noqa: F401
from eagle3lab.viz.speedplots import (_interval_errors, fault_plot, load_speedup, prediction_plot,  # noqa: F401
                                  speed_plot, speedup_vs_depth)
from eagle3lab.viz.style import COLORS, palette
from eagle3lab.viz.tokenview import (TOKEN_KINDS, token_html, token_view, tokens_from_generation,  # noqa: F401
                                 tokens_from_steps)

_BELOW = {"loc": "upper center", "bbox_to_anchor": (0.5, -0.2), "frameon": False}  # a legend under the axes


def _with_depth(df: pd.DataFrame) -> pd.DataFrame:
    """A ``depth`` column from loadtest.sweep's effective_num_steps / num_steps when missing."""
    if df is None or "depth" in df:
        return df
    for col in ("effective_num_steps", "num_steps", "k"):
        if col in df and df[col].notna().any():
            return df.assign(depth=df[col])
    return df


# --------------------------------------------------------------------------- acceptance vs depth

def accept_vs_depth(observed: pd.DataFrame | None = None, a: float | Sequence[float] = (0.6, 0.7, 0.8, 0.9),
                    rates: Sequence[float] | None = None, max_depth: int = 8, title: str | None = None):
    """Accept length against draft depth: i.i.d. model curves for each a, the curve of given
    per-position rates, and observed points (DataFrame(depth, accept_length[, lo, hi, label]))."""
    fig, ax = _figure()
    depth = np.arange(0, max_depth + 1)
    a_values = [a] if np.isscalar(a) else list(a)
    shades = np.linspace(0.35, 1.0, max(len(a_values), 1))
    for shade, value in zip(shades, a_values):
        ax.plot(depth, predict.expected_accept_length(value, depth), color=COLORS["model"],
                alpha=float(shade), lw=1.5, label=f"i.i.d. a = {value:.2f}")
    if rates is not None:
        curve = np.concatenate([[1.0], predict.accept_length_curve(rates)])
        ax.plot(np.arange(len(curve)), curve, color=COLORS["model"], ls="--", marker="s", ms=4,
                label="from per-position rates")
    observed = _with_depth(observed)
    if observed is not None and len(observed):
        _need(observed, ["depth", "accept_length"], "observed points")
        groups = observed.groupby("label") if "label" in observed else [(None, observed)]
        for label, group in groups:
            yerr = None
            if {"lo", "hi"} <= set(group.columns):
                yerr = np.vstack([group["accept_length"] - group["lo"], group["hi"] - group["accept_length"]])
            ax.errorbar(group["depth"], group["accept_length"], yerr=yerr, fmt="o", ms=7, capsize=3,
                        color=COLORS["observed"] if label is None else None,
                        label="observed" if label is None else str(label), zorder=5)
    ax.plot(depth, depth + 1, color=COLORS["baseline"], ls=":", lw=1, label="ceiling k + 1")
    ax.set(xlabel="draft depth k (draft steps; k + 1 draft tokens verified per step)",
           ylabel="accept length (incl. bonus)",
           title=title or "Accept length vs draft depth", xlim=(0, max_depth), ylim=(0.9, None))
    ax.legend(fontsize="small", ncol=3, **_BELOW)
    seen = "" if observed is None or not len(observed) else "; observed: " + ", ".join(
        f"{v:.2f} at depth {int(d)}" for d, v in zip(observed["depth"], observed["accept_length"]))
    return _close(fig, f"{title or 'Accept length against draft depth'}: the i.i.d. chain model's accept length "
                       f"for a = {', '.join(f'{v:.2f}' for v in a_values)}"
                       + (" and the curve of the given per-position rates" if rates is not None else "")
                       + f", under the ceiling k + 1{seen}.")


# --------------------------------------------------------------------------- per position

def per_position_bars(per_position: pd.DataFrame, standalone: Sequence[float] | None = None,
                      title: str | None = None, conditional: bool = True):
    """Per-position acceptance bars with CI whiskers; ``label`` column = one bar group per run;
    standalone acc@i drawn as markers to show where serving loses acceptance."""
    _need(per_position, ["position", "rate"], "per-position bars")
    fig, ax = _figure()
    groups = list(per_position.groupby("label", sort=False)) if "label" in per_position \
        else [(None, per_position)]
    width = 0.8 / len(groups)
    colors = palette(len(groups))
    for i, (label, group) in enumerate(groups):
        x = group["position"].to_numpy() + (i - (len(groups) - 1) / 2) * width
        yerr = None
        if {"lo", "hi"} <= set(group.columns):
            yerr = np.vstack([(group["rate"] - group["lo"]).clip(lower=0),
                              (group["hi"] - group["rate"]).clip(lower=0)])
        ax.bar(x, group["rate"], width=width * 0.95, yerr=yerr, capsize=3,
               color=COLORS["observed"] if label is None else colors[i],
               label=("served, " + ("conditional" if conditional else "at least i")) if label is None
               else str(label))
        _mark_no_data(ax, x, group)
    served = "served: P(accept | earlier accepted)" if conditional else "served: P(at least i accepted)"
    if standalone is not None:
        pos = np.arange(1, len(standalone) + 1)
        ax.plot(pos, standalone, color=COLORS["model"], marker="D", ls="--",
                label="standalone acc@i (teacher-forced accuracy, not conditional)")
    ax.set(xlabel="draft position", ylim=(0, 1.05), title=title or "Acceptance by draft position",
           ylabel=served if standalone is None else served + "\nor acc@i (see legend)")
    ax.set_xticks(sorted(per_position["position"].unique()))
    ax.legend(fontsize="small", ncol=2, **_BELOW)
    rates = ", ".join(f"{r:.2f}" if r == r else "no data" for r in per_position["rate"])
    return _close(fig, f"{title or 'Acceptance by draft position'}: bars of the served "
                       f"{'conditional' if conditional else 'at-least-i'} acceptance at each draft position "
                       f"({rates}) with 95 % intervals" + (", and the draft's standalone acc@i as diamonds"
                                                             if standalone is not None else "") + ".")


def _mark_no_data(ax, x, group) -> None:
    """Write "no data (n = 0)" where no step reached a position (drawn as missing, never as 0)."""
    ns = group["n"].to_numpy() if "n" in group else np.full(len(group), np.nan)
    for xi, rate, n in zip(x, group["rate"], ns):
        if rate != rate or (n == n and int(n) == 0):
            ax.annotate("no data\n(n = 0)", (xi, 0.02), ha="center", va="bottom", fontsize="x-small",
                        color="0.35")


def gap_plot(gap: pd.DataFrame, title: str | None = None, n: Sequence[int] | None = None):
    """Standalone vs served acceptance and the accept length each position loses (gap_table);
    `n` (steps at risk per position): a position with n = 0 is drawn as missing, not as 0."""
    _need(gap, ["position", "standalone", "served", "lost"], "gap plot")
    fig, (left, right) = _figure(1, 2, figsize=(11, 4))
    served = gap["served"].to_numpy(float).copy()
    if n is not None:
        counts = np.asarray(list(n)[:len(served)] + [0] * max(0, len(served) - len(list(n))), float)
        served[counts == 0] = np.nan
        _mark_no_data(left, gap["position"], pd.DataFrame({"rate": served, "n": counts}))
    left.plot(gap["position"], gap["standalone"], marker="D", color=COLORS["model"],
              label="standalone acc@i (teacher-forced, not conditional)")
    left.plot(gap["position"], served, marker="o", color=COLORS["observed"], label="served, conditional")
    left.set(xlabel="draft position", ylabel="rate at position i (see legend)", ylim=(0, 1.05),
             title="Per position")
    left.set_xticks(list(gap["position"]))
    left.legend(fontsize="small", **_BELOW)
    diff = -gap["lost"]  # served minus standalone-predicted, per position's term
    right.bar(gap["position"], diff, color=[COLORS["accepted"] if d >= 0 else COLORS["rejected"] for d in diff])
    right.axhline(0, color="0.3", lw=0.8)
    total = float(diff.sum())
    right.set(xlabel="draft position", ylabel="served − predicted (tokens/step)",
              title=f"Served {'above' if total >= 0 else 'below'} the acc@k prediction by "
                    f"{abs(total):.2f} tokens/step\n(prediction reads each acc@i as a conditional rate)")
    fig.suptitle(title or "Standalone acc@k (teacher-forced) vs served acceptance: different measures",
                 fontweight="bold")
    fig.tight_layout()
    return _close(fig, f"Left: the draft's standalone acc@i and the served conditional rate at each of "
                       f"{len(gap)} positions. Right: per position, how far the served accept length's term "
                       f"lies from the standalone prediction; in all, served is {abs(total):.2f} tokens per "
                       f"step {'above' if total >= 0 else 'below'} it.")


# --------------------------------------------------------------------------- logs over time

def log_timeline(log: pd.DataFrame, title: str | None = None):
    """Accept length and generation throughput over time from read_log rows.

    Each series is drawn from the lines that carry it (vLLM prints throughput and acceptance
    on different lines); x is the log time when every row has one, else the line number.
    """
    series = [c for c in ("accept_len", "gen_throughput") if c in log and log[c].notna().any()]
    if not series:
        raise PlotError("no log line carries an accept length or a generation throughput")
    # Log timestamps are whole seconds, so many lines share one: plot against the order of the
    # lines (one point per logged batch) with a rolling mean, and a histogram beside it.
    fig, axes = _figure(len(series), 2, figsize=(11, 1.6 + 2.4 * len(series)),
                        gridspec_kw={"width_ratios": [3, 1]}, squeeze=False)
    for (ax, hist), col in zip(axes, series):
        rows = log[log[col].notna()]
        y = rows[col].astype(float).to_numpy()
        x = np.arange(1, len(y) + 1)
        color = COLORS["observed"] if col == "accept_len" else COLORS["accepted"]
        ax.plot(x, y, color=color, marker=".", lw=0, alpha=0.6, label="one logged batch")
        window = max(3, len(y) // 10)
        if len(y) >= window:
            rolling = pd.Series(y).rolling(window, center=True, min_periods=1).mean()
            ax.plot(x, rolling, color=COLORS["model"], lw=2, label=f"rolling mean of {window}")
        label = "accept length" if col == "accept_len" else "gen throughput (tok/s)"
        ax.set(ylabel=label)
        ax.legend(fontsize="small", loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=2, frameon=False)
        hist.hist(y, bins=min(20, max(5, len(y) // 3)), orientation="horizontal", color=color, alpha=0.8)
        mean = float(y.mean())
        hist.axhline(mean, color=COLORS["model"], ls="--", lw=1)
        hist.set(xlabel="logged batches", title=f"mean {mean:.2f} (n={len(y)})")
        hist.sharey(ax)
    axes[-1][0].set(xlabel="logged batch (in log order)")
    fig.suptitle(title or "Accept length and throughput, batch by batch", fontweight="bold")
    fig.tight_layout()
    means = "; ".join(f"{'accept length' if c == 'accept_len' else 'generation throughput'} mean "
                      f"{float(log[c].dropna().astype(float).mean()):.2f} over {int(log[c].notna().sum())} batches"
                      for c in series)
    return _close(fig, f"{title or 'Accept length and throughput, batch by batch'}: each logged batch in log "
                       f"order with a rolling mean, and a histogram beside it; {means}.")


# --------------------------------------------------------------------------- speed

def throughput_vs_depth(table: pd.DataFrame, baseline_tokens_per_s: float | None = None,
                        observed: pd.DataFrame | None = None, title: str | None = None):
    """Tokens/s against depth (predict.throughput_vs_depth or a sweep) with the no-spec baseline:
    one baseline for every point, which is right for a model's prediction (one plain step cost)
    and for a sweep whose points all divide by the same no-speculation run."""
    table, observed = _with_depth(table), _with_depth(observed)
    _need(table, ["depth", "tokens_per_s"], "tokens/s vs depth")
    if baseline_tokens_per_s is None and "baseline_tokens_per_s" in table:
        baseline_tokens_per_s = float(table["baseline_tokens_per_s"].iloc[0])
    fig, ax = _figure()
    groups = table.groupby("label", sort=False) if "label" in table else [(None, table)]
    for label, group in groups:
        ax.plot(group["depth"], group["tokens_per_s"], marker="o",
                color=COLORS["model"] if label is None else None,
                label="predicted" if label is None else str(label))
        best = group.loc[group["tokens_per_s"].idxmax()]
        ax.annotate(f"best k={int(best['depth'])}", (best["depth"], best["tokens_per_s"]),
                    textcoords="offset points", xytext=(0, 8), ha="center", fontsize="small")
    if observed is not None and len(observed):
        _need(observed, ["depth", "tokens_per_s"], "observed tokens/s")
        ax.scatter(observed["depth"], observed["tokens_per_s"], color=COLORS["observed"], zorder=5,
                   label="measured")
    if baseline_tokens_per_s:
        ax.axhline(baseline_tokens_per_s, color=COLORS["baseline"], ls="--", label="no speculation")
    ax.set(xlabel="draft depth k", ylabel="tokens/s", title=title or "Tokens/s vs draft depth")
    ax.set_ylim(0, max(table["tokens_per_s"].max(), baseline_tokens_per_s or 0) * 1.15)
    ax.legend(fontsize="small", ncol=3, **_BELOW)
    best = table.loc[table["tokens_per_s"].idxmax()]
    return _close(fig, f"{title or 'Tokens/s against draft depth'}: tokens/s at each depth, highest "
                       f"{best['tokens_per_s']:.1f} at depth {int(best['depth'])}"
                       + (f", against {baseline_tokens_per_s:.1f} without speculation" if baseline_tokens_per_s else "")
                       + ".")


def sweep_heatmap(sweep: pd.DataFrame, x: str = "num_steps", y: str = "topk",
                  value: str = "accept_length", title: str | None = None, fmt: str = ".2f"):
    """A heatmap of one sweep metric (accept length, speed-up, tokens/s) over two knobs."""
    _need(sweep, [x, y, value], "sweep heatmap")
    import seaborn as sns

    grid = sweep.pivot_table(index=y, columns=x, values=value, aggfunc="mean").sort_index(ascending=False)
    fig, ax = _figure()
    center = 1.0 if value in ("speedup", "speed_up") else None
    sns.heatmap(grid, annot=True, fmt=fmt, cmap="vlag_r" if center else "cividis", center=center,
                ax=ax, cbar_kws={"label": value})
    ax.set(title=title or f"{value} by {y} and {x}")
    return _close(fig, f"{title or value + ' by ' + y + ' and ' + x}: a heatmap of {value} over {y} (rows) and "
                       f"{x} (columns), each cell written in it.")


# --------------------------------------------------------------------------- notebook figures

def wiring_heatmap(matrix, trained, served, title: str):
    """The cosine matrix between the training capture (rows) and the served capture (columns),
    labelled by slot and boundary, with the intended pairing (slot i with slot i) outlined."""
    import matplotlib.patches as mpatches
    import seaborn as sns

    trained, served = list(trained), list(served)
    rows = [f"slot {i}: b={b}" for i, b in enumerate(trained)]  # from 0, as in the wiring table
    cols = [f"slot {i}: b={b}" for i, b in enumerate(served)]
    grid = pd.DataFrame(matrix.loc[trained, served].to_numpy(), index=rows, columns=cols)
    fig, ax = _figure(figsize=(2.2 + 1.9 * len(cols), 1.4 + 0.9 * len(rows)))
    sns.heatmap(grid, ax=ax, vmin=-1, vmax=1, cmap="vlag", annot=True, fmt=".2f",
                cbar_kws={"label": "mean cosine over tokens"}, annot_kws={"size": 12})
    for i in range(min(len(rows), len(cols))):
        ax.add_patch(mpatches.Rectangle((i, i), 1, 1, fill=False, lw=2.5, ec="black"))
    ax.set_xlabel("served capture (slot: boundary the server feeds)")
    ax.set_ylabel("training capture (slot: boundary trained on)")
    ax.tick_params(axis="x", rotation=0)
    ax.tick_params(axis="y", rotation=0)
    ax.set_title(title + "\n(outlined: the pairing the draft expects, slot i with slot i)", fontsize=11)
    fig.tight_layout()
    diag = ", ".join(f"slot {i}: {grid.iat[i, i]:.2f}" for i in range(min(len(rows), len(cols))))
    return _close(fig, f"{title}: mean cosine similarity between the hidden states each draft slot was trained "
                       f"on (rows, boundaries {trained}) and those the server feeds (columns, boundaries {served}); "
                       f"on the intended pairing {diag}.")


def show_matrix(matrix, rows: str, columns: str, title: str):
    """Heatmap of a wiring_matrix with labelled axes (eagle3lab.wiring.slots.plot_wiring_matrix)."""
    import matplotlib.pyplot as plt

    from eagle3lab.wiring.slots import plot_wiring_matrix

    matrix = matrix.copy()
    matrix.index.name, matrix.columns.name = rows, columns
    ax = plot_wiring_matrix(matrix, title=title)
    fig = ax.figure
    plt.close(fig)
    return _close(fig, f"{title}: a heatmap of {rows} (rows) against {columns} (columns).")


def accuracy_plot(accuracy, title: str = "Standalone accuracy by unrolled depth"):
    """acc@1..k per wiring (evaluate_draft's frames, with a `wiring` column)."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    from eagle3lab.viz.style import apply_style

    apply_style()
    fig, ax = plt.subplots()
    sns.barplot(data=accuracy, x="depth", y="accuracy", hue="wiring", ax=ax)
    ax.set(ylim=(0, 1), xlabel="unrolled depth j", ylabel="top-1 accuracy (acc@j)", title=title)
    ax.legend(fontsize="small", title=None, ncol=2, **_BELOW)
    first = accuracy[accuracy["depth"] == accuracy["depth"].min()]
    at1 = ", ".join(f"{w}: {a:.2f}" for w, a in zip(first["wiring"], first["accuracy"]))
    return _close(fig, f"{title}: top-1 accuracy at each unrolled depth, one bar per wiring; at the first "
                       f"depth {at1}.")




def training_curve_plot(curves: dict, goal: float | None = None,
                        title: str = "Accept length at 5/1/6 against training tokens"):
    """Accept length (95 % interval) of each draft against the response tokens it trained on
    (`RealLab.training_curve`), log x; a dashed line at `goal`. Shows whether more training is
    what the draft lacks."""
    import matplotlib.pyplot as plt

    from eagle3lab.viz.style import apply_style

    apply_style()
    fig, ax = plt.subplots()
    colors = palette(len(curves))
    for (name, points), color in zip(curves.items(), colors):
        x = [p["training_tokens"] for p in points]
        y = [p["accept_length"] for p in points]
        err = np.array([[p["accept_length"] - p["ci95"][0] for p in points],
                        [p["ci95"][1] - p["accept_length"] for p in points]])
        ax.errorbar(x, y, yerr=err, marker="o", capsize=3, color=color, label=name)
    ax.set_xscale("log")
    ticks = sorted({p["training_tokens"] for pts in curves.values() for p in pts})
    ax.set_xticks(ticks, [f"{t / 1000:.0f}k" for t in ticks])
    ax.minorticks_off()
    if goal is not None:
        ax.axhline(goal, ls="--", color="0.4", lw=1)
        ax.annotate(f"goal {goal:g}", (0.02, goal), xycoords=("axes fraction", "data"), xytext=(0, -12),
                    textcoords="offset points", fontsize="small", color="0.3")
    top = max([goal or 0] + [p["ci95"][1] for pts in curves.values() for p in pts])
    ax.set(ylim=(1.0, top + 0.1), xlabel="training tokens (response tokens seen, log scale)",
           ylabel="accept length (tokens per verify step)", title=title)
    ax.legend(fontsize="small", title=None, ncol=len(curves), **_BELOW)
    last = ", ".join(f"{n}: {pts[-1]['accept_length']:.2f} at {pts[-1]['training_tokens']:,} tokens"
                     for n, pts in curves.items())
    return _close(fig, f"{title}, one line per draft with 95 % intervals; the last points: {last}.")

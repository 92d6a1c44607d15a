"""Plots of acceptance and speed: each function takes the DataFrames eagle3lab returns and
returns the matplotlib Figure (one style: eagle3lab.style)."""

from __future__ import annotations

import html as _html
from typing import Sequence

import numpy as np
import pandas as pd

from eagle3lab import predict
from eagle3lab.errors import EagleLabError
from eagle3lab.style import COLORS, apply_style


class PlotError(EagleLabError):
    """A DataFrame without the columns a plot needs."""


def _need(df: pd.DataFrame, columns: Sequence[str], what: str) -> None:
    missing = [c for c in columns if c not in df]
    if missing:
        raise PlotError(f"{what} needs columns {missing}; got {list(df.columns)}")


def _with_depth(df: pd.DataFrame) -> pd.DataFrame:
    """A ``depth`` column from loadtest.sweep's effective_num_steps / num_steps when missing."""
    if df is None or "depth" in df:
        return df
    for col in ("effective_num_steps", "num_steps", "k"):
        if col in df and df[col].notna().any():
            return df.assign(depth=df[col])
    return df


def _figure(nrows: int = 1, ncols: int = 1, **kwargs):
    apply_style()
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(nrows, ncols, **kwargs)
    return fig, axes


def _close(fig):
    """Detach from pyplot so figures do not pile up (notebooks still display the returned Figure)."""
    import matplotlib.pyplot as plt

    plt.close(fig)
    return fig


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
    ax.legend(fontsize="small", ncol=2)
    return _close(fig)


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
    palette = _palette(len(groups))
    for i, (label, group) in enumerate(groups):
        x = group["position"].to_numpy() + (i - (len(groups) - 1) / 2) * width
        yerr = None
        if {"lo", "hi"} <= set(group.columns):
            yerr = np.vstack([(group["rate"] - group["lo"]).clip(lower=0),
                              (group["hi"] - group["rate"]).clip(lower=0)])
        ax.bar(x, group["rate"], width=width * 0.95, yerr=yerr, capsize=3,
               color=COLORS["observed"] if label is None else palette[i],
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
    ax.legend(fontsize="small")
    return _close(fig)


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
    left.legend(fontsize="small")
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
    return _close(fig)


def _palette(n: int):
    import seaborn as sns

    return sns.color_palette("colorblind", max(n, 1))


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
        ax.legend(fontsize="small", loc="best", framealpha=0.9)
        hist.hist(y, bins=min(20, max(5, len(y) // 3)), orientation="horizontal", color=color, alpha=0.8)
        mean = float(y.mean())
        hist.axhline(mean, color=COLORS["model"], ls="--", lw=1)
        hist.set(xlabel="logged batches", title=f"mean {mean:.2f} (n={len(y)})")
        hist.sharey(ax)
    axes[-1][0].set(xlabel="logged batch (in log order)")
    axes[0][0].set_title(title or "Accept length and throughput, batch by batch")
    fig.tight_layout()
    return _close(fig)


# --------------------------------------------------------------------------- speed

def throughput_vs_depth(table: pd.DataFrame, baseline_tokens_per_s: float | None = None,
                        observed: pd.DataFrame | None = None, title: str | None = None):
    """Tokens/s against depth (predict.throughput_vs_depth or a sweep) with the no-spec baseline."""
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
    ax.legend(fontsize="small", loc="lower right")
    return _close(fig)


def sweep_heatmap(sweep: pd.DataFrame, x: str = "num_steps", y: str = "topk",
                  value: str = "accept_length", title: str | None = None, fmt: str = ".2f"):
    """A heatmap of one sweep metric (accept length, speed-up, tokens/s) over two knobs."""
    _need(sweep, [x, y, value], "sweep heatmap")
    import seaborn as sns

    grid = sweep.pivot_table(index=y, columns=x, values=value, aggfunc="mean").sort_index(ascending=False)
    fig, ax = _figure()
    center = 1.0 if value in ("speedup", "speed_up") else None
    sns.heatmap(grid, annot=True, fmt=fmt, cmap="RdYlGn" if center else "viridis", center=center,
                ax=ax, cbar_kws={"label": value})
    ax.set(title=title or f"{value} by {y} and {x}")
    return _close(fig)


# --------------------------------------------------------------------------- token-level view

TOKEN_KINDS = ("prompt", "target", "accepted", "bonus", "replaced")
# eagle3lab.engine Generation.kinds and other spellings -> the view's kinds
_KIND_ALIASES = {"draft": "accepted", "replacement": "replaced", "rejected": "replaced",
                 "prefill": "target"}


def _position_color(position: int, depth: int) -> str:
    """Greens, light at position 1 and dark at the deepest: long accepted runs stand out."""
    import matplotlib
    from matplotlib import colors as mcolors

    cmap = matplotlib.colormaps["Greens"]
    return mcolors.to_hex(cmap(0.25 + 0.6 * (position - 1) / max(depth - 1, 1)))


def token_html(tokens: pd.DataFrame, title: str | None = None) -> str:
    """One generation as HTML: each token coloured by how it was produced.

    tokens: DataFrame(text, kind[, position]) with kind in prompt | accepted (a draft the target
    accepted, ``position`` 1..k in its chain) | bonus (the extra target token after a fully
    accepted chain) | replaced (the target token that replaced a rejected draft; ``draft_text``
    optional, shown on hover).
    """
    _need(tokens, ["text", "kind"], "token view")
    if "position" not in tokens and "depth" in tokens:  # eagle3lab.engine.labbench tokens frame
        tokens = tokens.assign(position=tokens["depth"].where(tokens["depth"] > 0))
    bad = set(tokens["kind"]) - set(TOKEN_KINDS) - set(_KIND_ALIASES)
    if bad:
        raise PlotError(f"unknown token kinds {sorted(bad)} (expected {TOKEN_KINDS})")
    depth = int(tokens["position"].max()) if "position" in tokens and tokens["position"].notna().any() else 1
    spans = []
    for row in tokens.itertuples(index=False):
        kind = _KIND_ALIASES.get(row.kind, row.kind)
        text = _html.escape(str(row.text)).replace("\n", "↵<br>")
        position = getattr(row, "position", None)
        if kind == "accepted":
            pos = int(position) if position is not None and not pd.isna(position) else 1
            style = f"background:{_position_color(pos, depth)};"
            tip = f"accepted draft, position {pos}"
        elif kind == "bonus":
            style = f"background:{COLORS['bonus']};color:white;"
            tip = "bonus token (whole chain accepted)"
        elif kind == "replaced":
            style = f"background:{COLORS['rejected']};color:white;"
            draft = getattr(row, "draft_text", None)
            tip = "target token replacing a rejected draft" + (
                f" (draft said {draft!r})" if draft is not None and not pd.isna(draft) else "")
        elif kind == "target":
            style = "text-decoration:underline dotted;"
            tip = "target token (prefill or plain decoding)"
        else:
            style = "color:#777;"
            tip = "prompt"
        spans.append(f'<span class="e3l-tok e3l-{kind}" title="{_html.escape(tip)}" '
                     f'style="{style}border-radius:2px;padding:0 1px;">{text}</span>')
    legend = (f'<div style="font-size:smaller;margin-bottom:4px;">'
              f'<span style="background:{_position_color(1, depth)};padding:0 4px;">accepted pos 1</span> '
              f'<span style="background:{_position_color(depth, depth)};padding:0 4px;">accepted pos {depth}</span> '
              f'<span style="background:{COLORS["bonus"]};color:white;padding:0 4px;">bonus</span> '
              f'<span style="background:{COLORS["rejected"]};color:white;padding:0 4px;">replaced a rejected draft</span>'
              "</div>")
    head = f"<div style='font-weight:bold'>{_html.escape(title)}</div>" if title else ""
    body = "".join(spans)
    return (f'<div class="e3l-tokens" style="font-family:monospace;white-space:pre-wrap;'
            f'line-height:1.6;">{head}{legend}{body}</div>')


def token_view(tokens: pd.DataFrame, title: str | None = None):
    """token_html wrapped for notebook display (IPython.display.HTML)."""
    from IPython.display import HTML

    return HTML(token_html(tokens, title=title))


def tokens_from_steps(step_tokens: Sequence[Sequence[str]], accepted: Sequence[int],
                      depth: int, prompt: str | None = None) -> pd.DataFrame:
    """Build the token view's DataFrame from per-step emitted token texts and accepted counts.

    Step i emitted ``accepted[i] + 1`` tokens: the accepted drafts (positions 1..accepted), then
    the bonus token when accepted == depth, else the replacement of the rejected draft.
    """
    rows = [] if prompt is None else [{"text": prompt, "kind": "prompt", "position": None}]
    for texts, n in zip(step_tokens, accepted):
        if len(texts) != n + 1:
            raise PlotError(f"a step with {n} accepted drafts emits {n + 1} tokens, got {len(texts)}")
        for pos, text in enumerate(texts[:-1], start=1):
            rows.append({"text": text, "kind": "accepted", "position": pos})
        rows.append({"text": texts[-1], "kind": "bonus" if n == depth else "replaced", "position": None})
    return pd.DataFrame(rows)


def tokens_from_generation(generation, tokenizer, with_prompt: bool = True) -> pd.DataFrame:
    """The token view's DataFrame from an eagle3lab.engine Generation (kinds and depths per token)."""
    rows = []
    if with_prompt:
        rows.append({"text": tokenizer.decode(generation.prompt_ids), "kind": "prompt", "position": None})
    for tok, kind, depth in zip(generation.output_ids, generation.kinds, generation.depths):
        rows.append({"text": tokenizer.decode([tok]), "kind": _KIND_ALIASES.get(kind, kind),
                     "position": depth or None})
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- notebook figures

def speed_plot(measured, title: str = "Tokens/s and accept length"):
    """Tokens/s per run with the no-speculation baseline, and accept length per run."""
    from eagle3lab.spec import BASELINE
    import matplotlib.pyplot as plt
    import numpy as np

    from eagle3lab.style import COLORS, apply_style

    apply_style()
    runs = measured[measured.index != BASELINE]
    base = measured.loc[BASELINE, "tokens_per_s"] if BASELINE in measured.index else None
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    y = np.arange(len(runs))
    left.barh(y, runs["tokens_per_s"], color=COLORS["observed"], xerr=_ci_errors(runs, "tokens_per_s"),
              ecolor="0.3", capsize=3)
    if base is not None:
        base_ci = measured.loc[BASELINE].get("tokens_per_s_ci95") if "tokens_per_s_ci95" in measured else None
        if isinstance(base_ci, (list, tuple)) and len(base_ci) == 2:
            left.axvspan(base_ci[0], base_ci[1], color=COLORS["baseline"], alpha=0.15)
        left.axvline(base, color=COLORS["baseline"], ls="--", label=f"{BASELINE}: {base:.1f} tok/s (band: 95% CI)")
    errs = _ci_errors(runs, "tokens_per_s")
    for yi, (tps, sp, ci) in enumerate(zip(runs["tokens_per_s"], runs["speedup"],
                                           runs.get("speedup_ci95", [None] * len(runs)))):
        ci_txt = f" [{ci[0]:.2f}, {ci[1]:.2f}]" if isinstance(ci, (list, tuple)) and len(ci) == 2 else ""
        left.annotate(f"{tps:.1f}" + (f" ({sp:.2f}×{ci_txt})" if sp == sp else ""),
                      (tps + (errs[1][yi] if errs is not None else 0), yi),
                      xytext=(3, 0), textcoords="offset points", va="center", fontsize="small")
    left.set_xlim(0, max(float(runs["tokens_per_s"].max()), float(base or 0)) * 1.6)
    left.set_yticks(y, runs.index)
    left.invert_yaxis()
    left.set(xlabel="tokens/s", title="Throughput")
    right.barh(y, runs["accept_length"], color=COLORS["accepted"], xerr=_ci_errors(runs, "accept_length"),
               ecolor="0.3", capsize=3)
    handles = []
    if "draft tokens run" in runs:
        handles.append(right.scatter(runs["draft tokens run"], y, marker="|", s=300, color=COLORS["rejected"],
                                     label="draft tokens verified per step", zorder=5))
    right.set_yticks(y, [""] * len(y))
    right.invert_yaxis()
    right.set(xlabel="accept length (tokens per verify step)", title="Accept length")
    fig.suptitle(title, fontweight="bold")
    # legends below the axes, never over the bars
    left.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.18), frameon=False)
    if handles:
        right.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.18), frameon=False)
    fig.tight_layout()
    plt.close(fig)
    return fig


def _ci_errors(table, value: str):
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
    return _close(fig)


def speedup_vs_depth(sweep: pd.DataFrame, title: str | None = None):
    """Measured speed-up over no speculation with 95% intervals: chains (topk 1) against depth,
    trees (topk > 1) as separate points; 1.0 (no speculation) marked."""
    _need(sweep, ["num_steps", "topk", "num_draft_tokens", "speedup"], "speed-up vs depth")
    fig, ax = _figure(figsize=(8, 4.4))
    chains = sweep[sweep["topk"] == 1].sort_values("num_steps")
    trees = sweep[sweep["topk"] > 1].sort_values("num_steps")
    ax.errorbar(chains["num_steps"], chains["speedup"], yerr=_ci_errors(chains, "speedup"),
                marker="o", capsize=3, color=COLORS["observed"], label="chains (topk 1, draft tokens = depth + 1)")
    for j, (_, row) in enumerate(trees.iterrows()):
        err = _ci_errors(trees.loc[[row.name]], "speedup")
        ax.errorbar([row["num_steps"] + 0.12 * (j % 3 - 1)], [row["speedup"]], yerr=err, fmt="s", capsize=3,
                    color=_palette(len(trees) + 1)[j + 1],
                    label=f"tree: {int(row['num_steps'])} steps, topk {int(row['topk'])}, "
                          f"{int(row['num_draft_tokens'])} draft tokens")
    ax.axhline(1.0, color=COLORS["baseline"], ls="--",
               label="no speculation (1.0×; its own spread is inside each paired interval)")
    ax.set(xlabel="draft depth k (num_steps)", ylabel="speed-up over no speculation",
           title=title or "Speed-up vs depth (bars: 95% CI over prompts)")
    depths = sorted({int(v) for v in sweep["num_steps"]})
    ax.set_xticks(depths)
    ax.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.2), frameon=False,
              ncol=2)
    fig.tight_layout()
    return _close(fig)


def show_matrix(matrix, rows: str, columns: str, title: str):
    """Heatmap of a wiring_matrix with labelled axes (eagle3lab.wiring.plot_wiring_matrix)."""
    import matplotlib.pyplot as plt

    from eagle3lab.wiring import plot_wiring_matrix

    matrix = matrix.copy()
    matrix.index.name, matrix.columns.name = rows, columns
    ax = plot_wiring_matrix(matrix, title=title)
    fig = ax.figure
    plt.close(fig)
    return fig


def accuracy_plot(accuracy, title: str = "Standalone accuracy by unrolled depth"):
    """acc@1..k per wiring (evaluate_draft's frames, with a `wiring` column)."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    from eagle3lab.style import apply_style

    apply_style()
    fig, ax = plt.subplots()
    sns.barplot(data=accuracy, x="depth", y="accuracy", hue="wiring", ax=ax)
    ax.set(ylim=(0, 1), xlabel="unrolled depth j", ylabel="top-1 accuracy (acc@j)", title=title)
    ax.legend(fontsize="small", title=None)
    plt.close(fig)
    return fig


def _interval_errors(table):
    """Error-bar lengths [below, above] from a table's `accept_length_ci95` (0 where absent)."""
    import numpy as np

    below, above = [], []
    for al, ci in zip(table["accept_length"], table.get("accept_length_ci95", [None] * len(table))):
        has = isinstance(ci, (list, tuple)) and len(ci) == 2
        below.append(max(0.0, al - ci[0]) if has else 0.0)
        above.append(max(0.0, ci[1] - al) if has else 0.0)
    return np.array([below, above])


def fault_plot(table, title: str = "Each hypothesis at the seed's configuration"):
    """Accept length and speed-up per hypothesis, and conditional acceptance by position."""
    from eagle3lab.engine.faults import SEED_AFTER_FIX
    import matplotlib.pyplot as plt
    import numpy as np

    from eagle3lab.style import COLORS, apply_style

    apply_style()
    fig, (left, right) = plt.subplots(1, 2, figsize=(14, 4.8))
    y = np.arange(len(table))
    colors = [COLORS["accepted"] if name.startswith("healthy") else
              COLORS["rejected"] if name == SEED_AFTER_FIX else COLORS["observed"] for name in table.index]
    errors = _interval_errors(table)
    left.barh(y, table["accept_length"], color=colors, xerr=errors, ecolor="0.3", capsize=3)
    for yi, (al, sp, above) in enumerate(zip(table["accept_length"], table["speedup"], errors[1])):
        left.annotate(f"{al:.2f} ({sp:.2f}×)", (al + above, yi), xytext=(4, 0), textcoords="offset points",
                      va="center", fontsize="small")
    left.set_yticks(y, table.index)
    left.invert_yaxis()
    left.set(xlabel="accept length (speed-up over no speculation); bars: 95% CI over prompts",
             title="Accept length")
    width = 0.8 / max(len(table), 1)
    for j, ((name, row), color) in enumerate(zip(table.iterrows(), colors)):
        _position_points(right, row, name, color if color != COLORS["observed"] else _palette(len(table))[j],
                         offset=(j - (len(table) - 1) / 2) * width)
    right.set(xlabel="draft position", ylabel="P(accept | earlier accepted)", ylim=(-0.02, 1.02),
              title="Where the chain breaks\n(bars: exact 95 % interval over the n steps at risk; "
                    "point size and opacity grow with n)")
    right.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.suptitle(title, fontweight="bold")
    fig.tight_layout()
    plt.close(fig)
    return fig


def _position_points(ax, row, name: str, color, offset: float = 0.0) -> None:
    """One hypothesis's per-position rates: exact binomial intervals over its steps at risk, points
    sized and shaded by n (an n = 1 rate must not look like an n = 500 one), n = 0 left out."""
    from eagle3lab import stats

    rates = list(row["per_position"])
    ns = list(row.get("per_position_n") or []) if hasattr(row, "get") else []
    ns = (ns + [None] * len(rates))[:len(rates)]
    xs = np.arange(1, len(rates) + 1) + offset
    line = [r if (n is None or n > 0) else np.nan for r, n in zip(rates, ns)]
    ax.plot(xs, line, color=color, lw=1, alpha=0.6, label=name)
    for x, rate, n in zip(xs, rates, ns):
        if n is None or rate != rate:
            ax.scatter([x], [rate], s=20, color=color)
            continue
        if n == 0:
            continue
        lo, hi = stats.exact_binomial_interval(int(round(rate * n)), int(n))
        alpha = float(np.clip(0.25 + 0.75 * np.log10(1 + n) / 3, 0.25, 1.0))
        ax.errorbar([x], [rate], yerr=[[max(0.0, rate - lo)], [max(0.0, hi - rate)]], fmt="none",
                    ecolor=color, alpha=alpha, capsize=2, lw=1)
        ax.scatter([x], [rate], s=10 + 60 * min(1.0, np.sqrt(n) / np.sqrt(500)), color=color, alpha=alpha,
                   zorder=3)
def load_speedup(model: dict, rows=None, title: str | None = None):
    """Speed-up against concurrency under load: the measured decode speed-up (inter-token latency,
    95 % interval over prompts), the two cost models' predictions with the range the accept
    length's interval gives (``loadsweep.load_cost_model``), and the total tokens/s speed-up when ``rows``
    (the sweep's rows) are given; 1.0 (no speculation) marked. Log-2 concurrency axis."""
    points = pd.DataFrame(model.get("rows") or [])
    _need(points, ["concurrency", "measured", "predicted_tokens", "predicted_requests"], "load speed-up")
    fig, ax = _figure(figsize=(7, 4.2))
    ax.errorbar(points["concurrency"], points["measured"], yerr=_ci_errors(points, "measured"), marker="o", capsize=3,
                color=COLORS["observed"], label="decode speed-up, measured")
    for name, color, marker in (("tokens", COLORS["model"], "s"), ("requests", COLORS["bonus"], "D")):
        ax.plot(points["concurrency"], points[f"predicted_{name}"], marker=marker, ls="--", color=color,
                label=f"predicted: verify costs its {name}")
        ranged = points[points[f"predicted_{name}_range"].notna()]
        if len(ranged):
            ax.fill_between(ranged["concurrency"], [r[0] for r in ranged[f"predicted_{name}_range"]],
                            [r[1] for r in ranged[f"predicted_{name}_range"]], color=color, alpha=0.12, lw=0)
    if rows is not None and len(rows) and "speedup" in pd.DataFrame(rows):
        total = pd.DataFrame(rows).dropna(subset=["speedup"]).sort_values("concurrency")
        ax.errorbar(total["concurrency"], total["speedup"], yerr=_ci_errors(total, "speedup"), marker="^",
                    capsize=3, ls=":", color=COLORS["accepted"], label="total tokens/s speed-up, measured")
    ax.axhline(1.0, color=COLORS["baseline"], ls="--", lw=1, label="no speculation")
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted(points["concurrency"]), [str(int(c)) for c in sorted(points["concurrency"])])
    ax.set(xlabel="concurrency (requests in flight)", ylabel="speed-up over no speculation",
           title=title or "Speculation under load (bars: 95% CI over prompts)")
    ax.legend(fontsize="small", loc="best", frameon=False)
    fig.tight_layout()
    return _close(fig)

"""Figures of speed: every speed-up drawn beside the no-speculation run it divides by, and named
for the tokens/s it divides (total: wall time with prefill, as the report measures; decode:
decode steps only). One configuration's speed-up is its tokens/s over the no-speculation run
interleaved with it, so each row has its own baseline: no figure draws one baseline line under
ratios taken against others. Intervals that run far past the values (a handful of prompts) are
cut at the axis and marked with an arrow head. Each figure carries alt text (eagle3lab.viz.style)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from eagle3lab.viz.plotbase import (LABEL_GAP_PT, axis_cap, capped, ci_errors, close, figure, interval_text,
                                need)
from eagle3lab.viz.style import COLORS, palette

KIND_WORDS = {"total": "total tokens/s (wall time, prefill included)", "decode": "decode tokens/s"}
MARKERS = ("o", "s", "D", "^", "v", "P", "X", "*", "h", "<", ">")


def own_baselines(runs: pd.DataFrame, measured: pd.DataFrame | None = None):
    """Each row's no-speculation tokens/s (the denominator of its speed-up) and its interval:
    `baseline_tokens_per_s` when the table has it, else tokens_per_s / speedup (the same number:
    the speed-up is that ratio), else the table's one baseline row, which then is every row's."""
    from eagle3lab.spec import BASELINE

    n = len(runs)
    if "baseline_tokens_per_s" in runs and runs["baseline_tokens_per_s"].notna().all():
        cis = runs.get("baseline_tokens_per_s_ci95", pd.Series([None] * n, index=runs.index))
        return runs["baseline_tokens_per_s"].to_numpy(float), list(cis)
    if "speedup" in runs and runs["speedup"].notna().all() and (runs["speedup"] > 0).all():
        return (runs["tokens_per_s"] / runs["speedup"]).to_numpy(float), [None] * n
    if measured is not None and BASELINE in measured.index:
        row = measured.loc[BASELINE]
        return np.full(n, float(row["tokens_per_s"])), [row.get("tokens_per_s_ci95")] * n
    return np.full(n, np.nan), [None] * n


def speed_plot(measured, title: str = "Tokens/s and accept length", kind: str = "total"):
    """Per run: its tokens/s with speculation beside the no-speculation tokens/s its speed-up
    divides by (its own run, interleaved with it), both with 95 % intervals, the speed-up written
    after the pair; accept length per run, with the draft tokens verified per step."""
    from eagle3lab.spec import BASELINE

    runs = measured[measured.index != BASELINE]
    base, base_ci = own_baselines(runs, measured)
    fig, (left, right) = figure(1, 2, figsize=(12, max(3.6, 1.6 + 1.05 * len(runs))), gridspec_kw={"width_ratios": [3, 2]})
    y = np.arange(len(runs))
    spec_err = ci_errors(runs, "tokens_per_s")
    base_err = ci_errors(pd.DataFrame({"b": base, "b_ci95": base_ci}), "b") if any(
        isinstance(ci, (list, tuple)) for ci in base_ci) else None
    cap = max(axis_cap(runs["tokens_per_s"], spec_err), axis_cap(base, base_err))
    spec_err, spec_cut = capped(runs["tokens_per_s"], spec_err, cap)
    base_err, base_cut = capped(base, base_err, cap)
    h = 0.38
    left.barh(y - h / 2, runs["tokens_per_s"], height=h, color=COLORS["observed"], xerr=spec_err, ecolor="0.2",
              capsize=3, label="with speculation")
    left.barh(y + h / 2, base, height=h, color=COLORS["baseline"], alpha=0.55, hatch="//", xerr=base_err,
              ecolor="0.2", capsize=3, label="its own no-speculation run (interleaved)")
    _cut_marks(left, runs["tokens_per_s"], spec_cut, y - h / 2, cap)
    _cut_marks(left, base, base_cut, y + h / 2, cap)
    speedups, cis = runs.get("speedup", pd.Series(np.nan, index=runs.index)), runs.get("speedup_ci95", [None] * len(runs))
    ends = np.maximum(runs["tokens_per_s"].to_numpy(float) + (spec_err[1] if spec_err is not None else 0),
                      base + (base_err[1] if base_err is not None else 0))
    for yi, (sp, ci, end) in enumerate(zip(speedups, cis, ends)):
        if sp == sp:
            left.annotate(f"{sp:.2f}×{interval_text(ci)}", (end, yi), xytext=(LABEL_GAP_PT, 0),
                          textcoords="offset points", va="center", fontsize="small")
    left.set_xlim(0, cap * 1.55)
    left.set_yticks(y, runs.index)
    left.invert_yaxis()
    left.set(xlabel=f"{KIND_WORDS[kind]}\nerror bars: 95 % interval over prompts",
             title="Throughput, and the speed-up over each run's own baseline")
    right.barh(y, runs["accept_length"], color=COLORS["accepted"], xerr=ci_errors(runs, "accept_length"),
               ecolor="0.2", capsize=3, label="accept length")
    if "draft tokens run" in runs:
        right.scatter(runs["draft tokens run"], y, marker="|", s=300, color=COLORS["rejected"],
                      label="draft tokens verified per step", zorder=5)
    right.set_yticks(y, [""] * len(y))
    right.invert_yaxis()
    right.set(xlabel="accept length\n(tokens per verify step, bonus included)", title="Accept length")
    fig.suptitle(title, fontweight="bold")
    for ax in (left, right):  # legends below the axes, never over the bars
        ax.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.5 / max(1, len(runs)) - 0.12),
                  frameon=False, ncol=1)
    fig.tight_layout()
    pairs = "; ".join(f"{label}: {t:.1f} " + (f"against {b:.1f} tok/s" if b == b else "tok/s, no baseline measured")
                      + (f", {s:.2f}×" if s == s else "")
                      for label, t, b, s in zip(runs.index, runs["tokens_per_s"], base, speedups))
    return close(fig, f"{title}. Left, per run, {KIND_WORDS[kind]} with speculation beside its own "
                      f"no-speculation run, with 95 % intervals: {pairs}. Right: accept length per run "
                      f"against the draft tokens verified per step.")


def _cut_marks(ax, values, cut, y, cap, horizontal: bool = True) -> None:
    """An arrow head at the axis where an interval was cut."""
    if not np.any(cut):
        return
    ys = np.asarray(y, dtype=float)[np.asarray(cut)]
    if horizontal:
        ax.scatter(np.full(len(ys), cap), ys, marker=">", s=30, color="0.2", zorder=6, clip_on=False)
    else:
        ax.scatter(ys, np.full(len(ys), cap), marker="^", s=30, color="0.2", zorder=6, clip_on=False)


def speedup_vs_depth(sweep: pd.DataFrame, title: str | None = None, predicted: pd.DataFrame | None = None):
    """Measured speed-up (total tokens/s, over each point's own interleaved no-speculation run)
    with 95 % intervals: chains (topk 1) against depth, trees (topk > 1) as separate points; 1.0
    marked; with `predicted` (costfit.prediction_table rows: num_steps, topk, predicted) the cost
    model's prediction as open circles."""
    need(sweep, ["num_steps", "topk", "num_draft_tokens", "speedup"], "speed-up vs depth")
    fig, ax = figure(figsize=(8, 4.6))
    chains = sweep[sweep["topk"] == 1].sort_values("num_steps")
    trees = sweep[sweep["topk"] > 1].sort_values("num_steps")
    errors = ci_errors(sweep, "speedup")
    cap = axis_cap(sweep["speedup"], errors, factor=1.8)
    err, cut = capped(chains["speedup"], ci_errors(chains, "speedup"), cap)
    ax.errorbar(chains["num_steps"], chains["speedup"], yerr=err, marker="o", capsize=3, color=COLORS["observed"],
                label="chains (topk 1, draft tokens = depth + 1)")
    _cut_marks(ax, chains["speedup"], cut, chains["num_steps"], cap, horizontal=False)
    colors = palette(len(trees) + 2)[2:]
    for j, (_, row) in enumerate(trees.iterrows()):
        x = row["num_steps"] + 0.12 * (j % 3 - 1)
        err, cut = capped([row["speedup"]], ci_errors(trees.loc[[row.name]], "speedup"), cap)
        ax.errorbar([x], [row["speedup"]], yerr=err, fmt=MARKERS[(j + 1) % len(MARKERS)], capsize=3,
                    color=colors[j], label=f"tree: {int(row['num_steps'])} steps, topk {int(row['topk'])}, "
                                           f"{int(row['num_draft_tokens'])} draft tokens")
        _cut_marks(ax, [row["speedup"]], cut, [x], cap, horizontal=False)
    if predicted is not None and len(predicted):
        need(predicted, ["num_steps", "topk", "predicted"], "predicted speed-ups")
        p = predicted[predicted["topk"] == 1].sort_values("num_steps")
        ax.scatter(p["num_steps"] + 0.18, p["predicted"], marker="o", s=40, facecolors="none",
                   edgecolors=COLORS["model"], linewidths=1.5, zorder=4,
                   label="predicted by the cost model (calibrated on the other configurations)")
    ax.axhline(1.0, color=COLORS["baseline"], ls="--",
               label="no speculation (1.0×): each point's own run, interleaved with it")
    ax.set_ylim(0, cap * 1.08)
    ax.set(xlabel="draft depth k (num_steps)", ylabel="speed-up of total tokens/s",
           title=title or "Speed-up vs depth (bars: 95 % interval over prompts)")
    depths = sorted({int(v) for v in sweep["num_steps"]})
    ax.set_xticks(depths)
    ax.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.2), frameon=False, ncol=2)
    fig.tight_layout()
    points = "; ".join(f"{int(r.num_steps)}/{int(r.topk)}/{int(r.num_draft_tokens)}: {r.speedup:.2f}×"
                       for r in sweep.sort_values(["topk", "num_steps"]).itertuples())
    return close(fig, f"{title or 'Speed-up against draft depth'}: speed-up of total tokens/s over each "
                      f"configuration's own no-speculation run, with 95 % intervals; steps/topk/draft tokens: "
                      f"{points}.")


def _interval_errors(table):
    """Error-bar lengths [below, above] from a table's `accept_length_ci95` (0 where absent)."""
    below, above = [], []
    for al, ci in zip(table["accept_length"], table.get("accept_length_ci95", [None] * len(table))):
        has = isinstance(ci, (list, tuple)) and len(ci) == 2
        below.append(max(0.0, al - ci[0]) if has else 0.0)
        above.append(max(0.0, ci[1] - al) if has else 0.0)
    return np.array([below, above])


def fault_plot(table, title: str = "Each hypothesis at the seed's configuration"):
    """Accept length per hypothesis (its speed-up of total tokens/s over its own no-speculation
    run written after it), and conditional acceptance by position."""
    from eagle3lab.decoder.faults import SEED_AFTER_FIX

    fig, (left, right) = figure(1, 2, figsize=(14, 4.8))
    y = np.arange(len(table))
    lines = palette(len(table))
    colors = [COLORS["accepted"] if name.startswith("healthy") else
              COLORS["rejected"] if name == SEED_AFTER_FIX else COLORS["observed"] for name in table.index]
    errors = _interval_errors(table)
    left.barh(y, table["accept_length"], color=colors, xerr=errors, ecolor="0.2", capsize=3)
    for yi, (al, sp, above) in enumerate(zip(table["accept_length"], table["speedup"], errors[1])):
        left.annotate(f"{al:.2f} ({sp:.2f}×)", (al + above, yi), xytext=(LABEL_GAP_PT, 0), textcoords="offset points",
                      va="center", fontsize="small")
    left.set_xlim(0, float(np.nanmax(table["accept_length"] + errors[1])) * 1.3)
    left.set_yticks(y, table.index)
    left.invert_yaxis()
    left.set(xlabel="accept length (in brackets: speed-up of total tokens/s over the row's own\n"
                    "no-speculation run); bars: 95% CI over prompts", title="Accept length")
    width = 0.8 / max(len(table), 1)
    for j, (name, row) in enumerate(table.iterrows()):
        _position_points(right, row, name, lines[j], MARKERS[j % len(MARKERS)],
                         offset=(j - (len(table) - 1) / 2) * width)
    right.set(xlabel="draft position", ylabel="P(accept | earlier accepted)", ylim=(-0.02, 1.02),
              title="Where the chain breaks\n(bars: exact 95 % interval over the n steps at risk; "
                    "point size and opacity grow with n)")
    right.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.suptitle(title, fontweight="bold")
    fig.tight_layout()
    rows = "; ".join(f"{name}: {al:.2f} ({sp:.2f}×)" for name, al, sp in
                     zip(table.index, table["accept_length"], table["speedup"]))
    return close(fig, f"{title}. Left: accept length per hypothesis with 95 % intervals and, in brackets, its "
                      f"speed-up of total tokens/s over its own no-speculation run: {rows}. Right: conditional "
                      "acceptance at each draft position per hypothesis, with exact intervals.")


def _position_points(ax, row, name: str, color, marker: str = "o", offset: float = 0.0) -> None:
    """One hypothesis's per-position rates: exact binomial intervals over its steps at risk, points
    sized and shaded by n (an n = 1 rate must not look like an n = 500 one), n = 0 left out."""
    from eagle3lab.acceptance import stats

    rates = list(row["per_position"])
    ns = list(row.get("per_position_n") or []) if hasattr(row, "get") else []
    ns = (ns + [None] * len(rates))[:len(rates)]
    xs = np.arange(1, len(rates) + 1) + offset
    line = [r if (n is None or n > 0) else np.nan for r, n in zip(rates, ns)]
    ax.plot(xs, line, color=color, lw=1, alpha=0.7, label=name, marker=marker, ms=4)
    for x, rate, n in zip(xs, rates, ns):
        if n is None or rate != rate:
            ax.scatter([x], [rate], s=20, color=color, marker=marker)
            continue
        if n == 0:
            continue
        lo, hi = stats.exact_binomial_interval(int(round(rate * n)), int(n))
        alpha = float(np.clip(0.25 + 0.75 * np.log10(1 + n) / 3, 0.25, 1.0))
        ax.errorbar([x], [rate], yerr=[[max(0.0, rate - lo)], [max(0.0, hi - rate)]], fmt="none",
                    ecolor=color, alpha=alpha, capsize=2, lw=1)
        ax.scatter([x], [rate], s=10 + 60 * min(1.0, np.sqrt(n) / np.sqrt(500)), color=color, alpha=alpha,
                   zorder=3, marker=marker)


def prediction_plot(table: pd.DataFrame, title: str = "The cost model against measurement"):
    """costfit.prediction_table as a figure: per configuration the measured speed-up of total
    tokens/s with its 95 % interval and the cost model's prediction; outside ones in vermillion."""
    need(table, ["configuration", "predicted", "measured", "interval", "inside"], "prediction plot")
    t = table.reset_index(drop=True)
    fig, ax = figure(figsize=(9, 1.4 + 0.34 * len(t)))
    y = np.arange(len(t))
    errs = ci_errors(t.rename(columns={"interval": "measured_ci95"}), "measured")
    cap = axis_cap(pd.concat([t["measured"], t["predicted"]]), None) * 1.6
    errs, cut = capped(t["measured"], errs, cap)
    ax.errorbar(t["measured"], y, xerr=errs, fmt="o", color=COLORS["observed"], capsize=3,
                label="measured, 95 % interval over prompts")
    _cut_marks(ax, t["measured"], cut, y, cap)
    ax.scatter(t["predicted"], y - 0.3, marker="D", s=28, zorder=4,
               color=[COLORS["model"] if ok else COLORS["rejected"] for ok in t["inside"]],
               label="predicted (diamond; vermillion: outside the interval)")
    ax.axvline(1.0, color=COLORS["baseline"], ls="--", lw=1, label="1.0×: no speculation")
    ax.set_yticks(y, t["configuration"])
    ax.invert_yaxis()
    ax.set_xlim(0, cap * 1.05)
    inside = int(t["inside"].sum())
    ax.set(xlabel="speed-up of total tokens/s over each configuration's own no-speculation run",
           title=f"{title}: {inside} of {len(t)} inside")
    ax.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.9 / max(len(t), 1) - 0.1),
              frameon=False, ncol=2)
    fig.tight_layout()
    return close(fig, f"{title}: for {len(t)} configurations the measured speed-up of total tokens/s with "
                      f"its 95 % interval and the cost model's prediction; {inside} of {len(t)} predictions lie "
                      "inside their interval.")


def load_speedup(model: dict, rows=None, title: str | None = None):
    """Speed-up against concurrency under load: the measured decode speed-up (inter-token latency,
    95 % interval over prompts), the two cost models' predictions with the range the accept
    length's interval gives (``loadsweep.load_cost_model``), and the total tokens/s speed-up when ``rows``
    (the sweep's rows) are given; 1.0 (no speculation) marked. Log-2 concurrency axis."""
    points = pd.DataFrame(model.get("rows") or [])
    need(points, ["concurrency", "measured", "predicted_tokens", "predicted_requests"], "load speed-up")
    fig, ax = figure(figsize=(7, 4.6))
    ax.errorbar(points["concurrency"], points["measured"], yerr=ci_errors(points, "measured"), marker="o", capsize=3,
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
        ax.errorbar(total["concurrency"], total["speedup"], yerr=ci_errors(total, "speedup"), marker="^",
                    capsize=3, ls=":", color=COLORS["accepted"], label="total tokens/s speed-up, measured")
    ax.axhline(1.0, color=COLORS["baseline"], ls="--", lw=1, label="no speculation")
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted(points["concurrency"]), [str(int(c)) for c in sorted(points["concurrency"])])
    ax.set(xlabel="concurrency (requests in flight)", ylabel="speed-up over no speculation",
           title=title or "Speculation under load (bars: 95% CI over prompts)")
    ax.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.18), frameon=False, ncol=2)
    fig.tight_layout()
    pts = "; ".join(f"{int(c)}: {m:.2f}×" for c, m in zip(points["concurrency"], points["measured"]))
    return close(fig, f"{title or 'Speculation under load'}: decode speed-up measured at each concurrency "
                      f"({pts}), beside two cost models' predictions" +
                      (" and the total tokens/s speed-up" if rows is not None and len(rows) else "") + ".")

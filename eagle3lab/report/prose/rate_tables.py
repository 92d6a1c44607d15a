"""Tables for reading: per-position rates with honest intervals, "no data" where nothing was measured."""

from __future__ import annotations

from eagle3lab.report.prose.words import _finite, ci_text


def with_exact_intervals(per_pos):
    """Per-position rates whose interval is the wider of the jackknife over prompts and the exact
    binomial over the n steps at risk; a position no step reached has no rate and no interval
    (NaN, never 0), so a rate from one step cannot read as "0.000 [0.000, 0.000]"."""
    import math

    from eagle3lab.acceptance import stats

    out = per_pos.copy()
    if "n" not in out:
        return out
    lo, hi = [], []
    for _, row in out.iterrows():
        n = int(row["n"]) if _finite(row["n"]) else 0
        if n == 0 or not _finite(row["rate"]):
            lo.append(math.nan), hi.append(math.nan)
            continue
        e_lo, e_hi = stats.exact_binomial_interval(int(round(float(row["rate"]) * n)), n)
        b_lo = row["lo"] if "lo" in out and _finite(row["lo"]) else e_lo
        b_hi = row["hi"] if "hi" in out and _finite(row["hi"]) else e_hi
        lo.append(min(e_lo, float(b_lo))), hi.append(max(e_hi, float(b_hi)))
    out["rate"] = [r if _finite(n) and n > 0 else math.nan for r, n in zip(out["rate"], out["n"])]
    out["lo"], out["hi"] = lo, hi
    return out


def mask_unreached(gap, n):
    """A gap table for reading: where no step reached a position (n = 0) the served rate, the gap
    and the ratio are missing, not 0 (the accept-length columns keep their sums: such a position
    adds nothing)."""
    import numpy as np

    out = gap.copy()
    counts = (list(n) + [0] * len(out))[:len(out)]
    unreached = np.array([not _finite(c) or int(c) == 0 for c in counts])
    out.loc[unreached, [c for c in ("served", "gap", "ratio") if c in out]] = np.nan
    return out


def rate_text(rate, lo, hi, n) -> str:
    """`0.818 [0.52, 0.95] (n = 11)`, or `no data (n = 0)` for a position no step reached."""
    if not _finite(n) or int(n) == 0 or not _finite(rate):
        return "no data (n = 0)"
    return f"{ci_text(rate, (lo, hi), '.3f')} (n = {int(n)})"


def per_position_display(per_pos):
    """Per-position rates for reading: one text column, "no data (n = 0)" where nothing was
    measured (the numeric columns stay in the frame the notebook holds)."""
    import pandas as pd

    return pd.DataFrame({
        "position": per_pos["position"].astype(int),
        "served rate [95 % interval] (n steps at risk)": [
            rate_text(r["rate"], r.get("lo"), r.get("hi"), r.get("n")) for _, r in per_pos.iterrows()],
    }).set_index("position")


"""The one place acceptance statistics are computed: every source feeds it counts.

Every engine reports the same few counts -- accepted drafts and verify steps per request (the
lab's step records, SGLang's meta_info, vLLM's /metrics counters, a server log's per-position
lines) -- and everything else is a function of them, computed here and nowhere else:

    accept length  L = tokens / verify steps = mean(accepted) + 1   (SGLang "accept len", vLLM
                                                                      "mean acceptance length")
    unconditional  r_i = P(accepted >= i)                          (vLLM per-position rate)
    conditional    c_i = P(accepted >= i | accepted >= i - 1)      (EAGLE n-alpha)
    E[L] = 1 + sum_i r_i = 1 + sum_i prod_{j<=i} c_j

`conditional_rates` and `unconditional_rates` are the one conversion each way. Intervals: rates,
accept length and paired-run speed-ups over prompts by a leave-one-prompt-out jackknife with
Student-t quantiles (`jackknife_interval`; requests kept whole: steps of one request are
correlated; per-position rates too, over requests or a log's stats intervals, widened to the
exact binomial interval of their counts: `share_interval`), and Wilson and exact
(Clopper-Pearson) intervals of a share.

Imports numpy, pandas and eagle3lab.errors only, so every room of the package may import it.
"""

from __future__ import annotations

import functools
import math
from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from eagle3lab.errors import EagleLabError

_DEPTH_COLUMNS = ("k", "depth", "num_steps", "drafted")


class StatsError(EagleLabError):
    """Input the statistics cannot use (empty, out of range, missing columns)."""


# --------------------------------------------------------------------------- per-step counts

def accepted_counts(steps) -> np.ndarray:
    """Per-step accepted draft counts as an int array, from a DataFrame, Series or sequence.

    A DataFrame needs ``accepted`` (drafts accepted per step) or ``accept_len`` (bonus included).
    """
    if isinstance(steps, pd.DataFrame):
        if "accepted" in steps:
            values = steps["accepted"].to_numpy()
        elif "accept_len" in steps:
            values = steps["accept_len"].to_numpy() - 1
        else:
            raise StatsError("per-step data needs an 'accepted' (or 'accept_len') column; "
                             f"got {list(steps.columns)}")
    else:
        values = np.asarray(steps if not isinstance(steps, pd.Series) else steps.to_numpy())
    values = np.asarray(values, dtype=float).ravel()
    values = values[~np.isnan(values)]
    if values.size == 0:
        raise StatsError("no verify steps to analyse")
    if (values < 0).any() or (values != np.round(values)).any():
        raise StatsError("accepted counts must be whole numbers >= 0")
    return values.astype(int)


def draft_depth(steps, k: int | None = None) -> int:
    """The chain depth k (draft tokens proposed per step): given, from a column, or max observed."""
    if k is not None:
        return int(k)
    if isinstance(steps, pd.DataFrame):
        for col in _DEPTH_COLUMNS:
            if col in steps and steps[col].notna().any():
                return int(steps[col].max())
        if "num_draft_tokens" in steps:  # SGLang meaning: draft tokens incl. the verified root
            return int(steps["num_draft_tokens"].max()) - 1
    return int(accepted_counts(steps).max())


def steps_frame(generations) -> pd.DataFrame:
    """Per-step DataFrame(request, step, drafted, accepted, context_length, draft_s, verify_s)
    from eagle3lab.decoder Generation objects (one per request).

    context_length is the sequence length when the step was drafted: prompt + tokens emitted
    so far (the prefill token included).
    """
    rows = []
    for request, gen in enumerate(generations):
        context = len(gen.prompt_ids) + 1
        for i, step in enumerate(gen.steps):
            rows.append({"request": request, "step": i, "drafted": step.drafted,
                         "accepted": step.accepted, "context_length": context,
                         "draft_s": step.draft_s, "verify_s": step.verify_s})
            context += step.accepted + 1
    if not rows:
        raise StatsError("no verify steps in these generations (was speculation on?)")
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- accept length

def accept_length(steps) -> float:
    """Mean tokens per verify step, bonus included (pooled over all steps, like SGLang and vLLM)."""
    return float(accepted_counts(steps).mean() + 1.0)


def accept_length_of_counts(tokens, verify_steps):
    """tokens / verify steps: one request's, one window's or one run's totals (bonus included);
    NaN with no verify step. Scalars give a float, arrays an array (element-wise)."""
    tokens, verify = np.asarray(tokens, dtype=float), np.asarray(verify_steps, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        value = np.where(verify > 0, tokens / np.where(verify > 0, verify, 1), np.nan)
    return float(value) if value.ndim == 0 else value


def accept_length_of_accepted(accepted: float, verify_steps: float) -> float:
    """1 + accepted drafts / verify steps (vLLM's counters: num_accepted_tokens / num_drafts);
    NaN with no verify step."""
    return 1.0 + accepted / verify_steps if verify_steps else float("nan")


def accept_length_of_intervals(values) -> float | None:
    """The mean of the accept lengths a server log prints, one per stats interval (unweighted,
    as a reader of the log would average them); None when the log prints none."""
    values = pd.Series(values, dtype=float).dropna()
    return float(values.mean()) if len(values) else None


def draft_acceptance_rate(accepted: float, verify_steps: float, drafts_per_step: float) -> float:
    """accepted drafts / drafts proposed = accepted / (verify steps x drafts per step): SGLang
    0.5.23's `accept rate` (drafts per step = num_draft_tokens - 1) and vLLM's draft acceptance
    rate; NaN when nothing was proposed."""
    proposed = verify_steps * drafts_per_step
    return float(accepted / proposed) if proposed else float("nan")


def unconditional_from_counts(accepted_per_position, drafts: float) -> np.ndarray:
    """r_i = steps that accepted position i / verify steps (vLLM's per-position counters over
    num_drafts)."""
    return np.asarray(accepted_per_position, dtype=float) / drafts


def accept_length_pooled(tokens, verify_steps) -> float:
    """Pooled accept length from per-request counts: sum(tokens) / sum(verify steps) over the
    requests that report both, NaN with no verify step. Pooled is what the server log reports;
    the mean of per-request accept lengths weights short requests up (sglang PR #3152). A request
    without a verify count is left out, not counted as zero steps (that would inflate the pool)."""
    tokens = np.asarray(tokens, dtype=float).ravel()
    verify = np.asarray(verify_steps, dtype=float).ravel()
    if len(tokens) != len(verify):
        return float("nan")
    both = np.isfinite(tokens) & np.isfinite(verify)
    total = verify[both].sum()
    return float(tokens[both].sum() / total) if total > 0 else float("nan")


def accept_length_from_meta(meta_infos: Iterable[dict]) -> float:
    """Pooled accept length from SGLang ``/generate`` meta_info dicts (`accept_length_pooled`
    of completion_tokens over spec_verify_ct, over the requests that carry spec_verify_ct; the
    per-request spec_accept_length mean when none does)."""
    metas = list(meta_infos)
    counted = [m for m in metas if m.get("spec_verify_ct") is not None]
    if sum(int(m["spec_verify_ct"]) for m in counted) > 0:
        return accept_length_pooled([int(m.get("completion_tokens", 0)) for m in counted],
                                    [int(m["spec_verify_ct"]) for m in counted])
    lengths = [float(m["spec_accept_length"]) for m in metas if m.get("spec_accept_length")]
    if not lengths:
        raise StatsError("meta_info has neither spec_verify_ct nor spec_accept_length "
                         "(is speculative decoding on?)")
    return float(np.mean(lengths))


def request_accept_length(meta: dict) -> float:
    """One request's accept length from its meta_info: the server's spec_accept_length when
    sent, else completion_tokens / spec_verify_ct (NaN with no verify step)."""
    if meta.get("spec_accept_length") is not None:
        return float(meta["spec_accept_length"])
    return accept_length_pooled([meta.get("completion_tokens", 0)], [meta.get("spec_verify_ct") or 0])


def accept_length_from_rates(rates: Sequence[float], conditional: bool = True) -> float:
    """E[L] = 1 + sum_i prod_{j<=i} c_j (conditional) or 1 + sum_i r_i (unconditional)."""
    r = np.nan_to_num(np.asarray(rates, dtype=float))
    return float(1 + (unconditional_rates(r) if conditional else r).sum())


def acceptance_by_context(steps: pd.DataFrame, context_col: str = "context_length",
                          bins: int = 4) -> pd.DataFrame:
    """Accept length per context-length bin (equal-count bins): DataFrame(bin, context, accept_length, n)."""
    if context_col not in steps:
        raise StatsError(f"per-step data has no {context_col!r} column")
    data = steps[[context_col]].assign(accepted=accepted_counts(steps))
    data["bin"] = pd.qcut(data[context_col], q=bins, labels=False, duplicates="drop")
    grouped = data.groupby("bin")
    return pd.DataFrame({"bin": grouped.size().index,
                         "context": grouped[context_col].median().to_numpy(),
                         "accept_length": grouped["accepted"].mean().to_numpy() + 1,
                         "n": grouped.size().to_numpy()})


# --------------------------------------------------------------------------- intervals over prompts

@functools.lru_cache(maxsize=256)
def t_quantile(p: float, df: int) -> float:
    """The p-quantile of Student's t with integer df > 0 (exact CDF, Abramowitz & Stegun 26.7.3-4,
    inverted by bisection; no scipy)."""
    if not 0 < p < 1 or df < 1:
        raise StatsError(f"t quantile needs 0 < p < 1 and df >= 1; got p={p}, df={df}")
    if p < 0.5:
        return -t_quantile(1 - p, df)
    target = 2 * p - 1  # P(|T| < t)
    lo, hi = 0.0, 1.0
    while _t_central(hi, df) < target:
        hi *= 2
    for _ in range(80):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _t_central(mid, df) < target else (lo, mid)
    return (lo + hi) / 2


def _t_central(t: float, df: int) -> float:
    """P(|T| < t), T ~ Student t with integer df: a finite sum in cos(theta), theta = atan(t/sqrt(df))."""
    theta = math.atan(t / math.sqrt(df))
    c2 = math.cos(theta) ** 2
    if df % 2 == 0:  # sin(theta) (1 + 1/2 c2 + 1.3/2.4 c2^2 + ... up to c2^((df-2)/2))
        j = np.arange(1, df // 2)
        terms = np.cumprod((2 * j - 1) / (2 * j) * c2) if len(j) else np.zeros(0)
        return float(math.sin(theta) * (1 + terms.sum()))
    j = np.arange(1, (df - 1) // 2)  # (2/pi)(theta + sin cos (1 + 2/3 c2 + 2.4/3.5 c2^2 + ...))
    terms = np.cumprod(2 * j / (2 * j + 1) * c2) if len(j) else np.zeros(0)
    inner = 0.0 if df == 1 else math.sin(theta) * math.cos(theta) * (1 + terms.sum())
    return float(2 / math.pi * (theta + inner))


def jackknife_interval(columns, estimate, level: float = 0.95, floor: float = 0.0):
    """(lo, hi) of estimate(column sums) over n prompts (rows of `columns`), or None.

    Leave-one-prompt-out jackknife standard error of log(estimate - floor) with Student-t
    quantiles at n - 1 degrees of freedom, centred on the estimate and mapped back with exp, so
    the interval stays above the floor the quantity cannot go below (0 for a rate or a speed-up,
    whose inverse then gets the mirrored interval; 1 for an accept length, whose log scale is
    then that of accepted drafts per step). `estimate` maps sums [..., m] to values [...]. The
    linear scale is used where an estimate is at the floor; None with fewer than two prompts or
    an estimate that is not finite (a zero denominator). Every prompt alike gives a zero-width
    interval.

    Why not the percentile bootstrap used before: with 6 prompts it covered a simulated speed-up
    82-84 % of the time instead of 95 % (47-54 % with 2 prompts) -- a resample of n prompts
    spreads no wider than the n prompts it draws from, and nothing corrects for n. The
    jackknife-t is the textbook small-sample interval for a smooth statistic (a ratio of sums),
    deterministic (no seed), and at n = 2 as wide as two prompts warrant (t quantile 12.7); it
    covered 91-96 % at 6 prompts and 94-96 % at 2 (the low end: prompts of very unequal weight).
    Simulation: benchmarks/interval_coverage.py, table in docs/report-method.md.
    """
    x = np.asarray(columns, dtype=float)
    n = len(x)
    if n < 2:
        return None
    total = x.sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        point = float(estimate(total))
        loo = np.asarray(estimate(total - x), dtype=float)
    if not (math.isfinite(point) and np.isfinite(loo).all()):
        return None
    log_scale = point > floor and (loo > floor).all()
    values = np.log(loo - floor) if log_scale else loo
    spread = float(np.sqrt((n - 1) / n * ((values - values.mean()) ** 2).sum()))
    if not np.ptp(values) > 0:
        return point, point
    half = t_quantile(1 - (1 - level) / 2, n - 1) * spread
    if log_scale:
        return floor + (point - floor) * math.exp(-half), floor + (point - floor) * math.exp(half)
    least = floor if point >= floor and (loo >= floor).all() else -math.inf  # a time stays >= 0
    return max(least, point - half), point + half


def _per_request(steps: pd.DataFrame, width: int | None) -> tuple[np.ndarray, np.ndarray]:
    """(accepted counts, per-request sums): [accepted, steps] (width None) or a histogram of
    accepted = 0..width-1 per request."""
    steps = steps.dropna(subset=["accepted" if "accepted" in steps else "accept_len"])
    acc = accepted_counts(steps)
    codes, _ = pd.factorize(steps["request"])
    if width is None:
        per_request = np.zeros((codes.max() + 1, 2))  # accepted drafts, verify steps
        np.add.at(per_request, codes, np.stack([acc, np.ones_like(acc)], axis=1))
    else:
        per_request = np.zeros((codes.max() + 1, width))
        np.add.at(per_request, (codes, acc), 1)
    return acc, per_request


def _clipped(ci, bounds):
    """An interval cut to the range the quantity can take (an accept length is 1 to k + 1):
    the true value lies inside that range, so cutting costs no coverage."""
    if ci is None or bounds is None:
        return ci
    lo, hi = ci
    low, high = bounds
    return (lo if low is None else min(max(lo, low), hi),
            hi if high is None else max(min(hi, high), lo))


def _rounded_out(ci, digits: int) -> list[float] | None:
    """[lo, hi] rounded outwards to `digits`, so the printed interval still holds its estimate."""
    if ci is None:
        return None
    scale = 10 ** digits
    return [round(math.floor(ci[0] * scale + 1e-9) / scale, digits),
            round(math.ceil(ci[1] * scale - 1e-9) / scale, digits)]


def accept_length_ci(steps, ci: float = 0.95, n_boot: int | None = None, seed: int | None = None):
    """Interval (lo, hi) of the pooled accept length over requests (each request whole: steps of
    one request are correlated), by `jackknife_interval` on the log of L - 1 (accepted drafts
    per step), cut to k + 1 where the steps record their depth; None with fewer than two
    requests (a ``request`` column is needed).
    n_boot and seed are accepted and unused (the interval was a bootstrap; it is deterministic).

    Why: a few prompts decide a small-sample accept length (one loopy continuation accepts
    far more than the rest), so two runs differ only if their intervals say so.
    """
    if not isinstance(steps, pd.DataFrame) or "request" not in steps or steps["request"].nunique() < 2:
        return None
    _, per_request = _per_request(steps, None)
    interval = jackknife_interval(per_request, lambda s: 1.0 + s[..., 0] / s[..., 1], ci, floor=1.0)
    depth = next((steps[c].max() for c in _DEPTH_COLUMNS if c in steps and steps[c].notna().any()), None)
    interval = _clipped(interval, (1.0, None if depth is None else float(depth) + 1))
    return None if interval is None else (float(interval[0]), float(interval[1]))


def rate_ci(tokens, seconds, level: float = 0.95, n_boot: int | None = None, seed: int | None = None,
            digits: int = 2, bounds: tuple[float | None, float | None] | None = None):
    """Interval over prompts of sum(tokens) / sum(seconds) (`jackknife_interval`), within
    `bounds` (lo, hi; the lower one is the floor of the log scale) and rounded outwards to
    `digits`; None with < 2 prompts. (Also accept length: sum(tokens) / sum(verify steps), with
    bounds=(1, None).) n_boot and seed are accepted and unused."""
    columns = np.column_stack([np.asarray(tokens, dtype=float), np.asarray(seconds, dtype=float)])
    floor = 0.0 if bounds is None or bounds[0] is None else float(bounds[0])
    interval = jackknife_interval(columns, lambda s: s[..., 0] / s[..., 1], level, floor=floor)
    return _rounded_out(_clipped(interval, bounds), digits)


def ratio_ci(num_tokens, num_s, den_tokens, den_s, level: float = 0.95, n_boot: int | None = None,
             seed: int | None = None):
    """Speed-up of paired runs: interval over prompts of
    (sum num_tokens / sum num_s) / (sum den_tokens / sum den_s), rounded outwards to 4 digits.

    Each index is one prompt measured both ways (paired, interleaved), so leaving a prompt out
    leaves out both of its runs (`jackknife_interval`). None with fewer than two prompts.
    n_boot and seed are accepted and unused.
    """
    columns = np.column_stack([np.asarray(a, dtype=float) for a in (num_tokens, num_s, den_tokens, den_s)])
    interval = jackknife_interval(columns, lambda s: (s[..., 0] / s[..., 1]) / (s[..., 2] / s[..., 3]), level)
    return _rounded_out(interval, 4)


# --------------------------------------------------------------------------- shares

def wilson_interval(hits: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95 % Wilson score interval (lo, hi) of a proportion hits / n; (0, 1) for n = 0.

    Why Wilson: the validation's shares are near 0 or 1 on 10-13 scenarios, where the normal
    interval leaves [0, 1] or collapses to a point at 13/13."""
    if n <= 0:
        return 0.0, 1.0
    p = hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def _binom_tail(hits: int, n: int, p: float, upper: bool) -> float:
    """P(X >= hits) (upper) or P(X <= hits), X ~ Bin(n, p); in log space, so thousands of
    steps neither overflow nor underflow."""
    if p <= 0.0 or p >= 1.0:
        at_least = hits == 0 if p <= 0.0 else True    # X is 0 or n for sure
        at_most = True if p <= 0.0 else hits >= n
        return float(at_least if upper else at_most)
    ks = np.arange(hits, n + 1) if upper else np.arange(0, hits + 1)
    log_fact = _log_factorials(n)
    log_terms = (log_fact[n] - log_fact[ks] - log_fact[n - ks]
                 + ks * math.log(p) + (n - ks) * math.log1p(-p))
    top = log_terms.max()
    return float(math.exp(top) * np.exp(log_terms - top).sum())


@functools.lru_cache(maxsize=64)
def _log_factorials(n: int) -> np.ndarray:
    """log(0!), ..., log(n!)."""
    return np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, n + 1)))])


def exact_binomial_interval(hits: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Clopper-Pearson interval (lo, hi) of hits / n; (nan, nan) for n == 0.

    Why exact: for a handful of trials (a notebook's few prompts) Wilson's normal approximation
    is not guaranteed to cover; the exact interval is, at the cost of being wider. Bisection on
    the binomial tails (no scipy)."""
    if n <= 0:
        return float("nan"), float("nan")
    if not 0 <= hits <= n:
        raise StatsError(f"hits must be within [0, n]; got {hits} of {n}")
    alpha = (1 - level) / 2

    def solve(target, upper):
        lo, hi = 0.0, 1.0
        for _ in range(60):
            mid = (lo + hi) / 2
            tail = _binom_tail(hits, n, mid, upper)
            # P(X >= hits) rises with p; P(X <= hits) falls with p
            if (tail < target) == upper:
                lo = mid
            else:
                hi = mid
        return (lo + hi) / 2

    lower = 0.0 if hits == 0 else solve(alpha, True)
    upper = 1.0 if hits == n else solve(alpha, False)
    return lower, upper


def share_text(hits: int, n: int) -> str:
    """'92 % (12/13; 95 % CI 67-99 %)': a share with its count and Wilson interval."""
    lo, hi = wilson_interval(hits, n)
    share = f"{100 * hits / n:.0f} %" if n else "-"
    return f"{share} ({hits}/{n}; 95 % CI {100 * lo:.0f}-{100 * hi:.0f} %)"


def sign_test(worse: int, better: int) -> float:
    """One-sided sign test: P(at least `worse` of worse + better fair coin flips)."""
    n = worse + better
    if n == 0:
        return 1.0
    return float(sum(math.comb(n, i) for i in range(worse, n + 1)) / 2 ** n)


# --------------------------------------------------------------------------- per-position rates

def conditional_rates(unconditional: Sequence[float], undefined: float = 0.0) -> np.ndarray:
    """c_i = r_i / r_{i-1} along the last axis (vLLM's per-position rates are unconditional);
    ``undefined`` where r_{i-1} = 0 (no chain got that far)."""
    r = np.asarray(unconditional, dtype=float)
    prev = np.concatenate([np.ones_like(r[..., :1]), r[..., :-1]], axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(prev > 0, r / np.where(prev > 0, prev, 1), undefined)


def unconditional_rates(conditional: Sequence[float]) -> np.ndarray:
    """r_i = prod_{j<=i} c_j along the last axis."""
    return np.cumprod(np.asarray(conditional, dtype=float), axis=-1)


def accept_histogram(steps, k: int | None = None) -> np.ndarray:
    """Counts of steps by accepted = 0..k."""
    acc = accepted_counts(steps)
    k = draft_depth(steps, k)
    if acc.max() > k:
        raise StatsError(f"a step accepted {acc.max()} drafts but the depth is {k}")
    return np.bincount(acc, minlength=k + 1)


def _rates_from_histograms(hist: np.ndarray, conditional: bool) -> tuple[np.ndarray, np.ndarray]:
    """Per-position rates and at-risk counts from histograms [..., k+1] (vectorised)."""
    reached = _reached(hist)
    total = reached[..., :1]
    passed = reached[..., 1:]
    at_risk = reached[..., :-1] if conditional else np.broadcast_to(total, passed.shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        rates = np.where(at_risk > 0, passed / np.where(at_risk > 0, at_risk, 1), np.nan)
    return rates, at_risk


def _reached(hist) -> np.ndarray:
    """reached[..., i] = steps with accepted >= i, i = 0..k, from histograms [..., k + 1]."""
    hist = np.asarray(hist, dtype=float)
    return np.cumsum(hist[..., ::-1], axis=-1)[..., ::-1]


def position_rates(steps, k: int | None = None, *, conditional: bool) -> np.ndarray:
    """Acceptance at draft positions 1..k, without intervals (see `per_position`)."""
    rates, _ = _rates_from_histograms(accept_histogram(steps, k), conditional)
    return rates


def per_position(steps, k: int | None = None, *, conditional: bool, ci: float = 0.95,
                 n_boot: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Acceptance at draft positions 1..k with 95 % intervals (``ci``).

    conditional (required: the two conventions differ by a lot past position 1): True gives
    c_i = P(accept position i | positions < i accepted) (EAGLE's n-alpha); False gives vLLM's
    r_i = P(at least i accepted). Intervals: with a ``request`` column naming two or more
    requests, requests are the unit (steps of one request are correlated): each position's rate
    is a ratio of sums over requests, so it gets the same leave-one-request-out jackknife-t as
    speed-ups and accept lengths (`jackknife_interval`), widened to the exact binomial interval
    of its counts, which alone still holds where every request agrees (none reaching a
    position, or all accepting it). Without requests the steps are taken as independent: the
    exact binomial interval. ``n_boot`` and ``seed`` are accepted and unused (nothing is resampled).
    Returns DataFrame(position, rate, lo, hi, n) where n is the number of steps at risk.
    """
    k = draft_depth(steps, k)
    per_request = None
    if isinstance(steps, pd.DataFrame) and "request" in steps and steps["request"].nunique() > 1:
        _, per_request = _per_request(steps, k + 1)
        hist = per_request.sum(0)
    else:
        hist = accept_histogram(steps, k).astype(float)
    rates, at_risk = _rates_from_histograms(hist, conditional)
    passed = _reached(hist)[1:]
    by_request = None if per_request is None else _reached(per_request)  # [requests, k + 1]
    lo, hi = np.full(k, np.nan), np.full(k, np.nan)
    for i in range(k):
        if at_risk[i] <= 0:
            continue  # nobody reached the position: no rate, no interval
        counts = (int(round(passed[i])), int(round(at_risk[i])))
        request_counts = None if by_request is None else np.stack(
            [by_request[:, i + 1], by_request[:, i] if conditional else by_request[:, 0]], axis=1)
        lo[i], hi[i] = share_interval(counts, request_counts, ci)
    return pd.DataFrame({"position": np.arange(1, k + 1), "rate": rates, "lo": lo, "hi": hi,
                         "n": at_risk.astype(int)})


def accepted_distribution(steps, k: int | None = None, level: float = 0.95) -> pd.DataFrame:
    """Verify steps by drafts accepted, n = 0..k: DataFrame(accepted, steps, share, lo, hi), the
    share's interval `share_interval`'s (requests as the unit where a ``request`` column names
    two or more). For a chain, share n = r_n - r_(n+1); for a tree (topk > 1) it is the
    distribution of accepted path lengths, the only per-step figure a tree's counts give."""
    k = draft_depth(steps, k)
    hist = accept_histogram(steps, k).astype(float)
    per_request = None
    if isinstance(steps, pd.DataFrame) and "request" in steps and steps["request"].nunique() > 1:
        _, per_request = _per_request(steps, k + 1)
    total = hist.sum()
    lo, hi = np.full(k + 1, np.nan), np.full(k + 1, np.nan)
    for n in range(k + 1):
        by_request = None if per_request is None else np.column_stack([per_request[:, n], per_request.sum(1)])
        lo[n], hi[n] = share_interval((int(hist[n]), int(total)), by_request, level)
    return pd.DataFrame({"accepted": np.arange(k + 1), "steps": hist.astype(int),
                         "share": hist / total, "lo": lo, "hi": hi})


def share_interval(counts, request_counts=None, level: float = 0.95) -> tuple[float, float]:
    """Interval of a pooled share hits / n: the exact binomial interval of `counts` (hits, n),
    widened by the jackknife-t over requests where `request_counts` [requests, (hits, n)] names
    two or more (each request's steps are correlated), cut to [0, 1]. The exact interval alone
    still holds where every request agrees (none reaching a position, or all accepting it)."""
    lo, hi = exact_binomial_interval(*counts, level)
    if request_counts is not None:
        wider = jackknife_interval(request_counts, lambda s: s[..., 0] / s[..., 1], level=level)
        if wider is not None:
            lo, hi = min(lo, wider[0]), max(hi, min(1.0, wider[1]))
    return lo, hi


def per_position_from_log(rows: pd.DataFrame, *, conditional: bool) -> pd.DataFrame:
    """Pooled per-position acceptance from read_log rows carrying vLLM/llama.cpp per-position rates.

    Each row's ``per_position`` is unconditional (vLLM metrics.py: accepted_per_pos / num_drafts)
    over one stats interval; rows are pooled weighted by their number of drafts (drafted / K).
    Each rate is a ratio of sums over the rows, so its interval is `share_interval`'s with the
    log's intervals as the unit (their drafts are correlated, as a request's steps are).
    """
    if "per_position" not in rows:
        raise StatsError("log rows have no 'per_position' column")
    rows = rows[rows["per_position"].map(lambda v: isinstance(v, (list, tuple)) and len(v) > 0)]
    if rows.empty:
        raise StatsError("no log line carries per-position acceptance")
    k = max(len(v) for v in rows["per_position"])
    mat = np.zeros((len(rows), k))
    for i, v in enumerate(rows["per_position"]):
        mat[i, :len(v)] = np.nan_to_num(np.asarray(v, dtype=float))
    if "drafted" in rows and rows["drafted"].notna().all():
        weights = rows["drafted"].to_numpy(float) / k
    else:
        weights = np.ones(len(rows))
    accepted = weights[:, None] * mat  # [rows, k]: drafts that accepted position i or more
    # at risk of position i: every draft (unconditional), or those that accepted i - 1 (conditional)
    at_risk_by_row = (np.column_stack([weights, accepted[:, :-1]]) if conditional
                      else np.repeat(weights[:, None], k, axis=1))
    passed, at_risk = accepted.sum(0), at_risk_by_row.sum(0)
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = np.where(at_risk > 0, passed / np.where(at_risk > 0, at_risk, 1), np.nan)
    lo, hi = np.full(k, np.nan), np.full(k, np.nan)
    for i in range(k):
        if at_risk[i] > 0:
            by_row = np.column_stack([accepted[:, i], at_risk_by_row[:, i]]) if len(rows) > 1 else None
            lo[i], hi[i] = share_interval((int(round(passed[i])), int(round(at_risk[i]))), by_row)
    return pd.DataFrame({"position": np.arange(1, k + 1), "rate": rate, "lo": lo, "hi": hi,
                         "n": np.round(at_risk).astype(int)})


def repeated_spans(sequences, window: int = 4) -> tuple[int, int]:
    """(repeats, spans): how many `window`-long spans of each sequence already occurred earlier in
    the same sequence, and how many spans there are (a text's repetitiveness, per generation)."""
    repeats = spans = 0
    for seq in sequences:
        seq, seen = list(seq), set()
        for i in range(len(seq) - window + 1):
            span = tuple(seq[i:i + window])
            repeats += span in seen
            spans += 1
            seen.add(span)
    return repeats, spans

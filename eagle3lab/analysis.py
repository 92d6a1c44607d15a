"""Acceptance analysis: where in the draft chain acceptance is lost, and what it costs.

Everything works from per-step accepted counts: one row per verify step with ``accepted``
(draft tokens accepted in that step, 0..k). A step emits ``accepted + 1`` tokens (the bonus
token, or the target's replacement for the first rejected draft), so

    accept length  L = mean(accepted) + 1                      (SGLang "accept len", vLLM "mean
                                                                acceptance length", EAGLE tau)
    unconditional  r_i = P(accepted >= i)                      (vLLM per-position rate)
    conditional    c_i = P(accepted >= i | accepted >= i - 1)  (EAGLE n-alpha)
    E[L] = 1 + sum_i r_i = 1 + sum_i prod_{j<=i} c_j           (i.i.d. c_j = a:
                                                                (1 - a^(k+1)) / (1 - a))

The cost model turns accept length into tokens/s: a verify step at depth k costs
k * c_draft + c_verify(k), and emits L(k) tokens; plain decoding costs c_target per token.
``diagnose`` names the likely causes of a low accept length from these statistics.

Inputs: steps_frame(generations) (lab engine), run_bench(...).steps, any DataFrame with an
``accepted`` column, accept_length_from_meta(meta_infos) (SGLang /generate), and
per_position_from_log(read_log(...)) (vLLM / llama.cpp per-position lines).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from eagle3lab.errors import EagleLabError

CAUSES = ("config_adjusted", "wiring", "vocab_mapping", "multi_step", "quantization",
          "distribution_shift", "context_length", "sampling", "healthy")

_DEPTH_COLUMNS = ("k", "depth", "num_steps", "drafted")


class AnalysisError(EagleLabError):
    """Input the analysis cannot use (empty, out of range, missing columns)."""


# --------------------------------------------------------------------------- per-step input

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
            raise AnalysisError("per-step data needs an 'accepted' (or 'accept_len') column; "
                                f"got {list(steps.columns)}")
    else:
        values = np.asarray(steps if not isinstance(steps, pd.Series) else steps.to_numpy())
    values = np.asarray(values, dtype=float).ravel()
    values = values[~np.isnan(values)]
    if values.size == 0:
        raise AnalysisError("no verify steps to analyse")
    if (values < 0).any() or (values != np.round(values)).any():
        raise AnalysisError("accepted counts must be whole numbers >= 0")
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
    from eagle3lab.engine Generation objects (one per request).

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
        raise AnalysisError("no verify steps in these generations (was speculation on?)")
    return pd.DataFrame(rows)


def accept_length(steps) -> float:
    """Mean tokens per verify step, bonus included (pooled over all steps, like SGLang and vLLM)."""
    return float(accepted_counts(steps).mean() + 1.0)


def accept_length_ci(steps, ci: float = 0.95, n_boot: int = 2000, seed: int = 0):
    """Bootstrap interval (lo, hi) of the pooled accept length, resampling requests whole;
    None with fewer than two requests (a ``request`` column is needed).

    Why: a few prompts decide a small-sample accept length (one loopy continuation accepts
    far more than the rest), so two runs differ only if their intervals say so.
    """
    if not isinstance(steps, pd.DataFrame) or "request" not in steps or steps["request"].nunique() < 2:
        return None
    steps = steps.dropna(subset=["accepted" if "accepted" in steps else "accept_len"])
    acc = accepted_counts(steps)
    codes, _ = pd.factorize(steps["request"])
    per_request = np.zeros((codes.max() + 1, 2))  # accepted drafts, verify steps
    np.add.at(per_request, codes, np.stack([acc, np.ones_like(acc)], axis=1))
    picks = np.random.default_rng(seed).integers(0, len(per_request), size=(n_boot, len(per_request)))
    boot = per_request[picks].sum(axis=1)
    alpha = (1 - ci) / 2
    lo, hi = np.quantile(1.0 + boot[:, 0] / boot[:, 1], [alpha, 1 - alpha])
    return float(lo), float(hi)


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
        raise AnalysisError("meta_info has neither spec_verify_ct nor spec_accept_length "
                            "(is speculative decoding on?)")
    return float(np.mean(lengths))


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


def exact_binomial_interval(hits: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Clopper-Pearson interval (lo, hi) of a proportion hits / n; (nan, nan) for n == 0.

    Why exact: per-position rates rest on as few as 1 step, where a bootstrap over prompts
    collapses to a point ("0.000 [0.000, 0.000]"); this interval never claims more than n allows."""
    if n <= 0:
        return float("nan"), float("nan")
    if not 0 <= hits <= n:
        raise AnalysisError(f"hits must be in 0..n, got {hits} of {n}")
    tail = (1 - level) / 2

    def cdf(k: int, p: float) -> float:  # P(X <= k), X ~ Binomial(n, p)
        if p <= 0:
            return 1.0
        if p >= 1:
            return 1.0 if k >= n else 0.0
        logs = [math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1)
                + i * math.log(p) + (n - i) * math.log1p(-p) for i in range(k + 1)]
        top = max(logs)
        return min(1.0, math.exp(top) * sum(math.exp(v - top) for v in logs))

    def solve(f) -> float:  # the p in (0, 1) where the decreasing f(p) crosses tail
        lo, hi = 0.0, 1.0
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if f(mid) > tail else (lo, mid)
        return (lo + hi) / 2

    lower = 0.0 if hits == 0 else 1 - solve(lambda p: 1 - cdf(hits - 1, 1 - p))
    upper = 1.0 if hits == n else solve(lambda p: cdf(hits, p))
    return lower, upper


def share_text(hits: int, n: int) -> str:
    """'92 % (12/13; 95 % CI 67-99 %)': a share with its count and Wilson interval."""
    lo, hi = wilson_interval(hits, n)
    share = f"{100 * hits / n:.0f} %" if n else "-"
    return f"{share} ({hits}/{n}; 95 % CI {100 * lo:.0f}-{100 * hi:.0f} %)"


def accept_histogram(steps, k: int | None = None) -> np.ndarray:
    """Counts of steps by accepted = 0..k."""
    acc = accepted_counts(steps)
    k = draft_depth(steps, k)
    if acc.max() > k:
        raise AnalysisError(f"a step accepted {acc.max()} drafts but the depth is {k}")
    return np.bincount(acc, minlength=k + 1)


# --------------------------------------------------------------------------- per-position

def _rates_from_histograms(hist: np.ndarray, conditional: bool) -> tuple[np.ndarray, np.ndarray]:
    """Per-position rates and at-risk counts from histograms [..., k+1] (vectorised)."""
    hist = np.asarray(hist, dtype=float)
    # reached[..., i] = steps with accepted >= i, i = 0..k
    reached = np.cumsum(hist[..., ::-1], axis=-1)[..., ::-1]
    total = reached[..., :1]
    passed = reached[..., 1:]
    at_risk = reached[..., :-1] if conditional else np.broadcast_to(total, passed.shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        rates = np.where(at_risk > 0, passed / np.where(at_risk > 0, at_risk, 1), np.nan)
    return rates, at_risk


def position_rates(steps, k: int | None = None, *, conditional: bool) -> np.ndarray:
    """Acceptance at draft positions 1..k, without intervals (see `per_position`)."""
    rates, _ = _rates_from_histograms(accept_histogram(steps, k), conditional)
    return rates


def per_position(steps, k: int | None = None, *, conditional: bool, ci: float = 0.95,
                 n_boot: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Acceptance at draft positions 1..k with bootstrap confidence intervals.

    conditional (required: the two conventions differ by a lot past position 1): True gives
    c_i = P(accept position i | positions < i accepted) (EAGLE's n-alpha); False gives vLLM's
    r_i = P(at least i accepted). The bootstrap resamples requests when a
    ``request`` column is present (steps of one request are correlated), otherwise steps; either
    way it is one multinomial/gather over histograms, so 2000 resamples cost milliseconds.
    Returns DataFrame(position, rate, lo, hi, n) where n is the number of steps at risk.
    """
    k = draft_depth(steps, k)
    rng = np.random.default_rng(seed)
    if isinstance(steps, pd.DataFrame) and "request" in steps and steps["request"].nunique() > 1:
        steps = steps.dropna(subset=["accepted" if "accepted" in steps else "accept_len"])
        acc = accepted_counts(steps)
        codes, _ = pd.factorize(steps["request"])
        per_request = np.zeros((codes.max() + 1, k + 1))
        np.add.at(per_request, (codes, acc), 1)
        hist = per_request.sum(0)
        picks = rng.integers(0, len(per_request), size=(n_boot, len(per_request)))
        boot = per_request[picks].sum(axis=1)
    else:
        hist = accept_histogram(steps, k).astype(float)
        boot = rng.multinomial(int(hist.sum()), hist / hist.sum(), size=n_boot)
    rates, at_risk = _rates_from_histograms(hist, conditional)
    boot_rates, _ = _rates_from_histograms(boot, conditional)
    alpha = (1 - ci) / 2
    with np.errstate(all="ignore"):
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            lo = np.nanquantile(boot_rates, alpha, axis=0)
            hi = np.nanquantile(boot_rates, 1 - alpha, axis=0)
    return pd.DataFrame({"position": np.arange(1, k + 1), "rate": rates, "lo": lo, "hi": hi,
                         "n": at_risk.astype(int)})


_per_position_table = per_position  # diagnose() takes an argument of the same name


def per_position_from_log(rows: pd.DataFrame, *, conditional: bool) -> pd.DataFrame:
    """Pooled per-position acceptance from read_log rows carrying vLLM/llama.cpp per-position rates.

    Each row's ``per_position`` is unconditional (vLLM metrics.py: accepted_per_pos / num_drafts)
    over one stats interval; rows are pooled weighted by their number of drafts (drafted / K).
    Intervals are resampled for the confidence interval.
    """
    if "per_position" not in rows:
        raise AnalysisError("log rows have no 'per_position' column")
    rows = rows[rows["per_position"].map(lambda v: isinstance(v, (list, tuple)) and len(v) > 0)]
    if rows.empty:
        raise AnalysisError("no log line carries per-position acceptance")
    k = max(len(v) for v in rows["per_position"])
    mat = np.full((len(rows), k), np.nan)
    for i, v in enumerate(rows["per_position"]):
        mat[i, :len(v)] = v
    if "drafted" in rows and rows["drafted"].notna().all():
        weights = rows["drafted"].to_numpy(float) / k
    else:
        weights = np.ones(len(rows))
    n_drafts = weights.sum()

    def pooled(w):  # w: [..., n_rows]
        uncond = np.nansum(w[..., None] * np.nan_to_num(mat), axis=-2) / w.sum(-1, keepdims=True)
        if not conditional:
            return uncond
        prev = np.concatenate([np.ones_like(uncond[..., :1]), uncond[..., :-1]], axis=-1)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(prev > 0, uncond / np.where(prev > 0, prev, 1), np.nan)

    rate = pooled(weights)
    rng = np.random.default_rng(0)
    picks = rng.integers(0, len(rows), size=(1000, len(rows)))
    boot_w = np.zeros((1000, len(rows)))
    np.add.at(boot_w, (np.arange(1000)[:, None], picks), weights[picks])
    boot = pooled(boot_w)
    uncond = pooled(weights) if not conditional else np.cumprod(np.nan_to_num(rate))
    at_risk = n_drafts * np.concatenate([[1.0], uncond[:-1]]) if conditional else np.full(k, n_drafts)
    return pd.DataFrame({"position": np.arange(1, k + 1), "rate": rate,
                         "lo": np.nanquantile(boot, 0.025, axis=0),
                         "hi": np.nanquantile(boot, 0.975, axis=0),
                         "n": np.round(at_risk).astype(int)})


def conditional_from_unconditional(rates: Sequence[float]) -> np.ndarray:
    """c_i = r_i / r_{i-1} (vLLM's per-position rates are unconditional)."""
    r = np.asarray(rates, dtype=float)
    prev = np.concatenate([[1.0], r[:-1]])
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(prev > 0, r / np.where(prev > 0, prev, 1), 0.0)


def unconditional_from_conditional(rates: Sequence[float]) -> np.ndarray:
    """r_i = prod_{j<=i} c_j."""
    return np.cumprod(np.asarray(rates, dtype=float))


# --------------------------------------------------------------------------- models of E[L]

def expected_accept_length(a, k):
    """E[L] for i.i.d. per-token acceptance a at depth k: (1 - a^(k+1)) / (1 - a); a = 1 -> k + 1.

    Vectorised over a and k (numpy broadcasting); returns a float for scalar input.
    """
    a = np.asarray(a, dtype=float)
    k = np.asarray(k, dtype=float)
    if ((a < 0) | (a > 1)).any():
        raise AnalysisError("acceptance a must be within [0, 1]")
    near_one = np.isclose(a, 1.0)
    safe = np.where(near_one, 0.5, a)
    value = np.where(near_one, k + 1, (1 - safe ** (k + 1)) / (1 - safe))
    return float(value) if value.ndim == 0 else value


def expected_accept_length_from_rates(rates: Sequence[float], conditional: bool = True) -> float:
    """E[L] = 1 + sum_i prod_{j<=i} c_j (conditional) or 1 + sum_i r_i (unconditional)."""
    r = np.nan_to_num(np.asarray(rates, dtype=float))
    return float(1 + (np.cumprod(r) if conditional else r).sum())


def accept_length_curve(rates: Sequence[float]) -> np.ndarray:
    """E[L] at depths 1..len(rates) for conditional rates (truncating the chain)."""
    return 1 + np.cumsum(np.cumprod(np.nan_to_num(np.asarray(rates, dtype=float))))


def fit_iid_rate(accept_len: float, k: int, tol: float = 1e-10) -> float:
    """The per-token acceptance a whose i.i.d. model gives accept_len at depth k (bisection).

    E[L](a) is increasing in a from 1 (a=0) to k+1 (a=1), so the root is unique.
    """
    if k < 1:
        raise AnalysisError("depth k must be >= 1")
    if not 1 <= accept_len <= k + 1:
        raise AnalysisError(f"accept length {accept_len} is outside [1, {k + 1}] for depth {k}")
    lo, hi = 0.0, 1.0
    while hi - lo > tol:
        mid = (lo + hi) / 2
        if expected_accept_length(mid, k) < accept_len:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


# --------------------------------------------------------------------------- rate conversions

def rate_conversions(accept_len: float, num_steps: int, num_draft_tokens: int | None = None,
                     topk: int = 1) -> dict:
    """Every published 'acceptance rate' for one accept length, so numbers can be compared.

    - SGLang old builds: accept_len / (num_steps + 1), bonus included (2.17 -> 0.54, 3 steps).
    - SGLang new builds: accepted / (verify steps * (num_draft_tokens - 1)) = (L - 1) / (ndt - 1).
    - vLLM "Avg Draft acceptance rate": accepted / drafted = (L - 1) / K (chain of K drafts).
    - i.i.d. per-token a: fit_iid_rate(L, num_steps).
    (see docs/sources.md sections 3 and 4.)
    """
    if num_draft_tokens is None:
        num_draft_tokens = num_steps * topk + 1 if topk > 1 else num_steps + 1
    accepted = accept_len - 1
    return {
        "accept_length": accept_len,
        "sglang_old_accept_rate": accept_len / (num_steps + 1),
        "sglang_new_accept_rate": accepted / max(num_draft_tokens - 1, 1),
        "vllm_draft_acceptance_rate": accepted / num_steps,
        "iid_per_token_rate": fit_iid_rate(min(accept_len, num_steps + 1), num_steps),
    }


def accept_length_from_rate(rate: float, kind: str, num_steps: int,
                            num_draft_tokens: int | None = None) -> float:
    """Invert a reported rate to accept length. kind: sglang_old | sglang_new | vllm | iid."""
    ndt = num_draft_tokens if num_draft_tokens is not None else num_steps + 1
    if kind == "sglang_old":
        return rate * (num_steps + 1)
    if kind == "sglang_new":
        return 1 + rate * (ndt - 1)
    if kind == "vllm":
        return 1 + rate * num_steps
    if kind == "iid":
        return expected_accept_length(rate, num_steps)
    raise AnalysisError(f"unknown rate kind {kind!r} (sglang_old, sglang_new, vllm, iid)")


# --------------------------------------------------------------------------- gap analysis

def gap_table(standalone_acc: Sequence[float], served) -> pd.DataFrame:
    """Standalone acc@1..k against served conditional acceptance, term by term.

    served: conditional per-position rates, or per_position()'s DataFrame. Each position i adds
    prod_{j<=i} rate_j to E[L]; ``lost`` is how much accept length position i's term loses,
    so ``lost.sum()`` is the whole gap between standalone-predicted and served accept length.
    """
    served_rates = served["rate"].to_numpy(float) if isinstance(served, pd.DataFrame) else \
        np.asarray(served, dtype=float)
    acc = as_accuracy(standalone_acc)
    k = min(len(acc), len(served_rates))
    if k == 0:
        raise AnalysisError("need at least one position on both sides")
    acc, served_rates = acc[:k], np.nan_to_num(served_rates[:k])
    term_standalone = np.cumprod(acc)
    term_served = np.cumprod(served_rates)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(acc > 0, served_rates / np.where(acc > 0, acc, 1), np.nan)
    return pd.DataFrame({
        "position": np.arange(1, k + 1), "standalone": acc, "served": served_rates,
        "gap": acc - served_rates, "ratio": ratio,
        "term_standalone": term_standalone, "term_served": term_served,
        "lost": term_standalone - term_served,
        "accept_length_standalone": 1 + np.cumsum(term_standalone),
        "accept_length_served": 1 + np.cumsum(term_served),
    })


# --------------------------------------------------------------------------- cost model

@dataclass
class CostModel:
    """Seconds per step: draft step c_draft, verify c_verify + c_verify_token * (k+1), plain c_target.

    c_target is one plain decode step of the target (no speculation); when unknown it defaults
    to the verify cost of a single token, c_verify + c_verify_token.
    """

    c_draft: float
    c_verify: float
    c_target: float | None = None
    c_verify_token: float = 0.0
    batch_size: int | None = None

    def __post_init__(self):
        if self.c_target is None:
            self.c_target = self.c_verify + self.c_verify_token
        if min(self.c_draft, self.c_verify, self.c_target) < 0:
            raise AnalysisError("costs must be >= 0")

    @property
    def ratio(self) -> float:
        """Draft step cost relative to one plain target step."""
        return self.c_draft / self.c_target

    def step_time(self, k):
        """Seconds for one speculative step at depth k: k draft steps plus one verify pass."""
        k = np.asarray(k, dtype=float)
        return k * self.c_draft + self.c_verify + self.c_verify_token * (k + 1)

    def break_even_accept_length(self, k):
        """Accept length at which speculation at depth k is exactly as fast as plain decoding."""
        return self.step_time(k) / self.c_target

    def tokens_per_s(self, accept_len, k):
        return np.asarray(accept_len, dtype=float) / self.step_time(k)

    def speedup(self, accept_len, k):
        return self.tokens_per_s(accept_len, k) * self.c_target

    @property
    def baseline_tokens_per_s(self) -> float:
        return 1.0 / self.c_target


def fit_cost_model(sweep: pd.DataFrame, depth_col: str = "k", time_col: str = "step_time",
                   baseline_time: float | None = None) -> CostModel:
    """Least-squares fit of step_time = c_verify + k * c_draft over a depth sweep.

    Rows at depth 0 (no speculation) give c_target directly when present. The verify pass's
    growth with k is folded into c_draft (one sweep cannot separate the two); pass
    ``baseline_time`` when plain decoding was timed separately.
    """
    if depth_col not in sweep or time_col not in sweep:
        raise AnalysisError(f"sweep needs columns {depth_col!r} and {time_col!r}")
    data = sweep[[depth_col, time_col]].dropna()
    base = data[data[depth_col] == 0]
    spec = data[data[depth_col] > 0]
    if baseline_time is None and not base.empty:
        baseline_time = float(base[time_col].mean())
    if spec[depth_col].nunique() < 2:
        raise AnalysisError("fitting draft and verify costs needs at least two depths")
    design = np.column_stack([np.ones(len(spec)), spec[depth_col].to_numpy(float)])
    (c_verify, c_draft), *_ = np.linalg.lstsq(design, spec[time_col].to_numpy(float), rcond=None)
    return CostModel(c_draft=max(float(c_draft), 0.0), c_verify=max(float(c_verify), 0.0),
                     c_target=baseline_time)


def cost_model_from_steps(steps: pd.DataFrame, baseline_tokens_per_s: float | None = None) -> CostModel:
    """Measured costs from the engine's per-step timings (steps_frame: draft_s, verify_s, drafted).

    c_draft = total draft time / total draft forward passes (one per drafted chain token);
    c_verify = mean verify time; c_target = 1 / plain-decoding tokens/s when given.
    """
    for col in ("draft_s", "verify_s"):
        if col not in steps:
            raise AnalysisError(f"per-step data has no {col!r} column (need engine timings)")
    drafted = steps["drafted"] if "drafted" in steps else pd.Series(draft_depth(steps), index=steps.index)
    c_draft = float(steps["draft_s"].sum() / max(drafted.sum(), 1))
    c_verify = float(steps["verify_s"].mean())
    c_target = 1.0 / baseline_tokens_per_s if baseline_tokens_per_s else None
    return CostModel(c_draft=c_draft, c_verify=c_verify, c_target=c_target)


def fit_cost_models(sweep: pd.DataFrame, by: str = "batch_size", **kwargs) -> pd.DataFrame:
    """One CostModel per batch size: DataFrame(batch_size, c_draft, c_verify, c_target, ratio, model)."""
    if by not in sweep:
        model = fit_cost_model(sweep, **kwargs)
        return pd.DataFrame([{by: None, "c_draft": model.c_draft, "c_verify": model.c_verify,
                              "c_target": model.c_target, "ratio": model.ratio, "model": model}])
    rows = []
    for value, group in sweep.groupby(by):
        model = fit_cost_model(group, **kwargs)
        model.batch_size = value
        rows.append({by: value, "c_draft": model.c_draft, "c_verify": model.c_verify,
                     "c_target": model.c_target, "ratio": model.ratio, "model": model})
    return pd.DataFrame(rows)


def throughput_vs_depth(cost: CostModel, rates=None, a: float | None = None,
                        max_depth: int | None = None) -> pd.DataFrame:
    """Predicted accept length, step time, tokens/s and speed-up at depths 1..max_depth.

    rates: conditional per-position rates (positions beyond them repeat the last rate);
    or a: i.i.d. per-token acceptance.
    """
    if rates is None and a is None:
        raise AnalysisError("give per-position rates or an i.i.d. rate a")
    if rates is not None:
        rates = rates["rate"].to_numpy(float) if isinstance(rates, pd.DataFrame) else \
            np.asarray(rates, dtype=float)
        max_depth = max_depth or len(rates)
        if len(rates) < max_depth:
            rates = np.concatenate([rates, np.full(max_depth - len(rates), rates[-1])])
        lengths = accept_length_curve(rates[:max_depth])
    else:
        max_depth = max_depth or 8
        lengths = expected_accept_length(a, np.arange(1, max_depth + 1))
    depth = np.arange(1, max_depth + 1)
    return pd.DataFrame({
        "depth": depth, "accept_length": lengths, "step_time": cost.step_time(depth),
        "tokens_per_s": cost.tokens_per_s(lengths, depth), "speedup": cost.speedup(lengths, depth),
        "break_even_accept_length": cost.break_even_accept_length(depth),
        "baseline_tokens_per_s": cost.baseline_tokens_per_s,
    })


def best_depth(cost: CostModel, rates=None, a: float | None = None,
               max_depth: int | None = None) -> dict:
    """The depth with the highest predicted tokens/s (depth 0 = do not speculate)."""
    table = throughput_vs_depth(cost, rates=rates, a=a, max_depth=max_depth)
    best = table.loc[table["tokens_per_s"].idxmax()]
    if best["speedup"] <= 1.0:
        return {"depth": 0, "tokens_per_s": cost.baseline_tokens_per_s, "speedup": 1.0,
                "accept_length": 1.0}
    return {"depth": int(best["depth"]), "tokens_per_s": float(best["tokens_per_s"]),
            "speedup": float(best["speedup"]), "accept_length": float(best["accept_length"])}


def best_depths(cost_models: pd.DataFrame, rates=None, a: float | None = None,
                max_depth: int | None = None, by: str = "batch_size") -> pd.DataFrame:
    """best_depth for each fitted cost model (fit_cost_models' frame): the depth to use per
    batch size, given one acceptance profile."""
    rows = []
    for row in cost_models.itertuples(index=False):
        best = best_depth(row.model, rates=rates, a=a, max_depth=max_depth)
        rows.append({by: getattr(row, by), **best, "ratio": row.ratio})
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- diagnosis

@dataclass
class Finding:
    """One candidate cause of a low accept length, with the numbers behind it.

    weight: the rule's hand-set ordering weight (0..1). It ranks findings and gates a few rules;
    it is not a probability (no rule's hit rate has been measured on enough held-out labs to
    calibrate one), so nothing shown to a user prints it.
    """

    cause: str
    weight: float
    evidence: list[str] = field(default_factory=list)
    next_check: str = ""

    def __post_init__(self):
        if self.cause not in CAUSES:
            raise ValueError(f"unknown cause {self.cause!r}")
        self.weight = float(min(max(self.weight, 0.0), 1.0))

    def __str__(self) -> str:
        return f"{self.cause}: {' '.join(self.evidence)} Next: {self.next_check}"


def findings_frame(findings: Sequence[Finding]) -> pd.DataFrame:
    """Findings as a DataFrame (rank, cause, evidence, next_check) for notebooks; the rank is
    the order, no probability is claimed."""
    return pd.DataFrame([{"rank": i + 1, "cause": f.cause, "evidence": " ".join(f.evidence),
                          "next_check": f.next_check} for i, f in enumerate(findings)],
                        columns=["rank", "cause", "evidence", "next_check"])


NEXT_CHECKS = {
    "config_adjusted": "`eagle3lab config -- <launch_server flags>` (eagle3lab.config.SpecConfig"
                       ".from_cli(argv).resolve()): compare num_draft_tokens asked and effective",
    "wiring": "`eagle3lab wiring --draft DIR --target DIR` (eagle3lab.wiring.check): the "
              "boundaries the engine feeds against those the draft was trained on",
    "vocab_mapping": "`eagle3lab wiring --draft DIR --target DIR` (vocab checks): the draft's "
                     "d2t/t2d buffers exist and the engine maps draft ids to target ids",
    "multi_step": "eagle3lab.lab.evaluate_draft(..., depth=k) for acc@1..k of a TTT-style rollout "
                  "against served per-position rates (eagle3lab.analysis.gap_table); was the draft "
                  "trained with training-time test? check the draft KV cache and positions",
    "quantization": "re-run on the full-precision target (`eagle3lab lab bench` without quant "
                    "faults) and compare per-position rates",
    "distribution_shift": "evaluate the draft on the served prompts themselves "
                          "(eagle3lab.lab.evaluate_draft on a traffic sample) against its "
                          "evaluation data; compare prompt domains with the training data",
    "context_length": "bin acceptance by context length (eagle3lab.analysis.acceptance_by_context) "
                      "and compare with the draft's training sequence length",
    "sampling": "re-run at temperature 0 (`eagle3lab lab bench --temperature 0`); if the gap closes, "
                "check the draft sampling mode (greedy drafting at T > 0) and the verification rule",
    "healthy": "nothing to fix in acceptance; check the cost side (eagle3lab.analysis.best_depth)",
}


def acceptance_by_context(steps: pd.DataFrame, context_col: str = "context_length",
                          bins: int = 4) -> pd.DataFrame:
    """Accept length per context-length bin (equal-count bins): DataFrame(bin, context, accept_length, n)."""
    if context_col not in steps:
        raise AnalysisError(f"per-step data has no {context_col!r} column")
    data = steps[[context_col]].assign(accepted=accepted_counts(steps))
    data["bin"] = pd.qcut(data[context_col], q=bins, labels=False, duplicates="drop")
    grouped = data.groupby("bin")
    return pd.DataFrame({"bin": grouped.size().index,
                         "context": grouped[context_col].median().to_numpy(),
                         "accept_length": grouped["accepted"].mean().to_numpy() + 1,
                         "n": grouped.size().to_numpy()})


def _as_rates(per_position_) -> np.ndarray | None:
    if per_position_ is None:
        return None
    if isinstance(per_position_, pd.DataFrame):
        return per_position_["rate"].to_numpy(float)
    return np.asarray(per_position_, dtype=float)


def as_accuracy(standalone) -> np.ndarray | None:
    """Standalone acc@1..k from a scalar, a sequence or evaluate_draft's DataFrame(depth, accuracy)."""
    if standalone is None:
        return None
    if isinstance(standalone, pd.DataFrame):
        return standalone.sort_values("depth")["accuracy"].to_numpy(float)
    return np.atleast_1d(np.asarray(standalone, dtype=float))


def _fmt(values) -> str:
    return "[" + ", ".join(f"{v:.2f}" for v in values) + "]"


# Thresholds of the diagnosis rules, calibrated on the lab's measured fault signatures
# (benchmarks/validate_diagnosis.py prints them per fault). Ratios are served / standalone.
THRESHOLDS = {
    "zero": 0.03,          # position-1 acceptance below this: ids do not even match (vocab map)
    "dead": 0.4,           # position 1 keeps < 40 % of the reference acc@1: wrong inputs
    "dead_abs": 0.15,      # ... or position 1 below 15 % when no standalone accuracy is known
    "collapse": 0.3,       # later positions pooled < 30 % of position 1: the multi-step path
    "sag": 0.7,            # later positions pooled < 70 % of position 1: a weaker tail
    "first_ok": 0.75,      # position 1 keeps >= 75 % of its reference for a multi-step verdict
    "healthy": 0.8,        # served keeps >= 80 % of the reference: healthy
    "prompt_shift": 0.9,   # served text's own acc@1 < 90 % of the evaluation data's: harder text
    "context_decay": 0.3,  # accept length loses > 30 % of its excess over 1 across context bins
    # Exact evidence (no calibration on fault signatures; the values say what counts as noise):
    "rollout_decay": 0.75,  # the draft's own acc@2..k pooled < 75 % of its acc@1: it cannot draft deep
    "tie_margin": 1e-3,    # a served token that is not the reference target's argmax by more than
                           # this many logits is not a numerical tie (fp32 reference; raise for bf16)
    "replay_p": 0.01,      # one-sided sign test: served steps accepting less than the replay
    "replay_differ_min": 3,  # ... or at least this many served steps that differ from the replay
    "replay_differ_share": 0.02,  # ... and this share of them, either way (fp32: a correct serve
                                  # differs on none; raise for a bf16 server against an fp32 replay)
    "logprob_tol": 1e-3,   # served log-probability off the fp32 reference's by more than this is not
                           # rounding (measured: <= 4e-6 for the same fp32 target; raise for bf16)
    "logprob_share": 0.05,  # ... on more than this share of the served tokens: another target
    "context_t": 2.0,      # accept length within the training length exceeds beyond by >= 2 SE
}


def acceptance_signature(rates, standalone_acc=None) -> dict:
    """The numbers the diagnosis rules read: position-1 rate, tail/first ratio, served/standalone.

    keep1 = c_1 / acc@1; keep = mean over known positions of c_i / acc@i (standalone acc
    beyond the evaluated depth is taken as flat, the way a single acc@1 is usually read);
    tail_drop = tail / c_1, tail = acceptance at positions 2..k pooled by how often each is
    reached (sum r_i / sum r_{i-1}, i >= 2), so rarely reached positions do not swing it.
    """
    rates = np.nan_to_num(np.asarray(rates, dtype=float))
    acc = as_accuracy(standalone_acc)
    c1 = float(rates[0])
    # pooled acceptance beyond position 1: each position weighted by how often it is reached
    reached = np.cumprod(np.concatenate([[1.0], rates]))  # r_0 = 1, r_1, ..., r_k
    tail = float(reached[2:].sum() / reached[1:-1].sum()) if len(rates) > 1 and reached[1] > 0 else c1
    sig = {"c1": c1, "tail": tail, "tail_drop": tail / c1 if c1 > 0 else 1.0,
           "accept_len_model": expected_accept_length_from_rates(rates),
           "keep1": None, "keep": None, "keep_spread": None}
    if acc is not None and len(acc):
        full = np.concatenate([acc, np.full(max(len(rates) - len(acc), 0), acc[-1])])[:len(rates)]
        ratio = rates / np.maximum(full, 1e-9)
        sig.update(keep1=float(ratio[0]), keep=float(np.mean(ratio)),
                   keep_spread=float(np.std(ratio)), acc1=float(acc[0]),
                   accept_len_standalone=expected_accept_length_from_rates(full))
    return sig


def diagnose(observation=None, *, per_position=None, accept_len: float | None = None,
             standalone_acc=None,
             requested_draft_tokens: int | None = None,
             effective_draft_tokens: int | None = None,
             context_lengths=None, steps: pd.DataFrame | None = None,
             standalone_acc_served=None, temperature: float | None = None,
             depth: int | None = None, draft_max_context: int | None = None,
             replay: dict | None = None) -> list[Finding]:
    """Rank likely causes of a low accept length from observed statistics (by the rules' weights:
    an order, not probabilities).

    observation: an `eagle3lab.sources.Observation` (a log, meta_info or the lab engine read
    back); it supplies whatever of the arguments below it carries (per-position rates, made
    conditional if the source's are not; accept length; requested and effective draft tokens,
    the effective ones read from the source, e.g. SGLang's adjustment warning in a log; the
    lab's per-step frame). Numbers given explicitly win over the observation's.
    per_position: served conditional per-position rates (sequence or per_position()'s frame).
    standalone_acc: the draft's own acc@1..m as its training evaluation reports it (a scalar,
    a sequence or evaluate_draft's DataFrame). standalone_acc_served: the same measured on the
    served prompts with the full-precision target (separates a prompt shift from a serve-side
    change such as a quantized target). context_lengths: per-step context lengths aligned with
    ``steps`` (or a ``context_length`` column in steps). temperature: the sampling temperature.
    draft_max_context: the longest sequence the draft was trained on (its training seq_len).
    Served rates are compared with standalone_acc when given (else standalone_acc_served).
    replay: the served text re-scored offline (`eagle3lab.lab.evaluation.served_text_replay`):
    {"reference_accepted": per step of ``steps``, what the draft served as it was trained would
    have accepted (NaN where unknown); "tokens_checked"; "mismatch_margins": logit margins of the
    served tokens that are not the full-precision target's argmax}. At temperature 0 it replaces
    the rate-shape rules by exact tests: is the served target the reference one, and does each
    step accept what the draft itself would have accepted? standalone_acc evaluated at the served
    depth (acc@1..k) also says whether the draft itself can draft k deep.
    """
    adjusted_evidence = None
    if observation is not None:
        given = _from_observation(observation)
        per_position = per_position if per_position is not None else given["per_position"]
        accept_len = accept_len if accept_len is not None else given["accept_len"]
        requested_draft_tokens = requested_draft_tokens or given["requested"]
        effective_draft_tokens = effective_draft_tokens or given["effective"]
        steps = steps if steps is not None else given["steps"]
        adjusted_evidence = given["adjusted"]
    if steps is not None:
        per_position = per_position if per_position is not None else _per_position_table(
            steps, depth, conditional=True)
        accept_len = accept_len if accept_len is not None else accept_length(steps)
    rates = _as_rates(per_position)
    findings: list[Finding] = []
    beyond = _context_effect(steps, context_lengths, draft_max_context)
    findings += _config_findings(requested_draft_tokens, effective_draft_tokens, adjusted_evidence)
    findings += _rollout_findings(standalone_acc, depth or (len(rates) if rates is not None else None))
    if rates is not None and len(rates):
        depth = depth or len(rates)
        if accept_len is None:
            accept_len = expected_accept_length_from_rates(rates)
        exact = replay is not None and steps is not None and not (temperature or 0) > 0
        if exact:
            findings += _diagnose_replay(np.nan_to_num(rates), accept_len, steps, replay, depth,
                                         standalone_acc, standalone_acc_served, beyond,
                                         draft_max_context)
        else:
            findings += _diagnose_rates(np.nan_to_num(rates), accept_len, standalone_acc,
                                        standalone_acc_served, temperature, depth, beyond,
                                        draft_max_context)
    findings += _diagnose_context(steps, context_lengths)
    findings = _merge(findings)
    concrete = [f for f in findings if f.cause != "healthy" and f.weight >= 0.6]
    for f in findings:  # "healthy" means no evidence of a problem: yield to concrete evidence
        if f.cause == "healthy" and concrete:
            f.weight = min(f.weight, 0.5)
    findings.sort(key=lambda f: -f.weight)
    if not findings:
        findings.append(Finding("healthy", 0.3, ["Not enough statistics to point at a cause."],
                                NEXT_CHECKS["healthy"]))
    return findings


def _config_findings(requested: int | None, effective: int | None, adjusted: str | None) -> list[Finding]:
    """config_adjusted: fewer draft tokens run than were asked, or the server says it changed
    the config (its adjustment warning) when the numbers are not known."""
    if requested and effective and effective < requested:
        return [Finding("config_adjusted", 0.95, [
            f"{effective} draft tokens are verified per step although {requested} were requested "
            f"(SGLang sets num_draft_tokens = num_steps + 1 when topk = 1), so accept length cannot "
            f"exceed {effective}."], NEXT_CHECKS["config_adjusted"])]
    if adjusted:
        return [Finding("config_adjusted", 0.9, [
            f"The server says it changed the requested config: \"{adjusted}\"."],
            NEXT_CHECKS["config_adjusted"])]
    return []


def _from_observation(obs) -> dict:
    """What diagnose() reads from an Observation: conditional rates, accept length, the draft
    tokens asked and run, the per-step frame (lab) and the engine's adjustment warning."""
    rates = obs.per_position
    if rates is not None and obs.conditional is False:
        rates = conditional_from_unconditional(rates["rate"].to_numpy(float))
    adjusted = next((w for w in obs.warnings if "adjusted to speculative_num_steps + 1" in w), None)
    steps = obs.frame if obs.source == "lab" and isinstance(obs.frame, pd.DataFrame) else None
    accept = obs.accept_length
    return {"per_position": rates, "accept_len": None if accept is None or accept != accept else accept,
            "requested": obs.requested.get("num_draft_tokens"),
            "effective": obs.effective.get("num_draft_tokens"), "steps": steps,
            "adjusted": adjusted}


def _merge(findings: list[Finding]) -> list[Finding]:
    """One finding per cause (the highest weight), highest first."""
    best: dict[str, Finding] = {}
    for f in findings:
        if f.cause not in best or f.weight > best[f.cause].weight:
            best[f.cause] = f
    return sorted(best.values(), key=lambda f: -f.weight)


def _context_effect(steps, context_lengths, draft_max_context) -> dict | None:
    """Steps beyond the draft's training length: their share, and accept length within/beyond."""
    if not draft_max_context:
        return None
    if context_lengths is not None:
        ctx = np.asarray(context_lengths, dtype=float)
    elif steps is not None and "context_length" in steps:
        ctx = steps["context_length"].to_numpy(float)
    else:
        return None
    if not len(ctx):
        return None
    out = {"share": float(np.mean(ctx > draft_max_context)), "within": None, "beyond": None}
    if steps is not None and len(steps) == len(ctx):
        acc = accepted_counts(steps)
        inside, outside = acc[ctx <= draft_max_context], acc[ctx > draft_max_context]
        if len(inside) >= 20 and len(outside) >= 20:
            # Welch's t of within minus beyond: a difference of a few steps is noise, not evidence
            se = np.sqrt(inside.var(ddof=1) / len(inside) + outside.var(ddof=1) / len(outside))
            t = float((inside.mean() - outside.mean()) / se) if se > 0 else 0.0
            out.update(within=float(inside.mean() + 1), beyond=float(outside.mean() + 1), t=t)
    return out


def _context_boost(effect) -> float:
    """How much running past the draft's training length should raise context_length.

    Compared within/beyond when both have enough steps (a boost only if acceptance is lower
    beyond, by more than THRESHOLDS['context_t'] standard errors); with nearly every step beyond,
    the share alone is weak evidence.
    """
    if not effect or effect["share"] < 0.5:
        return 0.0
    if effect["within"] is not None:
        gain = max(effect["within"] - 1, 1e-9)
        loss = (effect["within"] - effect["beyond"]) / gain
        return 0.3 if loss > 0.15 and effect["t"] >= THRESHOLDS["context_t"] else 0.0
    return 0.1 * effect["share"]


REASONS = {
    "quantization": "The target's hidden states or logits differ from those the draft was trained "
                    "on (a quantized or otherwise changed target), so even position 1 suffers.",
    "distribution_shift": "Prompts unlike the draft's training data lower acceptance; a draft "
                          "trained with training-time test then also loses more at later positions.",
    "sampling": "Decoding samples (temperature > 0): acceptance depends on how drafts are proposed "
                "and verified; a draft proposed by argmax is accepted only with the target's "
                "probability of that token.",
    "context_length": "Serving runs at contexts longer than the draft was trained on, which a "
                      "short-window evaluation does not see.",
    "wiring": "Hidden states captured at a slightly different point (normed instead of pre-norm, a "
              "neighbouring boundary) shift the draft's input a little.",
}


def _diagnose_rates(rates, accept_len, standalone_acc, standalone_acc_served, temperature,
                    depth, beyond=None, draft_max_context=None) -> list[Finding]:
    T = THRESHOLDS
    acc_train = as_accuracy(standalone_acc)
    acc_served = as_accuracy(standalone_acc_served)
    sampling = temperature is not None and temperature > 0
    # sampled text is harder for a greedy evaluation by construction: no prompt-shift test on it
    shift_test = acc_served is not None and acc_train is not None and not sampling
    # Reference for "how much does serving keep": the draft's own evaluation on the served text
    # (same text, the draft's training wiring, full-precision target) when given at T = 0, else
    # its training evaluation. Served position-1 acceptance is measured where chains start --
    # right after a rejection, at harder tokens -- so it can run below a teacher-forced acc@1 on
    # the same text (measured on the lab: 0.6-1.2x for a healthy draft); hence "healthy" >= 0.8.
    reference = acc_served if (acc_served is not None and not sampling) or acc_train is None \
        else acc_train
    sig = acceptance_signature(rates, reference)
    c1, keep1, keep = sig["c1"], sig["keep1"], sig["keep"]
    head = (f"Served conditional acceptance by position is {_fmt(rates)} (accept length "
            f"{accept_len:.2f} at depth {depth}).")
    ref_name = "the draft's own acc@1 on the served text" if reference is acc_served else \
        "its standalone acc@1"
    ref = f" against {ref_name} of {sig['acc1']:.1%}" if keep1 is not None else ""
    ctx_note = ""
    if beyond:
        ctx_note = (f" {beyond['share']:.0%} of verify steps run beyond the draft's training length "
                    f"of {draft_max_context} tokens")
        ctx_note += (f" (accept length {beyond['within']:.2f} within, {beyond['beyond']:.2f} beyond)."
                     if beyond["within"] is not None else ".")
    out: list[Finding] = []

    def add(cause, conf, *sentences):
        out.append(Finding(cause, conf, [head, *sentences], NEXT_CHECKS[cause]))

    trained_deep = acc_train is not None and len(acc_train) > 1
    shallow_note = ("The draft's training evaluation reports only acc@1, as for a draft trained "
                    "without training-time test, so its behaviour at depth is unknown.")

    def depth_risk(reason):
        """Later positions cannot be judged here; a depth-1-only evaluation is itself a risk."""
        if acc_train is not None and not trained_deep:
            add("multi_step", 0.4, reason + " " + shallow_note)

    # 1. Position 1 near zero: wrong inputs, wrong ids, or a sampling path that rejects drafts.
    dead = c1 < T["dead_abs"] if keep1 is None else keep1 < T["dead"]
    if dead:
        why = f"Position 1 accepts only {c1:.1%} of drafts{ref}."
        if c1 < T["zero"]:
            add("vocab_mapping", 0.8, why, "Acceptance this close to zero means draft ids almost never "
                "equal the target's choice, as when draft-vocabulary ids are read as target ids "
                "(missing d2t).")
        else:
            add("vocab_mapping", 0.35, why, "A partly wrong vocabulary mapping would also do this.")
        add("wiring", 0.55 if c1 < T["zero"] else 0.8, why, "A draft fed hidden states from other "
            "boundaries still guesses some frequent tokens: a small nonzero rate.")
        if sampling:
            add("sampling", 0.9, why, f"Decoding samples at temperature {temperature:g}; "
                + REASONS["sampling"] + " Rule it out first: it costs one greedy re-run.")
        depth_risk("Almost no chain gets past position 1, so later positions cannot be judged.")
        return out

    # 2. Position 1 holds, later positions collapse: drafting on its own hidden states fails.
    first_ok = keep1 is None or keep1 >= T["first_ok"]
    tail = (f"Position 1 accepts {c1:.1%}{ref}, but positions 2..{len(rates)} pooled accept "
            f"{sig['tail']:.1%}, {sig['tail_drop']:.0%} of position 1")
    if len(rates) == 1:
        depth_risk("Only one draft position is served, so the multi-step path is not exercised.")
    if len(rates) > 1 and sig["tail_drop"] < T["collapse"] and not first_ok:
        # impaired from position 1 and lost afterwards: its inputs or its ids are wrong
        add("wiring", 0.75, tail + ": already weak at position 1 and lost once it drafts on its "
            "own states, as when the hidden states it reads are not the ones it was trained on.")
        add("vocab_mapping", 0.55, tail + ". Draft ids read in the wrong vocabulary (missing d2t) "
            "give the same picture when the two vocabularies share many ids.")
        add("multi_step", 0.5, tail + ".")
        if sampling:
            add("sampling", 0.8, tail + f". Decoding samples at temperature {temperature:g}; "
                + REASONS["sampling"] + " Rule it out first: it costs one greedy re-run.")
    elif len(rates) > 1 and sig["tail_drop"] < T["collapse"]:
        add("multi_step", 0.85, tail + ": the draft predicts well from the "
            "target's hidden state and fails on its own (no training-time test, draft KV cache or "
            "position bugs)." + (" Its training evaluation reports only acc@1, as for a draft "
                                 "trained without TTT." if not trained_deep else ""))
    elif len(rates) > 1 and sig["tail_drop"] < T["sag"]:
        if trained_deep:
            # the rollout held up at depth in training evaluation: the served text is different
            add("distribution_shift", 0.6, tail + f", while the draft's own rollout on its "
                f"evaluation data holds {_fmt(acc_train)}.", REASONS["distribution_shift"])
            add("multi_step", 0.45, tail + ".")
        else:
            add("multi_step", 0.6, tail + ". " + shallow_note)
            add("distribution_shift", 0.4, tail + ".", REASONS["distribution_shift"])

    if keep is None:
        if not out:
            iid = fit_iid_rate(min(max(accept_len, 1.0), len(rates) + 1), len(rates))
            if c1 >= 0.6 and float(np.min(rates)) >= 0.4:
                add("healthy", 0.5, f"Every position accepts at least {np.min(rates):.0%} (i.i.d. fit "
                    f"a = {iid:.2f}); no standalone accuracy was given to compare with.")
            else:
                for cause, conf in (("distribution_shift", 0.35), ("quantization", 0.3)):
                    add(cause, conf, f"Acceptance is moderate and even across positions (i.i.d. "
                        f"fit a = {iid:.2f}); without standalone accuracy a prompt shift and a "
                        "serve-side change look alike.")
        return out

    compare = (f"Served rates keep {keep:.0%} of {'the served-text' if reference is acc_served else 'the standalone'} "
               f"accuracy on average ({keep1:.0%} at position 1).")
    # 3. Position 1 itself below its reference: something on the serving side (or the prompts).
    if keep1 < T["healthy"]:
        conf = 0.6 if keep1 < 0.8 else 0.45
        candidates = {"quantization": conf, "wiring": conf - 0.15}
        if _context_boost(beyond) > 0:
            candidates["context_length"] = conf - 0.1 + _context_boost(beyond)
        if sampling:  # the cheapest explanation to rule out, the more so the larger the drop
            candidates["sampling"] = conf + (0.3 if keep1 < 0.5 else 0.1)
        if not shift_test:
            candidates["distribution_shift"] = conf - 0.05
        elif acc_served[0] < T["prompt_shift"] * acc_train[0]:
            candidates["distribution_shift"] = conf + 0.1
            compare += (f" On the served text the draft's own acc@1 is {acc_served[0]:.1%}, against "
                        f"{acc_train[0]:.1%} on its evaluation data.")
        for cause, c in candidates.items():
            add(cause, c, compare + (ctx_note if cause == "context_length" else ""), REASONS[cause])
    elif shift_test and acc_served[0] < T["prompt_shift"] * acc_train[0]:
        add("distribution_shift", 0.7, compare + f" Serving loses nothing, but on the served text "
            f"the draft's own acc@1 is {acc_served[0]:.1%}, against {acc_train[0]:.1%} on its "
            "evaluation data.", REASONS["distribution_shift"])
    elif not out:
        add("healthy", min(0.95, 0.6 + 3 * (keep - T["healthy"])), compare)
    return out


def _rollout_findings(standalone_acc, depth: int | None) -> list[Finding]:
    """multi_step from the draft's own evaluation at the served depth: a draft whose rollout
    acc@2..k falls well below its acc@1 on its own evaluation data cannot draft k deep, however it
    is served (no training-time test, too few TTT steps, KV or position bugs in its rollout)."""
    acc = as_accuracy(standalone_acc)
    if acc is None or len(acc) < 2 or acc[0] <= 0:
        return []
    ratio = float(np.mean(acc[1:]) / acc[0])
    if ratio >= THRESHOLDS["rollout_decay"]:
        return []
    note = ""
    if depth is not None and depth < len(acc):
        note = (f" Served {depth} deep it costs little yet; it will cost at the depth it was "
                f"evaluated at ({len(acc)}).")
    return [Finding("multi_step", 0.85, [
        f"The draft's own evaluation at depth {len(acc)} gives acc@1..{len(acc)} {_fmt(acc)}: "
        f"acc@2..{len(acc)} average {ratio:.0%} of acc@1, so it loses its way once it drafts on its "
        f"own hidden states (trained without training-time test, or too few TTT steps).{note}"],
        NEXT_CHECKS["multi_step"])]


def sign_test(worse: int, better: int) -> float:
    """One-sided sign test: P(at least `worse` of worse + better fair coin flips)."""
    n = worse + better
    if n == 0:
        return 1.0
    return float(sum(math.comb(n, i) for i in range(worse, n + 1)) / 2 ** n)


def _diagnose_replay(rates, accept_len, steps, replay, depth, standalone_acc,
                     standalone_acc_served, beyond, draft_max_context) -> list[Finding]:
    """Exact serve-side tests at temperature 0 from the served text re-scored offline.

    1. Target: served tokens that are not the reference target's argmax beyond a numerical tie
       mean the served target computes something else (a quantized or changed target).
    2. Drafting: with the reference target, greedy decoding emits exactly the text the replay
       re-scores, so each served step should accept what the draft, fed the states it was trained
       on, accepts at the same root. Steps accepting less (sign test) mean the serving side feeds
       it something else: other boundaries or a normed state (wiring), or wrong ids (vocab).
    """
    T = THRESHOLDS
    c1 = float(rates[0])
    served = accepted_counts(steps).astype(float)
    reference = np.asarray(replay.get("reference_accepted", []), dtype=float)
    if len(reference) != len(served):
        raise AnalysisError(f"replay has {len(reference)} steps, the served data {len(served)}")
    known = ~np.isnan(reference)
    served_k, ref_k = served[known], reference[known]
    worse, better = int((served_k < ref_k).sum()), int((served_k > ref_k).sum())
    p = sign_test(worse, better)
    checked = int(replay.get("tokens_checked") or 0)
    margins = [m for m in replay.get("mismatch_margins") or [] if m > T["tie_margin"]]
    head = (f"Served conditional acceptance by position is {_fmt(rates)} (accept length "
            f"{accept_len:.2f} at depth {depth}); re-scored offline, the draft as trained accepts "
            f"{ref_k.mean() + 1:.2f} per step on the same text and roots "
            f"({known.sum()} steps compared).")
    out: list[Finding] = []

    def add(cause, conf, *sentences):
        out.append(Finding(cause, conf, [head, *sentences], NEXT_CHECKS[cause]))

    deltas = np.asarray(replay.get("logprob_deltas") or [], dtype=float)
    off = int((deltas > T["logprob_tol"]).sum())
    logprobs_differ = len(deltas) > 0 and off > T["logprob_share"] * len(deltas)
    target_differs = bool(margins) or logprobs_differ
    if margins:
        add("quantization", 0.75, f"{len(margins)} of {checked} served tokens are not the "
            f"full-precision target's greedy choice (logit margins up to {max(margins):.3f}, beyond "
            "a numerical tie): the served target computes something else.", REASONS["quantization"])
    elif logprobs_differ:
        add("quantization", 0.75, f"Every served token is the full-precision target's greedy choice, "
            f"but {off} of {len(deltas)} served log-probabilities differ from the full-precision "
            f"target's by more than {T['logprob_tol']:g} (median {np.median(deltas):.2g}, up to "
            f"{deltas.max():.2g}): the served target computes something else.", REASONS["quantization"])
    sign = (f"{worse} served steps accept fewer drafts than the replay, {better} more "
            f"(sign test p = {p:.2g}).")
    if c1 < T["zero"]:
        add("vocab_mapping", 0.85 if not target_differs else 0.8, f"Position 1 accepts {c1:.1%}. "
            + sign + " Acceptance this close to zero means draft ids almost never equal the target's "
            "choice, as when draft-vocabulary ids are read as target ids (missing d2t).")
        add("wiring", 0.55, sign + " A draft fed hidden states from other boundaries still guesses "
            "some frequent tokens: a small nonzero rate.")
    elif not target_differs and p < T["replay_p"]:
        add("wiring", 0.8, sign + " The server feeds the draft other inputs than it was trained on.",
            REASONS["wiring"])
        add("vocab_mapping", 0.45, sign + " A partly wrong vocabulary mapping would also do this.")
    elif not target_differs and worse + better >= max(T["replay_differ_min"],
                                                       T["replay_differ_share"] * len(served_k)):
        # With the reference target the replay *is* the served decoding: a correct serve differs
        # from it on no step. Steps that differ either way (past the draft's training length a
        # changed input can also accept more) mean the draft is fed something else.
        differ = (f"{worse + better} of {len(served_k)} served steps accept a different number of "
                  f"drafts than the replay ({worse} fewer, {better} more); a correct serve with the "
                  "reference target differs on none.")
        add("wiring", 0.7, differ + " The server feeds the draft other inputs than it was trained on.",
            REASONS["wiring"])
        add("vocab_mapping", 0.4, differ + " A partly wrong vocabulary mapping would also do this.")
    if _context_boost(beyond) > 0:
        split = (f" (accept length {beyond['within']:.2f} within, {beyond['beyond']:.2f} beyond)"
                 if beyond["within"] is not None else "")
        add("context_length", 0.6 + _context_boost(beyond),
            f"{beyond['share']:.0%} of verify steps run beyond the draft's training length of "
            f"{draft_max_context} tokens{split}.", REASONS["context_length"])
    acc_train, acc_served = as_accuracy(standalone_acc), as_accuracy(standalone_acc_served)
    if acc_train is not None and acc_served is not None \
            and acc_served[0] < T["prompt_shift"] * acc_train[0]:
        add("distribution_shift", 0.7, f"On the served text the draft's own acc@1 is "
            f"{acc_served[0]:.1%}, against {acc_train[0]:.1%} on its evaluation data.",
            REASONS["distribution_shift"])
    if not out:
        add("healthy", 0.9, f"The served target reproduces the reference target's greedy choice at "
            f"every token ({checked} checked) and the served draft accepts what it accepts as "
            f"trained: {sign}")
    return out


def _diagnose_context(steps, context_lengths) -> list[Finding]:
    if context_lengths is None and (steps is None or "context_length" not in steps):
        return []
    if steps is None:
        raise AnalysisError("context_lengths needs the per-step data (steps=) it belongs to")
    data = steps if context_lengths is None else steps.assign(context_length=np.asarray(context_lengths))
    if data["context_length"].nunique() < 4 or len(data) < 40:
        return []
    table = acceptance_by_context(data, bins=4)
    first, last = table["accept_length"].iloc[0], table["accept_length"].iloc[-1]
    ranks_ctx = pd.Series(data["context_length"].to_numpy()).rank()
    ranks_acc = pd.Series(accepted_counts(data)).rank()
    rho = float(ranks_ctx.corr(ranks_acc))  # Spearman without scipy
    decay = (first - last) / max(first - 1, 1e-9)
    if decay > 0.3 and rho < -0.1:
        conf = min(0.9, 0.5 + decay * 0.5)
        return [Finding("context_length", conf, [
            f"Accept length falls from {first:.2f} at context ~{table['context'].iloc[0]:.0f} tokens "
            f"to {last:.2f} at ~{table['context'].iloc[-1]:.0f} (Spearman rho {rho:.2f}): the draft "
            "degrades past the context lengths it was trained on."], NEXT_CHECKS["context_length"])]
    return []

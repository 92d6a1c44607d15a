"""What speculation should give: accept length from a per-token rate, tokens/s from step costs.

Models, not measurements (those are `eagle3lab.acceptance.stats`): the i.i.d. chain E[L] = (1 - a^(k+1)) /
(1 - a) and its inverse, the conversions between every published "acceptance rate", the
standalone-vs-served gap term by term, and the cost model -- a verify step at depth k costs
k * c_draft + c_verify(k) and emits L(k) tokens; plain decoding costs c_target per token --
with the depth it recommends per batch size.

Named `predict` rather than `models`: in this package a "model" is a neural network (the lab's
target and drafts, `decoder/forward.py`); these are formulas that predict or invert a figure.
Imports `stats` (and numpy/pandas) only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from eagle3lab.acceptance.stats import StatsError, draft_depth, unconditional_rates


def as_accuracy(standalone) -> np.ndarray | None:
    """Standalone acc@1..k from a scalar, a sequence or evaluate_draft's DataFrame(depth, accuracy)."""
    if standalone is None:
        return None
    if isinstance(standalone, pd.DataFrame):
        return standalone.sort_values("depth")["accuracy"].to_numpy(float)
    return np.atleast_1d(np.asarray(standalone, dtype=float))


# --------------------------------------------------------------------------- models of E[L]

def expected_accept_length(a, k):
    """E[L] for i.i.d. per-token acceptance a at depth k: (1 - a^(k+1)) / (1 - a); a = 1 -> k + 1.

    Vectorised over a and k (numpy broadcasting); returns a float for scalar input.
    """
    a = np.asarray(a, dtype=float)
    k = np.asarray(k, dtype=float)
    if ((a < 0) | (a > 1)).any():
        raise StatsError("acceptance a must be within [0, 1]")
    near_one = np.isclose(a, 1.0)
    safe = np.where(near_one, 0.5, a)
    value = np.where(near_one, k + 1, (1 - safe ** (k + 1)) / (1 - safe))
    return float(value) if value.ndim == 0 else value


def accept_length_curve(rates: Sequence[float]) -> np.ndarray:
    """E[L] at depths 1..len(rates) for conditional rates (truncating the chain)."""
    return 1 + np.cumsum(unconditional_rates(np.nan_to_num(np.asarray(rates, dtype=float))))


def fit_iid_rate(accept_len: float, k: int, tol: float = 1e-10) -> float:
    """The per-token acceptance a whose i.i.d. model gives accept_len at depth k (bisection).

    E[L](a) is increasing in a from 1 (a=0) to k+1 (a=1), so the root is unique.
    """
    if k < 1:
        raise StatsError("depth k must be >= 1")
    if not 1 <= accept_len <= k + 1:
        raise StatsError(f"accept length {accept_len} is outside [1, {k + 1}] for depth {k}")
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
    if kind not in _RATE_KINDS:
        raise StatsError(f"unknown rate kind {kind!r} ({', '.join(_RATE_KINDS)})")
    return _RATE_KINDS[kind](rate, num_steps, ndt)


# rate kind -> accept length from (rate, num_steps, num_draft_tokens): each printed rate's definition
_RATE_KINDS = {
    "sglang_old": lambda rate, k, ndt: rate * (k + 1),
    "sglang_new": lambda rate, k, ndt: 1 + rate * (ndt - 1),
    "vllm": lambda rate, k, ndt: 1 + rate * k,
    "iid": lambda rate, k, ndt: expected_accept_length(rate, k),
}


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
        raise StatsError("need at least one position on both sides")
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
            raise StatsError("costs must be >= 0")

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
        raise StatsError(f"sweep needs columns {depth_col!r} and {time_col!r}")
    data = sweep[[depth_col, time_col]].dropna()
    base = data[data[depth_col] == 0]
    spec = data[data[depth_col] > 0]
    if baseline_time is None and not base.empty:
        baseline_time = float(base[time_col].mean())
    if spec[depth_col].nunique() < 2:
        raise StatsError("fitting draft and verify costs needs at least two depths")
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
            raise StatsError(f"per-step data has no {col!r} column (need engine timings)")
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
        raise StatsError("give per-position rates or an i.i.d. rate a")
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

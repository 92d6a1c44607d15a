"""How much a draft is accepted, as the step-cost model needs it: the accept length it gives at
each configuration, with a range.

Three ways a user knows it: an i.i.d. per-token rate a (E[L] = (1 - a^(k+1)) / (1 - a) at depth
k, `predict.expected_accept_length`), an accept length measured at one chain depth (turned into a
by `predict.fit_iid_rate`), or per-position rates from `eagle3lab bench --url ... --json`
(`per_position`, `per_position_conditional`, `per_position_ci95`), whose chain curve gives L at
every depth they cover. A tree's (topk > 1) accept length depends on how often the draft's other
candidates are right, which none of these says: a tree gets one only when the profile was measured
at that very tree. Per-position rates are kept unconditional (P(at least i accepted)), whose sum
is the accept length, so their intervals bound it directly. Statistics layer: imports `predict`, `stats`, `modelshape`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from eagle3lab.acceptance import predict
from eagle3lab.acceptance.stats import StatsError, unconditional_rates
from eagle3lab.cost.modelshape import ConfigError
from eagle3lab.paths import read_json_object


@dataclass(frozen=True)
class AcceptanceProfile:
    """A draft's acceptance: an i.i.d. rate with its range, or per-position conditional rates
    with theirs; `measured_at` the configuration an accept length was measured at (if any)."""

    kind: str                      # "iid rate" | "accept length at a depth" | "per-position rates"
    source: str
    rate: float | None = None
    rate_range: tuple | None = None
    positions: tuple | None = None           # P(at least i drafts accepted), i = 1..depth
    positions_range: tuple | None = None     # (lo, hi) of the same
    measured_at: tuple | None = None         # (steps, topk, draft tokens, L, (lo, hi) or None)

    def accept_length(self, steps: int, topk: int = 1, draft_tokens: int | None = None):
        """(L, (lo, hi)) this profile gives at the configuration, or None where it says nothing
        (a tree it was not measured at; a depth beyond the measured positions)."""
        tokens = steps + 1 if draft_tokens is None else draft_tokens
        if self.measured_at and self.measured_at[:3] == (steps, topk, tokens):
            value, rng = self.measured_at[3], self.measured_at[4]
            return value, tuple(rng) if rng else (value, value)
        if topk != 1:
            return None
        if self.positions is not None:
            return self._from_positions(steps)
        if self.rate is None:
            return None
        value = float(predict.expected_accept_length(self.rate, steps))
        lo, hi = (self.rate, self.rate) if self.rate_range is None else self.rate_range
        return value, (float(predict.expected_accept_length(lo, steps)), float(predict.expected_accept_length(hi, steps)))

    def _from_positions(self, steps: int):
        """L at depth k = 1 + the first k unconditional rates (each position's expected share)."""
        if steps > len(self.positions):
            return None
        lo, hi = self.positions_range or (self.positions, self.positions)
        return 1.0 + sum(self.positions[:steps]), (1.0 + sum(lo[:steps]), 1.0 + sum(hi[:steps]))

    def as_dict(self) -> dict:
        out = {"kind": self.kind, "source": self.source}
        if self.rate is not None:
            out.update(iid_rate=self.rate, iid_rate_range=list(self.rate_range) if self.rate_range else None)
        if self.positions is not None:
            out["unconditional_rates"] = list(self.positions)
        if self.measured_at:
            out["measured_at"] = "/".join(str(v) for v in self.measured_at[:3])
        return out


def _rate(a: float, what: str) -> float:
    a = float(a)
    if not 0.0 <= a <= 1.0:
        raise StatsError(f"{what} must be within [0, 1], got {a:g}")
    return a


def from_iid(rate: float, rate_range=None) -> AcceptanceProfile:
    """An i.i.d. per-token rate (and its range), the same at every position."""
    a = _rate(rate, "an i.i.d. rate")
    rng = None if rate_range is None else tuple(sorted(_rate(v, "an i.i.d. rate") for v in rate_range))
    return AcceptanceProfile("iid rate", f"i.i.d. rate {a:g}", rate=a, rate_range=rng)


def from_accept_length(value: float, steps: int, interval=None, topk: int = 1,
                       draft_tokens: int | None = None) -> AcceptanceProfile:
    """An accept length (bonus token included) measured at one configuration: the i.i.d. rate that
    gives it at that depth, and the accept length itself at that configuration."""
    tokens = steps + 1 if draft_tokens is None else draft_tokens
    lo, hi = (value, value) if interval is None else (float(interval[0]), float(interval[1]))
    if lo > hi:
        raise StatsError(f"accept-length interval [{lo:g}, {hi:g}] has lo above hi")
    for v in (value, lo, hi):
        if not 1.0 <= v <= steps + 1:
            raise StatsError(f"accept length {v:g} is outside [1, {steps + 1}] at depth {steps} (bonus included)")
    where = f"{steps}/{topk}/{tokens}"
    measured_at = (steps, topk, tokens, float(value), None if interval is None else (lo, hi))
    if topk > 1:  # a tree's accept length says nothing of a chain's: no i.i.d. rate from it
        return AcceptanceProfile("accept length at a depth", f"accept length {value:g} at the tree {where} "
                                 "(chains not predicted from a tree)", measured_at=measured_at)
    a = predict.fit_iid_rate(value, steps)
    rng = (predict.fit_iid_rate(lo, steps), predict.fit_iid_rate(hi, steps))
    return AcceptanceProfile("accept length at a depth", f"accept length {value:g} at {where}",
                             rate=a, rate_range=rng, measured_at=measured_at)


def from_bench(path) -> AcceptanceProfile:
    """`eagle3lab bench --url ... --json` output: its per-position rates (converted to
    conditional) with their 95 % intervals; without them (a tree's run), its accept length at its
    configuration, said so."""
    data = read_json_object(Path(path), "bench output (eagle3lab bench --url ... --json)", ConfigError)
    rates = data.get("per_position")
    if rates:
        return _positions(data, rates, str(path))
    if data.get("accept_length") and data.get("num_steps"):
        steps, topk = int(data["num_steps"]), int(data.get("topk") or 1)
        prof = from_accept_length(float(data["accept_length"]), steps, data.get("accept_length_ci95"), topk,
                                  int(data.get("num_draft_tokens") or steps + 1))
        return AcceptanceProfile(prof.kind, f"{path}: accept length (no per-position rates in it)", prof.rate,
                                 prof.rate_range, measured_at=prof.measured_at)
    raise ConfigError(f"{path} has neither per_position rates nor accept_length and num_steps: is it "
                      "`eagle3lab bench --url ... --json` output?")


def _positions(data: dict, rates, source: str) -> AcceptanceProfile:
    conditional = bool(data.get("per_position_conditional"))
    values = np.asarray([float(r) for r in rates])
    ci = data.get("per_position_ci95")
    lo = np.asarray([float(c[0]) for c in ci]) if ci else values
    hi = np.asarray([float(c[1]) for c in ci]) if ci else values
    as_uncond = (lambda v: unconditional_rates(np.clip(v, 0, 1))) if conditional else (lambda v: np.clip(v, 0, 1))
    pos = tuple(float(v) for v in as_uncond(values))
    rng = (tuple(float(v) for v in as_uncond(lo)), tuple(float(v) for v in as_uncond(hi)))
    note = "conditional, multiplied out" if conditional else "unconditional"
    return AcceptanceProfile("per-position rates", f"{source}: {len(pos)} positions ({note})",
                             positions=pos, positions_range=rng)

"""What one speculative step costs, from three numbers a deployment already has: the incident's
arithmetic as a tool.

From a no-speculation tokens/s B, a speculative tokens/s S at one configuration (num_steps k,
topk, draft tokens) and its accept length L (SGLang's: tokens per verify step, bonus included):

    one speculative step costs        C = L * B / S   no-speculation steps
    it breaks even at accept length   C               (S = B when L = C)
    another accept length L' gives    L' / C          speed-up, B * L' / C tokens/s

because S = L / (step time) and B = 1 / (plain step time), so C = step time / plain step time.
The i.i.d. chain model (`predict.expected_accept_length`) says which per-token rate a gives L at
depth k, and what a given a would give. On the incident's figures (data/incident/incident.json)
C is about 2.9; see tests/test_stepcost.py.

`ASSUMPTIONS` is said once wherever a what-if is shown. Pure arithmetic (statistics layer):
imports `predict` and `stats` only. `lab_step_cost` applies the same formula to a lab
measurement and adds the step's measured parts (draft step / target step, verify / target step),
which is why lab tokens/s differ from a GPU's for the same acceptance.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

import pandas as pd

from eagle3lab.acceptance import predict
from eagle3lab.acceptance.stats import StatsError

KINDS = ("total", "decode")  # which tokens/s B and S are: with prefill (wall time) or decode steps only

ASSUMPTIONS = ("Assumptions: one speculative step at this configuration costs the same on this hardware "
               "whatever the draft's acceptance (the draft forwards and one verify pass of the "
               "configuration's draft tokens); one request at a time (batch of one); both tokens/s "
               "are the same kind (both total, or both decode).")


def _positive(name: str, value) -> float:
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise StatsError(f"{name} must be a number, got {value!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise StatsError(f"{name} must be a positive number, got {value:g}")
    return value


@dataclass(frozen=True)
class StepCost:
    """One configuration's measured speed, as the cost of one speculative step.

    baseline_tps: tokens/s without speculation; spec_tps: with speculation at (steps, topk,
    draft_tokens); accept_length: SGLang's, bonus included; kind: "total" or "decode" tokens/s.
    """

    baseline_tps: float
    spec_tps: float
    accept_length: float
    steps: int
    topk: int = 1
    draft_tokens: int | None = None
    kind: str = "total"

    def __post_init__(self):
        set_ = object.__setattr__
        set_(self, "baseline_tps", _positive("baseline tokens/s", self.baseline_tps))
        set_(self, "spec_tps", _positive("speculative tokens/s", self.spec_tps))
        set_(self, "accept_length", _positive("accept length", self.accept_length))
        for name in ("steps", "topk"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise StatsError(f"{name} must be a whole number >= 1, got {value!r}")
        if self.draft_tokens is None:
            set_(self, "draft_tokens", self.steps + 1 if self.topk == 1 else self.steps * self.topk + 1)
        if not isinstance(self.draft_tokens, int) or self.draft_tokens < 2:
            raise StatsError(f"draft tokens must be a whole number >= 2, got {self.draft_tokens!r}")
        if self.kind not in KINDS:
            raise StatsError(f"kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        check_accept_length(self.accept_length, self.steps, self.draft_tokens)

    # -- the arithmetic ---------------------------------------------------------------------
    @property
    def cost(self) -> float:
        """One speculative step in no-speculation steps: C = L * B / S."""
        return self.accept_length * self.baseline_tps / self.spec_tps

    @property
    def break_even(self) -> float:
        """The accept length at which this configuration is exactly as fast as no speculation."""
        return self.cost

    @property
    def speedup(self) -> float:
        """S / B, as measured."""
        return self.spec_tps / self.baseline_tps

    @property
    def max_accept_length(self) -> int:
        """The most one step can emit: depth + 1 (every draft along the deepest path, plus one)."""
        return self.steps + 1

    @property
    def iid_rate(self) -> float:
        """The i.i.d. per-token rate a whose chain of depth `steps` gives the measured accept length."""
        return predict.fit_iid_rate(self.accept_length, self.steps)

    @property
    def break_even_iid_rate(self) -> float | None:
        """The i.i.d. rate at which this configuration breaks even (None: not even a = 1 pays)."""
        return None if self.cost > self.max_accept_length else predict.fit_iid_rate(
            max(self.cost, 1.0), self.steps)

    def iid_accept_length(self, a: float) -> float:
        """What an i.i.d. per-token rate a gives at depth `steps` (chain model)."""
        return float(predict.expected_accept_length(_rate(a), self.steps))

    def what_if(self, accept_length: float, interval=None) -> dict:
        """Speed-up L'/C and tokens/s B*L'/C on this hardware for another accept length L' (with an
        interval: the range it gives), and whether it pays: "yes" / "no" / "undecided" (the range
        straddles 1)."""
        value = _positive("what-if accept length", accept_length)
        check_accept_length(value, self.steps, self.draft_tokens)
        lo, hi = (value, value) if interval is None else _interval(interval, self.steps, self.draft_tokens)
        sp = [x / self.cost for x in (value, lo, hi)]
        tps = [self.baseline_tps * x / self.cost for x in (value, lo, hi)]  # B * L' / C
        pays = "yes" if sp[1] > 1 else "no" if sp[2] < 1 else "undecided"
        return {"accept_length": value, "accept_length_range": None if interval is None else [lo, hi],
                "speedup": sp[0], "speedup_range": None if interval is None else sp[1:],
                "tokens_per_s": tps[0], "tokens_per_s_range": None if interval is None else tps[1:],
                "pays": pays}

    def as_dict(self, iid=(), what_if=()) -> dict:
        """Everything above as plain numbers (JSON): `iid` rates to evaluate, `what_if` accept
        lengths (a number, or (L, (lo, hi)))."""
        out = {"kind": self.kind, "baseline_tokens_per_s": self.baseline_tps,
               "spec_tokens_per_s": self.spec_tps, "accept_length": self.accept_length,
               "num_steps": self.steps, "topk": self.topk, "num_draft_tokens": self.draft_tokens,
               "speedup": self.speedup, "step_cost": self.cost, "break_even_accept_length": self.break_even,
               "iid_rate": self.iid_rate, "break_even_iid_rate": self.break_even_iid_rate,
               "assumptions": ASSUMPTIONS}
        out["iid"] = [{"a": _rate(a), "accept_length": self.iid_accept_length(a)} for a in iid]
        out["what_if"] = [self.what_if(*_split(w)) for w in what_if]
        return out


def _rate(a) -> float:
    try:
        a = float(a)
    except (TypeError, ValueError):
        raise StatsError(f"an i.i.d. rate must be a number, got {a!r}") from None
    if not 0 <= a <= 1:
        raise StatsError(f"an i.i.d. rate must be within [0, 1], got {a:g}")
    return a


def check_accept_length(value: float, steps: int, draft_tokens: int) -> None:
    """An accept length is at least 1 (the verify pass's own token) and at most depth + 1."""
    top = min(steps + 1, draft_tokens)
    if not 1 <= value <= top:
        raise StatsError(f"accept length {value:g} is outside [1, {top}] for {steps} steps and "
                         f"{draft_tokens} draft tokens (bonus token included)")


def _interval(interval, steps: int, draft_tokens: int) -> tuple[float, float]:
    try:
        lo, hi = (float(v) for v in interval)
    except (TypeError, ValueError):
        raise StatsError(f"an interval is two numbers (lo, hi), got {interval!r}") from None
    if lo > hi:
        raise StatsError(f"interval [{lo:g}, {hi:g}] has lo above hi")
    for v in (lo, hi):
        check_accept_length(v, steps, draft_tokens)
    return lo, hi


def _split(what_if):
    """A what-if as (L, interval or None): a number, or (L, (lo, hi))."""
    if isinstance(what_if, (tuple, list)) and len(what_if) == 2 and not isinstance(what_if[1], (int, float)):
        return what_if[0], what_if[1]
    return what_if, None


# --------------------------------------------------------------------------- for notebooks

def cost_table(baseline_tps, spec_tps, accept_length, steps: int, topk: int = 1,
               draft_tokens: int | None = None, iid=(0.75,), kind: str = "total") -> pd.DataFrame:
    """A notebook's small frame (quantity, value, from): the step cost, the break-even accept
    length, the i.i.d. rate the accept length corresponds to, and what each rate in `iid` gives,
    from a notebook's parameters (its own deployment's figures, or the incident's)."""
    cost = StepCost(baseline_tps, spec_tps, accept_length, int(steps), int(topk), draft_tokens, kind)
    cfg = f"{cost.steps}/{cost.topk}/{cost.draft_tokens}"
    rows = [("one speculative step costs (no-speculation steps)", cost.cost,
             f"C = L x B / S = {cost.accept_length:g} x {cost.baseline_tps:g} / {cost.spec_tps:g}"),
            ("break-even accept length", cost.break_even, f"speculation at {cfg} pays above C"),
            ("measured speed-up", cost.speedup, f"S / B, {kind} tokens/s"),
            ("i.i.d. rate for the measured accept length", cost.iid_rate,
             f"a with (1 - a^{cost.steps + 1}) / (1 - a) = {cost.accept_length:g}")]
    be = cost.break_even_iid_rate
    rows.append(("i.i.d. rate needed to break even", float("nan") if be is None else be,
                 f"a giving L = C at depth {cost.steps}" if be is not None else
                 f"none: C exceeds depth + 1 = {cost.max_accept_length}"))
    rows += [(f"accept length an i.i.d. a = {_rate(a):g} gives", cost.iid_accept_length(a),
              f"chain of depth {cost.steps}") for a in iid]
    return pd.DataFrame(rows, columns=["quantity", "value", "from"])


def what_if_table(cost: StepCost, accept_lengths: Mapping) -> pd.DataFrame:
    """What each labelled accept length (a number, or (L, (lo, hi))) would give at `cost`'s
    configuration on `cost`'s hardware: speed-up and tokens/s, ranges from the intervals."""
    rows = []
    for label, value in accept_lengths.items():
        w = cost.what_if(*_split(value))
        rows.append({"what": label, "accept_length": w["accept_length"],
                     "accept_length_range": w["accept_length_range"], "speedup": w["speedup"],
                     "speedup_range": w["speedup_range"], f"{cost.kind}_tokens_per_s": w["tokens_per_s"],
                     f"{cost.kind}_tokens_per_s_range": w["tokens_per_s_range"], "pays": w["pays"]})
    return pd.DataFrame(rows).set_index("what") if rows else pd.DataFrame()


# --------------------------------------------------------------------------- the lab's own cost

def lab_step_cost(measurement) -> dict:
    """The same arithmetic on a lab measurement, with the step's measured parts beside it.

    measurement: a `LabBenchResult` (its `.summary()`), a notebook row (a fault sweep's, a
    configuration sweep's) or `costfit.point_for`'s dict: accept_length, and speedup or
    tokens_per_s and baseline_tokens_per_s, and num_steps (or depth), topk, num_draft_tokens (or
    "draft tokens run"); draft_over_target and verify_over_plain / verify_over_target where the
    engine timed them. C = L * B / S = L / speed-up (total tokens/s). Returns configuration,
    accept_length, speedup, step_cost, break_even_accept_length, draft_over_target (one draft
    forward / one plain target step) and verify_over_target (one verify pass / one plain step)."""
    row = measurement.summary() if hasattr(measurement, "summary") else dict(measurement)
    speed = row.get("speedup")
    if speed is None and row.get("tokens_per_s") is not None and row.get("baseline_tokens_per_s"):
        speed = row["tokens_per_s"] / row["baseline_tokens_per_s"]
    steps = row.get("num_steps", row.get("depth"))
    missing = [name for name, v in (("accept_length", row.get("accept_length")), ("speed-up", speed),
                                    ("num_steps", steps)) if v is None]
    if missing:
        raise StatsError(f"the measurement has no {', '.join(missing)}")
    tokens = row.get("num_draft_tokens", row.get("draft tokens run"))
    cost = StepCost(1.0, speed, row["accept_length"], int(steps), int(row.get("topk") or 1),
                    None if tokens is None else int(tokens))
    verify = row.get("verify_over_plain", row.get("verify_over_target"))
    return {"configuration": f"{cost.steps}/{cost.topk}/{cost.draft_tokens}",
            "accept_length": cost.accept_length, "speedup": cost.speedup, "step_cost": cost.cost,
            "break_even_accept_length": cost.break_even,
            "draft_over_target": _maybe(row.get("draft_over_target")),
            "verify_over_target": _maybe(verify)}


def _maybe(value) -> float:
    return float("nan") if value is None else float(value)


def compare_costs(incident: StepCost, lab: Mapping, labels=("incident", "lab")) -> pd.DataFrame:
    """The incident's step cost beside the lab's (`lab_step_cost`), one column each: why the same
    accept length gives other tokens/s on the lab. The incident reported no draft or verify cost
    of its own, so those cells are empty there."""
    rows = {"configuration": (f"{incident.steps}/{incident.topk}/{incident.draft_tokens}", lab["configuration"]),
            "accept length (bonus included)": (incident.accept_length, lab["accept_length"]),
            "speed-up (tokens/s with / without)": (incident.speedup, lab["speedup"]),
            "one speculative step, in no-speculation steps": (incident.cost, lab["step_cost"]),
            "break-even accept length": (incident.break_even, lab["break_even_accept_length"]),
            "one draft step / one target step": (float("nan"), lab["draft_over_target"]),
            "one verify pass / one target step": (float("nan"), lab["verify_over_target"])}
    return pd.DataFrame(rows, index=list(labels)).T

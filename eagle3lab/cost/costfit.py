"""The cost model calibrated on the lab's measured costs, and its prediction error as a figure.

A report's measurement store (`<out>/measurements.jsonl`, `eagle3lab.serving.measurements`) holds, for
every configuration it measured, the per-prompt rows of the speculative run and of the plain run
interleaved with it, and the engine's per-step timings. From them, in units of that
configuration's own plain decode step u (its paired baseline's decode seconds / decoded tokens,
so load that differs between configurations cancels):

    D(k)  one speculative step's draft time, first step of a request left out
          = d0 + d1 (k - 1) + d_tree (k - 1) [topk > 1]
    V(n)  one verify pass over n = draft tokens (root included)   = v0 + v_log ln(n) + v_tree [topk > 1]
    O     the rest of a step (emitting tokens, their log-probabilities)
    e     a request's first step's extra draft time (the draft's pass over the prompt)
    p_s, p_b  a request's time outside the decode loop (prefill), with and without speculation

are fitted by least squares (D, V) or averaged (O, e, p_s, p_b) over the configurations. Why
ln(n): a verify pass of n tokens costs far less than n plain steps (one forward over n positions)
and grows ever slower with n (measured on the default lab: about 1.05 plain steps at n = 2,
1.3 at 6, 1.6 at 16); a line in n fitted to the middle of that range overprices both ends. A
tree (topk > 1) drafts topk tokens per later step and verifies under a tree mask: its own terms.
A
configuration's speed-up of total tokens/s (prefill included, as the report quotes it) is then
predicted from those costs and its own measured acceptance only:

    T_base = sum over prompts of p_b + (tokens - 1)
    T_spec = sum over prompts of p_s + e + steps * (D(k) + V(n) + O)
    speed-up = (spec tokens / T_spec) / (base tokens / T_base)

where `steps` is the number of verify steps each prompt took (its tokens over the measured
accept length: the acceptance is the measured one per configuration). Not circular: by default
each configuration is predicted from costs calibrated on the *other* configurations
(leave-one-out), so its own timings never enter its prediction; `calibration="pooled"` uses all.
Why the explorer said 1.41x where the engine measured 1.11x at 5/1/6: it priced a step as
1 + k x (draft step / target step), a verify pass costing one plain step and nothing else; the lab
measures a verify pass of 6 tokens at about 1.4 plain steps, plus O and the prefill terms.

Statistics layer: reads records (plain dicts), imports `stats` only.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field, asdict

import numpy as np
import pandas as pd

from eagle3lab.acceptance.stats import StatsError, ratio_ci

CALIBRATIONS = ("leave-one-out", "pooled")
TARGET_SHARE = 0.9  # the share of configurations whose interval must hold the prediction (issue 31)
_BASE_FIELDS = ("lab", "backend", "quant_bits", "chat_template", "prompts", "num_prompts", "max_new_tokens",
                "temperature", "seed", "concurrency")


@dataclass
class Timing:
    """One measured configuration, its costs in units of its own plain decode step."""

    id: str
    label: str
    num_steps: int
    topk: int
    num_draft_tokens: int
    accept_length: float
    plain_step_s: float
    draft: float           # D: draft time of a non-first step
    first_extra: float     # e
    verify: float          # V
    other: float           # O
    prefill_spec: float    # p_s
    prefill_base: float    # p_b
    spec_tokens: list
    base_tokens: list
    steps: list            # verify steps per prompt
    measured: float
    interval: list | None
    spec_s: list = field(repr=False, default_factory=list)
    base_s: list = field(repr=False, default_factory=list)
    draft_name: str | None = None
    switches: str = ""


@dataclass
class LabCosts:
    """Calibrated costs in plain decode steps (see the module docstring), and the typical request
    (prompt and new tokens) they were measured on."""

    d0: float
    d1: float
    d_tree: float
    v0: float
    v_log: float
    v_tree: float
    other: float
    first_extra: float
    prefill_spec: float
    prefill_base: float
    tokens: int = 128
    calibrated_on: int = 0

    def draft_cost(self, k, topk: int = 1):
        """D(k): one step's draft time, in plain steps."""
        k = np.asarray(k, dtype=float)
        return self.d0 + (self.d1 + self.d_tree * (topk > 1)) * (k - 1)

    def verify_cost(self, n, topk: int = 1):
        """V(n): one verify pass over n tokens, in plain steps."""
        return self.v0 + self.v_log * np.log(np.asarray(n, dtype=float)) + self.v_tree * (topk > 1)

    def step_cost(self, k, n=None, topk: int = 1):
        """One speculative step at depth k verifying n tokens (chain: k + 1), in plain steps."""
        k = np.asarray(k, dtype=float)
        n = k + 1 if n is None else np.asarray(n, dtype=float)
        return self.draft_cost(k, topk) + self.verify_cost(n, topk) + self.other

    def decode_speedup(self, accept_length, k, n=None, topk: int = 1):
        """Decode tokens/s with over without speculation: L / step_cost."""
        return np.asarray(accept_length, dtype=float) / self.step_cost(k, n, topk)

    def speedup(self, accept_length, k, n=None, topk: int = 1, tokens: int | None = None):
        """Total tokens/s with over without speculation for requests of `tokens` new tokens
        (default: the calibration's), prefill included: what the report measures."""
        t = float(tokens or self.tokens)
        L = np.asarray(accept_length, dtype=float)
        spec = self.prefill_spec + self.first_extra + (t - 1) / L * self.step_cost(k, n, topk)
        return (self.prefill_base + t - 1) / spec

    def as_dict(self) -> dict:
        return {k: round(v, 4) if isinstance(v, float) else v for k, v in asdict(self).items()}

    def curve(self) -> "CostCurve":
        """The chain part of these costs as the explorer's CostCurve (same step cost at every k)."""
        return CostCurve(draft=self.d1, verify=self.v0, growth=self.v_log * math.log(2),
                         fixed=self.d0 - self.d1 + self.other, prefill_base=self.prefill_base,
                         prefill_spec=self.prefill_spec + self.first_extra, tokens=self.tokens,
                         source=f"calibrated on {self.calibrated_on} measured configurations")


@dataclass
class CostCurve:
    """A chain's step cost against depth, in target (plain decode) steps, and what a request pays
    outside its decode loop: the model both explorers draw and a reader edits.

        C(k) = fixed + draft * k + verify + growth * log2(k + 1)
        speed-up (total tokens/s, requests of `tokens` new tokens)
                 = (prefill_base + tokens - 1) / (prefill_spec + (tokens - 1) / L(k) * C(k))
        speed-up (decode tokens/s, or `tokens` None) = L(k) / C(k)

    draft: each draft forward; verify: a verify pass of one token; growth: what a verify pass adds
    per doubling of the tokens it verifies; fixed: the rest of a step (the first draft forward's
    extra, emitting tokens). On a GPU with a dense target a verify pass of a few tokens costs about one
    target step (verify about 1, growth about 0) and a draft step a few hundredths; on a sparse MoE it
    grows with the union of experts the tokens route to (`eagle3lab.cost.archcost`)."""

    draft: float
    verify: float = 1.0
    growth: float = 0.0
    fixed: float = 0.0
    prefill_base: float = 0.0
    prefill_spec: float = 0.0
    tokens: int | None = None
    source: str = "assumed"

    def step_cost(self, k):
        k = np.asarray(k, dtype=float)
        return self.fixed + self.draft * k + self.verify + self.growth * np.log2(k + 1)

    def speedup(self, accept_length, k):
        """Total tokens/s speed-up when `tokens` is set (what the report measures), else decode."""
        L = np.asarray(accept_length, dtype=float)
        if not self.tokens:
            return L / self.step_cost(k)
        t = float(self.tokens)
        return (self.prefill_base + t - 1) / (self.prefill_spec + (t - 1) / L * self.step_cost(k))

    def decode_speedup(self, accept_length, k):
        return np.asarray(accept_length, dtype=float) / self.step_cost(k)

    @property
    def kind(self) -> str:
        return "total" if self.tokens else "decode"

    @classmethod
    def assumed(cls, cost_ratio: float) -> "CostCurve":
        """The old explorer's model: a verify pass costs one target step and nothing else does
        (speed-up L / (1 + k r)); what the lab measures is more (see the module docstring)."""
        return cls(draft=float(cost_ratio), source="assumed: a verify pass costs one target step")

    def as_dict(self) -> dict:
        return {k: round(v, 4) if isinstance(v, float) else v for k, v in asdict(self).items()}


# --------------------------------------------------------------------------- from the store

def pairs(records: list[dict]) -> list[tuple[dict, dict]]:
    """(speculative record, the baseline it divides by) for every speculative record that has one:
    the baseline stored with it (`paired_with`), else the shared one of the same target and prompts."""
    specs = [r for r in records if r.get("key", {}).get("kind") == "spec"]
    bases = [r for r in records if r.get("key", {}).get("kind") == "baseline"]
    out = []
    for s in specs:
        base = next((b for b in bases if b["key"].get("paired_with") == s["id"]), None)
        if base is None:
            base = next((b for b in bases if "paired_with" not in b["key"]
                         and all(b["key"].get(f) == s["key"].get(f) for f in _BASE_FIELDS)), None)
        if base is not None:
            out.append((s, base))
    return out


# the lab's drafts named by how they were trained, so that none reads as the incident's
DRAFT_WORDS = {"healthy": "TTT draft", "seed": "no-TTT draft", "no-ttt": "second no-TTT draft"}


def label_of(key: dict, usual_prompts: str | None = None) -> str:
    """A configuration's name from what determines it: draft, steps/topk/draft tokens, boundaries
    fed, switches."""
    draft = str(key.get("draft"))
    parts = [DRAFT_WORDS.get(draft, draft), "/".join(str(v) for v in key.get("spec", []))]
    parts += [f"fed boundaries {key['boundaries']}"] if key.get("boundaries") is not None else []
    return " ".join(parts + switches_of(key, usual_prompts))


def switches_of(key: dict, usual_prompts: str | None = None) -> list[str]:
    """The lab switches a measurement ran with, in words (empty: the draft as trained, usual prompts)."""
    parts = []
    switches = {"quant_bits": lambda v: f"int{v} target", "use_d2t": lambda v: None if v else "no d2t",
                "normed_last": lambda v: "normed last" if v else None,
                "greedy_draft": lambda v: "greedy draft" if v else None,
                "lm_head_from_target": lambda v: "target lm_head" if v else None,
                "rope_theta": lambda v: f"rope theta {v:g}", "chat_template": lambda v: "chat template"}
    for name, say in switches.items():
        if key.get(name) is not None:
            text = say(key[name])
            parts += [text] if text else []
    if usual_prompts is not None and key.get("prompts") != usual_prompts:
        parts.append(f"other prompts #{str(key.get('prompts'))[:4]}")  # which set: two rows may use two
    return parts


def timing(spec: dict, base: dict, label: str = "") -> Timing:
    """One configuration's measured parts (see the module docstring) from its records."""
    k, topk, n = (int(v) for v in spec["key"]["spec"])
    b = {row["prompt"]: row for row in base["prompts"]}
    rows = [(row, b[row["prompt"]]) for row in spec["prompts"] if row["prompt"] in b]
    steps = pd.DataFrame(spec.get("steps") or [])
    if not rows or steps.empty:
        raise StatsError(f"measurement {spec['id']} has no paired prompts or no step timings")
    unit = sum(p["decode_s"] for _, p in rows) / max(1, sum(p["tokens"] - 1 for _, p in rows))
    first = steps["step"] == steps.groupby("request")["step"].transform("min")
    later = steps[~first] if (~first).any() else steps
    draft = float(later["draft_s"].mean())
    n_steps = [int(r.get("verify_steps") or (steps["request"] == r["prompt"]).sum()) for r, _ in rows]
    loop = float((steps["draft_s"] + steps["verify_s"]).sum())
    outside_base = sum(p["seconds"] - p["decode_s"] for _, p in rows)
    if all("decode_s" in r for r, _ in rows):
        other = (sum(r["decode_s"] for r, _ in rows) - loop) / max(1, len(steps))
        outside_spec = sum(r["seconds"] - r["decode_s"] for r, _ in rows)
    else:  # a store written before spec rows carried decode_s: prefill as without speculation
        outside_spec = outside_base
        other = (sum(r["seconds"] for r, _ in rows) - loop - outside_spec) / max(1, len(steps))
    spec_tokens, spec_s = [r["tokens"] for r, _ in rows], [r["seconds"] for r, _ in rows]
    base_tokens, base_s = [p["tokens"] for _, p in rows], [p["seconds"] for _, p in rows]
    measured = (sum(spec_tokens) / sum(spec_s)) / (sum(base_tokens) / sum(base_s))
    return Timing(id=spec["id"], label=label or label_of(spec["key"]), num_steps=k, topk=topk,
                  num_draft_tokens=n, accept_length=float((steps["accepted"] + 1).mean()),
                  plain_step_s=unit, draft=draft / unit,
                  first_extra=(float(steps.loc[first, "draft_s"].mean()) - draft) / unit,
                  verify=float(steps["verify_s"].mean()) / unit, other=other / unit,
                  prefill_spec=outside_spec / len(rows) / unit, prefill_base=outside_base / len(rows) / unit,
                  spec_tokens=spec_tokens, base_tokens=base_tokens, steps=n_steps, measured=measured,
                  interval=ratio_ci(spec_tokens, spec_s, base_tokens, base_s), spec_s=spec_s, base_s=base_s,
                  draft_name=spec["key"].get("draft"))


def timings(records: list[dict]) -> list[Timing]:
    """Every speculative configuration of a store with its baseline, labelled (prompts that differ
    from the store's usual ones are named)."""
    found = pairs(records)
    usual = Counter(s["key"].get("prompts") for s, _ in found).most_common(1)
    usual = usual[0][0] if usual else None
    out = []
    for s, b in found:
        t = timing(s, b, label_of(s["key"], usual))
        t.switches = ", ".join(switches_of(s["key"], usual))
        out.append(t)
    return out


# --------------------------------------------------------------------------- calibration

def calibrate(measured: list[Timing]) -> LabCosts:
    """LabCosts from measured configurations: D and V by least squares on the module docstring's
    terms (a term the configurations cannot separate, e.g. no tree among them or one depth only,
    gets 0: the minimum-norm solution), the rest averaged. Needs at least one configuration."""
    if not measured:
        raise StatsError("no measured configuration to calibrate the cost model on")
    tree = np.array([t.topk > 1 for t in measured], dtype=float)
    later = np.array([t.num_steps - 1 for t in measured], dtype=float)
    d0, d1, d_tree = _fit([np.ones(len(measured)), later, later * tree], [t.draft for t in measured])
    log_n = np.log([t.num_draft_tokens for t in measured])
    v0, v_log, v_tree = _fit([np.ones(len(measured)), log_n, tree], [t.verify for t in measured])
    mean = lambda name: float(np.mean([getattr(t, name) for t in measured]))  # noqa: E731
    tokens = int(np.median([np.mean(t.spec_tokens) for t in measured]))
    return LabCosts(d0=d0, d1=d1, d_tree=d_tree, v0=v0, v_log=v_log, v_tree=v_tree, other=mean("other"),
                    first_extra=mean("first_extra"), prefill_spec=mean("prefill_spec"),
                    prefill_base=mean("prefill_base"), tokens=tokens, calibrated_on=len(measured))


def _fit(columns, y) -> list[float]:
    """Least-squares coefficients of y on the columns; a column that is constant where another
    already is (it adds nothing the others cannot say) is left at 0."""
    design = np.column_stack(columns)
    keep = []
    for j in range(design.shape[1]):
        trial = keep + [j]
        if np.linalg.matrix_rank(design[:, trial]) == len(trial):
            keep.append(j)
    coef = np.zeros(design.shape[1])
    coef[keep] = np.linalg.lstsq(design[:, keep], np.asarray(y, dtype=float), rcond=None)[0]
    return [float(c) for c in coef]


def predict_speedup(costs: LabCosts, t: Timing) -> float:
    """The total tokens/s speed-up `costs` predict for configuration `t`, from its own measured
    verify steps per prompt (its acceptance) and tokens."""
    step = float(costs.step_cost(t.num_steps, t.num_draft_tokens, t.topk))
    spec = sum(costs.prefill_spec + costs.first_extra + n * step for n in t.steps)
    base = sum(costs.prefill_base + tok - 1 for tok in t.base_tokens)
    return (sum(t.spec_tokens) / spec) / (sum(t.base_tokens) / base)


def prediction_table(records: list[dict], calibration: str = "leave-one-out") -> pd.DataFrame:
    """One row per configuration of a store: configuration (its name; also as draft, switches,
    num_steps, topk, num_draft_tokens), accept_length (measured), predicted and measured speed-up
    (total tokens/s over its own interleaved no-speculation run), the measured 95 % interval over
    prompts, and whether it holds the prediction (`inside`)."""
    if calibration not in CALIBRATIONS:
        raise StatsError(f"calibration must be one of {', '.join(CALIBRATIONS)}, got {calibration!r}")
    measured = timings(records)
    if len(measured) < (3 if calibration == "leave-one-out" else 1):
        raise StatsError(f"{len(measured)} measured configuration(s): too few to calibrate on "
                         f"({calibration})")
    pooled = calibrate(measured)
    rows = []
    for i, t in enumerate(measured):
        costs = calibrate(measured[:i] + measured[i + 1:]) if calibration == "leave-one-out" else pooled
        predicted = predict_speedup(costs, t)
        lo, hi = t.interval if t.interval else (math.nan, math.nan)
        rows.append({"configuration": t.label, "draft": t.draft_name, "switches": t.switches,
                     "num_steps": t.num_steps, "topk": t.topk,
                     "num_draft_tokens": t.num_draft_tokens, "accept_length": round(t.accept_length, 3),
                     "predicted": round(predicted, 3), "measured": round(t.measured, 3),
                     "interval": t.interval, "inside": bool(lo <= predicted <= hi),
                     "prompts": len(t.steps)})
    return pd.DataFrame(rows)


def share_inside(table: pd.DataFrame) -> tuple[int, int, float]:
    """(inside, configurations, share) of a prediction_table."""
    n = int(len(table))
    inside = int(table["inside"].sum()) if n else 0
    return inside, n, inside / n if n else math.nan


def error_summary(table: pd.DataFrame) -> str:
    """One line: how many configurations' intervals hold the prediction, against the target."""
    inside, n, share = share_inside(table)
    if not n:
        return "no configuration measured"
    err = (table["predicted"] - table["measured"]).abs()
    verdict = "meets" if share >= TARGET_SHARE else "misses"
    return (f"{inside} of {n} configurations ({share:.0%}) hold the prediction inside their measured 95 % "
            f"interval ({verdict} the {TARGET_SHARE:.0%} target); median |predicted - measured| "
            f"{float(err.median()):.3f}, largest {float(err.max()):.3f} (speed-up of total tokens/s)")


def lab_costs(records: list[dict]) -> LabCosts:
    """The cost model calibrated on every configuration of a store (what the explorer starts from)."""
    return calibrate(timings(records))


def point_for(records: list[dict], draft: str, spec, accept_length: float | None = None) -> dict | None:
    """The measured speed-up (total tokens/s) of one configuration of a store, with its interval
    and its measured step parts in plain steps (one draft forward, one verify pass, the whole step):
    the record of `draft` at `spec` (steps, topk, draft tokens) whose accept length is nearest
    `accept_length` (the same steps give the same figure), then the one without switches. None
    when the store has no such configuration."""
    spec = [int(v) for v in spec]
    found = [t for t in timings(records) if t.draft_name == draft and
             [t.num_steps, t.topk, t.num_draft_tokens] == spec]
    closeness = (lambda t: abs(t.accept_length - accept_length)) if accept_length is not None else (lambda t: 0.0)
    found = sorted(found, key=lambda t: (closeness(t), bool(t.switches)))
    if not found:
        return None
    t = found[0]
    return {"depth": t.num_steps, "topk": t.topk, "num_draft_tokens": t.num_draft_tokens,
            "accept_length": t.accept_length, "speedup": t.measured, "interval": t.interval,
            "configuration": t.label, "draft_over_target": t.draft / t.num_steps, "verify_over_target": t.verify,
            "step_cost_measured": t.draft + t.verify + t.other}


def costs_table(measured: list[Timing]) -> pd.DataFrame:
    """Each configuration's measured parts in its own plain steps (the calibration's inputs)."""
    return pd.DataFrame([{"configuration": t.label, "plain_step_ms": 1e3 * t.plain_step_s, "draft": t.draft,
                          "verify": t.verify, "other": t.other, "first_extra": t.first_extra,
                          "prefill_spec": t.prefill_spec, "prefill_base": t.prefill_base}
                         for t in measured]).round(3)

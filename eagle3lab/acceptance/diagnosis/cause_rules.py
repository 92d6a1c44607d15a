"""The diagnosis rules as tables: the causes, their thresholds, and one row per rule per cause.

`RATE_RULES` is read at a served temperature > 0 or without a replay: from the shape of the
served conditional per-position rates (and the draft's own evaluation when given). It is walked
stage by stage (`walk`): within a stage the first branch whose condition holds fires all its rows
(an if/elif chain: it excludes the stage's later branches); a stage that ``stops`` ends the walk
when its condition holds. Every row names the evidence it reads and the threshold it tests, like
`decoder/faults.py`'s fault table and `engines.sglang.sglang_rules.SGLANG_RULES`.

Thresholds are calibrated on the lab's measured fault signatures (benchmarks/validate_diagnosis.py
prints them per fault); ratios are served / standalone. The validation froze this file
(`lab/validation.FROZEN_FILES`): change a rule and a new held-out lab is needed.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np

from eagle3lab.acceptance.diagnosis.findings import Finding

CAUSES = ("config_adjusted", "wiring", "vocab_mapping", "multi_step", "quantization",
          "distribution_shift", "context_length", "sampling", "healthy")

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
T = THRESHOLDS

NEXT_CHECKS = {
    "config_adjusted": "`eagle3lab config -- <launch_server flags>` (eagle3lab.engines.effective.SpecConfig"
                       ".from_cli(argv).resolve()): compare num_draft_tokens asked and effective",
    "wiring": "`eagle3lab wiring --draft DIR --target DIR` (eagle3lab.wiring.slots.check): the "
              "boundaries the engine feeds against those the draft was trained on",
    "vocab_mapping": "`eagle3lab wiring --draft DIR --target DIR` (vocab checks): the draft's "
                     "d2t/t2d buffers exist and the engine maps draft ids to target ids",
    "multi_step": "eagle3lab.lab.evaluate_draft(..., depth=k) for acc@1..k of a TTT-style rollout "
                  "against served per-position rates (eagle3lab.acceptance.predict.gap_table); was the draft "
                  "trained with training-time test? check the draft KV cache and positions",
    "quantization": "re-run on the full-precision target (`eagle3lab lab bench` without quant "
                    "faults) and compare per-position rates",
    "distribution_shift": "evaluate the draft on the served prompts themselves "
                          "(eagle3lab.lab.evaluate_draft on a traffic sample) against its "
                          "evaluation data; compare prompt domains with the training data",
    "context_length": "bin acceptance by context length (eagle3lab.acceptance.stats.acceptance_by_context) "
                      "and compare with the draft's training sequence length",
    "sampling": "re-run at temperature 0 (`eagle3lab lab bench --temperature 0`); if the gap closes, "
                "check the draft sampling mode (greedy drafting at T > 0) and the verification rule",
    "healthy": "nothing to fix in acceptance; check the cost side (eagle3lab.acceptance.predict.best_depth)",
}

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

SHALLOW_NOTE = ("The draft's training evaluation reports only acc@1, as for a draft trained "
                "without training-time test, so its behaviour at depth is unknown.")
_RETRY_GREEDY = " Rule it out first: it costs one greedy re-run."


def finding(cause: str, weight: float, sentences, check: str = "") -> Finding:
    """A ranked statistical guess: its sentences joined, its next check, the weight in [0, 1]."""
    if cause not in CAUSES:
        raise ValueError(f"unknown cause {cause!r}")
    return Finding(cause, evidence=" ".join(sentences), fix=NEXT_CHECKS[cause],
                   weight=float(min(max(weight, 0.0), 1.0)), source="statistics", check=check)


def fmt(values) -> str:
    return "[" + ", ".join(f"{v:.2f}" for v in values) + "]"


def context_boost(effect) -> float:
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


# --------------------------------------------------------------------------- the rate rules

@dataclass
class RateEvidence:
    """What the rate rules read (`rate_evidence` computes it once; names as in the table)."""

    rates: np.ndarray          # served conditional rates c_1..c_k
    c1: float                  # c_1
    tail: float                # positions 2..k pooled by how often each is reached
    tail_drop: float           # tail / c_1
    keep1: float | None        # c_1 / reference acc@1
    keep: float | None         # mean c_i / reference acc@i
    acc1: float | None         # reference acc@1
    acc_train: np.ndarray | None   # the draft's own evaluation (its training data)
    acc_served: np.ndarray | None  # the same on the served text
    temperature: float | None
    sampling: bool             # temperature > 0
    shift_test: bool           # both evaluations given, greedy: a prompt shift can be tested
    trained_deep: bool         # the training evaluation reports acc@2.. (trained with TTT)
    reference_is_served: bool
    beyond: dict | None        # steps beyond the draft's training length (`_context_effect`)
    head: str                  # the first sentence of every finding
    ref: str                   # " against <reference> of x %" (empty without a reference)
    ctx_note: str
    out: list = field(default_factory=list)  # findings so far (some rows fire only on none)

    @property
    def shifted(self) -> bool:
        """The draft's own acc@1 on the served text is well below its evaluation data's."""
        return self.shift_test and self.acc_served[0] < T["prompt_shift"] * self.acc_train[0]

    @property
    def shallow(self) -> bool:
        """Evaluated at depth 1 only: later positions are a risk of their own."""
        return self.acc_train is not None and not self.trained_deep

    @property
    def dead(self) -> bool:
        return self.c1 < T["dead_abs"] if self.keep1 is None else self.keep1 < T["dead"]

    @property
    def first_ok(self) -> bool:
        return self.keep1 is None or self.keep1 >= T["first_ok"]

    @property
    def deep(self) -> bool:
        return len(self.rates) > 1

    # sentences shared by several rows
    @property
    def why_dead(self) -> str:
        return f"Position 1 accepts only {self.c1:.1%} of drafts{self.ref}."

    @property
    def tail_text(self) -> str:
        return (f"Position 1 accepts {self.c1:.1%}{self.ref}, but positions 2..{len(self.rates)} "
                f"pooled accept {self.tail:.1%}, {self.tail_drop:.0%} of position 1")

    @property
    def compare(self) -> str:
        return (f"Served rates keep {self.keep:.0%} of "
                f"{'the served-text' if self.reference_is_served else 'the standalone'} "
                f"accuracy on average ({self.keep1:.0%} at position 1).")

    @property
    def compare_loss(self) -> str:
        """`compare`, plus the served text's own acc@1 when it shows a prompt shift."""
        return self.compare + (f" On the served text the draft's own acc@1 is "
                               f"{self.acc_served[0]:.1%}, against {self.acc_train[0]:.1%} on its "
                               "evaluation data." if self.shifted else "")

    @property
    def samples(self) -> str:
        return f"Decoding samples at temperature {self.temperature:g}; " + REASONS["sampling"]

    @property
    def iid(self) -> float:
        from eagle3lab.acceptance.predict import fit_iid_rate

        return fit_iid_rate(min(max(self.accept_len, 1.0), len(self.rates) + 1), len(self.rates))

    accept_len: float = 0.0


@dataclass(frozen=True)
class Stage:
    """A group of branches tried in order (if/elif); ``stops``: the walk ends here when it holds."""

    name: str
    stops: Callable[[RateEvidence], bool] = lambda e: False
    excludes: str = ""


@dataclass(frozen=True)
class Rule:
    """One rule for one cause: the branch it belongs to and the branch's condition, the evidence
    it reads, the threshold it tests, the row's own extra condition, its weight and sentences."""

    stage: str
    branch: str
    cause: str
    reads: tuple[str, ...]
    threshold: str
    when: Callable[[RateEvidence], bool]           # the branch's condition
    weight: Callable[[RateEvidence], float]
    says: Callable[[RateEvidence], list[str]]
    also: Callable[[RateEvidence], bool] = lambda e: True  # this row's own condition
    excludes: str = ""


def _w(value):
    return lambda e: value


STAGES = (
    Stage("position 1", stops=lambda e: e.dead,
          excludes="every later stage: no chain gets past position 1 to judge the rest"),
    Stage("later positions", excludes="later branches of this stage (an if/elif chain)"),
    Stage("no reference", stops=lambda e: e.keep is None,
          excludes="the reference stage: without the draft's own accuracy there is nothing to keep"),
    Stage("reference", excludes="later branches of this stage (an if/elif chain)"),
)

_ZERO = lambda e: e.c1 < T["zero"]  # noqa: E731
_POS1 = ("c1", "keep1", "reference acc@1")
_TAIL = ("c1", "tail_drop", "keep1", "acc_train")

RATE_RULES = (
    # 1. Position 1 near zero: wrong inputs, wrong ids, or a sampling path that rejects drafts.
    Rule("position 1", "dead", "vocab_mapping", _POS1, "dead (keep1 < dead; without a reference "
         "c1 < dead_abs) and c1 < zero", lambda e: e.dead, _w(0.8), lambda e: [
             e.why_dead, "Acceptance this close to zero means draft ids almost never equal the "
             "target's choice, as when draft-vocabulary ids are read as target ids (missing d2t)."],
         also=_ZERO),
    Rule("position 1", "dead", "vocab_mapping", _POS1, "dead and c1 >= zero", lambda e: e.dead, _w(0.35),
         lambda e: [e.why_dead, "A partly wrong vocabulary mapping would also do this."],
         also=lambda e: not _ZERO(e)),
    Rule("position 1", "dead", "wiring", _POS1, "dead (weight 0.55 if c1 < zero, else 0.8)",
         lambda e: e.dead,
         lambda e: 0.55 if _ZERO(e) else 0.8, lambda e: [
             e.why_dead, "A draft fed hidden states from other boundaries still guesses some "
             "frequent tokens: a small nonzero rate."]),
    Rule("position 1", "dead", "sampling", _POS1 + ("temperature",), "dead and temperature > 0",
         lambda e: e.dead, _w(0.9), lambda e: [e.why_dead, e.samples + _RETRY_GREEDY],
         also=lambda e: e.sampling),
    Rule("position 1", "dead", "multi_step", ("acc_train",), "dead, training evaluation at depth 1 only",
         lambda e: e.dead, _w(0.4), lambda e: [
             "Almost no chain gets past position 1, so later positions cannot be judged. "
             + SHALLOW_NOTE], also=lambda e: e.shallow),
    # 2. Position 1 holds, later positions collapse: drafting on its own hidden states fails.
    Rule("later positions", "one position", "multi_step", ("rates", "acc_train"),
         "depth 1 served, training evaluation at depth 1 only", lambda e: not e.deep, _w(0.4),
         lambda e: ["Only one draft position is served, so the multi-step path is not exercised. "
                    + SHALLOW_NOTE], also=lambda e: e.shallow),
    Rule("later positions", "impaired, then lost", "wiring", _TAIL,
         "tail_drop < collapse and keep1 < first_ok",
         lambda e: e.deep and e.tail_drop < T["collapse"] and not e.first_ok, _w(0.75), lambda e: [
             e.tail_text + ": already weak at position 1 and lost once it drafts on its own "
             "states, as when the hidden states it reads are not the ones it was trained on."]),
    Rule("later positions", "impaired, then lost", "vocab_mapping", _TAIL,
         "tail_drop < collapse and keep1 < first_ok",
         lambda e: e.deep and e.tail_drop < T["collapse"] and not e.first_ok, _w(0.55), lambda e: [
             e.tail_text + ". Draft ids read in the wrong vocabulary (missing d2t) give the same "
             "picture when the two vocabularies share many ids."]),
    Rule("later positions", "impaired, then lost", "multi_step", _TAIL,
         "tail_drop < collapse and keep1 < first_ok",
         lambda e: e.deep and e.tail_drop < T["collapse"] and not e.first_ok, _w(0.5),
         lambda e: [e.tail_text + "."]),
    Rule("later positions", "impaired, then lost", "sampling", _TAIL + ("temperature",),
         "tail_drop < collapse and keep1 < first_ok, temperature > 0",
         lambda e: e.deep and e.tail_drop < T["collapse"] and not e.first_ok, _w(0.8),
         lambda e: [e.tail_text + ". " + e.samples + _RETRY_GREEDY], also=lambda e: e.sampling),
    Rule("later positions", "collapse", "multi_step", _TAIL, "tail_drop < collapse",
         lambda e: e.deep and e.tail_drop < T["collapse"], _w(0.85), lambda e: [
             e.tail_text + ": the draft predicts well from the target's hidden state and fails on "
             "its own (no training-time test, draft KV cache or position bugs)."
             + (" Its training evaluation reports only acc@1, as for a draft trained without TTT."
                if not e.trained_deep else "")]),
    # the rollout held up at depth in training evaluation: the served text is different
    Rule("later positions", "sag, trained deep", "distribution_shift", _TAIL,
         "tail_drop < sag, acc_train at depth > 1",
         lambda e: e.deep and e.tail_drop < T["sag"] and e.trained_deep, _w(0.6), lambda e: [
             e.tail_text + f", while the draft's own rollout on its evaluation data holds "
             f"{fmt(e.acc_train)}.", REASONS["distribution_shift"]]),
    Rule("later positions", "sag, trained deep", "multi_step", _TAIL,
         "tail_drop < sag, acc_train at depth > 1",
         lambda e: e.deep and e.tail_drop < T["sag"] and e.trained_deep, _w(0.45),
         lambda e: [e.tail_text + "."]),
    Rule("later positions", "sag", "multi_step", _TAIL, "tail_drop < sag",
         lambda e: e.deep and e.tail_drop < T["sag"], _w(0.6),
         lambda e: [e.tail_text + ". " + SHALLOW_NOTE]),
    Rule("later positions", "sag", "distribution_shift", _TAIL, "tail_drop < sag",
         lambda e: e.deep and e.tail_drop < T["sag"], _w(0.4),
         lambda e: [e.tail_text + ".", REASONS["distribution_shift"]]),
    # 3. No reference accuracy: only the shape of the rates, and only when nothing fired yet.
    Rule("no reference", "even and high", "healthy", ("rates", "c1"), "c1 >= 0.6, every c_i >= 0.4",
         lambda e: e.keep is None and not e.out and e.c1 >= 0.6 and float(np.min(e.rates)) >= 0.4,
         _w(0.5), lambda e: [f"Every position accepts at least {np.min(e.rates):.0%} (i.i.d. fit "
                             f"a = {e.iid:.2f}); no standalone accuracy was given to compare with."]),
    Rule("no reference", "moderate and even", "distribution_shift", ("rates", "c1"), "otherwise",
         lambda e: e.keep is None and not e.out, _w(0.35), lambda e: [_moderate(e)]),
    Rule("no reference", "moderate and even", "quantization", ("rates", "c1"), "otherwise",
         lambda e: e.keep is None and not e.out, _w(0.3), lambda e: [_moderate(e)]),
    # 4. Position 1 itself below its reference: something on the serving side (or the prompts).
    Rule("reference", "serve-side loss", "quantization", ("keep1", "keep"), "keep1 < healthy",
         lambda e: e.keep1 < T["healthy"], lambda e: _loss(e),
         lambda e: [e.compare_loss, REASONS["quantization"]]),
    Rule("reference", "serve-side loss", "wiring", ("keep1", "keep"), "keep1 < healthy",
         lambda e: e.keep1 < T["healthy"], lambda e: _loss(e) - 0.15,
         lambda e: [e.compare_loss, REASONS["wiring"]]),
    Rule("reference", "serve-side loss", "context_length", ("keep1", "beyond"),
         "keep1 < healthy, steps beyond the training length (context_t)",
         lambda e: e.keep1 < T["healthy"], lambda e: _loss(e) - 0.1 + context_boost(e.beyond),
         lambda e: [e.compare_loss + e.ctx_note, REASONS["context_length"]],
         also=lambda e: context_boost(e.beyond) > 0),
    # the cheapest explanation to rule out, the more so the larger the drop
    Rule("reference", "serve-side loss", "sampling", ("keep1", "temperature"),
         "keep1 < healthy, temperature > 0", lambda e: e.keep1 < T["healthy"],
         lambda e: _loss(e) + (0.3 if e.keep1 < 0.5 else 0.1),
         lambda e: [e.compare_loss, REASONS["sampling"]], also=lambda e: e.sampling),
    Rule("reference", "serve-side loss", "distribution_shift", ("keep1",),
         "keep1 < healthy, no prompt-shift test", lambda e: e.keep1 < T["healthy"],
         lambda e: _loss(e) - 0.05, lambda e: [e.compare_loss, REASONS["distribution_shift"]],
         also=lambda e: not e.shift_test),
    Rule("reference", "serve-side loss", "distribution_shift", ("keep1", "acc_served", "acc_train"),
         "keep1 < healthy, served-text acc@1 < prompt_shift x acc@1",
         lambda e: e.keep1 < T["healthy"], lambda e: _loss(e) + 0.1,
         lambda e: [e.compare_loss, REASONS["distribution_shift"]], also=lambda e: e.shifted),
    Rule("reference", "prompt shift", "distribution_shift", ("acc_served", "acc_train"),
         "served-text acc@1 < prompt_shift x acc@1", lambda e: e.shifted, _w(0.7), lambda e: [
             e.compare + f" Serving loses nothing, but on the served text the draft's own acc@1 is "
             f"{e.acc_served[0]:.1%}, against {e.acc_train[0]:.1%} on its evaluation data.",
             REASONS["distribution_shift"]]),
    Rule("reference", "kept", "healthy", ("keep",), "keep >= healthy, nothing else fired",
         lambda e: not e.out, lambda e: min(0.95, 0.6 + 3 * (e.keep - T["healthy"])),
         lambda e: [e.compare]),
)


# What a branch excludes when it fires: the later branches of its stage (an if/elif chain) and,
# for a stage that stops, every later stage. Written per branch so each row carries it.
EXCLUDES = {
    "dead": "every later branch and stage: no chain gets past position 1 to judge the rest",
    "one position": "the multi-step branches (nothing past position 1 is served)",
    "impaired, then lost": "collapse, sag: position 1 is already impaired",
    "collapse": "sag",
    "sag, trained deep": "sag with a depth-1 evaluation",
    "sag": "",
    "even and high": "moderate and even; the reference stage (no reference given)",
    "moderate and even": "the reference stage (no reference given)",
    "serve-side loss": "prompt shift, kept",
    "prompt shift": "kept",
    "kept": "",
}
RATE_RULES = tuple(replace(rule, excludes=EXCLUDES[rule.branch]) for rule in RATE_RULES)


def _moderate(e: RateEvidence) -> str:
    return (f"Acceptance is moderate and even across positions (i.i.d. fit a = {e.iid:.2f}); "
            "without standalone accuracy a prompt shift and a serve-side change look alike.")


def _loss(e: RateEvidence) -> float:
    """Base weight of a serve-side loss: larger the more position 1 loses."""
    return 0.6 if e.keep1 < 0.8 else 0.45


def walk(evidence: RateEvidence, rules=RATE_RULES, stages=STAGES) -> list[Finding]:
    """The findings the table gives: per stage, the first branch whose condition holds fires its
    rows (each if its own condition holds), in table order; a stage that stops ends the walk."""
    out = evidence.out
    for stage in stages:
        rows = [r for r in rules if r.stage == stage.name]
        branches = list(dict.fromkeys(r.branch for r in rows))
        for branch in branches:
            mine = [r for r in rows if r.branch == branch]
            if not mine[0].when(evidence):
                continue
            for rule in mine:
                if rule.also(evidence):
                    out.append(finding(rule.cause, rule.weight(evidence),
                                       [evidence.head, *rule.says(evidence)],
                                       f"{stage.name}: {branch}"))
            break
        if stage.stops(evidence):
            break
    return out

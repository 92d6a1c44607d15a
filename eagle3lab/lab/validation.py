"""Blind validation of `diagnosis.diagnose` on a lab: decode each fault, diagnose, score.

Every scenario (a lab fault, a pair of faults, or a fault-free run) is decoded by the lab
engine; diagnose() then sees only what a deployer can measure -- served per-position
acceptance and accept length, the per-step context lengths, the requested and effective
draft tokens, the temperature, the draft's training length, the draft's own evaluation at
the served depth (acc@1..k on held-out text, full-precision target, its own wiring), the
same evaluation on the served text, and the served text re-scored offline by the
full-precision target and the draft as trained (`evaluation.served_text_replay`) -- never
the fault's name. The names are used afterwards, only to score the ranked findings.

Used by benchmarks/validate_diagnosis.py (every fault and ten pairs, on any built lab) and by
tests/test_validation.py (a few scenarios on the ci lab, pinned).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pandas as pd

from eagle3lab.acceptance import diagnosis
from eagle3lab.acceptance import stats
from eagle3lab.decoder.faults import CHECKPOINT_FAULTS, EXPECTED_CAUSES
from eagle3lab.errors import EagleLabError

# The cause a scenario should be diagnosed as (scoring only; diagnose never sees it): the
# fault table's causes, plus the scenarios that are not lab faults.
NOT_FAULTS = ("none", "sampled", "config-adjusted")
EXPECTED = {
    "none": ("healthy",),
    "sampled": ("healthy",),  # no fault, temperature > 0 with sampled drafts
    "config-adjusted": ("config_adjusted",),
    **EXPECTED_CAUSES,
}
# every lab fault alone (no-embed-patch wires like wiring-seed; checkpoint faults are named
# by `eagle3lab doctor` from the files, not from statistics), after the scenarios above
SINGLES = list(NOT_FAULTS) + [f for f in EXPECTED_CAUSES
                              if f != "no-embed-patch" and f not in CHECKPOINT_FAULTS]
PAIRS = [("wiring-seed", "quant-int4"), ("no-ttt", "domain-shift"), ("no-d2t", "quant-int8"),
         ("normed-last", "long-context"), ("embed-patch", "quant-int4"),
         ("quant-int4", "domain-shift"), ("no-ttt", "long-context"), ("config-adjusted", "no-ttt"),
         ("quant-int4", "long-context"), ("greedy-draft", "no-ttt")]
RULES_FILE = "eagle3lab/acceptance/diagnosis/cause_rules.py"  # where diagnose()'s rule table and THRESHOLDS live
# Everything a score depends on: the rules and the code that walks them, the statistics and models
# they read, how scenarios are observed and scored, the draft's evaluation and replay, the faults.
# A lab is held out only if built after all of them last changed. (Until the split of
# eagle3lab/analysis.py the first five were that one file; see docs/report-method.md.)
FROZEN_FILES = (RULES_FILE, "eagle3lab/acceptance/diagnosis/diagnose.py", "eagle3lab/acceptance/stats.py",
                "eagle3lab/acceptance/predict.py", "eagle3lab/acceptance/diagnosis/findings.py", "eagle3lab/lab/validation.py",
                "eagle3lab/lab/evaluation.py", "eagle3lab/decoder/faults.py")


class ValidationError(EagleLabError):
    """A scenario or setting the validation cannot run."""


def parse_scenario(text: str) -> tuple[str, ...]:
    """'no-ttt+long-context' -> ('no-ttt', 'long-context'), each name checked."""
    names = tuple(n.strip() for n in str(text).split("+") if n.strip())
    unknown = [n for n in names if n not in EXPECTED]
    if not names or unknown:
        raise ValidationError(f"unknown scenario {text!r}; names: {', '.join(EXPECTED)} "
                              "(a pair joined by '+')")
    return names


class Runner:
    """Decodes scenarios on one lab and turns them into observable statistics.

    prompts x new_tokens per scenario at chain depth `steps` (topk 1). Every draft is
    evaluated at that depth, the depth the deployment serves (config-adjusted serves 1 step
    because the flags ask for it; its draft is still evaluated at `steps`, the depth intended).
    """

    def __init__(self, lab, *, prompts: int = 6, prompt_tokens: int = 48, new_tokens: int = 64,
                 steps: int = 5, temperature: float = 0.8, holdout: bool = False):
        self.lab = lab
        self.n_prompts, self.prompt_tokens, self.new_tokens = prompts, prompt_tokens, new_tokens
        self.steps, self.temperature, self.holdout = steps, temperature, holdout
        self.drafts, self.standalone = {}, {}

    def draft(self, name):
        if name not in self.drafts:
            self.drafts[name] = self.lab.load_draft(name)
        return self.drafts[name]

    def train_seq_len(self) -> int:
        return int(self.lab.manifest.get("config", {}).get("seq_len", 128))

    def standalone_acc(self, name) -> list[float]:
        """What the draft's training evaluation reports at the served depth: acc@1..steps on
        held-out text, full-precision target, its own wiring."""
        if name not in self.standalone:
            from eagle3lab.lab import evaluate_draft

            table = evaluate_draft(self.lab, self.draft(name), self.lab.heldout_texts(8), depth=self.steps)
            self.standalone[name] = [round(float(a), 4) for a in table["accuracy"]]
        return self.standalone[name]

    def standalone_on(self, name, gens) -> list[float]:
        """The same evaluation on the served prompts and outputs."""
        from eagle3lab.lab import evaluate_draft

        texts = [g.prompt_ids + g.output_ids for g in gens]
        table = evaluate_draft(self.lab, self.draft(name), texts, seq_len=self.train_seq_len(),
                               depth=self.steps)
        return [round(float(a), 4) for a in table["accuracy"]]

    def prompts(self, plan) -> list[list[int]]:
        n, tokens = self.n_prompts, self.prompt_tokens
        tok = self.lab.tokenizer
        if "long-context" in plan.prompt_kinds:
            # traffic of mixed lengths reaching well past the draft's training window, so that
            # acceptance can be binned by context length
            stream = tok("\n\n".join(self.lab.heldout_texts()), add_special_tokens=False)["input_ids"]
            lengths = np.linspace(tokens, 4 * self.train_seq_len(), n).astype(int)
            starts = np.cumsum(np.concatenate([[0], lengths[:-1]]))
            if self.holdout:
                starts = starts + int(lengths.sum())
            return [stream[s:s + length] for s, length in zip(starts, lengths)]
        if "domain-shift" in plan.prompt_kinds:
            from eagle3lab.decoder.faults import domain_shift_texts

            return [tok(t, add_special_tokens=False)["input_ids"][:tokens]
                    for t in domain_shift_texts(n, seed=1 if self.holdout else 0)]
        if self.holdout:
            available = sum(len(tok(t, add_special_tokens=False)["input_ids"]) >= tokens
                            for t in self.lab.heldout_texts())
            if available < 2 * n:
                raise ValidationError(f"holdout needs 2 x prompts held-out passages of {tokens} "
                                      f"tokens; this lab has {available}: use {available // 2} prompts")
            return self.lab.heldout_prompts(2 * n, tokens)[n:]
        return self.lab.heldout_prompts(n, tokens)

    def observe(self, scenario: tuple[str, ...]) -> dict:
        """Decode one scenario; everything diagnose() may see, as JSON-ready values."""
        from eagle3lab.decoder.faults import build_engine, plan_faults
        from eagle3lab.decoder.speculate import SamplingParams
        from eagle3lab.spec import SpecParams
        from eagle3lab.lab.evaluation import served_text_replay

        plan = plan_faults([f for f in scenario if f not in NOT_FAULTS], self.lab.num_layers)
        steps = self.steps
        requested = effective = steps + 1
        if "config-adjusted" in scenario:
            # the seed's flags: --speculative-num-steps 1 --speculative-num-draft-tokens 16, topk 1
            steps, requested = 1, 16
            effective = resolve_draft_tokens(steps, 1, requested)
        hot = "greedy-draft" in scenario or "sampled" in scenario
        temperature = self.temperature if hot else 0.0
        draft = self.draft(plan.draft_name)
        engine = build_engine(self.lab.target, draft, plan, tokenizer=self.lab.tokenizer)
        sampling = SamplingParams(temperature=temperature, seed=0)
        gens = [engine.generate(p, self.new_tokens, spec=SpecParams(steps, 1, effective),
                                sampling=sampling) for p in self.prompts(plan)]
        frame = stats.steps_frame(gens)
        table = stats.per_position(frame, k=steps, conditional=True, n_boot=300)
        replay = served_text_replay(self.lab, draft, gens, steps)
        replay["reference_accepted"] = [None if r != r else int(r) for r in replay["reference_accepted"]]
        replay["logprob_deltas"] = [float(f"{d:.3g}") for d in replay["logprob_deltas"]]
        return {
            "per_position": [round(float(r), 4) if r == r else None for r in table["rate"]],
            "accept_len": round(stats.accept_length(frame), 4),
            "standalone_acc": self.standalone_acc(plan.draft_name),
            "standalone_acc_served": self.standalone_on(plan.draft_name, gens),
            "requested_draft_tokens": requested, "effective_draft_tokens": effective,
            "temperature": temperature, "depth": steps, "draft_max_context": self.train_seq_len(),
            "context_length": frame["context_length"].tolist(), "accepted": frame["accepted"].tolist(),
            "replay": replay,
        }


def resolve_draft_tokens(steps: int, topk: int, requested: int) -> int:
    """Effective num_draft_tokens by eagle3lab.engines.effective's SGLang rules (newest SGLang read)."""
    from eagle3lab.spec import SpecConfig
    from eagle3lab.spec import LATEST_SGLANG

    resolved = SpecConfig(num_steps=steps, topk=topk, num_draft_tokens=requested).resolve(
        engine="sglang", version=LATEST_SGLANG, arch="LlamaForCausalLM")
    return int(resolved.num_draft_tokens)


def diagnose_observation(obs: dict) -> list:
    """diagnose() from the observable statistics only."""
    steps = pd.DataFrame({"accepted": obs["accepted"], "context_length": obs["context_length"]})
    replay = obs.get("replay")
    if replay is not None:
        replay = {**replay, "reference_accepted": [np.nan if r is None else r
                                                   for r in replay["reference_accepted"]]}
    return diagnosis.diagnose(
        per_position=[np.nan if r is None else r for r in obs["per_position"]],
        accept_len=obs["accept_len"], standalone_acc=obs["standalone_acc"],
        requested_draft_tokens=obs["requested_draft_tokens"],
        effective_draft_tokens=obs["effective_draft_tokens"],
        standalone_acc_served=obs["standalone_acc_served"], steps=steps,
        temperature=obs["temperature"], depth=obs["depth"],
        draft_max_context=obs.get("draft_max_context"), replay=replay)


def score(scenario: tuple[str, ...], findings) -> dict:
    """Strict scores, no fault excused. top1: the first finding is a cause of one of the
    scenario's faults. top2: every fault of the scenario is named (by one of its causes) within
    the first two findings (for a single fault: its cause is first or second)."""
    ranked = [f.cause for f in findings]
    expected = [EXPECTED[f] for f in scenario]
    return {"top1": bool(ranked) and any(ranked[0] in causes for causes in expected),
            "top2": all(set(causes) & set(ranked[:2]) for causes in expected)}


def score_table(observations: dict) -> pd.DataFrame:
    """One tidy row per scenario: what was served, what diagnose() named, the strict scores."""
    rows = []
    for scenario, obs in observations.items():
        findings = diagnose_observation(obs)
        replay = obs.get("replay") or {}
        ref = [r for r in replay.get("reference_accepted", []) if r is not None]
        rows.append({"scenario": "+".join(scenario), "kind": "pair" if len(scenario) > 1 else "single",
                     "expected": ",".join("|".join(EXPECTED[f]) for f in scenario),
                     "temperature": obs["temperature"], "depth": obs["depth"],
                     "accept_len": obs["accept_len"],
                     "replay_accept_len": round(stats.accept_length(ref), 4) if ref else np.nan,
                     "per_position": " ".join("-" if r is None else f"{r:.2f}" for r in obs["per_position"]),
                     "standalone_acc": " ".join(f"{a:.3f}" for a in obs["standalone_acc"]),
                     "target_mismatches": len(replay.get("mismatch_margins") or []),
                     "first": findings[0].cause if findings else "",
                     "second": findings[1].cause if len(findings) > 1 else "",
                     "findings": " > ".join(f.cause for f in findings[:4]),
                     **score(scenario, findings)})
    return pd.DataFrame(rows)


def summary(table: pd.DataFrame) -> pd.DataFrame:
    """Strict top-1 and top-2 for singles, pairs and all: DataFrame(kind, n, top1, top2)."""
    rows = []
    for kind, part in (("single", table[table["kind"] == "single"]),
                       ("pair", table[table["kind"] == "pair"]), ("all", table)):
        if len(part):
            rows.append({"kind": kind, "n": len(part), "top1_hits": int(part["top1"].sum()),
                         "top1": float(part["top1"].mean()), "top2_hits": int(part["top2"].sum()),
                         "top2": float(part["top2"].mean())})
    return pd.DataFrame(rows)


def lab_identity(lab_path) -> dict:
    """seed and shape of a built lab, from its manifest (what the header says is held out)."""
    import json

    manifest = json.loads((Path(lab_path) / "manifest.json").read_text())
    cfg = manifest.get("config", {})
    return {"lab": str(lab_path), "preset": manifest.get("preset"), "seed": cfg.get("seed"),
            "num_layers": cfg.get("num_layers"), "hidden_size": cfg.get("hidden_size"),
            "vocab_size": cfg.get("vocab_size"), "seq_len": cfg.get("seq_len"),
            "ttt_steps": cfg.get("ttt_steps"), "built_at": manifest.get("built_at")}


def freeze(repo: Path) -> dict:
    """What the scores depend on, pinned: sha256 of each frozen file, the last commit that changed
    any of them and its time (a lab built before it is not held out), and whether any differs
    from that commit."""
    import hashlib

    def git(*args):
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True).stdout.strip()

    hashes = {f: hashlib.sha256((Path(repo) / f).read_bytes()).hexdigest() for f in FROZEN_FILES}
    last = git("log", "-1", "--format=%h %cI", "--", *FROZEN_FILES).split()
    return {"sha256": hashes, "commit": last[0] if last else "unknown",
            "committed_at": last[1] if len(last) > 1 else None,
            "modified": bool(git("status", "--porcelain", "--", *FROZEN_FILES))}


def held_out(built_at: str | None, frozen: dict) -> bool:
    """A lab is held out only if it was built after every frozen file last changed (and none is
    modified since): its results could not have shaped the rules."""
    import datetime as dt

    if not built_at or not frozen.get("committed_at") or frozen.get("modified"):
        return False
    parse = lambda t: dt.datetime.fromisoformat(t.replace("Z", "+00:00"))  # noqa: E731
    return parse(built_at) > parse(frozen["committed_at"])


def summary_text(table: pd.DataFrame) -> list[str]:
    """One line per kind: strict top-1 and top-2, each with its count and 95 % Wilson interval."""
    return [f"{row.kind:7s} strict top-1 {stats.share_text(row.top1_hits, row.n)}, "
            f"top-2 {stats.share_text(row.top2_hits, row.n)}" for row in summary(table).itertuples()]


def rules_commit(repo: Path) -> str:
    """The last commit that changed diagnose()'s rules, '+modified' if they changed since."""
    def git(*args):
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True).stdout.strip()

    commit = git("log", "-1", "--format=%h", "--", RULES_FILE) or "unknown"
    dirty = git("status", "--porcelain", "--", RULES_FILE)
    return commit + ("+modified" if dirty else "")

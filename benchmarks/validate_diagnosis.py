"""Blind validation of eagle3lab.acceptance.diagnosis.diagnose on a lab's faults (strict top-1 and top-2).

Every lab fault alone, ten pairs and three fault-free or config scenarios are decoded by the
lab engine at one served depth; diagnose() sees only what a deployer can measure (see
eagle3lab/lab/validation.py), never the fault's name. Every draft is evaluated at the served
depth. Scores are strict: top-1 = the first finding is a cause of one of the scenario's
faults; top-2 = every fault of the scenario is named within the first two findings. No fault
is excused, not even one that changes nothing measurable on the lab at hand.

What is held out: the rules and thresholds (eagle3lab/acceptance/diagnosis/cause_rules.py; eagle3lab/analysis.py
until it was split) were tuned on the
default and ci labs only (data/lab/default, data/lab/ci: seed 0). A lab is held out only if it
was built after the rules and everything the observations depend on were frozen
(`validation.FROZEN_FILES`: diagnosis/rules.py and diagnose.py, stats.py, predict.py, findings.py,
lab/validation.py, lab/evaluation.py, engine/faults.py,
whose sha256 the header prints and the CSV records), and it is scored once; a lab whose results
have been read is seen (pass --seen), and the next change to a frozen file needs a new lab.
Earlier labs: docs/report-method.md (only lab5 was held out for the rules of 93e3a3b).

    eagle3lab lab build --preset ci --set seed=31 --set num_layers=14 --set hidden_size=48 --out /tmp/lab5
    .venv/bin/python benchmarks/validate_diagnosis.py --lab-dir /tmp/lab5 --out lab5.csv

    .venv/bin/python benchmarks/validate_diagnosis.py --preset ci --observations ci.jsonl
    .venv/bin/python benchmarks/validate_diagnosis.py --from-observations ci.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from eagle3lab.lab import validation as V  # noqa: E402

TUNING_LABS = ("data/lab/default", "data/lab/ci")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", default=None, help="lab preset (default: ci if built, else default)")
    p.add_argument("--lab-dir", default=None,
                   help="a built lab folder, e.g. a second lab never used to tune the rules "
                        "(`eagle3lab lab build --preset ci --set seed=7 --set num_layers=12 --out DIR`)")
    p.add_argument("--seen", action="store_true",
                   help="the lab's results under earlier rules were read: say so instead of 'held out'")
    p.add_argument("--prompts", type=int, default=6, help="prompts per scenario")
    p.add_argument("--prompt-tokens", type=int, default=48)
    p.add_argument("--new-tokens", type=int, default=64)
    p.add_argument("--steps", type=int, default=5, help="served chain depth (num_steps, topk 1)")
    p.add_argument("--temperature", type=float, default=0.8, help="for the sampled scenarios")
    p.add_argument("--holdout", action="store_true", help="prompts disjoint from the default set")
    p.add_argument("--only", nargs="*", help="run only these scenarios (a pair joined by '+')")
    p.add_argument("--out", default=None, help="write the per-scenario table as CSV here")
    p.add_argument("--observations", default=None, help="write each scenario's observations (JSON lines)")
    p.add_argument("--from-observations", default=None,
                   help="re-diagnose observations saved by --observations (no decoding)")
    return p.parse_args(argv)


def open_lab(args):
    """(lab, its folder): --lab-dir, else the preset (ci if built, else default)."""
    from eagle3lab.lab.built import Lab
    from eagle3lab.paths import lab_dir

    if args.lab_dir:
        return Lab(args.lab_dir), Path(args.lab_dir)
    for preset in ([args.preset] if args.preset else ["ci", "default"]):
        if (lab_dir(preset) / "manifest.json").exists():
            return Lab(lab_dir(preset)), lab_dir(preset)
    raise SystemExit("no lab built: run `eagle3lab lab build --preset ci` first")


def role(identity: dict, args, frozen: dict) -> str:
    """tuning, seen, or held out -- the last only for a lab built after every frozen file last
    changed (`validation.held_out`) and not declared seen."""
    if any(Path(identity["lab"]).resolve() == (REPO / t).resolve() for t in TUNING_LABS):
        return "tuning"
    if getattr(args, "seen", False):
        return "seen"
    return "held out" if V.held_out(identity.get("built_at"), frozen) else "built before the freeze"


def header(identity: dict, args, commit: str, frozen: dict) -> str:
    """What is held out, and under which frozen rules."""
    words = {"tuning": "a TUNING lab (not held out)",
             "seen": "SEEN (not held out): its results under earlier rules were read",
             "held out": "held out: built after the rules and everything the scores depend on were frozen",
             "built before the freeze": "NOT held out: built before the frozen files last changed"}
    hashes = "\n".join(f"  sha256 {h}  {f}" for f, h in frozen["sha256"].items())
    return (f"lab {identity['lab']} ({words[role(identity, args, frozen)]}): preset {identity['preset']}, "
            f"seed {identity['seed']}, {identity['num_layers']} layers x hidden {identity['hidden_size']}, "
            f"vocab {identity['vocab_size']}, training length {identity['seq_len']}, TTT steps "
            f"{identity['ttt_steps']}, built {identity.get('built_at')}\n"
            f"rules and thresholds ({V.RULES_FILE}) last changed at commit {commit}; frozen files last "
            f"changed at {frozen['commit']} ({frozen['committed_at']})"
            f"{', MODIFIED since' if frozen['modified'] else ''}:\n{hashes}\n"
            f"tuned on {', '.join(TUNING_LABS)}\n{args.prompts} {'hold-out ' if args.holdout else ''}"
            f"prompts x {args.new_tokens} new tokens per scenario, served depth {args.steps} (topk 1), "
            f"every draft evaluated at depth {args.steps}; strict scores, no fault excused")


def main(argv=None) -> int:
    args = parse_args(argv)
    scenarios = [(s,) for s in V.SINGLES] + V.PAIRS
    if args.only:
        scenarios = [V.parse_scenario(s) for s in args.only]
    observations, t0 = {}, time.time()
    if args.from_observations:
        meta = None
        for line in open(args.from_observations):
            rec = json.loads(line)
            if "meta" in rec:
                meta = rec["meta"]
                continue
            observations[tuple(rec.pop("scenario").split("+"))] = rec
        if args.only:
            observations = {s: observations[s] for s in scenarios if s in observations}
        identity = meta or {"lab": "saved", "preset": "?", "seed": "?", "num_layers": "?",
                            "hidden_size": "?", "vocab_size": "?", "seq_len": "?", "ttt_steps": "?"}
    else:
        import torch
        from tqdm import tqdm

        torch.manual_seed(0)
        torch.set_num_threads(1)  # lab-sized models: fastest on one thread, no stalls on a busy machine
        lab, folder = open_lab(args)
        identity = V.lab_identity(folder)
        runner = V.Runner(lab, prompts=args.prompts, prompt_tokens=args.prompt_tokens,
                          new_tokens=args.new_tokens, steps=args.steps,
                          temperature=args.temperature, holdout=args.holdout)
        for scenario in tqdm(scenarios, desc="scenarios", unit="run"):
            observations[scenario] = runner.observe(scenario)
        if args.observations:  # saved before scoring: re-scoring needs no decoding
            with open(args.observations, "w") as fh:
                fh.write(json.dumps({"meta": {**identity, "frozen": V.freeze(REPO)}}) + "\n")
                for scenario, obs in observations.items():
                    fh.write(json.dumps({"scenario": "+".join(scenario), **obs}) + "\n")
    commit = V.rules_commit(REPO)
    frozen = V.freeze(REPO)
    table = V.score_table(observations)
    print(header(identity, args, commit, frozen))
    with pd.option_context("display.width", 250, "display.max_colwidth", 60):
        print(table[["scenario", "expected", "accept_len", "replay_accept_len", "per_position",
                     "findings", "top1", "top2"]].to_string(index=False))
    print(f"\n{time.time() - t0:.0f} s")
    for line in V.summary_text(table):
        print(line)
    if args.out:
        pins = {f"sha256:{f}": h for f, h in frozen["sha256"].items()}
        table.assign(**{k: identity.get(k) for k in ("lab", "seed", "num_layers", "hidden_size", "built_at")},
                     role=role(identity, args, frozen), rules_commit=commit, frozen_commit=frozen["commit"],
                     **pins).to_csv(args.out, index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The checkpoint-level lab faults, measured and diagnosed: accept length served by the lab engine
with and without each fault, and what `eagle3lab doctor` says about the checkpoint the fault
leaves on disk (static checks, and the empirical wiring inference with --empirical).

    .venv/bin/python benchmarks/doctor_faults.py --preset default --prompts 8 --new-tokens 64 [--empirical]
        [--faults none,chat-template]

With --empirical the doctor also gets the lab's held-out passages as --prompts, so its prompt-format
check (acc@1 as served vs as trained) runs where the target serves a chat template (chat-template).

Also times the empirical inference per lab draft (--timing): wall and CPU seconds of
`doctor(draft, target, serve="sglang==0.5.23")`, and the boundaries it names.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

FAULTS = ["none", "lm-head-target", "rope-theta", "no-aux-ids", "embed-patch", "chat-template"]


def accept_length(lab, faults, prompts, new_tokens, steps) -> float:
    from eagle3lab.acceptance import stats
    from eagle3lab.decoder.faults import build_engine, plan_faults
    from eagle3lab.decoder.speculate import SamplingParams
    from eagle3lab.spec import SpecParams

    plan = plan_faults([f for f in faults if f != "none"], lab.num_layers)
    engine = build_engine(lab.target, lab.load_draft(plan.draft_name), plan, tokenizer=lab.tokenizer)
    gens = [engine.generate(p, new_tokens, spec=SpecParams(steps, 1, steps + 1),
                            sampling=SamplingParams(temperature=0.0, seed=0)) for p in prompts]
    return stats.accept_length(stats.steps_frame(gens))


def diagnose(lab, fault, empirical) -> str:
    from eagle3lab.doctor import doctor
    from eagle3lab.doctor.labfaults import write_faulty_draft, write_faulty_target

    with tempfile.TemporaryDirectory() as tmp:
        if fault == "none":
            draft, target = lab.root / "drafts" / "healthy", lab.target_dir
        else:
            draft = write_faulty_draft(lab.root, fault, Path(tmp) / fault)
            target = write_faulty_target(lab.root, fault, Path(tmp) / f"{fault}-target")
        prompts = list(lab.heldout_texts(24)) if empirical else None
        report = doctor(draft, target=target, serve="sglang==0.5.23", empirical=empirical, prompts=prompts)
    said = [f"{f.cause}({f.source})" for f in report.errors] or ["no error"]
    said += [f"{f.cause} warning({f.source})" for f in report.findings if f.severity == "warning"]
    fmt = report.facts.get("prompt_format")
    if fmt:
        said.append(f"acc@1 served {fmt['acc1_served']:.3f} vs trained {fmt['acc1_trained']:.3f} "
                    f"({fmt['prompts']} prompts, p = {fmt['p']:.2g})")
    return ", ".join(said)


def timing(lab) -> None:
    """Per lab draft: the time of the empirical inference, the set it names, and what its wiring
    fix prints (nothing, exact ids, or candidate sets with their bench commands)."""
    from eagle3lab.doctor import doctor

    for name in lab.draft_names:
        wall, cpu = time.perf_counter(), time.process_time()
        report = doctor(lab.root / "drafts" / name, target=lab.target_dir, serve="sglang==0.5.23")
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        inf = report.facts["inferred"]
        trained = lab.load_draft(name).train_boundaries
        print(f"{name:8s} trained {trained} | named {inf['best']} ties {inf['tied']} | "
              f"{report.facts['empirical_positions']} positions, {report.facts['candidates_scored']} sets | "
              f"{wall:.1f} s wall, {cpu:.1f} s CPU")
        print(f"         fix: {fix_summary(report, trained)}")


def fix_summary(report, trained) -> str:
    """What the empirical wiring finding prints as its fix, in one line."""
    wiring = [f for f in report.findings if f.source == "empirical" and f.cause == "wiring"][0]
    if wiring.severity == "info":
        return f"none ({wiring.severity}: {wiring.title})"
    if wiring.data.get("singled_out"):
        return f"EXACT ({wiring.severity}): {wiring.fix}"
    cands = wiring.data.get("candidates") or []
    listed = "; ".join(f"{c['boundaries']} ids {c['ids']} ({c['why']})" for c in cands)
    covered = "trained set among them" if list(trained) in [c["boundaries"] for c in cands] else "trained set NOT among them"
    return f"candidates ({wiring.severity}, {covered}): {listed}"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", default="ci")
    p.add_argument("--lab-dir", default=None, help="a built lab folder instead of the preset's")
    p.add_argument("--prompts", type=int, default=8)
    p.add_argument("--prompt-tokens", type=int, default=32)
    p.add_argument("--new-tokens", type=int, default=64)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--empirical", action="store_true", help="run the doctor's empirical checks too")
    p.add_argument("--timing", action="store_true", help="time the empirical inference per lab draft")
    p.add_argument("--faults", default=",".join(FAULTS), help="comma list of the faults to measure")
    args = p.parse_args(argv)
    import torch

    from eagle3lab.lab import load_lab

    torch.set_num_threads(1)
    if args.lab_dir:
        from eagle3lab.lab.built import Lab

        lab = Lab(args.lab_dir)
    else:
        lab = load_lab(args.preset, build=False)
    if args.timing:
        timing(lab)
        return 0
    prompts = lab.heldout_prompts(args.prompts, args.prompt_tokens)
    print(f"lab {args.lab_dir or args.preset}: {args.prompts} prompts x {args.new_tokens} tokens, chain depth {args.steps}")
    for fault in args.faults.split(","):
        al = accept_length(lab, [fault], prompts, args.new_tokens, args.steps)
        print(f"{fault:15s} accept length {al:.3f} | doctor: {diagnose(lab, fault, args.empirical)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The lab's own EAGLE-3 speculative decoder: its forward passes, the draft model, fault switches and the lab bench. Not: its HTTP front end (engines/lab) or the lab's models and their training (lab).

    from eagle3lab.lab import load_lab
    from eagle3lab.decoder import run_bench, make_lab_engine

    lab = load_lab("ci")
    result = run_bench(lab, spec=(3, 1, 4), faults=["wiring-seed"])
    result.summary(); result.steps; result.tokens

The lab engine's room: the decoder, its models (the lab's EAGLE-3 draft, `draft`, lives here so
both the engine and the lab import it downward), faults and the bench. May import: spec,
errors, wiring, acceptance, sources, engines (never lab, serving or above).

The names below are loaded on first use (PEP 562): importing `eagle3lab.decoder.faults` (the
CLI's help lists the faults) must not import torch, which the decoder needs and the help does not.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "eagle3lab.decoder.faults": ("FAULTS", "FaultError", "FaultPlan", "build_engine", "domain_shift_texts",
                                "normalize_faults", "plan_faults"),
    "eagle3lab.decoder.labbench": ("LabBenchResult", "bench_prompts", "make_lab_engine", "run_bench",
                                  "steps_frame", "tokens_frame"),
    "eagle3lab.decoder.forward": ("DraftModel", "TargetModel", "fake_quantize_"),
    "eagle3lab.decoder.speculate": ("DraftTree", "Generation", "SamplingParams", "SpecEngine", "StepRecord",
                                   "accept_path", "target_probs"),
    "eagle3lab.spec": ("SpecParams",),
}
_WHERE = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = sorted(_WHERE)


def __getattr__(name: str):
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'eagle3lab.decoder' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value

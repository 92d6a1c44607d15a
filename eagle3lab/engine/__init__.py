"""The lab's EAGLE-3 speculative decoder, its fault switches, the lab bench and the lab's
SGLang-style HTTP front end (`eagle3lab.engines.lab.frontend`).

    from eagle3lab.lab import load_lab
    from eagle3lab.engine import run_bench, make_lab_engine

    lab = load_lab("ci")
    result = run_bench(lab, spec=(3, 1, 4), faults=["wiring-seed"])
    result.summary(); result.steps; result.tokens

The lab engine's room: the decoder, its models (the lab's EAGLE-3 draft, `draft`, lives here so
both the engine and the lab import it downward), faults and the bench. May import: spec,
errors, conventions, analysis, sources, engines (never lab/, server or above).
"""

from __future__ import annotations

from eagle3lab.engine.faults import (FAULTS, FaultError, FaultPlan, build_engine, domain_shift_texts,
                                     normalize_faults, plan_faults)
from eagle3lab.engine.labbench import (LabBenchResult, bench_prompts, make_lab_engine, run_bench,
                                       steps_frame, tokens_frame)
from eagle3lab.engine.model import DraftModel, TargetModel, fake_quantize_
from eagle3lab.engine.speculate import (DraftTree, Generation, SamplingParams, SpecEngine, StepRecord,
                                        accept_path, target_probs)
from eagle3lab.spec import SpecParams

__all__ = ["DraftModel", "DraftTree", "FAULTS", "FaultError", "FaultPlan", "Generation",
           "LabBenchResult", "SamplingParams", "SpecEngine", "SpecParams", "StepRecord", "TargetModel",
           "accept_path", "bench_prompts", "build_engine", "domain_shift_texts", "fake_quantize_",
           "make_lab_engine", "normalize_faults", "plan_faults", "run_bench", "steps_frame",
           "target_probs", "tokens_frame"]

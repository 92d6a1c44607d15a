"""The lab's EAGLE-3 speculative decoder, its fault switches, benchmark and SGLang-style server.

    from eagle3lab.lab import load_lab
    from eagle3lab.engine import run_bench, make_lab_engine

    lab = load_lab("ci")
    result = run_bench(lab, spec=(3, 1, 4), faults=["wiring-seed"])
    result.summary(); result.steps; result.tokens

Heavy modules load on first attribute access.
"""

from __future__ import annotations

_EXPORTS = {
    "TargetModel": "model", "DraftModel": "model", "fake_quantize_": "model",
    "SpecEngine": "speculate", "SpecParams": "speculate", "SamplingParams": "speculate",
    "Generation": "speculate", "StepRecord": "speculate", "DraftTree": "speculate",
    "accept_path": "speculate", "target_probs": "speculate",
    "FAULTS": "faults", "FaultPlan": "faults", "FaultError": "faults", "plan_faults": "faults",
    "normalize_faults": "faults", "build_engine": "faults", "domain_shift_texts": "faults",
    "run_bench": "bench", "BenchResult": "bench", "make_lab_engine": "bench",
    "bench_prompts": "bench", "steps_frame": "bench", "tokens_frame": "bench",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(f"eagle3lab.engine.{_EXPORTS[name]}"), name)
    raise AttributeError(name)

"""The lab engine's step records as an `Observation`: accept length and conditional
per-position acceptance from the per-step accepted counts (the only source that sees every
verify step), with intervals over prompts, throughput and measured costs."""

from __future__ import annotations

from eagle3lab.acceptance import stats
from eagle3lab.sources.observation import STEP_RECORDS, Observation


def observe_lab(result, requested=None, warnings=()) -> Observation:
    """A `LabBenchResult` (eagle3lab.decoder.labbench) as an Observation; `requested`: the
    SpecConfig asked for, when it was resolved into `result.spec`."""
    steps, spec = result.steps, result.spec
    effective = {"num_steps": spec.num_steps, "topk": spec.topk, "num_draft_tokens": spec.num_draft_tokens}
    asked = {} if requested is None else {k: getattr(requested, k) for k in effective
                                          if getattr(requested, k) is not None}
    if not len(steps):
        return Observation(source=STEP_RECORDS, engine="eagle3lab", effective=effective, requested=asked,
                           n_steps=0, n_requests=len(result.requests), warnings=list(warnings))
    return Observation(
        source=STEP_RECORDS, engine="eagle3lab", effective=effective, requested=asked,
        accept_length=stats.accept_length(steps),
        accept_length_ci95=stats.accept_length_ci(steps),
        per_position=stats.per_position(steps, k=spec.num_steps, conditional=True, n_boot=500),
        conditional=True, tokens_per_s=result.tokens_per_s, costs=result.costs,
        n_steps=len(steps), n_requests=len(result.requests), warnings=list(warnings), frame=steps)

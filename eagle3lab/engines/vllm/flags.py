"""vLLM's speculative config in SGLang's terms, and the `vllm serve` flags for a SpecConfig.

`resolve_vllm` is the version-free chain rule (k drafts -> (k, 1, k + 1)) that
`SpecConfig.resolve(engine="vllm")` uses; `eagle3lab.engines.vllm.vllm_rules.resolve_vllm_serve`
replays vLLM 0.32's own argument handling for whole `vllm serve` flag sets. Both take k's
refusals from one rule, `speculative_tokens_refusal` (checked against vLLM's own through
`resolve_vllm_serve`).
"""

from __future__ import annotations

import json

from eagle3lab.errors import EagleLabError
from eagle3lab.spec import SPEC_KEYS, ResolvedSpec, SpecConfig, chain, record_changes

VLLM_SOURCE = ("vllm/config/speculative.py (SpeculativeConfig.num_speculative_tokens, gt=0, "
               "else taken from the draft config) and the EAGLE proposer "
               "(vllm/v1/spec_decode/eagle.py, later llm_base_proposer.py): one draft token, "
               "then `for _ in range(self.num_speculative_tokens - 1)`, a chain")


def speculative_tokens_refusal(k, *, given: bool = True) -> tuple[str, str] | None:
    """vLLM's rule for num_speculative_tokens, the one both resolvers apply (`resolve_vllm`
    for a SpecConfig, `rules.resolve_vllm_serve` for a flag set): (error kind, vLLM's message) when it
    refuses, else None. config/speculative.py: an integer field, gt=0; required with a draft
    model (unless the draft config has n_predict, not modelled). `given=False`: the value was
    never set (its absence is checked after the model and method, as vLLM orders it)."""
    kind = "ValidationError(SpeculativeConfig)"
    if k is None:
        return None if given else (kind, "A speculative model was provided, but `num_speculative_tokens` "
                                         "was not provided")
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        return kind, f"num_speculative_tokens must be an integer >= 1, got {k!r}"
    return None


def resolve_vllm(spec: SpecConfig, version: str = "main",
                 arch: str = "LlamaForCausalLM") -> ResolvedSpec:
    """vLLM: num_speculative_tokens = k drafts per step, drafted as a chain (no topk tree).

    Reported in SGLang's terms: num_steps = k, topk = 1, num_draft_tokens = k + 1 (the
    verify width: k drafts plus the root). Source: VLLM_SOURCE (vllm main, read via search).
    For `vllm serve` flags (method guess, draft max length, batch budget, refusals) see
    `eagle3lab.engines.vllm.vllm_rules.resolve_vllm_serve`, checked against vLLM 0.32.0's own EngineArgs.
    """
    k = spec.num_steps
    if k is None and spec.num_draft_tokens is not None:
        k = spec.num_draft_tokens - 1
    res = ResolvedSpec(engine="vllm", version=version, arch=arch, algorithm=spec.algorithm,
                       **dict(zip(SPEC_KEYS, chain(k) if k is not None else (None, 1, None))),
                       page_size=spec.page_size, attention_backend=spec.attention_backend,
                       max_running_requests=spec.max_running_requests,
                       cuda_graph_max_bs=spec.cuda_graph_max_bs, asked=spec,
                       notes=[f"rules: {VLLM_SOURCE}",
                              "num_speculative_tokens = num_steps; reported as SGLang's "
                              "num_draft_tokens = k + 1 (k drafts + the verified root)"])
    refusal = speculative_tokens_refusal(k) or speculative_tokens_refusal(k, given=False)
    if refusal:
        res.error = ": ".join(refusal)
        return res
    return record_changes(res, spec)


# ----------------------------------------------------------------------------- vLLM launch flags
# (eagle3lab.serving.server.launch(backend="vllm") builds `python -m vllm.entrypoints.openai.api_server`
# from these; the CPU settings it adds when no GPU is present live in eagle3lab.serving.server.)

VLLM_METHODS = {"EAGLE3": "eagle3", "EAGLE": "eagle"}
# SpecConfig fields with a vLLM serve flag; the others have no counterpart there.
_VLLM_FIELD_FLAGS = {"max_running_requests": "--max-num-seqs"}
_VLLM_NO_COUNTERPART = ("page_size", "attention_backend", "cuda_graph_max_bs")


def vllm_speculative_config(spec: SpecConfig, draft_path=None) -> dict:
    """vLLM's ``--speculative-config`` for a spec: method, draft model, k drafts per step.

    k = num_steps (else num_draft_tokens - 1), as `resolve_vllm` models it; vLLM drafts a
    chain, so topk > 1 cannot be served (an error here, a warning in `lint`).
    """
    method = VLLM_METHODS.get(spec.algorithm)
    if method is None:
        raise EagleLabError(f"algorithm {spec.algorithm} has no vLLM method here; use "
                            f"{' or '.join(VLLM_METHODS)}")
    if spec.topk is not None and spec.topk > 1:
        raise EagleLabError(f"topk={spec.topk}: vLLM's EAGLE-3 drafts a chain (topk 1); "
                            "give num_steps (num_speculative_tokens) only")
    res = resolve_vllm(spec)
    if res.error:
        raise EagleLabError(f"vLLM refuses this configuration: {res.error}")
    draft = draft_path if draft_path is not None else spec.draft_model_path
    if draft is None:
        raise EagleLabError("vLLM's EAGLE-3 needs a draft model (draft_path)")
    return {"method": method, "model": str(draft), "num_speculative_tokens": res.num_steps}


def to_vllm_flags(spec: SpecConfig, draft_path=None) -> list[str]:
    """`vllm serve` flags for a spec (without model, host, port): the speculative config and
    the fields that have a vLLM flag; a set field without a vLLM counterpart is an error."""
    unmapped = [f for f in _VLLM_NO_COUNTERPART if getattr(spec, f) is not None]
    if spec.disable_overlap_schedule:
        unmapped.append("disable_overlap_schedule")
    if unmapped:
        raise EagleLabError(f"{', '.join(unmapped)}: SGLang settings with no vLLM flag here; "
                            "pass vLLM's own flags as extra arguments instead")
    flags = ["--speculative-config", json.dumps(vllm_speculative_config(spec, draft_path))]
    for name, flag in _VLLM_FIELD_FLAGS.items():
        if getattr(spec, name) is not None:
            flags += [flag, str(getattr(spec, name))]
    return flags



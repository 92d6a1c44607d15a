"""SGLang's capture rule: which boundaries each srt/models/<file>.py feeds the draft for its
layer ids, per version (`serve`), read in the PyPI wheels (unpacked). With eagle3lab's
embedding-capture patch (`eagle3lab.wiring.patching`), id -1 feeds the embedding in PATCHED_FILES.
Where SGLang would not feed one tensor per id, `serve` raises `CaptureError` saying what SGLang
does (crash, or silently feed fewer tensors) and for which versions.

SOURCES: every rule below, where it was read. "sglang X" = the PyPI wheel, unpacked.

| Rule | Source (file, versions) |
|---|---|
| llama setter: no args, default [2, N//2, N-3] | sglang 0.4.6 srt/models/llama.py:639 (0.4.4.post2-0.4.8.post1, every release read) |
| config ids read from draft `eagle_config.eagle_aux_hidden_state_layer_ids` | sglang 0.4.9 model_executor/model_runner.py:341; 0.5.23 model_runner_components/attention_backend_setup.py:61 |
| CUDA-graph runner resets ids to the default (0.4.9-0.5.10) | sglang 0.4.9 cuda_graph_runner.py:298, 0.5.4 :333, 0.5.5 :336, 0.5.10 :648; absent in 0.5.11 and 0.5.12 |
| llama/qwen2/qwen3/qwen*_moe: ids -> [id + 1] | sglang 0.4.9 llama.py:700, 0.5.23 llama.py:929-941, qwen2.py:781-794, qwen3.py:778-791 |
| qwen2 setter only from 0.5.2; qwen3, qwen3_moe from 0.4.9; qwen2_moe from 0.5.2 | sglang 0.4.9 / 0.5.0rc2 / 0.5.2 qwen2.py, qwen3.py:461, qwen3_moe.py:759, qwen2_moe.py:758 |
| llama capture `hidden_states + residual` before layer i, no None guard (b=0 -> TypeError) | sglang 0.4.6-0.5.21 llama.py (0.5.21 :440-441) |
| llama b=0 works (layer-boundary capture_output) | sglang 0.5.22, 0.5.23 llama.py:485-494 |
| qwen2/qwen3 capture guarded `if residual is not None` (b=0 = embedding) | sglang 0.4.9 qwen2.py:329-332, 0.5.4 qwen2.py:335-338 |
| qwen*_moe 0.5.5+: `self.layers[layer_id]` marks the layer (b=N -> IndexError) | sglang 0.5.5 qwen2_moe.py:562-565 |
| deepseek_v2 (V2/V3/V3.2, Kimi K2) setter from 0.5.4.post2, ids -> [id + 1] | sglang 0.5.5 deepseek_v2.py:3822, 0.5.12 :2529-2541; first in 0.5.4.post2 (every release read) |
| deepseek_v2 0.5.13+: `if layer_ids[0] == 1: id + 1 else raw` | sglang 0.5.13 deepseek_v2.py:2740, 0.5.23 :3458-3473 |
| deepseek_v2 capture unguarded before layer i (b=0 -> TypeError) up to 0.5.13 | sglang 0.5.12 deepseek_v2.py:2275-2282, 0.5.13 :2446 |
| deepseek_v2 0.5.14+: capture inside the layer communicator, b=0 = embedding | sglang 0.5.14 deepseek_v2.py:2502 |
| deepseek_v2 0.5.17+: AuxHiddenStatePacker(len(layers_to_capture)).finalize raises on a short count | sglang 0.5.17 deepseek_v2.py:2804, 0.5.23 layers/aux_hidden_states.py:84-89 |
| Kimi K2.5 delegates to its deepseek_v2 language_model (file from 0.5.9, setter from 0.5.10) | sglang 0.5.9 kimi_k25.py (no setter), 0.5.10 kimi_k25.py:841-850, 0.5.23 :928-940 |
| gpt_oss setter from 0.5.0rc2, ids -> [id + 1], capture unguarded before layer i | sglang 0.5.0rc2 gpt_oss.py:1175, 0.5.16 :692-693 |
| gpt_oss 0.5.17+: `if max(ids) == N: raw else id + 1`; b=0 and pre-norm b=N captured | sglang 0.5.17 gpt_oss.py:726-739, 0.5.23 :1337-1352 |
| capture order = ascending layer order, a repeated boundary captured once | the `for i in range(...): if i in layers_to_capture` loops above |
| llama_eagle3 fc width = len(ids) * target hidden | sglang 0.5.23 models/llama_eagle3.py:151-165 |
"""

from __future__ import annotations

from dataclasses import dataclass

from eagle3lab.wiring.boundaries import (Boundaries, CaptureError, ConventionError, as_version, between, check_version,
                                  default_boundaries)
from eagle3lab.spec import SGLANG_CAPTURE_READ

SGLANG_VERSIONS = SGLANG_CAPTURE_READ  # eagle3lab.spec: the one SGLang version list

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
    SglangCapture("llama", "0.4.4.post2", no_embedding=_LLAMA_B0,
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
    SglangCapture("deepseek_v2", "0.5.4.post2", no_embedding=_DSV2_B0,
                  source="sglang 0.5.4.post2 deepseek_v2.py (first setter, release reading), 0.5.5 :3822, "
                         "0.5.12 :2529-2541, :2275-2282"),
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
    rows = [r for r in SGLANG_CAPTURE if r.file == file and as_version(r.since) <= v]
    return rows[-1]


def sglang_model_file(arch: str) -> str:
    """srt/models/<file>.py that serves `arch` (kimi_k25 delegates to deepseek_v2)."""
    try:
        return SGLANG_FILES[arch]
    except KeyError:
        raise ConventionError(f"no SGLang capture rule recorded for architecture {arch!r}; "
                              f"known: {', '.join(sorted(SGLANG_FILES))}") from None


def model_path(arch: str) -> str:
    """The file, in SGLang's package, whose rule serves `arch` (for tables)."""
    return f"srt/models/{sglang_model_file(arch)}.py"


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


def serve(version, arch, ids, n, key, cuda_graph, patched) -> Boundaries:
    """What SGLang `version` feeds for validated `ids` on an `n`-layer `arch` (ids from `key`)."""
    v = check_version("sglang", version, SGLANG_VERSIONS)
    file = sglang_model_file(arch)
    src = f"sglang {version} srt/models/{file}.py"
    since = SGLANG_SETTER_SINCE[file]
    if v < as_version(since):
        raise CaptureError(
            f"sglang {version} cannot serve an EAGLE-3 draft on {arch}: {file}.py has no "
            f"set_eagle3_layers_to_capture before {since} (AttributeError at startup)", "crash",
            short="no EAGLE-3 setter")
    warnings: list[str] = []
    default = default_boundaries(n)

    def fed_default():  # the default goes through the same capture loop: below 8 layers it repeats a boundary
        return _sglang_capture(file, v, version, "none (default)", default, n, "default", patched)

    if v < as_version(SGLANG_READS_IDS_SINCE):
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
    if cuda_graph and between(v, *SGLANG_CUDA_GRAPH_RESET) and fed != default:
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


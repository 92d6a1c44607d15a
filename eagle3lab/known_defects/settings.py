"""The settings registry rows test, and where the doctor reads them: a launch command
(`settings_from_flags`) and the draft checkpoint (`draft_settings`).

Why: a row applies only under its flags or checkpoint (a platform, temperature > 0, CUDA graphs,
a draft config key); a setting the caller does not know is named in the finding ("applies if
..."), never guessed. Flag defaults are taken only where the source was read (docs/sources.md).
"""

from __future__ import annotations

import shlex

from eagle3lab import engines
from eagle3lab.errors import EagleLabError
from eagle3lab.known_defects.row import Condition, KnownDefectError

SETTINGS = ("temperature", "topk", "cuda_graph", "cuda_graph_max_bs", "max_running_requests",
            "model_runner_v2", "custom_aux_ids", "rejection_sampling", "target_arch", "norm_before_fc",
            "draft_layer_type", "draft_sliding_window", "pd_disaggregation", "spec_v2", "prefix_caching",
            "v0_engine")


def _temperature_positive(t) -> bool:
    return t > 0


T_POSITIVE = Condition("temperature", _temperature_positive, "requests sample (temperature > 0)")
GRAPHS_ON = Condition("cuda_graph", bool, "CUDA graphs are on (no --disable-cuda-graph)")
CUSTOM_IDS = Condition("custom_aux_ids", bool,
                       "the draft's aux layer ids feed other boundaries than the default [2, N//2, N-3]")
TREE = Condition("topk", lambda k: k > 1, "the draft is a tree (speculative_eagle_topk > 1)")
MRV2 = Condition("model_runner_v2", bool, "Model Runner V2 is on (VLLM_USE_V2_MODEL_RUNNER=1)")
NO_REJECTION = Condition("rejection_sampling", lambda on: not on,
                         "rejection sampling is off (no --speculative-use-rejection-sampling)")
GRAPH_TRAP = Condition("cuda_graph_max_bs_below_running", bool,
                       "--cuda-graph-max-bs is below the running batch (--max-running-requests)")
NORM_BEFORE_FC = Condition("norm_before_fc", bool, "the draft config sets norm_before_fc: true")
PD = Condition("pd_disaggregation", bool, "prefill and decode run disaggregated (--disaggregation-mode)")
SPEC_V2 = Condition("spec_v2", bool, "SGLang runs spec v2 (the default from 0.5.11; SGLANG_ENABLE_SPEC_V2=1 before)")
PREFIX_CACHING = Condition("prefix_caching", bool, "prefix caching is on (--enable-prefix-caching)")
V0_ENGINE = Condition("v0_engine", bool, "vLLM's V0 engine serves the draft (VLLM_USE_V1=0; V1's EAGLE "
                      "proposer, v1/spec_decode/eagle.py, first ships in 0.8.3)")
DRAFT_QWEN3 = Condition("draft_layer_type", lambda t: t == "qwen3",
                        "the draft's decoder layer is Qwen3 (vLLM's qwen3_eagle3.py: Eagle3Qwen3ForCausalLM)")
DRAFT_SLIDING = Condition("draft_sliding_window", bool,
                          "the draft config has sliding_attention layers (layer_types, sliding_window)")


def target_is(*archs: str) -> Condition:
    """The target's architecture is one of `archs` (from --target or the draft's provenance)."""
    return Condition("target_arch", lambda a: a in archs, f"the target is {' or '.join(archs)}")


def _truthy(value: str) -> bool:
    return value.strip().lower() in ("1", "true", "yes")


_ENV = {"VLLM_USE_V2_MODEL_RUNNER": ("model_runner_v2", _truthy),
        "SGLANG_ENABLE_SPEC_V2": ("spec_v2", _truthy),
        "VLLM_USE_V1": ("v0_engine", lambda v: not _truthy(v))}
_INTS = {"--speculative-eagle-topk": "topk", "--cuda-graph-max-bs": "cuda_graph_max_bs",
         "--cuda-graph-max-bs-decode": "cuda_graph_max_bs", "--max-running-requests": "max_running_requests",
         "--max-num-seqs": "max_running_requests"}


def settings_from_flags(flags: str | None, engine: str | None = None, version: str | None = None) -> dict:
    """The settings rows test, read from a launch command (flags the registry does not need are
    skipped; env assignments like VLLM_USE_V2_MODEL_RUNNER=1 before the command count). A flag
    not given is left out (unknown), except the switches that are off unless given."""
    if not flags:
        return {}
    try:
        tokens = shlex.split(flags)
    except ValueError as exc:
        raise KnownDefectError(f"--flags cannot be split into arguments: {exc}") from None
    out: dict = {}
    values = _flag_values(tokens)
    for env in (t for t in tokens if "=" in t and not t.startswith("-")):
        name, _, value = env.partition("=")
        if name in _ENV:
            key, read = _ENV[name]
            out[key] = read(value)
    for flag, key in _INTS.items():
        if flag in values:
            try:
                out[key] = int(values[flag])
            except (TypeError, ValueError):
                raise KnownDefectError(f"{flag} takes a whole number, got {values[flag]!r}") from None
    if getattr(engines.lookup(engine), "drafts_chains_only", False) and any(t.startswith("--speculative") for t in tokens):
        out["topk"] = 1  # vLLM's EAGLE proposer drafts a chain (docs/sources.md)
    out["cuda_graph"] = not ({"--disable-cuda-graph", "--enforce-eager"} & set(values))
    mode = (values.get("--disaggregation-mode") or "null").strip().lower()
    out["rejection_sampling"] = "--speculative-use-rejection-sampling" in values
    out["pd_disaggregation"] = mode in ("prefill", "decode")
    if "--enable-prefix-caching" in values or "--no-enable-prefix-caching" in values:
        out["prefix_caching"] = "--enable-prefix-caching" in values
    hook = getattr(engines.lookup(engine), "defect_flags", None)
    if hook is not None and version:
        for key, value in hook(values, version).items():
            if key not in out or (key == "rejection_sampling" and value):
                out[key] = value
    if getattr(engines.lookup(engine), "rules_by_version", False) and version:
        out.update({k: v for k, v in _resolved(engine, flags, version).items() if k not in out})
    return out


def _flag_values(tokens) -> dict:
    """--flag value / --flag=value / --switch (value None), flags spelled with '-' not '_'."""
    values, i = {}, 0
    while i < len(tokens):
        tok = tokens[i]
        i += 1
        if not tok.startswith("--"):
            continue
        flag, eq, inline = tok.partition("=")
        flag = flag.replace("_", "-")
        if eq:
            values[flag] = inline
        elif i < len(tokens) and not tokens[i].startswith("--"):
            values[flag] = tokens[i]
            i += 1
        else:
            values[flag] = None
    return values


def _resolved(engine: str, flags: str, version: str) -> dict:
    """topk and max running requests as `engine` `version` resolves them (eagle3lab.engines.effective's
    rules; SGLang's: an automatic topk, max running requests reset to 48 for speculation); {}
    when the flags do not resolve (the doctor's flags check says why)."""
    from eagle3lab.spec import SpecConfig

    try:
        res = SpecConfig.from_cli(flags).resolve(f"{engine}=={version}")
    except EagleLabError:
        return {}
    return {k: v for k, v in (("topk", res.topk), ("max_running_requests", res.max_running_requests))
            if isinstance(v, int)}


def draft_settings(config: dict, layer_config: dict | None = None) -> dict:
    """The settings a draft checkpoint's config.json tells: norm_before_fc (top level or in
    eagle_config, as sglang 0.5.17 llama_eagle3.py:165-166 reads it), the decoder layer's type
    and whether it has sliding-window layers (vllm 0.26.0 qwen3_eagle3.py:46-54 reads layer_types
    and sliding_window; speculators configs keep them in transformer_layer_config)."""
    layer = layer_config or config.get("transformer_layer_config") or config
    eagle = config.get("eagle_config") if isinstance(config.get("eagle_config"), dict) else {}
    norm = eagle.get("norm_before_fc", config.get("norm_before_fc", False))
    archs = " ".join(str(a) for a in (config.get("architectures") or []) + (layer.get("architectures") or []))
    kind = "qwen3" if "Qwen3" in archs or layer.get("model_type") == "qwen3" else layer.get("model_type")
    types = layer.get("layer_types") or config.get("layer_types") or []
    window = layer.get("sliding_window", config.get("sliding_window"))
    return {"norm_before_fc": bool(norm), "draft_layer_type": kind,
            "draft_sliding_window": bool(window) and "sliding_attention" in types}


def derived_settings(settings: dict) -> dict:
    """Settings computed from others (the graph trap's comparison)."""
    out = dict(settings)
    bs, running = settings.get("cuda_graph_max_bs"), settings.get("max_running_requests")
    out["cuda_graph_max_bs_below_running"] = None if bs is None or running is None else bs < running
    return out

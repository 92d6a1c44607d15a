"""A model's shape as the step-cost model needs it, read from its `config.json` by each family's
own field names: what a forward reads at batch 1, part by part, and at how many bits.

Why by family: the same quantity has a different name in every family (routed experts are
`num_experts` in Qwen3-MoE, `num_local_experts` in Mixtral and gpt-oss, `n_routed_experts` in
DeepSeek-V2/V3 and Kimi), and a guess from a similar-looking field would silently price the wrong
model. An architecture not in `FAMILIES` is a one-line error naming the fields a reader needs.

A forward over n tokens at batch 1 reads every weight of the parts in `ModelShape.flat` once (the
attention and its MLA projections, dense MLPs, shared experts, routers, the LM head; a draft's
`fc` is read once per speculative step) and, in each MoE layer, the union of the experts the n
tokens route to (`archcost` prices that union). The embedding lookup reads n rows (kilobytes: left
out) and the KV cache `kv_bytes_per_token` per context token.

Weight bits per part come from the config's `quantization_config` (compressed-tensors with its
`ignore` list, fp8 blocks, mxfp4 with `modules_to_not_convert`, awq/gptq groups) or from the
user (`bits=`); otherwise from the config's dtype. Statistics layer: imports `errors`, `paths`.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from eagle3lab.errors import EagleLabError
from eagle3lab.paths import read_json_object

PARTS = ("attention", "dense_mlp", "shared_experts", "routed_experts", "router", "lm_head", "fc")
PART_ALIASES = {"mlp": "dense_mlp", "shared": "shared_experts", "experts": "routed_experts",
                "head": "lm_head", "attn": "attention"}
DTYPE_BITS = {"bfloat16": 16, "float16": 16, "half": 16, "float32": 32, "float": 32, "float8_e4m3fn": 8}
DEFAULT_DRAFT_VOCAB = 32000  # SpecForge's usual draft vocabulary, and the measured draft's (data/cost)


class ConfigError(EagleLabError):
    """A config the cost model cannot read: missing, garbled, or of an unknown architecture."""


@dataclass(frozen=True)
class ModelShape:
    """What one forward at batch 1 reads, in parameters per part and bits per parameter.

    flat: parameters read once per forward whatever the tokens (all layers summed), by part;
    moe_layers, experts, active, expert_params: the routed experts (params of one expert);
    kv_bytes_per_token: KV cache bytes per context token, all layers; layers: decoder layers (a
    forward's fixed time scales with them); fc: a draft's fusion layer, read once per speculative
    step (0 for a target); read_from: which config field gave each quantity."""

    name: str
    architecture: str
    family: str
    hidden: int
    layers: int
    vocab: int
    flat: dict
    bits: dict
    moe_layers: int = 0
    experts: int = 0
    active: int = 0
    expert_params: int = 0
    kv_bytes_per_token: float = 0.0
    mtp_layers: int = 0
    role: str = "target"
    read_from: dict = field(default_factory=dict)
    notes: tuple = ()

    @property
    def is_moe(self) -> bool:
        return self.moe_layers > 0 and self.experts > self.active > 0

    def flat_bytes(self) -> float:
        """Bytes of the parts read once per forward (the fc is counted by the step, not here)."""
        return sum(p * self.bits[part] / 8 for part, p in self.flat.items() if part != "fc")

    def expert_bytes(self) -> float:
        """Bytes of one routed expert in one layer."""
        return self.expert_params * self.bits.get("routed_experts", 16) / 8

    def fc_bytes(self) -> float:
        return self.flat.get("fc", 0) * self.bits.get("fc", 16) / 8

    def total_params(self) -> float:
        """Every parameter the shape holds (all experts), embedding and vision tower left out."""
        return sum(self.flat.values()) + self.moe_layers * self.experts * self.expert_params

    def with_bits(self, overrides: dict | None) -> "ModelShape":
        """The same shape with some parts' bits set by the user (`parse_bits`)."""
        if not overrides:
            return self
        bits = dict(self.bits)
        bits.update(overrides)
        read = dict(self.read_from, bits="given by the user for " + ", ".join(sorted(overrides)))
        return replace(self, bits=bits, read_from=read)

    def with_vocab(self, vocab: int) -> "ModelShape":
        """A draft with another LM-head vocabulary (its draft vocabulary)."""
        flat = dict(self.flat, lm_head=self.hidden * int(vocab))
        return replace(self, vocab=int(vocab), flat=flat)

    def summary(self) -> dict:
        """Plain numbers for JSON and the CLI's header."""
        out = {"name": self.name, "architecture": self.architecture, "family": self.family,
               "role": self.role, "hidden": self.hidden, "layers": self.layers, "vocab": self.vocab,
               "bits": dict(self.bits), "params_read_per_forward": {k: int(v) for k, v in self.flat.items()}}
        if self.is_moe:
            out.update(moe_layers=self.moe_layers, experts=self.experts, active=self.active,
                       expert_params=self.expert_params)
        return out


# --------------------------------------------------------------------------- reading a file

def load_config(path, what: str = "config") -> dict:
    """A config.json as a dict: a one-line error when missing, a folder, not JSON, not an object."""
    return read_json_object(Path(path), what, ConfigError)


def read_target(path, bits: dict | None = None) -> ModelShape:
    """A target's shape from its config.json (a file path), with optional bits per part."""
    return target_shape(load_config(path, "target config"), name=Path(path).stem).with_bits(bits)


def read_draft(path, target: ModelShape, bits: dict | None = None) -> ModelShape:
    """A draft's shape from its config.json; `target` gives the width its fc layer reads."""
    return draft_shape(load_config(path, "draft config"), target, name=Path(path).stem).with_bits(bits)


def text_config(config: dict) -> tuple[dict, dict]:
    """(the language model's fields, the wrapper): a multimodal wrapper such as Kimi-K2.5's
    `KimiK25ForConditionalGeneration` nests its text model under `text_config`."""
    inner = config.get("text_config")
    if isinstance(inner, dict) and inner.get("hidden_size"):
        return inner, config
    return config, config


def _arch(config: dict) -> str:
    archs = config.get("architectures") or []
    return str(archs[0]) if archs else str(config.get("model_type") or "unknown")


def _field(cfg: dict, name: str, arch: str, why: str, *aliases, default=None):
    """One field by its own name (or a documented alias); a one-line error naming it if absent."""
    for key in (name, *aliases):
        if cfg.get(key) is not None:
            return cfg[key]
    if default is not None:
        return default
    raise ConfigError(f"the {arch} config has no {name}" + (f" (nor {', '.join(aliases)})" if aliases else "")
                      + f": {why}")


def _int(cfg, name, arch, why, *aliases, default=None) -> int:
    value = _field(cfg, name, arch, why, *aliases, default=default)
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ConfigError(f"the {arch} config's {name} is {value!r}, not a whole number") from None


# --------------------------------------------------------------------------- attention

def gqa_attention(cfg: dict, arch: str) -> tuple[int, float, dict]:
    """(params of one layer's q/k/v/o projections, KV bytes per token per layer, fields read)."""
    h = _int(cfg, "hidden_size", arch, "the model width")
    heads = _int(cfg, "num_attention_heads", arch, "attention heads")
    kv = _int(cfg, "num_key_value_heads", arch, "KV heads", default=heads)
    hd = _int(cfg, "head_dim", arch, "head width", default=h // heads)
    params = h * heads * hd + 2 * h * kv * hd + heads * hd * h
    return params, 2 * kv * hd * 2.0, {"attention": "num_attention_heads, num_key_value_heads, head_dim"}


def mla_attention(cfg: dict, arch: str) -> tuple[int, float, dict]:
    """Multi-head latent attention (DeepSeek-V2/V3, Kimi): q through q_lora_rank (or direct),
    kv through kv_lora_rank; the cache holds the latent and the rope key per token."""
    h = _int(cfg, "hidden_size", arch, "the model width")
    heads = _int(cfg, "num_attention_heads", arch, "attention heads")
    kv_rank = _int(cfg, "kv_lora_rank", arch, "MLA's compressed KV width")
    nope = _int(cfg, "qk_nope_head_dim", arch, "MLA's non-rotary query/key width")
    rope = _int(cfg, "qk_rope_head_dim", arch, "MLA's rotary key width")
    v = _int(cfg, "v_head_dim", arch, "MLA's value width")
    q_rank = cfg.get("q_lora_rank")
    q = h * q_rank + q_rank * heads * (nope + rope) if q_rank else h * heads * (nope + rope)
    params = q + h * (kv_rank + rope) + kv_rank * heads * (nope + v) + heads * v * h
    return params, (kv_rank + rope) * 2.0, {"attention": "q_lora_rank, kv_lora_rank, qk_nope_head_dim, "
                                                         "qk_rope_head_dim, v_head_dim (MLA)"}


# --------------------------------------------------------------------------- the families

def _dense(cfg: dict, arch: str) -> dict:
    """Llama, Qwen3, Mistral, Qwen2: every layer attention + one SwiGLU MLP."""
    h = _int(cfg, "hidden_size", arch, "the model width")
    layers = _int(cfg, "num_hidden_layers", arch, "decoder layers")
    attn, kv, read = gqa_attention(cfg, arch)
    inter = _int(cfg, "intermediate_size", arch, "the MLP width")
    return dict(layers=layers, attention=layers * attn, dense_mlp=layers * 3 * h * inter, kv=layers * kv,
                read=dict(read, dense_mlp="intermediate_size"))


def _qwen3_moe(cfg: dict, arch: str) -> dict:
    """Qwen3-MoE (and Qwen2-MoE): MoE every `decoder_sparse_step` layers except `mlp_only_layers`."""
    base = _dense_attention_only(cfg, arch)
    layers, h = base["layers"], _int(cfg, "hidden_size", arch, "the model width")
    step = _int(cfg, "decoder_sparse_step", arch, "MoE layer spacing", default=1)
    only = set(cfg.get("mlp_only_layers") or [])
    moe = [i for i in range(layers) if i not in only and (i + 1) % max(step, 1) == 0]
    inter = _int(cfg, "intermediate_size", arch, "the dense MLP width", default=0)
    shared_w = _int(cfg, "shared_expert_intermediate_size", arch, "", default=0)
    return dict(base, moe_layers=len(moe), dense_mlp=(layers - len(moe)) * 3 * h * inter,
                experts=_int(cfg, "num_experts", arch, "routed experts per MoE layer", "num_local_experts"),
                active=_int(cfg, "num_experts_per_tok", arch, "experts each token routes to"),
                expert_params=3 * h * _int(cfg, "moe_intermediate_size", arch, "one expert's width"),
                shared_experts=len(moe) * 3 * h * shared_w,
                read=dict(base["read"], experts="num_experts, num_experts_per_tok, moe_intermediate_size, "
                                                "decoder_sparse_step, mlp_only_layers"))


def _mixtral(cfg: dict, arch: str) -> dict:
    """Mixtral: every layer MoE; an expert is as wide as `intermediate_size`."""
    base = _dense_attention_only(cfg, arch)
    h = _int(cfg, "hidden_size", arch, "the model width")
    return dict(base, moe_layers=base["layers"],
                experts=_int(cfg, "num_local_experts", arch, "routed experts per layer"),
                active=_int(cfg, "num_experts_per_tok", arch, "experts each token routes to"),
                expert_params=3 * h * _int(cfg, "intermediate_size", arch, "one expert's width"),
                read=dict(base["read"], experts="num_local_experts, num_experts_per_tok, intermediate_size"))


def _gpt_oss(cfg: dict, arch: str) -> dict:
    """gpt-oss: every layer MoE (fused gate_up + down per expert, `intermediate_size` wide);
    sliding-window layers cache at most `sliding_window` tokens."""
    base = _mixtral(dict(cfg, num_experts_per_tok=cfg.get("num_experts_per_tok", cfg.get("experts_per_token"))),
                     arch)
    kinds = cfg.get("layer_types") or []
    base["sliding_layers"] = sum(1 for t in kinds if t == "sliding_attention")
    base["sliding_window"] = int(cfg.get("sliding_window") or 0)
    base["read"]["experts"] = "num_local_experts, num_experts_per_tok (or experts_per_token), intermediate_size"
    return base


def _deepseek(cfg: dict, arch: str) -> dict:
    """DeepSeek-V2/V3 and Kimi-K2/K2.5: MLA attention; the first `first_k_dense_replace` layers
    dense, then MoE every `moe_layer_freq` layers, each with `n_shared_experts` shared experts."""
    h = _int(cfg, "hidden_size", arch, "the model width")
    layers = _int(cfg, "num_hidden_layers", arch, "decoder layers")
    attn, kv, read = mla_attention(cfg, arch)
    first = _int(cfg, "first_k_dense_replace", arch, "dense layers before the MoE ones", default=0)
    freq = _int(cfg, "moe_layer_freq", arch, "MoE layer spacing", default=1)
    moe = sum(1 for i in range(first, layers) if i % max(freq, 1) == 0)
    width = _int(cfg, "moe_intermediate_size", arch, "one expert's width")
    shared = _int(cfg, "n_shared_experts", arch, "shared experts per MoE layer", default=0)
    inter = _int(cfg, "intermediate_size", arch, "the dense layers' MLP width")
    return dict(layers=layers, attention=layers * attn, kv=layers * kv, moe_layers=moe,
                dense_mlp=(layers - moe) * 3 * h * inter, shared_experts=moe * shared * 3 * h * width,
                experts=_int(cfg, "n_routed_experts", arch, "routed experts per MoE layer"),
                active=_int(cfg, "num_experts_per_tok", arch, "experts each token routes to"),
                expert_params=3 * h * width, mtp_layers=int(cfg.get("num_nextn_predict_layers") or 0),
                read=dict(read, experts="n_routed_experts, num_experts_per_tok, moe_intermediate_size, "
                                        "n_shared_experts, first_k_dense_replace, moe_layer_freq"))


def _dense_attention_only(cfg: dict, arch: str) -> dict:
    layers = _int(cfg, "num_hidden_layers", arch, "decoder layers")
    attn, kv, read = gqa_attention(cfg, arch)
    return dict(layers=layers, attention=layers * attn, kv=layers * kv, read=read)


# family name, reader, module names the quantization lists are matched against (HF naming)
FAMILIES = {
    "llama": (_dense, {"attention": "model.layers.0.self_attn.q_proj", "dense_mlp": "model.layers.0.mlp.gate_proj"}),
    "qwen3_moe": (_qwen3_moe, {"attention": "model.layers.0.self_attn.q_proj",
                               "dense_mlp": "model.layers.0.mlp.gate_proj",
                               "shared_experts": "model.layers.0.mlp.shared_expert.gate_proj",
                               "routed_experts": "model.layers.0.mlp.experts.0.gate_proj"}),
    "mixtral": (_mixtral, {"attention": "model.layers.0.self_attn.q_proj",
                           "routed_experts": "model.layers.0.block_sparse_moe.experts.0.w1"}),
    "deepseek": (_deepseek, {"attention": "model.layers.1.self_attn.q_a_proj",
                             "dense_mlp": "model.layers.0.mlp.gate_proj",
                             "shared_experts": "model.layers.1.mlp.shared_experts.gate_proj",
                             "routed_experts": "model.layers.1.mlp.experts.0.gate_proj"}),
    "gpt_oss": (_gpt_oss, {"attention": "model.layers.0.self_attn.q_proj",
                           "routed_experts": "model.layers.0.mlp.experts.gate_up_proj"}),
}
ARCHITECTURES = {
    "LlamaForCausalLM": "llama", "MistralForCausalLM": "llama", "Qwen2ForCausalLM": "llama",
    "Qwen3ForCausalLM": "llama", "Qwen3MoeForCausalLM": "qwen3_moe", "Qwen2MoeForCausalLM": "qwen3_moe",
    "MixtralForCausalLM": "mixtral", "DeepseekV2ForCausalLM": "deepseek", "DeepseekV3ForCausalLM": "deepseek",
    "KimiK25ForConditionalGeneration": "deepseek", "GptOssForCausalLM": "gpt_oss",
}
MODEL_TYPES = {"llama": "llama", "mistral": "llama", "qwen2": "llama", "qwen3": "llama", "qwen3_moe": "qwen3_moe",
               "qwen2_moe": "qwen3_moe", "mixtral": "mixtral", "deepseek_v2": "deepseek", "deepseek_v3": "deepseek",
               "kimi_k2": "deepseek", "kimi_k25": "deepseek", "gpt_oss": "gpt_oss"}
NEEDED = ("hidden_size, num_hidden_layers, num_attention_heads, num_key_value_heads, intermediate_size, "
          "vocab_size; for MoE: the routed experts, experts per token and expert width (n_routed_experts / "
          "num_experts / num_local_experts, num_experts_per_tok, moe_intermediate_size), shared experts and "
          "dense layers (n_shared_experts, first_k_dense_replace); for MLA: q_lora_rank, kv_lora_rank, "
          "qk_nope_head_dim, qk_rope_head_dim, v_head_dim")


def family_of(config: dict) -> str:
    """The family whose field names this config uses: by architecture, then model_type; an
    unknown one is a one-line error naming the fields a reader needs."""
    inner, outer = text_config(config)
    for cfg in (outer, inner):
        for arch in cfg.get("architectures") or []:
            if arch in ARCHITECTURES:
                return ARCHITECTURES[arch]
    for cfg in (outer, inner):
        if cfg.get("model_type") in MODEL_TYPES:
            return MODEL_TYPES[cfg["model_type"]]
    raise ConfigError(f"unknown architecture {_arch(outer)!r} (model_type {outer.get('model_type')!r}): the cost "
                      f"model reads {', '.join(sorted(ARCHITECTURES))}; it needs {NEEDED}")


def target_shape(config: dict, name: str = "target") -> ModelShape:
    """A target's shape from a config dict (a multimodal wrapper's `text_config` read)."""
    family = family_of(config)
    inner, outer = text_config(config)
    arch = _arch(outer)
    reader, modules = FAMILIES[family]
    got = reader(inner, arch)
    h = _int(inner, "hidden_size", arch, "the model width")
    vocab = _int(inner, "vocab_size", arch, "the LM head's vocabulary", default=outer.get("vocab_size"))
    flat = {part: got.get(part, 0) for part in ("attention", "dense_mlp", "shared_experts")}
    experts = got.get("experts", 0)
    flat.update(router=got.get("moe_layers", 0) * experts * h, lm_head=vocab * h)
    bits, bit_note = weight_bits(outer, inner, modules)
    read = dict(got["read"], bits=bit_note, vocab="vocab_size")
    return ModelShape(name=name, architecture=arch, family=family, hidden=h, layers=got["layers"], vocab=vocab,
                      flat=flat, bits=bits, moe_layers=got.get("moe_layers", 0), experts=experts,
                      active=got.get("active", 0), expert_params=got.get("expert_params", 0),
                      kv_bytes_per_token=got["kv"], mtp_layers=got.get("mtp_layers", 0), read_from=read,
                      notes=_kv_note(got))


def _kv_note(got: dict) -> tuple:
    if got.get("sliding_layers"):
        return (f"{got['sliding_layers']} sliding-window layers keep at most {got['sliding_window']} tokens: "
                "the KV bytes per token count every layer (an upper bound past the window)",)
    return ()


# --------------------------------------------------------------------------- drafts

def draft_shape(config: dict, target: ModelShape, name: str = "draft") -> ModelShape:
    """An EAGLE-style draft: Llama decoder layer(s) + the LM head over its draft vocabulary
    (`draft_vocab_size`, else `vocab_size`); EAGLE-3 layers read [embedding, hidden] (2x wide
    q/k/v) and an fc fuses three target hidden states (3 x target width -> width) once per step.
    vLLM's speculators format (`transformer_layer_config`) is unwrapped."""
    layer = config.get("transformer_layer_config") if isinstance(config.get("transformer_layer_config"), dict) else config
    arch = _arch(config)
    eagle3 = "eagle3" in arch.lower() or config.get("speculators_model_type") == "eagle3"
    h = _int(layer, "hidden_size", arch, "the draft's width")
    layers = _int(layer, "num_hidden_layers", arch, "draft layers", default=1)
    attn, kv, _ = gqa_attention(layer, arch)
    if eagle3:
        attn = _eagle3_attention(layer, arch)
    inter = _int(layer, "intermediate_size", arch, "the draft's MLP width")
    vocab = config.get("draft_vocab_size") or layer.get("draft_vocab_size")
    vocab = int(vocab) if vocab else _int(layer, "vocab_size", arch, "the draft's vocabulary (or draft_vocab_size)")
    t_width = int(config.get("target_hidden_size") or layer.get("target_hidden_size") or target.hidden)
    fc = (3 if eagle3 else 2) * t_width * h
    flat = dict(attention=layers * attn, dense_mlp=layers * 3 * h * inter, shared_experts=0, router=0,
                lm_head=h * vocab, fc=fc)
    dtype = DTYPE_BITS.get(str(config.get("torch_dtype") or config.get("dtype") or "bfloat16"), 16)
    read = {"attention": "num_attention_heads, num_key_value_heads, head_dim" + (" (EAGLE-3: 2x wide input)" if eagle3 else ""),
            "dense_mlp": "intermediate_size", "vocab": "draft_vocab_size" if config.get("draft_vocab_size") else "vocab_size",
            "bits": f"the config's dtype ({dtype} bits)"}
    return ModelShape(name=name, architecture=arch, family="eagle3" if eagle3 else "eagle", hidden=h, layers=layers,
                      vocab=vocab, flat=flat, bits={p: dtype for p in PARTS}, kv_bytes_per_token=layers * kv,
                      role="draft", read_from=read)


def _eagle3_attention(layer: dict, arch: str) -> int:
    h = _int(layer, "hidden_size", arch, "the draft's width")
    heads = _int(layer, "num_attention_heads", arch, "attention heads")
    kv = _int(layer, "num_key_value_heads", arch, "KV heads", default=heads)
    hd = _int(layer, "head_dim", arch, "head width", default=h // heads)
    return 2 * h * (heads + 2 * kv) * hd + heads * hd * h


def default_draft(target: ModelShape, vocab: int = DEFAULT_DRAFT_VOCAB, config: dict | None = None) -> ModelShape:
    """The draft assumed when none is given: one EAGLE-3 Llama layer as wide as the target (its
    heads, KV heads and dense MLP width), an LM head over `vocab` tokens. Said so wherever used."""
    cfg = dict(config or {})
    inner = text_config(cfg)[0] if cfg else {}
    heads = int(inner.get("num_attention_heads") or max(1, target.hidden // 128))
    layer = {"architectures": ["LlamaForCausalLMEagle3"], "hidden_size": target.hidden, "num_hidden_layers": 1,
             "num_attention_heads": heads, "num_key_value_heads": int(inner.get("num_key_value_heads") or heads),
             "intermediate_size": int(inner.get("intermediate_size") or 4 * target.hidden),
             "vocab_size": int(vocab), "torch_dtype": "bfloat16"}
    if inner.get("head_dim"):
        layer["head_dim"] = int(inner["head_dim"])
    shape = draft_shape(layer, target, name="assumed EAGLE-3 draft")
    note = (f"no draft config given: assumed one EAGLE-3 layer of the target's width ({target.hidden}), its "
            f"heads and MLP width, an LM head over {vocab:,} tokens")
    return replace(shape, notes=(note,))


def mtp_draft(target: ModelShape) -> ModelShape:
    """DeepSeek-V3's own MTP module as the draft (SGLang's NEXTN/EAGLE path): one decoder layer of
    the target's MoE shape, its eh_proj (2 x width -> width) read once per step, and the target's
    LM head. Its MoE layer reads the experts of the tokens it drafts."""
    if not target.mtp_layers:
        raise ConfigError(f"{target.name} has no MTP layer (num_nextn_predict_layers is 0): give a draft config")
    per_layer = {p: target.flat[p] / max(1, target.layers) for p in ("attention",)}
    shared = target.flat["shared_experts"] / max(1, target.moe_layers)
    flat = dict(attention=per_layer["attention"], dense_mlp=0, shared_experts=shared,
                router=target.experts * target.hidden, lm_head=target.flat["lm_head"], fc=2 * target.hidden ** 2)
    bits = dict(target.bits, fc=target.bits["attention"])
    return replace(target, name=f"{target.name} MTP layer", family="mtp", role="draft", layers=1, flat=flat,
                   bits=bits, moe_layers=1, kv_bytes_per_token=target.kv_bytes_per_token / max(1, target.layers),
                   mtp_layers=0, read_from={"draft": "num_nextn_predict_layers (the target's own MTP layer)"},
                   notes=("draft: the target's MTP layer (one MoE decoder layer + eh_proj + the target's LM head)",))


# --------------------------------------------------------------------------- weight bits

def weight_bits(outer: dict, inner: dict, modules: dict) -> tuple[dict, str]:
    """Bits per part and where they came from: the quantization_config (the wrapper's, else the
    text model's) applied to each part's representative module name, else the dtype."""
    dtype = DTYPE_BITS.get(str(inner.get("torch_dtype") or inner.get("dtype") or outer.get("torch_dtype")
                               or outer.get("dtype") or "bfloat16"), 16)
    bits = {p: dtype for p in PARTS}
    q = outer.get("quantization_config") or inner.get("quantization_config")
    if not q:
        return bits, f"the config's dtype ({dtype} bits), no quantization_config"
    method = str(q.get("quant_method", "")).lower()
    reader = QUANT_READERS.get(method)
    if reader is None:
        raise ConfigError(f"quantization_config quant_method {method!r} is not read by the cost model: give the bits "
                          "per part with --weight-bits (e.g. experts=4.5 attention=16)")
    quantized, qbits, note = reader(q)
    names = dict(modules, lm_head="lm_head")
    for part, module in names.items():
        if quantized(module):
            bits[part] = qbits
    return bits, f"quantization_config ({method}: {note}), else {dtype} bits"


def _compressed_tensors(q: dict):
    groups = [g for g in (q.get("config_groups") or {}).values() if isinstance(g, dict) and g.get("weights")]
    if not groups:
        raise ConfigError("compressed-tensors quantization_config has no config_groups with weights: give --weight-bits")
    w = groups[0]["weights"]
    num, group = float(w.get("num_bits", 16)), w.get("group_size")
    per = 16.0 / group if w.get("strategy") == "group" and group else 0.0
    zero = 0.0 if w.get("symmetric", True) else (num / group if group else 0.0)
    targets = [t for g in groups for t in (g.get("targets") or ["Linear"])]
    ignore = list(q.get("ignore") or [])

    def quantized(module: str) -> bool:
        return _targeted(module, targets) and not any(_matches(module, e) for e in ignore)
    return quantized, num + per + zero, (f"{num:g}-bit {w.get('type', 'int')}, group {group}, "
                                         f"{'symmetric' if w.get('symmetric', True) else 'asymmetric'}; ignore "
                                         f"{', '.join(ignore) or 'nothing'}")


def _fp8(q: dict):
    block = q.get("weight_block_size") or [128, 128]
    per = 32.0 / (block[0] * block[1]) if len(block) == 2 else 0.0
    skip = list(q.get("modules_to_not_convert") or ["lm_head"])
    return (lambda m: not any(_matches(m, e) for e in skip)), 8.0 + per, f"8-bit, block {block}"


def _mxfp4(q: dict):
    skip = list(q.get("modules_to_not_convert") or [])
    return (lambda m: not any(_matches(m, e) for e in skip)), 4.25, "4-bit values + an 8-bit scale per 32"


def _grouped_int(q: dict):
    num = float(q.get("bits") or q.get("w_bit") or 4)
    group = q.get("group_size") or q.get("q_group_size") or 128
    skip = list(q.get("modules_to_not_convert") or ["lm_head"])
    return (lambda m: not any(_matches(m, e) for e in skip)), num + (16.0 + num) / group, f"{num:g}-bit, group {group}"


QUANT_READERS = {"compressed-tensors": _compressed_tensors, "fp8": _fp8, "mxfp4": _mxfp4, "awq": _grouped_int,
                 "gptq": _grouped_int}


def _targeted(module: str, targets: list) -> bool:
    return any(t == "Linear" or _matches(module, t) for t in targets)


def _matches(module: str, entry: str) -> bool:
    """compressed-tensors' `re:` patterns (re.match), fnmatch globs (a module or anything under
    it), or a plain name: the module itself, a suffix, or a parent."""
    entry = str(entry)
    if entry.startswith("re:"):
        return re.match(entry[3:], module) is not None
    if "*" in entry:
        return fnmatch.fnmatch(module, entry) or fnmatch.fnmatch(module, entry + ".*")
    return module == entry or module.endswith("." + entry) or module.startswith(entry + ".")


def parse_bits(items) -> dict:
    """`--weight-bits` values: '4.5' (every part) or 'experts=4.5' (a part; aliases: mlp, shared,
    experts, head, attn). A bad item is a one-line error."""
    out = {}
    for item in items or ():
        part, sep, value = str(item).partition("=")
        if not sep:
            part, value = "", part
        part = PART_ALIASES.get(part.strip(), part.strip())
        try:
            bits = float(value)
        except ValueError:
            bits = -1.0
        if not 0 < bits <= 32 or (part and part not in PARTS):
            raise ConfigError(f"--weight-bits {item!r}: give BITS or PART=BITS with 0 < BITS <= 32 and PART one of "
                              f"{', '.join(PARTS + tuple(PART_ALIASES))}")
        out.update({p: bits for p in PARTS} if not part else {part: bits})
    return out

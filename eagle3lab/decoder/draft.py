"""An EAGLE-3 draft head in SGLang's `LlamaForCausalLMEagle3` checkpoint layout.

The layout and the forward follow sglang 0.5.23 `srt/models/llama_eagle3.py`:

* ``fc.weight`` [H, 3H] projects the concatenated aux hidden states of the target
  (``LlamaModel.fc``; its input width is ``target_hidden_size * len(aux ids)``).
* one decoder layer, ``midlayer.*`` (the loader's ``legacy_name_map`` renames
  ``midlayer`` to ``layers.0``). Its attention input is ``[input_layernorm(embeds);
  hidden_norm(hidden)]`` of width 2H (``LlamaDecoderLayer.forward`` with
  ``is_input_layer``); the residual is the *un-normed* hidden.
* ``norm.weight`` then ``lm_head.weight`` [draft_vocab, H].
* ``d2t`` (draft id -> target id offset: ``target = draft + d2t[draft]``, the loader's
  ``hot_token_id = d2t + arange``) and ``t2d`` (bool mask over the target vocab; the
  loader skips it).

The draft's ``embed_tokens`` is the target's: SGLang calls ``set_embed(target embed)``
for EAGLE-3 (sglang 0.5.23 speculative/eagle_worker_v2.py ``init_lm_head``), so the
checkpoint need not carry it. We keep a copy in memory, read from the target's
safetensors (config key ``eagle3lab.target``) or passed in.

Sequence convention (SGLang's draft extend): ``hidden[t]`` is the target's feature
of token t, ``input_ids[t]`` is token t+1, ``position_ids[t]`` = t, and
``logits[t]`` predict token t+2. Each further step feeds ``hidden_out`` back in.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable

import torch
import torch.nn.functional as F
from torch import nn

from eagle3lab.wiring.boundaries import default_boundaries
from eagle3lab.engines.lab.lab_capture import served_by_lab
from eagle3lab.errors import EagleLabError

CHECKPOINT_FILE = "model.safetensors"
ARCHITECTURE = "LlamaForCausalLMEagle3"


class DraftConfig(dict):
    """The draft's config.json as a dict that also reads like attributes."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError as exc:
            raise AttributeError(name) from exc




class KVCache:
    """Keys and values of the draft layer, [B, kv_heads, S, head_dim], grown per step."""

    def __init__(self) -> None:
        self.k: torch.Tensor | None = None
        self.v: torch.Tensor | None = None

    @property
    def length(self) -> int:
        return 0 if self.k is None else self.k.shape[2]

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Add T new positions; return the full keys and values."""
        if self.k is None:
            self.k, self.v = k, v
        else:
            self.k = torch.cat([self.k, k], dim=2)
            self.v = torch.cat([self.v, v], dim=2)
        return self.k, self.v

    def truncate(self, n: int) -> None:
        """Keep the first n positions (drop rejected drafts)."""
        if self.k is not None and n < self.length:
            self.k = self.k[:, :, :n]
            self.v = self.v[:, :, :n]

    def clone(self) -> "KVCache":
        out = KVCache()
        if self.k is not None:
            out.k, out.v = self.k.clone(), self.v.clone()
        return out


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class RotaryEmbedding(nn.Module):
    """Neox-style RoPE, as HF Llama and SGLang's get_rope(is_neox_style=True)."""

    def __init__(self, head_dim: int, theta: float) -> None:
        super().__init__()
        inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, position_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        freqs = position_ids.float()[..., None] * self.inv_freq  # [B, T, hd/2]
        emb = torch.cat([freqs, freqs], dim=-1)
        return emb.cos()[:, None], emb.sin()[:, None]  # [B, 1, T, hd]


class DraftAttention(nn.Module):
    """Llama attention whose q/k/v read the 2H-wide [embeds; hidden] input."""

    def __init__(self, cfg: DraftConfig) -> None:
        super().__init__()
        h = cfg["hidden_size"]
        self.num_heads = cfg["num_attention_heads"]
        self.num_kv_heads = cfg["num_key_value_heads"]
        self.head_dim = cfg["head_dim"]
        self.q_proj = nn.Linear(2 * h, self.num_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(2 * h, self.num_kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(2 * h, self.num_kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.num_heads * self.head_dim, h, bias=False)
        self.rotary = RotaryEmbedding(self.head_dim, cfg["rope_theta"])

    def forward(self, x, position_ids, cache=None, attn_mask=None):
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.num_kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.num_kv_heads, self.head_dim).transpose(1, 2)
        cos, sin = self.rotary(position_ids)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        past = 0
        if cache is not None:
            past = cache.length
            k, v = cache.append(k, v)
        if attn_mask is None:
            s = k.shape[2]
            attn_mask = torch.arange(s, device=x.device)[None, :] <= (
                past + torch.arange(t, device=x.device)[:, None])
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=attn_mask, enable_gqa=self.num_kv_heads != self.num_heads)
        return self.o_proj(out.transpose(1, 2).reshape(b, t, -1))


class DraftMLP(nn.Module):
    def __init__(self, cfg: DraftConfig) -> None:
        super().__init__()
        h, i = cfg["hidden_size"], cfg["intermediate_size"]
        self.gate_proj = nn.Linear(h, i, bias=False)
        self.up_proj = nn.Linear(h, i, bias=False)
        self.down_proj = nn.Linear(i, h, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class MidLayer(nn.Module):
    """SGLang's EAGLE-3 input decoder layer (llama_eagle3.py LlamaDecoderLayer)."""

    def __init__(self, cfg: DraftConfig) -> None:
        super().__init__()
        h, eps = cfg["hidden_size"], cfg["rms_norm_eps"]
        self.hidden_norm = nn.RMSNorm(h, eps=eps)
        self.input_layernorm = nn.RMSNorm(h, eps=eps)
        self.self_attn = DraftAttention(cfg)
        self.post_attention_layernorm = nn.RMSNorm(h, eps=eps)
        self.mlp = DraftMLP(cfg)

    def forward(self, embeds, hidden, position_ids, cache=None, attn_mask=None):
        residual = hidden
        x = torch.cat([self.input_layernorm(embeds), self.hidden_norm(hidden)], dim=-1)
        residual = self.self_attn(x, position_ids, cache, attn_mask) + residual
        return self.mlp(self.post_attention_layernorm(residual)) + residual


class Eagle3Draft(nn.Module):
    """EAGLE-3 draft head; state_dict keys are the SGLang checkpoint names."""

    def __init__(self, config: dict, embed_weight: torch.Tensor | None = None) -> None:
        super().__init__()
        cfg = DraftConfig(config)
        cfg.setdefault("head_dim", cfg["hidden_size"] // cfg["num_attention_heads"])
        cfg.setdefault("num_key_value_heads", cfg["num_attention_heads"])
        self.config = cfg
        h = cfg["hidden_size"]
        target_h = cfg.get("target_hidden_size", h)
        self.embed_tokens = nn.Embedding(cfg["vocab_size"], h)
        if embed_weight is not None:
            self.set_embed(embed_weight)
        self.fc = nn.Linear(target_h * len(self.aux_layer_ids or [0, 0, 0]), h, bias=False)
        self.midlayer = MidLayer(cfg)
        self.norm = nn.RMSNorm(h, eps=cfg["rms_norm_eps"])
        self.lm_head = nn.Linear(h, cfg["draft_vocab_size"], bias=False)
        self.register_buffer("d2t", torch.zeros(cfg["draft_vocab_size"], dtype=torch.long))
        self.register_buffer("t2d", torch.zeros(cfg["vocab_size"], dtype=torch.bool))
        self.set_vocab_map(torch.arange(cfg["draft_vocab_size"]))

    # --- config views -------------------------------------------------------------
    @property
    def aux_layer_ids(self) -> list[int]:
        """`eagle_config.eagle_aux_hidden_state_layer_ids` (SGLang serves id+1)."""
        return list((self.config.get("eagle_config") or {}).get("eagle_aux_hidden_state_layer_ids") or [])

    @property
    def train_boundaries(self) -> list[int]:
        """Boundaries the draft was trained on (config key eagle3lab.train_boundaries)."""
        lab = self.config.get("eagle3lab") or {}
        if lab.get("train_boundaries") is not None:
            return list(lab["train_boundaries"])
        # not recorded: what SGLang's llama capture feeds for the config ids (the trainer captured
        # through it), the default boundaries when there are none
        return list(served_by_lab(self.aux_layer_ids or None, self.config["target_num_hidden_layers"]))

    @property
    def ttt_steps(self) -> int:
        return int((self.config.get("eagle3lab") or {}).get("ttt_steps", 1))

    # --- vocabulary -----------------------------------------------------------------
    def set_vocab_map(self, draft_to_target_ids: torch.Tensor) -> None:
        """Set d2t/t2d from the target ids of draft ids 0..draft_vocab-1 (ascending)."""
        ids = torch.as_tensor(draft_to_target_ids, dtype=torch.long)
        if ids.numel() != self.config["draft_vocab_size"]:
            raise EagleLabError(f"draft vocabulary has {ids.numel()} ids, config says "
                                f"{self.config['draft_vocab_size']}")
        self.d2t.copy_(ids - torch.arange(ids.numel()))
        self.t2d.zero_()
        self.t2d[ids] = True

    def draft_to_target(self, ids: torch.Tensor) -> torch.Tensor:
        """Draft-vocabulary ids -> target ids (SGLang's hot_token_id[ids])."""
        return ids + self.d2t[ids]

    @property
    def target_ids(self) -> torch.Tensor:
        """Target id of every draft id."""
        return self.draft_to_target(torch.arange(self.d2t.numel(), device=self.d2t.device))

    def set_embed(self, weight: torch.Tensor) -> None:
        """Share the target's input embedding (what SGLang's set_embed does)."""
        with torch.no_grad():
            self.embed_tokens.weight.copy_(weight.to(self.embed_tokens.weight.dtype))
        self.embed_tokens.weight.requires_grad_(False)

    # --- forward ----------------------------------------------------------------------
    def project(self, aux: torch.Tensor) -> torch.Tensor:
        """[B, T, 3H] concatenated target boundaries -> [B, T, H] (the fc)."""
        return self.fc(aux)

    def step(self, input_ids, hidden, position_ids, cache=None, attn_mask=None):
        """One draft step: returns (hidden_out [B,T,H] pre-norm, logits [B,T,draft_vocab])."""
        if position_ids.dim() == 1:
            position_ids = position_ids[None].expand(input_ids.shape[0], -1)
        hidden_out = self.midlayer(self.embed_tokens(input_ids), hidden, position_ids,
                                   cache, attn_mask)
        return hidden_out, self.lm_head(self.norm(hidden_out))

    def forward(self, input_ids, aux, position_ids, cache=None, attn_mask=None):
        """First step from raw aux states: step(input_ids, project(aux), ...)."""
        return self.step(input_ids, self.project(aux), position_ids, cache, attn_mask)

    # --- construction and checkpoints ---------------------------------------------------
    @classmethod
    def for_target(cls, target_config, *, aux_layer_ids: list[int], train_boundaries: list[int],
                   draft_vocab_ids: torch.Tensor, ttt_steps: int = 1, intermediate_size=None,
                   embed_weight=None, extra: dict | None = None) -> "Eagle3Draft":
        """A fresh draft sized for a transformers LlamaConfig target."""
        tc = target_config
        rope = getattr(tc, "rope_parameters", None) or {}
        theta = rope.get("rope_theta", getattr(tc, "rope_theta", 10000.0))
        config = {
            "architectures": [ARCHITECTURE],
            "model_type": "llama",
            "hidden_size": tc.hidden_size,
            "intermediate_size": intermediate_size or tc.intermediate_size,
            "num_attention_heads": tc.num_attention_heads,
            "num_key_value_heads": tc.num_key_value_heads,
            "head_dim": getattr(tc, "head_dim", None) or tc.hidden_size // tc.num_attention_heads,
            "num_hidden_layers": 1,
            "hidden_act": "silu",
            "rms_norm_eps": tc.rms_norm_eps,
            "max_position_embeddings": tc.max_position_embeddings,
            "rope_theta": float(theta),
            "tie_word_embeddings": False,
            "vocab_size": tc.vocab_size,
            "draft_vocab_size": int(len(draft_vocab_ids)),
            "target_num_hidden_layers": tc.num_hidden_layers,
            "bos_token_id": tc.bos_token_id,
            "eos_token_id": tc.eos_token_id,
            "torch_dtype": "float16",
            "eagle_config": {"eagle_aux_hidden_state_layer_ids": list(aux_layer_ids),
                             "use_aux_hidden_state": True},
            "eagle3lab": {"train_boundaries": list(train_boundaries),
                          "ttt_steps": int(ttt_steps), **(extra or {})},
        }
        draft = cls(config, embed_weight=embed_weight)
        draft.set_vocab_map(draft_vocab_ids)
        return draft

    def checkpoint_state(self, dtype=torch.float16) -> dict[str, torch.Tensor]:
        """The tensors SGLang loads (no embed_tokens: it comes from the target)."""
        out = {}
        for name, tensor in self.state_dict().items():
            if name.startswith("embed_tokens."):
                continue
            if tensor.is_floating_point():
                tensor = tensor.to(dtype)
            out[name] = tensor.detach().contiguous().cpu()
        return out

    def save_pretrained(self, path, dtype=torch.float16) -> Path:
        from safetensors.torch import save_file

        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        config = dict(self.config)
        config["torch_dtype"] = str(dtype).replace("torch.", "")
        (path / "config.json").write_text(json.dumps(config, indent=2) + "\n")
        save_file(self.checkpoint_state(dtype), str(path / CHECKPOINT_FILE),
                  metadata={"format": "pt"})
        return path

    @classmethod
    def from_pretrained(cls, path, embed_weight: torch.Tensor | None = None,
                        target_dir=None) -> "Eagle3Draft":
        """Load a draft as float32; the embedding comes from the argument, the checkpoint,
        or the target named by `target_dir` / config key eagle3lab.target."""
        from safetensors.torch import load_file

        path = Path(path)
        if not (path / "config.json").is_file() or not (path / CHECKPOINT_FILE).is_file():
            raise EagleLabError(f"{path} is not an EAGLE-3 draft (config.json and "
                                f"{CHECKPOINT_FILE} needed)")
        config = json.loads((path / "config.json").read_text())
        state = load_file(str(path / CHECKPOINT_FILE))
        if embed_weight is None:
            embed_weight = state.pop("embed_tokens.weight", None)
        if embed_weight is None:
            rel = target_dir or (config.get("eagle3lab") or {}).get("target")
            if rel is None:
                raise EagleLabError(f"{path}: no embedding; pass embed_weight or target_dir")
            embed_weight = load_target_embedding(path / rel if target_dir is None else Path(rel))
        state.pop("embed_tokens.weight", None)
        draft = cls(config, embed_weight=embed_weight)
        state = {k: (v.float() if v.is_floating_point() else v) for k, v in state.items()}
        missing, unexpected = draft.load_state_dict(state, strict=False)
        missing = [m for m in missing if not m.startswith("embed_tokens.")]
        if missing or unexpected:
            raise EagleLabError(f"{path}: checkpoint mismatch (missing {missing}, "
                                f"unexpected {unexpected})")
        return draft.eval()


def load_target_embedding(target_dir) -> torch.Tensor:
    """Read only `model.embed_tokens.weight` from a transformers Llama checkpoint."""
    from safetensors import safe_open

    target_dir = Path(target_dir)
    files = sorted(target_dir.glob("*.safetensors"))
    for file in files:
        with safe_open(str(file), framework="pt") as f:
            for key in ("model.embed_tokens.weight", "embed_tokens.weight"):
                if key in f.keys():
                    return f.get_tensor(key).float()
    raise EagleLabError(f"no embed_tokens weight in {target_dir}")


def sglang_param_names(names: Iterable[str]) -> dict[str, str]:
    """Checkpoint name -> SGLang params_dict name, as LlamaForCausalLMEagle3.load_weights
    maps them (sglang 0.5.23 llama_eagle3.py): midlayer -> layers.0, q/k/v -> qkv_proj,
    gate/up -> gate_up_proj, 'model.' prefix unless lm_head; d2t/t2d are not params."""
    stacked = [(".qkv_proj", ".q_proj"), (".qkv_proj", ".k_proj"), (".qkv_proj", ".v_proj"),
               (".gate_up_proj", ".gate_proj"), (".gate_up_proj", ".up_proj")]
    out = {}
    for name in names:
        new = name.replace("midlayer", "layers.0")
        if "d2t" in new or "t2d" in new:
            continue
        for param, shard in stacked:
            if shard in new:
                new = new.replace(shard, param)
                break
        out[name] = new if new.startswith("lm_head") else f"model.{new}"
    return out


def init_weights(module: nn.Module, std: float = 0.02) -> None:
    """nanoGPT-style init for the trainable linears (norms stay at one)."""
    for m in module.modules():
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, mean=0.0, std=std)


__all__ = ["Eagle3Draft", "KVCache", "DraftConfig", "default_boundaries",
           "load_target_embedding", "sglang_param_names", "init_weights"]

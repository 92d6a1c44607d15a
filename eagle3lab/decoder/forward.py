"""A lean forward pass of a transformers `LlamaForCausalLM` for speculative decoding.

Why not call the transformers model directly: per step it builds cache objects, masks and
output dataclasses, which on a 2-core CPU at batch 1 costs more than the maths of a small
model. This module copies the weights into plain tensors (q/k/v and gate/up fused) and runs
the same computation with a preallocated KV cache, an optional tree attention mask and the
EAGLE-3 auxiliary hidden-state capture at layer boundaries.

Boundary convention (see docs/sources.md section 2 and eagle3lab.wiring.conventions): boundary 0 is the
embedding output, boundary k the output of layer k-1 (the input of layer k), before any final
norm; boundary N (the last layer's output) is pre-norm too.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass
class LayerWeights:
    input_norm: torch.Tensor
    qkv: torch.Tensor  # [(Hq + 2 Hkv) * D, H]
    o: torch.Tensor
    post_norm: torch.Tensor
    gate_up: torch.Tensor  # [2 I, H]
    down: torch.Tensor


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """Llama RMSNorm (computed in float32 like transformers)."""
    if x.dtype != torch.float32:
        return weight * rms_norm(x.float(), torch.ones((), dtype=torch.float32), eps).to(x.dtype)
    return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rotary_rows(cos: torch.Tensor, sin: torch.Tensor, start: int, end: int,
                position_ids: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """RoPE rows for new tokens: slots start..end-1, or explicit positions (tree depths)."""
    if position_ids is None:
        return cos[start:end], sin[start:end]
    return cos[position_ids], sin[position_ids]


class TargetModel:
    """Llama target with a KV cache of `max_seq_len` positions (batch size 1).

    `forward(ids, start, ...)` writes the KV of `ids` at cache slots start..start+T-1 and
    attends over slots 0..start+T-1. The cache has no length of its own: whatever the caller
    passes as `start` next time overwrites the rest, which makes rollback free.
    """

    def __init__(self, hf_model, max_seq_len: int = 2048, dtype: torch.dtype = torch.float32):
        cfg = hf_model.config
        self.config = cfg
        self.num_layers = cfg.num_hidden_layers
        self.hidden_size = cfg.hidden_size
        self.num_heads = cfg.num_attention_heads
        self.num_kv_heads = getattr(cfg, "num_key_value_heads", None) or self.num_heads
        self.head_dim = getattr(cfg, "head_dim", None) or self.hidden_size // self.num_heads
        self.eps = cfg.rms_norm_eps
        self.vocab_size = cfg.vocab_size
        self.dtype = dtype
        self.max_seq_len = max_seq_len
        sd = {k: v.detach().to(dtype) for k, v in hf_model.state_dict().items()}
        self.embed = sd["model.embed_tokens.weight"].contiguous()
        self.layers: list[LayerWeights] = []
        for i in range(self.num_layers):
            p = f"model.layers.{i}."
            self.layers.append(LayerWeights(
                input_norm=sd[p + "input_layernorm.weight"],
                qkv=torch.cat([sd[p + "self_attn.q_proj.weight"], sd[p + "self_attn.k_proj.weight"],
                               sd[p + "self_attn.v_proj.weight"]]).contiguous(),
                o=sd[p + "self_attn.o_proj.weight"].contiguous(),
                post_norm=sd[p + "post_attention_layernorm.weight"],
                gate_up=torch.cat([sd[p + "mlp.gate_proj.weight"], sd[p + "mlp.up_proj.weight"]]).contiguous(),
                down=sd[p + "mlp.down_proj.weight"].contiguous(),
            ))
        self.norm = sd["model.norm.weight"]
        self.lm_head = sd.get("lm_head.weight", self.embed).contiguous()
        if getattr(cfg, "attention_bias", False) or getattr(cfg, "mlp_bias", False):
            raise ValueError("biased Llama variants are not supported by the lean forward")
        # RoPE tables from the model's own rotary module (handles any rope_scaling type).
        rotary = hf_model.model.rotary_emb
        inv_freq = rotary.inv_freq.detach().float()
        scaling = float(getattr(rotary, "attention_scaling", 1.0))
        t = torch.arange(max_seq_len, dtype=torch.float32)
        freqs = torch.outer(t, inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.cos = (emb.cos() * scaling).to(dtype)
        self.sin = (emb.sin() * scaling).to(dtype)
        self.q_size = self.num_heads * self.head_dim
        self.kv_size = self.num_kv_heads * self.head_dim
        self.scale = self.head_dim ** -0.5
        self.k_cache = torch.zeros(self.num_layers, 1, self.num_kv_heads, max_seq_len, self.head_dim, dtype=dtype)
        self.v_cache = torch.zeros_like(self.k_cache)
        self.causal = torch.ones(max_seq_len, max_seq_len, dtype=torch.bool).tril_()

    # -- weights ---------------------------------------------------------------------------
    def linear_weights(self) -> dict[str, torch.Tensor]:
        """Every matmul weight by name (what weight-only quantization touches)."""
        out = {}
        for i, lw in enumerate(self.layers):
            for name in ("qkv", "o", "gate_up", "down"):
                out[f"layers.{i}.{name}"] = getattr(lw, name)
        return out

    def set_linear_weight(self, name: str, value: torch.Tensor) -> None:
        _, i, attr = name.split(".")
        setattr(self.layers[int(i)], attr, value.contiguous())

    # -- forward ---------------------------------------------------------------------------
    @torch.inference_mode()
    def forward(
        self,
        input_ids: torch.Tensor,
        start: int,
        position_ids: torch.Tensor | None = None,
        tree_mask: torch.Tensor | None = None,
        capture: tuple[int, ...] = (),
        normed_last: bool = False,
        logits_for: torch.Tensor | slice | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Run T new tokens; return (logits [T, V], aux [T, len(capture) * H] or None).

        input_ids: [T] token ids. start: cache slot of the first new token.
        position_ids: [T] rotary positions (default start..start+T-1; a tree uses start+depth).
        tree_mask: bool [T, T], True where new token i may attend to new token j (the
            committed prefix 0..start-1 is always visible); default causal.
        capture: boundaries to return, concatenated in ascending order (SGLang's order).
        normed_last: apply the final norm to the last captured boundary (the `normed-last`
            fault: what `output_hidden_states[N]` gives in transformers).
        logits_for: which rows need logits (all by default).
        """
        T = input_ids.shape[0]
        end = start + T
        if end > self.max_seq_len:
            raise ValueError(f"sequence of {end} tokens exceeds the KV cache ({self.max_seq_len})")
        cos, sin = rotary_rows(self.cos, self.sin, start, end, position_ids)
        cos, sin = cos[None, None], sin[None, None]  # [1, 1, T, D]
        attn_mask = None
        is_causal = False
        if tree_mask is not None:
            attn_mask = torch.cat([torch.ones(T, start, dtype=torch.bool), tree_mask], dim=1)
        elif T > 1 and start > 0:
            attn_mask = self.causal[start:end, :end]
        elif T > 1:
            is_causal = True
        if attn_mask is not None:  # additive form once per pass, not once per layer inside SDPA
            attn_mask = torch.zeros(attn_mask.shape, dtype=self.dtype).masked_fill_(
                ~attn_mask, float("-inf"))[None, None]
        wanted = sorted(set(capture))
        captured: dict[int, torch.Tensor] = {}
        h = self.embed[input_ids][None]  # [1, T, H]
        if 0 in wanted:
            captured[0] = h
        nh, nkv, hd = self.num_heads, self.num_kv_heads, self.head_dim
        for i, lw in enumerate(self.layers):
            x = rms_norm(h, lw.input_norm, self.eps)
            qkv = (x @ lw.qkv.T).view(1, T, nh + 2 * nkv, hd).transpose(1, 2)
            qk = qkv[:, : nh + nkv]
            qk = qk * cos + rotate_half(qk) * sin  # RoPE on q and k heads at once
            q, k, v = qk[:, :nh], qk[:, nh:], qkv[:, nh + nkv:]
            self.k_cache[i, :, :, start:end] = k
            self.v_cache[i, :, :, start:end] = v
            attn = F.scaled_dot_product_attention(
                q, self.k_cache[i, :, :, :end], self.v_cache[i, :, :, :end],
                attn_mask=attn_mask, is_causal=is_causal, scale=self.scale, enable_gqa=nkv != nh)
            h = h + attn.transpose(1, 2).reshape(1, T, self.q_size) @ lw.o.T
            x = rms_norm(h, lw.post_norm, self.eps)
            gate, up = (x @ lw.gate_up.T).chunk(2, dim=-1)
            h = h + (F.silu(gate) * up) @ lw.down.T
            if i + 1 in wanted:
                captured[i + 1] = h
        hn = rms_norm(h, self.norm, self.eps)
        if normed_last and wanted:
            captured[wanted[-1]] = rms_norm(captured[wanted[-1]], self.norm, self.eps)
        rows = hn[0] if logits_for is None else hn[0, logits_for]
        logits = rows @ self.lm_head.T
        aux = torch.cat([captured[b] for b in wanted], dim=-1)[0] if wanted else None
        return logits, aux

    @torch.inference_mode()
    def compact_cache(self, start: int, keep: torch.Tensor) -> None:
        """Move KV at slots start+keep[j] to start+j (the accepted path of a verified tree)."""
        src = start + keep
        n = keep.shape[0]
        self.k_cache[:, :, :, start:start + n] = self.k_cache[:, :, :, src]
        self.v_cache[:, :, :, start:start + n] = self.v_cache[:, :, :, src]


def fake_quantize_(model: TargetModel, bits: int, group_size: int = 64) -> None:
    """Group-wise symmetric weight-only quantization, applied in place (quant-int8/int4 faults).

    Each row of every matmul weight is cut into groups of `group_size` input channels; a group
    is rounded to `bits`-bit integers with scale max|w| / (2^(bits-1) - 1) and dequantized, the
    way weight-only int8/int4 serving kernels see the target. Embedding and lm_head stay.
    """
    qmax = 2 ** (bits - 1) - 1
    for name, w in model.linear_weights().items():
        out_f, in_f = w.shape
        g = group_size if in_f % group_size == 0 else in_f
        wg = w.float().reshape(out_f, in_f // g, g)
        scale = wg.abs().amax(dim=-1, keepdim=True).clamp(min=1e-8) / qmax
        q = (wg / scale).round().clamp(-qmax - 1, qmax)
        model.set_linear_weight(name, (q * scale).reshape(out_f, in_f).to(w.dtype))


class DraftModel:
    """Lean forward of an `Eagle3Draft` (same weights, same maths) with a preallocated cache.

    Mirrors `Eagle3Draft.step` (sglang 0.5.23 llama_eagle3.py): attention input is
    [input_layernorm(embed(ids)); hidden_norm(hidden)], residual the un-normed hidden; logits
    over the draft vocabulary. `step(ids, hidden, start, ...)` writes KV at slots
    start..start+T-1 like `TargetModel.forward`.
    """

    def __init__(self, draft, max_seq_len: int = 2048, dtype: torch.dtype = torch.float32,
                 use_d2t: bool = True):
        cfg = draft.config
        self.source = draft
        self.hidden_size = cfg["hidden_size"]
        self.num_heads = cfg["num_attention_heads"]
        self.num_kv_heads = cfg.get("num_key_value_heads") or self.num_heads
        self.head_dim = cfg.get("head_dim") or self.hidden_size // self.num_heads
        self.eps = cfg["rms_norm_eps"]
        self.max_seq_len = max_seq_len
        sd = {k: v.detach().to(dtype) if v.is_floating_point() else v.detach()
              for k, v in draft.state_dict().items()}
        p = "midlayer."
        self.embed = sd["embed_tokens.weight"]
        self.fc = sd["fc.weight"].contiguous()
        self.hidden_norm = sd[p + "hidden_norm.weight"]
        self.input_norm = sd[p + "input_layernorm.weight"]
        self.qkv = torch.cat([sd[p + "self_attn.q_proj.weight"], sd[p + "self_attn.k_proj.weight"],
                              sd[p + "self_attn.v_proj.weight"]]).contiguous()
        self.o = sd[p + "self_attn.o_proj.weight"].contiguous()
        self.post_norm = sd[p + "post_attention_layernorm.weight"]
        self.gate_up = torch.cat([sd[p + "mlp.gate_proj.weight"], sd[p + "mlp.up_proj.weight"]]).contiguous()
        self.down = sd[p + "mlp.down_proj.weight"].contiguous()
        self.norm = sd["norm.weight"]
        self.lm_head = sd["lm_head.weight"].contiguous()
        # input_layernorm(embed(id)) depends on the id only: normalize the table once.
        self.embed_normed = rms_norm(self.embed, self.input_norm, self.eps).contiguous()
        self.draft_vocab_size = self.lm_head.shape[0]
        self.vocab_size = self.embed.shape[0]
        # Draft id -> target id. The `no-d2t` fault reads draft ids as target ids.
        ids = torch.arange(self.draft_vocab_size)
        self.target_ids = draft.draft_to_target(ids).clone() if use_d2t else ids
        theta = float(cfg.get("rope_theta", 10000.0))
        inv_freq = 1.0 / (theta ** (torch.arange(0, self.head_dim, 2, dtype=torch.float32) / self.head_dim))
        freqs = torch.outer(torch.arange(max_seq_len, dtype=torch.float32), inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.cos, self.sin = emb.cos().to(dtype), emb.sin().to(dtype)
        self.q_size = self.num_heads * self.head_dim
        self.kv_size = self.num_kv_heads * self.head_dim
        self.scale = self.head_dim ** -0.5
        self.k_cache = torch.zeros(1, self.num_kv_heads, max_seq_len, self.head_dim, dtype=dtype)
        self.v_cache = torch.zeros_like(self.k_cache)
        self.causal = torch.ones(max_seq_len, max_seq_len, dtype=torch.bool).tril_()

    @torch.inference_mode()
    def project(self, aux: torch.Tensor) -> torch.Tensor:
        """[T, 3H] target boundaries -> [T, H]: the fc."""
        return aux @ self.fc.T

    @torch.inference_mode()
    def step(self, input_ids: torch.Tensor, hidden: torch.Tensor, start: int,
             position_ids: torch.Tensor | None = None,
             attn_mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """input_ids [T] (target ids), hidden [T, H]; returns (hidden_out [T, H], logits [T, Vd]).

        attn_mask: bool [T, start+T] over every cache slot (True = may attend), for tree
        drafting; default: all of 0..start-1 plus causal among the new tokens.
        """
        T = input_ids.shape[0]
        end = start + T
        if end > self.max_seq_len:
            raise ValueError(f"draft sequence of {end} tokens exceeds its cache ({self.max_seq_len})")
        cos, sin = rotary_rows(self.cos, self.sin, start, end, position_ids)
        if attn_mask is None and T > 1:
            attn_mask = self.causal[start:end, :end]
        # Run once per draft token, so written with as few torch calls as the maths allows
        # (fused RMSNorm, residual adds inside addmm, no batch dimension): at lab size a
        # draft step costs its op count, not its arithmetic.
        nh, nkv, hd, H = self.num_heads, self.num_kv_heads, self.head_dim, self.hidden_size
        x = torch.cat([self.embed_normed[input_ids], F.rms_norm(hidden, (H,), self.hidden_norm, self.eps)], dim=-1)
        qkv = (x @ self.qkv.T).view(T, nh + 2 * nkv, hd).transpose(0, 1)  # [heads, T, D]
        qk = qkv[: nh + nkv]
        qk = torch.addcmul(qk * cos, rotate_half(qk), sin)
        self.k_cache[0, :, start:end] = qk[nh:]
        self.v_cache[0, :, start:end] = qkv[nh + nkv:]
        attn = F.scaled_dot_product_attention(
            qk[None, :nh], self.k_cache[:, :, :end], self.v_cache[:, :, :end],
            attn_mask=None if attn_mask is None else attn_mask[None, None],
            scale=self.scale, enable_gqa=nkv != nh)
        h = torch.addmm(hidden, attn[0].transpose(0, 1).reshape(T, self.q_size), self.o.T)
        gate, up = (F.rms_norm(h, (H,), self.post_norm, self.eps) @ self.gate_up.T).chunk(2, dim=-1)
        h = torch.addmm(h, F.silu(gate) * up, self.down.T)
        return h, F.rms_norm(h, (H,), self.norm, self.eps) @ self.lm_head.T

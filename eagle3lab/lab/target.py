"""The lab's target: a transformers LlamaForCausalLM trained from scratch on the corpus."""

from __future__ import annotations

import math
import random

import torch
import torch.nn.functional as F

from eagle3lab.errors import EagleLabError


def make_target(vocab_size: int, *, hidden_size: int, num_layers: int, num_heads: int,
                num_kv_heads: int, intermediate_size: int, max_positions: int, eos_id: int,
                rope_theta: float = 10000.0, seed: int = 0):
    """A fresh Llama; tied embeddings keep the checkpoint small."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=vocab_size, hidden_size=hidden_size, intermediate_size=intermediate_size,
        num_hidden_layers=num_layers, num_attention_heads=num_heads,
        num_key_value_heads=num_kv_heads, max_position_embeddings=max_positions,
        rms_norm_eps=1e-5, rope_theta=rope_theta, tie_word_embeddings=True,
        bos_token_id=eos_id, eos_token_id=eos_id, pad_token_id=eos_id,
        attn_implementation="sdpa")
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    return model


def random_windows(stream: torch.Tensor, batch: int, length: int, gen: torch.Generator):
    """`batch` windows of `length` tokens at random offsets of a 1-D token stream."""
    if stream.numel() <= length + 1:
        raise EagleLabError(f"corpus too small: {stream.numel()} tokens for windows of {length}")
    starts = torch.randint(0, stream.numel() - length, (batch,), generator=gen)
    return torch.stack([stream[s:s + length] for s in starts.tolist()])


def lr_at(step: int, steps: int, lr: float, warmup: int) -> float:
    """Linear warm-up, then cosine decay to 10 % (nanoGPT's schedule)."""
    if step < warmup:
        return lr * (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def train_target(model, stream: torch.Tensor, *, steps: int, batch: int, seq_len: int,
                 lr: float, seed: int, progress: bool = True) -> list[dict]:
    """Next-token training on random windows; returns the loss history."""
    from tqdm.auto import tqdm

    gen = torch.Generator().manual_seed(seed)
    random.seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.1)
    model.train()
    history = []
    bar = tqdm(range(steps), desc="target", disable=not progress, mininterval=1.0)
    for step in bar:
        for group in opt.param_groups:
            group["lr"] = lr_at(step, steps, lr, warmup=max(1, steps // 20))
        x = random_windows(stream, batch, seq_len + 1, gen)
        logits = model(input_ids=x[:, :-1]).logits
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        history.append({"step": step, "loss": loss.item()})
        bar.set_postfix(loss=f"{loss.item():.3f}", refresh=False)
    model.eval()
    return history


def interleaved_windows(docs: list[list[int]], length: int, limit: int,
                       min_len: int = 2) -> list[list[int]]:
    """Consecutive windows of each doc, taken round-robin across docs (so a limit
    still samples every document, not just the first)."""
    per_doc = [[doc[i:i + length] for i in range(0, max(1, len(doc) - 1), length - 1)]
               for doc in docs]
    out = []
    for rank in range(max(map(len, per_doc), default=0)):
        for windows in per_doc:
            if rank < len(windows) and len(windows[rank]) >= min_len:
                out.append(windows[rank])
                if len(out) == limit:
                    return out
    return out


@torch.no_grad()
def heldout_loss(model, docs: list[list[int]], seq_len: int, max_windows: int = 64) -> float:
    """Mean next-token cross-entropy (nats) over consecutive windows of held-out docs."""
    total, count = 0.0, 0
    windows = interleaved_windows(docs, seq_len + 1, max_windows, min_len=2)
    for w in windows:
        x = torch.tensor([w])
        logits = model(input_ids=x[:, :-1]).logits
        total += F.cross_entropy(logits[0], x[0, 1:], reduction="sum").item()
        count += len(w) - 1
    return total / max(count, 1)


@torch.no_grad()
def greedy_continue(model, prompts: torch.Tensor, new_tokens: int) -> torch.Tensor:
    """Greedy continuation of equal-length prompts [B, P] -> [B, P + new_tokens]."""
    from transformers import DynamicCache

    cache = DynamicCache()
    out = model(input_ids=prompts, past_key_values=cache, use_cache=True)
    tokens = [prompts]
    nxt = out.logits[:, -1].argmax(-1, keepdim=True)
    for _ in range(new_tokens - 1):
        tokens.append(nxt)
        out = model(input_ids=nxt, past_key_values=out.past_key_values, use_cache=True)
        nxt = out.logits[:, -1].argmax(-1, keepdim=True)
    tokens.append(nxt)
    return torch.cat(tokens, dim=1)


def round_to(model, dtype=torch.float16):
    """Round weights to the storage dtype so figures match the shipped checkpoint."""
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.to(dtype).float())
    return model


@torch.no_grad()
def capture(model, input_ids: torch.Tensor, boundaries: list[int]):
    """Target logits and the residual stream at each boundary b (b < N).

    Boundary b: 0 = embedding output, k = output of layer k-1 before the final norm;
    transformers' hidden_states[b] is exactly that for b < N (hidden_states[N] is
    post-norm, so b = N is refused).
    """
    n = model.config.num_hidden_layers
    bad = [b for b in boundaries if not 0 <= b < n]
    if bad:
        raise EagleLabError(f"boundaries {bad} out of range 0..{n - 1} for a {n}-layer target")
    out = model(input_ids=input_ids, output_hidden_states=True)
    return out.logits, {b: out.hidden_states[b] for b in sorted(set(boundaries))}

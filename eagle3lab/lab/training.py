"""EAGLE-3 draft training with training-time test (TTT).

The draft is unrolled k steps on its own outputs: step 0 reads fc(target aux states),
step j reads the hidden it produced at step j-1, with the (teacher-forced) next token.
Step j's query at root t sits at position t + j and may attend to step-0 keys at
positions <= t and to its own chain's keys of steps 1..j: exactly what it sees at
decode time (EAGLE-3's TTT, SafeAILab/EAGLE eagle/traineagle3/cnets.py, length 7,
loss weight 0.8**j). k = 1 is plain teacher forcing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F

from eagle3lab.decoder.draft import Eagle3Draft, KVCache
from eagle3lab.lab.target import capture, lr_at

DEPTH_WEIGHT = 0.8  # EAGLE-3's per-depth loss weight base


def concat_aux(states: dict[int, torch.Tensor], boundaries: list[int]) -> torch.Tensor:
    """Concatenate captured boundaries in ascending layer order (SGLang's order)."""
    return torch.cat([states[b] for b in sorted(boundaries)], dim=-1)


def ttt_mask(n: int, step: int, device=None) -> torch.Tensor:
    """Bool [1, 1, n, (step+1)*n]: causal over step-0 keys, diagonal over later steps."""
    causal = torch.ones(n, n, dtype=torch.bool, device=device).tril()
    eye = torch.eye(n, dtype=torch.bool, device=device)
    return torch.cat([causal] + [eye] * step, dim=1)[None, None]


def shift_left(x: torch.Tensor, j: int, n: int) -> torch.Tensor:
    """x[:, j : j + n] padded with zeros at the end to length n (along dim 1)."""
    part = x[:, j:j + n]
    if part.shape[1] < n:
        pad = torch.zeros((x.shape[0], n - part.shape[1]) + tuple(x.shape[2:]),
                          dtype=x.dtype, device=x.device)
        part = torch.cat([part, pad], dim=1)
    return part


class TeacherLabels(NamedTuple):
    """The target's argmax at every position, precomputed (a capture cache keeps these instead
    of [T, V] logits): `draft_label` = the argmax over the draft vocabulary (a draft id),
    `target_top` = the argmax over the whole vocabulary (a target id); row t predicts token t+1."""

    draft_label: torch.Tensor  # [B, T] long
    target_top: torch.Tensor   # [B, T] long


def ttt_unroll(draft: Eagle3Draft, aux: torch.Tensor, input_ids: torch.Tensor,
               target_logits, depth: int, teacher: str = "soft",
               loss_mask: torch.Tensor | None = None) -> list[dict]:
    """Unroll the draft `depth` steps over a batch; per depth: loss, hits, count, logits.

    aux [B,T,3H] target features, input_ids [B,T], target_logits [B,T,V] (row t
    predicts token t+1) or `TeacherLabels` (argmax teaching only). Root t's step j reads
    token t+1+j and is scored against the target's distribution for token t+2+j, restricted
    to the draft vocabulary (teacher="soft": cross-entropy against it; "argmax": against its
    top token, which is all greedy acceptance asks for, and measured to train faster here).
    `loss_mask` [B,T] bool: only tokens marked True are scored as predictions (a chat
    response, not its prompt or padding), as EAGLE-3 trainers mask the loss to the
    assistant's turns.
    """
    labels = target_logits if isinstance(target_logits, TeacherLabels) else None
    if labels is not None and teacher != "argmax":
        raise ValueError("precomputed teacher labels teach the argmax only (teacher='argmax')")
    b, t = input_ids.shape
    n = t - 1
    if n < 1:
        raise ValueError("need at least 2 tokens")
    if teacher not in ("soft", "argmax"):
        raise ValueError(f"teacher must be 'soft' or 'argmax', not {teacher!r}")
    teacher_mode = teacher
    vocab_ids = draft.target_ids
    hidden = draft.project(aux[:, :n])
    positions = torch.arange(n, device=input_ids.device)[None].expand(b, -1)
    cache = KVCache()
    out = []
    for j in range(depth):
        valid = (torch.arange(n, device=input_ids.device) < n - j)[None].expand(b, -1)
        if loss_mask is not None:
            valid = valid & shift_left(loss_mask, 2 + j, n).bool()
        ids_j = shift_left(input_ids, 1 + j, n)
        hidden, logits = draft.step(ids_j, hidden, positions + j, cache,
                                    ttt_mask(n, j, input_ids.device))
        if labels is not None:
            label = shift_left(labels.draft_label, 1 + j, n)
            loss_tok = F.cross_entropy(logits.flatten(0, 1), label.flatten(),
                                       reduction="none").view(label.shape)
            hits = (vocab_ids[logits.argmax(-1)] == shift_left(labels.target_top, 1 + j, n)) & valid
            count = valid.sum()
            out.append({"depth": j + 1, "loss": (loss_tok * valid).sum() / count.clamp(min=1),
                        "hits": hits.sum(), "count": count, "logits": logits, "valid": valid,
                        "hit_mask": hits})
            continue
        teacher = shift_left(target_logits, 1 + j, n)
        if teacher_mode == "argmax":
            label = teacher[..., vocab_ids].argmax(-1)
            loss_tok = F.cross_entropy(logits.flatten(0, 1), label.flatten(),
                                       reduction="none").view(label.shape)
        else:
            p = teacher[..., vocab_ids].softmax(-1)
            loss_tok = -(p * logits.log_softmax(-1)).sum(-1)
        hits = (vocab_ids[logits.argmax(-1)] == teacher.argmax(-1)) & valid
        count = valid.sum()
        out.append({"depth": j + 1, "loss": (loss_tok * valid).sum() / count.clamp(min=1),
                    "hits": hits.sum(), "count": count, "logits": logits, "valid": valid,
                    "hit_mask": hits})
    return out


def weighted_loss(per_depth: list[dict]) -> torch.Tensor:
    return sum(DEPTH_WEIGHT ** i * d["loss"] for i, d in enumerate(per_depth))


@dataclass
class DraftJob:
    """One draft to train: the boundaries it reads and its TTT depth."""

    name: str
    draft: Eagle3Draft
    boundaries: list[int]
    ttt_steps: int
    steps: int | None = None  # optimizer steps; None = train_drafts' `steps`


def train_drafts(target, jobs: list[DraftJob], sequences: torch.Tensor, *, steps: int,
                 batch: int, lr: float, seed: int, progress: bool = True,
                 teacher: str = "soft") -> dict[str, list]:
    """Train several drafts on the same batches: one target pass feeds all of them.

    A job with its own `steps` trains on the first that many batches (its learning-rate
    schedule spans them); the loop runs until the longest job is done.
    """
    from tqdm.auto import tqdm

    gen = torch.Generator().manual_seed(seed)
    opts = {job.name: torch.optim.AdamW([p for p in job.draft.parameters() if p.requires_grad],
                                        lr=lr, betas=(0.9, 0.95), weight_decay=0.0)
            for job in jobs}
    history = {job.name: [] for job in jobs}
    for job in jobs:
        job.draft.train()
    job_steps = {job.name: steps if job.steps is None else job.steps for job in jobs}
    bar = tqdm(range(max(job_steps.values())), desc="drafts", disable=not progress, mininterval=1.0)
    for step in bar:
        rows = torch.randint(0, sequences.shape[0], (batch,), generator=gen)
        x = sequences[rows]
        active = [job for job in jobs if step < job_steps[job.name]]
        logits, states = capture(target, x, sorted({b for job in active for b in job.boundaries}))
        post = {}
        for job in active:
            n = job_steps[job.name]
            for group in opts[job.name].param_groups:
                group["lr"] = lr_at(step, n, lr, warmup=max(1, n // 20))
            per_depth = ttt_unroll(job.draft, concat_aux(states, job.boundaries), x, logits,
                                   job.ttt_steps, teacher=teacher)
            loss = weighted_loss(per_depth)
            opts[job.name].zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(job.draft.parameters(), 1.0)
            opts[job.name].step()
            acc1 = (per_depth[0]["hits"] / per_depth[0]["count"]).item()
            history[job.name].append({"step": step, "loss": loss.item(), "acc1": acc1})
            post[job.name] = f"{acc1:.2f}"
        bar.set_postfix(post, refresh=False)
    for job in jobs:
        job.draft.eval()
    return history

"""Train EAGLE-3 drafts of the real-model lab from captured hidden states, resumably.

Capture (EAGLE-3's "offline" data, as SpecForge's offline mode keeps it): one target pass over
each prompt + its own response writes the residual stream at the boundaries the drafts read
(float16) and the target's argmax at every row (over the whole vocabulary and over the draft
vocabulary), in shards of SHARD sequences under the cache; a shard is complete when its
meta file exists (written last), so an interrupted capture resumes at the next shard. Boundary 0
(the embedding output) is not stored: it is the target's embedding of the ids.

Training (`train_jobs`) reuses training.ttt_unroll on those shards: the loss is masked to
response tokens, batches are sequences of similar length up to a token budget, their order a
seeded shuffle per epoch; every `checkpoint_s` seconds the drafts, their optimizers and the
step are saved atomically, so a rerun continues from the last checkpoint, and snapshots of the
drafts are kept at the listed training-token counts (accept length against training tokens).
"""

from __future__ import annotations

import json
import os
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from eagle3lab.errors import EagleLabError
from eagle3lab.lab.training import TeacherLabels, ttt_unroll, weighted_loss

SHARD = 32             # sequences per capture shard
CAPTURE_TOKENS = 4096  # padded tokens per capture forward
FP16_MAX = 60000.0


# --------------------------------------------------------------------------------- capture

def _pad(rows: list[list[int]], value: int) -> torch.Tensor:
    width = max(map(len, rows))
    return torch.tensor([r + [value] * (width - len(r)) for r in rows], dtype=torch.long)


@torch.no_grad()
def capture_rows(target, seqs: list[list[int]], boundaries: list[int], vocab_ids: torch.Tensor):
    """Right-padded forward of equal-ish sequences: per sequence (states [T, len(b), H] float32,
    draft_label [T], target_top [T]) at its real positions (padding is causal-invisible)."""
    x = _pad(seqs, 0)
    out = target.model(input_ids=x, output_hidden_states=True)
    states = torch.stack([out.hidden_states[b] for b in boundaries], dim=2)  # [B, T, nb, H]
    normed = out.last_hidden_state
    results = []
    for row, seq in enumerate(seqs):
        logits = target.lm_head(normed[row, :len(seq)])
        results.append((states[row, :len(seq)], logits[:, vocab_ids].argmax(-1),
                        logits.argmax(-1)))
    return results


class CaptureSet:
    """Captured shards of one response set: states (memory-mapped), labels, ids."""

    def __init__(self, root) -> None:
        self.root = Path(root)
        info = self.root / "capture.json"
        if not info.is_file():
            raise EagleLabError(f"no capture in {self.root}")
        self.info = json.loads(info.read_text())
        self.shards = []
        for meta in sorted(self.root.glob("shard-*-meta.json")):
            stem = meta.name[:-len("-meta.json")]
            self.shards.append({"meta": json.loads(meta.read_text()),
                                "states": np.load(self.root / f"{stem}-states.npy", mmap_mode="r"),
                                "labels": np.load(self.root / f"{stem}-labels.npy", mmap_mode="r")})
        self.items = [(s, i) for s, shard in enumerate(self.shards)
                      for i in range(len(shard["meta"]["sequences"]))]

    @property
    def boundaries(self) -> list[int]:
        return list(self.info["boundaries"])

    def sequence(self, item) -> dict:
        s, i = item
        return self.shards[s]["meta"]["sequences"][i]

    def length(self, item) -> int:
        return len(self.sequence(item)["ids"])

    def response_tokens(self, items=None) -> int:
        items = self.items if items is None else items
        return sum(self.length(it) - self.sequence(it)["prompt_len"] for it in items)

    def batch(self, items, embed: torch.Tensor | None = None) -> dict:
        """Right-padded tensors of `items`: ids, loss_mask (response tokens), labels, and the
        states by boundary (boundary 0 from `embed`, the target's embedding)."""
        seqs = [self.sequence(it) for it in items]
        width = max(len(s["ids"]) for s in seqs)
        b, nb = len(items), len(self.boundaries)
        ids = torch.zeros(b, width, dtype=torch.long)
        mask = torch.zeros(b, width, dtype=torch.bool)
        labels = torch.zeros(b, width, 2, dtype=torch.long)
        states = torch.zeros(b, width, nb, self.info["hidden_size"])
        for row, ((s, i), seq) in enumerate(zip(items, seqs)):
            n, start = len(seq["ids"]), seq["offset"]
            ids[row, :n] = torch.tensor(seq["ids"])
            mask[row, seq["prompt_len"]:n] = True
            labels[row, :n] = torch.from_numpy(np.asarray(self.shards[s]["labels"][start:start + n],
                                                          dtype=np.int64))
            states[row, :n] = torch.from_numpy(np.asarray(self.shards[s]["states"][start:start + n],
                                                          dtype=np.float32))
        by_boundary = {bd: states[:, :, k] for k, bd in enumerate(self.boundaries)}
        if embed is not None:
            by_boundary[0] = embed[ids]
        return {"ids": ids, "loss_mask": mask, "by_boundary": by_boundary,
                "labels": TeacherLabels(labels[..., 0], labels[..., 1])}


def capture_set(target, records: list[dict], root, *, boundaries: list[int], vocab_ids: torch.Tensor,
                progress: bool = True, log=print) -> CaptureSet:
    """Capture `records` (prompt_ids + response_ids) into `root`, resuming at the first
    missing shard; returns the CaptureSet."""
    from tqdm.auto import tqdm

    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    info = {"boundaries": list(boundaries), "hidden_size": target.config.hidden_size,
            "sequences": len(records), "vocab_ids_sha": _digest(vocab_ids)}
    info_path = root / "capture.json"
    if info_path.is_file() and json.loads(info_path.read_text()) != info:
        raise EagleLabError(f"{root} holds a capture of other settings: remove it to recapture")
    _atomic_write(info_path, json.dumps(info, indent=2))
    shards = range(0, len(records), SHARD)
    bar = tqdm(total=len(records), desc="capture", disable=not progress, mininterval=5)
    started = time.perf_counter()
    for number, first in enumerate(shards):
        stem = root / f"shard-{number:05d}"
        group = records[first:first + SHARD]
        if Path(f"{stem}-meta.json").is_file():
            bar.update(len(group))
            continue
        _capture_shard(target, group, stem, boundaries, vocab_ids)
        bar.update(len(group))
        log(f"[capture] {root.name}: shard {number + 1}/{len(shards)} "
            f"({time.perf_counter() - started:.0f} s)")
    bar.close()
    return CaptureSet(root)


def _capture_shard(target, group, stem: Path, boundaries, vocab_ids) -> None:
    seqs = [list(r["prompt_ids"]) + list(r["response_ids"]) for r in group]
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]))
    parts: dict[int, tuple] = {}
    chunk: list[int] = []
    for i in order + [None]:
        if i is not None and (not chunk or (len(chunk) + 1) * len(seqs[i]) <= CAPTURE_TOKENS):
            chunk.append(i)
            continue
        for j, res in zip(chunk, capture_rows(target, [seqs[j] for j in chunk], boundaries, vocab_ids)):
            parts[j] = res
        chunk = [i] if i is not None else []
    states = torch.cat([parts[i][0] for i in range(len(seqs))])
    peak = float(states.abs().max())
    if peak > FP16_MAX:
        raise EagleLabError(f"a captured state reaches {peak:.0f}: beyond float16 storage")
    labels = torch.cat([torch.stack([parts[i][1], parts[i][2]], dim=1) for i in range(len(seqs))])
    offsets = np.cumsum([0] + [len(s) for s in seqs])[:-1].tolist()
    meta = {"sequences": [{"id": r["id"], "kind": r["kind"], "split": r["split"], "ids": s,
                           "prompt_len": len(r["prompt_ids"]), "offset": int(o)}
                          for r, s, o in zip(group, seqs, offsets)],
            "peak_abs_state": round(peak, 2)}
    _atomic_save(Path(f"{stem}-states.npy"), states.to(torch.float16).numpy())
    _atomic_save(Path(f"{stem}-labels.npy"), labels.to(torch.int32).numpy())
    _atomic_write(Path(f"{stem}-meta.json"), json.dumps(meta))


def _atomic_save(path: Path, array) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as fh:
        np.save(fh, array)
    os.replace(tmp, path)


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _digest(t: torch.Tensor) -> str:
    import hashlib

    return hashlib.sha256(t.to(torch.int64).numpy().tobytes()).hexdigest()[:16]


# --------------------------------------------------------------------------------- training

@dataclass
class CachedJob:
    """A draft to train from a capture: its boundaries (ascending: SGLang's concatenation
    order) and TTT depth."""

    name: str
    draft: torch.nn.Module
    boundaries: list[int]
    ttt_steps: int
    history: list = field(default_factory=list)


def plan_batches(data: CaptureSet, batch_tokens: int, epochs: int, seed: int) -> list[list]:
    """Every epoch's batches: sequences sorted by length, cut into batches of at most
    `batch_tokens` padded tokens, the batch order shuffled per epoch (seeded)."""
    items = [it for it in data.items if data.sequence(it)["split"] == "train"]
    items.sort(key=lambda it: (data.length(it), data.sequence(it)["id"]))
    batches, cur = [], []
    for it in items:
        if cur and (len(cur) + 1) * data.length(it) > batch_tokens:
            batches.append(cur)
            cur = []
        cur.append(it)
    if cur:
        batches.append(cur)
    out = []
    for epoch in range(epochs):
        order = list(range(len(batches)))
        random.Random(seed * 1000 + epoch).shuffle(order)
        out += [batches[i] for i in order]
    return out


def lr_at(step: int, steps: int, lr: float, warmup: int) -> float:
    from eagle3lab.lab.target import lr_at as schedule

    return schedule(step, steps, lr, warmup)


def train_jobs(jobs: list[CachedJob], data: CaptureSet, embed: torch.Tensor, *, epochs: int,
               batch_tokens: int, lr: float, seed: int, checkpoint: Path,
               checkpoint_s: float = 300.0, snapshot_tokens=(), snapshot_dir: Path | None = None,
               progress: bool = True, log=print) -> dict:
    """Train `jobs` on `data` (resuming from `checkpoint` if it exists); returns a summary
    (steps, training tokens, seconds, per-job final loss)."""
    from tqdm.auto import tqdm

    batches = plan_batches(data, batch_tokens, epochs, seed)
    total = len(batches)
    opts = {j.name: torch.optim.AdamW([p for p in j.draft.parameters() if p.requires_grad], lr=lr,
                                      betas=(0.9, 0.95), weight_decay=0.0) for j in jobs}
    step, tokens, seconds = 0, 0, 0.0
    snaps_done: list[int] = []
    if checkpoint.is_file():
        saved = torch.load(checkpoint, weights_only=False)
        if saved["plan"] != _plan_key(jobs, total, batch_tokens, epochs, lr, seed):
            raise EagleLabError(f"{checkpoint} is a checkpoint of another training plan: remove it")
        for j in jobs:
            j.draft.load_state_dict(saved["drafts"][j.name])
            opts[j.name].load_state_dict(saved["opts"][j.name])
            j.history = saved["history"][j.name]
        step, tokens, seconds, snaps_done = (saved["step"], saved["tokens"], saved["seconds"],
                                             saved["snapshots"])
        log(f"[train] resuming at step {step}/{total} ({tokens} training tokens)")
    for j in jobs:
        j.draft.train()
    last_save, t0 = time.perf_counter(), time.perf_counter() - seconds
    bar = tqdm(range(step, total), total=total, initial=step, desc="drafts: " + ",".join(j.name for j in jobs),
               disable=not progress, mininterval=5)
    for step in bar:
        batch = data.batch(batches[step], embed)
        for j in jobs:
            for group in opts[j.name].param_groups:
                group["lr"] = lr_at(step, total, lr, warmup=max(1, total // 20))
            aux = torch.cat([batch["by_boundary"][b] for b in j.boundaries], dim=-1)
            per_depth = ttt_unroll(j.draft, aux, batch["ids"], batch["labels"], j.ttt_steps,
                                   teacher="argmax", loss_mask=batch["loss_mask"])
            loss = weighted_loss(per_depth)
            opts[j.name].zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(j.draft.parameters(), 1.0)
            opts[j.name].step()
            acc = [round(float(d["hits"] / d["count"].clamp(min=1)), 4) for d in per_depth]
            j.history.append({"step": step, "loss": round(loss.item(), 5), "acc": acc})
        tokens += int(batch["loss_mask"].sum())
        bar.set_postfix({j.name: f"{j.history[-1]['acc'][0]:.2f}" for j in jobs}, refresh=False)
        for mark in snapshot_tokens:
            if tokens >= mark and mark not in snaps_done and snapshot_dir is not None:
                _snapshot(jobs, snapshot_dir, mark)
                snaps_done.append(mark)
        done = step + 1 == total
        if done or time.perf_counter() - last_save > checkpoint_s:
            _save_checkpoint(checkpoint, jobs, opts, step + 1, tokens, time.perf_counter() - t0,
                             snaps_done, _plan_key(jobs, total, batch_tokens, epochs, lr, seed))
            last_save = time.perf_counter()
            log(f"[train] {','.join(j.name for j in jobs)}: step {step + 1}/{total}, {tokens} tokens, "
                + ", ".join(f"{j.name} loss {j.history[-1]['loss']:.3f} acc {j.history[-1]['acc']}"
                            for j in jobs))
    for j in jobs:
        j.draft.eval()
    if checkpoint.is_file() and total and step < total - 1:
        raise EagleLabError("training stopped early")
    saved = torch.load(checkpoint, weights_only=False) if checkpoint.is_file() else {}
    return {"steps": total, "training_tokens": saved.get("tokens", tokens),
            "train_s": round(saved.get("seconds", time.perf_counter() - t0), 1),
            "batches_per_epoch": total // max(epochs, 1)}


def _plan_key(jobs, total, batch_tokens, epochs, lr, seed) -> dict:
    return {"jobs": [[j.name, list(j.boundaries), j.ttt_steps] for j in jobs], "steps": total,
            "batch_tokens": batch_tokens, "epochs": epochs, "lr": lr, "seed": seed}


def _save_checkpoint(path: Path, jobs, opts, step, tokens, seconds, snaps, plan) -> None:
    tmp = path.with_name(path.name + ".tmp")
    torch.save({"drafts": {j.name: j.draft.state_dict() for j in jobs},
                "opts": {j.name: opts[j.name].state_dict() for j in jobs},
                "history": {j.name: j.history for j in jobs}, "step": step, "tokens": tokens,
                "seconds": seconds, "snapshots": snaps, "plan": plan}, tmp)
    os.replace(tmp, path)


def _snapshot(jobs, folder: Path, mark: int) -> None:
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    for j in jobs:
        state = {k: v.detach().to(torch.float16).contiguous() for k, v in trained_state(j.draft).items()}
        tmp = folder / f"{j.name}-{mark}.safetensors.tmp"
        save_file(state, str(tmp))
        os.replace(tmp, folder / f"{j.name}-{mark}.safetensors")


FROZEN_PREFIXES = ("embed_tokens.", "lm_head.", "d2t", "t2d")


def trained_state(draft) -> dict[str, torch.Tensor]:
    """The tensors training changed (not the target's embedding, the frozen LM head taken from
    the target's tied embedding, or the vocabulary maps)."""
    return {k: v for k, v in draft.state_dict().items() if not k.startswith(FROZEN_PREFIXES)}

"""The target's own greedy responses to the prompt set: the data the real-model lab's drafts train on.

Two modes: "chat" renders each prompt with the target's chat template (the served path), "raw"
feeds the prompt text as it is (a completion endpoint; the no-template draft trains on these).
Generation is batched with left padding and greedy; each finished batch is appended to a JSONL
cache file (one line per prompt) and flushed, so a killed run resumes where it stopped. A torn
last line (a kill mid-write) is dropped on reading and rewritten on resume.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

import torch

from eagle3lab.errors import EagleLabError
from eagle3lab.paths import cache_dir

MODES = ("chat", "raw")
GEN_VERSION = "1"  # bump when the generation below changes what it writes
CHUNK = 64         # prompts sorted by length within consecutive chunks of this many
BATCH_TOKENS = 16384  # a batch's padded prompt tokens at most (long prompts come fewer at a time)


def render(tokenizer, text: str, mode: str) -> list[int]:
    """Prompt token ids as the target reads them in `mode`."""
    if mode == "chat":
        ids = tokenizer.apply_chat_template([{"role": "user", "content": text}],
                                            add_generation_prompt=True, tokenize=True)
        if isinstance(ids, dict) or hasattr(ids, "keys"):
            ids = ids["input_ids"]
        return list(ids)
    if mode == "raw":
        return list(tokenizer(text, add_special_tokens=False)["input_ids"])
    raise EagleLabError(f"unknown response mode {mode!r} (choose from {', '.join(MODES)})")


def stop_ids(tokenizer) -> list[int]:
    """<|im_end|> ends a chat turn, <|endoftext|> a document (raw completions stop at either)."""
    ids = {tokenizer.eos_token_id}
    for tok in ("<|im_end|>", "<|endoftext|>"):
        tid = tokenizer.convert_tokens_to_ids(tok)
        if isinstance(tid, int) and tokenizer.convert_ids_to_tokens(tid) == tok:
            ids.add(tid)
    return sorted(i for i in ids if i is not None)


@torch.no_grad()
def generate_batch(model, prompts: list[list[int]], max_new_tokens: int, stops: list[int],
                   pad_id: int) -> list[list[int]]:
    """Greedy responses to prompts of any lengths, left-padded into one batch; a row that
    stops leaves the batch (its cache rows dropped), so short answers cost no padding steps.
    Each response ends with its stop token, or at max_new_tokens."""
    from transformers import DynamicCache

    width = max(map(len, prompts))
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, p in enumerate(prompts):
        ids[row, width - len(p):] = torch.tensor(p)
        mask[row, width - len(p):] = 1
    position = (mask.cumsum(-1) - 1).clamp(min=0)
    cache = DynamicCache()
    logits = model(input_ids=ids, attention_mask=mask, position_ids=position, past_key_values=cache,
                   use_cache=True, logits_to_keep=1).logits
    nxt, position = logits[:, -1].argmax(-1), position[:, -1]
    alive, results, stop_set = list(range(len(prompts))), [[] for _ in prompts], set(stops)
    while True:
        for i, row in enumerate(alive):
            results[row].append(int(nxt[i]))
        keep = [i for i, row in enumerate(alive)
                if results[row][-1] not in stop_set and len(results[row]) < max_new_tokens]
        if not keep:
            return results
        if len(keep) < len(alive):
            index = torch.tensor(keep)
            cache.batch_select_indices(index)
            mask, nxt, position = mask[index], nxt[index], position[index]
            alive = [alive[i] for i in keep]
        mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)
        position = position + 1
        logits = model(input_ids=nxt[:, None], attention_mask=mask, position_ids=position[:, None],
                       past_key_values=cache, use_cache=True).logits
        nxt = logits[:, -1].argmax(-1)


def cache_file(mode: str, settings: dict) -> Path:
    key = hashlib.sha256(json.dumps({"v": GEN_VERSION, "mode": mode, **settings},
                                    sort_keys=True).encode()).hexdigest()[:12]
    return cache_dir("smollm2", "responses") / f"{mode}-{key}.jsonl"


def read_records(path: Path) -> list[dict]:
    """The complete lines of a response cache (a torn last line is ignored)."""
    if not Path(path).is_file():
        return []
    out = []
    for line in Path(path).read_text().splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            break
        if isinstance(rec, dict) and "id" in rec:
            out.append(rec)
    return out


def _rewrite_complete(path: Path, records: list[dict]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(r) + "\n" for r in records))
    tmp.replace(path)


def generate_responses(model, tokenizer, prompts, mode: str, *, max_new_tokens: int,
                       batch: int, settings: dict, limit: int | None = None, log=print,
                       progress: bool = True) -> Path:
    """Generate (or finish generating) `mode` responses for `prompts` (chat_prompts.Prompt);
    returns the cache file. `limit` stops after that many prompts (held-out ones first)."""
    from eagle3lab.lab.smollm2 import folder_lock

    path = cache_file(mode, settings | {"max_new_tokens": max_new_tokens})
    with folder_lock(path):  # one writer per cache file
        return _generate_into(path, model, tokenizer, prompts, mode, max_new_tokens=max_new_tokens,
                              batch=batch, limit=limit, log=log, progress=progress)


def _generate_into(path: Path, model, tokenizer, prompts, mode: str, *, max_new_tokens: int,
                   batch: int, limit: int | None, log, progress: bool) -> Path:
    from tqdm.auto import tqdm

    done = read_records(path)
    if path.is_file() and len(done) != len(path.read_text().splitlines()):
        _rewrite_complete(path, done)  # drop a torn line before appending
    have = {r["id"] for r in done}
    todo = [p for p in prompts[:limit] if p.id not in have]
    stops, pad = stop_ids(tokenizer), tokenizer.pad_token_id
    pad = stops[0] if pad is None else pad
    log(f"[responses] {mode}: {len(have)} cached, {len(todo)} to generate -> {path}")
    bar = tqdm(total=len(todo), desc=f"responses ({mode})", disable=not progress, mininterval=5)
    started, tokens, finished = time.perf_counter(), 0, len(have)
    for c in range(0, len(todo), CHUNK):
        chunk = todo[c:c + CHUNK]
        rendered = {p.id: render(tokenizer, p.text, mode) for p in chunk}
        chunk = sorted(chunk, key=lambda p: len(rendered[p.id]))
        groups, b = [], 0
        while b < len(chunk):
            size = 1
            while (size < batch and b + size < len(chunk)
                   and (size + 1) * len(rendered[chunk[b + size].id]) <= BATCH_TOKENS):
                size += 1
            groups.append(chunk[b:b + size])
            b += size
        for group in groups:
            outs = generate_batch(model, [rendered[p.id] for p in group], max_new_tokens, stops, pad)
            with open(path, "a") as fh:
                for p, resp in zip(group, outs):
                    fh.write(json.dumps({"id": p.id, "kind": p.kind, "split": p.split, "mode": mode,
                                         "prompt_ids": rendered[p.id], "response_ids": resp,
                                         "stopped": bool(resp) and resp[-1] in stops}) + "\n")
                fh.flush()
                os.fsync(fh.fileno())
            tokens += sum(map(len, outs))
            bar.update(len(group))
            finished += len(group)
            elapsed = time.perf_counter() - started
            log(f"[responses] {mode}: {finished} prompts done, "
                f"{tokens} new tokens in {elapsed:.0f} s ({tokens / max(elapsed, 1e-9):.1f} tok/s)")
    bar.close()
    return path

"""The verify rounds a greedy chain decode of `max_new_tokens` takes on the real lab's held-out prompts, replayed.

A server decoding `max_new_tokens` tokens with a chain of `depth` drafts emits one token at prefill,
then per verify round its accepted drafts + 1, until `max_new_tokens` are out; every draft a round
accepted is counted, also those past the limit (vLLM 0.32: `v1/core/sched/scheduler.py`
`update_from_output` counts before `_update_request_with_output` trims; the lab engine's
`StepRecord.accepted` is the whole path). On the target's own greedy response teacher forcing is
what that decode sees (real_eval), so the rounds are read off `real_eval.hit_matrix` without
decoding, exactly where the stored response holds every token the last round reads (`fits`).
This is what a server's counters for the same prompts and limit must equal.
"""

from __future__ import annotations

import pandas as pd

from eagle3lab.errors import EagleLabError


def fits(record: dict, max_new_tokens: int, depth: int) -> bool:
    """Whether `record`'s stored response covers every token a decode of `max_new_tokens` with
    `depth` drafts can read (the last round reaches `depth` + 1 tokens past the limit), with no
    stop token before that (the response ends there: a chat turn ends with its stop token)."""
    return len(record["response_ids"]) >= max_new_tokens + depth + 1


def decode_rounds(hit, first_root: int, depth: int, max_new_tokens: int) -> list[int]:
    """Accepted drafts of each round of a decode that stops at `max_new_tokens` tokens, read off a
    hit matrix (`hit[t, j]`: the draft rooted at t is right at depth j + 1)."""
    rows = hit.shape[0]
    accepted, root, emitted = [], first_root, 1  # the prefill emits the first token
    while emitted < max_new_tokens:
        if root + depth >= rows:
            raise EagleLabError(f"the stored response ends before round {len(accepted) + 1} of a "
                                f"{max_new_tokens}-token decode (pick records with `fits`)")
        a = 0
        while a < depth and bool(hit[root, a]):
            a += 1
        accepted.append(a)
        root += a + 1
        emitted += a + 1
    return accepted


def replay_decode(target, draft, records: list[dict], wiring: list[int], depth: int,
                  max_new_tokens: int, use_d2t: bool = True) -> pd.DataFrame:
    """Every verify round a greedy chain decode of each record's prompt takes (`draft` fed the
    target `wiring` boundaries): DataFrame(request, round, accepted, drafted, kind)."""
    from eagle3lab.lab.real_eval import capture_records, hit_matrix

    short = [i for i, r in enumerate(records) if not fits(r, max_new_tokens, depth)]
    if short:
        raise EagleLabError(f"records {short} have stored responses shorter than {max_new_tokens} + "
                            f"{depth} + 1 tokens: their replay would not be exact")
    window = max_new_tokens + depth + 1  # the model is causal: later tokens change nothing here
    records = [{**r, "response_ids": list(r["response_ids"])[:window]} for r in records]
    rows = []
    for request, cap in enumerate(capture_records(target, records, wiring)):
        hit = hit_matrix(draft, cap, list(wiring), depth, use_d2t)
        for i, a in enumerate(decode_rounds(hit, cap["prompt_len"] - 1, depth, max_new_tokens)):
            rows.append({"request": request, "round": i, "accepted": a, "drafted": depth,
                         "kind": cap["kind"]})
    return pd.DataFrame(rows, columns=["request", "round", "accepted", "drafted", "kind"])


def counts(steps: pd.DataFrame, depth: int) -> dict:
    """A steps frame in vLLM's counters: drafts (verify rounds), draft tokens, accepted tokens,
    accepted per position (unconditional: rounds with at least i + 1 accepted)."""
    acc = steps["accepted"]
    return {"drafts": int(len(acc)), "draft_tokens": int(len(acc) * depth), "accepted": int(acc.sum()),
            "per_position": [int((acc > i).sum()) for i in range(depth)]}

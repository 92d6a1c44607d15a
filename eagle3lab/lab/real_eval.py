"""Acceptance of the real-model lab's drafts on held-out prompts, replayed from the target's greedy text.

On the target's own greedy continuation, teacher forcing is exactly what greedy decoding sees while
drafts are accepted (evaluation.chain_accept_lengths), so a chain of d draft steps accepts what
the replay says, round by round. `replay_drafts` captures each held-out sequence once in float32
(every boundary any draft reads) and replays every (draft, wiring, d2t) row on it: per round the
drafts accepted, as a steps frame the statistics module reads (accept length with its
leave-one-prompt-out interval, per-position rates). `engine_check` decodes a few prompts with the
lab engine, speculative and plain, and compares both with the replay; `repetition_share_ids`
measures the target's own text as the report measures the toy's.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import torch

from eagle3lab.lab.evaluation import chain_accept_lengths
from eagle3lab.lab.target import capture
from eagle3lab.lab.training import TeacherLabels, shift_left, ttt_unroll

SPECS = {"1/1/2": 1, "3/1/4": 3, "5/1/6": 5}   # num_steps/topk/num_draft_tokens -> chain depth


@dataclass
class Row:
    """One served configuration to replay: a draft, the boundaries fed to it, d2t used or not."""

    label: str
    draft: torch.nn.Module
    wiring: list[int]
    use_d2t: bool = True


@torch.no_grad()
def capture_records(target, records: list[dict], boundaries) -> list[dict]:
    """Per record (prompt_ids + response_ids): float32 states at `boundaries` and the target's
    argmax at every row (row t predicts token t+1)."""
    out = []
    for r in records:
        x = torch.tensor([list(r["prompt_ids"]) + list(r["response_ids"])])
        logits, states = capture(target, x, sorted(set(boundaries)))
        top = logits.argmax(-1)
        out.append({"ids": x, "states": states, "labels": TeacherLabels(torch.zeros_like(top), top),
                    "prompt_len": len(r["prompt_ids"]), "id": r.get("id"), "kind": r.get("kind")})
    return out


def greedy_agreement(captured: list[dict]) -> dict:
    """How many stored response tokens are the float32 target's argmax over the unpadded sequence
    (the replay is exact where they all are: the responses were generated batched)."""
    agree = total = 0
    for cap in captured:
        p = cap["prompt_len"]
        top = cap["labels"].target_top[0, p - 1:-1]
        agree += int((top == cap["ids"][0, p:]).sum())
        total += int(top.numel())
    return {"agree": agree, "tokens": total}


@torch.no_grad()
def hit_matrix(draft, cap: dict, wiring: list[int], depth: int, use_d2t: bool = True) -> torch.Tensor:
    """hit[t, j]: the draft rooted at t (hidden of token t, reading token t+1+j) proposes the
    target's argmax for token t+2+j at depth j+1. Without d2t the draft's ids are read as target
    ids (the dropped-map fault)."""
    aux = torch.cat([cap["states"][b] for b in wiring], dim=-1)
    steps = ttt_unroll(draft, aux, cap["ids"], cap["labels"], depth, teacher="argmax")
    n = cap["ids"].shape[1] - 1
    cols = []
    for j, step in enumerate(steps):
        ids = step["logits"][0].argmax(-1)
        proposed = draft.target_ids[ids] if use_d2t else ids
        top = shift_left(cap["labels"].target_top, 1 + j, n)[0]
        cols.append((proposed == top) & step["valid"][0])
    return torch.stack(cols, dim=1)


def replay_steps(rows: list[Row], captured: list[dict], depth: int = 5) -> pd.DataFrame:
    """Every verify round each row would take at chain depths 1..depth on every record:
    columns row, depth, request, round, accepted, drafted, kind."""
    out = []
    for row in rows:
        for request, cap in enumerate(captured):
            hit = hit_matrix(row.draft, cap, row.wiring, depth, row.use_d2t)
            for d in range(1, depth + 1):
                lengths = chain_accept_lengths(hit[:, :d], cap["prompt_len"] - 1, d)
                out += [{"row": row.label, "depth": d, "request": request, "round": i,
                         "accepted": a - 1, "drafted": d, "kind": cap["kind"]}
                        for i, a in enumerate(lengths)]
    return pd.DataFrame(out)


def teacher_forced_accuracy(rows: list[Row], captured: list[dict], depth: int = 5) -> dict[str, list]:
    """acc@1..depth over response tokens (the standalone accuracy a trainer reports)."""
    out = {}
    for row in rows:
        hits, count = torch.zeros(depth), torch.zeros(depth)
        for cap in captured:
            hit = hit_matrix(row.draft, cap, row.wiring, depth, row.use_d2t)
            n = hit.shape[0]
            for j in range(depth):
                rows_in_response = torch.arange(n) + 2 + j >= cap["prompt_len"]
                rows_in_response &= torch.arange(n) + 2 + j <= n
                hits[j] += hit[rows_in_response, j].sum()
                count[j] += rows_in_response.sum()
        out[row.label] = [round(float(h / max(c, 1)), 4) for h, c in zip(hits, count)]
    return out


def summarize(steps: pd.DataFrame) -> dict:
    """Per row: accept length with its 95 % interval at each SPECS depth, the per-position
    rates r_i = P(accepted >= i) at the deepest, and the rounds."""
    from eagle3lab.acceptance.stats import accept_length, accept_length_ci, per_position

    out = {}
    for label, frame in steps.groupby("row", sort=False):
        entry = {}
        for spec, d in SPECS.items():
            part = frame[frame["depth"] == d]
            if part.empty:
                continue
            ci = accept_length_ci(part)
            entry[spec] = {"accept_length": round(float(accept_length(part)), 4),
                           "ci95": None if ci is None else [round(ci[0], 4), round(ci[1], 4)],
                           "rounds": int(len(part)), "prompts": int(part["request"].nunique())}
        deepest = frame[frame["depth"] == frame["depth"].max()]
        per_prompt = deepest.groupby("request")["accepted"].mean() + 1
        entry[f"per_prompt_{next(s for s, d in SPECS.items() if d == deepest['depth'].max())}"] = [
            round(float(per_prompt.get(r, float("nan"))), 4) for r in range(int(frame["request"].max()) + 1)]
        pp = per_position(deepest, int(deepest["depth"].max()), conditional=False)
        entry["per_position"] = [{"position": int(r.position), "rate": round(float(r.rate), 4),
                                  "lo": round(float(r.lo), 4), "hi": round(float(r.hi), 4)}
                                 for r in pp.itertuples()]
        out[label] = entry
    return out


def by_kind(steps: pd.DataFrame, depth: int = 5) -> dict:
    """Accept length per prompt kind at `depth` (no interval: a few prompts per kind)."""
    from eagle3lab.acceptance.stats import accept_length

    part = steps[steps["depth"] == depth]
    return {label: {kind: round(float(accept_length(g)), 3) for kind, g in frame.groupby("kind")}
            for label, frame in part.groupby("row", sort=False)}


def repetition_share_ids(sequences: list[list[int]], tokenizer, window: int = 4) -> dict:
    """The share of `window`-token spans that already occurred earlier in the same response,
    over the target's greedy responses: the measure report.prose.sentences.repetition_share
    takes of the toy lab's generated tokens (token texts compared, as there)."""
    from eagle3lab.acceptance.stats import repeated_spans

    repeats, spans = repeated_spans(([tokenizer.decode([t]) for t in seq] for seq in sequences), window)
    return {"share": round(repeats / spans, 4) if spans else None, "spans": spans,
            "window": window, "requests": len(sequences)}


@torch.no_grad()
def engine_check(lab, draft, records: list[dict], steps: pd.DataFrame, row: str,
                 spec=(5, 1, 6), stop_ids=(2,)) -> list[dict]:
    """Decode each record's prompt with the lab engine (speculative at `spec` and plain) as far
    as its stored response goes; per record: whether both outputs equal the stored greedy
    response, and the engine's accepted counts against the replay's for `row` (the rounds the
    replay covers: it stops `depth` tokens before the end)."""
    from eagle3lab.decoder.labbench import make_lab_engine
    from eagle3lab.decoder.speculate import SamplingParams

    engine, _ = make_lab_engine(lab, (), draft=draft, max_seq_len=2048)
    greedy = SamplingParams()
    depth = spec[0]
    out = []
    for request, rec in enumerate(records):
        n = len(rec["response_ids"])
        spec_gen = engine.generate(rec["prompt_ids"], n, spec, greedy, stop_ids=stop_ids)
        plain = engine.generate_plain(rec["prompt_ids"], n, greedy, stop_ids=stop_ids)
        replay = steps[(steps["row"] == row) & (steps["depth"] == depth)
                       & (steps["request"] == request)]["accepted"].tolist()
        served = [s.accepted for s in spec_gen.steps][:len(replay)]
        out.append({"request": request, "id": rec.get("id"), "tokens": n,
                    "speculative_equals_greedy": spec_gen.output_ids == list(rec["response_ids"]),
                    "plain_equals_greedy": plain.output_ids == list(rec["response_ids"]),
                    "replay_rounds": len(replay), "served_matches_replay": served == replay,
                    "served_accept_length": round(spec_gen.accept_length, 4)})
    return out


def speedup(lab, draft, prompts: list[list[int]], spec=(5, 1, 6), max_new_tokens: int = 128) -> dict:
    """Speculative vs plain decoding on the lab engine at batch 1, interleaved per prompt
    (labbench.run_bench), with the speed-up's interval and whether every output matched."""
    from eagle3lab.acceptance.stats import ratio_ci
    from eagle3lab.decoder.labbench import make_lab_engine, run_bench

    engine, _ = make_lab_engine(lab, (), draft=draft, max_seq_len=2048)
    res = run_bench(lab, spec, prompts=prompts, max_new_tokens=max_new_tokens, engine=engine,
                    progress=False)
    s = res.summary()
    r = res.requests
    ci = ratio_ci(r["spec_tokens"], r["spec_s"], r["base_tokens"], r["base_s"])
    return {"spec": "/".join(map(str, spec)), "prompts": len(prompts), "max_new_tokens": max_new_tokens,
            "threads": torch.get_num_threads(), "lossless": bool(res.lossless),
            "accept_length": round(float(res.accept_length), 4),
            "tokens_per_s": round(float(res.tokens_per_s), 3),
            "baseline_tokens_per_s": round(float(res.baseline_tokens_per_s), 3),
            "speedup": round(float(res.speedup), 4),
            "speedup_ci95": None if ci is None else [round(float(ci[0]), 4), round(float(ci[1]), 4)],
            "summary": _plain(s)}


def _plain(value):
    """JSON-able copy (numpy scalars and tuples made plain)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "item"):
        return value.item()
    return value

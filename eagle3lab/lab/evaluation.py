"""Standalone draft evaluation: teacher-forced top-1 accuracy at each unrolled depth.

This is the "standalone accuracy" a training pipeline reports: the draft reads the
boundaries of `wiring` (default: the ones it was trained on) and is unrolled `depth`
steps on its own hidden states with the true tokens; acc@j is how often its top-1 at
depth j equals the target's top-1; `loss` is the cross-entropy of the draft against that same
top-1 token (nats), i.e. what the lab's drafts are trained on (teacher "argmax"). Scoring it
against the target's whole soft distribution instead rewards a draft for hedging (a draft fed
the wrong states is less sure, so it scored a lower loss at lower accuracy) and exceeds
ln(vocab) for a confident draft on a diffuse target. Serving the draft with other boundaries (SGLang's
+1 rule on the config ids) is the same call with wiring=[id + 1 for id in ids].
"""

from __future__ import annotations

import pandas as pd
import torch

from eagle3lab.errors import EagleLabError
from eagle3lab.lab.target import capture, interleaved_windows
from eagle3lab.lab.training import concat_aux, ttt_unroll


def _token_windows(texts, tokenizer, seq_len: int, limit: int) -> list[list[int]]:
    docs = []
    for text in texts:
        if isinstance(text, str):
            if tokenizer is None:
                raise EagleLabError("evaluate_draft needs a tokenizer for text input")
            docs.append(tokenizer(text, add_special_tokens=False)["input_ids"])
        else:
            docs.append(list(text))
    return interleaved_windows(docs, seq_len, limit, min_len=3)


@torch.no_grad()
def evaluate_draft(target, draft, texts, wiring: list[int] | None = None,
                   depth: int | None = None, *, tokenizer=None, seq_len: int = 128,
                   max_windows: int = 64, teacher: str = "argmax") -> pd.DataFrame:
    """acc@1..depth of `draft` on `texts` (strings or token-id lists), one row per depth.

    `target` is a LlamaForCausalLM or a Lab (whose tokenizer is then used).
    Columns: depth, accuracy, loss, positions, wiring.
    """
    if hasattr(target, "target") and hasattr(target, "tokenizer"):
        tokenizer = tokenizer or target.tokenizer
        target = target.target
    wiring = list(wiring) if wiring is not None else draft.train_boundaries
    depth = depth or max(draft.ttt_steps, 1)
    if len(wiring) * target.config.hidden_size != draft.fc.in_features:
        raise EagleLabError(f"wiring {wiring} gives {len(wiring)} states; the draft's fc "
                            f"reads {draft.fc.in_features // target.config.hidden_size}")
    windows = _token_windows(texts, tokenizer, seq_len, max_windows)
    if not windows:
        raise EagleLabError("no evaluation text (need at least 3 tokens)")
    totals = {j: {"hits": 0, "count": 0, "loss": 0.0} for j in range(1, depth + 1)}
    for w in windows:
        x = torch.tensor([w])
        logits, states = capture(target, x, wiring)
        for d in ttt_unroll(draft, concat_aux(states, wiring), x, logits, depth, teacher=teacher):
            row = totals[d["depth"]]
            row["hits"] += int(d["hits"])
            row["count"] += int(d["count"])
            row["loss"] += float(d["loss"]) * int(d["count"])
    return pd.DataFrame([{"depth": j, "accuracy": r["hits"] / max(r["count"], 1),
                          "loss": r["loss"] / max(r["count"], 1), "positions": r["count"],
                          "wiring": str(wiring)} for j, r in totals.items()])


def chain_accept_lengths(hit_mask: torch.Tensor, first_root: int, depth: int) -> list[int]:
    """Accept length (accepted drafts + the bonus token) of each verify round of greedy
    chain decoding with `depth` draft steps, read off a teacher-forced hit matrix.

    hit_mask[t, j]: the draft, rooted at t (hidden of token t, input token t+1), got
    token t+2+j right at depth j+1. On the target's own greedy text teacher forcing *is*
    what decoding sees while drafts are being accepted, so this replays decoding: a
    round rooted at t accepts the leading hits, then the next round is rooted at
    t + accepted + 1 (the bonus token's predecessor).
    """
    n = hit_mask.shape[0]
    lengths, t = [], first_root
    while t + depth < n:
        accepted = 0
        while accepted < depth and bool(hit_mask[t, accepted]):
            accepted += 1
        lengths.append(accepted + 1)
        t += accepted + 1
    return lengths


@torch.no_grad()
def evaluate_acceptance(target, draft, prompts: list[list[int]], new_tokens: int = 128,
                        depth: int | None = None, wiring: list[int] | None = None,
                        continuations: list[torch.Tensor] | None = None) -> pd.DataFrame:
    """Greedy chain accept length at every chain depth 1..depth, replayed offline on the
    target's own greedy continuations of `prompts` (no engine needed).

    Columns: depth, accept_length, rounds, wiring. Pass `continuations` (from
    `greedy_continuations`) to reuse them across drafts.
    """
    if hasattr(target, "target") and hasattr(target, "tokenizer"):
        target = target.target
    wiring = list(wiring) if wiring is not None else draft.train_boundaries
    depth = depth or max(draft.ttt_steps, 1)
    seqs = continuations or greedy_continuations(target, prompts, new_tokens)
    per_depth = {d: [] for d in range(1, depth + 1)}
    for x, prompt in zip(seqs, prompts):
        x = x[None]
        logits, states = capture(target, x, wiring)
        out = ttt_unroll(draft, concat_aux(states, wiring), x, logits, depth)
        hit = torch.stack([o["hit_mask"][0] for o in out], dim=1)  # [n, depth]
        for d in per_depth:
            per_depth[d] += chain_accept_lengths(hit[:, :d], len(prompt) - 1, d)
    return pd.DataFrame([{"depth": d, "accept_length": sum(v) / max(len(v), 1),
                          "rounds": len(v), "wiring": str(wiring)}
                         for d, v in per_depth.items()])


@torch.no_grad()
def greedy_continuations(target, prompts: list[list[int]], new_tokens: int) -> list[torch.Tensor]:
    """prompt + the target's greedy continuation, one tensor per prompt."""
    from eagle3lab.lab.target import greedy_continue

    if len({len(p) for p in prompts}) == 1:
        out = []
        for i in range(0, len(prompts), 16):
            out += list(greedy_continue(target, torch.tensor(prompts[i:i + 16]), new_tokens))
        return out
    return [greedy_continue(target, torch.tensor([p]), new_tokens)[0] for p in prompts]


@torch.no_grad()
def served_text_replay(target, draft, generations, depth: int,
                       wiring: list[int] | None = None) -> dict:
    """What a correct serve of `draft` would have accepted on the text that was served.

    For each served request the full-precision `target` reads prompt + output once; the draft,
    fed the boundaries it was trained on (`wiring`, default its own), is unrolled `depth` steps
    from every root and scored against the served tokens. At temperature 0 on the target's own
    greedy text this replays decoding exactly (see chain_accept_lengths), so per served step
    (rooted at context_length - 2, the bonus token's predecessor) `reference_accepted` is what
    the same step would have accepted had the draft been served as it was trained (NaN where the
    text ends before the chain would). `target_agreement` is the share of served output tokens
    that are the full-precision target's own argmax; each that is not gives its logit margin (the
    target's best logit minus the served token's): beyond a numerical tie, the served target is not
    this one (e.g. quantized), and the replay is no longer an exact counterfactual. Where the
    generations carry the served log-probabilities (`Generation.logprobs`; SGLang's
    return_logprob, vLLM's logprobs=0), `logprob_deltas` holds |served - reference| per output
    token: a target that computes something else shows there even when every greedy choice agrees.
    Returns {"reference_accepted": [...], "tokens_checked": int, "mismatch_margins": [...],
    "logprob_deltas": [...]} (the last empty when no log-probabilities were served).
    """
    if hasattr(target, "target") and hasattr(target, "tokenizer"):
        target = target.target
    wiring = list(wiring) if wiring is not None else draft.train_boundaries
    reference, margins, count, deltas = [], [], 0, []
    for gen in generations:
        ids = list(gen.prompt_ids) + list(gen.output_ids)
        x = torch.tensor([ids])
        logits, states = capture(target, x, wiring)
        start = len(gen.prompt_ids)
        rows_logits = logits[0, start - 1:len(ids) - 1]
        served = x[0, start:]
        best = rows_logits.max(-1).values
        margin = best - rows_logits.gather(-1, served[:, None])[:, 0]  # 0 where served = argmax
        agree = rows_logits.argmax(-1) == served
        count += int(agree.numel())
        margins += [round(float(m), 6) for m in margin[~agree]]
        served_lp = list(getattr(gen, "logprobs", None) or [])
        if len(served_lp) == len(served):
            ref_lp = rows_logits.log_softmax(-1).gather(-1, served[:, None])[:, 0]
            deltas += [float(abs(a - float(b))) for a, b in zip(served_lp, ref_lp)]
        out = ttt_unroll(draft, concat_aux(states, wiring), x, logits, depth, teacher="argmax")
        n = len(ids)
        # hit[t, j]: the draft rooted at t (reading token t+1+j) proposes served token t+2+j
        hit = torch.zeros(n - 1, depth, dtype=torch.bool)
        for j, step in enumerate(out):
            proposed = draft.target_ids[step["logits"][0].argmax(-1)]  # [n-1]
            rows = torch.arange(n - 2 - j)
            hit[rows, j] = proposed[rows] == x[0, rows + 2 + j]
        context = len(gen.prompt_ids) + 1
        for st in gen.steps:
            root = context - 2
            if root + depth + 1 < n:
                run, limit = 0, min(depth, st.drafted)
                while run < limit and bool(hit[root, run]):
                    run += 1
                reference.append(float(run))
            else:
                reference.append(float("nan"))
            context += st.accepted + 1
    return {"reference_accepted": reference, "tokens_checked": count, "mismatch_margins": margins,
            "logprob_deltas": deltas}

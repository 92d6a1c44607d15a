"""Standalone draft evaluation: teacher-forced top-1 accuracy at each unrolled depth.

This is the "standalone accuracy" a training pipeline reports: the draft reads the
boundaries of `wiring` (default: the ones it was trained on) and is unrolled `depth`
steps on its own hidden states with the true tokens; acc@j is how often its top-1 at
depth j equals the target's top-1. Serving the draft with other boundaries (SGLang's
+1 rule on the config ids) is the same call with wiring=[id + 1 for id in ids].
"""

from __future__ import annotations

import pandas as pd
import torch

from eagle3lab.errors import EagleLabError
from eagle3lab.lab.target import capture
from eagle3lab.lab.training import concat_aux, ttt_unroll


def _token_windows(texts, tokenizer, seq_len: int) -> list[list[int]]:
    windows = []
    for text in texts:
        if isinstance(text, str):
            if tokenizer is None:
                raise EagleLabError("evaluate_draft needs a tokenizer for text input")
            ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        else:
            ids = list(text)
        windows += [ids[i:i + seq_len] for i in range(0, len(ids), seq_len)]
    return [w for w in windows if len(w) >= 3]


@torch.no_grad()
def evaluate_draft(target, draft, texts, wiring: list[int] | None = None,
                   depth: int | None = None, *, tokenizer=None, seq_len: int = 128,
                   max_windows: int = 64) -> pd.DataFrame:
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
    windows = _token_windows(texts, tokenizer, seq_len)[:max_windows]
    if not windows:
        raise EagleLabError("no evaluation text (need at least 3 tokens)")
    totals = {j: {"hits": 0, "count": 0, "loss": 0.0} for j in range(1, depth + 1)}
    for w in windows:
        x = torch.tensor([w])
        logits, states = capture(target, x, wiring)
        for d in ttt_unroll(draft, concat_aux(states, wiring), x, logits, depth):
            row = totals[d["depth"]]
            row["hits"] += int(d["hits"])
            row["count"] += int(d["count"])
            row["loss"] += float(d["loss"]) * int(d["count"])
    return pd.DataFrame([{"depth": j, "accuracy": r["hits"] / max(r["count"], 1),
                          "loss": r["loss"] / max(r["count"], 1), "positions": r["count"],
                          "wiring": str(wiring)} for j, r in totals.items()])

"""The lab: targets and EAGLE-3 drafts built on this machine (a tiny trained Llama, a real pretrained chat model), their data and evaluation. Not: decoding with them (decoder) or serving them (engines, serving).

`load_lab(preset)` returns a `Lab` (tokenizer, target, drafts, held-out data);
`eagle3lab lab build` makes one. Heavy imports happen on first use.

May import: decoder (the draft model, the decoder), spec, wiring, acceptance, sources, errors,
paths; never serving, experiments or above.
"""

from __future__ import annotations

__all__ = ["Lab", "load_lab", "Eagle3Draft", "KVCache", "evaluate_draft", "build_lab"]


def __getattr__(name):
    if name in ("Lab", "load_lab"):
        from eagle3lab.lab import built as _lab

        return getattr(_lab, name)
    if name in ("Eagle3Draft", "KVCache"):
        from eagle3lab.decoder import draft as _draft

        return getattr(_draft, name)
    if name == "evaluate_draft":
        from eagle3lab.lab.evaluation import evaluate_draft

        return evaluate_draft
    if name == "build_lab":
        from eagle3lab.lab.build import build_lab

        return build_lab
    raise AttributeError(name)

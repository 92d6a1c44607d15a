"""TensorRT-LLM `trtllm-bench` decoding statistics: `[AR] MINIMUM: 1.73` ... `[AR] P99: ...`,
where AR is tokens per iteration (an acceptance length, not a 0-1 rate; docs/sources.md)."""

MARKER = r"(?P<ar>\[AR\]\s*(?P<arstat>[A-Za-z0-9]+)\s*:)"

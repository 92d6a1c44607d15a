"""vLLM spec-decode and engine metric lines: V1 `SpecDecoding metrics:`
(vllm/v1/spec_decode/metrics.py), V0 `Speculative metrics:` (vllm/spec_decode/metrics.py),
engine throughput lines (vllm/v1/metrics/loggers.py; V0 engine/metrics.py) and the offline
example scripts' summaries (docs/sources.md)."""

MARKER_V1 = r"(?P<vspec>SpecDecoding metrics:)"
MARKER_V0 = r"(?P<v0>Speculative metrics:)"
MARKER_STATS = r"(?P<vstats>Avg prompt throughput:|Avg generation throughput:)"
MARKER_OFFLINE_MEAN = r"(?P<offmean>(?<![A-Za-z])mean acceptance length:)"
MARKER_OFFLINE_POS = r"(?P<offpos>(?<![A-Za-z])acceptance at token (?P<pos>\d+)\s*:)"
MARKER_OFFLINE_COUNT = r"(?P<offcount>(?<![A-Za-z_])num_(?P<offkey>drafts|draft_tokens|accepted_tokens):)"

KEYS = {
    # V1 SpecDecoding metrics
    "draft acceptance rate": ("draft_accept_rate", "num"),
    "avg draft acceptance rate": ("draft_accept_rate", "num"),
    "mean acceptance length": ("accept_len", "num"),
    "accepted": ("accepted", "num"), "drafted": ("drafted", "num"),
    "per-position acceptance rate": ("per_position", "list"),
    # V0 Speculative metrics
    "number of speculative tokens": ("num_spec_tokens", "num"),
    "number of accepted tokens": ("accepted", "num"),
    "number of draft tokens": ("drafted", "num"),
    "number of emitted tokens": ("emitted", "num"),
    # engine stats
    "avg prompt throughput": ("input_throughput", "num"),
    "avg generation throughput": ("gen_throughput", "num"),
    "running": ("running_req", "num"), "waiting": ("queue_req", "num"),
    "pending": ("queue_req", "num"), "gpu kv cache usage": ("token_usage", "num"),
}

IGNORED = {
    "accepted throughput", "drafted throughput", "system efficiency", "prefix cache hit rate",
    "swapped", "cpu kv cache usage",
}

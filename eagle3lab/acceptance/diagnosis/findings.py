"""`Finding`: one candidate cause with its evidence and what to check or fix next.

The one type for both the doctor (facts read in checkpoints, flags, logs, a server) and the
diagnosis rules (ranked guesses from acceptance statistics). Imports pandas only (when a frame is
asked for: the doctor's bad-input errors come before it), so both can import it without an upward
arrow.

weight: the rule's hand-set ordering weight (0..1). It ranks findings and gates a few rules; it
is not a probability (no rule's hit rate has been measured on enough held-out labs to calibrate
one), so nothing shown to a user prints it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

SEVERITY_RANK = {"error": 0, "warning": 1, "info": 2}
# "server": what a running server says it runs (/server_info, /metrics' series); "metrics": the
# acceptance it measures and the statistical guesses made from it (doctor/served.py);
# "statistics": the diagnosis rules on acceptance statistics.
SOURCE_RANK = {"checkpoint": 0, "empirical": 1, "config": 2, "server": 3, "log": 4, "metrics": 5,
               "statistics": 5}


@dataclass
class Finding:
    """One cause with its evidence (with the numbers) and its fix or next check."""

    cause: str  # short machine name: wiring, vocab_mapping, lm_head, rope, ...
    severity: str = "info"  # error / warning / info
    title: str = ""
    evidence: str = ""
    fix: str = ""  # for a statistical guess: the next check that would confirm it
    weight: float = 1.0  # ordering within a severity and source; not a probability, never shown
    source: str = "checkpoint"
    check: str = ""  # the check (or rule) that produced it
    data: dict = field(default_factory=dict)

    @property
    def rank_key(self):
        return (SEVERITY_RANK.get(self.severity, 3), SOURCE_RANK.get(self.source, 9), -self.weight)

    @property
    def next_check(self) -> str:
        """What a statistical guess asks to check next (its `fix`)."""
        return self.fix

    def __str__(self) -> str:
        return f"{self.cause}: {self.evidence} Next: {self.fix}"


def findings_frame(findings: Sequence[Finding]) -> "pd.DataFrame":
    """Ranked guesses as a DataFrame (rank, cause, evidence, next_check) for notebooks; the rank
    is the order, no probability is claimed."""
    import pandas as pd

    return pd.DataFrame([{"rank": i + 1, "cause": f.cause, "evidence": f.evidence,
                          "next_check": f.fix} for i, f in enumerate(findings)],
                        columns=["rank", "cause", "evidence", "next_check"])

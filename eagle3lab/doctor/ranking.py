"""The doctor's findings, their ranking and their rendering (text, JSON, DataFrame).

Ranking: errors before warnings before info; within a severity, evidence read in the
checkpoints or measured on them ("checkpoint", "empirical") before the flags ("config"), what a
running server says it runs ("server"), logs ("log") and statistics of acceptance ("metrics",
"statistics"), then by the rule's hand-set weight. A finding from the checkpoints outranks a
statistical guess because it is a fact about what will be served, not an inference from its
effect. The weight only orders findings: no rule's hit rate has been measured on enough held-out
labs to make it a probability, so no output (text, frame, JSON) shows it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from eagle3lab.acceptance.diagnosis.findings import Finding


@dataclass
class CheckStatus:
    """Whether a check ran; when not, why (missing target, model too large, ...)."""

    check: str
    ran: bool
    detail: str = ""
    seconds: float | None = None


@dataclass
class DoctorReport:
    draft: str
    target: str | None
    serve: str | None
    findings: list[Finding]
    checks: list[CheckStatus]
    facts: dict = field(default_factory=dict)  # what was read: layout, ids, layers, fed, ...

    def __post_init__(self):
        self.findings = sorted(self.findings, key=lambda f: f.rank_key)

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    @property
    def exit_code(self) -> int:
        return 1 if self.errors else 0

    def to_frame(self):
        """One row per finding, ranked: rank, severity, cause, source, check, title, evidence, fix."""
        import pandas as pd

        rows = [{"rank": i + 1, "severity": f.severity, "cause": f.cause, "source": f.source, "check": f.check, "title": f.title, "evidence": f.evidence, "fix": f.fix}
                for i, f in enumerate(self.findings)]
        return pd.DataFrame(rows, columns=["rank", "severity", "cause", "source", "check", "title",
                                           "evidence", "fix"])

    def checks_frame(self):
        import pandas as pd

        return pd.DataFrame([asdict(c) for c in self.checks], columns=["check", "ran", "detail", "seconds"])

    def to_dict(self) -> dict:
        return {"draft": self.draft, "target": self.target, "serve": self.serve,
                "exit_code": self.exit_code, "facts": _jsonable(self.facts),
                "findings": [_jsonable({k: v for k, v in asdict(f).items() if k != "weight"})
                             for f in self.findings],
                "checks": [asdict(c) for c in self.checks]}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def __str__(self) -> str:
        lines = [f"eagle3lab doctor: {self.draft}" + (f"  (target {self.target})" if self.target else ""),
                 f"serving: {self.serve or 'not given (both engines shown where they differ)'}"]
        n_err = len(self.errors)
        n_warn = sum(f.severity == "warning" for f in self.findings)
        if self.facts.get("empirical_text"):  # which texts the empirical checks scored, always said
            lines.append(f"texts scored: {self.facts['empirical_text']}")
        lines.append(f"{n_err} error(s), {n_warn} warning(s), "
                     f"{len(self.findings) - n_err - n_warn} note(s)")
        for i, f in enumerate(self.findings, 1):
            lines += ["", f"{i}. [{f.severity.upper()}] {f.title}  ({f.cause}, {f.source})",
                      f"   evidence: {f.evidence}"]
            if f.fix:
                lines.append(f"   fix: {f.fix}")
        skipped = [c for c in self.checks if not c.ran]
        if skipped:
            lines += ["", "checks that could not run:"]
            lines += [f"  - {c.check}: {c.detail}" for c in skipped]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        from html import escape

        return "<pre>" + escape(str(self)) + "</pre>"


def _jsonable(value):
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        try:
            return value.item()
        except (ValueError, AttributeError):
            pass
    if isinstance(value, float) and value != value:
        return None
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)

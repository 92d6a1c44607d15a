"""Diagnosis: rank the likely causes of a low accept length from acceptance statistics. Not: reading checkpoints or servers (doctor).

`diagnose(observation)` reads what a deployer can measure (per-position rates, accept length,
the draft tokens asked and run, per-step context lengths, the draft's own evaluation, a replay of
the served text) and returns ranked `Finding`s -- an order by the rules' weights, never a
probability. The rules are tables in `rules.py` (one row per rule per cause: the evidence it
reads, its threshold, what it excludes), like `decoder/faults.py`'s fault table.

May import: `stats`, `predict`, `findings`, `errors` (never an engine, a source or the doctor).
"""

from eagle3lab.acceptance.diagnosis.diagnose import acceptance_signature, diagnose, rate_evidence
from eagle3lab.acceptance.diagnosis.cause_rules import (CAUSES, NEXT_CHECKS, RATE_RULES, REASONS, STAGES, THRESHOLDS,
                                       Rule, Stage)
from eagle3lab.acceptance.diagnosis.findings import Finding, findings_frame

__all__ = ["diagnose", "acceptance_signature", "rate_evidence", "CAUSES", "NEXT_CHECKS", "RATE_RULES",
           "REASONS", "STAGES", "THRESHOLDS", "Rule", "Stage", "Finding", "findings_frame"]

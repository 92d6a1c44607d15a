"""The sentences a notebook shows: every figure interpolated from a measurement, never typed in. Not: the post-mortem page (report.postmortem)."""

from __future__ import annotations

from eagle3lab.report.prose.sentences import *  # noqa: F401,F403
from eagle3lab.report.prose.rate_tables import *  # noqa: F401,F403
from eagle3lab.report.prose.words import *  # noqa: F401,F403
from eagle3lab.report.prose.words import (HEADLINE_KEY, INCIDENT, _ci, _count, _finite, _get, _in_report_store,  # noqa: F401
                                   _prompts)

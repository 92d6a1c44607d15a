"""The post-mortem page: the incident record and the notebooks' recorded evidence, answer first. Not: the notebooks' own prose (report.prose)."""

from eagle3lab.report.postmortem.page import DETAILS, RUNBOOK, details_markdown, index_markdown, runbook_markdown  # noqa: F401


def beside_incident(steps=None, ev: dict | None = None) -> str:
    """The timeline rows of `steps` (all when None) as Markdown, from what this notebook recorded:
    a notebook shows the incident-versus-lab rows of its own measurements."""
    from eagle3lab.report import evidence
    from eagle3lab.report.postmortem import tables

    rows = [r for r in tables.timeline_rows(ev if ev is not None else evidence.so_far())
            if steps is None or r["step"] in steps]
    return tables.markdown_table(rows) or "*Nothing measured here has an incident counterpart.*"


def trust_markdown(ev: dict | None = None) -> str:
    """What the diagnosis on a lab draft with a known fault is (a check of the method) and what to
    trust instead (its blind score on a held-out lab)."""
    from eagle3lab.report import evidence
    from eagle3lab.report.postmortem import page

    return page.trust_section(ev if ev is not None else evidence.so_far())


def hypotheses_markdown(ev: dict | None = None) -> str:
    """Notebook 05's table of hypotheses against the incident, and the measurement that separates
    the consistent ones."""
    from eagle3lab.report import evidence
    from eagle3lab.report.postmortem import page, tables

    ev = ev if ev is not None else evidence.so_far()
    rows = tables.hypothesis_rows(ev)
    return page.hypotheses_section(rows) + "\n\n" + page.next_measurement(rows)

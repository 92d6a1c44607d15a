"""CI executes every notebook against the ci lab and fails on any error output.

This is the report machinery end to end (`eagle3lab report --lab ci`): each notebook runs top to
bottom in a fresh kernel with LAB="ci" injected into its parameters cell. The report is rendered
once per session (`ci_report` in conftest.py) and shared with the browser test.
"""

from __future__ import annotations

import json

import pytest

from eagle3lab import report

pytestmark = pytest.mark.slow

SKIP_NOTE = "which this checkout does not have yet"


def test_every_notebook_executes_without_error(ci_report):
    names = [run.name for run in ci_report.runs]
    assert [n[:2] for n in names] == ["01", "02", "03", "04", "05"]
    failures = [str(run.error) for run in ci_report.runs if not run.ok]
    assert not failures, "\n".join(failures)
    for run in ci_report.runs:
        assert report.find_errors(run.notebook, run.name) == []
        code = [c for c in run.notebook.cells if c.cell_type == "code"]
        assert all(c.get("execution_count") for c in code), f"{run.name}: a cell did not run"
        assert SKIP_NOTE not in json.dumps([c.get("outputs", []) for c in code]), run.name


def test_each_notebook_ran_with_the_ci_lab_and_produced_figures(ci_report):
    for run in ci_report.runs:
        assert report.read_parameters(run.notebook)["LAB"] == "ci", run.name
        pngs = sum("image/png" in o.get("data", {}) for c in run.notebook.cells
                   for o in c.get("outputs", []))
        assert pngs >= 1, f"{run.name} produced no figure"


def test_the_post_mortem_embeds_every_notebook_and_its_plots(ci_report):
    index = ci_report.index_path.read_text()
    for run in ci_report.runs:
        assert f'id="{run.name}"' in index
        assert run.html_path.exists() and run.ipynb_path.exists()
    pngs = sum(sum("image/png" in o.get("data", {}) for c in run.notebook.cells for o in c.get("outputs", []))
               for run in ci_report.runs)
    assert index.count("data:image/png;base64,") >= pngs
    summary = json.loads((ci_report.out_dir / "summary.json").read_text())
    assert summary["ok"] is True and summary["lab"] == "ci"


def test_the_index_can_be_sent_alone_and_carries_no_local_path(ci_report):
    index = ci_report.index_path.read_text()
    assert report.broken_links(index) == []
    assert report.local_paths(index) == []
    assert "What carries over" in index


def test_the_rendered_index_defines_terms_before_use_and_intervals_hold(ci_report):
    import re

    from eagle3lab import glossary, prose

    index = ci_report.index_path.read_text()
    body = re.sub(r"<(script|style)[^>]*>.*?</\1>", " ", index, flags=re.S)
    body = re.sub(r'<dfn title="([^"]+)"[^>]*>', "\x00\\1\x01", body)  # keep the definitions' marks
    blocks = [re.sub(r"<[^>]+>", "", b) for b in re.split(r'<div class="jp-Cell ', body)]
    blocks = [re.sub("\x00(.*?)\x01", r'<dfn title="\1">', b) for b in blocks]
    assert glossary.undefined_before_use(blocks, slack=2) == []
    # every "x [lo, hi]" a sentence prints has its estimate inside its interval
    plain = re.sub(r"<[^>]+>", "", index).replace("**", "")
    for point, lo, hi in re.findall(r"(\d+\.\d+)×? \[(\d+\.\d+), (\d+\.\d+)\]", plain):
        assert prose.interval_holds(float(point), [float(lo), float(hi)]), (point, lo, hi)


def test_05_says_the_lab_server_has_no_load_and_where_to_measure_it(ci_report):
    run = next(r for r in ci_report.runs if r.name.startswith("05"))
    text = "\n".join(str(out.get("data", {}).get("text/markdown", "")) for cell in run.notebook.cells
                     for out in cell.get("outputs", []))
    assert "Nothing is measured under load on the lab backend" in text
    assert "the lab server serves one request at a time" in text
    assert "No load sweep of the ci lab is stored in data/load/" in text  # the default lab's are not shown

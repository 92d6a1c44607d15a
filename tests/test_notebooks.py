"""CI executes every notebook against the ci lab and fails on any error output.

This is the report machinery end to end (`eagle3lab report --lab ci`): each notebook runs top to
bottom in a fresh kernel with LAB="ci" injected into its parameters cell. The report is rendered
once per session (`ci_report` in conftest.py) and shared with the browser test.
"""

from __future__ import annotations

import json

import pytest

from eagle3lab.report import render as report

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


def test_the_index_is_a_post_mortem_that_links_every_notebook_page(ci_report):
    import re

    index = ci_report.index_path.read_text()
    for run in ci_report.runs:
        assert f'href="{run.name}.html"' in index
        assert run.html_path.exists() and run.ipynb_path.exists()
    assert not re.search(r'class="[^"]*jp-CodeCell', index), "the index shows code cells"
    heads = re.findall(r"<h2[^>]*>(.*?)<", index)
    assert heads == ["Summary", "Known, unknown, do next", "The evidence", "Terms"], heads
    assert (ci_report.out_dir / "eagle3_probe.py").is_file()  # the next measurement, next to the pages
    # the evidence in full is the second page, linked from the first
    details = (ci_report.out_dir / "details.html").read_text()
    runbook = (ci_report.out_dir / "runbook.html").read_text()  # the box's items in full
    assert 'href="details.html"' in index and 'href="index.html"' in details
    # each of the box's items links its section of the runbook (no separate line for the runbook's top)
    assert all(f'href="runbook.html#Item-{i}:' in index for i in range(1, 7)) and 'href="index.html"' in runbook
    assert [h.rstrip("¶") for h in re.findall(r"<h2[^>]*>(.*?)<", runbook)][:7] == [
        "What you need", "Item 1: confirm the SGLang version and CUDA graphs", "Item 2: check how the draft was trained",
        "Item 3: set the ids", "Item 4: measure B", "Item 5: measure acceptance per draft position",
        "Item 6: measure chain lengths"]
    assert not re.search(r'class="[^"]*jp-CodeCell', runbook), "the runbook shows code cells"
    assert not re.search(r'class="[^"]*jp-CodeCell', details), "the details page shows code cells"
    assert re.findall(r"<h2[^>]*>(.*?)<", details)[:6] == [
        "Timeline, figure by figure", "Causes in full", "Why one step cost 2.9 plain steps",
        "What each SGLang release fed the draft", "Which hypotheses fit the incident", "The next measurement, in detail"]
    assert "data:image/png;base64," in details and 'alt="Accept length at 5/1/6' in details
    summary = json.loads((ci_report.out_dir / "summary.json").read_text())
    assert summary["ok"] is True and summary["lab"] == "ci"


def test_the_index_links_resolve_and_carry_no_local_path(ci_report):
    for page in (ci_report.index_path, ci_report.out_dir / "details.html", ci_report.out_dir / "runbook.html"):
        html = page.read_text()
        assert report.broken_links(html, folder=ci_report.out_dir) == [], page.name
        assert report.local_paths(html) == [], page.name
    assert "carries over to a real deployment" in (ci_report.out_dir / "details.html").read_text()


def test_every_page_defines_terms_before_use_and_intervals_hold(ci_report):
    import re

    from eagle3lab.report import glossary
    from eagle3lab.report import prose

    def blocks_of(html):
        body = re.sub(r"<(script|style)[^>]*>.*?</\1>", " ", html, flags=re.S)
        body = re.sub(r'<dfn title="([^"]+)"[^>]*>', "\x00\\1\x01", body)  # keep the definitions' marks
        blocks = [re.sub(r"<[^>]+>", "", b) for b in re.split(r'<div class="jp-Cell ', body)]
        return [re.sub("\x00(.*?)\x01", r'<dfn title="\1">', b) for b in blocks]

    index = blocks_of(ci_report.index_path.read_text())
    used = {t for t in glossary.TERMS if any(glossary.uses(b, t) for b in index)}
    defined = glossary.defined_in("".join(index))
    assert used <= defined, used - defined  # a post-mortem defines its terms once, in its last section
    pages = [blocks_of(run.html_path.read_text()) for run in ci_report.runs]  # read in order, 01 to 05
    assert glossary.undefined_before_use([b for page in pages for b in page], slack=2) == []
    post = [ci_report.index_path, ci_report.out_dir / "details.html", ci_report.out_dir / "runbook.html"]
    for path in post + [run.html_path for run in ci_report.runs]:
        # every "x [lo, hi]" a sentence prints has its estimate inside its interval
        plain = re.sub(r"<[^>]+>", "", path.read_text()).replace("**", "")
        for point, lo, hi in re.findall(r"(\d+\.\d+)×? \[(\d+\.\d+), (\d+\.\d+)\]", plain):
            assert prose.interval_holds(float(point), [float(lo), float(hi)]), (path.name, point, lo, hi)


def test_05_says_the_lab_server_has_no_load_and_where_to_measure_it(ci_report):
    run = next(r for r in ci_report.runs if r.name.startswith("05"))
    text = "\n".join(str(out.get("data", {}).get("text/markdown", "")) for cell in run.notebook.cells
                     for out in cell.get("outputs", []))
    assert "Nothing is measured under load on the lab backend" in text
    assert "the lab server serves one request at a time" in text
    assert "No load sweep of the ci lab is stored in data/load/" in text  # the default lab's are not shown
# --------------------------------------------------------------------------- one number per configuration

def _tables(nb) -> list[dict]:
    """Every DataFrame a notebook displayed, from its text/html output, as {row label: {column: cell}}."""
    from html.parser import HTMLParser

    class Tables(HTMLParser):
        def __init__(self):
            super().__init__()
            self.tables, self.rows, self.cell, self.text = [], [], None, None

        def handle_starttag(self, tag, attrs):
            if tag == "table":
                self.rows = []
            elif tag == "tr":
                self.rows.append([])
            elif tag in ("td", "th"):
                self.text = ""

        def handle_data(self, data):
            if self.text is not None:
                self.text += data

        def handle_endtag(self, tag):
            if tag in ("td", "th") and self.rows:
                self.rows[-1].append(self.text.strip())
                self.text = None
            elif tag == "table":
                self.tables.append(self.rows)

    found = []
    for cell in nb.cells:
        for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
            html = out.get("data", {}).get("text/html")
            if not html or "dataframe" not in "".join(html):
                continue
            parser = Tables()
            parser.feed("".join(html))
            for rows in parser.tables:
                header = rows[0]
                found.append({r[0]: dict(zip(header[1:], r[1:])) for r in rows[1:] if r and r[0]})
    return found


def _value(text: str):
    """A displayed cell as a value (pandas pads a column's floats to one width: 0.816 == 0.8160)."""
    import ast

    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _row(run, label: str, column: str = "speedup") -> list[dict]:
    return [t[label] for t in _tables(run.notebook) if label in t and column in t[label]]


def test_one_configuration_has_one_number_in_every_notebook(ci_report):
    """The seed after its fix at 5/1/6 appears in 03 (served with the fix, and with its trained
    wiring) and in 05 (the embed-patch hypothesis); the seed before it in 01, 03 and 05: each is
    one measurement of the report's store, so each notebook prints the same figures for it."""
    runs = {run.name[:2]: run for run in ci_report.runs}
    after = (_row(runs["03"], "with the embedding patch (embed-patch)")
             + _row(runs["03"], "ids that feed the trained boundaries") + _row(runs["05"], "embed-patch"))
    before = (_row(runs["01"], "steps 5, topk 1, 6 draft tokens") + _row(runs["03"], "before the fix (wiring-seed)")
              + _row(runs["05"], "wiring-seed"))
    for rows in (after, before):
        assert len(rows) == 3, rows
        for column in ("speedup", "speedup_ci95", "accept_length", "prompts"):
            values = {json.dumps(_value(r[column])) for r in rows}
            assert len(values) == 1, (column, rows)


def test_the_report_measures_no_configuration_twice(ci_report):
    records = measurements_records(ci_report.out_dir)
    ids = [r["id"] for r in records]
    assert len(ids) == len(set(ids)) and len(ids) >= 10
    kinds = [r["key"]["kind"] for r in records]
    assert kinds.count("baseline") == kinds.count("spec")  # each configuration with its own paired baseline
    summary = json.loads((ci_report.out_dir / "summary.json").read_text())
    assert summary["measurements"] == {"file": "measurements.jsonl", "records": len(records),
                                       "unreadable_lines": 0}


def measurements_records(out_dir) -> list[dict]:
    from eagle3lab.serving.measurements import Store

    store = Store(out_dir / "measurements.jsonl")
    records = store.records()
    assert store.skipped == 0
    return records

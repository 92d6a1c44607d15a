"""The report machinery: parameters, execution, errors named, HTML with embedded plots, CLI."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from eagle3lab.report import render as report
from eagle3lab.cli import main as cli_main

REPO = Path(__file__).resolve().parents[1]

PARAMS = '''# Parameters
LAB = "default"   # lab preset: "ci" or "default"
SERVER_URL = None  # a running server
SIZES = [1, 2]
'''

PLOT = '''import matplotlib.pyplot as plt
fig, ax = plt.subplots()
ax.plot(SIZES, [len(LAB)] * len(SIZES))
plt.show()
print("lab is", LAB)'''


def make_notebook(path: Path, *cells: str, params: str = PARAMS) -> Path:
    nb = nbformat.v4.new_notebook()
    p = nbformat.v4.new_code_cell(params)
    p.metadata["tags"] = ["parameters"]
    nb.cells = [nbformat.v4.new_markdown_cell("# A test notebook"), p]
    nb.cells += [nbformat.v4.new_code_cell(c) for c in cells]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    return path


def test_inject_parameters_rewrites_values_and_keeps_comments(tmp_path):
    nb = report.read_notebook(make_notebook(tmp_path / "01_a.ipynb"))
    assert report.read_parameters(nb) == {"LAB": "default", "SERVER_URL": None, "SIZES": [1, 2]}
    out = report.inject_parameters(nb, {"LAB": "ci", "SERVER_URL": "http://h:1", "SIZES": [3]})
    src = out.cells[report.parameters_cell_index(out)].source
    assert 'LAB = \'ci\'   # lab preset: "ci" or "default"' in src
    assert "SERVER_URL = 'http://h:1'  # a running server" in src
    assert report.read_parameters(out) == {"LAB": "ci", "SERVER_URL": "http://h:1", "SIZES": [3]}
    assert report.read_parameters(nb)["LAB"] == "default"  # the original is untouched


def test_inject_parameters_rejects_unknown_names_and_untagged_notebooks(tmp_path):
    nb = report.read_notebook(make_notebook(tmp_path / "01_a.ipynb"))
    with pytest.raises(report.NotebookError, match="unknown parameter.*NOPE"):
        report.inject_parameters(nb, {"NOPE": 1})
    nb.cells[1].metadata["tags"] = []
    with pytest.raises(report.NotebookError, match="tagged 'parameters'"):
        report.inject_parameters(nb, {"LAB": "ci"})


def test_parse_parameter_reads_literals_else_strings():
    assert report.parse_parameter("N=3") == ("N", 3)
    assert report.parse_parameter("SERVER_URL=http://x:30000") == ("SERVER_URL", "http://x:30000")
    assert report.parse_parameter("X=None") == ("X", None)
    with pytest.raises(report.NotebookError):
        report.parse_parameter("no equals sign")


def test_list_notebooks_selects_by_number_or_name(tmp_path):
    for name in ("01_a", "02_b", "04_c"):
        make_notebook(tmp_path / f"{name}.ipynb")
    (tmp_path / "scratch.ipynb").write_text("{}")
    assert [p.stem for p in report.list_notebooks(tmp_path)] == ["01_a", "02_b", "04_c"]
    assert [p.stem for p in report.list_notebooks(tmp_path, ["4", "01_a"])] == ["01_a", "04_c"]
    with pytest.raises(report.NotebookError, match="no notebook matches 07"):
        report.list_notebooks(tmp_path, ["07"])


def test_report_executes_renders_and_names_the_failing_cell(tmp_path):
    nbdir = tmp_path / "nbs"
    nbdir.mkdir()
    make_notebook(nbdir / "01_plot.ipynb", PLOT,
                  "from eagle3lab.report import prose\nprose.headline(f'the lab was **{LAB}**')")
    make_notebook(nbdir / "02_fails.ipynb", "x = 1", "raise ValueError(f'broken on {LAB}')", "print('never')")
    out = tmp_path / "out"
    result = report.build_report(out=out, lab="ci", notebooks_dir=nbdir, progress=False,
                                 timeout=120, log=lambda msg: None)
    assert not result.ok
    ok, bad = result.runs
    assert ok.ok and not bad.ok
    assert bad.error.notebook == "02_fails" and bad.error.cell_index == 3
    assert bad.error.ename == "ValueError" and "broken on ci" in bad.error.evalue
    assert "02_fails: cell 3" in str(bad.error)
    executed = nbformat.read(out / "01_plot.ipynb", as_version=4)
    assert "lab is ci" in json.dumps(executed.cells[2].outputs)
    assert any("image/png" in o.get("data", {}) for o in executed.cells[2].outputs)
    index = (out / "index.html").read_text()
    # the index is the post-mortem: the failing notebook is named there, its page linked, no code shown
    assert "02_fails stopped with an error" in index and "broken on ci" in index
    assert 'href="01_plot.html"' in index and 'href="02_fails.html"' in index
    assert not re.search(r'class="[^"]*jp-CodeCell', index) and "Summary" in index
    assert report.broken_links(index, folder=out) == []
    assert report.headlines(executed) == ["the lab was **ci**"]
    assert 'src="http' not in index  # self-contained: no CDN scripts
    page = (out / "01_plot.html").read_text()
    assert "data:image/png;base64," in page and "lab is ci" in page
    summary = json.loads((out / "summary.json").read_text())
    assert summary["ok"] is False
    # the next measurement's script sits next to the pages, byte for byte the package's, executable
    from eagle3lab.paths import PROBE_SCRIPT

    probe = out / PROBE_SCRIPT.name
    assert probe.read_bytes() == PROBE_SCRIPT.read_bytes() and probe.stat().st_mode & 0o111
    assert [n["status"] for n in summary["notebooks"]] == ["ok", "error"]


def test_cli_exit_codes_and_error_naming(tmp_path, capsys):
    nbdir = tmp_path / "nbs"
    nbdir.mkdir()
    make_notebook(nbdir / "01_fails.ipynb", "1 / 0")
    code = cli_main(["report", "--lab", "ci", "--out", str(tmp_path / "o"), "--notebooks", str(nbdir),
                     "--no-progress", "--timeout", "120", "--no-build"])
    err = capsys.readouterr().err
    assert code == 1
    assert "01_fails: cell 2" in err and "ZeroDivisionError" in err
    assert cli_main(["report", "--only", "09", "--notebooks", str(nbdir), "--out", str(tmp_path / "o")]) == 2
    assert "no notebook matches 09" in capsys.readouterr().err
    assert cli_main(["report", "-p", "NOPE=1", "--notebooks", str(nbdir), "--out", str(tmp_path / "o"),
                     "--no-build"]) == 2
    assert cli_main(["report", "--timeout", "0", "--notebooks", str(nbdir)]) == 2


def test_committed_notebooks_match_sources_and_carry_no_outputs():
    build = subprocess.run([sys.executable, str(REPO / "notebooks" / "_build.py"), "--check"],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stdout + build.stderr
    paths = report.list_notebooks()
    assert [p.stem[:2] for p in paths] == ["01", "02", "03", "04", "05"]
    for path in paths:
        nb = report.read_notebook(path)
        params = report.read_parameters(nb)
        assert "LAB" in params, path.name
        # ...and a way to point it at a real deployment, log or checkpoint instead of the lab
        assert set(params) & {"SERVER_URL", "SERVER_URLS", "LOG_FILE", "DRAFT_DIR", "TARGET_DIR",
                              "SGLANG_DIR"}, path.name
        assert all(not c.get("outputs") and not c.get("execution_count")
                   for c in nb.cells if c.cell_type == "code"), path.name


def test_local_paths_are_found_in_visible_text_only():
    html = ('<html><head><style>a{background:url(/tmp/x.png)}</style></head><body>'
            '<p>Target: <code>/tmp/eagle3lab-sglang-abc/sglang</code> and ./data/lab/ci</p>'
            '<img src="data:image/png;base64,AAAA/tmp/AAAA"><p>/root/.cache/x and https://host/work/y</p></body></html>')
    assert report.local_paths(html) == ["/root/.cache/x", "/tmp/eagle3lab-sglang-abc/sglang"]
    assert report.local_paths("<p>./data/lab/ci and ~/models</p>") == []


def test_broken_links_flags_missing_anchors_and_links_to_pages_not_beside_it(tmp_path):
    html = ('<a id="01_a"></a><h2 id="Intro">Intro</h2><a href="#01_a">ok</a><a href="#Intro">ok</a>'
            '<a href="#02_b">missing</a><a href="02_b.html">out</a><a href="https://x.org">ok</a>'
            '<a href="03_c.html">beside</a>')
    (tmp_path / "03_c.html").write_text('<p>the evidence page</p><h2 id="Table">Table</h2>')
    assert report.broken_links(html) == ["#02_b", "02_b.html", "03_c.html"]
    assert report.broken_links(html, folder=tmp_path) == ["#02_b", "02_b.html"]
    # another page of the report at an anchor: the page must be there and hold the anchor
    other = '<a href="03_c.html#Table">ok</a><a href="03_c.html#Gone">gone</a>'
    assert report.broken_links(other, folder=tmp_path) == ["03_c.html#Gone"]


def test_about_section_says_what_carries_over_and_reruns_with_real_parameters():
    box = report.about_markdown("ci", [])
    assert "M-parameter Llama" in box and "Python source" in box and "no GPU" in box
    assert "carries over to a real deployment" in box and "not the size of an effect" in box
    for nb, items in report.RERUN.items():
        path = next((REPO / "notebooks").glob(f"{nb}_*.ipynb"))
        declared = report.read_parameters(report.read_notebook(path))
        for _, args in items:
            for name in re.findall(r"-p \"?([A-Z_]+)=", args):
                assert name in declared, f"{nb}: {name} is not a parameter"
            assert f"--only {nb} {args}" in box

"""Write the notebooks (NN_name.ipynb, no outputs) from their readable sources in notebooks/src/.

Each source is a Python file in the "percent" format (as jupytext writes it): a line
``# %%`` starts a code cell, ``# %% [markdown]`` a markdown cell whose lines start with ``# ``,
and ``# %% tags=["parameters"]`` the tagged parameters cell. Edit the sources, then run

    .venv/bin/python notebooks/_build.py          # rewrite the .ipynb files
    .venv/bin/python notebooks/_build.py --check  # exit 1 when a .ipynb is stale (CI)
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent
SOURCES = HERE / "src"
_HEADER = re.compile(r"^# %%(?P<md> \[markdown\])?(?: tags=(?P<tags>\[.*\]))?\s*$")


def parse_cells(text: str) -> list[dict]:
    """Cells of a percent-format source, as dicts with kind, source and tags."""
    cells, current = [], None
    for line in text.splitlines():
        m = _HEADER.match(line)
        if m:
            current = {"kind": "markdown" if m.group("md") else "code", "lines": [],
                       "tags": json.loads(m.group("tags")) if m.group("tags") else []}
            cells.append(current)
        elif current is not None:
            current["lines"].append(line)
    for cell in cells:
        lines = cell.pop("lines")
        while lines and not lines[-1].strip():
            lines.pop()
        while lines and not lines[0].strip():
            lines.pop(0)
        if cell["kind"] == "markdown":
            lines = [ln[2:] if ln.startswith("# ") else ln.lstrip("#") for ln in lines]
        cell["source"] = "\n".join(lines)
    return cells


def build_notebook(source: Path):
    """The nbformat notebook for one source file (stable cell ids, so diffs stay small)."""
    cells = []
    for i, cell in enumerate(parse_cells(source.read_text(encoding="utf-8"))):
        make = nbformat.v4.new_markdown_cell if cell["kind"] == "markdown" else nbformat.v4.new_code_cell
        nb_cell = make(cell["source"], id=f"c{i:02d}")
        if cell["tags"]:
            nb_cell.metadata["tags"] = cell["tags"]
        cells.append(nb_cell)
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata = {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python",
                                  "name": "python3"},
                   "language_info": {"name": "python"}}
    return nb


def render(source: Path) -> str:
    return nbformat.writes(build_notebook(source)) + "\n"


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    for source in sorted(SOURCES.glob("[0-9][0-9]_*.py")):
        target = HERE / f"{source.stem}.ipynb"
        text = render(source)
        if target.exists() and target.read_text(encoding="utf-8") == text:
            continue
        stale.append(target.name)
        if not check:
            target.write_text(text, encoding="utf-8")
    verb = "stale" if check else "written"
    print(f"{verb}: {', '.join(stale) if stale else 'none'}")
    return 1 if check and stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

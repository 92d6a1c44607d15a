"""Every term the post-mortem uses is defined once, in plain words, where a reader first meets it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from eagle3lab.report import glossary
from eagle3lab.report import prose
from eagle3lab.report import render as report

SRC = Path(__file__).resolve().parents[1] / "notebooks" / "src"


def test_undefined_before_use_finds_a_term_used_too_early():
    blocks = ["The draft's acc@3 is low.", "Something else.", glossary.define_markdown("acc@k")]
    assert glossary.undefined_before_use(blocks) == [("acc@k", 0, 2)]
    blocks = ["The draft's acc@3 is low.", glossary.define_markdown("acc@k"), "acc@1 again"]
    assert glossary.undefined_before_use(blocks) == []
    assert glossary.undefined_before_use(["TTT matters"]) == [("TTT", 0, None)]
    # a definition's own wording is not a use of the terms it mentions
    assert glossary.undefined_before_use([glossary.define_markdown("accept length")]) == []
    assert glossary.defined_twice([glossary.define_markdown("TTT"), glossary.define_markdown("TTT")]) == ["TTT"]
    with pytest.raises(glossary.GlossaryError):
        glossary.definition("nonsense")


def _source_blocks(path: Path) -> list[str]:
    """A notebook source as a reader meets it: markdown cells, and the Terms each
    glossary.define(...) call renders, in order (code itself is hidden in the index)."""
    blocks = []
    for cell in re.split(r"^# %%", path.read_text(), flags=re.M)[1:]:
        header, _, body = cell.partition("\n")
        if "[markdown]" in header:
            blocks.append("\n".join(line[2:] if line.startswith("# ") else line.lstrip("#")
                                    for line in body.splitlines()))
            continue
        for node in ast.walk(ast.parse(re.sub(r"^%.*$", "", body, flags=re.M))):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "define" \
                    and getattr(node.func.value, "id", "") == "glossary":
                blocks.append(glossary.define_markdown(*[ast.literal_eval(a) for a in node.args]))
    return blocks


def test_the_notebooks_define_each_term_where_first_used_and_once():
    blocks = []
    for path in sorted(SRC.glob("0[1-5]_*.py")):
        blocks += _source_blocks(path)
    assert glossary.undefined_before_use(blocks) == []
    assert glossary.defined_twice(blocks) == []



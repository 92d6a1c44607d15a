"""The doctor's --prompts, read once, before any model loads: what it will score, what it could
not use, and why.

A file is plain text (one prompt per line, a literal `\\n` for a newline) or JSON lines (one
object per line with a "text" or "prompt" string); a file is JSON lines when any of its lines is
a JSON object. In a JSON-lines file a line that is not an object with a non-empty text/prompt
is not used, and counted with its reason. A file that cannot be text (missing, a folder, not
UTF-8, NUL bytes) is refused at once (exit 2); a file with no usable prompt is a check that could
not run (`CheckStatus`), and the report names the texts scored instead.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from eagle3lab.doctor.formats import DoctorInputError
from eagle3lab.doctor.ranking import CheckStatus


class Prompts(list):
    """The prompts (a list of str), with where they came from and the lines left out."""

    def __init__(self, texts=(), source: str = "your prompts", unused: Counter | None = None, lines: int = 0,
                 path: Path | None = None):
        super().__init__(texts)
        self.source = source
        self.path = path  # the file, for readers that want more than the texts (categories: doctor/byprompt.py)
        self.unused = unused or Counter()  # reason -> lines
        self.lines = lines

    def checks(self) -> list[CheckStatus]:
        """The 'prompts' check (ran when at least one prompt is usable) and, when lines were left
        out, one that could not run for them: the report lists every input it did not use."""
        left = "; ".join(f"{n} line{'s' if n > 1 else ''} {why}" for why, n in self.unused.items())
        if not self:
            return [CheckStatus("prompts", False, f"{self.source}: no usable prompt in {self.lines} line(s)"
                                + (f" ({left})" if left else "") + "; the texts scored are named above")]
        out = [CheckStatus("prompts", True, f"{self.source}: {len(self)} prompt(s)")]
        if left:
            out.append(CheckStatus("prompts (lines not used)", False, f"{self.source}: {left}"))
        return out


def read_prompts(prompts) -> Prompts | None:
    """--prompts as `Prompts` (None when not given); a list of strings is taken as it is."""
    if prompts is None:
        return None
    if isinstance(prompts, Prompts):
        return prompts
    if isinstance(prompts, (list, tuple)):
        return Prompts([str(p) for p in prompts if str(p).strip()], "your prompts", lines=len(prompts))
    from eagle3lab.paths import read_text_file

    path = Path(prompts)
    text = read_text_file(path, "--prompts", DoctorInputError)
    lines = text.splitlines()
    rows = [line.strip() for line in lines if line.strip()]  # blank lines separate, they are not prompts
    jsonl = any(_object(line) is not None for line in rows if line.startswith("{"))
    out, unused = [], Counter()
    for line in rows:
        if not jsonl:
            out.append(line.replace("\\n", "\n"))
            continue
        value, why = _jsonl_text(line)
        if value is None:
            unused[why] += 1
        else:
            out.append(value)
    return Prompts(out, f"{path.name} ({'JSON lines' if jsonl else 'one prompt per line'})", unused, len(lines),
                   path)


def _object(line: str):
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _jsonl_text(line: str) -> tuple[str | None, str]:
    """(the prompt of one JSON line, or None and why not): its text or prompt string, or a chat's
    messages (`byprompt.text_of`, the one reading of a prompt record)."""
    from eagle3lab.acceptance.byprompt import text_of

    value = _object(line)
    if value is None:
        return None, "not a JSON object"
    text = text_of(value)
    return (text, "") if text is not None else (None, "without a non-empty \"text\", \"prompt\" or \"messages\"")

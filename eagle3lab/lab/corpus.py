"""The lab's text: the Python standard library of the running interpreter, or user files.

Files are listed in a fixed order and split into train and held-out *by file* with a
hash of the file's relative path, so the split does not depend on which other files
exist (a different stdlib patch version changes a few files, not the split).
"""

from __future__ import annotations

import hashlib
import re
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path

from eagle3lab.errors import EagleLabError

# Parts of the stdlib that are tests, demos or vendored copies, not ordinary library code.
SKIP_PARTS = {"test", "tests", "idlelib", "lib2to3", "site-packages", "dist-packages",
              "__pycache__", "turtledemo", "ensurepip", "_vendor", "config-3"}
# With skip_data_tables=True (off in the shipped presets, whose labs predate it) generated
# data is left out too: gencodec.py codec tables, pydoc's topic dump, and any module whose
# lines are mostly table entries (a literal followed by ':' or ','), e.g. html/entities.py.
TABLE_PARTS = {"encodings", "pydoc_data"}
TABLE_LINE = re.compile(r"""^\s*(0x[0-9a-fA-F]+|'[^']*'|"[^"]*"|\d+)\s*[:,]""")
TABLE_SHARE = 0.5
TABLE_MIN_CHARS = 4000


@dataclass
class Corpus:
    """Train and held-out documents (one string per file) and where they came from."""

    train: list[str]
    heldout: list[str]
    train_files: list[str] = field(default_factory=list)
    heldout_files: list[str] = field(default_factory=list)
    source: str = "stdlib"
    fingerprint: str = ""

    @property
    def train_chars(self) -> int:
        return sum(map(len, self.train))

    def summary(self) -> dict:
        return {"source": self.source, "fingerprint": self.fingerprint,
                "python": sys.version.split()[0],
                "train_files": len(self.train), "heldout_files": len(self.heldout),
                "train_chars": self.train_chars, "heldout_chars": sum(map(len, self.heldout))}


def stable_hash(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest()[:12], 16)


def stdlib_root() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def stdlib_files(root: Path | None = None) -> list[tuple[str, Path]]:
    """(relative path, path) of the stdlib's library .py files, sorted by relative path."""
    root = root or stdlib_root()
    out = []
    for path in root.rglob("*.py"):
        rel = path.relative_to(root)
        if SKIP_PARTS & set(rel.parts) or any(p.startswith("config-") for p in rel.parts):
            continue
        out.append((rel.as_posix(), path))
    return sorted(out)


def is_data_table(text: str) -> bool:
    """A generated table rather than code (see TABLE_LINE)."""
    if len(text) < TABLE_MIN_CHARS:
        return False
    lines = [line for line in text.splitlines() if line.strip()]
    return sum(1 for line in lines if TABLE_LINE.match(line)) >= TABLE_SHARE * len(lines)


def is_heldout(rel: str, heldout_every: int) -> bool:
    return stable_hash("heldout:" + rel) % heldout_every == 0


def read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return None


def load_corpus(files: list[str] | None = None, *, max_train_chars: int = 2_000_000,
                max_heldout_chars: int = 400_000, heldout_every: int = 12,
                skip_data_tables: bool = False) -> Corpus:
    """The stdlib corpus (files=None) or the named text files, split by file.

    Files enter in a hash order (not alphabetical) so a character cap still samples
    the whole library; the cap makes presets cheap without changing the split.
    """
    if files:
        named = []
        for f in files:
            p = Path(f)
            if not p.is_file():
                raise EagleLabError(f"corpus file not found: {f}")
            named.append((p.name if len(files) == 1 else str(p), p))
        source = "files"
    else:
        named = stdlib_files()
        if skip_data_tables:
            named = [(rel, p) for rel, p in named if not TABLE_PARTS & set(rel.split("/"))]
        source = f"stdlib:{stdlib_root()}"
    if not named:
        raise EagleLabError("the corpus is empty")
    order = sorted(named, key=lambda rp: (stable_hash("order:" + rp[0]), rp[0]))
    corpus = Corpus([], [], source=source)
    digest = hashlib.sha256()
    for rel, path in order:
        text = read_text(path)
        if not text or not text.strip() or (skip_data_tables and is_data_table(text)):
            continue
        held = len(named) > 1 and is_heldout(rel, heldout_every)
        if held and sum(map(len, corpus.heldout)) < max_heldout_chars:
            corpus.heldout.append(text), corpus.heldout_files.append(rel)
        elif not held and corpus.train_chars < max_train_chars:
            corpus.train.append(text), corpus.train_files.append(rel)
        else:
            continue
        digest.update(rel.encode() + b"\0" + hashlib.sha256(text.encode()).digest())
    if len(named) == 1:  # one user file: hold out its tail
        text = corpus.train[0]
        cut = int(len(text) * 0.9)
        corpus.train, corpus.heldout = [text[:cut]], [text[cut:]]
        corpus.heldout_files = corpus.train_files[:]
    if not corpus.train or not corpus.heldout:
        raise EagleLabError("the corpus needs at least one train and one held-out document")
    corpus.fingerprint = digest.hexdigest()[:16]
    return corpus


def heldout_snippets(corpus: Corpus, n: int = 200, chars: int = 1500) -> list[dict]:
    """Held-out passages that start at a line start: the lab's evaluation prompts."""
    out = []
    for rel, text in zip(corpus.heldout_files, corpus.heldout):
        for start in range(0, max(1, len(text) - chars // 2), 4 * chars):
            line_start = text.rfind("\n", 0, start) + 1 if start else 0
            piece = text[line_start:line_start + chars]
            if len(piece.strip()) > chars // 4:
                out.append({"file": rel, "offset": line_start, "text": piece})
            if len(out) >= n:
                return out
    return out

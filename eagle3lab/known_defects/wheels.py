"""Reading released wheels: fetch them (`pip download --no-deps`), open one version's Python
source, run a row's code signature on every version, and turn the per-version states into the
bounds the registry must carry (`scripts/read_releases.py` drives it; docs/known-defects.md).

Why a module, not only a script: the classification (runs, bounds, how a range ends) is what the
registry's bounds are compared against, so it is tested on small synthetic sources
(tests/test_release_reading.py) without any download.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from eagle3lab.known_defects.row import KnownDefectError, parse_version

CACHE_ENV = "EAGLE3LAB_WHEEL_CACHE"
AFFECTED, FIXED, ABSENT = "affected", "fixed", "absent"


def cache_dir(path: str | os.PathLike | None = None) -> Path:
    """Where wheels are kept: `path`, else $EAGLE3LAB_WHEEL_CACHE, else ~/.cache/eagle3lab/wheels."""
    chosen = path or os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "eagle3lab" / "wheels"
    return Path(chosen).expanduser()


# --------------------------------------------------------------------------- one version's source


class WheelSource:
    """The .py files of one wheel, read lazily, named relative to the package root
    ("srt/speculative/eagle_utils.py" for sglang, "v1/sample/rejection_sampler.py" for vllm)."""

    def __init__(self, path: Path, root: str):
        self.path = Path(path)
        self._zip = zipfile.ZipFile(self.path)
        prefix = root.rstrip("/") + "/"
        self._names = {n[len(prefix):]: n for n in self._zip.namelist() if n.startswith(prefix) and n.endswith(".py")}
        self._texts: dict = {}

    def names(self, pattern: str) -> list[str]:
        rx = re.compile(pattern)
        return sorted(n for n in self._names if rx.search(n))

    def text(self, name: str) -> str | None:
        if name not in self._names:
            return None
        if name not in self._texts:
            self._texts[name] = self._zip.read(self._names[name]).decode("utf-8", errors="replace")
        return self._texts[name]

    def close(self) -> None:
        self._zip.close()


class TextSource:
    """The same interface over a dict {name: text}: how tests feed a signature a synthetic release."""

    def __init__(self, files: dict):
        self._files = dict(files)

    def names(self, pattern: str) -> list[str]:
        rx = re.compile(pattern)
        return sorted(n for n in self._files if rx.search(n))

    def text(self, name: str) -> str | None:
        return self._files.get(name)


# --------------------------------------------------------------------------- signatures


@dataclass(frozen=True)
class Probe:
    """`pattern` (a regex, MULTILINE) occurs in some file whose name matches `path`. None when
    no file matches `path` at all (the code is not there)."""

    path: str
    pattern: str

    def holds(self, src) -> bool | None:
        names = src.names(self.path)
        if not names:
            return None
        rx = re.compile(self.pattern, re.MULTILINE)
        return any(rx.search(src.text(n) or "") for n in names)


@dataclass(frozen=True)
class Absent:
    """The file exists and the pattern is NOT in it (a fix that removed or replaced a line)."""

    probe: Probe

    def holds(self, src) -> bool | None:
        found = self.probe.holds(src)
        return None if found is None else not found


@dataclass(frozen=True)
class AllOf:
    """Every probe holds (a clause of an any-of signature); None when one finds no file."""

    probes: tuple

    def holds(self, src) -> bool | None:
        results = [p.holds(src) for p in self.probes]
        return None if None in results else all(results)


@dataclass(frozen=True)
class CodeSignature:
    """The lines that make a row's defect (`affected`: all hold, or any when `any_of`) and the
    lines of its fix (`fixed`: all hold). `state` replaces both for rows whose reading is a
    computation (the greedy-verify gate evaluated per platform)."""

    what: str
    affected: tuple = ()
    fixed: tuple = ()
    any_of: bool = False
    state: Callable | None = None  # (src) -> AFFECTED | FIXED | ABSENT

    def classify(self, src) -> str:
        if self.state is not None:
            return self.state(src)
        results = [p.holds(src) for p in self.affected]
        hit = any(r is True for r in results) if self.any_of else (bool(results) and all(r is True for r in results))
        if hit:
            return AFFECTED
        if self.fixed and all(p.holds(src) is True for p in self.fixed):
            return FIXED
        return ABSENT


# --------------------------------------------------------------------------- states -> bounds


def sort_versions(versions) -> list[str]:
    return sorted(versions, key=parse_version)


def runs(states: dict) -> list[list]:
    """{version: state} -> [[state, first version, last version], ...] in version order."""
    out: list[list] = []
    for v in sort_versions(states):
        if out and out[-1][0] == states[v]:
            out[-1][2] = v
        else:
            out.append([states[v], v, v])
    return out


def bounds(states: dict) -> dict:
    """The registry's bounds from per-version states: the affected ranges [first, end) (end = the
    first version read after the run, None when the run reaches the newest read), how the last
    range ends ("fixed": the fix's lines are there; "gone": neither the defect's nor the fix's),
    whether the first bound is the oldest version read (then it may start earlier)."""
    order = sort_versions(states)
    ranges, start = [], None
    for i, v in enumerate(order):
        if states[v] == AFFECTED and start is None:
            start = v
        if states[v] != AFFECTED and start is not None:
            ranges.append([start, v])
            start = None
    if start is not None:
        ranges.append([start, None])
    end = ranges[-1][1] if ranges else None
    end_kind = None if not ranges or end is None else ("fixed" if states[end] == FIXED else "gone")
    return {"ranges": ranges, "end_kind": end_kind, "newest": order[-1] if order else None,
            "first_open": bool(ranges) and ranges[0][0] == order[0]}


def read_signature(signature: CodeSignature, sources: dict) -> dict:
    """{version: WheelSource|TextSource} -> the row's reading: states (as runs) and bounds."""
    states = {v: signature.classify(src) for v, src in sources.items()}
    return {"signature": signature.what, "versions_read": len(states), "states": runs(states), **bounds(states)}


def read_values(reader: Callable, sources: dict) -> list[list]:
    """A rule reading (any JSON value per version) as runs of equal values."""
    import json

    values = {v: json.dumps(reader(src), sort_keys=True) for v, src in sources.items()}
    return [[json.loads(val), lo, hi] for val, lo, hi in runs(values)]


# --------------------------------------------------------------------------- fetching


def published(package: str) -> list[str]:
    """The versions PyPI lists for `package` (`pip index versions`), oldest first."""
    out = _pip("index", "versions", package)
    line = next((ln for ln in out.splitlines() if ln.startswith("Available versions:")), None)
    if line is None:
        raise KnownDefectError(f"pip index versions {package} listed no versions")
    return sort_versions(v.strip() for v in line.split(":", 1)[1].split(","))


def fetch(package: str, version: str, cache: Path) -> Path | None:
    """The wheel of package==version in cache/package (downloaded when missing); None when pip
    cannot get one (the caller records it as not read)."""
    folder = cache / package
    folder.mkdir(parents=True, exist_ok=True)
    found = wheel_in(folder, package, version)
    if found is not None:
        return found
    try:
        _pip("download", "--no-deps", "--only-binary", ":all:", "-q", f"{package}=={version}", "-d", str(folder))
    except KnownDefectError:
        return None
    return wheel_in(folder, package, version)


def wheel_in(folder: Path, package: str, version: str) -> Path | None:
    stem = package.replace("-", "_")
    for w in sorted(Path(folder).glob(f"{stem}-{version}-*.whl")):
        return w
    return None


def _pip(*args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or [""]
        raise KnownDefectError(f"pip {' '.join(args[:2])} failed: {tail[0]}")
    return proc.stdout

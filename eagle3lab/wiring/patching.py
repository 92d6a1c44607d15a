"""The seed's fix, reusable: let SGLang feed the draft the embedding output (boundary 0).

A draft config whose ``eagle_config.eagle_aux_hidden_state_layer_ids`` contain ``-1`` should get
the target's embedding output (boundary 0) in that slot; every other id keeps the rule the
installed SGLang version applies to it. Stock SGLang cannot do that for two targets (read in the
PyPI wheels, see docs/sources.md section 2):

* ``srt/models/llama.py`` 0.4.9-0.5.21: the setter maps id -> id+1, so -1 -> 0 already, but the
  forward loop captures ``hidden_states + residual`` before layer i and ``residual`` is None
  before layer 0 -> TypeError (0.5.21 llama.py:440-441). From 0.5.22 the capture goes through
  ``capture_output`` at the layer boundary, which handles the embedding: nothing to patch.
* ``srt/models/deepseek_v2.py`` (setter from 0.5.5):
  - 0.5.5-0.5.12: setter maps id+1 (fine), forward has the same unguarded
    ``hidden_states + residual`` (0.5.5 deepseek_v2.py:2955-2956) -> guard it.
  - 0.5.13: setter ``if layer_ids[0] == 1: +1 else raw`` keeps -1 raw, so it never matches a
    layer (0.5.13 deepseek_v2.py:2751-2755) -> map -1 to 0 and decide the rule on the other ids;
    forward still unguarded -> guard it too.
  - 0.5.14-0.5.23: same setter; the capture moved into the layer communicator, which sets
    ``residual = hidden_states`` when it is None (0.5.14 communicator.py:579-580), so layer 0
    captures the embedding once the setter asks for it -> setter only.

The patch is a set of small text hunks, recognised by shape (not by version number), so an
untested version in between is handled when its code has a known shape and refused otherwise.
Each patched spot carries a marker with the original file's sha256, so ``revert`` rebuilds the
original from the file itself and checks it is byte-identical: no backup files anywhere.
Writes are atomic (temp file + ``os.replace``), all files or none.
"""

from __future__ import annotations

import ast
import difflib
import hashlib
import importlib.util
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from eagle3lab.errors import EagleLabError

MARKER = "eagle3lab embedding-capture patch"
TARGET_FILES = {"llama": "srt/models/llama.py", "deepseek_v2": "srt/models/deepseek_v2.py"}

# File states.
NEEDS_PATCH = "needs patch"
APPLIED = "applied"
NATIVE = "native"  # this version already captures the embedding for id -1
ABSENT = "absent"  # no EAGLE-3 setter in this file: nothing to patch
UNKNOWN = "unknown shape"


class PatchError(EagleLabError):
    """The SGLang source does not have a shape this patch knows, or cannot be found."""


@dataclass(frozen=True)
class Hunk:
    """Replace the ``old`` block of lines with ``new`` (both dedented; same indentation kept)."""

    name: str
    old: tuple[str, ...]
    new: tuple[str, ...]  # "{sha}" stands for the original file's sha256 prefix


_GUARD_OLD = ("aux_hidden_states.append(hidden_states + residual)",)
_GUARD_NEW = (
    "aux_hidden_states.append(hidden_states + residual if residual is not None else hidden_states)"
    f"  # {MARKER} sha256:{{sha}}: residual is None before layer 0",
)
GUARD = Hunk("residual-None guard before layer 0", _GUARD_OLD, _GUARD_NEW)

DEEPSEEK_SETTER = Hunk(
    "setter: id -1 -> boundary 0",
    (
        "if layer_ids and layer_ids[0] == 1:",
        "    self.model.layers_to_capture = [val + 1 for val in layer_ids]",
        "else:",
        "    self.model.layers_to_capture = list(layer_ids)",
    ),
    (
        f"# {MARKER} sha256:{{sha}}: id -1 captures the embedding (boundary 0);",
        "# the +1-if-first-id-is-1 rule is decided on the other ids, as before.",
        "_e3l_rest = [val for val in layer_ids if val != -1]",
        "_e3l_shift = 1 if (_e3l_rest and _e3l_rest[0] == 1) else 0",
        "self.model.layers_to_capture = [",
        "    0 if val == -1 else val + _e3l_shift for val in layer_ids",
        "]",
    ),
)


def _block_regex(lines: tuple[str, ...]) -> re.Pattern:
    """A multiline regex matching the block at any indentation (group 'ind'), sha captured."""
    parts = []
    for k, line in enumerate(lines):
        pieces = line.split("{sha}")
        body = (r"(?P<sha%d>[0-9a-f]{16})" % k).join(re.escape(p) for p in pieces)
        parts.append((r"(?P<ind>[ \t]*)" if k == 0 else r"(?P=ind)") + body)
    return re.compile("^" + "\n".join(parts) + "$", re.M)


def _render(lines: tuple[str, ...], indent: str, sha: str = "") -> str:
    return "\n".join(indent + line.replace("{sha}", sha) for line in lines)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass
class FilePlan:
    """What the patch does to one file: its state, the hunks still to apply, why."""

    model: str
    path: Path
    state: str
    reason: str
    hunks: list[Hunk] = field(default_factory=list)
    applied_hunks: list[Hunk] = field(default_factory=list)


@dataclass
class PatchPlan:
    """The patch's view of one SGLang package directory."""

    sglang_dir: Path
    version: str
    files: list[FilePlan]

    @property
    def ok(self) -> bool:
        """True when the patch applies or is applied (``--check`` exits 0)."""
        return all(f.state != UNKNOWN for f in self.files)

    @property
    def applied(self) -> bool:
        return self.ok and not any(f.state == NEEDS_PATCH for f in self.files)

    def summary(self) -> str:
        lines = [f"sglang {self.version} at {self.sglang_dir}"]
        for f in self.files:
            hunks = ", ".join(h.name for h in (f.hunks or f.applied_hunks))
            lines.append(f"  {TARGET_FILES[f.model]}: {f.state} - {f.reason}"
                         + (f" [{hunks}]" if hunks else ""))
        return "\n".join(lines)

    def to_frame(self):
        import pandas as pd

        return pd.DataFrame([{"file": TARGET_FILES[f.model], "state": f.state,
                              "reason": f.reason,
                              "hunks": [h.name for h in (f.hunks or f.applied_hunks)]}
                             for f in self.files])


# --------------------------------------------------------------------------- locating sglang

def find_sglang_dir(sglang_dir: str | os.PathLike | None = None) -> Path:
    """The ``sglang`` package directory: the one given, or the installed one (not imported)."""
    if sglang_dir is None:
        spec = importlib.util.find_spec("sglang")
        if spec is None or not spec.submodule_search_locations:
            raise PatchError("sglang is not installed here; pass --sglang-dir DIR "
                             "(the sglang/ package directory of an unpacked wheel)")
        path = Path(list(spec.submodule_search_locations)[0])
    else:
        path = Path(sglang_dir).expanduser().resolve()
        if (path / "sglang" / "srt").is_dir():
            path = path / "sglang"
    if not (path / "srt" / "models").is_dir():
        raise PatchError(f"{path} is not an sglang package directory (no srt/models/ in it)")
    return path


def sglang_version(sglang_dir: Path) -> str:
    """The version written in ``sglang/_version.py`` (wheels), else 'unknown'."""
    for name in ("_version.py", "version.py"):
        path = sglang_dir / name
        if path.is_file():
            m = re.search(r"""__version__\s*=\s*(?:version\s*=\s*)?['"]([^'"]+)['"]""",
                          path.read_text())
            if m:
                return m.group(1)
    return "unknown"


# --------------------------------------------------------------------------- recognising shapes

class _AmbiguousSetter(Exception):
    pass


def _setter_source(text: str) -> str | None:
    """Source of the one ``set_eagle3_layers_to_capture`` method, None if there is none."""
    tree = ast.parse(text)
    found = [node for node in ast.walk(tree)
             if isinstance(node, ast.FunctionDef) and node.name == "set_eagle3_layers_to_capture"]
    if len(found) > 1:
        raise _AmbiguousSetter(f"{len(found)} set_eagle3_layers_to_capture methods")
    return ast.get_source_segment(text, found[0]) if found else None


def _count(hunk_lines: tuple[str, ...], text: str) -> int:
    return len(_block_regex(hunk_lines).findall(text))


def _plan_forward(text: str, native_marker: str, native_reason: str):
    """(state, reason, hunk) for the capture in the forward loop."""
    old, new = _count(GUARD.old, text), _count(GUARD.new, text)
    if old == 1 and new == 0:
        return NEEDS_PATCH, "forward adds an unguarded residual before layer 0", GUARD
    if new == 1 and old == 0:
        return APPLIED, "forward guard in place", GUARD
    if old == 0 and new == 0 and native_marker in text:
        return NATIVE, native_reason, None
    return UNKNOWN, (f"forward capture not recognised ({old} unguarded, {new} patched captures, "
                     f"no {native_marker!r})"), None


def _is_plain_plus_one(setter: str) -> bool:
    """The 0.4.9-0.5.12 setter body: explicit ids always map to id+1 (so -1 -> 0)."""
    assigns = re.findall(r"self\.model\.layers_to_capture = (.+)", setter)
    return (len(assigns) == 2 and assigns[1].strip() == "[val + 1 for val in layer_ids]"
            and "layer_ids[0]" not in setter)


def _plan_llama(text: str) -> tuple[str, str, list[Hunk], list[Hunk]]:
    setter = _setter_source(text)
    if setter is None or "layer_ids" not in setter:
        return UNKNOWN, "no set_eagle3_layers_to_capture(layer_ids): this version ignores config ids", [], []
    if not _is_plain_plus_one(setter):
        return UNKNOWN, "setter does not use the id+1 rule this patch knows", [], []
    state, reason, hunk = _plan_forward(
        text, "capture_output=aux_hidden_states.capture",
        "layer-boundary capture handles the embedding; id -1 -> +1 -> 0 works unpatched")
    return state, "setter id+1 maps -1 to 0; " + reason, [hunk] if state == NEEDS_PATCH else [], \
        [hunk] if state == APPLIED else []


def _plan_deepseek(text: str) -> tuple[str, str, list[Hunk], list[Hunk]]:
    setter = _setter_source(text)
    if setter is None:
        return ABSENT, "no EAGLE-3 setter in this version (added in 0.5.5)", [], []
    todo, done, notes = [], [], []
    assigns = len(re.findall(r"self\.model\.layers_to_capture = ", setter))
    if _count(DEEPSEEK_SETTER.old, setter) == 1 and assigns == 3:
        todo.append(DEEPSEEK_SETTER)
        notes.append("setter keeps -1 raw (never matches)")
    elif _count(DEEPSEEK_SETTER.new, setter) == 1 and assigns == 2:
        done.append(DEEPSEEK_SETTER)
        notes.append("setter maps -1 to 0")
    elif _is_plain_plus_one(setter):
        notes.append("setter id+1 maps -1 to 0")
    else:
        return UNKNOWN, "setter rule not recognised", [], []
    state, reason, hunk = _plan_forward(
        text, "captured_last_layer_outputs=",
        "the layer communicator captures the embedding at layer 0")
    if state == UNKNOWN:
        return UNKNOWN, reason, [], []
    (todo if state == NEEDS_PATCH else done).extend([hunk] if hunk else [])
    notes.append(reason)
    if todo and done:
        return UNKNOWN, "partly patched: " + "; ".join(notes), [], []
    overall = NEEDS_PATCH if todo else (APPLIED if done else NATIVE)
    return overall, "; ".join(notes), todo, done


_PLANNERS = {"llama": _plan_llama, "deepseek_v2": _plan_deepseek}


def check(sglang_dir: str | os.PathLike | None = None) -> PatchPlan:
    """What the patch would do to this SGLang tree; writes nothing."""
    root = find_sglang_dir(sglang_dir)
    files = []
    for model, rel in TARGET_FILES.items():
        path = root / rel
        if not path.is_file():
            state = UNKNOWN if model == "llama" else ABSENT
            files.append(FilePlan(model, path, state, "file missing"))
            continue
        try:
            state, reason, todo, done = _PLANNERS[model](path.read_text())
        except SyntaxError as exc:
            state, reason, todo, done = UNKNOWN, f"does not parse: {exc}", [], []
        except _AmbiguousSetter as exc:
            state, reason, todo, done = UNKNOWN, str(exc), [], []
        files.append(FilePlan(model, path, state, reason, todo, done))
    return PatchPlan(root, sglang_version(root), files)


# --------------------------------------------------------------------------- transforming text

def patch_text(text: str, hunks: list[Hunk]) -> str:
    """The patched file text; each hunk's old block must occur exactly once."""
    sha = _sha(text)
    for hunk in hunks:
        regex = _block_regex(hunk.old)
        matches = list(regex.finditer(text))
        if len(matches) != 1:
            raise PatchError(f"{hunk.name}: expected one match, found {len(matches)}")
        m = matches[0]
        text = text[:m.start()] + _render(hunk.new, m.group("ind"), sha) + text[m.end():]
    return text


def unpatch_text(text: str, hunks: list[Hunk]) -> str:
    """The original text, rebuilt from the patched one and checked against the marker's sha256."""
    shas = set()
    for hunk in hunks:
        matches = list(_block_regex(hunk.new).finditer(text))
        if len(matches) != 1:
            raise PatchError(f"{hunk.name}: patched block not found once (found {len(matches)})")
        m = matches[0]
        shas.update(v for k, v in m.groupdict().items() if k.startswith("sha") and v)
        text = text[:m.start()] + _render(hunk.old, m.group("ind")) + text[m.end():]
    if len(shas) != 1 or _sha(text) != shas.pop():
        raise PatchError("the patched file was edited since the patch; cannot restore it "
                         "byte-identical (reinstall sglang instead)")
    return text


def _compile_or_refuse(text: str, path: Path) -> None:
    try:
        compile(text, str(path), "exec")
    except SyntaxError as exc:
        raise PatchError(f"patched {path.name} would not compile ({exc}); nothing written") from exc


def _write_all_or_nothing(new_texts: dict[Path, str]) -> None:
    """Write every file atomically; if one fails, put back the ones already written."""
    old_texts = {path: path.read_bytes() for path in new_texts}
    written = []
    try:
        for path, text in new_texts.items():
            _atomic_write(path, text.encode())
            written.append(path)
    except BaseException:
        for path in written:
            _atomic_write(path, old_texts[path])
        raise


def _atomic_write(path: Path, data: bytes) -> None:
    mode = path.stat().st_mode & 0o7777
    fd, tmp = tempfile.mkstemp(prefix=".eagle3lab-", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _refuse_unknown(plan: PatchPlan) -> None:
    bad = [f for f in plan.files if f.state == UNKNOWN]
    if bad:
        why = "; ".join(f"{TARGET_FILES[f.model]}: {f.reason}" for f in bad)
        raise PatchError(f"sglang {plan.version}: code has a shape this patch does not know "
                         f"({why}); nothing written")


def apply(sglang_dir: str | os.PathLike | None = None) -> PatchPlan:
    """Patch the tree (idempotent); refuses, writing nothing, on a shape it does not know."""
    plan = check(sglang_dir)
    _refuse_unknown(plan)
    new_texts = {}
    for f in plan.files:
        if f.state == NEEDS_PATCH:
            new_texts[f.path] = patch_text(f.path.read_text(), f.hunks)
            _compile_or_refuse(new_texts[f.path], f.path)
    _write_all_or_nothing(new_texts)
    return check(plan.sglang_dir)


def revert(sglang_dir: str | os.PathLike | None = None) -> PatchPlan:
    """Restore the patched files byte-identical (idempotent: an unpatched tree is left as is)."""
    plan = check(sglang_dir)
    _refuse_unknown(plan)
    new_texts = {f.path: unpatch_text(f.path.read_text(), f.applied_hunks)
                 for f in plan.files if f.state == APPLIED}
    _write_all_or_nothing(new_texts)
    return check(plan.sglang_dir)


def diff(sglang_dir: str | os.PathLike | None = None) -> str:
    """Unified diff original -> patched, whatever state the tree is in now."""
    plan = check(sglang_dir)
    _refuse_unknown(plan)
    out = []
    for f in plan.files:
        if f.state not in (NEEDS_PATCH, APPLIED):
            continue
        now = f.path.read_text()
        original, patched = ((now, patch_text(now, f.hunks)) if f.state == NEEDS_PATCH
                             else (unpatch_text(now, f.applied_hunks), now))
        rel = f"sglang/{TARGET_FILES[f.model]}"
        out.extend(difflib.unified_diff(original.splitlines(True), patched.splitlines(True),
                                        f"a/{rel}", f"b/{rel}"))
    return "".join(out)


# --------------------------------------------------------------------------- what it does

class _Namespace:
    def __init__(self, **kw):
        self.__dict__.update(kw)


def layers_to_capture(sglang_dir: str | os.PathLike | None, model: str, layer_ids,
                      num_layers: int) -> list[int]:
    """Run this tree's ``set_eagle3_layers_to_capture`` on a stand-in model: the boundaries
    (b = i: input of layer i; 0 = embedding) that ``layer_ids`` select in that version."""
    root = find_sglang_dir(sglang_dir)
    source = _setter_source((root / TARGET_FILES[model]).read_text())
    if source is None:
        raise PatchError(f"{TARGET_FILES[model]} has no set_eagle3_layers_to_capture")
    import textwrap
    from typing import List, Optional

    scope = {"List": List, "Optional": Optional}
    exec(textwrap.dedent(source), scope)
    fake = _Namespace(pp_group=_Namespace(is_last_rank=True),
                      config=_Namespace(num_hidden_layers=num_layers),
                      model=_Namespace(layers_to_capture=[]), capture_aux_hidden_states=False)
    scope["set_eagle3_layers_to_capture"](fake, None if layer_ids is None else list(layer_ids))
    return list(fake.model.layers_to_capture)


# --------------------------------------------------------------------------- real wheels

WHEEL_FILES = ("sglang/_version.py", "sglang/version.py", *(f"sglang/{p}" for p in TARGET_FILES.values()))


def sglang_wheel(version: str) -> Path:
    """The sglang wheel of ``version`` from PyPI, downloaded once into the wheel cache."""
    import glob
    import subprocess
    import sys

    from eagle3lab.paths import cache_dir

    cache = cache_dir("wheels")
    found = sorted(glob.glob(str(cache / f"sglang-{version}-*.whl")))
    if not found:
        result = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                                 f"sglang=={version}", "-d", str(cache)],
                                capture_output=True, text=True)
        found = sorted(glob.glob(str(cache / f"sglang-{version}-*.whl")))
        if not found:
            raise PatchError(f"could not download sglang=={version}: {result.stderr.strip()[-500:]}")
    return Path(found[0])


def unpack_sglang_source(version: str, dest: str | os.PathLike) -> Path:
    """Unzip only the files the patch reads from the ``version`` wheel; returns dest/sglang."""
    import zipfile

    dest = Path(dest)
    with zipfile.ZipFile(sglang_wheel(version)) as wheel:
        names = set(wheel.namelist())
        for name in WHEEL_FILES:
            if name in names:
                wheel.extract(name, dest)
    return dest / "sglang"

"""Where eagle3lab keeps things: the repo's data/ folder, the lab, caches."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
REPO_DIR = PACKAGE_DIR.parent
DATA_DIR = REPO_DIR / "data"
SAMPLES_DIR = DATA_DIR / "samples"
# The next measurement a reader runs without eagle3lab (issue #41): one stdlib-only file, copied
# next to the rendered report by `write_probe_script`; docs/probe.md says what it reads.
PROBE_SCRIPT = PACKAGE_DIR / "serving" / "eagle3_probe.py"


def lab_dir(preset: str = "default") -> Path:
    """Folder of a built lab preset; EAGLE3LAB_LAB_DIR overrides the root."""
    root = os.environ.get("EAGLE3LAB_LAB_DIR")
    return Path(root) / preset if root else DATA_DIR / "lab" / preset


def cache_dir(*parts: str) -> Path:
    """A per-user cache folder (wheel downloads and the like), created on demand."""
    root = Path(os.environ.get("EAGLE3LAB_CACHE", Path.home() / ".cache" / "eagle3lab"))
    path = root.joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


def read_json_object(path: Path, what: str, error=None) -> dict:
    """A JSON object from a file, or `error` (an EagleLabError subclass) saying what is wrong with
    it: missing, not JSON, or JSON but not an object (a config.json a user points us at)."""
    from eagle3lab.errors import EagleLabError

    error = error or EagleLabError
    path = Path(path)
    if not path.is_file():
        raise error(f"{what}: {path} not found")
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise error(f"{what}: {path} is not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise error(f"{what}: {path} holds a {type(data).__name__}, not a JSON object")
    return data


def read_text_file(path, what: str, error=None) -> str:
    """The text of a file a user named (UTF-8, a BOM allowed), or `error` (an EagleLabError
    subclass) in one line saying why not: missing, a folder or not a regular file, unreadable,
    not UTF-8 or binary (NUL bytes). Why: a prompts file in another encoding or a binary file
    given by mistake must cost a clear message, not a UnicodeDecodeError after a model loaded."""
    from eagle3lab.errors import EagleLabError

    error = error or EagleLabError
    path = Path(path)
    try:
        if path.is_dir():
            raise error(f"{what}: {path} is a folder, not a file")
        if not path.exists():
            raise error(f"{what}: {path} not found")
        if not path.is_file():
            raise error(f"{what}: {path} is not a regular file")
        data = path.read_bytes()
    except OSError as exc:
        raise error(f"{what}: cannot read {path} ({exc.strerror or exc})") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise error(f"{what}: {path} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
                    "save it as UTF-8") from None
    if "\x00" in text:
        raise error(f"{what}: {path} holds NUL bytes (offset {text.index(chr(0))}): not a text file")
    return text


def write_probe_script(folder) -> Path:
    """Copy eagle3_probe.py (PROBE_SCRIPT) into `folder`, executable, and return its path: written
    to a temporary name first and renamed, so a reader never finds half a script."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / PROBE_SCRIPT.name
    tmp = folder / f".{PROBE_SCRIPT.name}.{os.getpid()}.tmp"
    try:
        tmp.write_bytes(PROBE_SCRIPT.read_bytes())
        tmp.chmod(0o755)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return out


@contextlib.contextmanager
def replacing_dir(dest, suffix: str):
    """Write a folder's new contents into a temporary sibling (yielded; the caller creates it)
    and move it into place only when the block succeeds: a failure leaves the old folder as it
    was and nothing half-written."""
    dest = Path(dest)
    tmp = dest.with_name(dest.name + suffix)
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        yield tmp
        shutil.rmtree(dest, ignore_errors=True)
        tmp.rename(dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise

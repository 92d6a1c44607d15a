"""A sweep's inputs, checked before anything launches or is measured: its points (keys, values,
faults, what the engine refuses: `check_points`) and its JSON-lines file (`check_out`,
`read_sweep_file`, `append`).

Why before: a point that cannot run costs a server start (seconds for the lab, minutes for vLLM)
and then says only `failed` in a table; a file that cannot be written loses a finished
measurement. So `loadtest.sweep` and `loadsweep.sweep` refuse the whole grid at once, naming the
first bad point and why, and check the file before the first server starts.

The file holds one JSON object per line, each a record with a `point_key`. A record cut
mid-write (the sweep killed while appending, a full disk) leaves a *torn* line: it is counted
and skipped (its point is measured again), and the next record starts on a line of its own. A
file with other lines (not records) is not a sweep file: it is refused, never appended to.
"""

from __future__ import annotations

import itertools
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

from eagle3lab import engines
from eagle3lab.errors import EagleLabError
from eagle3lab.spec import LATEST_SGLANG, SPEC_NAMES

# Point keys that configure the server: the speculative config's fields (spec.SPEC_NAMES), the
# lab's faults and draft, and quantization; keys that shape the requests; `baseline` (no
# speculation) is set by the sweep itself.
_RESOLVE_KEYS = tuple(k for k in SPEC_NAMES if k not in ("model_path", "draft_model_path", "device",
                                                          "disable_overlap_schedule"))
SERVER_KEYS = _RESOLVE_KEYS + ("fault", "faults", "quantization", "draft", "draft_layer_ids")
REQUEST_KEYS = ("concurrency", "max_new_tokens", "temperature")
# `label` names a point in the library API (experiments.measure_points), carried to its row.
POINT_KEYS = SERVER_KEYS + REQUEST_KEYS + ("baseline", "label")
UNQUANTIZED = (None, "none", "", "bf16", "fp16", "fp32")


class LoadTestError(EagleLabError):
    """A benchmark or sweep was asked for something that cannot run (`eagle3lab.serving.loadtest`)."""


class SweepInputError(LoadTestError):
    """A grid point or a sweep file the sweep cannot use (exit 2, before anything runs)."""


# --------------------------------------------------------------------------- points

def grid_points(grid) -> list[dict]:
    """A dict of lists -> every combination; a list of dicts -> those points as given."""
    if isinstance(grid, dict):
        keys = list(grid)
        values = [v if isinstance(v, (list, tuple)) else [v] for v in grid.values()]
        return [dict(zip(keys, combo)) for combo in itertools.product(*values)]
    return [dict(p) for p in grid]


def point_key(point: dict) -> str:
    """A stable identity for a point (what resuming matches on)."""
    return json.dumps(point, sort_keys=True, default=str)


def fault_set(value) -> set:
    if value is None:
        return set()
    items = value.split(",") if isinstance(value, str) else list(value)
    return {str(f).strip() for f in items if str(f).strip() and str(f).strip() != "none"}


def point_spec(point: dict, backend: str = "lab") -> dict:
    """The launch spec for a point: its server keys; for the lab, ``quantization`` becomes the
    ``quant-<q>`` fault (the lab quantizes at serve time), for SGLang ``--quantization``."""
    spec = {k: v for k, v in point.items() if k in SERVER_KEYS and k != "draft" and v is not None}
    quant = spec.pop("quantization", None)
    faults = sorted(fault_set(spec.pop("fault", None)) | fault_set(spec.pop("faults", None)))
    if quant not in UNQUANTIZED:
        if getattr(engines.lookup(backend), "takes_faults", False):
            faults.append(f"quant-{quant}")
        else:
            spec["quantization"] = quant
    faults = sorted(faults)
    if faults:
        spec["fault"] = ",".join(faults)
    if point.get("baseline"):  # no speculation: keep only what changes the target or its inputs
        spec = {k: v for k, v in spec.items() if k == "quantization"}
        # lab faults that act without a draft belong to the no-speculation baseline too
        from eagle3lab.decoder.faults import NON_DRAFT_FAULTS

        kept = [f for f in faults if f.startswith("quant-") or f in NON_DRAFT_FAULTS]
        if kept:
            spec["fault"] = ",".join(kept)
    return spec


def effective_config(point: dict, version: str = LATEST_SGLANG, arch: str = "LlamaForCausalLM",
                     engine: str = "sglang") -> dict:
    """What the engine runs for this point (``eagle3lab.engines.effective``), next to what was asked."""
    from eagle3lab.spec import SpecConfig

    if point.get("baseline"):
        return {"effective_num_steps": None, "effective_topk": None, "effective_num_draft_tokens": None}
    asked = {k: point[k] for k in _RESOLVE_KEYS if point.get(k) is not None}
    try:
        versioned = engines.get(engine).rules_by_version  # vLLM's rules are version-free
        res = SpecConfig(**asked).resolve(engine=engine, version=version if versioned else None, arch=arch)
    except EagleLabError as exc:
        return {"effective_error": str(exc)}
    return {"effective_num_steps": res.num_steps, "effective_topk": res.topk,
            "effective_num_draft_tokens": res.num_draft_tokens,
            "effective_changed": bool(res.changed), "effective_error": res.error,
            "effective_warnings": list(res.warnings)}


def check_points(points: list[dict], backend: str | None = None, urls=None, version: str = LATEST_SGLANG,
                 model_path=None) -> None:
    """Refuse the grid (SweepInputError, naming the point and why) when any point cannot run:
    an unknown key, a request value out of range, an unknown or contradictory lab fault, faults
    for an engine without them, a draft that is not there, or (launched servers) a config the
    engine refuses to start with (its rules: `engines/*/rules.py`; the lab server follows
    SGLang's newest, `engines/lab/frontend.load_state`). Running servers (`urls`) are not
    launched, so their engine's refusals do not apply: a point no server runs is skipped."""
    eng = engines.lookup(backend)
    for point in points:
        _check_keys(point)
        _check_request_values(point)
        _check_faults(point, eng, urls, backend)
        if not urls and eng is not None:
            _check_draft(point, model_path)
            _check_engine_accepts(point, eng, version)


def _label(point: dict) -> str:
    return "sweep point " + ", ".join(f"{k}={v}" for k, v in point.items())


def _check_keys(point: dict) -> None:
    unknown = [k for k in point if k not in POINT_KEYS]
    if unknown:
        raise SweepInputError(f"--grid {unknown[0]}: not a sweep key; server keys: "
                              f"{', '.join(k for k in SERVER_KEYS if k != 'faults')}; request keys: "
                              f"{', '.join(REQUEST_KEYS)}")


def _check_request_values(point: dict) -> None:
    for key, low in (("concurrency", 1), ("max_new_tokens", 1), ("temperature", 0)):
        if key not in point:
            continue
        value = point[key]
        whole = key != "temperature"
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) \
            and value >= low and (not whole or float(value).is_integer())
        if not ok:
            kind = "a whole number" if whole else "a number"
            raise SweepInputError(f"{_label(point)}: {key} must be {kind} >= {low}, got {value!r}")


def _check_faults(point: dict, eng, urls, backend) -> None:
    spec = point_spec(point, backend or "lab") if eng is None or eng.takes_faults else {
        "fault": ",".join(sorted(fault_set(point.get("fault")) | fault_set(point.get("faults"))))}
    faults = fault_set(spec.get("fault"))
    if not faults:
        return
    if eng is not None and not eng.takes_faults and not urls:
        raise SweepInputError(f"{_label(point)}: faults are lab switches (of the lab engine); --backend "
                              f"{eng.name} cannot apply them (use --backend lab)")
    from eagle3lab.decoder.faults import FaultError, normalize_faults

    try:
        normalize_faults(sorted(faults))
    except FaultError as exc:
        raise SweepInputError(f"{_label(point)}: {exc}") from None


def _check_draft(point: dict, model_path) -> None:
    draft = point.get("draft")
    if draft is None or point.get("baseline") or model_path is None or Path(str(draft)).exists():
        return  # without the target's folder a lab draft's name cannot be looked up here
    if (Path(model_path).parent / "drafts" / str(draft)).exists():
        return
    raise SweepInputError(f"{_label(point)}: draft {draft!r} is neither a folder nor a lab draft next "
                          f"to the target")


def _check_engine_accepts(point: dict, eng, version: str) -> None:
    if point.get("baseline") or not any(point.get(k) is not None for k in _RESOLVE_KEYS):
        return
    rules = engines.follows(eng.name)
    at = LATEST_SGLANG if eng.emulates else version  # the lab server resolves as the newest SGLang
    error = effective_config(point, at, engine=rules.name).get("effective_error")
    if error:
        who = f"{rules.title} {at}" if rules.rules_by_version else rules.title
        if eng.emulates:
            who = f"{eng.title} server ({who}'s rules)"
        raise SweepInputError(f"{_label(point)}: {who} refuses it: {error}")


# --------------------------------------------------------------------------- the sweep file

@dataclass
class SweepFile:
    """What a sweep file holds: its records and how many torn lines (records cut mid-write)."""

    path: Path | None
    records: list = field(default_factory=list)
    torn: int = 0

    def note(self) -> str:
        """'' or a sentence about the torn lines, for the sweep's output."""
        if not self.torn:
            return ""
        return (f"{self.torn} torn line{'s' if self.torn > 1 else ''} in {self.path} (a record cut mid-write: "
                "not read, its point measured again; new records start on a line of their own)")


def read_sweep_file(out) -> SweepFile:
    """The records of a sweep file; a missing file has none. Refused (SweepInputError): a
    folder, an unreadable file, one that is not UTF-8 text, one with lines that are not records."""
    path = Path(out)
    if path.is_dir():
        raise SweepInputError(f"--out {path} is a folder: give a file path (e.g. {path / 'sweep.jsonl'})")
    if not path.exists():
        return SweepFile(path)
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise SweepInputError(f"--out {path}: cannot read it ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise SweepInputError(f"--out {path} is not a sweep file (not UTF-8 text at byte {exc.start}): "
                              "give a new path") from None
    result = SweepFile(path)
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        record = _record(line)
        if record is not None:
            result.records.append(record)
        elif line.lstrip().startswith("{"):
            result.torn += 1
        else:
            raise SweepInputError(f"--out {path} is not a sweep file (line {number} is not a JSON record): "
                                  "give a new path")
    return result


def _record(line: str) -> dict | None:
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value if isinstance(value, dict) and "point_key" in value else None


def load_points(out) -> list[dict]:
    """The records of a sweep file (one JSON object per line; torn lines are not records)."""
    return read_sweep_file(out).records


def check_out(out) -> SweepFile:
    """Read the sweep file and make sure records can be appended to it, before any measurement:
    an existing file is opened for appending (its bytes unchanged), a new one created and removed."""
    sweep_file = read_sweep_file(out)
    path = sweep_file.path
    existed = path.exists()
    try:
        with open(path, "a", encoding="utf-8"):
            pass
    except OSError as exc:
        raise SweepInputError(f"--out {path}: cannot write there ({exc.strerror or exc})") from None
    if not existed:
        os.unlink(path)
    return sweep_file


def append(out, record: dict, lock) -> None:
    """One record on a line of its own (after a torn last line, a newline first)."""
    line = json.dumps(record, default=str) + "\n"
    with lock:
        try:
            with open(out, "a+b") as fh:
                fh.seek(0, os.SEEK_END)
                if fh.tell() > 0:
                    fh.seek(-1, os.SEEK_END)
                    if fh.read(1) != b"\n":
                        line = "\n" + line
                fh.write(line.encode("utf-8"))
        except OSError as exc:
            raise SweepInputError(f"--out {out}: cannot append the record ({exc.strerror or exc}); "
                                  f"it was: {line.strip()}") from None

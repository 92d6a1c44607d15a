"""What a notebook hands the post-mortem: named, measured values recorded in the executed notebook.

Why: the report's first page is a post-mortem built from the notebooks' measurements, not a copy
of their prose. A notebook calls `record("flag_sets", rows)`; the value travels inside the
executed notebook as an output of its own MIME type (dropped from the rendered pages), and
`collect(notebooks)` gives the index every recorded value, so a figure on the index is the
figure its notebook measured, never retyped.
"""

from __future__ import annotations

import math
from typing import Any, Iterable

MIME = "application/vnd.eagle3lab.evidence+json"

# The columns of a measured row the post-mortem reads (`row`): figures with their intervals and
# the paired baseline each speed-up divides.
ROW_KEYS = ("tokens_per_s", "tokens_per_s_ci95", "baseline_tokens_per_s", "baseline_tokens_per_s_ci95",
            "speedup", "speedup_ci95", "accept_length", "accept_length_ci95", "prompts",
            "per_position", "per_position_n", "per_position_ci95", "draft tokens run", "draft_over_target")


def plain(value: Any) -> Any:
    """JSON-able copy: numpy scalars to numbers, tuples to lists, NaN and infinities to None."""
    if hasattr(value, "item") and not isinstance(value, (list, tuple, dict, str)):
        try:
            value = value.item()
        except (ValueError, AttributeError):
            pass
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)) or type(value).__name__ == "ndarray":
        return [plain(v) for v in list(value)]
    if value is None or isinstance(value, (bool, int, str)):
        return value
    return str(value)


def row(frame_row) -> dict:
    """The post-mortem's columns of one measured row (a Series or dict), JSON-able."""
    get = frame_row.get if hasattr(frame_row, "get") else (lambda k, d=None: d)
    return {k: plain(get(k)) for k in ROW_KEYS if get(k) is not None}


_THIS_KERNEL: dict = {}  # what this process recorded: a notebook reads its own evidence back


def record(key: str, value: Any) -> None:
    """Record `value` under `key` in the executed notebook (no visible output); this process
    keeps it too (`so_far`), so a later cell of the same notebook can set it beside the incident."""
    value = plain(value)
    _THIS_KERNEL[key] = value
    from IPython.display import display

    display({MIME: {"key": key, "value": value}}, raw=True)


def so_far() -> dict:
    """Everything this process has recorded."""
    return dict(_THIS_KERNEL)


def recorded(nb) -> dict:
    """{key: value} of everything one executed notebook recorded (a later record of a key wins)."""
    found = {}
    for cell in nb.cells:
        for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
            item = out.get("data", {}).get(MIME)
            if isinstance(item, dict) and "key" in item:
                found[item["key"]] = item.get("value")
    return found


def collect(notebooks: Iterable) -> dict:
    """Every notebook's records in one dict (keys are unique across notebooks by convention)."""
    out = {}
    for nb in notebooks:
        out.update(recorded(nb))
    return out


def strip(nb) -> None:
    """Remove the records from a notebook's outputs (a rendered page shows none)."""
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = [o for o in cell.get("outputs", []) if MIME not in o.get("data", {})]

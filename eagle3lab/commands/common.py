"""What several subcommands share on their way in and out: argument types that refuse values
which would not mean what they say (a count below 1, a negative temperature), and JSON that is
JSON (no NaN). Standard library only: importing it costs nothing at `eagle3lab --help`."""

from __future__ import annotations

import argparse
import json
import math


def positive_int(text: str) -> int:
    """A whole number >= 1 (argparse type: a bad value is argparse's one-line error, exit 2)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {value}")
    return value


def non_negative_float(text: str) -> float:
    """A finite number >= 0 (a temperature)."""
    value = _finite(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text}")
    return value


def positive_float(text: str) -> float:
    """A finite number > 0 (seconds to wait)."""
    value = _finite(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, got {text}")
    return value


def _finite(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text}")
    return value


def json_safe(value):
    """`value` with NaN and infinities as None, numpy scalars as Python numbers, tuples as lists:
    what `json.dumps(..., allow_nan=False)` accepts (NaN is not JSON; a missing figure is null)."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        try:
            value = value.item()
        except (ValueError, AttributeError, TypeError):
            return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def dumps(value, **kwargs) -> str:
    """Strict JSON of `value` (`json_safe`): what `--json` prints."""
    return json.dumps(json_safe(value), allow_nan=False, **kwargs)

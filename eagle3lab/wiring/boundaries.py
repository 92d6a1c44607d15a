"""Boundaries: what a draft's layer ids turn into, and the bad inputs of every capture rule.

A draft's `fc` sees `cat([h_b1, h_b2, h_b3])`, where each `h_b` is a *boundary* of the target's
residual stream: with N decoder layers, b = 0 is the embedding output and b = k the output of
layer k-1 (the input of layer k), before any final norm. Training and serving each turn the
draft config's `eagle_aux_hidden_state_layer_ids` into boundaries with their own rule (each
engine's in `eagle3lab/engines/<name>/capture.py`, the trainers' in `eagle3lab.wiring.conventions`).

Results are `Boundaries`: a plain `list[int]` (compares equal to a list) that also carries
`.warnings` (list[str]: ids ignored, CUDA-graph override, post-norm tensors, ...), `.source`
(the file and versions the rule was read in) and `.ids_ignored`. Nothing is emitted through the
`warnings` module: callers read `.warnings`. This module sits below the engines so that each
engine's capture rule and the trainers' can share it without a cycle.
"""

from __future__ import annotations

from eagle3lab.errors import EagleLabError

KEYS = ("eagle_config", "top_level")  # where a draft config holds its ids: nested, or top level


class ConventionError(EagleLabError):
    """Bad input to a convention lookup: unknown engine, version, architecture or ids."""


class CaptureError(EagleLabError):
    """The engine would not feed the draft one tensor per id.

    `kind` is "crash" (the server or trainer raises) or "dropped" (fewer tensors are fed, so the
    draft's fc gets the wrong width); `fed` the boundaries it does capture (may be partial).
    """

    def __init__(self, message: str, kind: str = "crash", fed: list[int] | None = None, short: str = ""):
        super().__init__(message)
        self.kind = kind
        self.fed = list(fed or [])
        self.short = short or kind  # a few words, for tables


class Boundaries(list):
    """A list[int] of boundaries, in the order they are concatenated, plus what to know about it."""

    def __init__(self, items=(), warnings=(), source="", ids_ignored=False, post_norm=()):
        super().__init__(int(b) for b in items)
        self.warnings = list(warnings)
        self.source = source
        self.ids_ignored = ids_ignored
        self.post_norm = tuple(post_norm)  # slot indices holding a post-final-norm tensor

    def __repr__(self) -> str:
        return f"Boundaries({list(self)!r}{', warnings=' + repr(self.warnings) if self.warnings else ''})"


def default_boundaries(num_layers: int) -> list[int]:
    """What every implementation feeds when the draft config has no ids (docs/sources.md s.2)."""
    return [2, num_layers // 2, num_layers - 3]


def describe_boundary(b: int | None, num_layers: int, post_norm: bool = False) -> str:
    """Human name of a boundary: 'embedding', 'layer 3 out', 'final (post-norm)'."""
    if b is None:
        return "nothing"
    if b == 0:
        return "embedding"
    if post_norm:
        return f"layer {b - 1} out, post-norm"
    return f"layer {b - 1} out" + (" (last, pre-norm)" if b == num_layers else "")



def as_version(text: str):
    from packaging.version import InvalidVersion, Version

    try:
        return Version(str(text))
    except InvalidVersion:
        raise ConventionError(f"{text!r} is not a version number") from None


def check_version(engine: str, version: str, known: tuple[str, ...]):
    """Parse `version`; refuse one outside the range read in source, naming the nearest known."""
    v = as_version(version)
    lo, hi = as_version(known[0]), as_version(known[-1])
    # post releases / patch releases of the newest read version (0.5.23.post1) count as read
    if lo <= v and (v <= hi or v.release[:3] == hi.release[:3]):
        return v
    nearest = known[0] if v < lo else known[-1]
    raise ConventionError(
        f"{engine} {version} is outside the versions whose source was read ({known[0]}-{known[-1]}); "
        f"nearest known: {nearest}. Pass {engine}=={nearest} to use its rule if you know it applies.")


def between(v, lo: str, hi: str | None = None) -> bool:
    """lo <= v <= hi, where hi includes its post releases (0.5.21.post1 counts as 0.5.21)."""
    if v < as_version(lo):
        return False
    return hi is None or v.release[:3] <= as_version(hi).release[:3]


def validate_ids(layer_ids, num_layers: int) -> list[int] | None:
    """Draft layer ids as ints (None: the config has none); every rule reads ids in -1..N."""
    if not isinstance(num_layers, int) or isinstance(num_layers, bool) or num_layers < 4:
        raise ConventionError(f"num_layers must be an int >= 4, got {num_layers!r}")
    if layer_ids is None:
        return None
    try:
        ids = [int(i) for i in layer_ids]
    except (TypeError, ValueError):
        raise ConventionError(f"layer ids must be integers, got {layer_ids!r}") from None
    if any(isinstance(i, bool) or float(i) != int(i) for i in layer_ids):
        raise ConventionError(f"layer ids must be integers, got {layer_ids!r}")
    if not ids:
        raise ConventionError("the layer id list is empty")
    bad = [i for i in ids if not -1 <= i <= num_layers]
    if bad:
        raise ConventionError(f"layer ids {bad} are out of range for a {num_layers}-layer target "
                              f"(every convention reads ids in -1..{num_layers})")
    return ids


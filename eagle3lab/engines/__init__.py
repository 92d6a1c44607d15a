"""The serving engines eagle3lab knows, one folder each, behind one record (`base.Engine`), and what a speculative config resolves to on them (`effective`). Not: starting and measuring servers (serving).

    from eagle3lab import engines
    engines.get("vllm").observes_acceptance_via   # "/metrics"
    eng, version = engines.pinned("sglang==0.5.9")

Adding an engine: one folder with an `ENGINE = Engine(...)` in its `__init__`, and one line in
`_REGISTRY` below (docs/library.md "Adding an engine"). Code outside this package never tests an engine's
name; it asks the registry.

May import: spec, errors, workers, conventions, sources (and within the package: argv and base
first, then each engine's folder). Above it: config, server, everything that runs an engine.
"""

from __future__ import annotations

from eagle3lab.engines import lab as _lab
from eagle3lab.engines import sglang as _sglang
from eagle3lab.engines import vllm as _vllm
from eagle3lab.engines.base import Engine
from eagle3lab.errors import EagleLabError
from eagle3lab.spec import split_engine

_REGISTRY: dict[str, Engine] = {
    "lab": _lab.ENGINE,
    "sglang": _sglang.ENGINE,
    "vllm": _vllm.ENGINE,
}


def names() -> tuple[str, ...]:
    return tuple(_REGISTRY)


def get(name: str) -> Engine:
    """The engine called `name` (case-insensitive; an ENGINE==VERSION pin is allowed and ignored)."""
    key, _ = split_engine(name)
    if key not in _REGISTRY:
        raise EagleLabError(f"unknown engine {name!r}: use {', '.join(names())}")
    return _REGISTRY[key]


def lookup(name) -> Engine | None:
    """The engine called `name`, or None (no name, or one eagle3lab does not know)."""
    try:
        return get(name) if name else None
    except EagleLabError:
        return None


def patch_options(name) -> tuple:
    """Capture variants to try for `name`: (stock, patched) where eagle3lab's patch exists."""
    eng = lookup(name)
    return eng.patch_options if eng is not None else (False,)


def reads_top_level_ids(name) -> bool:
    eng = lookup(name)
    return eng is not None and eng.reads_top_level_ids


def follows(name: str) -> Engine:
    """The engine whose rules and versions `name` follows: itself, or the one it emulates (the lab
    server: SGLang)."""
    engine = get(name)
    return get(engine.emulates) if engine.emulates else engine


def resolving() -> tuple[str, ...]:
    """Engines whose speculative config eagle3lab resolves (the lab takes what it is given)."""
    return tuple(n for n, e in _REGISTRY.items() if e.resolves_configs)


def pinned(text: str, version: str | None = None) -> tuple[Engine, str | None]:
    """`ENGINE[==VERSION]` (+ an explicit version) -> (Engine, the version its rules use)."""
    name, version = split_engine(text, version)
    return get(name), get(name).check_version(version)


__all__ = ["Engine", "follows", "get", "lookup", "names", "pinned", "resolving"]

"""Known engine defects that cost EAGLE-3 acceptance: a sourced table read release by release, and how to match it. Not: the engines' argument rules (engines).

Why: a deployer's first question after "is my config what runs?" is "does my engine version have
a known defect?". The field keeps no such list for EAGLE-3, so this is one, in the style of
`engines.sglang.sglang_rules.SGLANG_RULES`: one frozen row per defect (rows_vllm.py, rows_sglang.py),
each quoting its upstream thread and naming the code that makes it. Its version bounds are read
in the released wheels by `scripts/read_releases.py` (probes.py holds each row's code signature;
docs/known-defects-releases.json the reading the tests compare the rows with); a row no code
signature can find says "reported in ..." (docs/known-defects.md).

* `match(engine, version, platform, settings)` -> the rows that apply (or may apply: a setting
  the caller does not know is named, never guessed);
* `settings_from_flags(flags)` / `draft_settings(config)` read the settings rows test;
* a row whose symptom is measurable has a `signature(sampled, greedy)` hook on acceptance
  windows (`Window`): the doctor runs it on its own probe windows (`--url`) or a log (`--log`).

Versions are PEP 440 (`packaging`): "0.5.10.post1" is below a fix in 0.5.11, and a local label
names the build's platform when the caller does not ("0.32.0+cpu" is a CPU build).
"""

from __future__ import annotations

from eagle3lab import engines
from eagle3lab.known_defects.row import (ALPHA, FLOOR_NO_GREEDY, GREEDY_NORMAL, MIN_REACHED, PAST_FIRST_MAX,
                                           PLATFORMS, Condition, KnownDefect, KnownDefectError, Match,
                                           SignatureResult, Source, Window, binom_cdf, parse_version,
                                           platform_of)
from eagle3lab.known_defects.rows_sglang import ROWS as _SGLANG_ROWS
from eagle3lab.known_defects.rows_vllm import ROWS as _VLLM_ROWS
from eagle3lab.known_defects.settings import (SETTINGS, T_POSITIVE, derived_settings, draft_settings,
                                              settings_from_flags)

ENGINES = tuple(n for n in engines.names() if engines.get(n).has_known_defects)
KNOWN_DEFECTS: tuple[KnownDefect, ...] = _VLLM_ROWS + _SGLANG_ROWS

__all__ = ["ENGINES", "PLATFORMS", "SETTINGS", "KNOWN_DEFECTS", "KnownDefect", "KnownDefectError", "Condition",
           "Source", "Match", "Window", "SignatureResult", "match", "by_id", "settings_from_flags",
           "draft_settings", "derived_settings", "parse_version", "platform_of", "binom_cdf", "T_POSITIVE",
           "MIN_REACHED", "GREEDY_NORMAL", "PAST_FIRST_MAX", "ALPHA", "FLOOR_NO_GREEDY"]

_PLATFORM_NAMES = {"cuda": "CUDA (NVIDIA)", "rocm": "ROCm (AMD)", "cpu": "a CPU build", "xpu": "XPU (Intel)"}


def match(engine: str, version: str, platform: str | None = None, settings: dict | None = None) -> list[Match]:
    """The registry rows for this engine version: "applies" when the platform and every
    setting a row needs are known and hold, "conditional" when some are unknown (named in
    `unknown`); rows whose version range, platform or a known setting rules them out are left out."""
    engine = str(engine or "").strip().lower()
    if engine not in ENGINES:
        raise KnownDefectError(f"unknown engine {engine!r}: the registry has {', '.join(ENGINES)}")
    parse_version(version)
    platform = (platform or platform_of(version) or None)
    if platform is not None and platform not in PLATFORMS:
        raise KnownDefectError(f"unknown platform {platform!r}: use one of {', '.join(PLATFORMS)}")
    settings = settings or {}
    unknown_keys = set(settings) - set(SETTINGS)
    if unknown_keys:
        raise KnownDefectError(f"unknown setting(s) {', '.join(sorted(unknown_keys))}: "
                               f"the registry reads {', '.join(SETTINGS)}")
    values = derived_settings(settings)
    out = []
    for row in KNOWN_DEFECTS:
        if row.engine != engine or not row.affects(version):
            continue
        m = _match_row(row, platform, values)
        if m is not None:
            out.append(m)
    return out


def _match_row(row: KnownDefect, platform: str | None, values: dict) -> Match | None:
    unknown = []
    if row.platforms:
        if platform is None:
            unknown.append(f"you run on {' or '.join(_PLATFORM_NAMES[p] for p in row.platforms)}")
        elif platform not in row.platforms:
            return None
    for cond in row.conditions:
        value = values.get(cond.key)
        if value is None:
            unknown.append(cond.text)
        elif not cond.test(value):
            return None
    return Match(row, "conditional" if unknown else "applies", tuple(unknown))


def by_id(defect_id: str) -> KnownDefect:
    for row in KNOWN_DEFECTS:
        if row.id == defect_id:
            return row
    raise KnownDefectError(f"no known defect {defect_id!r}")

"""The registry's row (`KnownDefect`) and the acceptance signatures a row can carry.

Why a row holds version *ranges* and says how they were found: a deployer acts on a row
(upgrade, downgrade, change a flag), so its bounds must be the ones a rerun of
`scripts/read_releases.py` finds in the released wheels (docs/known-defects.md, "Read in
releases"; tests/test_known_defects.py compares both). A row whose defect no code signature
can find is `read=False`: its versions are the ones the upstream report names, and the doctor
says "reported in ..." instead of "affected".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

from eagle3lab.errors import EagleLabError

PLATFORMS = ("cuda", "rocm", "cpu", "xpu")


class KnownDefectError(EagleLabError):
    """Bad input to the registry: unknown engine or platform, a version that is no version."""


def parse_version(text: str):
    from packaging.version import InvalidVersion, Version

    try:
        return Version(str(text).strip())
    except InvalidVersion:
        raise KnownDefectError(f"not a version number: {text!r} (expected e.g. 0.5.23 or 0.32.0+cpu)") from None


def platform_of(version: str) -> str | None:
    """The platform a PEP 440 local label names (vLLM builds: 0.32.0+cpu, +rocm..., +cu129)."""
    local = (parse_version(version).local or "").lower()
    for prefix, name in (("cpu", "cpu"), ("rocm", "rocm"), ("xpu", "xpu"), ("cu", "cuda")):
        if local.startswith(prefix):
            return name
    return None


@dataclass(frozen=True)
class Condition:
    """One setting a defect needs: `test(value)` on `settings[key]`; `text` says it in words
    ("applies if ...") when the setting is unknown."""

    key: str
    test: Callable
    text: str


@dataclass(frozen=True)
class Source:
    """Where a row comes from: the upstream thread or PR, a short excerpt of it, and what the
    thread itself says about versions (so a reader can tell the thread's words from ours)."""

    thread: str  # "vllm-project/vllm#55005 (open), fix PR #55006 (open)"
    quote: str  # a short excerpt, in quotes, from the thread or PR
    versions: str  # what the source states about versions, or "states no version"


@dataclass(frozen=True)
class KnownDefect:
    """One defect. `ranges` are half-open [first, end) version intervals; end None = no end read.

    read=True: every bound is what `scripts/read_releases.py` found with the row's code signature
    (`code` says which lines) in the released wheels, equal to docs/known-defects-releases.json;
    `end_kind` says whether the last range ends in a fix or because the code is gone, `last_read`
    is the newest version read, `first_open` says the first bound is the oldest release read.
    read=False: no code signature could be read; `reported_in` names where the report saw it, and
    the ranges follow the report (never confirmed in a release)."""

    id: str
    engine: str
    title: str
    ranges: tuple[tuple[str, str | None], ...]
    platforms: tuple[str, ...]  # () = every platform
    conditions: tuple[Condition, ...]
    symptom: str  # what it does to accept length / per position / temperature / batch
    source: Source
    code: str  # the upstream files and lines that make the defect (or its fix), by version
    workaround: str
    read: bool = True
    end_kind: str | None = None  # "fixed" | "gone" | None (not fixed in the newest version read)
    last_read: str | None = None
    first_open: bool = False
    reported_in: str = ""
    path: bool = False  # read=False, but the ranges are the life of the code path the report concerns, read
    severity: str = "warning"  # when it applies for certain; "info" for metric- or speed-only defects
    signature: Callable | None = None  # (sampled: Window, greedy: Window | None) -> SignatureResult

    def affects(self, version: str) -> bool:
        v = parse_version(version)
        return any(parse_version(lo) <= v and (hi is None or v < parse_version(hi)) for lo, hi in self.ranges)

    @property
    def first(self) -> str:
        return self.ranges[0][0]

    @property
    def fixed(self) -> str | None:
        """The end of the last range when it is a fix (None when open or when the code is gone)."""
        return self.ranges[-1][1] if self.end_kind == "fixed" else None

    @property
    def span(self) -> str:
        """The ranges alone: "0.20.0 <= v < 0.34.0", ">= 0.5.1"."""
        return ", ".join(f"{lo} <= v < {hi}" if hi else f">= {lo}" for lo, hi in self.ranges)

    @property
    def versions(self) -> str:
        """The ranges in words, with how the last one ends."""
        text = self.span
        if self.first_open:
            text += f" (the first bound is the oldest release read, {self.first}: it may start earlier)"
        if not self.read and self.path:
            return (f"{text} (the releases that ship the code path the report concerns; the defect itself was "
                    "not read in them)")
        if not self.read:
            return f"{text} (as reported, not read in any release)"
        if self.end_kind == "gone":
            return f"{text} (the code is gone in {self.ranges[-1][1]}: removed, not fixed)"
        if self.ranges[-1][1] is None:
            return f"{text} (not fixed in the newest version read, {self.last_read})"
        return text

    @property
    def bounds_how(self) -> str:
        """One phrase for the doctor: read in releases, or reported."""
        if self.read:
            return "bounds read in the released wheels (docs/known-defects.md, 'Read in releases')"
        return "no release read confirms the bounds"


@dataclass(frozen=True)
class Match:
    """A row that matches: for certain ("applies"), or only if the settings named in `unknown`
    hold ("conditional")."""

    defect: KnownDefect
    status: str  # "applies" | "conditional"
    unknown: tuple[str, ...] = ()


# --------------------------------------------------------------------------- signatures


@dataclass(frozen=True)
class Window:
    """Acceptance over one traffic window at a known temperature: verify steps that carried
    drafts, and per draft position the steps that accepted it (vLLM's unconditional counts:
    position i counts only when positions 1..i-1 were accepted too)."""

    drafts: int
    accepted_per_pos: tuple[int, ...]
    temperature: float | None
    source: str = ""


@dataclass(frozen=True)
class SignatureResult:
    """matched: True / False, or None when the windows cannot tell (the reason in `evidence`)."""

    matched: bool | None
    evidence: str
    weight: float = 0.0  # orders the finding among others (not a probability; never printed)
    data: dict = field(default_factory=dict)


MIN_REACHED = 20  # sampled steps that accepted position 1: fewer cannot show position 2 is dead
GREEDY_NORMAL = 0.2  # greedy P(accept 2 | accepted 1) at least this: the draft itself is fine
PAST_FIRST_MAX = 0.02  # sampled P(accept 2 | accepted 1) at most this: "nothing past position 1"
ALPHA = 0.01
FLOOR_NO_GREEDY = 0.1  # assumed healthy sampled P(accept 2 | 1) when no greedy window is at hand


def binom_cdf(x: int, n: int, p: float) -> float:
    """P(X <= x) for X ~ Binomial(n, p)."""
    return float(sum(math.comb(n, i) * p ** i * (1 - p) ** (n - i) for i in range(0, x + 1)))


def dead_past_first(sampled: Window, greedy: Window | None) -> SignatureResult:
    """vLLM CPU temperature expansion: at T > 0 acceptance dies at position 1 (nothing accepted)
    or at position 2 (position 1 sometimes, never after), while greedy traffic on the same server
    accepts there as usual.

    A healthy sampler keeps, at each position, at least a quarter of greedy's conditional rate (on
    the lab, T = 0.7 keeps about half); a position matches when the sampled rate there is at most
    2 % and so few acceptances would happen at that floor with probability below 1 %."""
    if sampled.temperature is None or sampled.temperature <= 0:
        return SignatureResult(None, "needs traffic sampled at temperature > 0")
    if len(sampled.accepted_per_pos) < 2:
        return SignatureResult(None, "needs at least 2 draft tokens per step (position 2)")
    results = [_dead_at(pos, sampled, greedy) for pos in (1, 2)]
    for res in results:
        if res.matched:
            return res
    undecided = [r for r in results if r.matched is None]
    return undecided[0] if undecided else results[-1]


def _counts(w: Window, pos: int) -> tuple[int, int]:
    """(steps that reached position `pos`, steps that accepted it)."""
    reached = w.drafts if pos == 1 else int(w.accepted_per_pos[pos - 2])
    return int(reached), int(w.accepted_per_pos[pos - 1])


def _dead_at(pos: int, sampled: Window, greedy: Window | None) -> SignatureResult:
    reached, acc = _counts(sampled, pos)
    if reached < MIN_REACHED:
        return SignatureResult(None, f"only {reached} sampled steps reached position {pos} (at least "
                               f"{MIN_REACHED} needed to tell whether it is ever accepted)")
    rate = acc / reached
    data = {"position": pos, "sampled_drafts": sampled.drafts, "sampled_reached": reached,
            "sampled_accepted": acc, "sampled_rate": round(rate, 4), "temperature": sampled.temperature}
    if greedy is not None:
        g_reached, g_acc = _counts(greedy, pos)
        if g_reached < MIN_REACHED:
            return SignatureResult(None, f"the greedy window has only {g_reached} steps that reached "
                                   f"position {pos} (at least {MIN_REACHED} needed)", data=data)
        g_rate = g_acc / g_reached
        data.update(greedy_reached=g_reached, greedy_accepted=g_acc, greedy_rate=round(g_rate, 4))
        if g_rate < GREEDY_NORMAL:
            return SignatureResult(False, f"greedy traffic also accepts little at position {pos} ({g_acc} of "
                                   f"{g_reached}, {g_rate:.0%}): the draft or its wiring, not this defect",
                                   data=data)
        floor, how = g_rate / 4, f"a quarter of greedy's {g_rate:.0%} ({g_acc} of {g_reached})"
    else:
        floor, how = FLOOR_NO_GREEDY, f"{FLOOR_NO_GREEDY:.0%} (assumed: no greedy window to compare)"
    p = binom_cdf(acc, reached, floor)
    data.update(floor=round(floor, 4), p_value=p)
    evidence = (f"at temperature {sampled.temperature:g}, {acc} of the {reached} steps that reached position "
                f"{pos} accepted it ({rate:.1%}; {sampled.drafts} steps in all, {sampled.source}); a healthy "
                f"sampler would keep at least {how}: so few with probability {p:.1e}")
    if rate <= PAST_FIRST_MAX and p < ALPHA:
        return SignatureResult(True, evidence, 0.9 if greedy is not None else 0.6, data)
    return SignatureResult(False, evidence, data=data)

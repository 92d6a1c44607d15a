"""The incident as data: every figure the seed's story reports, read from `data/incident/incident.json`.

Why a record: the post-mortem sets each incident figure beside the lab's figure of the same
definition, and a number typed into prose drifts from its source. Here each figure carries its
quote from the story (`data/incident/seed.txt`, checked by tests/test_incident.py), the
configuration it was measured at, what it measures, and its place in the timeline. Nothing in
this record was measured by eagle3lab: prose tags these figures "incident, as reported".
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from eagle3lab.errors import EagleLabError
from eagle3lab.paths import DATA_DIR

INCIDENT_DIR = DATA_DIR / "incident"
ORIGIN = "incident, as reported"  # the tag of every figure quoted from the story


@dataclass(frozen=True)
class Figure:
    """One reported figure: a value (or the values the story lists), its unit, what it measures,
    the configuration (a key of `Incident.configs`) and timeline step, and its quote."""

    id: str
    value: float | tuple
    unit: str
    measure: str
    config: str | None
    step: int
    quote: str
    note: str = ""

    @property
    def values(self) -> tuple:
        return self.value if isinstance(self.value, tuple) else (self.value,)

    @property
    def low(self) -> float:
        return float(min(self.values))

    @property
    def high(self) -> float:
        return float(max(self.values))

    @property
    def mid(self) -> float:
        """The mean of the values the story lists (the value itself when it lists one)."""
        return float(sum(self.values) / len(self.values))

    def text(self, fmt: str = "g") -> str:
        """The figure as the story gives it: a value with its unit, a range of the values listed,
        a share as a percentage."""
        if self.unit == "share":
            parts = [f"{v:.1%}".replace("%", " %") for v in self.values]
            return parts[0] if len(parts) == 1 else f"{self.low:.2f}–{self.high:.2f}"
        nums = [f"{v:{fmt}}" if not isinstance(v, int) else f"{v:,}" for v in self.values]
        unit = f" {self.unit}" if self.unit in ("tok/s",) else ""
        return (nums[0] if len(nums) == 1 else f"{nums[0]}–{nums[-1]}") + unit


@dataclass(frozen=True)
class Incident:
    """The whole record: figures by id, configurations, the timeline, the model facts."""

    figures: dict
    configs: dict
    timeline: tuple
    model: dict
    measures: dict
    text: str
    unstated: tuple = ()  # what the write-up never says ({id, what, why, absent: regexes it does not match})

    def figure(self, figure_id: str) -> Figure:
        try:
            return self.figures[figure_id]
        except KeyError:
            raise EagleLabError(f"the incident record has no figure {figure_id!r} "
                                f"(has: {', '.join(self.figures)})") from None

    def config(self, name: str) -> dict:
        """{num_steps, topk, num_draft_tokens, wiring, note} of a named configuration."""
        return self.configs[name]

    def spec(self, name: str):
        """The named configuration as a SpecConfig (None for 'none', no speculation)."""
        from eagle3lab.spec import SpecConfig

        cfg = self.configs[name]
        if cfg.get("num_steps") is None:
            return None
        return SpecConfig(num_steps=cfg["num_steps"], topk=cfg["topk"], num_draft_tokens=cfg["num_draft_tokens"])

    def speedup(self, figure_id: str) -> float:
        """A reported tok/s over the reported no-speculation baseline (both as reported)."""
        return self.figure(figure_id).mid / self.figure("baseline_tps").mid

    def at_step(self, step: int) -> list[Figure]:
        return [f for f in self.figures.values() if f.step == step]

    def stated_after_all(self) -> list[str]:
        """Ids of `unstated` entries one of whose patterns the story's text does match (a claim
        that the write-up never says something must be checked against the write-up)."""
        import re

        return [u["id"] for u in self.unstated if any(re.search(p, self.text) for p in u["absent"])]

    def missing_quotes(self) -> list[str]:
        """Ids of figures whose quote is not, word for word, in the story's text."""
        flat = " ".join(self.text.split())
        return [f.id for f in self.figures.values() if " ".join(f.quote.split()) not in flat]


def config_label(cfg: dict) -> str:
    """`5/1/6` (steps/topk/draft tokens) for a configuration dict; "no speculation" for none."""
    if cfg.get("num_steps") is None:
        return "no speculation"
    return f"{cfg['num_steps']}/{cfg['topk']}/{cfg['num_draft_tokens']}"


@lru_cache(maxsize=4)
def load(directory: str | None = None) -> Incident:
    """The incident record (cached): a clear error if the file is missing or damaged."""
    folder = Path(directory) if directory else INCIDENT_DIR
    path = folder / "incident.json"
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        text = (folder / raw["source"]["file"]).read_text(encoding="utf-8")
        figures = {}
        for f in raw["figures"]:
            value = tuple(f["value"]) if isinstance(f["value"], list) else f["value"]
            figures[f["id"]] = Figure(f["id"], value, f["unit"], f["measure"], f.get("config"),
                                      int(f["step"]), f["quote"], f.get("note", ""))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise EagleLabError(f"cannot read the incident record {path}: {exc}") from None
    return Incident(figures, raw["configs"], tuple(raw["timeline"]), raw["model"], raw["measures"], text,
                    tuple(raw.get("unstated", ())))

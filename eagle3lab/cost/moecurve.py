"""A chain's step cost on a target given by its shape (routed experts E, active K per token, the
experts' share x of a plain step's bytes), in the bandwidth-bound limit: what the explorers draw
when a reader picks a target other than the lab's.

    C(k) = fc + draft x k + verify(k + 1)
    verify(n) = (1 - x) + x U(n) / K,  U(n) = E (1 - (1 - K/E)^(1 + locality (n - 1)))

(`archcost.verify_ratio`, `costchecks.EXPLORER_FORMULA`). A depth-k chain verifies k + 1 tokens,
whose union of experts the verify pass reads; on a dense target (E 0) verify(n) = 1. For a shipped
target with its assumed draft this is `archcost.StepModel.parts(k).step_cost` exactly
(`CostParams()`: no fixed per-forward time, no per-step overhead). Its speed-up is of decode
tokens/s, L / C(k): the lab's prefill terms belong to the lab's target, not to this one.
Statistics layer: imports `archcost`, `costchecks`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import lru_cache

import numpy as np

from eagle3lab.cost.archcost import BOUND_NOTE, expected_union, verify_ratio
from eagle3lab.cost.modelshape import ConfigError

ROUND = 3  # the explorers' inputs show 3 decimals; a preset starts from exactly what they show


@dataclass(frozen=True)
class MoeCurve:
    """The step cost of a chain of depth k on a target of this shape, in plain decode steps
    (bandwidth-bound limit). `fc`: the draft's fc over the target's hidden states, once a step."""

    draft: float
    experts: int
    active: int
    expert_share: float
    locality: float = 1.0
    fc: float = 0.0
    target: str = "custom"
    source: str = BOUND_NOTE
    tokens = None  # decode tokens/s: no request of the lab's to price a prefill for

    def __post_init__(self):
        if self.experts < 0 or self.active < 0 or (self.experts and not 0 < self.active <= self.experts):
            raise ConfigError(f"active experts per token must be within 1 and the routed experts ({self.experts}), "
                              f"got {self.active}")
        if not 0.0 <= self.expert_share <= 1.0 or not 0.0 <= self.locality <= 1.0:
            raise ConfigError(f"expert share and locality must be within 0 and 1, got {self.expert_share:g}, "
                              f"{self.locality:g}")

    def verify_cost(self, k):
        """verify(k + 1): the verify pass of a depth-k chain, in plain steps."""
        k = np.asarray(k, dtype=float)
        v = [verify_ratio(float(d) + 1.0, self.experts, self.active, self.expert_share, self.locality)
             for d in k.ravel()]
        return np.asarray(v, dtype=float).reshape(k.shape)

    def experts_read(self, k):
        """Distinct experts per MoE layer the verify pass reads, U(k + 1) (0: dense)."""
        k = np.asarray(k, dtype=float)
        u = [expected_union(self.experts, self.active, float(d) + 1.0, self.locality) for d in k.ravel()]
        return np.asarray(u, dtype=float).reshape(k.shape)

    def step_cost(self, k):
        k = np.asarray(k, dtype=float)
        return self.fc + self.draft * k + self.verify_cost(k)

    def speedup(self, accept_length, k):
        return np.asarray(accept_length, dtype=float) / self.step_cost(k)

    decode_speedup = speedup

    @property
    def kind(self) -> str:
        return "decode"

    def as_dict(self) -> dict:
        return asdict(self)


@lru_cache(maxsize=1)
def _rows() -> tuple:
    from eagle3lab.cost import costchecks

    return tuple(costchecks.explorer_targets(ns=(1,)))


def presets(exact: bool = False) -> dict[str, MoeCurve]:
    """The shipped targets' shapes (`costchecks.explorer_targets`: their public configs, each with
    an assumed EAGLE-3 draft at a 32k vocabulary), by name; draft step and expert share rounded to
    what the explorers' inputs show unless `exact`."""
    r = (lambda v: float(v)) if exact else (lambda v: round(float(v), ROUND))  # noqa: E731
    return {row["target"]: MoeCurve(draft=r(row["draft_step"]), experts=int(row["experts"]), active=int(row["active"]),
                                    expert_share=r(row["expert_share"]), fc=float(row["draft_fc"]),
                                    target=row["target"]) for row in _rows()}


def preset_label(curve: MoeCurve) -> str:
    """'kimi-k2.5: 384 experts, 8 active, x 0.360' (or 'dense')."""
    if not curve.experts:
        return f"{curve.target}: dense (E 0: verify 1 at every n)"
    return f"{curve.target}: {curve.experts} experts, {curve.active} active, x {curve.expert_share:.3f}"

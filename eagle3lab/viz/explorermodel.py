"""The numbers both acceptance explorers draw (the live one in `widgets`, the in-page one in
`pageexplorer`), so that they cannot drift apart.

Accept length L(k) from an acceptance (an i.i.d. per-token rate a, or per-position conditional
rates; a position beyond the rates given adds nothing) and the cost of one speculative step in
target steps, from one of two targets a reader chooses:

- **the lab's** (dense; `costfit.CostCurve`): C(k) = fixed + draft x k + verify + growth x log2(k + 1),
  calibrated on a report's measured configurations; speed-up of total tokens/s for the report's
  requests (prefill included) or, without a request size, L / C;
- **a target's shape** (`cost.moecurve.MoeCurve`, the bandwidth-bound limit: a bound, not a
  measurement): C(k) = fc + draft x k + verify(k + 1), verify(n) = (1 - x) + x U(n) / K with U(n)
  the union of experts n tokens read; presets for the shipped public configs; speed-up L / C of
  decode tokens/s.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from eagle3lab.acceptance import predict
from eagle3lab.cost.costfit import CostCurve
from eagle3lab.cost.moecurve import MoeCurve, presets

LAB = "lab"  # the target choice that is the lab's own (dense) target
LAB_LABEL = "the lab's target (dense: its measured step costs)"
MOE_LABEL = "a sparse-MoE target's shape (bandwidth-bound bound)"


def chain_rates(rates: Sequence[float] | None, a: float, max_depth: int) -> list[float]:
    """Conditional rates 1..max_depth: the rates given (NaN, never reached: 0; beyond them: 0),
    or the i.i.d. `a` at every position."""
    if rates is None or not len(rates):
        return [float(a)] * max_depth
    given = [0.0 if r is None or not np.isfinite(r) else min(max(float(r), 0.0), 1.0) for r in rates]
    return (given + [0.0] * max_depth)[:max_depth]


def verify_part(curve, k):
    """The verify pass of a depth-k chain in target steps: verify + growth x log2(k + 1) for the
    lab's curve, verify(k + 1) for a shape's."""
    if isinstance(curve, MoeCurve):
        return curve.verify_cost(k)
    return curve.verify + curve.growth * np.log2(np.asarray(k, dtype=float) + 1)


def curve_frame(rates: Sequence[float], curve: CostCurve | MoeCurve) -> pd.DataFrame:
    """DataFrame(depth, accept_length, step_cost, verify_cost, speedup, decode_speedup) at depths
    0..len(rates); depth 0 is no speculation (1.0x, one plain step)."""
    lengths = np.concatenate([[1.0], predict.accept_length_curve(list(rates))])
    depth = np.arange(len(lengths))
    speed = np.concatenate([[1.0], curve.speedup(lengths[1:], depth[1:])])
    decode = np.concatenate([[1.0], curve.decode_speedup(lengths[1:], depth[1:])])
    return pd.DataFrame({"depth": depth, "accept_length": lengths,
                         "step_cost": np.concatenate([[1.0], curve.step_cost(depth[1:])]),
                         "verify_cost": np.concatenate([[1.0], verify_part(curve, depth[1:])]),
                         "speedup": speed, "decode_speedup": decode})


def speedup(accept_len, depth, cost_ratio):
    """The old explorer's speed-up, L / (1 + k x r): a verify pass priced at one target step and
    nothing else (CostCurve.assumed). Kept for callers; the lab measures more (costfit)."""
    return CostCurve.assumed(cost_ratio).speedup(accept_len, depth)


def target_curve(target: str) -> MoeCurve:
    """A preset's shape by name (`moecurve.presets`), or a one-line error naming the presets."""
    shapes = presets()
    if target not in shapes:
        from eagle3lab.cost.modelshape import ConfigError

        raise ConfigError(f"no target {target!r} for the explorer: choose {LAB!r} or one of {', '.join(shapes)}")
    return shapes[target]


def measured_verdict(model: float, measured: dict | None, changed: str = "",
                     accept_length: float | None = None) -> str:
    """One sentence: the model's speed-up at the measured configuration against the measured one,
    and why they differ when they do (target or costs changed, an acceptance that is not the
    measured one, or this run's own step costs)."""
    if not measured or measured.get("speedup") is None:
        return "No speed-up was measured at this configuration here."
    ci = measured.get("interval")
    text = f"measured {measured['speedup']:.2f}×" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")
    if changed:
        return f"Model {model:.2f}× at depth {measured['depth']}; {text} is for the lab's own {changed}: you changed it."
    if accept_length is not None and abs(accept_length - measured["accept_length"]) > 0.005:
        return (f"Model {model:.2f}× at depth {measured['depth']}; {text} is for the measured accept length "
                f"{measured['accept_length']:.2f}, and the acceptance here gives {accept_length:.2f}.")
    if not ci:
        return f"Model {model:.2f}× at depth {measured['depth']}, {text} (no interval: too few prompts)."
    inside = ci[0] <= model <= ci[1]
    return (f"Model {model:.2f}× at depth {measured['depth']}, {text}: " +
            ("inside the interval." if inside else "outside the interval: this run's own step costs differ "
             "from the costs calibrated on the report's configurations."))


def parse_rates(text: str) -> list[float]:
    """'0.8, 0.5 0.3' -> [0.8, 0.5, 0.3]; a ValueError that says what is wrong otherwise."""
    parts = [p for p in str(text).replace(",", " ").split() if p]
    if not parts:
        raise ValueError("type one rate per draft position, e.g. 0.8, 0.5, 0.3")
    try:
        values = [float(p) for p in parts]
    except ValueError:
        raise ValueError(f"not numbers: {text!r}") from None
    if any(not 0 <= v <= 1 for v in values):
        raise ValueError("each rate must be within 0 and 1")
    return values


def length_limit(lengths, measured, k_max: int) -> float:
    """The accept-length axis, fixed: 1.5x the starting curve (at least 3, at most depth + 1)."""
    top = max(3.0, 1.5 * float(np.max(lengths)), 1.5 * float(measured["accept_length"]) if measured else 0.0)
    return float(min(k_max + 1.0, np.ceil(top)))


def speedup_limit(speedups, measured) -> float:
    """The speed-up axis, fixed: the larger of 2, the measured interval, 1.3x the starting curve."""
    top = max(2.0, 1.3 * float(np.max(speedups)))
    if measured and measured.get("interval"):
        top = max(top, 1.1 * measured["interval"][1])
    return float(np.ceil(top * 2) / 2)


def step_limit(start: CostCurve | MoeCurve, k_max: int) -> float:
    """The step-cost axis, fixed: 1.1x the most any preset or the starting curve costs at the
    deepest depth (a reader's own shape above it is drawn at the top)."""
    curves = [start, *presets().values()]
    top = max(float(c.step_cost(k_max)) for c in curves)
    return float(np.ceil(1.1 * top * 2) / 2)


def measured_from(observed) -> dict | None:
    """The old `observed` frame (depth, accept_length[, speedup]) as a measured point."""
    if observed is None or not len(observed):
        return None
    row = observed.iloc[0]
    return {"depth": int(row["depth"]), "accept_length": float(row["accept_length"]),
            "speedup": float(row["speedup"]) if "speedup" in observed and row["speedup"] == row["speedup"] else None,
            "interval": None}

"""The architecture's step-cost model fitted to a deployment's own measurements.

The bandwidth-bound limit (`archcost.CostParams()`) needs no measurement, but a real server adds
time that does not follow bytes: kernel launches and all-reduces in every forward, scheduling per
step. Each measured configuration gives its step cost C = L x B / S (`stepcost.StepCost`: accept
length, no-speculation and speculative tokens/s), and the model is linear in its two unknowns:

    C - (R + k d + f) = fixed (1 + k l - R - k d - f) + overhead

(`archcost` names R, d, f, l). Two measured configurations pin `fixed`; three or more pin
`overhead` too. The interval is the least-squares prediction interval (Student's t on the
residual degrees of freedom: wide with few configurations, as it should be); each configuration is
also predicted from the others alone (leave-one-out), which is the error a user should expect.
Statistics layer: imports `archcost`, `stepcost`, `stats`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from eagle3lab.acceptance.stats import t_quantile
from eagle3lab.cost.archcost import StepModel, parse_configuration
from eagle3lab.cost.modelshape import ConfigError
from eagle3lab.cost.stepcost import StepCost

NAMES = ("fixed", "overhead")


@dataclass(frozen=True)
class Measured:
    """One measured configuration: steps/topk/draft tokens, its tokens/s and accept length."""

    steps: int
    topk: int
    draft_tokens: int
    tokens_per_s: float
    accept_length: float

    @property
    def label(self) -> str:
        return f"{self.steps}/{self.topk}/{self.draft_tokens}"

    def cost(self, baseline_tps: float) -> float:
        """C = L x B / S, with StepCost's checks (positive figures, L within its bounds)."""
        return StepCost(baseline_tps, self.tokens_per_s, self.accept_length, self.steps, self.topk,
                        self.draft_tokens, "total").cost


def parse_measured(text: str) -> Measured:
    """'3/1/4:159.78:1.86' -> Measured (configuration : tokens/s : accept length)."""
    parts = str(text).split(":")
    if len(parts) != 3:
        raise ConfigError(f"--measured {text!r}: write STEPS/TOPK/DRAFT_TOKENS:TOKENS_PER_S:ACCEPT_LENGTH, "
                          "e.g. 3/1/4:159.78:1.86")
    steps, topk, tokens = parse_configuration(parts[0])
    try:
        return Measured(steps, topk, tokens, float(parts[1]), float(parts[2]))
    except ValueError:
        raise ConfigError(f"--measured {text!r}: tokens/s and accept length must be numbers") from None


def design_row(model: StepModel, steps: int, topk: int, tokens: int) -> tuple[float, float]:
    """(the bound's step cost without overhead, the coefficient of `fixed`) for one configuration."""
    bound = model.with_params(fixed=0.0, overhead=0.0).parts(steps, topk, tokens)
    base = bound.verify_cost + bound.draft_cost
    return base, 1.0 + steps * model.layer_ratio - base


@dataclass
class ArchFit:
    """A fitted model: its coefficients, their covariance and the residual scale, the measured
    configurations with the fit and the leave-one-out predictions."""

    model: StepModel
    names: tuple
    coef: np.ndarray
    xtx_inv: np.ndarray
    sigma: float
    dof: int
    rows: list = field(default_factory=list)

    @property
    def t(self) -> float:
        return t_quantile(0.975, self.dof) if self.dof > 0 else math.nan

    def design(self, steps: int, topk: int, tokens: int) -> tuple[float, np.ndarray]:
        base, x_fixed = design_row(self.model, steps, topk, tokens)
        return base, np.array([x_fixed, 1.0][:len(self.names)])

    def step_cost_interval(self, steps: int, topk: int = 1, tokens: int | None = None) -> tuple | None:
        """95 % prediction interval of the step cost (None when the fit has no residual degrees of
        freedom: as many unknowns as configurations)."""
        tokens = steps + 1 if tokens is None else tokens
        base, x = self.design(steps, topk, tokens)
        if self.dof <= 0:
            return None
        centre = base + float(x @ self.coef)
        half = self.t * self.sigma * math.sqrt(1.0 + float(x @ self.xtx_inv @ x))
        return centre - half, centre + half

    def coefficients(self) -> dict:
        """Each fitted unknown with its 95 % interval (None without residual degrees of freedom)."""
        out = {}
        for i, name in enumerate(self.names):
            se = self.sigma * math.sqrt(self.xtx_inv[i, i]) if self.dof > 0 else math.nan
            value = float(self.coef[i])
            out[name] = {"value": value, "interval": None if self.dof <= 0 else [value - self.t * se, value + self.t * se]}
        return out

    def loo_summary(self) -> dict:
        errs = [abs(r["left_out_error"]) for r in self.rows if r.get("left_out_error") is not None]
        return {"configurations": len(self.rows), "median_abs_error": float(np.median(errs)) if errs else None,
                "max_abs_error": float(max(errs)) if errs else None}

    def as_dict(self) -> dict:
        return {"basis": self.model.params.basis, "unknowns": self.coefficients(), "residual_sd": self.sigma,
                "degrees_of_freedom": self.dof, "measured": self.rows, "leave_one_out": self.loo_summary()}


def _solve(model: StepModel, data: list[Measured], baseline_tps: float, names: tuple):
    rows = [design_row(model, m.steps, m.topk, m.draft_tokens) for m in data]
    y = np.array([m.cost(baseline_tps) - base for m, (base, _) in zip(data, rows)])
    x = np.array([[xf, 1.0][:len(names)] for _, xf in rows])
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    resid = y - x @ coef
    dof = len(data) - len(names)
    sigma = math.sqrt(float(resid @ resid) / dof) if dof > 0 else math.nan
    xtx = x.T @ x
    if abs(np.linalg.det(xtx)) < 1e-12:
        raise ConfigError("the measured configurations cannot separate the fixed share from the per-step overhead: "
                          "measure configurations of different lengths")
    return coef, np.linalg.inv(xtx), sigma, dof


def _fitted(model: StepModel, coef, names: tuple, count: int) -> StepModel:
    values = dict(zip(names, (float(c) for c in coef)))
    if values.get("fixed", 0.0) >= 1.0:
        raise ConfigError(f"the fit puts {values['fixed']:.2f} of a plain step outside bytes: the measured steps do not "
                          "follow the shapes given (check the target/draft configs and the tokens/s)")
    return model.with_params(fixed=values.get("fixed", 0.0), overhead=values.get("overhead", 0.0),
                             basis=f"fitted to {count} measured configurations")


def fit(model: StepModel, data: list[Measured], baseline_tps: float, names: tuple | None = None) -> ArchFit:
    """Fit `fixed` (2 configurations) or `fixed` and `overhead` (3 or more) to measured
    configurations at one no-speculation tokens/s; leave-one-out predictions included."""
    if len(data) < 2:
        raise ConfigError(f"{len(data)} measured configuration(s): fitting needs at least 2 "
                          "(--measured STEPS/TOPK/DRAFT:TOKENS_PER_S:ACCEPT_LENGTH, repeated)")
    if len({m.label for m in data}) < 2:
        raise ConfigError("the measured configurations are all the same one: measure at least two different ones")
    names = names or (NAMES if len(data) >= 3 else NAMES[:1])
    coef, xtx_inv, sigma, dof = _solve(model, data, baseline_tps, names)
    result = ArchFit(_fitted(model, coef, names, len(data)), names, coef, xtx_inv, sigma, dof)
    result.rows = [_fit_row(result, model, data, i, baseline_tps, names) for i in range(len(data))]
    return result


def _fit_row(result: ArchFit, model: StepModel, data: list[Measured], i: int, baseline_tps: float,
             names: tuple) -> dict:
    m = data[i]
    measured = m.cost(baseline_tps)
    fitted = result.model.parts(m.steps, m.topk, m.draft_tokens).step_cost
    rest = data[:i] + data[i + 1:]
    left_out = None
    usable = names[:len(rest)]  # as many unknowns as the other configurations can pin
    try:
        coef, *_ = _solve(model, rest, baseline_tps, usable)
        left_out = _fitted(model, coef, usable, len(rest)).parts(m.steps, m.topk, m.draft_tokens).step_cost
    except ConfigError:
        left_out = None  # the others cannot separate the unknowns (e.g. all of one length)
    return {"configuration": m.label, "tokens_per_s": m.tokens_per_s, "accept_length": m.accept_length,
            "measured_step_cost": measured, "fitted_step_cost": fitted,
            "left_out_prediction": left_out, "left_out_error": None if left_out is None else left_out - measured}

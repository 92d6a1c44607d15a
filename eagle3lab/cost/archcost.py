"""What one speculative step costs, in plain decode steps, from the target's and the draft's shapes.

At batch 1 a forward is bandwidth-bound: its time follows the bytes it reads. A plain decode step
reads the target's flat part (attention with its MLA projections, dense layers, shared experts,
routers, LM head) and `active` experts per MoE layer. A verify pass over n tokens (a chain of k
steps verifies k + 1; a tree its draft tokens) reads the same flat part once, but the **union** of
the experts its n tokens route to:

    U(n) = E (1 - (1 - active/E)^m),  m = 1 + locality (n - 1)

E (1 - (1 - k/E)^n) experts under independent routing (locality 1: the upper bound, 8.0 at n = 1
and 45.6 at n = 6 for Kimi-K2.5's 384/8); correlated routing reads fewer (locality 0: every token
the same experts). One speculative step at (steps k, topk, draft tokens n), in plain steps:

    verify_cost = (1 - fixed) R(n) + fixed            R(n) = bytes(n) / bytes(1)
    draft_cost  = (1 - fixed) (k d + f) + fixed k l   d, f = one draft forward, its fc, / bytes(1)
    step_cost   = verify_cost + draft_cost + overhead

`fixed` is the share of a plain step that does not scale with bytes (per-forward kernel launches,
all-reduces), which a draft forward pays in proportion to its layers (l = draft layers / target
layers); `overhead` a fixed time per speculative step. Both are 0 in the **bandwidth-bound limit**
(`CostParams()`), which needs no measurement; `archfit` fits them to a user's tok/s. A fit may
give `fixed` below 0: the steps then grow faster than their bytes (experts read below bandwidth).
On a dense target R(n) = 1 and the step costs 1 + k d + f + overhead: the lab's `costfit.CostCurve`
with no growth (`StepModel.curve`). Statistics layer: imports `modelshape`, `costfit`, `errors`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from eagle3lab.cost.modelshape import ConfigError, ModelShape

BOUND = "bandwidth-bound limit"
BOUND_NOTE = ("bandwidth-bound limit: time follows bytes read, independent routing (the most distinct experts), "
              "no fixed per-forward time, no per-step overhead; a bound on the verify union, not a measurement")
CHAINS = tuple((k, 1, k + 1) for k in range(1, 8))
# trees in SGLang's own choices and in the public measurements the docs cite (docs/cost-model.md)
TREES = ((3, 3, 4), (3, 3, 8), (5, 4, 8), (4, 4, 16), (6, 4, 12), (7, 4, 16), (8, 8, 60))


@dataclass(frozen=True)
class CostParams:
    """The model's unknowns: `fixed` (share of a plain step that is not bytes), `overhead` (plain
    steps added per speculative step), `locality` (1 independent routing .. 0 identical),
    `expert_efficiency` (bandwidth the routed-expert kernels reach relative to the rest, 1 in the
    limit), `context` (KV-cache tokens read per forward; 0: weights only). `basis` says what
    pinned them."""

    fixed: float = 0.0
    overhead: float = 0.0
    locality: float = 1.0
    expert_efficiency: float = 1.0
    context: int = 0
    basis: str = BOUND

    def __post_init__(self):
        if not 0.0 <= self.locality <= 1.0:
            raise ConfigError(f"routing locality must be within [0, 1] (1: independent routing), got {self.locality:g}")
        if not 0.0 < self.expert_efficiency <= 4.0:
            raise ConfigError(f"expert efficiency must be within (0, 4], got {self.expert_efficiency:g}")
        if self.context < 0 or self.fixed >= 1.0:
            raise ConfigError(f"context must be >= 0 and the fixed share below 1; got {self.context}, {self.fixed:g}")

    @property
    def is_bound(self) -> bool:
        return self.fixed == 0 and self.overhead == 0 and self.basis == BOUND


def expected_union(experts: int, active: int, n: float, locality: float = 1.0) -> float:
    """Expected distinct experts n tokens read in one MoE layer: E (1 - (1 - k/E)^m) with
    m = 1 + locality (n - 1) tokens routing independently (locality 1: the upper bound)."""
    if experts <= 0 or active <= 0:
        return 0.0
    m = 1.0 + locality * (max(float(n), 1.0) - 1.0)
    return experts * (1.0 - (1.0 - active / experts) ** m)


def verify_ratio(n: float, experts: int, active: int, expert_share: float, locality: float = 1.0) -> float:
    """R(n) from three numbers, for explorers: the share of a decode step's bytes in routed experts
    (`expert_share`) grows with the union, the rest is flat. A dense target (experts 0) gives 1."""
    if experts <= 0 or active <= 0:
        return 1.0
    return (1.0 - expert_share) + expert_share * expected_union(experts, active, n, locality) / active


def sglang_accepts(steps: int, topk: int, draft_tokens: int) -> str | None:
    """Why SGLang would not run this configuration as given (None: it would). topk 1 makes it set
    draft tokens = steps + 1 (sglang_rules.W_ADJUST); a tree's draft tokens - 1 are the top of
    topk + (steps - 1) topk^2 candidates (srt/speculative/eagle_utils.py organize_draft_results,
    SGLang 0.5.23), so no more than that."""
    if min(steps, topk) < 1 or draft_tokens < 2:
        return "steps and topk must be >= 1 and draft tokens >= 2"
    if topk == 1 and draft_tokens != steps + 1:
        return f"with topk 1 SGLang runs steps + 1 = {steps + 1} draft tokens, not {draft_tokens}"
    most = topk + (steps - 1) * topk ** 2 + 1
    if topk > 1 and draft_tokens > most:
        return (f"a tree of {steps} steps and topk {topk} has {most - 1} candidates: at most {most} draft tokens "
                "(SGLang's organize_draft_results takes the top draft tokens - 1)")
    return None


def parse_configuration(text: str) -> tuple[int, int, int]:
    """'5/1/6' -> (5, 1, 6): steps/topk/draft tokens, checked against SGLang's rules."""
    try:
        steps, topk, tokens = (int(v) for v in str(text).strip().split("/"))
    except ValueError:
        raise ConfigError(f"configuration {text!r}: write STEPS/TOPK/DRAFT_TOKENS, e.g. 3/1/4") from None
    why = sglang_accepts(steps, topk, tokens)
    if why:
        raise ConfigError(f"configuration {text}: {why}")
    return steps, topk, tokens


@dataclass(frozen=True)
class StepParts:
    """One configuration's cost, in plain decode steps, and what it is made of."""

    steps: int
    topk: int
    draft_tokens: int
    verify_cost: float
    draft_cost: float
    overhead: float
    union: float          # expected distinct experts per MoE layer in the verify pass (0: dense)
    union_cost: float     # what the verify pass costs beyond one plain step
    basis: str

    @property
    def step_cost(self) -> float:
        return self.verify_cost + self.draft_cost + self.overhead

    @property
    def label(self) -> str:
        return f"{self.steps}/{self.topk}/{self.draft_tokens}"

    def as_dict(self) -> dict:
        return {"configuration": self.label, "steps": self.steps, "topk": self.topk,
                "draft_tokens": self.draft_tokens, "verify_cost": self.verify_cost, "draft_cost": self.draft_cost,
                "overhead": self.overhead, "step_cost": self.step_cost,
                "break_even_accept_length": self.step_cost, "experts_in_verify": self.union,
                "verify_union_cost": self.union_cost, "basis": self.basis}


@dataclass(frozen=True)
class StepModel:
    """A target, a draft and the unknowns: the cost of any configuration in plain decode steps."""

    target: ModelShape
    draft: ModelShape
    params: CostParams = field(default_factory=CostParams)

    # -- bytes ----------------------------------------------------------------------------
    def forward_bytes(self, shape: ModelShape, tokens: float) -> float:
        """Bytes one forward of `shape` over `tokens` tokens reads at batch 1."""
        p = self.params
        experts = shape.moe_layers * expected_union(shape.experts, shape.active, tokens, p.locality)
        return (shape.flat_bytes() + experts * shape.expert_bytes() / p.expert_efficiency
                + p.context * shape.kv_bytes_per_token)

    @property
    def decode_bytes(self) -> float:
        return self.forward_bytes(self.target, 1)

    def verify_ratio(self, n: float) -> float:
        """R(n): a verify pass over n tokens / a plain decode step, bandwidth-bound."""
        return self.forward_bytes(self.target, n) / self.decode_bytes

    def draft_ratio(self, topk: int = 1) -> float:
        """d: one draft forward / a plain decode step; a draft with experts (MTP) reads the union
        of the `topk` tokens it drafts at once."""
        return self.forward_bytes(self.draft, topk) / self.decode_bytes

    @property
    def fc_ratio(self) -> float:
        return self.draft.fc_bytes() / self.decode_bytes

    @property
    def layer_ratio(self) -> float:
        """l: a draft forward's fixed time / the target's (per-layer launches and all-reduces)."""
        return self.draft.layers / max(1, self.target.layers)

    # -- one configuration -----------------------------------------------------------------
    def parts(self, steps: int, topk: int = 1, draft_tokens: int | None = None) -> StepParts:
        """The cost of (steps, topk, draft tokens) and its parts; SGLang's rules applied."""
        n = steps + 1 if draft_tokens is None else int(draft_tokens)
        why = sglang_accepts(steps, topk, n)
        if why:
            raise ConfigError(f"configuration {steps}/{topk}/{n}: {why}")
        fixed = self.params.fixed
        r = self.verify_ratio(n)
        verify = (1 - fixed) * r + fixed
        draft = (1 - fixed) * (steps * self.draft_ratio(topk) + self.fc_ratio) + fixed * steps * self.layer_ratio
        union = expected_union(self.target.experts, self.target.active, n, self.params.locality) if self.target.is_moe else 0.0
        return StepParts(steps, topk, n, verify, draft, self.params.overhead, union, (1 - fixed) * (r - 1),
                         self.params.basis)

    def table(self, configurations=None) -> list[StepParts]:
        """Every configuration's parts (default: chains 1..7 and `TREES`)."""
        return [self.parts(*c) for c in (configurations or CHAINS + TREES)]

    def with_params(self, **changes) -> "StepModel":
        return replace(self, params=replace(self.params, **changes))

    # -- the lab's dense model as the special case -----------------------------------------
    def curve(self):
        """This model as the explorers' `costfit.CostCurve` (chains): only for a dense target,
        whose verify pass costs one plain step at every k (growth 0)."""
        from eagle3lab.cost.costfit import CostCurve

        if self.target.is_moe:
            raise ConfigError(f"{self.target.name} is a sparse MoE: its verify cost grows with the union of experts, "
                              "which the dense CostCurve (verify + growth log2(k + 1)) does not describe")
        f = self.params.fixed
        return CostCurve(draft=(1 - f) * self.draft_ratio() + f * self.layer_ratio, verify=1.0, growth=0.0,
                         fixed=self.params.overhead + (1 - f) * self.fc_ratio,
                         source=f"architecture ({self.target.name}, dense; {self.params.basis})")

    def summary(self) -> dict:
        t = self.target
        out = {"target": t.summary(), "draft": self.draft.summary(), "decode_gigabytes": self.decode_bytes / 1e9,
               "draft_forward_over_decode": self.draft_ratio(), "fc_over_decode": self.fc_ratio,
               "params": {"fixed": self.params.fixed, "overhead": self.params.overhead,
                          "locality": self.params.locality, "expert_efficiency": self.params.expert_efficiency,
                          "context": self.params.context, "basis": self.params.basis}}
        if t.is_moe:
            out["expert_share_of_decode"] = expert_share(self)
        return out


def expert_share(model: StepModel) -> float:
    """The share of a plain decode step's bytes that are routed experts (what grows with n)."""
    t = model.target
    if not t.is_moe:
        return 0.0
    experts = t.moe_layers * t.active * t.expert_bytes() / model.params.expert_efficiency
    return experts / model.decode_bytes


def chain_growth(model: StepModel, steps: int) -> dict:
    """What one more chain step adds to the step cost, by part: the verify union (one more token
    verified), the draft forward, in plain steps (the 'why' of a shorter chain)."""
    a, b = model.parts(steps), model.parts(steps + 1)
    return {"from": a.label, "to": b.label, "verify": b.verify_cost - a.verify_cost,
            "draft": b.draft_cost - a.draft_cost, "total": b.step_cost - a.step_cost}

"""Named fault switches that reproduce real EAGLE-3 deployment failures in the lab engine.

Each fault is off by default and they combine: `plan_faults(["wiring-seed", "quant-int4"])`.
A `FaultPlan` says which lab draft to serve, which target boundaries feed it, how the target
is quantized, and which prompts to decode; `build_engine` turns a plan into a `SpecEngine`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from eagle3lab.errors import EagleLabError

FAULTS: dict[str, str] = {
    "wiring-seed": "serve the seed's draft (trained on [embedding, low, mid]) with SGLang's +1 rule "
                   "on its config ids, i.e. boundaries [2, N//2, N-3]",
    "embed-patch": "serve the seed's draft with ids [-1, 1, N//2-1] -> boundaries [0, 2, N//2] "
                   "(the seed's fix: embedding capture patched in)",
    "no-embed-patch": "serve the seed's draft without embedding capture (SGLang's +1 rule on its "
                      "config ids; same wiring as wiring-seed)",
    "no-ttt": "serve the draft trained without training-time test (k = 1)",
    "quant-int8": "group-wise int8 weight-only quantization of the target at serve time",
    "quant-int4": "group-wise int4 weight-only quantization of the target at serve time",
    "no-d2t": "drop the draft->target vocabulary map: draft ids are read as target ids",
    "normed-last": "apply the target's final norm to the last captured boundary",
    "domain-shift": "decode prompts unlike the training corpus (English prose, numbers)",
    "long-context": "decode prompts longer than the draft saw in training",
    "greedy-draft": "draft by argmax even at temperature > 0 (acceptance becomes p(argmax q))",
    "lm-head-target": "replace the draft's lm_head by the target's rows for the draft vocabulary "
                      "(a converter or merge that overwrites the trained head)",
    "rope-theta": "serve the draft with rope_theta 500000 instead of the 10000 it was trained with "
                  "(a converter that drops or misreads rope settings)",
    "no-aux-ids": "serve the seed's draft with its fixed ids [-1, 1, N//2-1] removed from the config: "
                  "the engine guesses the default [2, N//2, N-3]",
}
WRONG_ROPE_THETA = 500000.0  # Llama 3's base: what a converter copying another config writes

EXCLUSIVE = [("embed-patch", "no-embed-patch"), ("quant-int8", "quant-int4"),
             ("no-ttt", "wiring-seed"), ("no-ttt", "embed-patch"), ("no-ttt", "no-embed-patch"),
             ("no-aux-ids", "wiring-seed"), ("no-aux-ids", "embed-patch"), ("no-aux-ids", "no-embed-patch"),
             ("no-aux-ids", "no-ttt")]
QUANT_GROUP_SIZE = 64


class FaultError(EagleLabError):
    """Unknown or contradictory fault names."""


@dataclass
class FaultPlan:
    faults: tuple[str, ...] = ()
    draft_name: str = "healthy"
    layer_ids: list[int] | None = None  # served eagle_aux ids; None = the draft's config
    quant_bits: int | None = None
    use_d2t: bool = True
    normed_last: bool = False
    greedy_draft: bool = False
    prompt_kinds: list[str] = field(default_factory=list)  # subset of domain-shift, long-context
    lm_head_from_target: bool = False
    rope_theta: float | None = None  # served draft rope_theta, None = the checkpoint's

    def boundaries(self, draft, num_layers: int) -> list[int]:
        """Target boundaries the served draft reads: SGLang 0.5.23 llama's id + 1 rule
        (llama.py:929-941) on the served ids; no ids -> [2, N//2, N-3]."""
        ids = self.layer_ids if self.layer_ids is not None else list(draft.aux_layer_ids)
        if not ids:
            return [2, num_layers // 2, num_layers - 3]
        return [i + 1 for i in ids]


def normalize_faults(faults) -> tuple[str, ...]:
    """Accept a name, a comma list or an iterable; check names and contradictions."""
    if faults is None:
        return ()
    if isinstance(faults, str):
        faults = [faults]
    names: list[str] = []
    for item in faults:
        for name in str(item).split(","):
            name = name.strip().lower().replace("_", "-")
            if not name or name == "none":
                continue
            if name not in FAULTS:
                raise FaultError(f"unknown fault {name!r}; known: {', '.join(FAULTS)}")
            if name not in names:
                names.append(name)
    for a, b in EXCLUSIVE:
        if a in names and b in names:
            raise FaultError(f"faults {a!r} and {b!r} contradict each other")
    return tuple(names)


def plan_faults(faults, num_layers: int) -> FaultPlan:
    """What each named fault changes, combined."""
    names = normalize_faults(faults)
    plan = FaultPlan(faults=names)
    if {"wiring-seed", "embed-patch", "no-embed-patch"} & set(names):
        plan.draft_name = "seed"
    if "embed-patch" in names:
        plan.layer_ids = [-1, 1, num_layers // 2 - 1]
    if "no-ttt" in names:
        plan.draft_name = "no-ttt"
    if "quant-int8" in names:
        plan.quant_bits = 8
    if "quant-int4" in names:
        plan.quant_bits = 4
    plan.use_d2t = "no-d2t" not in names
    plan.normed_last = "normed-last" in names
    plan.greedy_draft = "greedy-draft" in names
    plan.prompt_kinds = [n for n in names if n in ("domain-shift", "long-context")]
    if "no-aux-ids" in names:
        plan.draft_name, plan.layer_ids = "seed", []  # [] = no ids: the default boundaries
    plan.lm_head_from_target = "lm-head-target" in names
    plan.rope_theta = WRONG_ROPE_THETA if "rope-theta" in names else None
    return plan


def apply_draft_faults(draft, target, plan: FaultPlan):
    """A copy of the draft with the plan's checkpoint faults (lm_head, rope_theta) applied."""
    import copy

    import torch

    if not (plan.lm_head_from_target or plan.rope_theta):
        return draft
    from eagle3lab.lab.draft import RotaryEmbedding

    draft = copy.deepcopy(draft)
    if plan.lm_head_from_target:
        with torch.no_grad():
            head = target.get_output_embeddings().weight.detach()
            draft.lm_head.weight.copy_(head[draft.target_ids].to(draft.lm_head.weight.dtype))
    if plan.rope_theta:
        attn = draft.midlayer.self_attn
        attn.rotary = RotaryEmbedding(attn.head_dim, plan.rope_theta)
        draft.config["rope_theta"] = float(plan.rope_theta)
    return draft


def build_engine(target, draft, plan: FaultPlan, *, max_seq_len: int = 2048):
    """A `SpecEngine` for a transformers target and an Eagle3Draft with the plan's faults."""
    from eagle3lab.engine.model import TargetModel, fake_quantize_
    from eagle3lab.engine.speculate import SpecEngine

    if draft is not None:
        draft = apply_draft_faults(draft, target, plan)
    lean = TargetModel(target, max_seq_len)
    if plan.quant_bits:
        fake_quantize_(lean, plan.quant_bits, QUANT_GROUP_SIZE)
    boundaries = plan.boundaries(draft, lean.num_layers) if draft is not None else None
    if boundaries is not None and len(set(boundaries)) != len(boundaries):
        raise FaultError(f"served boundaries {boundaries} repeat a layer")
    return SpecEngine(lean, draft, boundaries=boundaries, normed_last=plan.normed_last,
                      use_d2t=plan.use_d2t, greedy_draft=plan.greedy_draft)


# Prompts unlike the Python-source corpus (domain-shift): English prose and number lists.
PROSE = [
    "The old lighthouse keeper climbed the spiral stairs every evening, counting each step as the "
    "wind rattled the windows and the sea threw itself against the rocks below.",
    "In the spring of that year the village decided to rebuild the bridge, and everyone, even the "
    "children, carried stones from the river bank to the carts waiting on the road.",
    "She opened the letter slowly, unsure whether the news inside would change everything or "
    "nothing at all, and read the first line three times before she understood it.",
    "Markets rose sharply on Tuesday after the central bank signalled that interest rates would "
    "remain unchanged for the rest of the year, easing fears of a slowdown.",
    "The recipe calls for two cups of flour, a pinch of salt, three eggs and enough milk to make a "
    "smooth batter that coats the back of a wooden spoon.",
    "Our hike began before dawn; by noon the trail had climbed above the tree line, and the valley "
    "we had left that morning looked like a map spread out beneath us.",
    "Historians still argue about why the empire collapsed so quickly, pointing to drought, debt, "
    "and a long series of weak rulers who trusted the wrong advisers.",
    "Please remember to water the tomatoes while I am away, and if the cat refuses her dinner, "
    "try warming it a little before you put the bowl down.",
]


def domain_shift_texts(n: int, seed: int = 0) -> list[str]:
    """n texts unlike source code: prose passages and comma-separated numbers."""
    import random

    rng = random.Random(seed)
    texts = []
    for i in range(n):
        if i % 3 == 2:
            texts.append(", ".join(str(rng.randint(0, 99999)) for _ in range(60)))
        else:
            a, b = rng.sample(PROSE, 2)
            texts.append(f"{a} {b}")
    return texts

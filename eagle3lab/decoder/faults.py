"""Named fault switches that reproduce real EAGLE-3 deployment failures in the lab engine.

Each fault is off by default and they combine: `plan_faults(["wiring-seed", "quant-int4"])`.
`FAULTS` is the one table of them: what each changes, whether it needs a draft, which prompts it
decodes, the cause `diagnosis.diagnose()` should name and what it cannot be combined with. Every
list that names faults (the CLI's help, the sweep's no-draft faults, the lab front end, the
validation benchmark's expectations, the README) is derived from it. A `FaultPlan` says which
lab draft to serve, which target boundaries feed it, how the target is quantized, and which
prompts to decode; `build_engine` turns a plan into a `SpecEngine`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from eagle3lab.wiring import conventions
from eagle3lab import engines
from eagle3lab.wiring.chat_templates import QWEN2_CHATML
from eagle3lab.spec import LATEST_SGLANG, split_engine
from eagle3lab.errors import EagleLabError

WRONG_ROPE_THETA = 500000.0  # Llama 3's base: what a converter copying another config writes
QUANT_GROUP_SIZE = 64
SEED_AFTER_FIX = "embed-patch"  # the lab's picture of the seed after its fix (plots, experiments)
LAB_ARCH = "LlamaForCausalLM"  # the lab target's architecture (its capture rule is llama.py's)


def seed_fix_ids(num_layers: int) -> list[int]:
    """The seed's fixed draft ids: embedding, low, mid ([-1, 2, 30] on its 61-layer target,
    [-1, 1, N//2-1] on the lab)."""
    return [-1, 1, num_layers // 2 - 1]


@dataclass(frozen=True)
class Fault:
    """One fault: what it changes (`changes`, and the FaultPlan fields it sets in `plan`, a
    value or a function of the target's layer count), whether it acts only on a draft,
    which prompts it decodes, the cause(s) `diagnose()` should name, and what it excludes."""

    name: str
    changes: str
    plan: dict = field(default_factory=dict)
    needs_draft: bool = True
    prompts: str | None = None          # a prompt kind (labbench.bench_prompts)
    causes: tuple[str, ...] = ()        # diagnosis.CAUSES names diagnose() should rank first
    excludes: tuple[str, ...] = ()
    checkpoint: bool = False            # lives in the checkpoint: `eagle3lab doctor` names it from
                                        # configs and weights; statistics alone are not expected to
    only_lab: str | None = None         # the lab preset whose drafts it needs (None: every lab)


_TABLE = [
    Fault("wiring-seed", "serve the seed's draft (trained on [embedding, low, mid]) with SGLang's "
          "+1 rule on its config ids, i.e. boundaries [2, N//2, N-3]",
          plan={"draft_name": "seed"}, causes=("wiring", "multi_step"), excludes=("no-ttt",)),
    Fault("embed-patch", "serve the seed's draft with ids [-1, 1, N//2-1] -> boundaries [0, 2, N//2] "
          "(the seed's fix: embedding capture patched in)",
          plan={"draft_name": "seed", "layer_ids": seed_fix_ids}, causes=("multi_step",),
          excludes=("no-embed-patch", "no-ttt")),
    Fault("no-embed-patch", "serve the seed's draft without embedding capture (SGLang's +1 rule on "
          "its config ids; same wiring as wiring-seed)",
          plan={"draft_name": "seed"}, causes=("wiring", "multi_step"),
          excludes=("embed-patch", "no-ttt")),
    Fault("no-ttt", "serve the draft trained without training-time test (k = 1)",
          plan={"draft_name": "no-ttt"}, causes=("multi_step",),
          excludes=("wiring-seed", "embed-patch", "no-embed-patch")),
    Fault("no-template", "serve the draft trained on raw completions (no chat template) to chat prompts "
          "(the real-model lab's no-template draft)",
          plan={"draft_name": "no-template"}, causes=("distribution_shift",), only_lab="smollm2",
          excludes=("wiring-seed", "embed-patch", "no-embed-patch", "no-ttt", "no-aux-ids")),
    Fault("quant-int8", "group-wise int8 weight-only quantization of the target at serve time",
          plan={"quant_bits": 8}, needs_draft=False, causes=("quantization",), excludes=("quant-int4",)),
    Fault("quant-int4", "group-wise int4 weight-only quantization of the target at serve time",
          plan={"quant_bits": 4}, needs_draft=False, causes=("quantization",), excludes=("quant-int8",)),
    Fault("no-d2t", "drop the draft->target vocabulary map: draft ids are read as target ids",
          plan={"use_d2t": False}, causes=("vocab_mapping",)),
    Fault("normed-last", "apply the target's final norm to the last captured boundary",
          plan={"normed_last": True}, causes=("wiring",)),
    Fault("domain-shift", "decode prompts unlike the training corpus (English prose, numbers)",
          needs_draft=False, prompts="domain-shift", causes=("distribution_shift",)),
    Fault("long-context", "decode prompts longer than the draft saw in training",
          needs_draft=False, prompts="long-context", causes=("context_length",)),
    Fault("greedy-draft", "draft by argmax even at temperature > 0 (acceptance becomes p(argmax q))",
          plan={"greedy_draft": True}, causes=("sampling",)),
    Fault("lm-head-target", "replace the draft's lm_head by the target's rows for the draft vocabulary "
          "(a converter or merge that overwrites the trained head)",
          plan={"lm_head_from_target": True}, causes=("vocab_mapping",), checkpoint=True),
    Fault("rope-theta", f"serve the draft with rope_theta {WRONG_ROPE_THETA:g} instead of the 10000 it was "
          "trained with (a converter that drops or misreads rope settings)",
          plan={"rope_theta": WRONG_ROPE_THETA}, causes=("multi_step",), checkpoint=True),
    Fault("no-aux-ids", "serve the seed's draft with its fixed ids [-1, 1, N//2-1] removed from the "
          "config: the engine guesses the default [2, N//2, N-3]",
          plan={"draft_name": "seed", "layer_ids": []}, causes=("wiring",), checkpoint=True,
          excludes=("wiring-seed", "embed-patch", "no-embed-patch", "no-ttt")),
    Fault("chat-template", "serve every prompt in Qwen2's ChatML chat template (default system prompt, user "
          "turn, assistant header; tokenized by the lab tokenizer), which the drafts, trained on raw text, never "
          "saw; generation continues after the assistant header",
          plan={"chat_template": QWEN2_CHATML}, needs_draft=False, causes=("distribution_shift",),
          checkpoint=True),
]
FAULTS: dict[str, Fault] = {f.name: f for f in _TABLE}

# Derived views (nothing below names a fault).
NON_DRAFT_FAULTS = tuple(f.name for f in _TABLE if not f.needs_draft)
EXCLUSIVE = sorted({tuple(sorted((f.name, other))) for f in _TABLE for other in f.excludes})
EXPECTED_CAUSES = {f.name: f.causes for f in _TABLE}
CHECKPOINT_FAULTS = tuple(f.name for f in _TABLE if f.checkpoint)


def describe_faults() -> str:
    """'name: what it changes; ...' (the CLI's help text)."""
    return "; ".join(f"{f.name}: {f.changes}" for f in _TABLE)

DEFAULT_SERVE = f"sglang=={LATEST_SGLANG}"  # whose capture rule the lab engine follows


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
    serve: str = DEFAULT_SERVE  # ENGINE==VERSION whose capture rule feeds the draft
    lm_head_from_target: bool = False
    rope_theta: float | None = None  # served draft rope_theta, None = the checkpoint's
    chat_template: str | None = None  # Jinja chat template every prompt is served in, None = raw

    def boundaries(self, draft, num_layers: int, arch: str = "LlamaForCausalLM") -> list[int]:
        """Target boundaries the served draft reads: the rule of the `serve` engine and version
        (`conventions.serve_boundaries`) on the served ids, from where that engine reads them
        (plan override, else the draft config's top-level or nested `eagle_config` ids)."""
        engine, version = parse_serve(self.serve)
        ids, key = self.layer_ids, "eagle_config"
        if ids is None:
            ids, key = draft_config_ids(getattr(draft, "config", {}) or {}, engine)
        # no ids (an empty list included): the engine guesses its default boundaries
        return list(conventions.serve_boundaries(engine, version, arch, ids or None, num_layers, key))


def parse_serve(text: str) -> tuple[str, str]:
    """'vllm==0.32.0' -> ('vllm', '0.32.0'); the engines whose capture rules are recorded."""
    engine, version = split_engine(str(text or ""), default="")
    if getattr(engines.lookup(engine), "latest", None) is None or "==" not in str(text) or not version:
        raise FaultError(f"--serve takes ENGINE==VERSION with ENGINE sglang or vllm "
                         f"(e.g. {DEFAULT_SERVE} or vllm==0.32.0), got {text!r}")
    return engine, version


def draft_config_ids(config: dict, engine: str) -> tuple[list[int] | None, str]:
    """(ids, key) the engine takes from a draft config.json: vLLM 0.22+ reads the top-level
    `eagle_aux_hidden_state_layer_ids` first, then `eagle_config`'s; SGLang reads `eagle_config`."""
    top = config.get("eagle_aux_hidden_state_layer_ids") or None
    nested = (config.get("eagle_config") or {}).get("eagle_aux_hidden_state_layer_ids") or None
    if engines.reads_top_level_ids(engine) and top:
        return list(top), "top_level"
    if nested:
        return list(nested), "eagle_config"
    return (list(top), "top_level") if top else (None, "eagle_config")


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


def draft_faults(faults) -> tuple[str, ...]:
    """The faults among `faults` that act on a draft (ignored when nothing speculates)."""
    return tuple(f for f in normalize_faults(faults) if FAULTS[f].needs_draft)


def plan_faults(faults, num_layers: int, serve: str | None = None) -> FaultPlan:
    """What each named fault changes (its table row's `plan`), combined, served with `serve`'s
    capture rule (ENGINE==VERSION; default: the newest SGLang read)."""
    names = normalize_faults(faults)
    plan = FaultPlan(faults=names, serve=serve or DEFAULT_SERVE)
    parse_serve(plan.serve)
    for name in names:
        fault = FAULTS[name]
        for key, value in fault.plan.items():
            setattr(plan, key, value(num_layers) if callable(value) else value)
        if fault.prompts:
            plan.prompt_kinds.append(fault.prompts)
    return plan


def apply_draft_faults(draft, target, plan: FaultPlan):
    """A copy of the draft with the plan's checkpoint faults (lm_head, rope_theta) applied."""
    import copy

    import torch

    if not (plan.lm_head_from_target or plan.rope_theta):
        return draft
    from eagle3lab.decoder.draft import RotaryEmbedding

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


def build_engine(target, draft, plan: FaultPlan, *, max_seq_len: int = 2048, tokenizer=None):
    """A `SpecEngine` for a transformers target and an Eagle3Draft with the plan's faults
    (the tokenizer renders the chat template when the plan serves one)."""
    from eagle3lab.wiring.chat_templates import template_parts
    from eagle3lab.decoder.forward import TargetModel, fake_quantize_
    from eagle3lab.decoder.speculate import SpecEngine

    if plan.chat_template and tokenizer is None:
        raise FaultError("the chat-template fault needs the target's tokenizer to render its template")
    parts = template_parts(tokenizer, plan.chat_template) if plan.chat_template else ((), ())

    if draft is not None:
        draft = apply_draft_faults(draft, target, plan)
    lean = TargetModel(target, max_seq_len)
    if plan.quant_bits:
        fake_quantize_(lean, plan.quant_bits, QUANT_GROUP_SIZE)
    boundaries = plan.boundaries(draft, lean.num_layers) if draft is not None else None
    if boundaries is not None and len(set(boundaries)) != len(boundaries):
        raise FaultError(f"served boundaries {boundaries} repeat a layer")
    return SpecEngine(lean, draft, boundaries=boundaries, normed_last=plan.normed_last,
                      use_d2t=plan.use_d2t, greedy_draft=plan.greedy_draft, prompt_template=parts)


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

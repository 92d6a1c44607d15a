"""What every experiment shares: the decode budget per lab preset, the notebooks' shared held-out
prompts, the target's architecture, and the small converters tables use."""

from __future__ import annotations

from eagle3lab.decoder.faults import SEED_AFTER_FIX  # noqa: F401  (the lab's seed-like draft after its fix)
from eagle3lab.spec import BASELINE, LATEST_SGLANG  # noqa: F401  (the label plots and sweeps share)

# How much each lab preset decodes in the notebooks: enough to be meaningful on the default
# lab, small enough that CI executes every notebook in a few minutes on the ci lab.
BUDGETS = {
    "ci": {"num_prompts": 2, "max_new_tokens": 32, "eval_texts": 4, "repeats": 1},
    "default": {"num_prompts": 6, "max_new_tokens": 128, "eval_texts": 8, "repeats": 2},
    # the real-model lab: a 135 M target decodes ~12 tok/s on one core, so fewer tokens
    "smollm2": {"num_prompts": 4, "max_new_tokens": 32, "eval_texts": 4, "repeats": 1},
}


# Every notebook decodes the same held-out prompts (the first passages of the lab's held-out
# text, cut to this many tokens), so one configuration gives one accept length across notebooks.
PROMPT_TOKENS = 48


# The hypotheses notebook 05 switches on, one at a time, per lab. The toy labs decode raw text, so
# their prompt faults (domain-shift, long-context) mean something there; the real-model lab serves
# chat prompts of four kinds (notebook 04 breaks them down by kind) and has a draft trained
# without the chat template.
TOY_FAULTS = ("wiring-seed", "no-ttt", "quant-int4", "domain-shift", "long-context", "no-d2t", "normed-last")
REAL_FAULTS = ("wiring-seed", "no-ttt", "no-template", "quant-int4", "no-d2t", "normed-last")
# The lab a configuration sweep runs on when the notebooks' lab is the real model: 8 configurations
# at ~12 tok/s on one core do not fit the report's 15 minutes, the toy lab's do.
SWEEP_TOY_LAB = "default"
# The accept length at 5/1/6 the real-model lab's healthy draft was built to reach (public EAGLE-3
# drafts for 8 B-class targets are reported at 3-4 at that depth).
ACCEPT_GOAL = 2.5


def is_real_lab(lab) -> bool:
    """Whether `lab` (a preset name or a loaded lab) is the real-model lab."""
    from eagle3lab.lab.real_lab import PRESET

    return (lab if isinstance(lab, str) else getattr(lab, "preset", None)) == PRESET


def lab_faults(lab) -> list[str]:
    """The hypotheses notebook 05 measures on `lab`."""
    return list(REAL_FAULTS if is_real_lab(lab) else TOY_FAULTS)


def sweep_lab(lab: str) -> str:
    """The lab notebook 05's configuration sweep runs on: the notebooks' lab, or the toy lab when
    that is the real model."""
    return SWEEP_TOY_LAB if is_real_lab(lab) else lab


def preset_budget(lab: str, **overrides) -> dict[str, int]:
    """`budget` without naming the lab in the prose (for a second lab in one notebook)."""
    base = dict(BUDGETS.get(lab, BUDGETS["default"]))
    base.update({k: v for k, v in overrides.items() if v is not None})
    return base


def budget(lab: str, **overrides) -> dict[str, int]:
    """Decode budget for a lab preset; a None override keeps the preset's value. Every notebook
    calls it first, so it also sets the lab the prose names (`report.labwords.use`)."""
    from eagle3lab.report import labwords

    labwords.use(lab)
    return preset_budget(lab, **overrides)


def target_arch(target_dir=None, lab: str | None = None) -> str:
    """``architectures[0]`` of a target's config.json (the lab's when no directory is given)."""
    import json
    from pathlib import Path

    if target_dir is None and lab is not None:
        from eagle3lab.paths import lab_dir

        target_dir = lab_dir(lab) / "target"
    path = Path(target_dir) / "config.json" if target_dir is not None else None
    if path is not None and path.is_file():
        archs = json.loads(path.read_text()).get("architectures") or []
        if archs:
            return archs[0]
    return "LlamaForCausalLM"


def serve_engine(serve=None, backend: str = "lab") -> tuple[str, str]:
    """(engine, version) a notebook's wiring check applies: SERVE as given, else vLLM's version
    read for BACKEND="vllm", else SGLang's newest read (what the lab server emulates)."""
    if serve is not None:
        return tuple(serve)
    from eagle3lab import engines

    rules = engines.follows(backend)
    return (rules.name, rules.latest)


def sglang_installed() -> bool:
    """True when the `sglang` package can be imported here (its resolver runs on CPU)."""
    import importlib.util

    return importlib.util.find_spec("sglang") is not None


# The lab server's request caps, sized for the lab targets' 1024 positions.
LAB_SERVER_ARGS = ("--max-prompt-tokens", "512", "--max-new-tokens", "384")


def bench_prompts(lab: str, n: int, backend: str = "lab", prompt_tokens: int = PROMPT_TOKENS):
    """Held-out prompts: token ids for the lab server (it shares the lab's tokenizer), text for
    any other server."""
    from eagle3lab import engines
    from eagle3lab.lab import load_lab

    lab_obj = load_lab(lab, progress=False) if isinstance(lab, str) else lab
    if engines.get(backend).in_process:
        return lab_obj.heldout_prompts(n, prompt_tokens)
    return [text[:600] for text in lab_obj.heldout_texts(n)]


def prompt_sources(lab, n: int, prompt_tokens: int = PROMPT_TOKENS) -> list[str]:
    """The held-out file each of the first n bench prompts starts (same order as bench_prompts)."""
    from eagle3lab.lab import load_lab

    lab_obj = load_lab(lab, progress=False) if isinstance(lab, str) else lab
    if hasattr(lab_obj, "heldout_records"):  # the real-model lab: whole chat prompts, by kind
        return [f"a held-out {r['kind']} chat request" for r in lab_obj.heldout_records()[:n]]
    out = []
    for text in lab_obj._heldout:
        if len(lab_obj.tokenizer(text["text"], add_special_tokens=False)["input_ids"]) >= prompt_tokens:
            out.append(text.get("file", "?"))
        if len(out) == n:
            break
    return out


def _int(value):
    """An integer for display, None for a missing value."""
    try:
        return None if value is None or value != value else int(value)
    except (TypeError, ValueError):
        return value


def _float(value) -> float:
    """A float, NaN for a missing value."""
    try:
        return float("nan") if value is None else float(value)
    except (TypeError, ValueError):
        return float("nan")


def load_target(target_dir=None, lab=None):
    """(model, tokenizer) of a transformers target: the directory given, else the lab's."""
    if target_dir is None:
        return lab.target, lab.tokenizer
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(target_dir, torch_dtype="auto").eval()
    return model, AutoTokenizer.from_pretrained(target_dir)



def toy_repetition(lab) -> dict | None:
    """Beside the real-model lab's text quality, the toy lab's: its target's greedy text on its
    own shared prompts and budget, decoded in this run (plain decoding, a few seconds), measured
    the same way (share of 4-token spans that repeat an earlier one). None when `lab` is a toy."""
    if not is_real_lab(lab):
        return None
    from eagle3lab.decoder import make_lab_engine
    from eagle3lab.lab import load_lab
    from eagle3lab.lab.real_eval import repetition_share_ids

    toy = load_lab(SWEEP_TOY_LAB, progress=False)
    b = preset_budget(SWEEP_TOY_LAB)
    engine, _ = make_lab_engine(toy, [])
    outputs = [engine.generate_plain(p, b["max_new_tokens"]).output_ids
               for p in toy.heldout_prompts(b["num_prompts"], PROMPT_TOKENS)]
    return {**repetition_share_ids(outputs, toy.tokenizer), "lab": SWEEP_TOY_LAB,
            "origin": "the toy lab's target, decoded in this run"}


def heldout_repetition(lab) -> dict | None:
    """The real-model lab's repetition share over its held-out chat responses (the manifest's
    figure, measured when the lab was built), or None for a toy lab."""
    if not is_real_lab(lab):
        return None
    from eagle3lab.lab import load_lab

    rep = ((load_lab(lab, progress=False).manifest.get("repetition") or {}).get("chat"))
    return None if not rep else {**rep, "origin": "the lab's held-out chat responses (its manifest)"}


def by_kind_table(lab):
    """The real-model lab's accept length at 5/1/6 by prompt kind and draft, from its manifest
    (the lab's replay over its held-out chat prompts, measured when it was built)."""
    import pandas as pd

    from eagle3lab.lab import load_lab

    kinds = load_lab(lab, progress=False).manifest.get("acceptance_by_kind") or {}
    table = pd.DataFrame(kinds).T
    table.index.name = "draft (accept length at 5/1/6 by prompt kind; the lab's replay, manifest)"
    return table

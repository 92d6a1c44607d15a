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
}


# Every notebook decodes the same held-out prompts (the first passages of the lab's held-out
# text, cut to this many tokens), so one configuration gives one accept length across notebooks.
PROMPT_TOKENS = 48


def budget(lab: str, **overrides) -> dict[str, int]:
    """Decode budget for a lab preset; a None override keeps the preset's value. Every notebook
    calls it first, so it also sets the lab the prose names (`report.labwords.use`)."""
    from eagle3lab.report import labwords

    labwords.use(lab)
    base = dict(BUDGETS.get(lab, BUDGETS["default"]))
    base.update({k: v for k, v in overrides.items() if v is not None})
    return base


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


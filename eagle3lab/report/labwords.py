"""How the pages name the lab and its drafts, from the lab's own manifest: never by a name that
reads as the incident's, and never with a property the draft does not have.

Why: the toy labs' `seed` draft was trained without TTT, the real-model lab's with it. A sentence
that says "the lab's no-TTT draft" must be true of the lab the run used, so each notebook sets its
lab once (`use(LAB)`, called by `experiments.budget`) and prose asks `draft(name)`.
"""

from __future__ import annotations

# The toy labs' words (their drafts: healthy TTT, seed and no-ttt without TTT), kept as they were.
TOY_DRAFTS = {"seed": "the lab's no-TTT draft", "healthy": "the lab's TTT draft",
              "no-ttt": "the lab's second no-TTT draft"}

_ACTIVE: dict = {"lab": None, "drafts": dict(TOY_DRAFTS), "real": False, "target": "a tiny Llama target"}


def words_from_manifest(manifest: dict) -> dict:
    """{draft name: words} for a lab's manifest: the toy labs keep their words; a lab whose drafts
    record their training data (the real-model lab) is named by what each draft is."""
    drafts = manifest.get("drafts") or {}
    if not any("data" in d for d in drafts.values()):
        return dict(TOY_DRAFTS)
    out = {}
    for name, info in drafts.items():
        ttt = int(info.get("ttt_steps") or 1) > 1
        bounds = list(info.get("train_boundaries") or [])
        if info.get("data") == "raw":
            out[name] = "the lab's draft trained without the chat template"
        elif bounds[:1] == [0]:
            out[name] = "the lab's draft trained on [embedding, low, mid]" + ("" if ttt else " without TTT")
        else:
            out[name] = "the lab's TTT draft" if ttt else "the lab's no-TTT draft"
    return out


def use(lab) -> dict:
    """Set the lab prose speaks of (a preset name or a `Lab`); returns the words. A lab that cannot
    be read leaves the toy labs' words (a notebook's own error says why)."""
    try:
        from eagle3lab.lab import load_lab

        obj = load_lab(lab, build=False, progress=False) if isinstance(lab, str) else lab
        manifest = obj.manifest
    except Exception:  # noqa: BLE001 - naming is never the reason a notebook fails
        return dict(_ACTIVE["drafts"])
    real = any("data" in d for d in (manifest.get("drafts") or {}).values())
    target = manifest.get("target") or {}
    _define_the_lab(manifest if real else None)
    _ACTIVE.update(lab=getattr(obj, "preset", lab), drafts=words_from_manifest(manifest), real=real,
                   target=(f"{target['name']}, a pretrained chat model" if target.get("name") else
                           "a tiny Llama target"))
    return dict(_ACTIVE["drafts"])


def draft(name: str) -> str:
    """The words for one of the active lab's drafts."""
    return _ACTIVE["drafts"].get(name, f"the lab's {name} draft")


def is_real() -> bool:
    """True when the active lab is a pretrained model's (its drafts record their training data)."""
    return bool(_ACTIVE["real"])


def seed_ttt() -> bool:
    """Whether the active lab's seed-like draft was trained with TTT (the real-model lab's was)."""
    return "no-TTT" not in draft("seed") and "without TTT" not in draft("seed")


_TOY_LAB_TERM: list = []


def _define_the_lab(manifest: dict | None) -> None:
    """The glossary's "the lab" says what this run's lab is (a pretrained model's, or the toy's)."""
    from eagle3lab.report import glossary

    definition, pattern = glossary.TERMS["the lab"]
    if not _TOY_LAB_TERM:
        _TOY_LAB_TERM.append(definition)
    if manifest is None:
        glossary.TERMS["the lab"] = (_TOY_LAB_TERM[0], pattern)
        return
    t = manifest.get("target") or {}
    size = f"{t['parameters'] / 1e6:.0f} M-parameter" if t.get("parameters") else "small"
    glossary.TERMS["the lab"] = (
        f"a real stand-in built on this machine: {t.get('name', 'a pretrained chat model')}, a pretrained {size} "
        f"chat model ({t.get('num_layers', '?')} layers, dense), with EAGLE-3 drafts trained here on its own chat "
        "responses, decoded by eagle3lab's own engine. It shows mechanisms, not the size of effects on a large MoE "
        "or tokens/s on a GPU.", pattern)

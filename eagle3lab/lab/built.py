"""The toy labs as Python objects (`Lab`, `load_toy_lab`): tokenizer, target, drafts, held-out data."""

from __future__ import annotations

import json
import warnings
from functools import cached_property
from pathlib import Path

import torch

from eagle3lab.errors import EagleLabError
from eagle3lab.paths import lab_dir


class Lab:
    """A built lab folder: manifest.json, target/ (HF model + tokenizer), drafts/<name>/."""

    def __init__(self, root) -> None:
        self.root = Path(root)
        mp = self.root / "manifest.json"
        if not mp.is_file():
            raise EagleLabError(f"no lab in {self.root} (run: eagle3lab lab build)")
        self.manifest: dict = json.loads(mp.read_text())
        self.preset = self.manifest.get("preset", self.root.name)

    def __repr__(self) -> str:
        return f"Lab({str(self.root)!r}, layers={self.num_layers}, drafts={self.draft_names})"

    @property
    def target_dir(self) -> Path:
        return self.root / "target"

    @property
    def num_layers(self) -> int:
        return int(self.manifest["target"]["num_layers"])

    @property
    def draft_names(self) -> list[str]:
        drafts = self.root / "drafts"
        return sorted(p.name for p in drafts.iterdir() if (p / "config.json").is_file())

    @cached_property
    def tokenizer(self):
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(str(self.target_dir))

    @cached_property
    def target(self):
        """The target as float32 in eval mode (stored as float16)."""
        from transformers import LlamaForCausalLM

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = LlamaForCausalLM.from_pretrained(str(self.target_dir), dtype=torch.float32)
        return model.eval()

    def draft_dir(self, name: str) -> Path:
        path = self.root / "drafts" / name
        if not (path / "config.json").is_file():
            raise EagleLabError(f"no draft {name!r} in {self.root} "
                                f"(have: {', '.join(self.draft_names)})")
        return path

    def load_draft(self, name: str):
        from eagle3lab.decoder.draft import Eagle3Draft

        return Eagle3Draft.from_pretrained(
            self.draft_dir(name), embed_weight=self.target.model.embed_tokens.weight.detach())

    @cached_property
    def _heldout(self) -> list[dict]:
        path = self.root / "heldout.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def heldout_texts(self, n: int | None = None) -> list[str]:
        """Held-out passages (files the target and drafts never trained on)."""
        texts = [s["text"] for s in self._heldout]
        return texts if n is None else texts[:n]

    def eval_sequences(self, n: int | None = None) -> list[list[int]]:
        """Token ids a draft's standalone accuracy is measured on: the held-out passages."""
        return [self.tokenizer(t, add_special_tokens=False)["input_ids"] for t in self.heldout_texts(n)]

    def heldout_prompts(self, n: int | None, prompt_tokens: int = 64) -> list[list[int]]:
        """The first `prompt_tokens` tokens of the first n passages long enough for it
        (every such passage when n is None)."""
        out = []
        for text in self._heldout:
            ids = self.tokenizer(text["text"], add_special_tokens=False)["input_ids"]
            if len(ids) >= prompt_tokens:
                out.append(ids[:prompt_tokens])
            if len(out) == n:
                return out
        if n is None and out:
            return out
        raise EagleLabError(f"only {len(out)} held-out passages have {prompt_tokens} tokens "
                            f"(asked for {'all' if n is None else n})")


def load_toy_lab(preset: str = "ci", build: bool = True, root=None, progress: bool = True) -> Lab:
    """The lab of `preset` (in `root`, else eagle3lab.paths.lab_dir(preset)).

    With build=True a missing or stale preset lab is built first (minutes); a lab
    built from another Python's stdlib is used as is, with a warning. (The real-model lab:
    eagle3lab.lab.labs.load_lab, which `eagle3lab.lab.load_lab` is.)
    """
    import sys

    from eagle3lab.lab.build import (PRESETS, build_lab, cache_key, is_current,
                                     preset_config, warn_if_corpus_changed)

    path = Path(root) if root else lab_dir(preset)
    manifest = path / "manifest.json"
    if root is not None and manifest.is_file():
        current = True  # an explicit folder is used as built
    elif preset in PRESETS:
        current = is_current(path, cache_key(preset_config(preset)))
    else:
        current = manifest.is_file()
    if not current:
        if not build:
            why = "out of date" if manifest.is_file() else "missing"
            raise EagleLabError(f"lab {preset!r} is {why} in {path} "
                                f"(run: eagle3lab lab build --preset {preset})")
        build_lab(preset, path, progress=progress)
    lab = Lab(path)
    if lab.manifest.get("environment", {}).get("python") != sys.version.split()[0]:
        warn_if_corpus_changed(path)
    return lab

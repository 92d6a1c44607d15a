"""The real-model lab as Python objects: SmolLM2-135M-Instruct and the drafts trained on its responses.

`load_lab("smollm2")` returns a `RealLab`, the same interface as the toy labs' `Lab` (target_dir,
tokenizer, target, draft_names, load_draft, heldout_prompts). What the repository stores per draft
is only what training changed (fc, the draft layer, its norm; float16) plus d2t; at load the rest
comes from the target: the input embedding and the LM head (the target's tied embedding rows of
the draft vocabulary, frozen in training). `materialize_draft` writes a complete EAGLE-3 folder
(config.json + model.safetensors with lm_head, d2t and t2d) to the cache for SGLang or vLLM.
"""

from __future__ import annotations

import hashlib
import json
import os
from functools import cached_property
from pathlib import Path

import torch

from eagle3lab.errors import EagleLabError
from eagle3lab.lab.built import Lab
from eagle3lab.lab.smollm2 import TargetError, check_converted, ensure_target
from eagle3lab.paths import cache_dir, lab_dir, replacing_dir

PRESET = "smollm2"
STORED_FILE = "trained.safetensors"   # what training changed + d2t (not loadable by a server)
NO_D2T = "no-d2t"                      # materialize the healthy draft without its vocabulary map


class RealLab(Lab):
    """data/lab/smollm2: manifest.json, heldout.jsonl, prompts.jsonl, drafts/<name>/
    (config.json + trained.safetensors); the target lives in the cache (smollm2.ensure_target)."""

    @property
    def target_dir(self) -> Path:
        folder = ensure_target()
        prov = check_converted(folder)
        want = (self.manifest.get("target") or {}).get("weights_sha256")
        if want and prov.get("weights_sha256") != want:
            raise TargetError(f"the target in {folder} (weights sha256 {prov.get('weights_sha256', '?')[:12]}) "
                              f"is not the conversion the lab's drafts were trained on ({want[:12]})")
        return folder

    @property
    def draft_names(self) -> list[str]:
        drafts = self.root / "drafts"
        return sorted(p.name for p in drafts.iterdir() if (p / "config.json").is_file())

    @cached_property
    def target(self):
        from eagle3lab.lab.smollm2 import load_target

        return load_target(self.target_dir)

    def load_draft(self, name: str):
        """The draft as float32 on this lab's target (embedding and LM head filled in)."""
        return load_stored_draft(self.draft_dir(name), self.target)

    # -- held-out data ----------------------------------------------------------------------
    @cached_property
    def _heldout(self) -> list[dict]:
        path = self.root / "heldout.jsonl"
        if not path.is_file():
            raise EagleLabError(f"{path} missing: the lab is incomplete (rebuild it)")
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def heldout_records(self, mode: str = "chat", kinds=None) -> list[dict]:
        """Held-out prompts with the target's greedy responses (max 192 tokens, or to its stop
        token): dicts with id, kind, text, prompt_ids, response_ids, for `mode` chat (template
        applied) or raw (the prompt text as it is)."""
        if mode not in ("chat", "raw"):
            raise EagleLabError(f"held-out mode {mode!r}: choose chat or raw")
        out = []
        for rec in self._heldout:
            if kinds and rec["kind"] not in kinds:
                continue
            out.append({"id": rec["id"], "kind": rec["kind"], "text": rec["text"],
                        "prompt_ids": rec[mode]["prompt_ids"], "response_ids": rec[mode]["response_ids"]})
        return out

    def heldout_prompts(self, n: int | None = None, prompt_tokens: int | None = None,
                        mode: str = "chat") -> list[list[int]]:
        """Token ids of the first n held-out prompts (all when None), interleaved over the
        kinds, as served: with the chat template (mode="chat") or raw. Whole prompts:
        `prompt_tokens` is accepted for the toy labs' interface and not applied (a chat prompt
        cut short would lose its template's assistant header)."""
        records = self.heldout_records(mode)
        return [list(r["prompt_ids"]) for r in records[:n]]

    def heldout_raw_prompts(self, n: int | None = None) -> list[list[int]]:
        return self.heldout_prompts(n, mode="raw")

    def heldout_texts(self, n: int | None = None) -> list[str]:
        texts = [r["text"] for r in self._heldout]
        return texts if n is None else texts[:n]

    def training_curve(self, name: str = "healthy") -> list[dict]:
        """Accept length at 5/1/6 with its interval by training tokens (response tokens seen,
        epochs counted) for `name`: the snapshots, then the shipped draft (manifest)."""
        points = (self.manifest.get("accept_vs_training_tokens") or {}).get(name)
        if points is None:
            raise EagleLabError(f"no training curve for draft {name!r} in {self.root / 'manifest.json'}")
        group = self.manifest["drafts"][name]["group"]
        total = self.manifest["training"][group]["training_tokens"]
        return [dict(p, training_tokens=total, shipped=True) if p["training_tokens"] == "final" else p
                for p in points]

    def training_slice(self, spec: str = "5/1/6", n_boot: int = 2000) -> dict:
        """The seed's training slice alone: the draft trained on [embedding, low, mid] served as
        trained, against the healthy draft (same recipe on [low, mid, high]), from the manifest's
        replay over the held-out chat prompts; the ratio of their per-prompt means with a paired
        bootstrap interval (resampling prompts, seed 0)."""
        import numpy as np

        acc = self.manifest.get("acceptance") or {}
        a, b = acc.get("seed (as trained)"), acc.get("healthy")
        if not a or not b or spec not in a or spec not in b:
            raise EagleLabError(f"{self.root / 'manifest.json'} has no replay of the seed as trained at {spec}")
        pa = np.array(a[f"per_prompt_{spec}"], dtype=float)
        pb = np.array(b[f"per_prompt_{spec}"], dtype=float)
        idx = np.random.default_rng(0).integers(0, len(pa), size=(n_boot, len(pa)))
        boots = pa[idx].mean(axis=1) / pb[idx].mean(axis=1)
        side = lambda r: {"accept_length": r[spec]["accept_length"], "accept_length_ci95": r[spec]["ci95"],
                          "prompts": r[spec]["prompts"]}
        return {"spec": spec, "source": "the lab's replay over its held-out chat prompts (manifest)",
                "trained_emb_low_mid": side(a), "trained_low_mid_high": side(b),
                "gap": {"ratio": round(float(pa.mean() / pb.mean()), 4),
                        "ratio_ci95": [round(float(np.quantile(boots, 0.025)), 4),
                                       round(float(np.quantile(boots, 0.975)), 4)]}}

    def eval_sequences(self, n: int | None = None) -> list[list[int]]:
        """Token ids a draft's standalone accuracy is measured on: held-out chat prompts with
        the target's own responses (what the drafts were trained to predict)."""
        return [t.tolist() for t in self.heldout_continuations(n)]

    def heldout_continuations(self, n: int | None = None, mode: str = "chat") -> list[torch.Tensor]:
        """prompt + the target's greedy response, one tensor per held-out prompt (what
        evaluation.evaluate_acceptance takes as `continuations`)."""
        return [torch.tensor(r["prompt_ids"] + r["response_ids"]) for r in self.heldout_records(mode)[:n]]


def interleave_kinds(records: list[dict]) -> list[dict]:
    """Records reordered round-robin over their kinds (so the first n cover every kind)."""
    kinds: dict[str, list] = {}
    for r in records:
        kinds.setdefault(r["kind"], []).append(r)
    lists = list(kinds.values())
    return [lst[i] for i in range(max(map(len, lists), default=0)) for lst in lists if i < len(lst)]


def check_draft_fits(config: dict, target_config, where) -> None:
    """A one-line error when a draft was made for another target (hidden size, vocabulary or
    layer count differ): served anyway, it would read features of the wrong shape or meaning."""
    checks = [("hidden size", config.get("target_hidden_size", config.get("hidden_size")),
               target_config.hidden_size),
              ("vocabulary", config.get("vocab_size"), target_config.vocab_size),
              ("target layers", config.get("target_num_hidden_layers"), target_config.num_hidden_layers)]
    for what, draft_value, target_value in checks:
        if draft_value != target_value:
            raise TargetError(f"draft {where} was made for another target: its {what} is "
                              f"{draft_value}, the target's {target_value}")


def load_stored_draft(folder, target):
    """An Eagle3Draft from a stored folder (config.json + trained.safetensors), its embedding
    and LM head taken from `target` (a transformers Llama with tied embeddings)."""
    from safetensors.torch import load_file

    from eagle3lab.decoder.draft import Eagle3Draft

    folder = Path(folder)
    config = json.loads((folder / "config.json").read_text())
    check_draft_fits(config, target.config, folder)
    path = folder / STORED_FILE
    if not path.is_file():
        raise EagleLabError(f"{path} missing: the draft is incomplete (rebuild the lab)")
    state = load_file(str(path))
    embed = target.model.embed_tokens.weight.detach().float()
    draft = Eagle3Draft(config, embed_weight=embed)
    d2t = state.pop("d2t", None)
    if d2t is None or d2t.numel() != config["draft_vocab_size"]:
        raise EagleLabError(f"{path}: no d2t of {config['draft_vocab_size']} entries")
    target_ids = d2t.long() + torch.arange(d2t.numel())
    if int(target_ids.max()) >= target.config.vocab_size or int(target_ids.min()) < 0:
        raise TargetError(f"draft {folder}: its d2t maps outside the target's vocabulary")
    draft.set_vocab_map(target_ids)
    state = {k: v.float() for k, v in state.items()}
    missing, unexpected = draft.load_state_dict(state, strict=False)
    missing = [m for m in missing if not m.startswith(("embed_tokens.", "lm_head.", "d2t", "t2d"))]
    if missing or unexpected:
        raise EagleLabError(f"{path}: checkpoint mismatch (missing {missing[:3]}, unexpected {unexpected[:3]})")
    fill_lm_head(draft, embed)
    return draft.eval()


def fill_lm_head(draft, embed: torch.Tensor) -> None:
    """The draft's LM head = the target's tied embedding rows of the draft vocabulary (frozen)."""
    with torch.no_grad():
        draft.lm_head.weight.copy_(embed[draft.target_ids].to(draft.lm_head.weight.dtype))
    draft.lm_head.weight.requires_grad_(False)


def materialize_draft(lab: RealLab, name: str, out=None, *, dtype=torch.float32,
                      drop_d2t: bool = False) -> Path:
    """A complete EAGLE-3 draft folder (SGLang / vLLM `eagle3` layout: config.json and
    model.safetensors with fc, midlayer.*, norm, lm_head, d2t, t2d) for `name`, written to
    the cache (or `out`) through a temporary folder; reused when already there.
    `drop_d2t`: without d2t/t2d (the fault "a draft missing its d2t"; a server then reads draft
    ids as target ids)."""
    from eagle3lab.lab.export import export_draft

    stored = lab.draft_dir(name) / STORED_FILE
    if out is None:
        tag = hashlib.sha256(stored.read_bytes()).hexdigest()[:12]
        label = f"{name}-{NO_D2T}" if drop_d2t else name
        out = cache_dir(PRESET, "materialized") / f"{label}-{tag}-{str(dtype).replace('torch.', '')}"
    out = Path(out)
    if (out / "config.json").is_file() and (out / "model.safetensors").is_file():
        return out
    draft = lab.load_draft(name)
    with replacing_dir(out, f".tmp-{os.getpid()}") as tmp:
        export_draft(draft, tmp, dtype=dtype)
        if drop_d2t:
            _drop_vocab_map(tmp)
    return out


def _drop_vocab_map(folder: Path) -> None:
    from safetensors.torch import load_file, save_file

    path = folder / "model.safetensors"
    state = {k: v for k, v in load_file(str(path)).items() if k not in ("d2t", "t2d")}
    save_file(state, str(path), metadata={"format": "pt"})


def load_real_lab(preset: str = PRESET, root=None) -> RealLab:
    """The shipped real-model lab (built by `eagle3lab lab build --preset smollm2`, hours of
    CPU: never built implicitly)."""
    path = Path(root) if root else lab_dir(preset)
    if not (path / "manifest.json").is_file():
        raise EagleLabError(f"lab {preset!r} is missing in {path} "
                            f"(run: eagle3lab lab build --preset {preset})")
    return RealLab(path)

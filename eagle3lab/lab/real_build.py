"""The real-model lab's recipe (`eagle3lab lab build --preset smollm2`), from the GGUF to trained drafts.

Stages, each resumable (its work lands in the cache, under a key of the recipe): convert the
target; the prompt set; the target's greedy responses with its chat template and raw; the draft
vocabulary of each response set (its most frequent response tokens); one capture per response set;
training in groups (drafts that read the same data train on the same batches; groups can run in
parallel processes: `--group`); then the shipped lab is written to a temporary folder and renamed
into place: each draft's trained tensors (float16) + d2t + config.json, the held-out prompts with
the target's responses, the figures and the manifest. A rebuild says how its weights compare with
the lab it replaces (build.rebuild_note).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import sys
from pathlib import Path

import torch

from eagle3lab.errors import EagleLabError
from eagle3lab.lab.build import cpu_capability, draft_wirings
from eagle3lab.paths import cache_dir

PRESET = "smollm2"
LAB_VERSION = "1"
STORED_DTYPE = torch.float16
DEPTH = 5  # the deepest chain measured (5/1/6)

# Sizes chosen for a 2-core machine shared with other jobs (see docs in the manifest's "recipe_notes").
RECIPE = {
    "seed": 0,
    # raw completions: 60 % of them end at once (the instruct model closes the turn), so twice
    # the prompts give the no-template draft about as many response tokens as the chat drafts
    "responses": {"max_new_tokens": 192, "train_prompts": {"chat": 160, "raw": 320}},
    "draft": {"vocab_size": 8192, "intermediate_size": 768, "ttt_steps": 5},
    "training": {"epochs": 3, "batch_tokens": 1024, "lr": 2e-3, "teacher": "argmax"},
    "snapshots": [5_000, 10_000, 20_000, 40_000],
}
RECIPE_NOTES = (
    "Sizes fit a session's spare CPU on 2 shared cores (measured: about a quarter of a core per "
    "thread while others ran): 160 training prompts answered with the chat template, 320 raw (most "
    "raw completions end at once) "
    "(code, maths, chat, long context round-robin) answered by the target (at most 192 new tokens); "
    "draft vocabulary 8,192 (the most frequent response tokens); draft MLP 768 wide (half the "
    "target's 1,536: training tokens, not capacity, bound a draft trained on this little data); "
    "TTT unrolled 5 steps (the deepest chain measured is 5 drafts); 3 epochs (a response token "
    "costs ~8x more to generate than to train a draft on, so epochs are the cheap way to more training "
    "tokens); loss on response "
    "tokens only; the LM head frozen at the target's tied embedding rows.")

# Which drafts train together (one process per group): same data, same batches.
GROUPS = {"chat": ("healthy", "no-ttt"), "chat-seed": ("seed",), "raw": ("no-template",)}


def draft_specs(num_layers: int = 30) -> dict[str, dict]:
    """The four drafts: data, boundaries trained on, config ids, TTT (draft_wirings' conventions)."""
    w = draft_wirings(num_layers)
    healthy, seed = w["healthy"], w["seed"]
    return {
        "healthy": {"data": "chat", "boundaries": healthy["boundaries"], "aux_ids": healthy["aux_ids"],
                    "ttt": True, "role": "TTT on SGLang's default boundaries [low, mid, high], "
                                         "trained on the target's chat responses"},
        "no-ttt": {"data": "chat", "boundaries": healthy["boundaries"], "aux_ids": healthy["aux_ids"],
                   "ttt": False, "role": "the healthy recipe with plain teacher forcing (k = 1)"},
        "seed": {"data": "chat", "boundaries": seed["boundaries"], "aux_ids": seed["aux_ids"],
                 "ttt": True, "role": "the seed's pipeline: TTT, trained on [embedding, low, mid]; its "
                                      "config ids say [1, N//2-1, N-4], so SGLang's +1 rule feeds it "
                                      "[low, mid, high]"},
        "no-template": {"data": "raw", "boundaries": healthy["boundaries"], "aux_ids": healthy["aux_ids"],
                        "ttt": True, "role": "the healthy recipe trained on raw completions (no chat "
                                             "template), served with the template"},
    }


def recipe_key() -> str:
    from eagle3lab.lab import chat_prompts, responses, smollm2

    blob = json.dumps({"recipe": RECIPE, "version": LAB_VERSION, "specs": draft_specs(),
                       "converter": smollm2.CONVERTER_VERSION, "gguf": smollm2.GGUF_SHA256,
                       "gen": responses.GEN_VERSION,
                       "prompts": chat_prompts.fingerprint(chat_prompts.prompt_set())}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def work_dir(key: str | None = None) -> Path:
    return cache_dir(PRESET, "build", key or recipe_key())


def response_records(model, tokenizer, mode: str, *, log=print, progress: bool = True) -> list[dict]:
    """The held-out and training prompts' responses in `mode` (generated where missing)."""
    from eagle3lab.lab import chat_prompts, responses, smollm2

    prompts = chat_prompts.prompt_set()
    heldout = sum(p.split == "heldout" for p in prompts)
    limit = heldout + RECIPE["responses"]["train_prompts"][mode]
    settings = {"prompts": chat_prompts.fingerprint(prompts), "converter": smollm2.CONVERTER_VERSION}
    path = responses.generate_responses(model, tokenizer, prompts, mode,
                                        max_new_tokens=RECIPE["responses"]["max_new_tokens"],
                                        batch=64, settings=settings, limit=limit, log=log,
                                        progress=progress)
    by_id = {r["id"]: r for r in responses.read_records(path)}
    missing = [p.id for p in prompts[:limit] if p.id not in by_id]
    if missing:
        raise EagleLabError(f"{len(missing)} responses missing in {path}")
    return [by_id[p.id] | {"split": p.split, "kind": p.kind} for p in prompts[:limit]]


def draft_vocabulary(records: list[dict], vocab_size: int, size: int) -> tuple[torch.Tensor, float]:
    """The `size` most frequent tokens of the training responses (ties by id), ascending, and
    the share of held-out response tokens they cover."""
    counts = torch.zeros(vocab_size, dtype=torch.long)
    for r in records:
        if r["split"] == "train":
            counts += torch.bincount(torch.tensor(r["response_ids"]), minlength=vocab_size)
    order = torch.argsort(counts, descending=True, stable=True)[:size]
    ids = torch.sort(order).values
    member = torch.zeros(vocab_size, dtype=torch.bool)
    member[ids] = True
    held = [t for r in records if r["split"] == "heldout" for t in r["response_ids"]]
    coverage = float(member[torch.tensor(held)].float().mean()) if held else float("nan")
    return ids, coverage


def new_draft(target, name: str, spec: dict, vocab_ids: torch.Tensor):
    """A fresh draft: same init for every draft (seeded), norm from the target's final norm,
    LM head the target's embedding rows (frozen)."""
    from eagle3lab.decoder.draft import Eagle3Draft, init_weights
    from eagle3lab.lab.real_lab import fill_lm_head

    embed = target.model.embed_tokens.weight.detach().float()
    torch.manual_seed(RECIPE["seed"] + 1)
    draft = Eagle3Draft.for_target(
        target.config, aux_layer_ids=spec["aux_ids"], train_boundaries=spec["boundaries"],
        draft_vocab_ids=vocab_ids, ttt_steps=RECIPE["draft"]["ttt_steps"] if spec["ttt"] else 1,
        intermediate_size=RECIPE["draft"]["intermediate_size"], embed_weight=embed,
        extra={"preset": PRESET, "role": spec["role"], "data": spec["data"],
               "lm_head": "the target's tied embedding rows of the draft vocabulary (frozen)"})
    init_weights(draft)
    with torch.no_grad():
        draft.norm.weight.copy_(target.model.norm.weight.float())
    fill_lm_head(draft, embed)
    return draft


def train_group(target, group: str, *, log=print, progress: bool = True) -> dict:
    """Train one group's drafts (resuming); returns {name: draft} and the training summary."""
    from eagle3lab.lab.smollm2 import folder_lock

    with folder_lock(work_dir() / f"train-{group}"):  # two processes never train one group at once
        return _train_group(target, group, log=log, progress=progress)


def _train_group(target, group: str, *, log=print, progress: bool = True) -> dict:
    from eagle3lab.lab.real_training import CachedJob, train_jobs

    specs = draft_specs(target.config.num_hidden_layers)
    names = GROUPS[group]
    data_mode = specs[names[0]]["data"]
    data, vocab_ids = prepared_data(target, data_mode, log=log, progress=progress)
    jobs = [CachedJob(n, new_draft(target, n, specs[n], vocab_ids), specs[n]["boundaries"],
                      RECIPE["draft"]["ttt_steps"] if specs[n]["ttt"] else 1) for n in names]
    folder = work_dir()
    summary = train_jobs(jobs, data, target.model.embed_tokens.weight.detach().float(),
                         epochs=RECIPE["training"]["epochs"], batch_tokens=RECIPE["training"]["batch_tokens"],
                         lr=RECIPE["training"]["lr"], seed=RECIPE["seed"] + 2,
                         checkpoint=folder / f"train-{group}.pt", snapshot_tokens=RECIPE["snapshots"],
                         snapshot_dir=folder / "snapshots", progress=progress, log=log)
    return {"drafts": {j.name: j.draft for j in jobs}, "summary": summary,
            "history": {j.name: j.history for j in jobs}}


def prepared_data(target, mode: str, *, log=print, progress: bool = True):
    """The capture of `mode`'s responses (made where missing) and its draft vocabulary."""
    from eagle3lab.lab.real_training import capture_set
    from eagle3lab.lab.smollm2 import load_tokenizer

    tokenizer = load_tokenizer()
    records = response_records(target, tokenizer, mode, log=log, progress=progress)
    vocab_ids, _ = draft_vocabulary(records, target.config.vocab_size, RECIPE["draft"]["vocab_size"])
    from eagle3lab.lab.smollm2 import folder_lock

    with folder_lock(work_dir() / f"capture-{mode}"):
        train = [r for r in records if r["split"] == "train"]  # held-out ones are replayed in float32
        data = capture_set(target, train, work_dir() / f"capture-{mode}", boundaries=[2, 15, 27],
                           vocab_ids=vocab_ids, progress=progress, log=log)
    return data, vocab_ids


def save_stored(draft, folder: Path) -> None:
    """What the repository keeps of a draft: config.json and the trained tensors (float16)
    with d2t (int64); lm_head, t2d and the embedding come from the target at load."""
    from safetensors.torch import save_file

    from eagle3lab.lab.real_lab import STORED_FILE
    from eagle3lab.lab.real_training import trained_state

    folder.mkdir(parents=True, exist_ok=True)
    config = json.loads(json.dumps(dict(draft.config)))
    config["torch_dtype"] = str(STORED_DTYPE).replace("torch.", "")
    config.setdefault("eagle3lab", {})["stored"] = ("trained tensors and d2t only: "
                                                    "eagle3lab.lab.real_lab.materialize_draft writes "
                                                    "the full EAGLE-3 folder")
    state = {k: v.detach().to(STORED_DTYPE).contiguous() for k, v in trained_state(draft).items()}
    state["d2t"] = draft.d2t.detach().clone().contiguous()
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    save_file(state, str(folder / STORED_FILE), metadata={"format": "pt"})


def round_trained(draft) -> None:
    """Round the trained tensors to the stored dtype, so figures are the shipped draft's."""
    from eagle3lab.lab.real_training import trained_state

    with torch.no_grad():
        for tensor in trained_state(draft).values():
            if tensor.is_floating_point():
                tensor.copy_(tensor.to(STORED_DTYPE).float())


def weights_digest(root: Path) -> dict[str, str]:
    from eagle3lab.lab.real_lab import STORED_FILE

    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()[:16]
            for p in sorted(Path(root).glob(f"drafts/*/{STORED_FILE}"))}


def environment() -> dict:
    from importlib.metadata import version

    return {"python": sys.version.split()[0], "torch": torch.__version__,
            "transformers": version("transformers"), "machine": platform.machine(),
            "threads": torch.get_num_threads(), "cpus": os.cpu_count(),
            "cpu_capability": cpu_capability(), "load_average_at_end": list(os.getloadavg())}

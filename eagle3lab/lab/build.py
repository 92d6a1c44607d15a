"""`eagle3lab lab build`: corpus -> tokenizer -> target -> self-distilled data -> drafts.

A build is cached: its key is a hash of the preset's settings and LAB_VERSION (bump it
when the recipe changes). The corpus fingerprint is recorded but is not part of the
key, so another Python patch release warns instead of rebuilding.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import sys
import time
import warnings
from pathlib import Path

import torch

from eagle3lab.engines.lab.lab_capture import served_by_lab
from eagle3lab.errors import EagleLabError
from eagle3lab.paths import lab_dir, replacing_dir

LAB_VERSION = "1"
STORAGE_DTYPE = torch.float16
DRAFT_NAMES = ("healthy", "seed", "no-ttt")

PRESETS: dict[str, dict] = {
    # Small enough for tests and CI (<= 3 min on 2 cores).
    "ci": dict(
        seed=0, max_train_chars=400_000, max_heldout_chars=120_000, vocab_size=1024,
        hidden_size=64, num_layers=8, num_heads=2, num_kv_heads=1, intermediate_size=192,
        seq_len=64, target_steps=400, target_batch=16, target_lr=3e-3,
        gen_sequences=64, prompt_tokens=32, gen_tokens=64, corpus_sequences=32,
        draft_steps=200, draft_batch=8, draft_lr=3e-3, ttt_steps=4,
        draft_intermediate_size=192, draft_vocab_fraction=0.5, eval_windows=16,
        accept_prompts=8, accept_prompt_tokens=32, accept_new_tokens=64,
    ),
    # The embedded lab: deep and narrow, so that (as for a large model on a GPU) a plain
    # target step costs mostly its fixed per-layer overhead and a verify pass of 8 tokens only
    # ~1.4-1.8x a plain step; the seed's served boundaries [2, 12, 21] sit as far from its
    # trained ones as Kimi's [3, 31, 59] from [0, 3, 31]. (The first lab, 12 layers at hidden
    # 128, verified at 1.6-2.2x a plain step: 8-row matmuls are compute-bound there.)
    # What-if variants: `lab build --set ... --out DIR`.
    "default": dict(
        seed=0, max_train_chars=3_000_000, max_heldout_chars=400_000, vocab_size=4096,
        hidden_size=96, num_layers=24, num_heads=2, num_kv_heads=1, intermediate_size=288,
        seq_len=128, target_steps=600, target_batch=16, target_lr=4e-3,
        gen_sequences=512, prompt_tokens=32, gen_tokens=96, corpus_sequences=64,
        draft_steps=500, draft_batch=8, draft_lr=4e-3, ttt_steps=7, teacher="argmax",
        draft_intermediate_size=512, draft_vocab_fraction=0.5, eval_windows=48,
        accept_prompts=24, accept_prompt_tokens=64, accept_new_tokens=128,
    ),
}

# Settings a build may set (`lab build --set`) that the presets leave out, with their
# defaults: absent from a preset's config, so they do not change its cache key.
OPTIONAL_SETTINGS: dict[str, object] = {"skip_data_tables": False, "plain_draft_steps": None}

# Not part of the cache key: how the build runs, not what it builds.
DEFAULT_THREADS = 1  # tiny models: 2 threads gain little idle and lose a lot when shared


def preset_config(preset: str, overrides: dict | None = None) -> dict:
    if preset not in PRESETS:
        raise EagleLabError(f"unknown lab preset {preset!r} (choose from {', '.join(PRESETS)})")
    cfg = dict(PRESETS[preset], preset=preset)
    unknown = set(overrides or {}) - set(cfg) - set(OPTIONAL_SETTINGS)
    if unknown:
        raise EagleLabError(f"unknown lab settings: {', '.join(sorted(unknown))}")
    cfg.update(overrides or {})
    for key, default in OPTIONAL_SETTINGS.items():
        if cfg.get(key, default) == default:
            cfg.pop(key, None)  # a default optional setting leaves the cache key as it was
    return cfg


def parse_settings(items) -> dict:
    """`KEY=VALUE` strings (lab build --set) -> a dict; values as JSON when they parse
    (12, 0.004, true), else as strings."""
    out = {}
    for item in items or ():
        key, sep, value = str(item).partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key:
            raise EagleLabError(f"--set wants KEY=VALUE, got {item!r}")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def cache_key(cfg: dict, corpus_files: list[str] | None = None) -> str:
    blob = json.dumps({"cfg": cfg, "version": LAB_VERSION,
                       "files": _files_digest(corpus_files)}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _files_digest(files):
    if not files:
        return None
    h = hashlib.sha256()
    for f in files:
        p = Path(f)
        h.update(str(p).encode() + (p.read_bytes() if p.is_file() else b"?"))
    return h.hexdigest()


def draft_wirings(n: int) -> dict[str, dict]:
    """The seed story's three drafts (healthy, seed, no-ttt): boundaries trained on, ids written."""
    served_ids = [1, n // 2 - 1, n - 4]           # SpecForge default; SGLang serves id + 1
    return {
        "healthy": {"boundaries": [2, n // 2, n - 3], "aux_ids": served_ids, "ttt": True,
                    "role": "TTT, trained on SGLang's default boundaries"},
        "seed": {"boundaries": [0, 2, n // 2], "aux_ids": served_ids, "ttt": False,
                 "role": "the seed's pipeline: trained on [embedding, low, mid], no TTT; "
                         "its config ids say [1, N//2-1, N-4]"},
        "no-ttt": {"boundaries": [2, n // 2, n - 3], "aux_ids": served_ids, "ttt": False,
                   "role": "correct wiring, plain teacher forcing (k=1)"},
    }


def cpu_capability() -> str:
    """The CPU kernels PyTorch runs (AVX512, AVX2, DEFAULT, ...): a lab's weights depend on them,
    because training sums floats in the order those kernels choose (ATEN_CPU_CAPABILITY picks
    another set on the same machine)."""
    try:
        return str(torch.backends.cpu.get_cpu_capability())
    except Exception:  # noqa: BLE001 - an old or unusual torch build: say so rather than fail
        return "unknown"


WEIGHT_FILES = ("target/model.safetensors",) + tuple(f"drafts/{d}/model.safetensors" for d in DRAFT_NAMES)


def weights_digest(root: Path) -> dict[str, str]:
    """sha256 (16 hex digits) of each weights file of a built lab, by path inside the lab."""
    out = {}
    for rel in WEIGHT_FILES:
        path = Path(root) / rel
        if path.is_file():
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    return out


def rebuild_note(old: dict | None, new: dict) -> str | None:
    """How a rebuild of the same recipe compares with the lab it replaces, in one sentence
    (None when there was nothing to compare). Weights that differ are expected across CPU types:
    said so, never an error."""
    if not old or old.get("cache_key") != new.get("cache_key"):
        return None
    before, after = old.get("weights") or {}, new.get("weights") or {}
    was = (old.get("environment") or {}).get("cpu_capability", "not recorded")
    now = (new.get("environment") or {}).get("cpu_capability", "unknown")
    if not before:
        return (f"the lab it replaces recorded no weights digest (built with CPU capability {was}); "
                f"this build ran with {now}")
    if before == after:
        return f"byte-identical to the lab it replaces (CPU capability {now})"
    differing = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    if was == "not recorded":
        why = (f"the lab it replaces did not record its CPU kernels (this build ran with {now}): "
               "most likely built on a different CPU")
    elif was != now:
        why = f"built on a different CPU: this build ran with {now} kernels, the one it replaces with {was}"
    else:
        env_old, env_new = old.get("environment") or {}, new.get("environment") or {}
        changed = [f"{k} {env_old.get(k)} -> {env_new.get(k)}" for k in ("torch", "transformers", "python")
                   if env_old.get(k) != env_new.get(k)]
        why = ("same CPU capability " + now + (f", but {', '.join(changed)}" if changed else
                                              " and versions: a CPU of another model or microcode"))
    return (f"{why}; weights differ from the lab it replaces ({len(differing)} of {len(after)} files), "
            "so its measured figures differ from that lab's (compare them by their intervals)")


def manifest_path(root: Path) -> Path:
    return Path(root) / "manifest.json"


def is_current(root: Path, key: str) -> bool:
    """A finished build with this key (the manifest is written last)."""
    manifest = _read_manifest(root)
    if manifest is None:
        return False
    files = [root / "target" / "config.json"] + [root / "drafts" / d / "model.safetensors"
                                                  for d in DRAFT_NAMES]
    return manifest.get("cache_key") == key and all(f.is_file() for f in files)


def warn_if_corpus_changed(root: Path) -> None:
    from eagle3lab.lab.corpus import load_corpus

    manifest = json.loads(manifest_path(root).read_text())
    info = manifest.get("corpus", {})
    if not str(info.get("source", "")).startswith("stdlib"):
        return
    cfg = manifest["config"]
    now = load_corpus(max_train_chars=cfg["max_train_chars"],
                      max_heldout_chars=cfg["max_heldout_chars"],
                      skip_data_tables=bool(cfg.get("skip_data_tables", False))).fingerprint
    if now != info.get("fingerprint"):
        warnings.warn(f"lab {root.name}: built from stdlib fingerprint {info.get('fingerprint')} "
                      f"(Python {info.get('python')}); this interpreter's is {now}. Using the "
                      f"built lab as is (rebuild with --force to match).", stacklevel=2)


@contextlib.contextmanager
def build_lock(root: Path):
    """One build per folder at a time; others wait, then find it built."""
    import fcntl
    import tempfile

    root.parent.mkdir(parents=True, exist_ok=True)
    tag = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:12]
    with open(Path(tempfile.gettempdir()) / f"eagle3lab-build-{tag}.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def build_lab(preset: str = "ci", out=None, *, force: bool = False, progress: bool = True,
              overrides: dict | None = None, corpus_files: list[str] | None = None,
              threads: int | None = DEFAULT_THREADS, log=print) -> Path:
    """Build (or reuse) a lab; returns its folder."""
    cfg = preset_config(preset, overrides)
    if threads:
        previous = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            return build_lab(preset, out, force=force, progress=progress, overrides=overrides,
                             corpus_files=corpus_files, threads=None, log=log)
        finally:
            torch.set_num_threads(previous)
    root = Path(out) if out else lab_dir(preset)
    key = cache_key(cfg, corpus_files)
    with build_lock(root):
        if not force and is_current(root, key):
            log(f"lab {preset}: up to date in {root} (cache key {key})")
            return root
        with replacing_dir(root, ".building") as tmp:
            tmp.mkdir(parents=True)
            _build_into(tmp, cfg, key, corpus_files, progress, log)
            built = _read_manifest(tmp)
            note = rebuild_note(_read_manifest(root), built)
            if note:
                built["rebuild"] = note
                manifest_path(tmp).write_text(json.dumps(built, indent=2) + "\n")
    log(f"lab {preset}: built in {root}")
    if note:
        log(f"lab {preset}: {note}" + (" (`git checkout -- data/lab/" + preset + "` restores the shipped one)"
                                      if Path(root).resolve() == lab_dir(preset).resolve()
                                      and "differ" in note else ""))
    return root


def _read_manifest(root: Path) -> dict | None:
    try:
        return json.loads(manifest_path(root).read_text())
    except (OSError, ValueError):
        return None


class _Stopwatch:
    """Wall and CPU seconds per stage (CPU time shows what a busy machine hides)."""

    def __init__(self):
        self.timings: dict[str, float] = {}
        self.cpu: dict[str, float] = {}
        self.start = time.perf_counter()
        self.cpu_start = time.process_time()

    @contextlib.contextmanager
    def stage(self, name: str, log):
        t0, c0 = time.perf_counter(), time.process_time()
        log(f"[lab] {name} ...")
        yield
        self.timings[name] = round(time.perf_counter() - t0, 2)
        self.cpu[name] = round(time.process_time() - c0, 2)
        log(f"[lab] {name}: {self.timings[name]:.1f} s ({self.cpu[name]:.1f} CPU s)")


def _build_into(root: Path, cfg: dict, key: str, corpus_files, progress: bool, log) -> None:
    from eagle3lab.lab.corpus import heldout_snippets, load_corpus
    from eagle3lab.decoder.draft import Eagle3Draft, init_weights
    from eagle3lab.lab.evaluation import (evaluate_acceptance, evaluate_draft,
                                          greedy_continuations)
    from eagle3lab.lab.target import heldout_loss, make_target, round_to, train_target
    from eagle3lab.lab.tokenizer import encode_documents, save_tokenizer, train_tokenizer
    from eagle3lab.lab.training import DraftJob, train_drafts

    watch = _Stopwatch()
    torch.manual_seed(cfg["seed"])
    with watch.stage("corpus", log):
        corpus = load_corpus(corpus_files, max_train_chars=cfg["max_train_chars"],
                             max_heldout_chars=cfg["max_heldout_chars"],
                             skip_data_tables=bool(cfg.get("skip_data_tables", False)))
        snippets = heldout_snippets(corpus)
        with open(root / "heldout.jsonl", "w") as fh:
            for s in snippets:
                fh.write(json.dumps(s) + "\n")
    with watch.stage("tokenizer", log):
        tokenizer = train_tokenizer(corpus.train, cfg["vocab_size"])
        eos = tokenizer.eos_token_id
        train_docs = encode_documents(tokenizer, corpus.train)
        heldout_docs = encode_documents(tokenizer, corpus.heldout)
        stream = torch.tensor([t for doc in train_docs for t in doc + [eos]])
        save_tokenizer(tokenizer, root / "target")
    with watch.stage("target", log):
        target = make_target(len(tokenizer), hidden_size=cfg["hidden_size"],
                             num_layers=cfg["num_layers"], num_heads=cfg["num_heads"],
                             num_kv_heads=cfg["num_kv_heads"],
                             intermediate_size=cfg["intermediate_size"],
                             max_positions=max(1024, 4 * cfg["seq_len"]), eos_id=eos,
                             seed=cfg["seed"])
        target_hist = train_target(target, stream, steps=cfg["target_steps"],
                                   batch=cfg["target_batch"], seq_len=cfg["seq_len"],
                                   lr=cfg["target_lr"], seed=cfg["seed"], progress=progress)
        round_to(target, STORAGE_DTYPE)
        target.eval()
        _save_half(target, root / "target")
        target_loss = heldout_loss(target, heldout_docs, cfg["seq_len"])
        log(f"[lab] target held-out loss {target_loss:.3f} nats/token")
    with watch.stage("self-distillation data", log):
        sequences = distillation_sequences(target, stream, cfg, progress)
    n = cfg["num_layers"]
    wirings = draft_wirings(n)
    counts = torch.bincount(stream, minlength=len(tokenizer))
    draft_vocab = max(16, int(len(tokenizer) * cfg["draft_vocab_fraction"]))
    draft_vocab_ids = torch.sort(torch.argsort(counts, descending=True, stable=True)
                                 [:draft_vocab]).values
    jobs = []
    for name in DRAFT_NAMES:
        w = wirings[name]
        k = cfg["ttt_steps"] if w["ttt"] else 1
        torch.manual_seed(cfg["seed"] + 1)  # same init for every draft: only the recipe differs
        draft = Eagle3Draft.for_target(
            target.config, aux_layer_ids=w["aux_ids"], train_boundaries=w["boundaries"],
            draft_vocab_ids=draft_vocab_ids, ttt_steps=k,
            intermediate_size=cfg["draft_intermediate_size"],
            embed_weight=target.model.embed_tokens.weight,
            # train_seq_len: tokens per training sequence, recorded so the doctor can name it
            # (SpecForge and speculators write none into config.json: docs/sources.md section 7)
            extra={"target": "../../target", "preset": cfg["preset"], "role": w["role"],
                   "train_seq_len": int(sequences.shape[1])})
        init_weights(draft)
        # Drafts without TTT cost one unroll per step instead of ttt_steps; a what-if lab
        # can train them longer (`--set plain_draft_steps=1500`; default: draft_steps).
        n_steps = cfg["draft_steps"] if k > 1 else (cfg.get("plain_draft_steps") or cfg["draft_steps"])
        jobs.append(DraftJob(name, draft, w["boundaries"], k, steps=n_steps))
    with watch.stage("drafts", log):
        draft_hist = train_drafts(target, jobs, sequences, steps=cfg["draft_steps"],
                                  batch=cfg["draft_batch"], lr=cfg["draft_lr"],
                                  seed=cfg["seed"] + 2, progress=progress,
                                  teacher=cfg.get("teacher", "soft"))
        for job in jobs:
            round_to(job.draft, STORAGE_DTYPE)
            job.draft.save_pretrained(root / "drafts" / job.name, dtype=STORAGE_DTYPE)
    with watch.stage("evaluation", log):
        eval_docs = heldout_docs
        depth = cfg["ttt_steps"]
        drafts_info = {}
        for job in jobs:
            df = evaluate_draft(target, job.draft, eval_docs, depth=depth,
                                seq_len=cfg["seq_len"], max_windows=cfg["eval_windows"])
            drafts_info[job.name] = {
                "train_boundaries": job.boundaries, "aux_layer_ids": wirings[job.name]["aux_ids"],
                "ttt_steps": job.ttt_steps, "train_steps": job.steps,
                "role": wirings[job.name]["role"],
                "acc": [round(a, 4) for a in df["accuracy"]],
                "heldout_loss": [round(a, 4) for a in df["loss"]],
                "final_train_loss": round(draft_hist[job.name][-1]["loss"], 4),
                "size_bytes": _size(root / "drafts" / job.name)}
            log(f"[lab] {job.name:8s} acc@1..{depth} "
                + " ".join(f"{a:.2f}" for a in df["accuracy"]))
        seed = jobs[DRAFT_NAMES.index("seed")].draft
        served = list(served_by_lab(seed.aux_layer_ids, target.config.num_hidden_layers))
        df = evaluate_draft(target, seed, eval_docs, wiring=served, depth=depth,
                            seq_len=cfg["seq_len"], max_windows=cfg["eval_windows"])
        drafts_info["seed"]["as_served"] = {"wiring": served,
                                            "acc": [round(a, 4) for a in df["accuracy"]]}
        log(f"[lab] seed as served {served}: acc@1..{depth} "
            + " ".join(f"{a:.2f}" for a in df["accuracy"]))
    with watch.stage("acceptance", log):
        # the same prompts as Lab.heldout_prompts(n, prompt_tokens) gives the engine
        snippet_ids = encode_documents(tokenizer, [s["text"] for s in snippets])
        prompts = [ids[:cfg["accept_prompt_tokens"]] for ids in snippet_ids
                   if len(ids) >= cfg["accept_prompt_tokens"]][:cfg["accept_prompts"]]
        conts = greedy_continuations(target, prompts, cfg["accept_new_tokens"])
        for job in jobs:
            df = evaluate_acceptance(target, job.draft, prompts, depth=depth,
                                     continuations=conts)
            drafts_info[job.name]["accept_length"] = [round(a, 3) for a in df["accept_length"]]
            log(f"[lab] {job.name:8s} greedy chain accept length at depth 1..{depth} "
                + " ".join(f"{a:.2f}" for a in df["accept_length"]))
        df = evaluate_acceptance(target, seed, prompts, depth=depth, wiring=served,
                                 continuations=conts)
        drafts_info["seed"]["as_served"]["accept_length"] = [round(a, 3)
                                                             for a in df["accept_length"]]
        log("[lab] seed as served greedy chain accept length "
            + " ".join(f"{a:.2f}" for a in df["accept_length"]))
    manifest = {
        "lab_version": LAB_VERSION, "cache_key": key, "preset": cfg["preset"], "config": cfg,
        "seeds": {"target": cfg["seed"], "draft_init": cfg["seed"] + 1,
                  "draft_batches": cfg["seed"] + 2},
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "environment": {"python": sys.version.split()[0], "torch": torch.__version__,
                        "transformers": _version("transformers"),
                        "machine": platform.machine(), "threads": torch.get_num_threads(),
                        "cpus": os.cpu_count(), "cpu_capability": cpu_capability()},
        "corpus": corpus.summary() | {"train_tokens": int(stream.numel()),
                                      "heldout_tokens": sum(map(len, heldout_docs)),
                                      "heldout_snippets": len(snippets)},
        "tokenizer": {"vocab_size": len(tokenizer), "eos_token_id": eos},
        "target": {"num_layers": n, "hidden_size": cfg["hidden_size"],
                   "parameters": sum(p.numel() for p in target.parameters()),
                   "heldout_loss": round(target_loss, 4),
                   "final_train_loss": round(target_hist[-1]["loss"], 4),
                   "size_bytes": _size(root / "target")},
        "draft_vocab_size": draft_vocab,
        "distillation": {"sequences": int(sequences.shape[0]),
                         "tokens_per_sequence": int(sequences.shape[1])},
        "drafts": drafts_info,
        "timings_s": watch.timings | {"total": round(time.perf_counter() - watch.start, 2)},
        "cpu_s": watch.cpu | {"total": round(time.process_time() - watch.cpu_start, 2)},
        "size_bytes": _size(root),
        "weights": weights_digest(root),
    }
    manifest_path(root).write_text(json.dumps(manifest, indent=2) + "\n")


def distillation_sequences(target, stream, cfg, progress) -> torch.Tensor:
    """The target's own greedy continuations of corpus prompts, plus corpus windows."""
    from tqdm.auto import tqdm

    from eagle3lab.lab.target import greedy_continue, random_windows

    gen = torch.Generator().manual_seed(cfg["seed"] + 3)
    length = cfg["prompt_tokens"] + cfg["gen_tokens"]
    out = []
    chunk = 32
    n = cfg["gen_sequences"]
    for start in tqdm(range(0, n, chunk), desc="self-distill", disable=not progress):
        prompts = random_windows(stream, min(chunk, n - start), cfg["prompt_tokens"], gen)
        out.append(greedy_continue(target, prompts, cfg["gen_tokens"]))
    if cfg["corpus_sequences"]:
        out.append(random_windows(stream, cfg["corpus_sequences"], length, gen))
    return torch.cat(out)


def _save_half(model, path: Path) -> None:
    """save_pretrained a float16 copy (keeps the in-memory model float32)."""
    import copy

    half = copy.deepcopy(model).to(STORAGE_DTYPE)
    half.save_pretrained(str(path))


def _size(path: Path) -> int:
    path = Path(path)
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def _version(name: str) -> str:
    try:
        from importlib.metadata import version

        return version(name)
    except Exception:
        return "?"

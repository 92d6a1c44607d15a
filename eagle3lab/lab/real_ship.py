"""Build the real-model lab (`build_real_lab`) and write its shipped folder: drafts in their stored form, held-out data, measured figures.

Every figure in the manifest is measured here, on the drafts as stored (read back from the
folder being written): accept lengths at 1/1/2, 3/1/4 and 5/1/6 with 95 % intervals over held-out
prompts (replayed on the target's greedy responses), per-position rates, per-kind accept lengths,
accept length against training tokens (the snapshots), the lab engine's check that speculative
decoding equals plain greedy decoding and the replay, its speed-up at batch 1, and the target's
text-repetition share.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import torch

from eagle3lab.errors import EagleLabError
from eagle3lab.lab.build import _read_manifest, build_lock, rebuild_note
from eagle3lab.lab.real_build import (DEPTH, GROUPS, LAB_VERSION, PRESET, RECIPE, RECIPE_NOTES,
                                      draft_specs, draft_vocabulary, environment, recipe_key,
                                      response_records, round_trained, save_stored, train_group,
                                      weights_digest, work_dir)
from eagle3lab.paths import lab_dir, replacing_dir

def build_real_lab(out=None, *, groups=None, threads: int = 1, progress: bool = True,
                   log=print) -> Path | None:
    """Build (or resume) the real-model lab. `groups`: train only these (a parallel process
    per group); the shipped lab is written once every group is trained."""
    from eagle3lab.lab import smollm2

    torch.set_num_threads(threads)
    started = time.perf_counter()
    smollm2.ensure_target(log=log)
    target = smollm2.load_target()
    todo = list(groups or GROUPS)
    unknown = [g for g in todo if g not in GROUPS]
    if unknown:
        raise EagleLabError(f"unknown training group(s) {unknown} (choose from {', '.join(GROUPS)})")
    trained = {}
    for group in todo:
        trained[group] = train_group(target, group, log=log, progress=progress)
    if groups:
        log(f"[smollm2] trained group(s) {', '.join(todo)}")
        return None
    root = Path(out) if out else lab_dir(PRESET)
    with build_lock(root):
        with replacing_dir(root, ".building") as tmp:
            manifest = write_lab(tmp, target, trained, started=started, log=log, progress=progress)
            note = rebuild_note(_read_manifest(root), manifest)
            if note:
                manifest["rebuild"] = note
                (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
                log(f"[smollm2] {note}")
    log(f"[smollm2] lab written to {root}")
    return root


ENGINE_CHECK_PROMPTS = 4   # one per kind
SPEEDUP_PROMPTS = 8
SPEEDUP_NEW_TOKENS = 128
CURVE_DRAFTS = ("healthy", "no-ttt")  # accept length against training tokens (snapshots)


def write_lab(root: Path, target, trained: dict, *, started: float, log=print,
              progress: bool = True) -> dict:
    from eagle3lab.lab import chat_prompts, smollm2
    from eagle3lab.lab.real_lab import RealLab, interleave_kinds

    t0 = time.perf_counter()
    root.mkdir(parents=True)
    tokenizer = smollm2.load_tokenizer()
    prompts = chat_prompts.prompt_set()
    records = {m: response_records(target, tokenizer, m, log=log, progress=progress) for m in ("chat", "raw")}
    _write_prompts(root, prompts, records)
    vocab = {}
    for mode in ("chat", "raw"):
        ids, coverage = draft_vocabulary(records[mode], target.config.vocab_size, RECIPE["draft"]["vocab_size"])
        vocab[mode] = {"size": int(ids.numel()), "heldout_coverage": round(coverage, 4)}
    specs = draft_specs(target.config.num_hidden_layers)
    for group in trained.values():
        for name, draft in group["drafts"].items():
            round_trained(draft)
            save_stored(draft, root / "drafts" / name)
    (root / "manifest.json").write_text(json.dumps({"preset": PRESET, "partial": True, "target": {
        "num_layers": target.config.num_hidden_layers}}) + "\n")
    lab = RealLab(root)
    lab.__dict__["target"] = target
    drafts = {name: lab.load_draft(name) for name in specs}
    heldout = {m: interleave_kinds([r for r in records[m] if r["split"] == "heldout"]) for m in ("chat", "raw")}
    figures = measure(lab, drafts, heldout, tokenizer, log=log)
    tokens = {n: g["summary"]["training_tokens"] for g in trained.values() for n in g["drafts"]}
    figures["accept_vs_training_tokens"] = snapshot_curve(
        target, {n: drafts[n] for n in CURVE_DRAFTS}, heldout["chat"], tokens, log=log)
    training = {g: {"drafts": list(GROUPS[g]), **trained[g]["summary"],
                    "final": {n: h[-1] for n, h in trained[g]["history"].items() if h}}
                for g in trained}
    prov = smollm2.read_provenance(smollm2.default_target_dir()) or {}
    manifest = {
        "lab_version": LAB_VERSION, "preset": PRESET, "cache_key": recipe_key(), "recipe": RECIPE,
        "recipe_notes": RECIPE_NOTES,
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "environment": environment(),
        "target": {"name": "SmolLM2-135M-Instruct", "num_layers": target.config.num_hidden_layers,
                   "hidden_size": target.config.hidden_size, "vocab_size": target.config.vocab_size,
                   "parameters": sum(p.numel() for p in target.parameters()),
                   "provenance": prov, "weights_sha256": prov.get("weights_sha256")},
        "prompts": chat_prompts.summary(prompts) | {
            "responses": {m: _response_stats(records[m]) for m in records}},
        "draft_vocabulary": vocab,
        "drafts": {name: {"data": s["data"], "train_boundaries": s["boundaries"], "aux_layer_ids": s["aux_ids"],
                          "ttt_steps": RECIPE["draft"]["ttt_steps"] if s["ttt"] else 1, "role": s["role"],
                          "group": next(g for g, ns in GROUPS.items() if name in ns),
                          "stored_bytes": sum(f.stat().st_size for f in (root / "drafts" / name).iterdir())}
                   for name, s in specs.items()},
        "training": training,
        **figures,
        "timings_s": {"training": {g: t["summary"]["train_s"] for g, t in trained.items()},
                      "evaluation": round(time.perf_counter() - t0, 1),
                      "this_run": round(time.perf_counter() - started, 1)},
        "weights": weights_digest(root),
    }
    (root / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def _write_prompts(root: Path, prompts, records) -> None:
    from eagle3lab.lab.real_lab import interleave_kinds

    with open(root / "prompts.jsonl", "w") as fh:
        for p in prompts:
            fh.write(json.dumps({"id": p.id, "kind": p.kind, "split": p.split, "text": p.text}) + "\n")
    text = {p.id: p.text for p in prompts}
    raw = {r["id"]: r for r in records["raw"]}
    with open(root / "heldout.jsonl", "w") as fh:
        for r in interleave_kinds([r for r in records["chat"] if r["split"] == "heldout"]):
            fh.write(json.dumps({"id": r["id"], "kind": r["kind"], "text": text[r["id"]],
                                 "chat": {"prompt_ids": r["prompt_ids"], "response_ids": r["response_ids"]},
                                 "raw": {"prompt_ids": raw[r["id"]]["prompt_ids"],
                                         "response_ids": raw[r["id"]]["response_ids"]}}) + "\n")


def _response_stats(records) -> dict:
    out = {}
    for split in ("train", "heldout"):
        rs = [r for r in records if r["split"] == split]
        out[split] = {"prompts": len(rs), "response_tokens": sum(len(r["response_ids"]) for r in rs),
                      "prompt_tokens": sum(len(r["prompt_ids"]) for r in rs),
                      "stopped": sum(bool(r.get("stopped")) for r in rs)}
    return out


def measure(lab, drafts: dict, heldout: dict, tokenizer, *, log=print) -> dict:
    """The replayed acceptance rows, the engine check, the speed-up and the repetition share."""
    from eagle3lab.lab.real_eval import (Row, by_kind, capture_records, engine_check,
                                         greedy_agreement, repetition_share_ids, replay_steps,
                                         speedup, summarize, teacher_forced_accuracy)

    target = lab.target
    served = [2, 15, 27]   # SGLang's +1 rule on ids [1, 14, 26]
    rows = [Row("healthy", drafts["healthy"], served), Row("no-ttt", drafts["no-ttt"], served),
            Row("seed (as served)", drafts["seed"], served),
            Row("seed (as trained)", drafts["seed"], drafts["seed"].train_boundaries),
            Row("no-template", drafts["no-template"], served),
            Row("healthy without d2t", drafts["healthy"], served, use_d2t=False)]
    log("[smollm2] capturing the held-out chat prompts")
    chat = capture_records(target, heldout["chat"], [0, 2, 15, 27])
    agreement = {"chat": greedy_agreement(chat)}
    steps = replay_steps(rows, chat, DEPTH)
    acceptance = summarize(steps)
    accuracy = teacher_forced_accuracy(rows[:5], chat, DEPTH)
    kinds = by_kind(steps, DEPTH)
    del chat
    log("[smollm2] capturing the held-out raw prompts")
    raw = capture_records(target, heldout["raw"], [2, 15, 27])
    agreement["raw"] = greedy_agreement(raw)
    raw_rows = [Row("healthy on raw prompts", drafts["healthy"], served),
                Row("no-template on raw prompts", drafts["no-template"], served)]
    raw_steps = replay_steps(raw_rows, raw, DEPTH)
    acceptance |= summarize(raw_steps)
    del raw
    for label, entry in acceptance.items():
        log(f"[smollm2] {label:28s} " + "  ".join(
            f"{s} {entry[s]['accept_length']:.2f} {entry[s]['ci95']}" for s in ("1/1/2", "3/1/4", "5/1/6")))
    check_records = _one_per_kind(heldout["chat"], ENGINE_CHECK_PROMPTS)
    check_steps = steps[steps["request"].isin([heldout["chat"].index(r) for r in check_records])].copy()
    check_steps["request"] = check_steps["request"].map(
        {heldout["chat"].index(r): i for i, r in enumerate(check_records)})
    log("[smollm2] lab engine check (speculative vs plain vs replay)")
    check = engine_check(lab, drafts["healthy"], check_records, check_steps, "healthy")
    log(f"[smollm2] engine check: {check}")
    prompts = [r["prompt_ids"] for r in heldout["chat"][:SPEEDUP_PROMPTS]]
    log("[smollm2] speed-up on the lab engine (healthy, 5/1/6, batch 1, interleaved)")
    speed = {}
    for spec in ((5, 1, 6), (3, 1, 4)):
        load_before = list(os.getloadavg())
        run = speedup(lab, drafts["healthy"], prompts, spec, SPEEDUP_NEW_TOKENS)
        run["load_average_before"] = [round(x, 2) for x in load_before]
        run["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
        speed[run["spec"]] = run
        log(f"[smollm2] speed-up at {run['spec']}: {run['speedup']} {run.get('speedup_ci95')} "
            f"(accept length {run['accept_length']}, lossless {run['lossless']})")
    repetition = {m: repetition_share_ids([r["response_ids"] for r in heldout[m]], tokenizer)
                  for m in ("chat", "raw")}
    return {"acceptance": acceptance, "acceptance_by_kind": kinds, "teacher_forced_accuracy": accuracy,
            "heldout": {"chat_prompts": len(heldout["chat"]), "raw_prompts": len(heldout["raw"]),
                        "responses_equal_float32_argmax": agreement},
            "engine_check": check, "speedup": speed, "repetition": repetition}


def _one_per_kind(records, n):
    seen, out = set(), []
    for r in sorted(records, key=lambda r: len(r["prompt_ids"]) + len(r["response_ids"])):
        if r["kind"] not in seen:
            seen.add(r["kind"])
            out.append(r)
    return out[:n]


def snapshot_curve(target, drafts: dict, records: list[dict], trained_tokens: dict, *,
                   log=print) -> dict:
    """Accept length at 5/1/6 (with its interval) of every draft snapshot taken during training,
    by training tokens (response tokens seen, epochs counted), ending with the shipped draft."""
    from safetensors.torch import load_file

    from eagle3lab.lab.real_eval import Row, capture_records, replay_steps, summarize

    folder = work_dir() / "snapshots"
    captured = capture_records(target, records, [0, 2, 15, 27])
    curve = {}
    for name, draft in drafts.items():
        points = []
        for mark in RECIPE["snapshots"]:
            path = folder / f"{name}-{mark}.safetensors"
            if not path.is_file():
                continue
            snap = _with_state(draft, load_file(str(path)))
            entry = summarize(replay_steps([Row(name, snap, _wiring(name, draft))], captured, DEPTH))[name]
            points.append({"training_tokens": mark, **entry["5/1/6"]})
        final = summarize(replay_steps([Row(name, draft, _wiring(name, draft))], captured, DEPTH))[name]
        points.append({"training_tokens": trained_tokens[name], "shipped": True, **final["5/1/6"]})
        curve[name] = points
        log(f"[smollm2] {name} accept length by training tokens: "
            + ", ".join(f"{p['training_tokens']}: {p['accept_length']:.2f}" for p in points))
    return curve


def _wiring(name: str, draft) -> list[int]:
    return [2, 15, 27] if name != "seed" else list(draft.train_boundaries)


def _with_state(draft, state: dict):
    import copy

    snap = copy.deepcopy(draft)
    snap.load_state_dict({k: v.float() for k, v in state.items()}, strict=False)
    return snap.eval()

"""Speculation under load (notebook 05): measured on vLLM in the run, or the stored sweeps of
data/load/ with their provenance."""

from __future__ import annotations

from eagle3lab.experiments.shared import bench_prompts


LOAD_DIR = "load"  # under data/: stored load sweeps, each with a provenance manifest beside it


def stored_load_sweeps(directory=None) -> list[dict]:
    """The load sweeps stored in data/load/: per file its rows and the provenance manifest
    (`<name>.json`: command, date, machine, engine) that says where its figures come from.
    A file without a manifest, or an unreadable line, is a counted skip, never a traceback."""
    import json
    from pathlib import Path

    import pandas as pd

    from eagle3lab.serving import loadtest
    from eagle3lab.paths import DATA_DIR

    folder = Path(directory) if directory else DATA_DIR / LOAD_DIR
    out = []
    for path in sorted(folder.glob("*.jsonl")) if folder.is_dir() else []:
        manifest = path.with_suffix(".json")
        try:
            meta = json.loads(manifest.read_text())
        except (OSError, json.JSONDecodeError):
            meta = None
        rows = loadtest.load_points(path)
        out.append({"name": path.stem, "path": path, "frame": pd.DataFrame(rows), "provenance": meta,
                    "skipped": meta is None})
    return out


def under_load(lab: str = "default", backend: str = "lab", drafts=("healthy", "seed"), ks=(3, 6),
               levels=(1, 2, 4, 8), num_prompts: int = 16, max_new_tokens: int = 64, live: bool = False) -> dict:
    """Notebook 05's "under load": speed-up against concurrency, the crossover and the cost models.

    On vLLM (``backend="vllm"`` or ``live``) each draft is measured in this run: one server per
    (draft, k) and one without speculation serve every concurrency, interleaved (``loadsweep``);
    the lab's seed-like draft is served with the ids that feed its trained boundaries (its fix on
    vLLM). The lab server serves one request at a time, so on the lab backend nothing is measured:
    the stored vLLM sweeps of data/load/ are shown with their provenance instead."""
    from eagle3lab import engines
    from eagle3lab.serving import loadsweep
    from eagle3lab.errors import EagleLabError

    engine = engines.get(backend)
    if engine.observes_acceptance_via != "/metrics" and not live:
        try:
            engines.get("vllm").python()
            vllm = True
        except EagleLabError:
            vllm = False
        stored = [s for s in stored_load_sweeps() if (s["provenance"] or {}).get("lab") == lab]
        why = ("the lab server serves one request at a time: it has no batch to load"
               if engine.serves_one_request_at_a_time else
               f"this notebook launches vLLM for it; for {backend} servers already running, `eagle3lab sweep "
               "--url URL --url BASELINE_URL --grid concurrency=1,2,4,8 --baseline` measures it")
        return {"measured": False, "stored": stored, "lab": lab, "backend": backend, "vllm_available": vllm,
                "why": why}
    from eagle3lab.engines.vllm import experiments as experiments_vllm
    from eagle3lab.lab import load_lab
    from eagle3lab.paths import lab_dir

    root = lab_dir(lab)
    layers = load_lab(lab, progress=False).num_layers
    prompts = bench_prompts(lab, num_prompts, backend="vllm")
    frames = []
    for draft in drafts:
        grid = {"num_steps": list(ks), "concurrency": list(levels)}
        draft_dir = root / "drafts" / draft
        if draft != "healthy":  # the seed-like draft after its fix: ids that feed its trained boundaries
            grid["draft_layer_ids"] = [",".join(map(str, experiments_vllm.fix_ids(draft_dir, layers)))]
        frame = loadsweep.sweep(grid, prompts, backend="vllm", model_path=root / "target", draft_path=draft_dir,
                                baseline=True, max_new_tokens=max_new_tokens, progress=True)
        frames.append(frame.assign(draft=draft))
    import pandas as pd

    return {"measured": True, "frame": pd.concat(frames, ignore_index=True), "prompts": len(prompts),
            "max_new_tokens": max_new_tokens}


def load_groups(result) -> list[tuple[str, str, object]]:
    """(draft, origin, rows) per load sweep of an ``under_load`` result: measured in this run, or
    stored with its provenance (a stored sweep without a manifest is left out)."""
    from eagle3lab.spec import VLLM_VERSION

    if result.get("measured"):
        origin = (f"vLLM {VLLM_VERSION} (CPU build), measured in this run: {result['prompts']} prompts per window, "
                  f"{result['max_new_tokens']} new tokens")
        return [(draft, origin, rows) for draft, rows in result["frame"].groupby("draft", sort=False)]
    groups = []
    for stored in result.get("stored", []):
        meta = stored["provenance"]
        if meta is None or not len(stored["frame"]):
            continue
        origin = (f"{meta.get('engine', 'vLLM')}, measured on {meta.get('date', '?')} on {meta.get('machine', '?')} "
                  f"by `{meta.get('command', '?')}` (stored in data/load/{stored['name']}.jsonl; not re-measured "
                  "in this run)")
        groups.append((meta.get("draft", stored["name"]), origin, stored["frame"]))
    return groups


def load_figures(result) -> list:
    """One speed-up-vs-concurrency figure per (draft, k) of an ``under_load`` result: measured
    decode and total speed-ups with the two cost models' predictions."""
    from eagle3lab.serving import loadsweep
    from eagle3lab.viz import plots

    figures = []
    for draft, origin, rows in load_groups(result):
        if "baseline_itl_s" not in rows:
            continue
        for config, mine in loadsweep.by_config(rows):
            model = loadsweep.load_cost_model(mine.to_dict("records"))
            if model["status"] != "ok":
                continue
            k = config.get("num_steps", model["rows"][0]["draft_tokens"])
            stored = "" if result.get("measured") else " (stored)"
            figures.append(plots.load_speedup(model, mine.to_dict("records"),
                                              title=f"The lab's {draft.split(' (')[0]} draft, k = {k}, on vLLM{stored}"))
    return figures


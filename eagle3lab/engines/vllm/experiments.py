"""The notebooks' experiments on vLLM (``BACKEND="vllm"``): what each lab switch means on a real
engine that serves checkpoints as they are, what vLLM runs for the seed's flag sets, which target
states it feeds the draft (measured in the running vLLM), and served runs read back from its
``/metrics``. `eagle3lab.experiments` dispatches here; everything returns tidy DataFrames (or an
`experiments.ServedRun`).

Why a room of its own: on vLLM three of the seed's questions have other answers. It has no
num_steps/topk/num_draft_tokens triple (one number, ``num_speculative_tokens``, a chain); an aux
id is a boundary and id 0 is the embedding, so the embedding needs no patch, the fix is the ids;
and its per-position counters are unconditional (docs/vllm.md).
"""

from __future__ import annotations

import json
from pathlib import Path

from eagle3lab.engines.vllm import launch as vllm_launch
from eagle3lab.spec import SpecConfig
from eagle3lab.errors import EagleLabError
from eagle3lab.engines.vllm.env import VLLM_VERSION

VLLM_SERVE = f"vllm=={VLLM_VERSION}"

# What the lab's wiring switches mean on vLLM. The lab emulates SGLang feeding the seed's draft;
# vLLM reads the same checkpoint with its own rule: "config" serves the draft's ids as written,
# "trained" rewrites them (a temporary copy of config.json) to ids that feed the trained boundaries.
WIRING_ON_VLLM = {"wiring-seed": "config", "no-embed-patch": "config", "embed-patch": "trained"}


class VllmExperimentError(EagleLabError):
    """A notebook setting that has no meaning on vLLM."""


def draft_record(draft_dir) -> dict:
    """A draft's config.json (ids, provenance) without loading its weights."""
    path = Path(draft_dir) / "config.json"
    if not path.is_file():
        raise VllmExperimentError(f"draft {draft_dir} has no config.json")
    return json.loads(path.read_text())


def config_ids(draft_dir) -> list[int] | None:
    """The aux ids vLLM reads: top level first, else nested (gpu_model_runner.py
    `_get_eagle3_aux_layers_from_config`, vllm 0.32.0)."""
    cfg = draft_record(draft_dir)
    ids = cfg.get("eagle_aux_hidden_state_layer_ids") or \
        (cfg.get("eagle_config") or {}).get("eagle_aux_hidden_state_layer_ids")
    return None if ids is None else [int(i) for i in ids]


def trained_boundaries(draft_dir) -> list[int] | None:
    """The boundaries the draft was trained on, where its config records them (lab drafts do)."""
    rec = draft_record(draft_dir).get("eagle3lab") or {}
    return None if rec.get("train_boundaries") is None else [int(b) for b in rec["train_boundaries"]]


def fed_boundaries(draft_dir, num_layers: int, ids=None) -> list[int]:
    """The boundaries vLLM feeds for `ids` (default: the draft's own), by conventions' rule."""
    from eagle3lab.wiring import conventions

    ids = config_ids(draft_dir) if ids is None else list(ids)
    key = "top_level" if draft_record(draft_dir).get("eagle_aux_hidden_state_layer_ids") and ids is None \
        else "eagle_config"
    return list(conventions.serve_boundaries("vllm", VLLM_VERSION, "LlamaForCausalLM", ids, num_layers,
                                             key=key))


def fix_ids(draft_dir, num_layers: int) -> list[int]:
    """The ids that make vLLM feed the trained boundaries (`conventions.ids_for`)."""
    from eagle3lab.wiring import conventions

    trained = trained_boundaries(draft_dir)
    if trained is None:
        raise VllmExperimentError(f"{draft_dir} records no training boundaries: give the ids yourself")
    return list(conventions.ids_for(trained, "vllm", VLLM_VERSION, "LlamaForCausalLM", num_layers))


def layer_ids_for(faults, draft_dir, num_layers: int) -> list[int] | None:
    """The ids to serve the draft with on vLLM for the lab faults a notebook names: None keeps the
    draft's own (`wiring-seed`: the seed's ids as vLLM reads them), `embed-patch` the ids that
    feed the trained boundaries. Any other fault is a lab switch: an error that says so."""
    faults = [f for f in (faults or ()) if f]
    other = [f for f in faults if f not in WIRING_ON_VLLM]
    if other:
        raise VllmExperimentError(f"faults {other} are switches of the lab engine; vLLM serves the "
                                  "checkpoints as they are (run them with BACKEND='lab')")
    if any(WIRING_ON_VLLM[f] == "trained" for f in faults):
        return fix_ids(draft_dir, num_layers)
    return None


# --------------------------------------------------------------------------- 01: what vLLM runs

def serve_args(cfg: SpecConfig, target_dir, draft_dir):
    """vllm_rules.VllmServeArgs for one SpecConfig, as `server.launch(backend="vllm")` passes it
    on this machine (max model length 512, see vllm_launch.VLLM_CPU_ARGS)."""
    from eagle3lab.serving import server
    from eagle3lab.engines.vllm import vllm_rules

    argv = vllm_launch.build_vllm_command(target_dir, draft_dir, cfg, gpu=server.has_gpu())[3:]
    return vllm_rules.parse_vllm_flags(argv)


def resolve_flag_sets(flag_sets: dict, target_dir, draft_dir):
    """One row per labelled SpecConfig: the vLLM flags eagle3lab passes for it, what vLLM 0.32
    runs (`vllm_rules`, replaying create_engine_config) and what it changes without asking."""
    import pandas as pd

    from eagle3lab.engines.vllm import flags as vllm_flags
    from eagle3lab.engines.vllm import vllm_rules

    rows = []
    for label, cfg in flag_sets.items():
        row = {"flag set": label, "asked steps/topk/draft": (cfg.num_steps, cfg.topk, cfg.num_draft_tokens)}
        try:
            spec = vllm_flags.vllm_speculative_config(cfg, draft_dir)
        except EagleLabError as exc:
            rows.append({**row, "num_speculative_tokens": None, "num_draft_tokens": None,
                         "changed": True, "silent changes": [], "refused": str(exc)})
            continue
        res = vllm_rules.resolve_vllm_serve(serve_args(cfg, target_dir, draft_dir))
        k = res.num_speculative_tokens
        silent = [f"{name}: {was} -> {now} ({why})" for name, was, now, why in res.changes]
        rows.append({**row, "vllm flags": json.dumps({"num_speculative_tokens": spec["num_speculative_tokens"]}),
                     "num_speculative_tokens": k, "num_draft_tokens": None if k is None else k + 1,
                     "draft max_model_len": res.draft_max_model_len,
                     "max_num_batched_tokens": res.max_num_batched_tokens,
                     "changed": (cfg.num_draft_tokens is not None and k is not None
                                 and cfg.num_draft_tokens != k + 1) or res.differs,
                     "silent changes": silent, "refused": res.error})
    return pd.DataFrame(rows).set_index("flag set")


def check_flag_sets(flag_sets: dict, target_dir, draft_dir, python=None):
    """eagle3lab's vLLM rules against the installed vLLM's own EngineArgs(...).create_engine_config,
    one row per flag set (runs on CPU in a subprocess of the vLLM venv)."""
    from eagle3lab.engines.vllm import vllm_rules

    args = [serve_args(cfg, target_dir, draft_dir) for cfg in flag_sets.values()]
    frame, version = vllm_rules.compare_with_vllm(args, python=python)
    frame.index = list(flag_sets)
    frame.index.name = "flag set"
    return frame.drop(columns=["argv"]).assign(vllm_version=version)


# --------------------------------------------------------------------------- 02: what vLLM feeds

def capture_table(lab, draft: str = "seed", python=None):
    """For the draft's own ids and the fix ids: the boundaries SGLang (newest read) and vLLM feed by
    eagle3lab's rules, and what the running vLLM captures, read from the loaded model
    (`vllm_reference` "capture": aux_hidden_state_layers and the tensors its forward appends)."""
    import tempfile

    import pandas as pd

    from eagle3lab.wiring import conventions
    from eagle3lab.engines.vllm import reference as vllm_reference
    from eagle3lab.spec import LATEST_SGLANG

    draft_dir = Path(draft) if Path(str(draft)).is_dir() else servable_draft(lab, draft)
    n = lab.num_layers
    sets = {"the draft's ids": config_ids(draft_dir), "ids that feed the trained boundaries": fix_ids(draft_dir, n)}
    with tempfile.TemporaryDirectory(prefix="eagle3lab-capture-") as tmp:
        dirs = [vllm_reference.draft_copy(draft_dir, Path(tmp) / str(i), nested=ids)
                for i, ids in enumerate(sets.values())]
        prompt = lab.heldout_prompts(1, 16)[0]
        out = vllm_reference.run_job({"job": "capture", "target": str(lab.target_dir), "drafts": dirs,
                                      "prompt": [int(t) for t in prompt]}, python=python)
    rows = []
    for (label, ids), real in zip(sets.items(), out["drafts"]):
        ours = fed_boundaries(draft_dir, n, ids)
        rows.append({"ids": label, "config ids": ids,
                     f"SGLang {LATEST_SGLANG} feeds": list(conventions.serve_boundaries(
                         "sglang", LATEST_SGLANG, "LlamaForCausalLM", ids, n))
                     if min(ids) >= 0 else None,
                     f"vLLM {VLLM_VERSION} feeds (rule)": ours,
                     "vLLM captures (measured)": real.get("captured"),
                     "max |diff| to transformers": max((d for d in real.get("max_abs_diff_to_hf") or [] if d is not None),
                                                       default=None),
                     "agree": real.get("captured") == ours,
                     "trained on": trained_boundaries(draft_dir), "error": real.get("error")})
    return pd.DataFrame(rows).set_index("ids")


def wirings(lab, draft: str = "seed") -> dict:
    """label -> ids for notebook 03 on vLLM: the draft's own ids, and the ids that feed what it
    was trained on (the fix on vLLM: no patch, other ids)."""
    draft_dir = lab.draft_dir(draft)
    n = lab.num_layers
    own, fixed = config_ids(draft_dir), fix_ids(draft_dir, n)
    return {f"the draft's ids {own} (vLLM feeds {fed_boundaries(draft_dir, n)})": None,
            f"ids {fixed} (vLLM feeds {fed_boundaries(draft_dir, n, fixed)}, as trained)": fixed}


# --------------------------------------------------------------------------- measuring

def servable_draft(lab, name: str) -> Path:
    """The folder vLLM loads for lab draft `name`: the toy labs store complete checkpoints; the
    real lab stores only the trained tensors, so its draft is materialized (`real_lab.materialize_draft`,
    cached) with the LM head, d2t and t2d a server needs."""
    from eagle3lab.lab.real_lab import RealLab, materialize_draft

    return materialize_draft(lab, name) if isinstance(lab, RealLab) else lab.draft_dir(name)


def launch_spec(point: dict, lab, draft_dir=None) -> tuple:
    """(draft folder or None, launch spec) for one notebook point on vLLM: the lab draft by name,
    the wiring faults turned into ids (`layer_ids_for`), explicit `draft_layer_ids` kept."""
    point = dict(point)
    if point.get("baseline"):
        return None, {}
    name = point.pop("draft", None)
    draft = Path(draft_dir) if draft_dir is not None else servable_draft(lab, name or "healthy")
    faults = point.pop("fault", None) or ()
    faults = faults.split(",") if isinstance(faults, str) else list(faults)
    ids = point.pop("draft_layer_ids", None)
    if ids is None:
        ids = layer_ids_for(faults, draft, lab.num_layers)
    spec = {k: v for k, v in point.items() if k in ("num_steps", "topk", "num_draft_tokens") and v is not None}
    if ids is not None:
        spec["draft_layer_ids"] = list(ids)
    return draft, spec


def launch_all(points: dict, lab, stack, model_path=None, draft_dir=None, vllm_python=None) -> dict:
    """label -> (url, info) for a no-speculation vLLM server and one per point, started together
    (start-up is mostly imports and waiting) and stopped by `stack`."""
    from concurrent.futures import ThreadPoolExecutor

    from eagle3lab.serving import server
    from eagle3lab.spec import BASELINE, chain

    model_path = model_path or lab.target_dir
    everything = {BASELINE: {"baseline": True}, **points}
    plans = {label: launch_spec(p, lab, draft_dir) for label, p in everything.items()}  # errors first

    def start(label):
        draft, spec = plans[label]
        return server.launch("vllm", model_path, draft, spec=spec, vllm_python=vllm_python)

    with ThreadPoolExecutor(max_workers=min(len(plans), 4)) as pool:
        futures = {label: pool.submit(start, label) for label in plans}
    launched, error = {}, None
    for label, future in futures.items():
        try:
            srv = stack.enter_context(future.result())
        except Exception as exc:  # noqa: BLE001 - keep entering the others, so the stack stops them
            error = error or exc
            continue
        k = plans[label][1].get("num_steps")
        launched[label] = (srv.url, {"speculative_num_draft_tokens": None if k is None else chain(k)[2]})
    if error is not None:
        raise error
    return launched


def serve_and_observe(lab, prompts, draft: str = "seed", faults=(), spec: SpecConfig | None = None, max_new_tokens: int = 64, eval_texts: int = 8,
                      vllm_python=None, **_):
    """Serve `spec` on vLLM with the lab draft (wiring faults as ids), benchmark the notebooks'
    prompts (`experiments.bench_prompts`), and read it back (`experiments.ServedRun`'s fields): the /metrics window (unconditional per-position counters, with the
    per-request histograms for intervals), the server's log, and the draft's standalone accuracy."""
    from eagle3lab.serving import server
    from eagle3lab.lab import evaluate_draft
    from eagle3lab.serving import loadtest
    from eagle3lab.sources.logfile import read_log

    spec = spec or SpecConfig()
    draft_dir, launch = launch_spec({"draft": draft, "fault": list(faults), **spec.given()}, lab)
    # room for the longest prompt (the real lab's long-context chat prompts pass the CPU default 512)
    model_len = vllm_launch.max_model_len_for([len(p) for p in prompts], max_new_tokens,
                                              int(launch.get("num_steps") or 0))
    extra = [] if str(model_len) == dict(vllm_launch.VLLM_CPU_ARGS)["--max-model-len"] else \
        ["--max-model-len", str(model_len)]
    # vLLM logs its SpecDecoding metrics line every VLLM_LOG_STATS_INTERVAL s (vllm/envs.py, 10 s by
    # default): once a second, so a short benchmark leaves lines in the log to read back
    with server.launch("vllm", lab.target_dir, draft_dir, spec=launch, vllm_python=vllm_python,
                       extra_args=extra, env={"VLLM_LOG_STATS_INTERVAL": "1"}) as srv:
        obs, result = loadtest.observe_metrics(srv, prompts, max_new_tokens=max_new_tokens,
                                           requested=spec.given())
        log = read_log(srv.log_path, engine="vllm")
    served = lab.load_draft(draft)
    acc = evaluate_draft(lab, served, lab.eval_sequences(eval_texts), wiring=served.train_boundaries,
                         depth=int(obs.effective["num_steps"]))
    info = {"speculative_num_draft_tokens": obs.effective["num_draft_tokens"],
            "draft_layer_ids": launch.get("draft_layer_ids")}
    return dict(observation=obs, log=log, prompt_text=lab.tokenizer.decode(prompts[0]),
                     prompt_texts=[lab.tokenizer.decode(p) for p in prompts],
                     standalone_acc=acc["accuracy"].tolist(), server_info=info)


def chain_grid(grid) -> tuple[list, list]:
    """(chains vLLM can serve, trees it cannot) of a (steps, topk, draft tokens) grid: vLLM's
    EAGLE-3 drafts a chain of num_speculative_tokens."""
    chains = [g for g in grid if g[1] == 1]
    return chains, [g for g in grid if g[1] != 1]

"""Experiments the notebooks and the CLI share: the seed's flag sets, measuring a set of
configurations on fresh servers, serving and reading a log back, fault and configuration sweeps.
Each returns a tidy DataFrame (or a `ServedRun`); prose lives in `eagle3lab.prose`, figures in
`eagle3lab.plots`. Every lab measurement goes through `eagle3lab.measurements.lab_bench`: inside
a report it is read from (or measured into) the report's store, so one configuration gives one
set of figures in every notebook; elsewhere it is `engine.run_bench` as before.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from eagle3lab import stats
from eagle3lab.spec import SpecConfig
from eagle3lab.stats import rate_ci, ratio_ci

if TYPE_CHECKING:
    from eagle3lab.sources.observation import Observation
from eagle3lab.spec import LATEST_SGLANG

# The seed's three launch configurations, in the order the investigator tried them (the flags
# it typed are `cfg.to_flags()`).
SEED_FLAG_SETS: dict[str, SpecConfig] = {
    "seed: steps 1, topk 1, 16 draft tokens": SpecConfig(num_steps=1, topk=1, num_draft_tokens=16),
    "steps 15, topk 1, 16 draft tokens": SpecConfig(num_steps=15, topk=1, num_draft_tokens=16),
    "steps 5, topk 1, 6 draft tokens": SpecConfig(num_steps=5, topk=1, num_draft_tokens=6),
}


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
    """Decode budget for a lab preset; a None override keeps the preset's value."""
    base = dict(BUDGETS.get(lab, BUDGETS["default"]))
    base.update({k: v for k, v in overrides.items() if v is not None})
    return base


def sglang_source_copy(sglang_dir=None, dest=None):
    """Copy the files the embedding patch reads from an sglang package (default: the installed
    one) into ``dest/sglang``, so notebooks can patch and diff without touching it.

    Without ``dest`` the copy goes to a fresh temporary folder that is removed when the
    interpreter (the notebook's kernel) exits: a notebook uses the copy across cells, so no
    ``with`` block can hold it, and a copy per run must not pile up in the temp dir."""
    import atexit
    import shutil
    import tempfile
    from pathlib import Path

    from eagle3lab import patching

    source = patching.find_sglang_dir(sglang_dir)
    if dest is None:
        dest = tempfile.mkdtemp(prefix="eagle3lab-sglang-")
        atexit.register(shutil.rmtree, dest, ignore_errors=True)
    root = Path(dest) / "sglang"
    for name in patching.WHEEL_FILES:
        rel = name.split("/", 1)[1]
        if (source / rel).is_file():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source / rel, root / rel)
    return root


def capture_before_after(sglang_dir, lab_layers: int, seed_layers: int = 61):
    """The boundaries SGLang's setter selects for the seed's fixed ids, before and after the
    patch, for the lab's Llama target and the seed's DeepSeek-V3-style target.

    A boundary of -1 in the result is an id that matches no layer: that tensor is never captured.
    """
    import shutil
    import tempfile
    from pathlib import Path

    import pandas as pd

    from eagle3lab import patching
    from eagle3lab.engine.faults import seed_fix_ids

    cases = [("llama", "lab target (Llama)", lab_layers, seed_fix_ids(lab_layers)),
             ("deepseek_v2", "seed target (DeepSeek-V3 style)", seed_layers, [-1, 2, 30])]
    rows = []
    with tempfile.TemporaryDirectory(prefix="eagle3lab-sglang-patched-") as tmp:
        patched = Path(tmp) / "sglang"
        shutil.copytree(sglang_dir, patched)
        patching.apply(patched)
        for model, target, layers, ids in cases:
            row = {"model file": patching.TARGET_FILES[model], "target": target, "layers": layers,
                   "draft ids": ids}
            for label, tree in (("before patch", sglang_dir), ("after patch", patched)):
                try:
                    row[label] = patching.layers_to_capture(tree, model, ids, layers)
                except patching.PatchError as exc:
                    row[label] = f"n/a ({exc})"
            rows.append(row)
    return pd.DataFrame(rows)


# The seed's target and ids (DeepSeek-V3-style Kimi-K2.5, 61 layers): the ids its draft config
# carried, the ids its fix wrote, and the boundaries its training fed ([embedding, layer 3's
# input, layer 31's input]), as notebook 02 reads them.
SEED_ARCH, SEED_LAYERS = "DeepseekV3ForCausalLM", 61
SEED_CONFIG_IDS, SEED_FIX_IDS, SEED_TRAINED = [2, 30, 58], [-1, 2, 30], [0, 3, 31]


def _fed(version: str, ids, patched: bool, arch: str = SEED_ARCH, layers: int = SEED_LAYERS):
    """Boundaries SGLang `version` feeds for `ids` (eagle3lab.conventions), or a short failure."""
    from eagle3lab import conventions

    try:
        return list(conventions.serve_boundaries("sglang", version, arch, ids, layers, patched=patched))
    except (conventions.ConventionError, conventions.CaptureError) as exc:
        return getattr(exc, "short", None) or str(exc).split(":")[0]


def _working_ids(version: str, trained, arch: str = SEED_ARCH, layers: int = SEED_LAYERS) -> list[str]:
    """Draft ids that make SGLang `version` feed exactly `trained` (boundary 0 first)."""
    rest = list(trained[1:])
    candidates = [([0, *[b - 1 for b in rest]], False), ([0, *rest], False),
                  ([-1, *[b - 1 for b in rest]], True), ([-1, *rest], True)]
    out = []
    for ids, patched in candidates:
        if _fed(version, ids, patched, arch, layers) == list(trained):
            out.append(f"{ids}" + (" with the patch" if patched else " (no patch)"))
    return out or ["none"]


def seed_ids_by_version(versions=None, trained=SEED_TRAINED, config_ids=SEED_CONFIG_IDS,
                        fix_ids=SEED_FIX_IDS):
    """Per SGLang version (consecutive versions with the same outcome grouped): what the seed's
    config ids and its fixed ids feed on its DeepSeek-V3-style target, whether the fix feeds the
    boundaries training used, and which ids would (rules: eagle3lab.conventions, read in each
    version's srt/models/deepseek_v2.py)."""
    import pandas as pd

    from eagle3lab import engines
    from eagle3lab.spec import parse_version

    versions = list(versions or [v for v in engines.get("sglang").capture_versions
                                 if parse_version(v) >= (0, 5, 5)])
    rows = []
    for v in versions:
        fix = _fed(v, fix_ids, True)
        row = {f"config ids {config_ids} feed": _fed(v, config_ids, False),
               f"fix {fix_ids} (patched) feeds": fix,
               f"fix = trained {list(trained)}": fix == list(trained),
               "ids that feed the trained boundaries": "; ".join(_working_ids(v, trained))}
        key = tuple(str(x) for x in row.values())
        if rows and rows[-1][1] == key:
            rows[-1][0].append(v)
        else:
            rows.append(([v], key, row))
    out = [{"SGLang": vs[0] if len(vs) == 1 else f"{vs[0]} – {vs[-1]}", **row} for vs, _, row in rows]
    return pd.DataFrame(out).set_index("SGLang")


def lab_analog(trained_lab, trained=SEED_TRAINED, fed=None):
    """The lab's boundaries shifted slot by slot as `fed` is shifted from `trained` on the seed."""
    fed = fed if fed is not None else _fed("0.5.23", SEED_FIX_IDS, True)
    return [b + (f - t) for b, f, t in zip(trained_lab, fed, trained)]


def measure_wirings(wirings: dict, lab: str, spec=(5, 1, 6), draft: str = "seed", num_prompts: int = 4,
                    max_new_tokens: int = 64, **_):
    """The lab draft `draft` served with each labelled set of boundaries (label -> boundaries),
    same prompts, speculation interleaved with plain decoding: one row per wiring."""
    import pandas as pd

    from eagle3lab import measurements
    from eagle3lab.engine.faults import FaultPlan, build_engine
    from eagle3lab.lab import load_lab

    lab_obj = load_lab(lab, progress=False)
    draft_model = lab_obj.load_draft(draft)
    rows = []
    for label, boundaries in wirings.items():
        plan = FaultPlan(draft_name=draft, layer_ids=[b - 1 for b in boundaries])
        engine = build_engine(lab_obj.target, draft_model, plan)
        result = measurements.lab_bench(lab_obj, spec, engine=engine, plan=plan,
                                        prompts=bench_prompts(lab_obj, num_prompts),
                                        max_new_tokens=max_new_tokens)
        rows.append({**_bench_row(result, wiring=label), "boundaries": list(engine.boundaries),
                     "draft": draft})
    return pd.DataFrame(rows).set_index("wiring")


def cost_ratio(run=None, default: float = 0.1) -> float:
    """Draft-step cost relative to a target step, measured by a run when it has one. When the run
    measured none, `default` is an assumption, and a warning says so (a speed-up curve drawn from
    it is a what-if, not a measurement)."""
    import warnings

    value = getattr(run, "cost_ratio", None) if run is not None else None
    if value:
        return float(value)
    warnings.warn(f"no draft/target step cost was measured{' by this run' if run is not None else ''}: "
                  f"assuming a draft step costs {default:g} of a target step", stacklevel=2)
    return default


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


def resolve_flag_sets(flag_sets: dict, version: str = LATEST_SGLANG, arch: str = "LlamaForCausalLM",
                      use_sglang: bool = False):
    """One row per labelled SpecConfig: what was asked, what SGLang runs, its warnings and our
    findings."""
    import pandas as pd

    from eagle3lab import config

    asked_all = list(flag_sets.values())
    version = version or LATEST_SGLANG
    if use_sglang:  # one subprocess for all flag sets: importing SGLang takes a while
        resolved = config.resolve_with_sglang(asked_all, version=version, arch=arch)
    else:
        resolved = [a.resolve(engine="sglang", version=version, arch=arch) for a in asked_all]
    rows = []
    for label, asked, res in zip(flag_sets, asked_all, resolved):
        rows.append({"flag set": label,
                     "asked steps/topk/draft": (asked.num_steps, asked.topk, asked.num_draft_tokens),
                     "num_steps": res.num_steps, "topk": res.topk,
                     "num_draft_tokens": res.num_draft_tokens, "changed": res.differs,
                     "warnings": list(res.warnings),
                     "findings": [f.code for f in res.findings], "source": res.source})
    return pd.DataFrame(rows).set_index("flag set")


def compare_resolutions(ours, sglang):
    """Side by side: eagle3lab's rules and SGLang's resolver, with an `agree` column."""
    import pandas as pd

    cols = ["num_steps", "topk", "num_draft_tokens"]
    out = pd.DataFrame({"eagle3lab": [tuple(r) for r in ours[cols].itertuples(index=False)],
                        "sglang": [tuple(r) for r in sglang[cols].itertuples(index=False)],
                        "same warnings": [sorted(a) == sorted(b) for a, b in
                                          zip(ours["warnings"], sglang["warnings"])]},
                       index=ours.index)
    out["agree"] = (out["eagle3lab"] == out["sglang"]) & out["same warnings"]
    return out


from eagle3lab.spec import BASELINE  # noqa: E402  (the label plots and sweeps share)


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


def _tidy(frame, labels: list[str]):
    """loadtest.sweep's rows as one row per label (baseline first)."""
    import pandas as pd

    rows = []
    for (_, row), label in zip(frame.iterrows(), labels):
        rows.append({
            "run": label,
            "asked steps/topk/draft": None if label == BASELINE else tuple(
                _int(row.get(k)) for k in ("asked_num_steps", "asked_topk", "asked_num_draft_tokens")),
            "draft tokens run": _int(row.get("server_num_draft_tokens", row.get("effective_num_draft_tokens"))),
            "tokens_per_s": row.get("tokens_per_s"),
            "accept_length": row.get("accept_length"),
            "speedup": row.get("speedup"),
            "completion_tokens": row.get("completion_tokens"),
            "failed": bool(row.get("failed", False)),
            "error": row.get("error"),
        })
    return pd.DataFrame(rows).set_index("run")


def measure_points(points: dict, lab: str, backend: str = "lab", server_url: str | None = None,
                   target_dir=None, draft_dir=None, num_prompts: int = 4,
                   max_new_tokens: int = 64, repeats: int = 1, **_):
    """Benchmark labelled points (dicts of loadtest.sweep keys) plus a no-speculation baseline;
    or just the server at `server_url` as it runs.

    On the lab every point's server runs at once and the prompts go to them interleaved (see
    `measure_interleaved`), so each speed-up is a paired ratio with an interval. With
    backend="sglang" (one GPU) the servers run one after the other, as loadtest.sweep does.

    Inside a report (a measurement store is active, `eagle3lab.measurements`) the lab's points
    are read from, or measured into, the report's store (`stored_points`), so a configuration
    another notebook measured gives the same row here.

    Returns one row per run: tokens/s, accept length, speed-up over the baseline.
    """
    import pandas as pd

    from eagle3lab import engines, loadtest, measurements, server
    from eagle3lab.paths import lab_dir

    engine = engines.get(backend)
    if server_url:
        prompts = bench_prompts(lab, num_prompts, backend="sglang")
        info = server.connect(server_url).server_info()
        result = loadtest.run(server_url, prompts, max_new_tokens=max_new_tokens, progress=False)
        s = result.summary()
        return pd.DataFrame([{"run": f"{server_url} as running",
                              "draft tokens run": info.get("speculative_num_draft_tokens"),
                              "tokens_per_s": s["tokens_per_s"], "accept_length": s["accept_length"],
                              "speedup": float("nan"), "completion_tokens": s["completion_tokens"],
                              "failed": s["failed"], "error": s["error"]}]).set_index("run")
    if engine.in_process and target_dir is None and draft_dir is None and measurements.active() is not None:
        return stored_points(points, lab, num_prompts=num_prompts, max_new_tokens=max_new_tokens)
    model_path = target_dir or lab_dir(lab) / "target"
    if engine.in_process or (engine.servers_at_once and not server.has_gpu()):
        # vLLM's CPU build: a few servers fit in memory at once, so measure them interleaved too
        return measure_interleaved(points, lab, model_path=model_path, draft_dir=draft_dir,
                                   num_prompts=num_prompts, max_new_tokens=max_new_tokens,
                                   repeats=repeats, backend=backend)
    grid = []
    for label, point in points.items():
        point = dict(point)
        if not engine.patchable:  # no embedding patch: wiring faults become ids (launch_spec)
            from eagle3lab.engines.vllm import experiments as experiments_vllm
            from eagle3lab.lab import load_lab

            draft, spec = experiments_vllm.launch_spec(point, load_lab(lab, progress=False), draft_dir)
            point = {**spec, "draft": str(draft)}
        else:
            point.pop("fault", None)  # lab switches: a real engine serves the checkpoints as they are
            name = point.pop("draft", None)
            if draft_dir is None and name is not None:  # DRAFT_DIR=None: the lab's draft of that name
                point["draft"] = str(lab_dir(lab) / "drafts" / name)
        grid.append({"label": label, **point})
    prompts = bench_prompts(lab, num_prompts, backend=backend)
    frame = loadtest.sweep(grid, prompts, max_new_tokens=max_new_tokens, backend=backend,
                        model_path=model_path, draft_path=draft_dir, baseline=True, progress=False)
    labels = [BASELINE if row.get("asked_baseline") is True else row.get("asked_label")
              for _, row in frame.iterrows()]
    return _tidy(frame, labels)


def stored_points(points: dict, lab: str, num_prompts: int = 4, max_new_tokens: int = 64):
    """`measure_points`' table for lab points, from the report's measurement store: each point is
    the lab engine (the one the lab server runs) at the configuration SGLang's rules make
    effective, with the point's draft and faults, on the notebooks' shared prompts; the baseline
    row is the stored no-speculation run those speed-ups divide by."""
    import dataclasses

    import pandas as pd

    from eagle3lab import measurements
    from eagle3lab.engine import make_lab_engine
    from eagle3lab.lab import load_lab

    lab_obj = load_lab(lab, progress=False)
    prompts = bench_prompts(lab_obj, num_prompts)
    rows, base = [], None
    for label, point in points.items():
        faults = point.get("fault") or []
        faults = faults.split(",") if isinstance(faults, str) else list(faults)
        name = point.get("draft")
        engine, plan = make_lab_engine(lab_obj, faults, draft=lab_obj.load_draft(name) if name else None)
        plan = dataclasses.replace(plan, draft_name=name) if name else plan
        asked = SpecConfig(**{k: point.get(k) for k in ("num_steps", "topk", "num_draft_tokens")})
        res = asked.resolve(engine="sglang", version=LATEST_SGLANG)
        row = _bench_row(measurements.lab_bench(lab_obj, res.to_engine_params(), faults, engine=engine,
                                                plan=plan, prompts=prompts, max_new_tokens=max_new_tokens))
        base = base or {"run": BASELINE, "draft tokens run": None,
                        "tokens_per_s": row["baseline_tokens_per_s"],
                        "tokens_per_s_ci95": row["baseline_tokens_per_s_ci95"], "accept_length": float("nan"),
                        "accept_length_ci95": None, "speedup": 1.0, "speedup_ci95": None,
                        "prompts": row["prompts"], "requests": row["prompts"], "failed": False}
        rows.append({"run": label, "draft tokens run": res.num_draft_tokens,
                     **{k: row[k] for k in ("tokens_per_s", "tokens_per_s_ci95", "accept_length",
                                            "accept_length_ci95", "speedup", "speedup_ci95", "prompts")},
                     "requests": row["prompts"], "failed": False})
    return pd.DataFrame([base, *rows]).set_index("run")


def _point(cfg: SpecConfig, faults, draft) -> dict:
    """A loadtest.sweep point for a config served with lab faults and a lab draft."""
    return {"algorithm": cfg.algorithm, **cfg.given(), "fault": list(faults), "draft": draft}


def _lab_servers(points: dict, model_path, draft_dir, stack):
    """label -> (url, server info) for a no-speculation server and one lab server per point."""
    from eagle3lab import loadtest, server

    from concurrent.futures import ThreadPoolExecutor

    def start(point):
        draft = None if point.get("baseline") else loadtest._lab_draft(point.get("draft", draft_dir), model_path)
        return server.launch("lab", model_path, draft, spec=loadtest._point_spec(point, "lab"),
                             extra_args=LAB_SERVER_ARGS)

    everything = {BASELINE: {"baseline": True}, **points}
    with ThreadPoolExecutor(max_workers=len(everything)) as pool:  # start-up is mostly waiting
        futures = {label: pool.submit(start, point) for label, point in everything.items()}
    launched, error = {}, None
    for label, future in futures.items():
        try:
            srv = stack.enter_context(future.result())
            launched[label] = (srv.url, srv.server_info())
        except Exception as exc:  # noqa: BLE001 - keep entering the others, so the stack stops them
            error = error or exc
    if error is not None:
        raise error
    return launched


def measure_interleaved(points: dict, lab: str, model_path=None, draft_dir=None, num_prompts: int = 4,
                        max_new_tokens: int = 64, repeats: int = 1, backend: str = "lab",
                        batch: int = 3):
    """Every point on its own lab server, all running at once; each prompt goes to every server
    in turn (the order rotates from prompt to prompt), `repeats` times over.

    Why: servers measured one after the other see different machine load, so a ratio of two
    such runs mixes the configuration with the moment it ran. Here each prompt gives a paired
    measurement, and the intervals (over prompts) say what the differences are worth.
    backend="vllm" (CPU build): the same with vLLM servers, at most `batch` points (and their own
    no-speculation server) at a time, since each takes a few GiB.
    """
    import pandas as pd

    from eagle3lab import engines

    if engines.get(backend).servers_at_once and len(points) > batch:
        items = list(points.items())
        parts = [measure_interleaved(dict(items[i:i + batch]), lab, model_path, draft_dir, num_prompts,
                                     max_new_tokens, repeats, backend, batch)
                 for i in range(0, len(items), batch)]
        return pd.concat([parts[0]] + [p.drop(index=BASELINE) for p in parts[1:]])
    frame, infos = _interleaved_requests(points, lab, model_path, draft_dir, num_prompts, max_new_tokens,
                                         repeats, backend)
    return interleaved_table(frame, infos)


def _interleaved_requests(points, lab, model_path, draft_dir, num_prompts, max_new_tokens, repeats,
                          backend):
    """(per-request rows, label -> server info): every server up at once, prompts in turn."""
    import contextlib

    import pandas as pd

    from eagle3lab import engines, loadtest

    engine = engines.get(backend)
    prompts = bench_prompts(lab, num_prompts)
    api = engine.api
    rows = []
    with contextlib.ExitStack() as stack:
        if engine.takes_faults:
            servers = _lab_servers(points, model_path, draft_dir, stack)
        else:  # vLLM: the lab's faults become draft ids (experiments_vllm.launch_spec)
            from eagle3lab.engines.vllm import experiments as experiments_vllm
            from eagle3lab.lab import load_lab

            servers = experiments_vllm.launch_all(points, load_lab(lab, progress=False), stack,
                                                  model_path=model_path, draft_dir=draft_dir)
        labels = list(servers)
        turn = 0
        for r in range(max(1, int(repeats))):
            for i, prompt in enumerate(prompts):
                order = labels[turn % len(labels):] + labels[:turn % len(labels)]
                turn += 1
                for label in order:
                    result = loadtest.run(servers[label][0], [prompt], max_new_tokens=max_new_tokens,
                                          progress=False, api=api)
                    for req in result.requests.itertuples():
                        rows.append({"run": label, "prompt": i, "repeat": r, "ok": bool(req.ok),
                                     "tokens": req.completion_tokens, "seconds": req.latency_s,
                                     "verify": _float(getattr(req, "spec_verify_ct", None))})
    return pd.DataFrame(rows), {label: info for label, (_, info) in servers.items()}


def interleaved_table(frame, infos: dict | None = None):
    """One row per run from per-request rows (run, prompt, tokens, seconds[, verify]): tokens/s,
    accept length and speed-up over the baseline, each with a 95 % interval over prompts."""
    import pandas as pd

    infos = infos or {}
    per_prompt = (frame[frame["ok"]].groupby(["run", "prompt"], sort=False)
                  [["tokens", "seconds", "verify"]].sum(min_count=1).reset_index())
    base = per_prompt[per_prompt["run"] == BASELINE].set_index("prompt")
    rows = []
    for label in dict.fromkeys(frame["run"]):
        mine = per_prompt[per_prompt["run"] == label].set_index("prompt")
        failed = mine.empty
        tps = float(mine["tokens"].sum() / mine["seconds"].sum()) if not failed else float("nan")
        row = {"run": label,
               "draft tokens run": _int(infos.get(label, {}).get("speculative_num_draft_tokens"))
               if label != BASELINE else None,
               "tokens_per_s": tps, "tokens_per_s_ci95": rate_ci(mine["tokens"], mine["seconds"]),
               "accept_length": float("nan"), "accept_length_ci95": None,
               "speedup": float("nan"), "speedup_ci95": None,
               "prompts": int(len(mine)), "requests": int((frame["run"] == label).sum()),
               "completion_tokens": int(mine["tokens"].sum()) if not failed else 0,
               "failed": failed}
        verify = mine["verify"].astype(float) if "verify" in mine else None
        if label != BASELINE and verify is not None and verify.notna().all() and verify.sum() > 0:
            row["accept_length"] = stats.accept_length_of_counts(mine["tokens"].sum(), verify.sum())
            row["accept_length_ci95"] = rate_ci(mine["tokens"], verify, digits=3, bounds=(1, None))
        if len(base) and not failed:
            both = mine.join(base.add_suffix("_base"), how="inner")
            row["speedup"] = float((both["tokens"].sum() / both["seconds"].sum())
                                   / (both["tokens_base"].sum() / both["seconds_base"].sum()))
            if label != BASELINE:
                row["speedup_ci95"] = ratio_ci(both["tokens"], both["seconds"], both["tokens_base"],
                                               both["seconds_base"])
        rows.append(row)
    return pd.DataFrame(rows).set_index("run")


def measure_flag_sets(flag_sets: dict, lab: str, faults=(), draft: str = "seed", **kwargs):
    """The seed's flag sets (label -> SpecConfig), measured (see `measure_points`)."""
    points = {label: _point(cfg, faults, draft) for label, cfg in flag_sets.items()}
    return measure_points(points, lab, **kwargs)


def measure_variants(variants: dict, spec: SpecConfig, lab: str, draft: str = "seed", **kwargs):
    """One configuration served with different fault sets (label -> faults), measured."""
    points = {label: _point(spec, faults, draft) for label, faults in variants.items()}
    return measure_points(points, lab, **kwargs)


def fix_labels(backend: str = "lab") -> tuple[str, str]:
    """Notebook 03's two variants, named for the engine: on SGLang (and the lab, which emulates
    it) the fix is the embedding patch; on vLLM it is other ids (`experiments_vllm.WIRING_ON_VLLM`)."""
    from eagle3lab import engines

    if not engines.follows(backend).patchable:
        return ("the draft's own ids (wiring-seed on vLLM)",
                "ids that feed the trained boundaries (the fix on vLLM, no patch)")
    return "before the fix (wiring-seed)", "with the embedding patch (embed-patch)"


def load_target(target_dir=None, lab=None):
    """(model, tokenizer) of a transformers target: the directory given, else the lab's."""
    if target_dir is None:
        return lab.target, lab.tokenizer
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(target_dir, torch_dtype="auto").eval()
    return model, AutoTokenizer.from_pretrained(target_dir)


@dataclass
class ServedRun:
    """A served configuration read back: its `Observation` (on the lab, the engine's step
    records for the same prompts: per-position acceptance needs them, SGLang logs only the
    mean accept length; else the server log), the log itself, and what the notebook shows."""

    observation: Observation
    log: Any                     # the server log, read_log's frame
    tokens: Any = None           # one row per generated token (lab engine)
    prompt_text: str | None = None
    prompt_texts: list | None = None
    standalone_acc: list | None = None
    server_info: dict = field(default_factory=dict)

    @property
    def num_steps(self) -> int:
        obs = self.observation
        return int(obs.effective.get("num_steps") or obs.requested.get("num_steps") or 0)

    @property
    def effective_draft_tokens(self) -> int | None:
        return self.observation.effective.get("num_draft_tokens")

    @property
    def accept_length(self) -> float:
        value = self.observation.accept_length
        return float("nan") if value is None else value

    @property
    def per_position(self):
        """Conditional per-position acceptance with 95 % intervals (None when unknown). A source
        that counts unconditionally (vLLM's /metrics) is converted: from its per-request
        histograms where the server returned them (intervals kept), else from the counters."""
        obs = self.observation
        if obs.per_position is None or obs.conditional is not False:
            return obs.per_position
        if obs.frame is not None and len(obs.frame):
            return stats.per_position(obs.frame, k=len(obs.per_position), conditional=True)
        from eagle3lab.engines.vllm.metrics import conditional

        return conditional(obs)

    @property
    def per_position_unconditional(self):
        """P(at least i drafts accepted) per position, as vLLM counts (None when not counted so)."""
        obs = self.observation
        return obs.per_position if obs.conditional is False else None

    @property
    def steps(self):
        return self.observation.step_records

    @property
    def cost_ratio(self) -> float | None:
        return self.observation.costs.get("draft_over_target")

    @property
    def observed(self):
        """DataFrame(depth, accept_length[, speedup]) of this run, for depth plots."""
        import pandas as pd

        return pd.DataFrame({"depth": [self.num_steps], "accept_length": [self.accept_length]})

    @property
    def token_view(self):
        """The first request's generation, token by token (plots.token_view)."""
        return self.token_view_of()

    def token_view_of(self, sources=None, avoid=("encodings/",)):
        """One request's generation, token by token: the first whose prompt does not come from a
        held-out file under `avoid` (the lab's stdlib text starts with codec tables, which read as
        noise), with the file named in the title."""
        import pandas as pd

        from eagle3lab import plots

        if self.tokens is None or not len(self.tokens):
            return None
        requests = sorted(self.tokens["request"].unique())
        pick = requests[0]
        if sources:
            pick = next((r for r in requests if r < len(sources)
                         and not any(str(sources[r]).startswith(a) for a in avoid)), pick)
        first = self.tokens[self.tokens["request"] == pick]
        prompt_text = self.prompt_texts[pick] if self.prompt_texts and pick < len(self.prompt_texts) \
            else self.prompt_text
        where = f" (prompt: a passage of `{sources[pick]}` from Python's standard library)" \
            if sources and pick < len(sources) else ""
        kinds = {"prefill": "prompt", "draft": "accepted", "accepted": "accepted", "bonus": "bonus",
                 "replacement": "replaced", "target": "replaced"}
        rows = [] if prompt_text is None else [{"text": prompt_text, "kind": "prompt", "position": None}]
        rows += [{"text": r.text, "kind": kinds.get(r.kind, "replaced"),
                  "position": r.depth if r.depth else None} for r in first.itertuples()]
        return plots.token_view(pd.DataFrame(rows), title=f"Request {pick + 1}{where}: how each token "
                                                          "was produced")


def serve_and_log(log_file=None, server_url=None, lab: str = "default", draft: str = "seed",
                  faults=(), spec: SpecConfig | None = None, num_prompts: int = 4,
                  max_new_tokens: int = 64, eval_texts: int = 8, backend: str = "lab", **_) -> ServedRun:
    """Read a given log; or benchmark a running server and read `log_file`; or, on the lab,
    serve `spec` + `faults`, benchmark it, read its log back, and run the same prompts through
    the lab engine at the config the server reports it runs, for per-step statistics and the
    draft's standalone accuracy. `spec`: the SpecConfig asked for (what the log's effective
    config is compared with). backend="vllm": serve it on vLLM and read its /metrics
    (`experiments_vllm.serve_and_observe`)."""
    from eagle3lab import engines, loadtest, server
    from eagle3lab.errors import EagleLabError
    from eagle3lab.sources.lab import observe_lab
    from eagle3lab.sources.logfile import observe_log

    spec = spec or SpecConfig()
    if server_url or log_file:
        if server_url:
            if not log_file:
                raise EagleLabError("with SERVER_URL, also set LOG_FILE (the server's log, as a file "
                                    "this notebook can read) so the decode lines can be read back")
            prompts = bench_prompts(lab, num_prompts, backend="sglang")
            loadtest.run(server_url, prompts, max_new_tokens=max_new_tokens, progress=False)
        observation = observe_log(log_file, requested=spec)
        return ServedRun(observation, observation.frame)

    from eagle3lab import measurements
    from eagle3lab.lab import evaluate_draft, load_lab

    engine = engines.get(backend)
    lab_obj = load_lab(lab)
    if engine.observes_acceptance_via == "/metrics":
        from eagle3lab.engines.vllm import experiments as experiments_vllm

        return ServedRun(**experiments_vllm.serve_and_observe(
            lab_obj, bench_prompts(lab_obj, num_prompts), draft=draft, faults=faults, spec=spec,
            max_new_tokens=max_new_tokens, eval_texts=eval_texts))
    if not engine.in_process:
        raise EagleLabError(f"backend {backend!r}: serve_and_log launches 'lab' or 'vllm'; for SGLang "
                            "give SERVER_URL and LOG_FILE of your running server")
    prompts = bench_prompts(lab_obj, num_prompts)
    fault_flags = [a for f in faults for a in ("--fault", f)]
    with server.launch("lab", lab_obj.target_dir, lab_obj.draft_dir(draft), spec=spec,
                       extra_args=(*LAB_SERVER_ARGS, "--decode-log-interval", "8", *fault_flags)) as srv:
        info = srv.server_info()
        loadtest.run(srv.url, prompts, max_new_tokens=max_new_tokens, progress=False)
        logged = srv.observation(requested=spec)
    running = SpecConfig.from_server_info(info)  # resolved once, by the server; parsed back once
    result = measurements.lab_bench(lab_obj, running, list(faults), prompts=prompts,
                                    max_new_tokens=max_new_tokens)
    served_draft = lab_obj.load_draft(result.plan.draft_name)
    acc = evaluate_draft(lab_obj, served_draft, lab_obj.heldout_texts(eval_texts),
                         wiring=served_draft.train_boundaries, depth=running.num_steps)
    return ServedRun(observe_lab(result, requested=spec, warnings=logged.warnings), logged.frame,
                     tokens=result.tokens, prompt_text=lab_obj.tokenizer.decode(prompts[0]),
                     prompt_texts=[lab_obj.tokenizer.decode(p) for p in prompts],
                     standalone_acc=acc["accuracy"].tolist(), server_info=info)


from eagle3lab.engine.faults import SEED_AFTER_FIX  # noqa: E402  (the lab's seed after its fix)


def _bench_row(result, **extra) -> dict:
    """One tidy row from a LabBenchResult: speed, acceptance, conditional per-position."""

    s = result.summary()
    pp = stats.per_position(result.steps, k=result.spec.num_steps, conditional=True,
                                n_boot=200) \
        if len(result.steps) else None
    r = result.requests
    return {**extra, "draft": s["draft"], "num_steps": s["num_steps"], "topk": s["topk"],
            "num_draft_tokens": s["num_draft_tokens"], "prompts": int(len(r)),
            "accept_length": s["accept_length"], "accept_length_ci95": s["accept_length_ci95"],
            "tokens_per_s": s["tokens_per_s"],
            "tokens_per_s_ci95": rate_ci(r["spec_tokens"], r["spec_s"]),
            "baseline_tokens_per_s": s["baseline_tokens_per_s"],
            "baseline_tokens_per_s_ci95": rate_ci(r["base_tokens"], r["base_s"]),
            "speedup": s["speedup"],
            "speedup_ci95": ratio_ci(r["spec_tokens"], r["spec_s"], r["base_tokens"], r["base_s"]),
            "lossless": s["lossless"],
            "per_position": [] if pp is None else [round(float(v), 3) for v in pp["rate"]],
            "per_position_n": [] if pp is None else [int(v) for v in pp["n"]],
            "draft_over_target": s.get("draft_over_target")}


def fault_sweep(faults, lab: str, spec=(5, 1, 6), num_prompts: int = 4, max_new_tokens: int = 64,
                **_):
    """Each lab fault alone at the seed's configuration, plus the healthy draft (no fault) and
    the seed after its fix; the engine decodes the same held-out prompts with and without
    speculation, interleaved, so each row carries its own speed-up."""
    import pandas as pd
    from tqdm.auto import tqdm

    from eagle3lab import measurements
    from eagle3lab.engine import make_lab_engine
    from eagle3lab.lab import load_lab

    lab_obj = load_lab(lab, progress=False)
    cases = [("healthy (no fault)", [])] + [(f, [f]) for f in dict.fromkeys([SEED_AFTER_FIX, *faults])]
    rows = []
    for name, fault_list in tqdm(cases, desc="faults", leave=False, disable=True):
        engine, plan = make_lab_engine(lab_obj, fault_list)
        # the notebooks' shared prompts, except where the fault is about the prompts themselves
        prompts = None if plan.prompt_kinds else bench_prompts(lab_obj, num_prompts)
        result = measurements.lab_bench(lab_obj, spec, fault_list, engine=engine, plan=plan,
                                        n_prompts=num_prompts, prompts=prompts, max_new_tokens=max_new_tokens)
        rows.append(_bench_row(result, hypothesis=name))
    return pd.DataFrame(rows).set_index("hypothesis")


def closest_hypothesis(table, reference: str = SEED_AFTER_FIX) -> tuple[str, float]:
    """The hypothesis whose per-position profile is nearest the reference's (mean |difference|)."""
    import numpy as np

    ref = np.nan_to_num(np.asarray(table.loc[reference, "per_position"], dtype=float))
    best, best_d = None, float("inf")
    for name, row in table.drop(index=reference).iterrows():
        if name.startswith("healthy"):
            continue
        rates = np.nan_to_num(np.asarray(row["per_position"], dtype=float))
        n = min(len(rates), len(ref))
        d = float(np.mean(np.abs(rates[:n] - ref[:n]))) if n else float("inf")
        if d < best_d:
            best, best_d = name, d
    return best, best_d


def config_grid(chain_steps, trees) -> list[tuple[int, int, int]]:
    """(num_steps, topk, num_draft_tokens) points: chains at each depth, then the given trees."""
    return [(int(s), 1, int(s) + 1) for s in chain_steps] + [tuple(int(x) for x in t) for t in trees]


def config_sweep(grid, lab: str, draft: str = "healthy", urls=None, file=None, num_prompts: int = 4,
                 max_new_tokens: int = 64, version: str = LATEST_SGLANG, backend: str = "lab", **_):
    """Measure each configuration of `grid`: on the lab engine (healthy draft, interleaved
    baseline), spread over running servers (`urls`) with eagle3lab.loadtest.sweep, or on vLLM
    servers (backend="vllm": its chains, interleaved with no speculation; trees are left out,
    vLLM's EAGLE-3 drafts a chain)."""
    import pandas as pd

    from eagle3lab import engines
    from eagle3lab.spec import SpecConfig

    if engines.get(backend).drafts_chains_only and not urls:
        return _vllm_config_sweep(grid, lab, draft, num_prompts, max_new_tokens)

    if urls:
        from eagle3lab import loadtest

        points = [{"algorithm": "EAGLE3", "num_steps": s, "topk": t, "num_draft_tokens": d}
                  for s, t, d in grid]
        frame = loadtest.sweep(points, bench_prompts(lab, num_prompts, backend="sglang"),
                            max_new_tokens=max_new_tokens, urls=list(urls), out=file, progress=False,
                            baseline=True)
        if "skipped" in frame:  # points no running server runs (its settings are fixed)
            frame = frame[~frame["skipped"].eq(True)]
        is_base = frame["asked_baseline"].eq(True) if "asked_baseline" in frame else frame.index != frame.index
        base = frame[is_base]["tokens_per_s"].mean() if is_base.any() else float("nan")
        frame = frame[~is_base].rename(columns={
            "effective_num_steps": "num_steps", "effective_topk": "topk",
            "effective_num_draft_tokens": "num_draft_tokens"})
        return frame.assign(baseline_tokens_per_s=base)
    from eagle3lab import measurements
    from eagle3lab.engine import make_lab_engine
    from eagle3lab.lab import load_lab

    lab_obj = load_lab(lab, progress=False)
    faults = [] if draft == "healthy" else ["no-ttt"] if draft == "no-ttt" else [SEED_AFTER_FIX]
    engine, plan = make_lab_engine(lab_obj, faults)
    rows = []
    for s, t, d in grid:
        res = SpecConfig(num_steps=s, topk=t, num_draft_tokens=d).resolve(engine="sglang", version=version)
        result = measurements.lab_bench(lab_obj, res.to_engine_params(), faults, engine=engine, plan=plan,
                                        prompts=bench_prompts(lab_obj, num_prompts),
                                        max_new_tokens=max_new_tokens)
        rows.append(_bench_row(result, asked=(s, t, d), changed=res.differs))
    return pd.DataFrame(rows)


def _vllm_config_sweep(grid, lab, draft, num_prompts, max_new_tokens):
    """config_sweep's rows for vLLM: each chain of the grid on its own vLLM server."""
    from eagle3lab.engines.vllm import experiments as experiments_vllm

    chains, _ = experiments_vllm.chain_grid(grid)
    points = {f"{s}/{t}/{d}": {"num_steps": s, "draft": draft} for s, t, d in chains}
    table = measure_points(points, lab, backend="vllm", num_prompts=num_prompts,
                           max_new_tokens=max_new_tokens)
    base = table.loc[BASELINE, "tokens_per_s"] if BASELINE in table.index else float("nan")
    table = table.drop(index=BASELINE, errors="ignore")
    steps = [int(label.split("/")[0]) for label in table.index]
    return table.reset_index().assign(num_steps=steps, topk=1, num_draft_tokens=[s + 1 for s in steps],
                                      asked=[tuple(int(x) for x in label.split("/")) for label in table.index],
                                      changed=False, baseline_tokens_per_s=base, draft=draft,
                                      engine=experiments_vllm.VLLM_SERVE)


def chain_rows(sweep):
    """The chain (topk = 1) points of a sweep, as plots.throughput_vs_depth wants them."""
    chains = sweep[sweep["topk"] == 1].rename(columns={"num_steps": "depth"})
    return chains.sort_values("depth")


def per_position_table(table):
    """Conditional acceptance by draft position per row of a fault sweep, with the number of
    steps that reached each position (n): a long table, one row per (row, position)."""
    import pandas as pd

    rows = []
    for name, row in table.iterrows():
        ns = list(row.get("per_position_n") or [])
        for i, rate in enumerate(row["per_position"], start=1):
            rows.append({"hypothesis": name, "position": i, "rate": rate,
                         "n": ns[i - 1] if i <= len(ns) else None})
    long = pd.DataFrame(rows)
    wide = long.pivot(index="hypothesis", columns="position", values="rate")
    n = long.pivot(index="hypothesis", columns="position", values="n")
    out = wide.copy().astype(object)
    for c in wide.columns:
        out[c] = [("–" if r != r else f"{r:.2f}") + (f" (n={int(k)})" if k == k and k is not None else "")
                  for r, k in zip(wide[c], n[c])]
    out.columns = [f"position {c}" for c in wide.columns]
    return out.loc[list(dict.fromkeys(table.index))]


def speedup_table(sweep):
    """Each configuration of a sweep: accept length and speed-up with their intervals."""
    cols = ["num_steps", "topk", "num_draft_tokens", "accept_length", "accept_length_ci95",
            "speedup", "speedup_ci95"]
    out = sweep[[c for c in cols if c in sweep]].copy()
    return out.sort_values(["topk", "num_steps", "num_draft_tokens"]).reset_index(drop=True)


def warnings_table(resolved):
    """Each distinct engine warning once, with the flag sets that trigger it."""
    import pandas as pd

    seen: dict[str, list[str]] = {}
    for label, row in resolved.iterrows():
        for warning in row["warnings"]:
            seen.setdefault(warning, []).append(label)
    return pd.DataFrame({"SGLang warns": list(seen), "for": ["; ".join(v) for v in seen.values()]})


# --------------------------------------------------------------------------- under load (notebook 05)

LOAD_DIR = "load"  # under data/: stored load sweeps, each with a provenance manifest beside it


def stored_load_sweeps(directory=None) -> list[dict]:
    """The load sweeps stored in data/load/: per file its rows and the provenance manifest
    (`<name>.json`: command, date, machine, engine) that says where its figures come from.
    A file without a manifest, or an unreadable line, is a counted skip, never a traceback."""
    import json
    from pathlib import Path

    import pandas as pd

    from eagle3lab import loadtest
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
    from eagle3lab import engines, loadsweep
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
    from eagle3lab import loadsweep, plots

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

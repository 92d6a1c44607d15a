"""Measuring labelled configurations against no speculation: on the lab engine through the report's
measurement store, on lab or vLLM servers interleaved prompt by prompt, or on servers already
running. Each row carries its own paired baseline and the speed-up over it, with intervals."""

from __future__ import annotations

from eagle3lab.acceptance import stats
from eagle3lab.experiments.shared import (BASELINE, LAB_SERVER_ARGS, LATEST_SGLANG, _float, _int,
                                          bench_prompts)
from eagle3lab.spec import SpecConfig
from eagle3lab.acceptance.stats import rate_ci, ratio_ci


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

    Inside a report (a measurement store is active, `eagle3lab.serving.measurements`) the lab's points
    are read from, or measured into, the report's store (`stored_points`), so a configuration
    another notebook measured gives the same row here.

    Returns one row per run: tokens/s, accept length, speed-up over the baseline.
    """
    import pandas as pd

    from eagle3lab import engines
    from eagle3lab.serving import loadtest
    from eagle3lab.serving import measurements
    from eagle3lab.serving import server
    from eagle3lab.paths import lab_dir

    engine = engines.get(backend)
    if server_url:
        prompts = bench_prompts(lab, num_prompts, backend="sglang")
        srv = server.connect(server_url)
        info = srv.server_info()
        result, obs = loadtest.measure(srv, prompts, max_new_tokens=max_new_tokens, progress=False)
        s = result.summary()
        per_position = [] if obs is None or obs.per_position is None else \
            [round(float(r), 3) for r in obs.per_position["rate"]]
        return pd.DataFrame([{"run": f"{server_url} as running",
                              "draft tokens run": info.get("speculative_num_draft_tokens"),
                              "tokens_per_s": s["tokens_per_s"], "accept_length": s["accept_length"],
                              "accept_length_ci95": None if obs is None else obs.accept_length_ci95,
                              "per_position": per_position,
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
    effective, with the point's draft and faults, on the notebooks' shared prompts.

    Each configuration is decoded prompt by prompt beside its own no-speculation run, so each
    row carries the baseline its speed-up divides (`baseline_tokens_per_s`): there is no one
    baseline row, because no one baseline is what every speed-up divides."""
    import dataclasses

    import pandas as pd

    from eagle3lab.serving import measurements
    from eagle3lab.decoder import make_lab_engine
    from eagle3lab.lab import load_lab

    lab_obj = load_lab(lab, progress=False)
    prompts = bench_prompts(lab_obj, num_prompts)
    rows = []
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
        rows.append({"run": label, "draft tokens run": res.num_draft_tokens,
                     **{k: row[k] for k in PAIRED_COLUMNS}, "requests": row["prompts"], "failed": False})
    return pd.DataFrame(rows).set_index("run")


# What a measured row carries: its figures with intervals, and the paired baseline its speed-up divides.
PAIRED_COLUMNS = ("tokens_per_s", "tokens_per_s_ci95", "baseline_tokens_per_s", "baseline_tokens_per_s_ci95",
                  "speedup", "speedup_ci95", "accept_length", "accept_length_ci95", "prompts")


def _point(cfg: SpecConfig, faults, draft) -> dict:
    """A loadtest.sweep point for a config served with lab faults and a lab draft."""
    return {"algorithm": cfg.algorithm, **cfg.given(), "fault": list(faults), "draft": draft}


def _lab_servers(points: dict, model_path, draft_dir, stack):
    """label -> (url, server info) for a no-speculation server and one lab server per point."""
    from eagle3lab.serving import loadtest
    from eagle3lab.serving import server

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

    from eagle3lab import engines
    from eagle3lab.serving import loadtest

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
            row["baseline_tokens_per_s"] = float(both["tokens_base"].sum() / both["seconds_base"].sum())
            row["baseline_tokens_per_s_ci95"] = rate_ci(both["tokens_base"], both["seconds_base"])
            row["speedup"] = float((both["tokens"].sum() / both["seconds"].sum()) / row["baseline_tokens_per_s"])
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


def _interval(lo, hi):
    """[lo, hi] rounded, or None where no step reached the position (NaN)."""
    return None if lo != lo or hi != hi else [round(float(lo), 3), round(float(hi), 3)]


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
            "per_position_ci95": [] if pp is None else [_interval(lo, hi) for lo, hi in zip(pp["lo"], pp["hi"])],
            "draft_over_target": s.get("draft_over_target")}


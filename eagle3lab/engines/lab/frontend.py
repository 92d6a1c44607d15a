"""A lab server that speaks SGLang's HTTP API over the lab engine.

Endpoints (SGLang 0.5.23 names and schemas): GET /health, GET /health_generate,
POST /generate, POST /v1/completions, GET /get_server_info, GET /get_model_info, GET /v1/models.
/generate's meta_info carries what 0.5.23's carries for speculation, the per-request acceptance
histogram `spec_correct_drafts_histogram` included, built from the engine's step records
(`eagle3lab.engines.sglang.meta_info` cites where SGLang builds it).
Requests are served one at a time under a lock (the others queue), so concurrent clients all
get correct answers. Scheduler lines are logged in SGLang's format
(`srt/managers/scheduler_components/metrics_reporter.py`, 0.5.23) so `eagle3lab.sources.logfile.read_log`
reads a lab server's log like a real one:

    [2026-11-29 12:00:00] Prefill batch, #new-seq: 1, #new-token: 64, #cached-token: 0, token usage: 0.03, #running-req: 0, #queue-req: 0, #pending-token: 0, cpu graph: False, input throughput (token/s): 812.40
    [2026-11-29 12:00:01] Decode batch, #running-req: 1, #token: 180, token usage: 0.09, accept len: 3.42, accept rate: 0.61, cpu graph: False, gen throughput (token/s): 310.55, #queue-req: 0
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from eagle3lab.errors import EagleLabError
from eagle3lab.spec import LAB_FIELDS, LATEST_SGLANG, SPEC_NAMES

logger = logging.getLogger("eagle3lab.serve")
SGLANG_VERSION = LATEST_SGLANG  # the SGLang whose rules and log format the front end follows
NO_SPECULATION = {SPEC_NAMES[name][1]: None for name in LAB_FIELDS}  # /server_info without a draft
DEFAULT_MAX_NEW_TOKENS = 128  # SGLang's sampling_params default
DECODE_LOG_INTERVAL = 40  # SGLang's --decode-log-interval default
GRAPH_LABEL = "cpu graph"  # metrics_reporter._graph_backend_label for device "cpu"


class BadRequest(EagleLabError):
    """A request the server refuses with HTTP 400."""


@dataclass
class ServerState:
    """The engine and everything the endpoints report."""

    engine: object  # SpecEngine
    tokenizer: object
    spec: object | None  # SpecParams, None without speculation
    server_info: dict
    max_prompt_tokens: int = 1024
    max_new_tokens: int = 512
    decode_log_interval: int = DECODE_LOG_INTERVAL
    lock: threading.Lock = field(default_factory=threading.Lock)
    waiting: int = 0
    # metrics since the last Decode line (SGLang's reset-per-line counters)
    forward_ct_decode: int = 0
    gen_tokens: int = 0
    spec_accept_tokens: int = 0
    spec_correct_drafts: int = 0
    spec_forward_ct: int = 0
    last_decode_tic: float = field(default_factory=time.perf_counter)
    total_accept_tokens: int = 0
    total_forward_ct: int = 0
    requests: int = 0

    # -- generation ---------------------------------------------------------------------------
    def generate(self, prompt_ids: list[int], sp, max_new: int, stop_ids) -> dict:
        """Run one request under the lock; log Prefill/Decode lines; return results."""
        with self._queued():
            cache_cap = self.engine.max_seq_len
            t0 = time.perf_counter()
            def on_prefill(g):
                self._log_prefill(len(prompt_ids), g.prefill_s, cache_cap)

            if self.spec is not None:
                gen = self.engine.generate(prompt_ids, max_new, self.spec, sp, stop_ids=stop_ids,
                                           on_step=self._on_step, on_prefill=on_prefill)
            else:
                gen = self.engine.generate_plain(prompt_ids, max_new, sp, stop_ids=stop_ids,
                                                 on_step=self._on_step, on_prefill=on_prefill)
            self.requests += 1
            return {"gen": gen, "latency": time.perf_counter() - t0}

    class _Queue:
        def __init__(self, state):
            self.state = state

        def __enter__(self):
            self.state.waiting += 1
            self.state.lock.acquire()
            self.state.waiting -= 1

        def __exit__(self, *exc):
            self.state.lock.release()

    def _queued(self):
        return ServerState._Queue(self)

    def _on_step(self, gen, step) -> None:
        self.forward_ct_decode += 1
        self.gen_tokens += step.accept_len if step is not None else 1
        if step is not None:
            self.spec_accept_tokens += step.accept_len
            self.spec_correct_drafts += step.accepted
            self.spec_forward_ct += 1
        if self.forward_ct_decode % self.decode_log_interval == 0:
            self._log_decode(len(gen.prompt_ids) + len(gen.output_ids))

    def _log_prefill(self, n_tokens: int, seconds: float, cap: int) -> None:
        throughput = n_tokens / seconds if seconds > 0 else 0.0
        logger.info(
            f"Prefill batch, #new-seq: 1, #new-token: {n_tokens}, #cached-token: 0, "
            f"token usage: {n_tokens / cap:.2f}, #running-req: 0, #queue-req: {self.waiting}, "
            f"#pending-token: 0, {GRAPH_LABEL}: False, input throughput (token/s): {throughput:.2f}")

    def _log_decode(self, used_tokens: int) -> None:
        now = time.perf_counter()
        gap = now - self.last_decode_tic
        self.last_decode_tic = now
        throughput = self.gen_tokens / gap if gap > 0 else 0.0
        self.gen_tokens = 0
        msg = (f"Decode batch, #running-req: 1, #token: {used_tokens}, "
               f"token usage: {used_tokens / self.engine.max_seq_len:.2f}, ")
        if self.spec is not None and self.spec_forward_ct:
            from eagle3lab.acceptance import stats  # on use: `eagle3lab serve`'s input checks come before pandas

            accept_len = stats.accept_length_of_counts(self.spec_accept_tokens, self.spec_forward_ct)
            # 0.5.23: accepted drafts / (verify passes x (num_draft_tokens - 1)), bonus excluded
            rate = stats.draft_acceptance_rate(self.spec_correct_drafts, self.spec_forward_ct,
                                               self.spec.num_draft_tokens - 1)
            msg += f"accept len: {accept_len:.2f}, accept rate: {rate:.2f}, "
            self.total_accept_tokens += self.spec_accept_tokens
            self.total_forward_ct += self.spec_forward_ct
            self.spec_accept_tokens = self.spec_correct_drafts = self.spec_forward_ct = 0
        msg += (f"{GRAPH_LABEL}: False, gen throughput (token/s): {throughput:.2f}, "
                f"#queue-req: {self.waiting}")
        logger.info(msg)

    def avg_accept_length(self) -> float | None:
        tokens = self.total_accept_tokens + self.spec_accept_tokens
        ct = self.total_forward_ct + self.spec_forward_ct
        from eagle3lab.acceptance import stats

        return stats.accept_length_of_counts(tokens, ct) if ct else None

    # -- request handling --------------------------------------------------------------------
    def parse_prompt(self, text=None, input_ids=None) -> list[int]:
        if input_ids is not None:
            if not isinstance(input_ids, list) or not all(isinstance(i, int) and not isinstance(i, bool)
                                                          for i in input_ids):
                raise BadRequest("input_ids must be a list of integers")
            vocab = self.engine.target.vocab_size
            if any(i < 0 or i >= vocab for i in input_ids):
                raise BadRequest(f"input_ids must lie in 0..{vocab - 1}")
            ids = list(input_ids)
        elif isinstance(text, str):
            ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        else:
            raise BadRequest("give 'text' (a string) or 'input_ids' (a list of integers)")
        if not ids:
            raise BadRequest("the prompt is empty")
        if len(ids) > self.max_prompt_tokens:
            raise BadRequest(f"prompt has {len(ids)} tokens; this server accepts at most "
                             f"{self.max_prompt_tokens} (--max-prompt-tokens)")
        return ids

    def sampling(self, params: dict, *, default_max: int = DEFAULT_MAX_NEW_TOKENS):
        from eagle3lab.decoder.speculate import SamplingParams

        if not isinstance(params, dict):
            raise BadRequest("sampling_params must be an object")
        max_new = _number(params, "max_new_tokens", int, default_max)
        if max_new < 1:
            raise BadRequest("max_new_tokens must be at least 1")
        if max_new > self.max_new_tokens:
            raise BadRequest(f"max_new_tokens={max_new} exceeds this server's cap of "
                             f"{self.max_new_tokens} (--max-new-tokens)")
        temperature = _number(params, "temperature", float, 1.0)
        top_p = _number(params, "top_p", float, 1.0)
        top_k = _number(params, "top_k", int, -1)
        if temperature < 0 or not 0 < top_p <= 1:
            raise BadRequest("temperature must be >= 0 and top_p in (0, 1]")
        seed = params.get("sampling_seed", params.get("seed"))
        if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
            raise BadRequest("sampling_seed must be an integer")
        stop = params.get("stop") or []
        stop = [stop] if isinstance(stop, str) else stop
        if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
            raise BadRequest("stop must be a string or a list of strings")
        stop_ids = params.get("stop_token_ids") or []
        if not isinstance(stop_ids, list) or not all(isinstance(i, int) for i in stop_ids):
            raise BadRequest("stop_token_ids must be a list of integers")
        if not params.get("ignore_eos", False) and getattr(self.tokenizer, "eos_token_id", None) is not None:
            stop_ids = stop_ids + [self.tokenizer.eos_token_id]
        sp = SamplingParams(temperature=temperature, top_k=max(0, top_k), top_p=top_p, seed=seed)
        return sp, max_new, set(stop_ids), stop

    def run_one(self, ids: list[int], params: dict) -> dict:
        sp, max_new, stop_ids, stop_strs = self.sampling(params)
        served = len(self.engine.served_prompt(ids))  # with the chat template the fault serves, if any
        if served + max_new + 64 > self.engine.max_seq_len:
            raise BadRequest(f"prompt ({served}) + max_new_tokens ({max_new}) exceeds the "
                             f"context length {self.engine.max_seq_len - 64}")
        result = self.generate(ids, sp, max_new, stop_ids)
        gen = result["gen"]
        out_ids = list(gen.output_ids)
        finish = {"type": "length", "length": len(out_ids)}
        if gen.finish_reason == "stop":
            finish = {"type": "stop", "matched": out_ids[-1]}
            out_ids_for_text = out_ids[:-1]
        else:
            out_ids_for_text = out_ids
        text = self.tokenizer.decode(out_ids_for_text, skip_special_tokens=True)
        for s in stop_strs:
            cut = text.find(s)
            if cut >= 0:
                text = text[:cut]
                finish = {"type": "stop", "matched": s}
        meta = {
            "id": uuid.uuid4().hex,
            "finish_reason": finish,
            "prompt_tokens": len(gen.prompt_ids),
            "completion_tokens": len(out_ids),
            "cached_tokens": 0,
            "e2e_latency": result["latency"],
        }
        if self.spec is not None and gen.steps:
            from eagle3lab.acceptance import stats

            verify_ct = len(gen.steps)
            correct = sum(s.accepted for s in gen.steps)
            proposed = verify_ct * (self.spec.num_draft_tokens - 1)
            # tokenizer_manager.py 0.5.23: accept_length = completion_tokens / verify_ct
            meta.update({"spec_verify_ct": verify_ct,
                         "spec_accept_length": stats.accept_length_of_counts(len(out_ids), verify_ct),
                         "spec_accept_rate": stats.draft_acceptance_rate(
                             correct, verify_ct, self.spec.num_draft_tokens - 1) if proposed else 0.0,
                         "spec_num_correct_drafts": correct,
                         "spec_num_proposed_drafts": proposed})
            # 0.5.23: steps by drafts accepted (bonus excluded), set only when non-empty
            from eagle3lab.engines.sglang.meta_info import histogram_from_counts

            hist = histogram_from_counts(s.accepted for s in gen.steps)
            if hist:
                meta["spec_correct_drafts_histogram"] = hist
        elif self.spec is not None:
            meta.update({"spec_verify_ct": 0})
        return {"text": text, "output_ids": out_ids, "meta_info": meta}

    def handle_generate(self, body: dict):
        if not isinstance(body, dict):
            raise BadRequest("the request body must be a JSON object")
        if body.get("stream"):
            raise BadRequest("stream=true is not supported by the lab server")
        params = body.get("sampling_params") or {}
        text, input_ids = body.get("text"), body.get("input_ids")
        if isinstance(text, list) or (isinstance(input_ids, list) and input_ids and isinstance(input_ids[0], list)):
            items = text if isinstance(text, list) else input_ids
            if not items:
                raise BadRequest("empty batch")
            plist = params if isinstance(params, list) else [params] * len(items)
            prompts = [self.parse_prompt(text=t) if isinstance(text, list) else self.parse_prompt(input_ids=t)
                       for t in items]
            for p in plist:
                self.sampling(p)
            return [self.run_one(ids, p) for ids, p in zip(prompts, plist)]
        ids = self.parse_prompt(text=text, input_ids=input_ids)
        return self.run_one(ids, params)

    def handle_completions(self, body: dict) -> dict:
        if not isinstance(body, dict):
            raise BadRequest("the request body must be a JSON object")
        if body.get("stream"):
            raise BadRequest("stream=true is not supported by the lab server")
        if body.get("n", 1) != 1:
            raise BadRequest("only n=1 is supported")
        prompt = body.get("prompt")
        prompts = prompt if isinstance(prompt, list) and prompt and not isinstance(prompt[0], int) else [prompt]
        params = {"max_new_tokens": body.get("max_tokens", 16),
                  "temperature": body.get("temperature", 1.0),
                  "top_p": body.get("top_p", 1.0), "stop": body.get("stop"),
                  "seed": body.get("seed")}
        if params["max_new_tokens"] is None:
            params["max_new_tokens"] = 16
        choices, p_tok, c_tok = [], 0, 0
        parsed = [self.parse_prompt(input_ids=p) if isinstance(p, list) else self.parse_prompt(text=p)
                  for p in prompts]
        for i, ids in enumerate(parsed):
            r = self.run_one(ids, params)
            m = r["meta_info"]
            choices.append({"index": i, "text": r["text"], "logprobs": None,
                            "finish_reason": m["finish_reason"]["type"], "matched_stop": None})
            p_tok += m["prompt_tokens"]
            c_tok += m["completion_tokens"]
        return {"id": f"cmpl-{uuid.uuid4().hex}", "object": "text_completion",
                "created": int(time.time()), "model": body.get("model") or self.server_info["model_path"],
                "choices": choices,
                "usage": {"prompt_tokens": p_tok, "completion_tokens": c_tok, "total_tokens": p_tok + c_tok}}

    def info(self) -> dict:
        info = dict(self.server_info)
        info["internal_states"] = [{"avg_spec_accept_length": self.avg_accept_length(),
                                    "num_requests": self.requests}]
        return info


def _number(params: dict, key: str, kind, default):
    value = params.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (kind is int and not float(value).is_integer()):
        raise BadRequest(f"{key} must be a {'whole number' if kind is int else 'number'}, got {value!r}")
    return kind(value)


# --------------------------------------------------------------------------------------
# HTTP
# --------------------------------------------------------------------------------------
MAX_BODY_BYTES = 4 << 20


class Handler(BaseHTTPRequestHandler):
    server_version = "eagle3lab-serve"
    protocol_version = "HTTP/1.1"

    @property
    def state(self) -> ServerState:
        return self.server.state  # type: ignore[attr-defined]

    def log_message(self, fmt, *args):  # quiet access log, like SGLang's default
        return

    def _send(self, code: int, payload, content_type: str = "application/json") -> None:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, code: int, message: str) -> None:
        self._send(code, {"error": {"message": message, "code": code}, "object": "error",
                          "message": message})

    def _body(self):
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY_BYTES:
            raise BadRequest(f"request body over {MAX_BODY_BYTES} bytes")
        raw = self.rfile.read(length) if length else b""
        try:
            return json.loads(raw or b"{}")
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise BadRequest(f"invalid JSON: {exc}") from None

    def do_GET(self):
        path = self.path.split("?")[0]
        try:
            if path == "/health":
                self._send(200, b"", "text/plain")
            elif path == "/health_generate":
                self.state.run_one([self.state.tokenizer.bos_token_id or 0],
                                   {"max_new_tokens": 1, "temperature": 0})
                self._send(200, b"", "text/plain")
            elif path in ("/get_server_info", "/server_info"):
                self._send(200, self.state.info())
            elif path == "/get_model_info":
                info = self.state.server_info
                self._send(200, {"model_path": info["model_path"], "tokenizer_path": info["model_path"],
                                 "is_generation": True})
            elif path == "/v1/models":
                self._send(200, {"object": "list", "data": [
                    {"id": self.state.server_info["model_path"], "object": "model", "owned_by": "eagle3lab"}]})
            else:
                self._error(404, f"no endpoint {path}")
        except BadRequest as exc:
            self._error(400, str(exc))
        except Exception as exc:  # keep serving
            logger.exception("error in %s", path)
            self._error(500, f"{type(exc).__name__}: {exc}")

    def do_POST(self):
        path = self.path.split("?")[0]
        try:
            body = self._body()
            if path == "/generate":
                self._send(200, self.state.handle_generate(body))
            elif path == "/v1/completions":
                self._send(200, self.state.handle_completions(body))
            elif path == "/health_generate":
                self.do_GET()
            else:
                self._error(404, f"no endpoint {path}")
        except BadRequest as exc:
            self._error(400, str(exc))
        except Exception as exc:
            logger.exception("error in %s", path)
            self._error(500, f"{type(exc).__name__}: {exc}")


class LabHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address, state: ServerState):
        super().__init__(address, Handler)
        self.state = state

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"


def make_server(state: ServerState, host: str = "127.0.0.1", port: int = 30000) -> LabHTTPServer:
    """Bind (port 0 = any free port); call `serve_forever()` (in a thread if you like)."""
    try:
        return LabHTTPServer((host, port), state)
    except OSError as exc:
        raise EagleLabError(f"cannot bind {host}:{port}: {exc.strerror or exc}") from None


def setup_logging(stream=None) -> None:
    """SGLang's default log format: `[YYYY-MM-DD HH:MM:SS] message`."""
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("[%(asctime)s] %(message)s", "%Y-%m-%d %H:%M:%S"))
    logger.handlers[:] = [handler]
    logger.setLevel(logging.INFO)
    logger.propagate = False


# --------------------------------------------------------------------------------------
# Loading what `eagle3lab serve` serves
# --------------------------------------------------------------------------------------
SUPPORTED_ALGORITHMS = ("EAGLE3", "EAGLE")


def names_lab_preset(model_path) -> bool:
    """`lab` or `lab:<preset>`: a built lab preset (built first if need be), not a folder."""
    return str(model_path) == "lab" or str(model_path).startswith("lab:")


def resolve_model_path(model_path: str):
    """(target dir, lab root or None) for a target dir, a lab dir, `lab` or `lab:<preset>`."""
    from pathlib import Path

    from eagle3lab.paths import lab_dir

    if names_lab_preset(model_path):
        preset = model_path.partition(":")[2] or "default"
        from eagle3lab.lab import load_lab

        lab = load_lab(preset)
        return lab.target_dir, Path(lab.root)
    path = Path(model_path)
    if (path / "manifest.json").is_file() and (path / "target").is_dir():
        return path / "target", path
    if (path / "config.json").is_file():
        root = path.parent if (path.parent / "manifest.json").is_file() else None
        return path, root
    if not path.exists() and (lab_dir(model_path) / "manifest.json").is_file():
        return lab_dir(model_path) / "target", lab_dir(model_path)
    raise EagleLabError(f"--model-path {model_path}: not a model directory (config.json) or a lab")


def load_state(model_path: str, draft_path: str | None = None, *, spec=None, faults=(),
               max_prompt_tokens: int | None = None, max_new_tokens: int = 256,
               decode_log_interval: int = DECODE_LOG_INTERVAL,
               sglang_version: str = LATEST_SGLANG, launch_command: str | None = None) -> ServerState:
    """Load target, draft and tokenizer; resolve the speculative config (a `SpecConfig`, None
    for plain decoding) like SGLang `sglang_version` would."""
    import warnings
    from pathlib import Path

    import torch
    from transformers import AutoTokenizer, LlamaForCausalLM

    from eagle3lab.decoder.faults import build_engine, draft_faults, plan_faults

    target_dir, lab_root = resolve_model_path(model_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        target = LlamaForCausalLM.from_pretrained(str(target_dir), dtype=torch.float32).eval()
        tokenizer = AutoTokenizer.from_pretrained(str(target_dir))
    num_layers = target.config.num_hidden_layers
    plan = plan_faults(faults, num_layers)
    arch = (target.config.architectures or ["LlamaForCausalLM"])[0]
    effective, resolved, draft, draft_dir = None, None, None, None
    if spec is not None:
        if spec.algorithm not in SUPPORTED_ALGORITHMS:
            raise EagleLabError(f"--speculative-algorithm {spec.algorithm}: the lab engine runs EAGLE3 only")
        resolved = spec.resolve(engine="sglang", version=sglang_version, arch=arch)
        if resolved.error:
            raise EagleLabError(f"SGLang {sglang_version} refuses this configuration: {resolved.error}")
        for line in resolved.warnings:
            logger.warning(line)
        draft_dir = _draft_dir(spec.draft_model_path or draft_path, lab_root, plan)
        effective = replace(resolved.effective, draft_model_path=str(draft_dir))
        draft = _load_draft(draft_dir, target)
    elif draft_path or draft_faults(plan.faults):
        logger.warning("no --speculative-algorithm: serving plain decoding (draft and draft faults ignored)")
    # SGLang 0.5.23 prints its resolved arguments at start (entrypoints/engine.py:311)
    logger.info(f"server_args={ {'model_path': str(model_path), 'device': 'cpu', **(effective.server_info() if effective else NO_SPECULATION)} }")
    max_pos = int(getattr(target.config, "max_position_embeddings", 2048))
    if max_prompt_tokens is None:  # what the context leaves after the largest answer
        max_prompt_tokens = max(1, min(1024, max_pos - max_new_tokens - 64))
    max_seq = min(max_pos, max_prompt_tokens + max_new_tokens + 128)
    if max_prompt_tokens + max_new_tokens + 64 > max_pos:
        raise EagleLabError(f"--max-prompt-tokens + --max-new-tokens must stay below the model's "
                            f"{max_pos} positions")
    engine = build_engine(target, draft, plan, max_seq_len=max_seq, tokenizer=tokenizer)
    info = {
        "model_path": str(model_path), "tokenizer_path": str(target_dir), "device": "cpu",
        "version": sglang_version, "engine": "eagle3lab",
        **(effective.server_info() if effective else NO_SPECULATION),
        "speculative_warnings": list(resolved.warnings) if resolved else [],
        # SGLang 0.5.23 build_server_info (srt/utils/common.py): the flags as given, beside the
        # resolved values, so a client can tell what was asked from what runs
        "launch_command": launch_command,
        "faults": list(plan.faults),
        "draft_name": Path(draft_dir).name if draft_dir else None,
        "aux_hidden_state_boundaries": list(engine.boundaries) if draft is not None else None,
        "served_aux_layer_ids": [b - 1 for b in engine.boundaries] if draft is not None else None,
        "max_prompt_tokens": max_prompt_tokens, "max_new_tokens": max_new_tokens,
        "context_length": max_seq, "decode_log_interval": decode_log_interval,
    }
    return ServerState(engine=engine, tokenizer=tokenizer,
                       spec=effective.to_engine_params() if effective else None, server_info=info,
                       max_prompt_tokens=max_prompt_tokens, max_new_tokens=max_new_tokens,
                       decode_log_interval=decode_log_interval)


def _load_draft(draft_dir, target):
    """A complete EAGLE-3 draft folder, or the real-model lab's stored form (config.json and
    trained.safetensors: embedding and LM head come from the target, `lab.real_lab`)."""
    from pathlib import Path

    from eagle3lab.decoder.draft import CHECKPOINT_FILE, Eagle3Draft
    from eagle3lab.lab.real_lab import STORED_FILE, load_stored_draft

    folder = Path(draft_dir)
    if (folder / STORED_FILE).is_file() and not (folder / CHECKPOINT_FILE).is_file():
        return load_stored_draft(folder, target)
    return Eagle3Draft.from_pretrained(folder, embed_weight=target.model.embed_tokens.weight.detach())


def _draft_dir(draft_path, lab_root, plan):
    """The draft to serve: the given one, or the lab sibling a fault asks for."""
    from pathlib import Path

    if draft_path is None:
        if lab_root is None:
            raise EagleLabError("--speculative-draft-model-path is required with a speculative algorithm")
        return Path(lab_root) / "drafts" / plan.draft_name
    path = Path(draft_path)
    if plan.draft_name != "healthy" and path.name != plan.draft_name:
        sibling = path.parent / plan.draft_name
        if not (sibling / "config.json").is_file():
            raise EagleLabError(f"faults {', '.join(plan.faults)} need the lab draft "
                                f"{plan.draft_name!r}, not found next to {path}")
        logger.info(f"faults {', '.join(plan.faults)}: serving draft {sibling}")
        return sibling
    return path

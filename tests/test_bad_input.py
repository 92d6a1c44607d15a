"""Bad input never costs a traceback, a measurement or a server (issue 34).

A table of bad inputs across the CLI, each run as a user would (`python -m eagle3lab` in a
subprocess), asserting: no traceback in stdout or stderr, the exit code, the message, that no file
the user gave was changed (each case gets its own copies, hashed before and after, and nothing new
appears next to them), and that no process is left (every process a case starts inherits a marker
in its environment; none may carry it once the case is over). The cases run four at a time in one
fixture (subprocess start-up is the cost), then one test per case reads its result. Servers the
cases talk to are a stub in this process (it counts /generate requests: a refused input measures
nothing); the real lab server is launched once, by the SIGKILL test at the end.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from eagle3lab.serving import server

ROOT = Path(__file__).resolve().parents[1]
LAB = ROOT / "data" / "lab" / "ci"
SAMPLE_LOG = ROOT / "data" / "samples" / "logs" / "sglang_issue11948_eagle3_accept_rate_trailing_comma.log"
MARKER = "EAGLE3LAB_BAD_INPUT_CASE"
WORKERS = 4  # subprocesses at once: start-up is mostly waiting on imports, 2 cores stay busy


# --------------------------------------------------------------------------- the inputs

def _write_inputs(folder: Path) -> None:
    """The files the cases name: each case gets its own copy of this folder."""
    rng = random.Random(34)
    (folder / "binary").write_bytes(bytes(rng.getrandbits(8) for _ in range(20_000)))
    (folder / "ff").write_bytes(b"\xff")
    (folder / "empty").write_bytes(b"")
    (folder / "folder").mkdir()
    (folder / "log.gz").write_bytes(gzip.compress(SAMPLE_LOG.read_bytes(), mtime=0))
    (folder / "log.zst").write_bytes(b"\x28\xb5\x2f\xfd" + bytes(rng.getrandbits(8) for _ in range(200)))
    (folder / "readme.md").write_text("# notes\nnot a sweep file\n")
    (folder / "latin1.jsonl").write_bytes(b'{"point_key": "caf\xe9"}\n')
    (folder / "prompts20.txt").write_text("".join(f"prompt number {i} about things\n" for i in range(20)))
    (folder / "mixed.jsonl").write_text('{"text": "def f(x):\\n    return x"}\n{"prompt": "import os"}\n'
                                        '{"messages": []}\n{not json\n')


@dataclass(frozen=True)
class Case:
    name: str
    argv: tuple
    code: int
    message: str  # a regular expression searched in stdout + stderr
    stdin: str | None = None  # a file of the case's folder fed to stdin
    max_s: float | None = None  # wall-clock bound (a wait that must be honoured)


D, T = "{lab}/drafts/seed", "{lab}/target"
URL = ("--url", "{stub}")
CASES = [
    # ---- logs
    Case("logs-binary", ("logs", "{in}/binary"), 0, r"looks binary, not a text log"),
    Case("logs-binary-stdin", ("logs", "-"), 0, r"looks binary", stdin="binary"),
    Case("logs-empty-diagnose", ("logs", "{in}/empty", "--diagnose"), 0, r"diagnosis: none \(no records"),
    Case("logs-gzip", ("logs", "{in}/log.gz"), 0, r"7 lines \(6 read into 6 records, 1 skipped\)"),
    Case("logs-zstd", ("logs", "{in}/log.zst"), 2, r"log.zst is zstd-compressed: decompress it first"),
    Case("logs-missing", ("logs", "{in}/nope.log"), 2, r"nope.log: no such file"),
    Case("logs-folder", ("logs", "{in}/folder"), 2, r"folder is a directory, not a log file"),
    Case("logs-engine-filter-diagnose", ("logs", "{in}/log.gz", "--engine", "vllm", "--diagnose"), 0,
         r"7 lines \(0 read into 0 records, 7 skipped\)[\s\S]*diagnosis: none"),
    Case("logs-unknown-engine", ("logs", "{in}/log.gz", "--engine", "foo"), 2, r"argument --engine: invalid choice"),
    Case("logs-csv-unwritable", ("logs", "{in}/log.gz", "--csv", "/proc/nope/x.csv"), 2, r"cannot write /proc/nope/x.csv"),
    # ---- config
    Case("config-empty-version", ("config", "--engine", "sglang=="), 2, r"'sglang==': nothing after '=='"),
    Case("config-empty-name", ("config", "--engine", "==0.5.9"), 2, r"'==0.5.9': nothing before '=='"),
    Case("config-use-vllm-on-sglang", ("config", "--use-vllm", "--", "--speculative-num-steps", "3"), 2,
         r"--use-vllm asks vllm's own resolver: it needs --engine vllm"),
    Case("config-use-sglang-on-vllm", ("config", "--engine", "vllm", "--use-sglang", "--", "--model", "m"), 2,
         r"--use-sglang asks sglang's own resolver: it needs --engine sglang"),
    Case("config-unknown-engine", ("config", "--engine", "foo"), 2, r"unknown engine 'foo'"),
    Case("config-bad-version", ("config", "--engine", "sglang==abc"), 2, r"not a version number: 'abc'"),
    Case("config-bad-arch", ("config", "--arch", "foo"), 2, r"'foo' is not an architecture name"),
    Case("config-flag-value", ("config", "--", "--speculative-num-steps", "x"), 2,
         r"--speculative-num-steps takes a whole number, got 'x'"),
    Case("config-unknown-flag", ("config", "--", "--bogus-flag", "3"), 2, r"unknown launch_server flag\(s\): --bogus-flag"),
    # ---- wiring
    Case("wiring-empty-version", ("wiring", "--draft", D, "--num-layers", "24", "--serve", "sglang=="), 2,
         r"'sglang==': nothing after '=='"),
    Case("wiring-few-layers", ("wiring", "--draft", D, "--num-layers", "0"), 2, r"at least 4 layers, got 0"),
    Case("wiring-missing-draft", ("wiring", "--draft", "{in}/nope", "--num-layers", "24"), 2, r"nope not found"),
    Case("wiring-missing-target", ("wiring", "--draft", D, "--target", "{in}/nope"), 2, r"target config: .*nope not found"),
    Case("wiring-bad-train", ("wiring", "--draft", D, "--num-layers", "24", "--train", "1,x"), 2, r"--train: cannot read '1,x'"),
    Case("wiring-binary-target", ("wiring", "--draft", D, "--target", "{in}/binary"), 2, r"binary is not valid JSON"),
    Case("wiring-folder-draft", ("wiring", "--draft", "{in}/folder", "--num-layers", "24"), 2,
         r"draft config: .*folder/config.json not found"),
    # ---- doctor (each fails before the target loads)
    Case("doctor-prompts-binary", ("doctor", "--draft", D, "--target", T, "--prompts", "{in}/binary"), 2,
         r"--prompts: .*binary is not UTF-8 text \(byte 0x[0-9a-f]{2} at offset 0\)"),
    Case("doctor-prompts-ff-json", ("doctor", "--draft", D, "--target", T, "--prompts", "{in}/ff", "--json"), 2,
         r"ff is not UTF-8 text \(byte 0xff at offset 0\)"),
    Case("doctor-prompts-missing", ("doctor", "--draft", D, "--target", T, "--prompts", "{in}/nope"), 2,
         r"--prompts: .*nope not found"),
    Case("doctor-prompts-folder", ("doctor", "--draft", D, "--target", T, "--prompts", "{in}/folder"), 2,
         r"--prompts: .*folder is a folder"),
    Case("doctor-log-missing", ("doctor", "--draft", D, "--target", T, "--log", "{in}/nope.log"), 2,
         r"--log: .*nope.log not found"),
    Case("doctor-serve-empty-version", ("doctor", "--draft", D, "--target", T, "--serve", "sglang=="), 2,
         r"'sglang==': nothing after '=='"),
    Case("doctor-temperature", ("doctor", "--draft", D, "--temperature", "-1"), 2, r"temperature must be a number >= 0"),
    Case("doctor-missing-draft", ("doctor", "--draft", "{in}/nope"), 2, r"draft directory .*nope not found"),
    Case("doctor-platform", ("doctor", "--draft", D, "--platform", "tpu"), 2, r"argument --platform: invalid choice"),
    Case("doctor-unusable-log-and-lines", ("doctor", "--draft", D, "--target", T, "--static", "--log", "{in}/binary",
                                           "--prompts", "{in}/mixed.jsonl"), 1,
         r"checks that could not run:[\s\S]*- prompts \(lines not used\): mixed.jsonl \(JSON lines\): 1 line "
         r"without a non-empty \"text\", \"prompt\" or \"messages\"; 1 line not a JSON object[\s\S]*"
         r"- log: .*binary: no speculative-decoding or scheduler record in \d+ line\(s\) \(it looks binary"),
    # ---- bench (the stub counts requests: none of these measures)
    Case("bench-prompts-binary", (*URL, "--prompts", "{in}/binary"), 2, r"--prompts: .*binary is not UTF-8 text"),
    Case("bench-prompts-ff-json", (*URL, "--prompts", "{in}/ff", "--json"), 2, r"ff is not UTF-8 text \(byte 0xff"),
    Case("bench-prompts-empty", (*URL, "--prompts", "{in}/empty"), 2, r"no prompts in .*empty \(every line is empty\)"),
    Case("bench-prompts-folder", (*URL, "--prompts", "{in}/folder"), 2, r"--prompts: .*folder is a folder"),
    Case("bench-prompts-missing", (*URL, "--prompts", "{in}/nope"), 2, r"--prompts: .*nope not found"),
    Case("bench-num-prompts-negative", (*URL, "--num-prompts", "-1"), 2, r"--num-prompts: expected a whole number >= 1, got -1"),
    Case("bench-num-prompts-zero", (*URL, "--num-prompts", "0"), 2, r"--num-prompts: expected a whole number >= 1, got 0"),
    Case("bench-url-spaces", ("--url", "htp:/x y"), 2, r"'htp:/x y' is not a valid server URL \(it holds spaces\)", max_s=10),
    Case("bench-url-scheme", ("--url", "htp:/x"), 2, r"'htp:/x' is not a valid server URL \(a scheme needs '://'\)", max_s=10),
    Case("bench-url-port", ("--url", "http://127.0.0.1:99999"), 2, r"not a valid server URL \(Port out of range", max_s=10),
    Case("bench-dead-url-timeout", ("--url", "{dead}", "--timeout", "1"), 2,
         r"no healthy server at http://127.0.0.1:\d+/health after 1 s", max_s=15),
    Case("bench-two-urls", (*URL, "--url", "{stub}"), 2, r"bench measures one server: 2 --url given"),
    Case("bench-fault-on-url", (*URL, "--fault", "no-d2t"), 2, r"faults are switches of the lab engine"),
    Case("bench-unknown-fault", ("--backend", "lab", "--fault", "bogus"), 2, r"unknown fault 'bogus'"),
    Case("bench-lab-missing-model", ("--backend", "lab", "--model-path", "{in}/nope"), 2, r"--model-path .*nope: no such folder"),
    Case("bench-lab-missing-draft", ("--backend", "lab", "--model-path", T, "--draft", "{in}/nope"), 2,
         r"--draft .*nope: no such folder"),
    Case("bench-sglang-no-model", ("--backend", "sglang"), 2, r"--model-path is required with --backend sglang"),
    Case("bench-timeout-zero", (*URL, "--timeout", "0"), 2, r"--timeout: expected a number of seconds > 0"),
    Case("bench-temperature", (*URL, "--temperature", "-0.5"), 2, r"--temperature: expected a number >= 0"),
    # ---- sweep (nothing launches, nothing is measured)
    Case("sweep-unknown-key", ("sweep", "--backend", "lab", "--grid", "foo=1,2"), 2, r"--grid foo: not a sweep key"),
    Case("sweep-unknown-fault", ("sweep", "--backend", "lab", "--grid", "fault=none,bogus"), 2,
         r"sweep point fault=bogus: unknown fault 'bogus'"),
    Case("sweep-steps-without-topk", ("sweep", "--backend", "lab", "--grid", "num_steps=1,2"), 2,
         r"sweep point num_steps=1: the lab server \(SGLang 0.5.23's rules\) refuses it: .*speculative_num_steps given "
         r"without speculative_eagle_topk"),
    Case("sweep-contradicting-faults", ("sweep", "--backend", "lab", "--grid", "fault=wiring-seed+no-ttt"), 2,
         r"faults 'no-ttt' and 'wiring-seed' contradict each other"),
    Case("sweep-faults-on-sglang", ("sweep", "--backend", "sglang", "--model-path", "/m", "--grid", "fault=no-d2t"), 2,
         r"faults are lab switches"),
    Case("sweep-vllm-steps-zero", ("sweep", "--backend", "vllm", "--grid", "num_steps=0"), 2,
         r"sweep point num_steps=0: vLLM refuses it: num_steps must be at least 1"),
    Case("sweep-missing-draft", ("sweep", "--backend", "lab", "--model-path", T, "--grid", "draft=nope"), 2,
         r"draft 'nope' is neither a folder nor a lab draft"),
    Case("sweep-max-new-tokens", ("sweep", *URL, "--grid", "max_new_tokens=0"), 2, r"max_new_tokens must be a whole number >= 1"),
    Case("sweep-temperature", ("sweep", *URL, "--grid", "temperature=-1"), 2, r"temperature must be a number >= 0"),
    Case("sweep-concurrency", ("sweep", *URL, "--grid", "concurrency=1,x"), 2, r"concurrency.*whole number"),
    Case("sweep-out-unwritable", ("sweep", *URL, "--grid", "max_new_tokens=4", "--prompts", "{in}/prompts20.txt",
                                  "--out", "/proc/nope/sw.jsonl"), 2, r"--out /proc/nope/sw.jsonl: cannot write there"),
    Case("sweep-out-folder", ("sweep", *URL, "--grid", "max_new_tokens=4", "--out", "{in}/folder"), 2,
         r"--out .*folder is a folder: give a file path"),
    Case("sweep-out-not-utf8", ("sweep", *URL, "--grid", "max_new_tokens=4", "--out", "{in}/latin1.jsonl"), 2,
         r"latin1.jsonl is not a sweep file \(not UTF-8 text at byte \d+\)"),
    Case("sweep-out-not-a-sweep-file", ("sweep", *URL, "--grid", "max_new_tokens=4", "--out", "{in}/readme.md"), 2,
         r"readme.md is not a sweep file \(line 1 is not a JSON record\)"),
    Case("sweep-dead-url-timeout", ("sweep", "--url", "{dead}", "--grid", "max_new_tokens=4", "--timeout", "1"), 2,
         r"no healthy server .* after 1 s", max_s=15),
    Case("sweep-bad-url", ("sweep", "--url", "htp:/x", "--grid", "num_steps=3"), 2, r"not a valid server URL"),
    Case("sweep-grid-syntax", ("sweep", *URL, "--grid", "foo"), 2, r"--grid 'foo': expected KEY=V1,V2"),
    Case("sweep-bad-version", ("sweep", "--backend", "lab", "--grid", "num_steps=3", "--grid", "topk=1",
                               "--version", "abc"), 2, r"not a version number: 'abc'"),
    Case("sweep-label", ("sweep", "--backend", "lab", "--grid", "label=a,b"), 2, r"--grid label: not a setting"),
    # ---- serve (each fails before the target loads)
    Case("serve-missing-model", ("serve", "--model-path", "{in}/nope"), 2, r"not a model directory \(config.json\) or a lab"),
    Case("serve-steps-without-topk", ("serve", "--model-path", T, "--speculative-algorithm", "EAGLE3",
                                      "--speculative-num-steps", "1"), 2, r"SGLang 0.5.23 refuses this configuration"),
    Case("serve-port-in-use", ("serve", "--model-path", T, "--port", "{busy}"), 2, r"--port \d+ on 127.0.0.1 is already in use"),
    Case("serve-port-range", ("serve", "--model-path", T, "--port", "70000"), 2, r"--port 70000 is not a port number"),
    Case("serve-unknown-fault", ("serve", "--model-path", T, "--fault", "bogus"), 2, r"unknown fault 'bogus'"),
    Case("serve-missing-draft", ("serve", "--model-path", T, "--speculative-algorithm", "EAGLE3",
                                 "--speculative-draft-model-path", "{in}/nope"), 2, r"--speculative-draft-model-path .*nope: no such folder"),
    Case("serve-threads", ("serve", "--model-path", T, "--threads", "0"), 2, r"--threads must be at least 1, got 0"),
    Case("serve-algorithm", ("serve", "--model-path", T, "--speculative-algorithm", "FOO"), 2, r"speculative algorithm 'FOO' is not modelled"),
    Case("serve-vllm-fault", ("serve", "--model-path", T, "--backend", "vllm", "--fault", "no-d2t"), 2,
         r"faults are switches of the lab engine; vLLM serves checkpoints as they are"),
    # ---- patch
    Case("patch-missing-dir", ("patch", "sglang", "--check", "--sglang-dir", "{in}/nope"), 2, r"is not an sglang package directory"),
    Case("patch-apply-empty-dir", ("patch", "sglang", "--apply", "--sglang-dir", "{in}/folder"), 2, r"is not an sglang package directory"),
    Case("patch-revert-file", ("patch", "sglang", "--revert", "--sglang-dir", "{in}/binary"), 2, r"is not an sglang package directory"),
    Case("patch-no-action", ("patch", "sglang"), 2, r"one of the arguments --check --apply --revert is required"),
    Case("patch-other-package", ("patch", "vllm", "--check"), 2, r"argument package: invalid choice: 'vllm'"),
    # ---- lab (each fails before torch loads)
    Case("lab-bench-prompts-zero", ("lab", "bench", "--prompts", "0"), 2, r"--prompts must be at least 1"),
    Case("lab-bench-prompts-word", ("lab", "bench", "--prompts", "x"), 2, r"expected a number or 'all', got 'x'"),
    Case("lab-bench-temperature", ("lab", "bench", "--temperature", "-1"), 2, r"--temperature must be >= 0"),
    Case("lab-bench-unknown-fault", ("lab", "bench", "--fault", "bogus"), 2, r"unknown fault 'bogus'"),
    Case("lab-bench-steps-zero", ("lab", "bench", "--steps", "0"), 2, r"num_steps must be at least 1, got 0"),
    Case("lab-bench-serve-empty-version", ("lab", "bench", "--serve", "sglang=="), 2, r"'sglang==': nothing after '=='"),
    Case("lab-bench-serve-unknown", ("lab", "bench", "--serve", "foo==1"), 2, r"--serve takes ENGINE==VERSION"),
    Case("lab-show-missing", ("lab", "show", "--out", "{in}/nope"), 2, r"no lab in .*nope"),
    Case("lab-build-set-without-out", ("lab", "build", "--set", "num_layers=4"), 2, r"give it a folder with --out"),
    Case("lab-no-subcommand", ("lab",), 2, r"usage: eagle3lab lab \{build,target,materialize,show,bench\}"),
]
for _case in CASES:  # bench's cases list its arguments only
    if _case.argv[0] not in ("logs", "config", "wiring", "doctor", "sweep", "serve", "patch", "lab"):
        CASES[CASES.index(_case)] = Case(_case.name, ("bench", *_case.argv), _case.code, _case.message,
                                         _case.stdin, _case.max_s)


# --------------------------------------------------------------------------- a stub server

FAILING_LENGTH = 13  # max_new_tokens the stub answers with HTTP 500


class _Stub(BaseHTTPRequestHandler):
    """SGLang's /health, /get_server_info and /generate (no streaming, like the lab server)."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _reply(self, code: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/health":
            return self._reply(200, {})
        if self.path == "/get_server_info":
            return self._reply(200, {"speculative_algorithm": "EAGLE3", "speculative_num_steps": 3,
                                     "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4})
        return self._reply(404, {"error": "no such endpoint"})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        if body.get("stream"):
            return self._reply(400, {"error": {"message": "stream=true is not supported"}})
        with self.server.lock:
            self.server.generated += 1
        n = body["sampling_params"]["max_new_tokens"]
        if n == FAILING_LENGTH:
            return self._reply(500, {"error": {"message": "the stub fails this length"}})
        meta = {"prompt_tokens": 3, "completion_tokens": n, "spec_verify_ct": math.ceil(n / 2),
                "finish_reason": {"type": "length"}}
        return self._reply(200, {"text": "x " * n, "meta_info": meta})


@pytest.fixture(scope="module")
def stub():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
    httpd.generated, httpd.lock = 0, threading.Lock()
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    httpd.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    yield httpd
    httpd.shutdown()
    httpd.server_close()


# --------------------------------------------------------------------------- running the table

def _tree(folder: Path) -> dict:
    """{relative path: sha256} of every file under `folder` (folders as None)."""
    out = {}
    for path in sorted(folder.rglob("*")):
        out[str(path.relative_to(folder))] = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None
    return out


def _marked(case: str) -> list[int]:
    """Live processes that carry this case's marker in their environment."""
    needle = f"{MARKER}={case}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle in (entry / "environ").read_bytes().split(b"\0") and server.process_alive(int(entry.name)):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _run_case(case: Case, inputs: Path, work: Path, fill: dict) -> dict:
    folder = work / case.name
    shutil.copytree(inputs, folder)
    before = _tree(folder)
    argv = [a.format(**fill, **{"in": str(folder)}) for a in case.argv]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", MARKER: case.name,
           "EAGLE3LAB_CACHE": str(work / "cache")}
    stdin = open(folder / case.stdin, "rb") if case.stdin else subprocess.DEVNULL
    started = time.monotonic()
    try:
        proc = subprocess.run([sys.executable, "-m", "eagle3lab", *argv], cwd=folder, env=env, stdin=stdin,
                              capture_output=True, text=True, timeout=120)
    finally:
        if case.stdin:
            stdin.close()
    return {"proc": proc, "seconds": time.monotonic() - started, "changed": _tree(folder) != before,
            "left": _marked(case.name), "argv": argv}


@pytest.fixture(scope="module")
def results(stub, tmp_path_factory):
    """Every case, run four at a time; the stub's request count before and after."""
    inputs = tmp_path_factory.mktemp("inputs")
    _write_inputs(inputs)
    work = tmp_path_factory.mktemp("cases")
    dead = server.free_port()  # nothing listens there
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        fill = {"lab": str(LAB), "stub": stub.url, "dead": f"http://127.0.0.1:{dead}",
                "busy": str(busy.getsockname()[1])}
        lab_before = _tree(LAB)
        generated = stub.generated
        started = time.monotonic()
        with ThreadPoolExecutor(WORKERS) as pool:
            futures = {c.name: pool.submit(_run_case, c, inputs, work, fill) for c in CASES}
            out = {name: f.result() for name, f in futures.items()}
    out["_wall_s"] = time.monotonic() - started
    out["_measured"] = stub.generated - generated
    out["_lab_changed"] = _tree(LAB) != lab_before
    return out


def test_the_table_covers_every_command_with_at_least_60_inputs():
    commands = {c.argv[0] for c in CASES}
    assert len(CASES) >= 60 and len({c.name for c in CASES}) == len(CASES)
    assert commands == {"logs", "config", "wiring", "doctor", "bench", "sweep", "serve", "patch", "lab"}


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input(case, results):
    got = results[case.name]
    proc = got["proc"]
    out = proc.stdout + proc.stderr
    where = f"eagle3lab {' '.join(got['argv'])}\nstdout: {proc.stdout[-2000:]}\nstderr: {proc.stderr[-2000:]}"
    assert "Traceback" not in out, where
    assert proc.returncode == case.code, where
    assert re.search(case.message, out), f"/{case.message}/ not in the output of {where}"
    if case.code == 2 and proc.stderr.strip():
        assert len(proc.stderr.strip().splitlines()[-1]) < 600, where  # one line, said at the end
    assert not got["changed"], f"a file the user gave changed, or one appeared: {where}"
    assert not got["left"], f"processes left by the case: {got['left']} ({where})"
    if case.max_s is not None:
        assert got["seconds"] < case.max_s, f"took {got['seconds']:.1f} s, not under {case.max_s} s: {where}"


def test_the_table_measured_nothing_and_changed_no_checkpoint(results):
    """A refused input sends no request (the stub counted none) and reads the lab's checkpoints only."""
    assert results["_measured"] == 0
    assert not results["_lab_changed"]


# --------------------------------------------------------------------------- inputs that run

def _cli(*argv, cwd, timeout=120) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", "eagle3lab", *map(str, argv)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def _strict_json(text: str):
    def refuse(name):
        raise ValueError(f"{name} is not JSON")
    return json.loads(text, parse_constant=refuse)


def test_bench_says_how_many_prompts_it_sends_and_prints_json_without_nan(stub, tmp_path):
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("".join(f"prompt {i}\n" for i in range(20)))
    before = stub.generated
    proc = _cli("bench", "--url", stub.url, "--prompts", prompts, "--max-new-tokens", "4", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert f"prompts: the first 8 of 20 in {prompts} (--num-prompts 8)" in proc.stderr
    summary = _strict_json(proc.stdout.strip().splitlines()[-1])  # the stub does not stream: TTFT unmeasured
    assert summary["requests"] == 8 and summary["ttft_s"] is None and stub.generated - before == 8
    proc = _cli("bench", "--url", stub.url, "--prompts", prompts, "--max-new-tokens", "4", "--num-prompts", "20",
                cwd=tmp_path)
    assert proc.returncode == 0 and "the first" not in proc.stderr and stub.generated - before == 28
    proc = _cli("bench", "--url", stub.url, "--prompts", prompts, "--max-new-tokens", "4", "--num-prompts", "64",
                cwd=tmp_path)  # a short file sends what it has, and says so
    assert proc.returncode == 0 and f"prompts: only 20 in {prompts}, fewer than --num-prompts 64" in proc.stderr


def test_a_torn_last_line_is_counted_and_the_next_record_starts_a_line(stub, tmp_path):
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("one prompt\nanother prompt\n")
    out = tmp_path / "sweep.jsonl"
    args = ("sweep", "--url", stub.url, "--grid", "max_new_tokens=4,6", "--prompts", prompts, "--out", out)
    first = _cli(*args, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    first_lines = out.read_text().splitlines()
    out.write_text(first_lines[0] + "\n" + first_lines[1][:40])  # the second record cut mid-write, no newline
    before = stub.generated
    second = _cli(*args, cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    assert f"1 torn line in {out}" in second.stdout and "2 points" in second.stdout
    assert stub.generated - before == 2  # the torn point measured again, the whole one not
    lines = out.read_text().splitlines()
    assert len(lines) == 3 and lines[1] == first_lines[1][:40]
    assert [_record_or_none(line) is not None for line in lines] == [True, False, True]
    third = _cli(*args, cwd=tmp_path)
    assert "1 torn line" in third.stdout and stub.generated - before == 2  # nothing left to measure


def test_a_failed_point_prints_its_reason(stub, tmp_path):
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("one prompt\nanother prompt\n")
    proc = _cli("sweep", "--url", stub.url, "--grid", f"max_new_tokens=4,{FAILING_LENGTH}", "--prompts", prompts,
                cwd=tmp_path)
    assert proc.returncode == 1 and "Traceback" not in proc.stdout + proc.stderr
    failed = [line for line in proc.stdout.splitlines() if line.startswith("FAILED")]
    assert failed == [f"FAILED max_new_tokens={FAILING_LENGTH}: 2 of 2 requests did not complete; first error: "
                      'HTTP 500: {"error": {"message": "the stub fails this length"}}']


def _record_or_none(line: str):
    try:
        return json.loads(line)
    except ValueError:
        return None


# --------------------------------------------------------------------------- server lifetime

HEALTH = textwrap.dedent('''
    import sys
    from http.server import BaseHTTPRequestHandler, HTTPServer
    class H(BaseHTTPRequestHandler):
        def log_message(self, *a): pass
        def do_GET(self):
            self.send_response(200 if self.path == "/health" else 404)
            self.send_header("content-length", "0"); self.end_headers()
    HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
''')

LAUNCHER = textwrap.dedent('''
    import sys, time
    from concurrent.futures import ThreadPoolExecutor
    from eagle3lab.serving import server
    # launched from a worker thread that ends at once (as loadsweep does): a parent-death signal
    # tied to that thread would kill the server while its launcher lives
    with ThreadPoolExecutor(1) as pool:
        handle = pool.submit(server.launch, command=[sys.executable, sys.argv[1], "{port}"],
                             log_file=sys.argv[2], timeout=30).result()
    print(handle.pid, handle.port, handle.watcher.pid, flush=True)
    time.sleep(300)
''')


def _gone_within(seconds: float, pid: int, port: int) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not server.process_alive(pid) and not server.port_in_use(port):
            return True
        time.sleep(0.1)
    return False


def test_a_server_dies_with_its_launcher_even_by_sigkill(tmp_path):
    """The launcher's worker thread ended long before; the server lives while the launcher
    does, and its group and port are gone within seconds of a SIGKILL to the launcher."""
    (tmp_path / "health.py").write_text(HEALTH)
    (tmp_path / "launcher.py").write_text(LAUNCHER)
    env = {**os.environ, "PYTHONPATH": str(ROOT), MARKER: "launcher"}
    proc = subprocess.Popen([sys.executable, str(tmp_path / "launcher.py"), str(tmp_path / "health.py"),
                             str(tmp_path / "server.log")], stdout=subprocess.PIPE, text=True, env=env)
    try:
        pid, port, watcher = map(int, proc.stdout.readline().split())
        time.sleep(1.0)  # the launching thread is long gone: the server must still serve
        assert server.process_alive(pid) and server.Server(f"http://127.0.0.1:{port}").healthy()
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        assert _gone_within(8, pid, port), "the server outlived its launcher"
        deadline = time.monotonic() + 5
        while _marked("launcher") and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _marked("launcher")  # the watchdog too
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_stop_ends_the_watchdog_with_the_server(tmp_path):
    (tmp_path / "health.py").write_text(HEALTH)
    handle = server.launch(command=[sys.executable, str(tmp_path / "health.py"), "{port}"],
                           log_file=tmp_path / "h.log", timeout=30)
    watcher = handle.watcher.pid
    assert server.process_alive(watcher)
    handle.stop()
    assert not server.process_alive(watcher) and not server.process_alive(handle.pid)
    assert handle.watcher.returncode is not None  # reaped, not a zombie of this process


def test_the_lab_server_launched_by_bench_dies_with_bench_on_sigkill(tmp_path):
    """`bench --backend lab --baseline` killed with SIGKILL once its server is up: the launched
    `eagle3lab serve` and its port are gone within seconds (the one lab-server launch of this file)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", MARKER: "bench-sigkill",
           "EAGLE3LAB_CACHE": str(tmp_path / "cache"), "PYTHONUNBUFFERED": "1"}
    prompts = tmp_path / "prompts.txt"  # not the lab's passages: no tokenizer load before the launch
    prompts.write_text("".join(f"a prompt about the number {i}\n" for i in range(8)))
    proc = subprocess.Popen([sys.executable, "-m", "eagle3lab", "bench", "--backend", "lab", "--lab", "ci",
                             "--draft", "healthy", "--num-steps", "3", "--topk", "1", "--baseline",
                             "--prompts", str(prompts), "--max-new-tokens", "256", "--timeout", "120"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env, cwd=tmp_path)
    try:
        line = ""
        deadline = time.monotonic() + 150
        while "launched" not in line and time.monotonic() < deadline:
            line = proc.stdout.readline()
            assert line or proc.poll() is None, "bench ended before its server was up"
        found = re.search(r"ServerHandle\(lab, http://127.0.0.1:(\d+), pid (\d+), running\)", line)
        assert found, line
        port, pid = int(found.group(1)), int(found.group(2))
        assert server.process_alive(pid)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        assert _gone_within(8, pid, port), "the lab server outlived bench"
        deadline = time.monotonic() + 5
        while _marked("bench-sigkill") and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _marked("bench-sigkill")
        assert len(list((tmp_path / "cache" / "server-logs").glob("*.log"))) == 1
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_the_server_log_folder_keeps_the_newest(tmp_path, monkeypatch):
    monkeypatch.setenv("EAGLE3LAB_CACHE", str(tmp_path))
    folder = tmp_path / "server-logs"
    folder.mkdir()
    for i in range(server.SERVER_LOGS_KEPT + 5):
        path = folder / f"lab-{i}.log"
        path.write_text("x")
        os.utime(path, (1_000_000 + i, 1_000_000 + i))
    (folder / "notes.txt").write_text("not a log")
    new = server._default_log_file("lab", 1234)
    kept = sorted(p.name for p in folder.glob("*.log"))
    assert len(kept) == server.SERVER_LOGS_KEPT - 1  # room for the log about to be written
    assert f"lab-{server.SERVER_LOGS_KEPT + 4}.log" in kept and "lab-5.log" not in kept and "lab-6.log" in kept
    assert (folder / "notes.txt").exists() and new.parent == folder


# --------------------------------------------------------------------------- the readers, in process

def test_the_doctor_counts_the_prompt_lines_it_cannot_use(tmp_path):
    from eagle3lab.doctor.prompts import read_prompts

    _write_inputs(tmp_path)
    mixed = read_prompts(tmp_path / "mixed.jsonl")
    assert list(mixed) == ["def f(x):\n    return x", "import os"]
    ran, unused = mixed.checks()
    assert ran.ran and ran.detail == "mixed.jsonl (JSON lines): 2 prompt(s)"
    assert not unused.ran and unused.detail == ('mixed.jsonl (JSON lines): 1 line without a non-empty "text", '
                                                '"prompt" or "messages"; 1 line not a JSON object')
    empty = read_prompts(tmp_path / "empty")
    assert list(empty) == [] and [(c.check, c.ran) for c in empty.checks()] == [("prompts", False)]
    # a plain-text file whose line starts with "{" is one prompt per line, not JSON lines
    code = tmp_path / "code.txt"
    code.write_text("{ not json } is a prompt too\nsecond\n")
    assert list(read_prompts(code)) == ["{ not json } is a prompt too", "second"]


def test_the_doctor_report_names_the_texts_it_scored():
    from eagle3lab.doctor.ranking import CheckStatus, DoctorReport

    report = DoctorReport("d", "t", None, [], [CheckStatus("prompts", False, "empty: no usable prompt")],
                          {"empirical_text": "held-out passages (heldout.jsonl), continued greedily by the target"})
    text = str(report)
    assert "texts scored: held-out passages (heldout.jsonl)" in text
    assert "checks that could not run:\n  - prompts: empty: no usable prompt" in text


def test_a_sweep_file_is_read_checked_and_appended_on_a_line_of_its_own(tmp_path):
    import threading as _threading

    from eagle3lab.serving import sweepinput

    out = tmp_path / "sweep.jsonl"
    assert sweepinput.check_out(out).records == [] and not out.exists()  # checked, not created
    whole = json.dumps({"point_key": "a", "tokens_per_s": 1.0})
    out.write_text(whole + "\n" + '{"point_key": "b", "tok')
    before = out.read_bytes()
    checked = sweepinput.check_out(out)
    assert out.read_bytes() == before and [r["point_key"] for r in checked.records] == ["a"] and checked.torn == 1
    assert checked.note().startswith(f"1 torn line in {out}")
    sweepinput.append(out, {"point_key": "c"}, _threading.Lock())
    assert out.read_text().splitlines() == [whole, '{"point_key": "b", "tok', '{"point_key": "c"}']
    with pytest.raises(sweepinput.SweepInputError, match="not a sweep file"):
        sweepinput.read_sweep_file(Path(__file__))


def test_bad_urls_are_refused_at_once_and_good_ones_normalised():
    assert server.check_url("gpu-box:30000") == "http://gpu-box:30000"
    assert server.check_url("https://gpu-box/v1/") == "https://gpu-box/v1"
    for bad, why in (("htp:/x y", "it holds spaces"), ("htp:/x", "a scheme needs '://'"), ("ftp://x", "scheme 'ftp'"),
                     ("http://", "no host"), ("http://h:port", "Port could not be cast"), ("", "it is empty")):
        with pytest.raises(server.ServerError, match=re.escape(why)):
            server.check_url(bad)

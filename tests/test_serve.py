"""The lab server: SGLang's HTTP API over the lab engine, in-process on an ephemeral port."""

from __future__ import annotations

import io
import json
import re
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest

from eagle3lab.spec import SpecConfig
from eagle3lab.engines.lab import frontend as srv


def ci_lab_root():
    from eagle3lab.lab import load_lab
    from eagle3lab.paths import lab_dir

    path = lab_dir("ci")
    if not (path / "manifest.json").is_file():
        load_lab("ci")
    return path


def post(url, payload, raw: bytes | None = None):
    data = raw if raw is not None else json.dumps(payload).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def get(url):
    with urllib.request.urlopen(url, timeout=60) as resp:
        body = resp.read()
        return resp.status, json.loads(body) if body else None


@pytest.fixture(scope="module")
def server():
    root = ci_lab_root()
    log = io.StringIO()
    srv.setup_logging(log)
    state = srv.load_state(str(root / "target"), str(root / "drafts" / "healthy"), 
                           spec=SpecConfig(num_steps=3, topk=1, num_draft_tokens=4), max_prompt_tokens=128,
                           max_new_tokens=64, decode_log_interval=2)
    httpd = srv.make_server(state, "127.0.0.1", 0)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    yield httpd.url, state, log
    httpd.shutdown()
    httpd.server_close()


def expected_greedy(state, ids, n):
    return state.engine.generate_plain(ids, n).output_ids


def test_health_and_server_info(server):
    url, state, _ = server
    assert get(url + "/health")[0] == 200
    assert get(url + "/health_generate")[0] == 200
    code, info = get(url + "/get_server_info")
    assert code == 200
    assert (info["speculative_num_steps"], info["speculative_eagle_topk"],
            info["speculative_num_draft_tokens"]) == (3, 1, 4)
    assert info["speculative_algorithm"] == "EAGLE3"
    assert info["aux_hidden_state_boundaries"] == [2, 4, 5]


def test_generate_text_and_ids_match_plain_greedy(server):
    url, state, _ = server
    code, out = post(url + "/generate", {"text": "def main(argv):\n    ", "sampling_params":
                                         {"max_new_tokens": 24, "temperature": 0, "ignore_eos": True}})
    assert code == 200
    ids = state.tokenizer("def main(argv):\n    ", add_special_tokens=False)["input_ids"]
    assert out["output_ids"] == expected_greedy(state, ids, 24)
    assert out["text"] == state.tokenizer.decode(out["output_ids"], skip_special_tokens=True)
    meta = out["meta_info"]
    assert meta["prompt_tokens"] == len(ids) and meta["completion_tokens"] == 24
    assert meta["spec_verify_ct"] >= 1
    assert meta["spec_accept_length"] == pytest.approx(24 / meta["spec_verify_ct"])
    assert meta["finish_reason"]["type"] == "length"
    code, out2 = post(url + "/generate", {"input_ids": ids, "sampling_params":
                                          {"max_new_tokens": 24, "temperature": 0, "ignore_eos": True}})
    assert code == 200 and out2["output_ids"] == out["output_ids"]


def test_concurrent_requests_are_all_answered_correctly(server):
    url, state, _ = server
    prompts = [[5 + i, 17, 200 + i, 33, 8] for i in range(5)]
    results = [None] * len(prompts)

    def call(i):
        results[i] = post(url + "/generate", {"input_ids": prompts[i], "sampling_params":
                                              {"max_new_tokens": 20, "temperature": 0, "ignore_eos": True}})

    threads = [threading.Thread(target=call, args=(i,)) for i in range(len(prompts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    for i, (code, out) in enumerate(results):
        assert code == 200
        assert out["output_ids"] == expected_greedy(state, prompts[i], 20)


def test_bad_requests_get_400_and_the_server_keeps_serving(server):
    url, state, _ = server
    code, err = post(url + "/generate", None, raw=b"{not json")
    assert code == 400 and "error" in err
    assert post(url + "/generate", {"sampling_params": {}})[0] == 400
    assert post(url + "/generate", {"input_ids": [1, "x"]})[0] == 400
    code, err = post(url + "/generate", {"input_ids": [1, 2], "sampling_params": {"max_new_tokens": 10_000}})
    assert code == 400 and "cap" in err["error"]["message"]
    code, err = post(url + "/generate", {"input_ids": [1] * 500})
    assert code == 400 and "at most 128" in err["error"]["message"]
    assert post(url + "/generate", {"input_ids": [1, 2], "sampling_params": {"temperature": "hot"}})[0] == 400
    assert post(url + "/nowhere", {})[0] == 404
    code, out = post(url + "/generate", {"input_ids": [3, 4, 5], "sampling_params": {"max_new_tokens": 4}})
    assert code == 200 and len(out["output_ids"]) <= 4


def test_openai_completions(server):
    url, state, _ = server
    code, out = post(url + "/v1/completions", {"model": "lab", "prompt": "import os\n", "max_tokens": 8,
                                               "temperature": 0})
    assert code == 200
    assert out["object"] == "text_completion" and len(out["choices"]) == 1
    assert out["usage"]["completion_tokens"] <= 8
    assert out["choices"][0]["finish_reason"] in ("length", "stop")


def test_logs_are_sglang_lines_read_log_parses(server):
    from eagle3lab.sources.logfile import read_log

    url, state, log = server
    post(url + "/generate", {"input_ids": [7, 8, 9, 10], "sampling_params":
                             {"max_new_tokens": 30, "temperature": 0, "ignore_eos": True}})
    text = log.getvalue()
    assert "Prefill batch, #new-seq: 1, #new-token: 4, #cached-token: 0" in text
    df = read_log(text)
    decode = df[df["kind"] == "decode"]
    assert len(decode) >= 1 and decode["accept_len"].notna().all()
    al = decode["accept_len"]
    # each line: the mean of 2 verify steps (decode_log_interval=2), each a whole 1..4 tokens
    assert ((al * 2).round(6) % 1 == 0).all() and al.between(1, 4).all()
    # SGLang 0.5.23's accept rate: accepted drafts / (steps x (num_draft_tokens - 1))
    assert ((decode["accept_rate_raw"] - (al - 1) / 3).abs() <= 0.006).all()
    assert decode["gen_throughput"].notna().all()
    assert (df["kind"] == "prefill").any()


def test_topk1_adjustment_is_resolved_like_sglang():
    root = ci_lab_root()
    state = srv.load_state(str(root), None, spec=SpecConfig(num_steps=1, topk=1, num_draft_tokens=16),
                           max_prompt_tokens=64, max_new_tokens=32)
    info = state.info()
    assert info["speculative_num_draft_tokens"] == 2
    assert any("adjusted" in w for w in info["speculative_warnings"])
    assert info["draft_name"] == "healthy"


def test_fault_switches_the_served_draft():
    root = ci_lab_root()
    state = srv.load_state(str(root / "target"), str(root / "drafts" / "healthy"), 
                           spec=SpecConfig(num_steps=2, topk=1, num_draft_tokens=3), faults=["wiring-seed"],
                           max_prompt_tokens=64, max_new_tokens=32)
    assert state.info()["draft_name"] == "seed" and state.info()["faults"] == ["wiring-seed"]


def test_chat_template_fault_serves_prompts_in_the_template():
    from eagle3lab.decoder.speculate import SpecEngine

    root = ci_lab_root()
    state = srv.load_state(str(root / "target"), str(root / "drafts" / "healthy"),
                           spec=SpecConfig(num_steps=2, topk=1, num_draft_tokens=3), faults=["chat-template"],
                           max_prompt_tokens=64, max_new_tokens=16)
    assert state.info()["faults"] == ["chat-template"]
    ids = state.tokenizer("def f(x):\n    return", add_special_tokens=False)["input_ids"]
    out = state.handle_generate({"text": "def f(x):\n    return",
                                 "sampling_params": {"max_new_tokens": 8, "temperature": 0}})
    prefix, suffix = state.engine.prompt_template
    assert out["meta_info"]["prompt_tokens"] == 50 + len(ids) + 25 == len(prefix + ids + suffix)
    assert out["output_ids"] == SpecEngine(state.engine.target).generate_plain(prefix + ids + suffix, 8).output_ids


def test_serve_command_starts_answers_and_stops_on_sigterm():
    root = ci_lab_root()
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "eagle3lab", "serve", "--model-path", str(root / "target"),
         "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", str(root / "drafts" / "healthy"),
         "--speculative-num-steps", "1", "--speculative-eagle-topk", "1",
         "--speculative-num-draft-tokens", "16", "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        lines, url = [], None
        deadline = time.time() + 120
        while time.time() < deadline and url is None:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if "ready on " in line:
                url = line.split("ready on ")[1].strip()
        assert url, "".join(lines)
        assert url.startswith("http://127.0.0.1:")
        assert any("adjusted to speculative_num_steps + 1" in l for l in lines)
        code, out = post(url + "/generate", {"text": "x = ", "sampling_params": {"max_new_tokens": 5}})
        assert code == 200 and out["meta_info"]["completion_tokens"] <= 5
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_serve_rejects_bad_flags(capsys):
    from eagle3lab.cli import main

    assert main(["serve", "--model-path", "/no/such/dir", "--port", "0"]) == 2
    assert "not a model directory" in capsys.readouterr().err
    assert main(["serve", "--model-path", "x", "--speculative-num-steps", "0"]) == 2




def test_sigterm_to_a_bench_stops_the_server_it_launched(tmp_path):
    """`kill PID` of a command measuring on a server it launched leaves no server behind (exit 143)
    and sends none of the prompts still queued (200 of them would take the lab a minute or more)."""
    from eagle3lab.serving.server import port_in_use

    root = ci_lab_root()
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("".join(f"Passage {i}: the river ran past the mill and on to the sea.\n"
                               for i in range(200)))
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "eagle3lab", "bench", "--backend", "lab", "--lab", "ci",
         "--model-path", str(root / "target"), "--draft", str(root / "drafts" / "healthy"),
         "--num-steps", "3", "--topk", "1", "--num-draft-tokens", "4", "--prompts", str(prompts),
         "--num-prompts", "200", "--max-new-tokens", "256"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        url = None
        deadline = time.time() + 180
        while time.time() < deadline and url is None:
            line = proc.stdout.readline()
            if not line:
                break
            if line.startswith("launched "):
                url = next(w for w in line.split() if w.startswith("http")).strip("',)>")
        assert url, proc.stderr.read()
        port = int(url.rstrip("/").rsplit(":", 1)[1])
        assert port_in_use(port)
        chunks = []  # stderr, read as it comes: the progress bar says when requests are under way
        reader = threading.Thread(target=lambda: chunks.extend(iter(lambda: proc.stderr.read(1), "")),
                                  daemon=True)
        reader.start()
        while time.time() < deadline and not re.search(r"\b[1-9]\d*/200\b", "".join(chunks)):
            assert proc.poll() is None, "".join(chunks)[-3000:]
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=60)
        reader.join(timeout=10)
        err = "".join(chunks)
        assert rc == 143, f"exit {rc}, not 143 (SIGTERM); stderr:\n{err[-3000:]}"
        assert "terminated (servers it launched were stopped)" in err
        assert "200/200" not in err, f"the queued prompts were still sent after SIGTERM:\n{err[-3000:]}"
        assert not port_in_use(port)
        assert _processes_with(f"--port\0{port}\0".encode()) == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _processes_with(argv_bytes: bytes) -> list[str]:
    """Pids whose command line contains these bytes (NUL-separated argv)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if argv_bytes in fh.read():
                    found.append(pid)
        except OSError:  # gone meanwhile
            pass
    return found

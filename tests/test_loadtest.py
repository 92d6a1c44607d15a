"""Benchmarks and sweeps against a small SGLang-compatible HTTP server (stdlib only, fast)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap

import pytest

from eagle3lab.serving import loadtest
from eagle3lab.serving import server

# Speaks SGLang's /health, /get_server_info and /generate (SSE when stream=true). Every request
# emits max_new_tokens tokens in rounds of --accept tokens (the last round may be shorter), so
# spec_verify_ct = ceil(n / accept). --die-after K: exit hard while serving request K+1.
FAKE_SERVER = textwrap.dedent('''
    import argparse, json, math, os, threading, time
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int); p.add_argument("--accept", type=int, default=3)
    p.add_argument("--steps", type=int, default=2); p.add_argument("--die-after", type=int, default=-1)
    p.add_argument("--no-stream", action="store_true"); p.add_argument("--delay", type=float, default=0.002)
    p.add_argument("--refuse-stream", action="store_true")
    p.add_argument("--fault", default=None); p.add_argument("--no-spec", action="store_true")
    a = p.parse_args()
    count = [0]; lock = threading.Lock()

    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        def log_message(self, *args): pass
        def reply(self, code, body):
            data = json.dumps(body).encode()
            self.send_response(code); self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data))); self.end_headers(); self.wfile.write(data)
        def do_GET(self):
            if self.path == "/health": return self.reply(200, {})
            if self.path == "/get_server_info" and a.no_spec:
                return self.reply(200, {"speculative_algorithm": None,
                                        **({"fault": a.fault.split(",")} if a.fault else {})})
            if self.path == "/get_server_info":
                return self.reply(200, {"speculative_num_steps": a.steps, "speculative_eagle_topk": 1,
                                        "speculative_num_draft_tokens": a.steps + 1,
                                        "speculative_algorithm": "EAGLE3",
                                        **({"fault": a.fault.split(",")} if a.fault else {})})
            self.reply(404, {"error": "no"})
        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            with lock:
                count[0] += 1; k = count[0]
            if a.die_after >= 0 and k > a.die_after:
                time.sleep(0.05); os._exit(1)
            if body.get("stream") and a.refuse_stream:
                return self.reply(400, {"error": {"message": "stream=true is not supported"}})
            n = body["sampling_params"]["max_new_tokens"]
            prompt = len(body.get("input_ids") or body.get("text", "").split())
            def meta(done, verify, finished):
                m = {"prompt_tokens": prompt, "completion_tokens": done,
                     "finish_reason": {"type": "length"} if finished else None}
                return m if a.no_spec else {**m, "spec_verify_ct": verify}
            accept = 1 if a.no_spec else a.accept
            rounds = [min(accept, n - i) for i in range(0, n, accept)]
            if not body.get("stream") or a.no_stream:
                time.sleep(a.delay * len(rounds))
                return self.reply(200, {"text": "x " * n, "meta_info": meta(n, len(rounds), True)})
            self.send_response(200); self.send_header("content-type", "text/event-stream")
            self.send_header("connection", "close"); self.end_headers()
            done = 0
            for i, r in enumerate(rounds):
                time.sleep(a.delay); done += r
                chunk = {"text": "x " * done, "meta_info": meta(done, i + 1, i == len(rounds) - 1)}
                self.wfile.write(f"data: {json.dumps(chunk)}\\n\\n".encode()); self.wfile.flush()
            self.wfile.write(b"data: [DONE]\\n\\n"); self.wfile.flush()
            self.close_connection = True

    ThreadingHTTPServer.daemon_threads = True
    ThreadingHTTPServer(("127.0.0.1", a.port), H).serve_forever()
''')


@pytest.fixture(scope="module")
def fake_script(tmp_path_factory):
    path = tmp_path_factory.mktemp("fake") / "fake_sglang.py"
    path.write_text(FAKE_SERVER)
    return path


def start_fake(script, tmp_path, *args):
    return server.launch(command=[sys.executable, str(script), "--port", "{port}", *args],
                         log_file=tmp_path / f"fake-{len(args)}.log", timeout=30)


PROMPTS = ["one two three", [1, 2, 3, 4, 5], "a b", "c d e f"] * 3


def test_run_reports_throughput_ttft_latency_and_accept_length(fake_script, tmp_path):
    with start_fake(fake_script, tmp_path, "--accept", "3") as srv:
        result = loadtest.run(srv.url, PROMPTS, max_new_tokens=10, concurrency=3, progress=False)
    df = result.requests
    assert not result.failed and len(result.completed) == len(PROMPTS) and result.meta["stream"]
    assert list(df["completion_tokens"]) == [10] * len(PROMPTS)
    assert list(df["spec_verify_ct"]) == [4] * len(PROMPTS)  # rounds of 3,3,3,1
    assert df["accept_length"].tolist() == pytest.approx([2.5] * len(PROMPTS))
    assert result.accept_length == pytest.approx(2.5)
    assert df.loc[1, "prompt_tokens"] == 5  # token-id prompts go as input_ids
    assert (df["ttft_s"] > 0).all() and (df["ttft_s"] <= df["latency_s"]).all()
    assert result.tokens_per_s == pytest.approx(10 * len(PROMPTS) / result.wall_s)
    assert result.summary()["completed"] == len(PROMPTS)


@pytest.mark.parametrize("mode", ["--no-stream", "--refuse-stream"])
def test_a_server_without_streaming_still_measures_but_no_ttft(fake_script, tmp_path, mode):
    with start_fake(fake_script, tmp_path, mode, "--accept", "2") as srv:
        result = loadtest.run(srv.url, PROMPTS[:4], max_new_tokens=6, concurrency=2, progress=False)
    assert not result.failed and len(result.completed) == 4
    assert result.requests["ttft_s"].isna().all() and result.meta["stream"] is False
    assert result.accept_length == pytest.approx(2.0)


def test_server_dying_mid_run_returns_completed_rows_marked_failed(fake_script, tmp_path):
    with start_fake(fake_script, tmp_path, "--die-after", "5") as srv:
        result = loadtest.run(srv.url, PROMPTS, max_new_tokens=4, concurrency=1, progress=False)
        assert srv.process.wait(timeout=10) == 1  # it really died
    assert result.failed and "did not complete" in result.error
    assert len(result.completed) == 5
    assert len(result.requests) < len(PROMPTS)  # stopped sending once the server was gone
    assert not math.isnan(result.tokens_per_s)


def test_speedup_and_compare(fake_script, tmp_path):
    with start_fake(fake_script, tmp_path, "--accept", "4", "--delay", "0.03") as fast, \
            start_fake(fake_script, tmp_path, "--accept", "1", "--delay", "0.03") as slow:
        spec = loadtest.run(fast.url, PROMPTS[:4], max_new_tokens=8, progress=False)
        base = loadtest.run(slow.url, PROMPTS[:4], max_new_tokens=8, progress=False)
    assert loadtest.speedup(spec, base) > 1.5  # 2 rounds vs 8 rounds of the same delay
    assert spec.accept_length == pytest.approx(4.0) and base.accept_length == pytest.approx(1.0)
    table = loadtest.compare({"eagle3": spec, "baseline": base}, baseline="baseline")
    assert table.set_index("run").loc["baseline", "speedup"] == pytest.approx(1.0)


def test_grid_points_and_effective_config():
    points = loadtest.grid_points({"num_steps": [1, 3], "topk": [1, 4]})
    assert len(points) == 4 and {"num_steps": 3, "topk": 4} in points
    eff = loadtest.effective_config({"num_steps": 3, "topk": 1, "num_draft_tokens": 8})
    assert eff["effective_num_steps"] == 3 and eff["effective_topk"] == 1
    assert eff["effective_num_draft_tokens"] == 4  # chain: SGLang sets num_steps + 1
    assert eff["effective_changed"]


def test_sweep_over_running_servers_is_resumable(fake_script, tmp_path):
    out = tmp_path / "sweep.jsonl"
    grid = {"num_steps": [2, 5], "max_new_tokens": [4, 6]}
    with start_fake(fake_script, tmp_path, "--steps", "2") as a, \
            start_fake(fake_script, tmp_path, "--steps", "5", "--accept", "4") as b:
        df = loadtest.sweep(grid, PROMPTS[:3], out=out, urls=[a.url, b.url], progress=False)
        assert len(df) == 4 and not df["failed"].any()
        by_steps = df.groupby("asked_num_steps")["url"].unique()
        assert list(by_steps[2]) == [a.url] and list(by_steps[5]) == [b.url]  # matched by config
        assert (df["server_num_steps"] == df["asked_num_steps"]).all()
        assert set(df["effective_num_steps"]) == {2, 5}
        assert len(loadtest.load_points(out)) == 4
        # Rerun with more points: only the new ones are measured and appended.
        again = loadtest.sweep({**grid, "max_new_tokens": [4, 6, 8]}, PROMPTS[:3], out=out,
                            urls=[a.url, b.url], progress=False)
        assert len(again) == 6 and len(loadtest.load_points(out)) == 6
        assert again["wall_s"].tolist()[:2] == df["wall_s"].tolist()[:2]  # old rows reused
        with pytest.raises(loadtest.LoadTestError, match="no running server runs any"):
            loadtest.sweep({"num_steps": [7]}, PROMPTS[:1], urls=[a.url, b.url], progress=False)


def test_sweep_launching_a_server_per_point(fake_script, tmp_path):
    """Each point launches the backend with its flags; the fake takes --speculative-num-steps."""
    wrapper = tmp_path / "wrap.py"
    wrapper.write_text(textwrap.dedent(f'''
        import sys, os
        argv = sys.argv[1:]
        port = argv[argv.index("--port") + 1]
        steps = argv[argv.index("--speculative-num-steps") + 1] if "--speculative-num-steps" in argv else None
        extra = ["--fault", argv[argv.index("--fault") + 1]] if "--fault" in argv else []
        spec = ["--steps", steps, "--accept", "3"] if steps else ["--no-spec"]
        os.execv(sys.executable, [sys.executable, {str(fake_script)!r}, "--port", port, "--delay", "0.05", *spec, *extra])
    '''))
    out = tmp_path / "launched.jsonl"
    # topk 1: SGLang (whose rules the lab server follows) refuses num_steps without a topk, and the
    # sweep refuses such a point before launching anything (tests/test_bad_input.py)
    df = loadtest.sweep({"num_steps": [1, 3], "topk": [1], "fault": ["none", "no-d2t"]}, PROMPTS[:2], max_new_tokens=6,
                     out=out, backend="lab", model_path="unused", progress=False, baseline=True,
                     launch_kwargs={"command": lambda argv: [sys.executable, str(wrapper), *argv[4:]]})
    assert len(df) == 5 and not df["failed"].any()  # one baseline (no quantization) + 4 points
    spec = df[df["asked_baseline"].isna()]
    assert (spec["server_num_steps"] == spec["asked_num_steps"]).all()
    assert spec.set_index(["asked_num_steps", "asked_fault"]).loc[(3, "no-d2t"), "server_fault"] == ["no-d2t"]
    base = df[df["asked_baseline"].eq(True)].iloc[0]
    assert math.isnan(base["accept_length"]) and base["speedup"] == pytest.approx(1.0)
    assert (spec["speedup"] > 1.5).all()  # rounds of 3 tokens vs 1 at the same delay


def test_cli_bench_against_a_url(fake_script, tmp_path):
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("hello there\nhow are you\n")
    with start_fake(fake_script, tmp_path) as srv:
        proc = subprocess.run([sys.executable, "-m", "eagle3lab", "bench", "--url", srv.url,
                               "--prompts", str(prompts), "--max-new-tokens", "6", "--json"],
                              capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["completed"] == 2 and summary["accept_length"] == pytest.approx(3.0)  # 6 tokens in rounds of 3


def test_cli_sweep_over_urls_resumes(fake_script, tmp_path):
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("hello there\nhow are you\n")
    out = tmp_path / "cli.jsonl"
    with start_fake(fake_script, tmp_path, "--steps", "3") as a, \
            start_fake(fake_script, tmp_path, "--no-spec") as b:
        cmd = [sys.executable, "-m", "eagle3lab", "sweep", "--url", a.url, "--url", b.url,
               "--prompts", str(prompts), "--max-new-tokens", "6", "--grid", "num_steps=3,5",
               "--grid", "concurrency=1,2", "--baseline", "--out", str(out)]
        first = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert first.returncode == 0, first.stderr
        # concurrency is load (eagle3lab.serving.loadsweep): one row per concurrency, its baseline inside
        assert len(loadtest.load_points(out)) == 2 and "speed-up" in first.stdout
        assert [r["concurrency"] for r in loadtest.load_points(out)] == [1, 2]
        # num_steps=5 runs on neither server: said so, not recorded
        assert first.stdout.splitlines()[-1] == "2 rows skipped: no running server runs their settings (not recorded)"
        again = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and len(loadtest.load_points(out)) == 2  # nothing re-measured
    bad = subprocess.run([sys.executable, "-m", "eagle3lab", "sweep", "--url", "http://x", "--grid",
                          "num_steps", "--out", str(out), "--prompts", str(prompts)],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "KEY=V1,V2" in bad.stderr and "Traceback" not in bad.stderr


def test_point_flags_per_backend():
    point = {"num_steps": 3, "topk": 1, "quantization": "int4", "fault": "wiring-seed", "concurrency": 4}
    assert loadtest._point_spec(point, "lab") == {"num_steps": 3, "topk": 1, "fault": "quant-int4,wiring-seed"}
    assert loadtest._point_spec({"num_steps": 2, "quantization": "fp8"}, "sglang") == {"num_steps": 2, "quantization": "fp8"}
    # The no-speculation twin keeps only what changes the target, plus the request settings.
    assert loadtest.baseline_points([point], "lab") == [{"baseline": True, "fault": "quant-int4", "concurrency": 4}]
    argv = server.build_command("lab", "/t", "/d", spec=loadtest._point_spec(point, "lab"))
    assert argv[argv.index("--fault") + 1] == "quant-int4" and argv.count("--fault") == 2
    with pytest.raises(loadtest.LoadTestError, match="lab switches"):
        loadtest.sweep({"fault": ["no-d2t"]}, ["x"], backend="sglang", model_path="/m", progress=False)

"""vLLM as a real backend, on the ci lab, with vLLM's CPU build (no skips: the vLLM python is
found as `vllm_launch.find_vllm_python` says; in CI it is .venv-vllm from scripts/setup_vllm.sh).

The session's vLLM server (conftest.vllm_healthy: healthy draft, 3 draft tokens) serves most
tests; the CLI bench (speculative + baseline) and the sweep launch their own. The last test that
uses it kills it (no later test file uses it).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from eagle3lab.engines.vllm import launch as vllm_launch
from eagle3lab.serving import loadtest
from eagle3lab.serving import server
from eagle3lab.serving.server import process_alive
from eagle3lab.engines.vllm import metrics as vllm_metrics

K = 3  # conftest.VLLM_SPEC_TOKENS
ENV = {"VLLM_LOG_STATS_INTERVAL": "1"}  # SpecDecoding lines every second of traffic, not every 10 s


@pytest.fixture(scope="module")
def ci_lab():
    from eagle3lab.lab import load_lab

    return load_lab("ci")


@pytest.fixture(scope="module")
def vllm_python():
    return vllm_launch.find_vllm_python()


@pytest.fixture(scope="module")
def healthy(vllm_healthy):
    return vllm_healthy


def assert_gone(handle):
    """No process of the server's group is left, and its port is free."""
    assert not handle.alive
    assert not server._group_alive(handle.pid), "a process of the vLLM group survived"
    assert not server.port_in_use(handle.port)


def prompts(lab, n=4):
    return lab.heldout_prompts(n, 48)


# --------------------------------------------------------------------------- finding and argv

def test_the_vllm_python_is_found_explicit_then_env_then_repo_then_this_python(tmp_path, monkeypatch):
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv(vllm_launch.VLLM_PYTHON_ENV, sys.executable)
    assert vllm_launch.find_vllm_python(fake) == str(fake)  # the explicit path wins
    assert vllm_launch.find_vllm_python() == sys.executable  # then the environment variable
    with pytest.raises(vllm_launch.VllmNotFoundError, match="--vllm-python=/nowhere/python"):
        vllm_launch.find_vllm_python("/nowhere/python")
    monkeypatch.setenv(vllm_launch.VLLM_PYTHON_ENV, str(tmp_path / "missing"))
    with pytest.raises(vllm_launch.VllmNotFoundError, match=vllm_launch.VLLM_PYTHON_ENV):
        vllm_launch.find_vllm_python()
    monkeypatch.delenv(vllm_launch.VLLM_PYTHON_ENV)
    repo = vllm_launch._repo_root() / ".venv-vllm" / "bin" / "python"
    if repo.is_file():
        assert vllm_launch.find_vllm_python() == str(repo)
    else:  # no repo venv: this python if it has vLLM, else a clear error
        import importlib.util

        if importlib.util.find_spec("vllm"):
            assert vllm_launch.find_vllm_python() == sys.executable
        else:
            with pytest.raises(vllm_launch.VllmNotFoundError, match="setup_vllm.sh"):
                vllm_launch.find_vllm_python()


def test_the_argv_comes_from_one_spec_config_and_vllms_own_parser_reads_it(vllm_python):
    from eagle3lab.spec import SpecConfig

    argv = vllm_launch.build_vllm_command("/t", "/d", SpecConfig(num_steps=3, max_running_requests=4), port=8123,
                                     python=vllm_python, gpu=False)
    assert argv[:3] == [vllm_python, "-m", vllm_launch.VLLM_MODULE]
    assert json.loads(argv[argv.index("--speculative-config") + 1]) == {
        "method": "eagle3", "model": "/d", "num_speculative_tokens": 3}
    gpu_argv = vllm_launch.build_vllm_command("/t", "/d", {"num_draft_tokens": 4}, python=vllm_python, gpu=True,
                                         extra_args=["--tensor-parallel-size", "2"])
    assert "--enforce-eager" not in gpu_argv and "--dtype" not in gpu_argv  # CPU settings only on CPU
    from eagle3lab import engines

    launch_env = engines.get("vllm").launch_env  # the model in the EngineCore on a CPU; vLLM's layout on a GPU
    assert launch_env(False)["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0" and launch_env(True) == {}
    assert json.loads(gpu_argv[gpu_argv.index("--speculative-config") + 1])["num_speculative_tokens"] == 3
    plain = vllm_launch.build_vllm_command("/t", None, None, python=vllm_python, gpu=False,
                                      extra_args=["--max-model-len", "256"])
    assert "--speculative-config" not in plain and plain.count("--max-model-len") == 1
    for bad, why in (({"num_steps": 3, "topk": 4}, "chain"), ({"num_steps": 3, "fault": "no-ttt"}, "lab engine"),
                     ({"page_size": 16, "num_steps": 2}, "no vLLM flag")):
        with pytest.raises(server.ServerError, match=why):
            vllm_launch.build_vllm_command("/t", "/d", bad, python=vllm_python, gpu=False)
    with pytest.raises(server.ServerError, match="needs draft_path"):
        vllm_launch.build_vllm_command("/t", None, {"num_steps": 3}, python=vllm_python, gpu=False)
    # vLLM's own serve parser (vllm/entrypoints/launchers/api_server/entry.py: make_arg_parser)
    probe = ("import json, sys\n"
             "from vllm.utils.argparse_utils import FlexibleArgumentParser\n"
             "from vllm.entrypoints.launchers.cli_args import make_arg_parser\n"
             "a = make_arg_parser(FlexibleArgumentParser()).parse_args(sys.argv[1:])\n"
             "print(json.dumps({k: getattr(a, k) for k in ('model', 'host', 'port', 'dtype', 'enforce_eager',"
             " 'gpu_memory_utilization', 'max_model_len', 'max_num_seqs', 'speculative_config',"
             " 'per_request_spec_decode_metrics')}, default=str))\n")
    out = subprocess.run([vllm_python, "-c", probe, *argv[3:]], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    parsed = json.loads(out.stdout.strip().splitlines()[-1])
    assert parsed == {"model": "/t", "host": "127.0.0.1", "port": 8123, "dtype": "float32",
                      "enforce_eager": True, "gpu_memory_utilization": 0.1, "max_model_len": 512,
                      "max_num_seqs": 4, "per_request_spec_decode_metrics": "summary",
                      "speculative_config": {"method": "eagle3", "model": "/d", "num_speculative_tokens": 3}}


def test_a_port_in_use_is_reported_before_anything_starts(healthy, ci_lab):
    with pytest.raises(server.PortInUseError, match=f"port {healthy.port}"):
        server.launch("vllm", ci_lab.target_dir, None, port=healthy.port)


# --------------------------------------------------------------------------- observations

def test_metrics_window_matches_the_requests_and_earlier_traffic_does_not_leak(healthy, ci_lab):
    warmup = loadtest.run(healthy, prompts(ci_lab, 2), max_new_tokens=16, progress=False)
    assert warmup.meta["api"] == "openai" and not warmup.failed
    obs, result = loadtest.observe_metrics(healthy, prompts(ci_lab), max_new_tokens=48,
                                       requested={"num_steps": K})
    assert not result.failed and obs.warnings == []  # the per-request side adds up to the window
    steps = obs.frame
    assert obs.n_steps == len(steps) == int(result.requests["spec_verify_ct"].sum())
    accepted = steps["accepted"].to_numpy()
    assert obs.accept_length == pytest.approx(1 + accepted.sum() / len(accepted), abs=1e-12)
    assert obs.accept_length == pytest.approx(result.accept_length, abs=1e-12)
    assert obs.effective == {"num_steps": K, "topk": 1, "num_draft_tokens": K + 1}
    assert obs.conditional is False and obs.engine == "vllm" and obs.n_requests == 4
    table = obs.per_position
    assert list(table["position"]) == list(range(1, K + 1))
    expect = [(accepted > i).mean() for i in range(K)]  # P(at least i+1 accepted)
    assert np.allclose(table["rate"], expect, atol=1e-12)
    assert (table["lo"] <= table["rate"]).all() and (table["rate"] <= table["hi"]).all()
    lo, hi = obs.accept_length_ci95
    assert lo <= obs.accept_length <= hi
    cond = vllm_metrics.conditional(obs)
    assert np.allclose(np.cumprod(cond["rate"]), table["rate"], atol=1e-12)
    assert cond["n"].iloc[0] == obs.n_steps
    # completion token counts: every request generated what it was asked for or stopped
    assert result.requests["completion_tokens"].le(48).all() and result.requests["completion_tokens"].gt(0).all()


def test_the_counters_are_summed_over_engines_and_a_restart_is_caught(healthy):
    import requests

    text = requests.get(f"{healthy.url}/metrics", timeout=10).text
    one = vllm_metrics.parse(text)
    assert one.present and one.k == K
    lines = []
    for line in text.splitlines():
        lines.append(line)
        if line.startswith("vllm:spec_decode_") and 'engine="0"' in line:
            lines.append(line.replace('engine="0"', 'engine="1"'))  # a second engine (data parallel)
    both = vllm_metrics.parse("\n".join(lines) + "\n")
    assert both.drafts == 2 * one.drafts and both.per_position == [2 * x for x in one.per_position]
    later = vllm_metrics.Counters(one.drafts + 1, one.draft_tokens + K, one.accepted, list(one.per_position), True)
    with pytest.raises(vllm_metrics.VllmMetricsError, match="restarted"):
        _ = one - later  # counters that went down: another server (a restart) answered
    with pytest.raises(vllm_metrics.VllmMetricsError, match="Prometheus"):
        vllm_metrics.parse("vllm:spec_decode_num_drafts_total{engine=0 nonsense\n")


def test_the_log_reader_reads_vllm_0_32_spec_decoding_lines(healthy, ci_lab):
    from eagle3lab.sources.logfile import read_log

    loadtest.run(healthy, prompts(ci_lab, 2), max_new_tokens=32, progress=False)
    total = vllm_metrics.scrape(healthy)
    deadline = time.monotonic() + 30
    while True:  # the log prints the last interval one tick after the traffic
        rows = read_log(healthy.log_file)
        spec = rows[(rows["engine"] == "vllm") & (rows["kind"] == "spec")]
        if spec["accepted"].sum() >= total.accepted or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert spec["accepted"].sum() == total.accepted and spec["drafted"].sum() == total.draft_tokens
    assert spec["per_position"].map(len).eq(K).all()
    assert spec["accept_len"].notna().all()


def test_a_sweep_over_running_vllm_servers_places_points_by_their_metrics(healthy, ci_lab, tmp_path):
    """`eagle3lab sweep --url`: a vLLM server started elsewhere is recognised (no
    /get_server_info), its draft-token count read from /metrics; a point it does not run is skipped."""
    remote = server.connect(healthy.url)
    assert remote.api == "openai" and loadtest.reported_settings(remote) == {
        "algorithm": "EAGLE3", "num_steps": K, "topk": 1, "num_draft_tokens": K + 1}
    out = tmp_path / "sweep.jsonl"
    frame = loadtest.sweep({"num_steps": [K, K + 2]}, prompts(ci_lab, 2), max_new_tokens=16, urls=[healthy.url],
                           out=out, progress=False, baseline=True)
    by_steps = frame.set_index(frame["asked_num_steps"].fillna(0).astype(int))
    assert not by_steps.loc[K, "failed"] and by_steps.loc[K, "url"] == healthy.url
    assert len(by_steps.loc[K, "per_position"]) == K and by_steps.loc[K, "accept_length"] > 1
    assert by_steps.loc[K, "effective_num_draft_tokens"] == K + 1  # vLLM's rules for vLLM servers
    assert bool(by_steps.loc[K + 2, "skipped"]) and bool(by_steps.loc[0, "skipped"])  # K + 2 and the baseline
    assert len(out.read_text().splitlines()) == 1


def test_a_load_sweep_on_the_running_vllm_reads_each_concurrency_window_from_its_counters(healthy, ci_lab):
    """`eagle3lab sweep --url ... --grid concurrency=1,2`: the one server serves both
    concurrencies; each window's acceptance is its own /metrics difference, and the per-request
    acceptance vLLM returns adds up to it even with two requests in flight."""
    from eagle3lab.serving import loadsweep

    frame = loadsweep.sweep({"concurrency": [2, 1]}, prompts(ci_lab, 4), urls=[healthy.url], max_new_tokens=16,
                            progress=False)
    assert list(frame["concurrency"]) == [1, 2] and (frame["url"] == healthy.url).all()
    assert not frame["failed"].any() and (frame["completed"] == 4).all() and (frame["server_num_steps"] == K).all()
    for row in frame.to_dict("records"):
        assert row["acceptance_warnings"] == []  # only this window's traffic in the counters
        assert len(row["per_position"]) == K and row["verify_steps"] > 0
        assert row["per_position"] == sorted(row["per_position"], reverse=True)  # P(at least i accepted)
        for rate, (lo, hi) in zip(row["per_position"], row["per_position_ci95"]):
            assert 0 <= lo <= rate <= hi <= 1
        lo, hi = row["accept_length_ci95"]
        assert 1 <= lo <= row["accept_length"] <= hi <= K + 1
        assert row["accept_length"] == pytest.approx(1 + sum(row["per_position"]), abs=1e-12)
        assert 0 < row["ttft_s"] and 0 < row["itl_s"] and row["completion_tokens"] <= 4 * 16
        for key in ("tokens_per_s", "request_tokens_per_s", "ttft_s", "itl_s"):
            lo, hi = row[f"{key}_ci95"]
            assert lo <= row[key] <= hi, key
    assert "speedup" not in frame  # no baseline among the urls was asked for
    with pytest.raises(loadtest.LoadTestError, match="without speculation"):
        loadsweep.sweep({"concurrency": [1]}, prompts(ci_lab, 2), urls=[healthy.url], baseline=True, progress=False)


def test_killing_vllm_mid_benchmark_gives_a_partial_result_marked_failed(healthy, ci_lab):
    many = prompts(ci_lab, 10)
    done = threading.Event()
    seen = []
    real = loadtest._one_openai_request

    def counting(*a, **kw):
        row = real(*a, **kw)
        seen.append(row)
        return row

    def kill_after_two():
        while len(seen) < 2 and not done.is_set():
            time.sleep(0.02)
        healthy.kill()

    loadtest._one_openai_request = counting
    killer = threading.Thread(target=kill_after_two)
    killer.start()
    try:
        result = loadtest.run(healthy, many, max_new_tokens=32, progress=False)
    finally:
        loadtest._one_openai_request = real
        done.set()
        killer.join()
    assert result.failed and "did not complete" in result.error
    assert 2 <= len(result.completed) < len(many)
    assert result.completed["completion_tokens"].gt(0).all()
    healthy.stop()
    assert_gone(healthy)


# --------------------------------------------------------------------------- the CLI

def test_bench_cli_with_baseline_prints_the_lab_bench_fields(ci_lab, vllm_python, tmp_path):
    """`eagle3lab bench --backend vllm --draft-layer-ids ...`: the draft is served with other ids
    from a temporary config (the checkpoint untouched), the baseline without speculation."""
    draft_config = ci_lab.draft_dir("healthy") / "config.json"
    before = hashlib.sha256(draft_config.read_bytes()).hexdigest()
    log = tmp_path / "bench.log"
    cmd = [sys.executable, "-m", "eagle3lab", "bench", "--backend", "vllm", "--lab", "ci", "--draft", "healthy",
           "--num-steps", "3", "--draft-layer-ids", "2,4,5", "--baseline", "--json", "--num-prompts", "3",
           "--max-new-tokens", "32", "--vllm-python", vllm_python, "--log-file", str(log)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1200, env={**os.environ, **ENV})
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    for key in ("accept_length", "accept_length_ci95", "per_position", "tokens_per_s",
                "baseline_tokens_per_s", "speedup", "lossless"):
        assert key in summary, key
    assert summary["lossless"] is True and summary["lossless_check"].endswith("3 of 3 requests")
    assert len(summary["per_position"]) == 3 and summary["num_steps"] == 3
    lo, hi = summary["accept_length_ci95"]
    assert 1.0 <= lo <= summary["accept_length"] <= hi <= 4.0
    assert summary["speedup"] == pytest.approx(summary["tokens_per_s"] / summary["baseline_tokens_per_s"])
    text = log.read_text()
    assert "Using auxiliary layers from speculative config: (2, 4, 5)" in text
    assert hashlib.sha256(draft_config.read_bytes()).hexdigest() == before
    temp = json.loads(text.split("--speculative-config ", 1)[1].split("'")[1])["model"]
    assert not Path(temp).exists()  # the temporary draft went with the server
    assert not [pid for pid in os.listdir("/proc") if pid.isdigit() and temp in _cmdline(pid)]  # and vLLM too


def _cmdline(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""


def test_sweep_relaunches_per_point_and_resumes(ci_lab, vllm_python, tmp_path):
    out = tmp_path / "sweep.jsonl"
    cmd = [sys.executable, "-m", "eagle3lab", "sweep", "--backend", "vllm", "--lab", "ci", "--draft", "healthy",
           "--grid", "num_steps=1,3", "--out", str(out), "--num-prompts", "2", "--max-new-tokens", "16",
           "--vllm-python", vllm_python]
    first = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
    assert first.returncode == 0, first.stderr[-3000:]
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["asked_num_steps"] for r in records] == [1, 3]
    assert [r["server_num_steps"] for r in records] == [1, 3]  # what the server's /metrics says
    assert [len(r["per_position"]) for r in records] == [1, 3]
    assert [r["effective_num_draft_tokens"] for r in records] == [2, 4]  # vLLM's rules
    recorded = out.read_bytes()
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    assert out.read_bytes() == recorded and "2 points" in again.stdout  # resumed: nothing re-measured


# --------------------------------------------------------------------------- reliability

def test_a_vllm_launch_gets_its_own_temp_dir_unless_the_caller_names_one(tmp_path, monkeypatch):
    import shutil
    import tempfile

    short = Path(tempfile.mkdtemp(prefix="e3l-", dir="/tmp"))  # tmp_path is too long for sockets
    try:
        monkeypatch.setattr(tempfile, "tempdir", str(short))
        own = vllm_launch.server_tempdir({})
        assert own.parent == short and own.name.startswith(vllm_launch.SERVER_TMP_PREFIX) and own.is_dir()
    finally:
        shutil.rmtree(short)
    assert vllm_launch.server_tempdir({"TMPDIR": "/scratch"}) is None  # the caller's is used
    deep = tmp_path / ("d" * 80)  # vLLM's "<dir>/<uuid4>" sockets would not fit in 107 bytes
    deep.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(deep))
    assert vllm_launch.server_tempdir({}) is None and list(deep.iterdir()) == []


def test_vllm_workers_leave_nothing_in_the_temp_dir(tmp_path, monkeypatch):
    """The one-shot vLLM subprocesses (resolver, reference jobs) get their own TMPDIR, removed
    after: a stand-in python writes a vllm_dist_* file there as vLLM's engine does."""
    import shutil
    import tempfile

    from eagle3lab.engines.vllm import reference as vllm_reference
    from eagle3lab.workers import run_json_worker

    fake = tmp_path / "python"
    fake.write_text('#!/bin/sh\necho store > "${TMPDIR:-/nonexistent}/vllm_dist_0123"\n'
                    'echo \'{"result": {"tmp": "\'"$TMPDIR"\'"}}\'\n')
    fake.chmod(0o755)
    caller = Path(tempfile.mkdtemp(prefix="e3l-", dir="/tmp"))
    try:
        monkeypatch.setattr(tempfile, "tempdir", str(caller))
        worker = run_json_worker(str(fake), "eagle3lab.engines.vllm.vllm_resolver", [], {}, 30, "a worker")["result"]["tmp"]
        job = vllm_reference.run_job({"job": "capture"}, python=str(fake), timeout=30)["tmp"]
        assert Path(worker).parent == caller and Path(job).parent == caller and worker != job
        assert list(caller.iterdir()) == []
    finally:
        shutil.rmtree(caller)


# The launch/stop cycles of test_launch_stop_cycles_on_one_port_leave_nothing, in order: Ctrl-C
# (KeyboardInterrupt in the health wait) early and late in the API server's start-up; stop() from
# another thread the moment vLLM's EngineCore or its Worker process appears; then a full healthy
# cycle (launch, one request, stop): the interrupted ones left nothing in its way. A CPU launch runs
# the model in its EngineCore (VLLM_CPU_ENV); the stop at the Worker launches with vLLM's own
# layout (VLLM_ENABLE_V1_MULTIPROCESSING=1, as on a GPU), so the third process is stopped too. One cycle per
# stage of start-up (5 launches). The Ctrl-C at the first healthy answer (a sixth full start-up:
# the same except-path as the Ctrl-Cs, the same stop of a full group as the healthy cycle) and
# more Ctrl-C times run with EAGLE3LAB_VLLM_CYCLES=full, the 20 of the original stress test (the
# timing side of it, 20 healthy cycles, is benchmarks/vllm_launch_cycles.py).
CYCLES_FULL = ([("healthy", None)]
               + [("ctrl-c", t) for t in (0.2, 0.3, 0.4, 0.5, 0.65, 0.8, 1.0)]
               + [("healthy", None)]
               + [("ctrl-c", t) for t in (1.25, 1.5, 1.8, 2.1, 2.5, 3.0, 3.5)]
               + [("stop-on", "engine"), ("stop-on", "worker"), ("ctrl-c-at-health", None), ("healthy", None)])
CYCLES = ([("ctrl-c", t) for t in (0.3, 3.0)]
          + [("stop-on", "engine"), ("stop-on", "worker"), ("healthy", None)])
if os.environ.get("EAGLE3LAB_VLLM_CYCLES") == "full":
    CYCLES = CYCLES_FULL


def group_roles(pgid: int) -> dict[int, str]:
    """The processes of a vLLM group by role: "api" (the leader), "engine" (its EngineCore: a
    multiprocessing child of the leader, titled VLLM::EngineCore once imported), "worker" (the
    EngineCore's child, VLLM::Worker), "helper" (multiprocessing's resource trackers) and
    "other" (not yet exec'd after fork, or orphaned while the group goes down)."""
    procs = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmd = (entry / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            procs[int(entry.name)] = (int(fields[1]), cmd)

    def role(pid):
        ppid, cmd = procs[pid]
        if pid == pgid:
            return "api"
        if ppid in procs and procs[ppid][1] == cmd:  # forked, not yet exec'd or titled: its parent's command
            return "other"  # line (a Worker sampled then read as "engine", and kept it: a flake of 2026-12-06)
        if "resource_tracker" in cmd:
            return "helper"
        spawned = "spawn_main" in cmd or "VLLM::" in cmd
        if "EngineCore" in cmd or (spawned and ppid == pgid):
            return "engine"
        if "Worker" in cmd or (spawned and ppid in procs and role(ppid) == "engine"):
            return "worker"
        return "other"

    return {pid: role(pid) for pid in procs}


def remember(seen: dict, roles: dict) -> None:
    """Merge a sample: a pid keeps the first definite role it was seen with ("other" only until
    one is known), so a Worker orphaned during stop stays a Worker."""
    for pid, role in roles.items():
        if seen.get(pid, "other") == "other":
            seen[pid] = role


def run_cycle(kind, arg, launch, watch):
    """One launch on the cycle's terms; returns what happened ("healthy" or the stop's kind)."""
    import requests

    if kind == "healthy":
        handle = launch()
        reply = requests.post(f"{handle.url}/v1/completions", timeout=120, json={
            "model": handle.command[handle.command.index("--model") + 1], "prompt": watch["prompt"],
            "max_tokens": 8, "temperature": 0, "ignore_eos": True})
        assert reply.status_code == 200 and reply.json()["usage"]["completion_tokens"] == 8
        inside = [p for p in handle.cleanup if p.name.startswith(vllm_launch.SERVER_TMP_PREFIX)]
        assert len(inside) == 1 and len(list(inside[0].glob("vllm_dist_*"))) == 1  # vLLM's files went there
        handle.stop()
        return "healthy"
    if kind == "stop-on":
        watch["stop_on"] = arg
        with pytest.raises(server.ServerStartError, match="stopped"):
            launch()
        return f"stopped at {arg} start"
    real = server.Server.healthy
    started = time.monotonic()

    def interrupted(self, timeout=2.0):
        if kind == "ctrl-c" and time.monotonic() - started > arg:
            raise KeyboardInterrupt
        if real(self, timeout) and kind == "ctrl-c-at-health":
            raise KeyboardInterrupt
        return False

    server.Server.healthy = interrupted
    try:
        with pytest.raises(KeyboardInterrupt):
            launch()
    finally:
        server.Server.healthy = real
    return kind


def test_launch_stop_cycles_on_one_port_leave_nothing(ci_lab, vllm_python, tmp_path, monkeypatch):
    """Launches of vLLM on one port (CYCLES), stopped at every stage of start-up or after a request:
    after each, no process of its group (API server, EngineCore, Worker) is left, the port is
    free, and the temp dir holds nothing (vLLM's vllm_dist_* FileStore and ZMQ sockets went with
    the launch's own temp dir)."""
    import shutil
    import tempfile

    prompt = prompts(ci_lab, 1)[0]  # before the temp dir moves: tokenizing makes torchinductor_<user> there
    private_tmp = Path(tempfile.mkdtemp(prefix="e3l-", dir="/tmp"))  # short: vLLM's sockets live inside
    monkeypatch.setenv("TMPDIR", str(private_tmp))
    monkeypatch.setattr(tempfile, "tempdir", str(private_tmp))
    handles = []
    real_init = server.ServerHandle.__init__

    def keep(self, *a, **kw):
        real_init(self, *a, **kw)
        handles.append(self)

    monkeypatch.setattr(server.ServerHandle, "__init__", keep)
    port = server.free_port()
    watch = {"prompt": prompt, "stop_on": None, "seen": {}, "done": False}

    def watcher():
        """Records every process of the current launch's group, and stops the launch from this
        thread when the process role it waits for appears."""
        while not watch["done"]:
            if handles and handles[-1].alive:
                roles = group_roles(handles[-1].pid)
                remember(watch["seen"], roles)
                if watch["stop_on"] in roles.values():
                    watch["stop_on"] = None
                    handles[-1].stop()
            time.sleep(0.1)

    thread = threading.Thread(target=watcher, daemon=True)
    thread.start()

    def launch():
        env = {"VLLM_ENABLE_V1_MULTIPROCESSING": "1"} if watch["stop_on"] == "worker" else None
        return server.launch("vllm", ci_lab.target_dir, ci_lab.draft_dir("healthy"), spec={"num_steps": 2},
                             port=port, vllm_python=vllm_python, log_file=tmp_path / f"{len(handles)}.log", env=env)

    outcomes, roles_per_cycle = [], []
    try:
        for kind, arg in CYCLES:
            watch["seen"] = {}
            began = time.monotonic()
            outcomes.append(run_cycle(kind, arg, launch, watch))
            print(f"cycle {len(outcomes)}: {kind} {arg or ''}: {time.monotonic() - began:.1f} s")  # pytest -s
            time.sleep(0.1)  # the watcher's last sample of this launch
            seen = dict(watch["seen"])
            roles_per_cycle.append(sorted(set(seen.values())))
            assert_gone(handles[-1])
            assert [pid for pid in seen if process_alive(pid)] == [], (kind, arg, seen)
            assert list(private_tmp.iterdir()) == [], (kind, arg)
    finally:
        watch["done"] = True
        thread.join()
        for handle in handles:  # a cycle that failed its assertions still leaves nothing
            handle.stop()
        shutil.rmtree(private_tmp, ignore_errors=True)
    assert len(handles) == len(CYCLES) and {h.port for h in handles} == {port}
    assert outcomes.count("healthy") == sum(kind == "healthy" for kind, _ in CYCLES) >= 1
    for (kind, arg), roles in zip(CYCLES, roles_per_cycle):
        if kind == "healthy" or kind.startswith("ctrl-c-at"):  # the CPU layout: the model in the EngineCore
            assert {"api", "engine"} <= set(roles) and "worker" not in roles, (kind, arg, roles)
        if arg == "worker":
            assert {"api", "engine", "worker"} <= set(roles), (kind, arg, roles)
        if arg == "engine":
            assert {"api", "engine"} <= set(roles), roles

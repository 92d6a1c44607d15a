"""Server control: launch, health, stop with no process or port left behind; the lab server."""

from __future__ import annotations

import socket
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from eagle3lab.serving import loadtest
from eagle3lab.serving import server
from eagle3lab.serving.server import process_alive

# A /health server that also starts a grandchild (to prove the whole group goes), writes the
# grandchild's pid to argv[2], and optionally ignores SIGTERM (argv[3] == "stubborn").
HEALTH_SERVER = textwrap.dedent('''
    import signal, subprocess, sys
    from http.server import BaseHTTPRequestHandler, HTTPServer
    port, pidfile, mode = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    if mode == "stubborn":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    open(pidfile, "w").write(str(child.pid))
    class H(BaseHTTPRequestHandler):
        def log_message(self, *a): pass
        def do_GET(self):
            self.send_response(200 if self.path == "/health" else 404)
            self.send_header("content-length", "0"); self.end_headers()
    print("serving", flush=True)
    HTTPServer(("127.0.0.1", port), H).serve_forever()
''')


@pytest.fixture
def health_script(tmp_path):
    path = tmp_path / "health.py"
    path.write_text(HEALTH_SERVER)
    return path


def launch_health(script, tmp_path, mode="plain", **kw):
    pidfile = tmp_path / f"child-{mode}.pid"
    handle = server.launch(command=[sys.executable, str(script), "{port}", str(pidfile), mode],
                           log_file=tmp_path / f"{mode}.log", timeout=30, **kw)
    return handle, int(pidfile.read_text())


def assert_gone(handle, *pids):
    assert not handle.alive
    for pid in (handle.pid, *pids):
        assert not process_alive(pid), f"process {pid} survived"
    assert not server.port_in_use(handle.port)


def test_launch_waits_for_health_and_stop_takes_the_whole_group(health_script, tmp_path):
    handle, child = launch_health(health_script, tmp_path)
    assert handle.healthy() and process_alive(child)
    assert handle.url == f"http://127.0.0.1:{handle.port}"
    assert "serving" in handle.log_tail()
    handle.stop()
    assert_gone(handle, child)
    handle.stop()  # twice is fine


def test_a_server_ignoring_sigterm_is_killed(health_script, tmp_path):
    handle, child = launch_health(health_script, tmp_path, mode="stubborn")
    started = time.monotonic()
    handle.stop(grace=0.5)
    assert_gone(handle, child)
    assert time.monotonic() - started < 10


def test_exception_inside_with_still_stops_the_server(health_script, tmp_path):
    with pytest.raises(RuntimeError):
        with launch_health(health_script, tmp_path)[0] as handle:
            raise RuntimeError("boom")
    assert_gone(handle)


def test_ctrl_c_while_waiting_for_health_leaves_nothing(health_script, tmp_path, monkeypatch):
    seen = []

    def interrupted(self, timeout=2.0):
        seen.append(self)
        raise KeyboardInterrupt

    monkeypatch.setattr(server.ServerHandle, "healthy", interrupted)
    with pytest.raises(KeyboardInterrupt):
        launch_health(health_script, tmp_path)
    assert seen and not seen[0].alive and not process_alive(seen[0].pid)


def test_port_in_use_is_a_clear_error(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        with pytest.raises(server.PortInUseError, match=f"port {port} .* already in use"):
            server.launch(command=[sys.executable, "-c", "pass"], port=port, log_file=tmp_path / "x.log")


def test_a_start_that_fails_carries_exit_code_and_log_lines(tmp_path):
    cmd = [sys.executable, "-c", "import sys; print('loading weights'); print('CUDA out of memory'); sys.exit(3)"]
    with pytest.raises(server.ServerStartError) as info:
        server.launch(command=cmd, log_file=tmp_path / "fail.log", timeout=30)
    assert info.value.returncode == 3
    assert "CUDA out of memory" in info.value.log_tail and "code 3" in str(info.value)


def test_never_healthy_times_out_with_the_log_tail_and_leaves_nothing(tmp_path):
    cmd = [sys.executable, "-c", "import time; print('still compiling kernels', flush=True); time.sleep(300)"]
    seen = []
    real_stop = server.ServerHandle.stop

    def spy(self, *a, **kw):
        seen.append(self)
        return real_stop(self, *a, **kw)

    server.ServerHandle.stop = spy
    try:
        with pytest.raises(server.ServerTimeoutError) as info:
            server.launch(command=cmd, log_file=tmp_path / "slow.log", timeout=1.5)
    finally:
        server.ServerHandle.stop = real_stop
    assert "still compiling kernels" in info.value.log_tail and "not healthy" in str(info.value)
    assert seen and not process_alive(seen[0].pid)


def test_stop_from_another_thread_during_start_up_ends_the_launch(tmp_path):
    """stop() while launch waits for /health (a UI's stop button, a watchdog): launch raises
    ServerStartError saying so, and nothing of the group is left."""
    cmd = [sys.executable, "-c", "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', "
           "'import time; time.sleep(300)']); print('loading', flush=True); time.sleep(300)"]
    handles = []
    real_init = server.ServerHandle.__init__

    def keep(self, *a, **kw):
        real_init(self, *a, **kw)
        handles.append(self)

    def stop_soon():
        while not handles:
            time.sleep(0.01)
        time.sleep(0.5)
        handles[0].stop()

    server.ServerHandle.__init__ = keep
    stopper = threading.Thread(target=stop_soon)
    stopper.start()
    try:
        with pytest.raises(server.ServerStartError, match="stopped .* before it became healthy"):
            server.launch(command=cmd, log_file=tmp_path / "stopped.log", timeout=60)
    finally:
        server.ServerHandle.__init__ = real_init
        stopper.join()
    assert not handles[0].alive and not server._group_alive(handles[0].pid)


def test_free_port_is_drawn_below_the_ephemeral_range():
    low, high = server.ephemeral_range()
    ports = {server.free_port() for _ in range(20)}
    assert all(max(1024, low - server.SERVER_PORT_SPAN) <= p < low for p in ports), (ports, low, high)
    assert len(ports) > 1  # drawn, not one fixed port two launchers would share


def test_a_drawn_port_taken_before_the_server_binds_it_is_drawn_again(health_script, tmp_path, monkeypatch):
    """CI lost a vLLM launch this way: the port was free when drawn, taken when vLLM bound it."""
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    free = server.free_port()
    draws = iter([taken.getsockname()[1], free])
    monkeypatch.setattr(server, "free_port", lambda host="127.0.0.1": next(draws))
    try:
        handle, child = launch_health(health_script, tmp_path)
    finally:
        taken.close()
    with handle:
        assert handle.port == free and handle.healthy()
    log = (tmp_path / "plain.log").read_text()
    assert log.count("# eagle3lab launch:") == 2 and "Address already in use" in log


def test_a_start_failure_that_is_not_the_port_is_not_retried(tmp_path):
    cmd = [sys.executable, "-c", "import sys; print('no model here'); sys.exit(3)"]
    with pytest.raises(server.ServerStartError, match="exited with code 3"):
        server.launch(command=cmd, log_file=tmp_path / "fails.log", timeout=30)
    assert (tmp_path / "fails.log").read_text().count("# eagle3lab launch:") == 1


def test_connect_to_a_running_server_and_to_nothing(health_script, tmp_path):
    handle, _ = launch_health(health_script, tmp_path)
    with handle:
        remote = server.connect(handle.url, log_file=handle.log_file)
        assert remote.healthy() and "serving" in remote.log_tail()
        remote.stop()  # not ours: a no-op
        assert handle.alive
    with pytest.raises(server.ServerTimeoutError, match="no healthy server"):
        server.connect(f"127.0.0.1:{server.free_port()}", timeout=0.5)


def test_sglang_command_line_is_the_real_launcher():
    argv = server.build_command("sglang", "meta-llama/Llama-3.1-8B-Instruct", "/drafts/eagle3",
                                spec={"num_steps": 5, "topk": 8, "num_draft_tokens": 32}, port=30000,
                                extra_args=["--tp", "2"])
    assert argv[:3] == [sys.executable, "-m", "sglang.launch_server"]
    flags = " ".join(argv[3:])
    assert flags == ("--model-path meta-llama/Llama-3.1-8B-Instruct --host 127.0.0.1 --port 30000 "
                     "--speculative-draft-model-path /drafts/eagle3 --speculative-algorithm EAGLE3 "
                     "--speculative-num-steps 5 --speculative-eagle-topk 8 "
                     "--speculative-num-draft-tokens 32 --tp 2")
    from eagle3lab.spec import SpecConfig

    via_config = server.build_command("lab", "/m", None, SpecConfig(num_steps=2, draft_model_path="/d"))
    assert via_config[1:4] == ["-m", "eagle3lab", "serve"]
    assert "--device" not in via_config  # defaults of SpecConfig are not forced on the server
    assert via_config[via_config.index("--speculative-draft-model-path") + 1] == "/d"


# --------------------------------------------------------------------------- the lab server

def wait_for(path: Path, what: str, timeout: float = 1800.0) -> None:
    """Other parts of the project land in parallel: wait for them rather than skip."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} never appeared at {path}")
        time.sleep(5)


@pytest.fixture(scope="module")
def ci_lab():
    from eagle3lab.paths import PACKAGE_DIR

    wait_for(PACKAGE_DIR / "commands" / "serve.py", "the lab server (eagle3lab serve)")
    from eagle3lab.lab import load_lab

    return load_lab("ci")  # builds it (under a lock) when missing or stale


# Small limits: the ci target has few positions, and a smaller KV cache starts faster.
LAB_LIMITS = ["--max-prompt-tokens", "256", "--max-new-tokens", "128"]


def launch_lab(lab, tmp_path, draft="healthy", **kw):
    spec = {"num_steps": 3, "topk": 1, "num_draft_tokens": 4} if draft else None
    return server.launch("lab", lab.target_dir, lab.draft_dir(draft) if draft else None, spec=spec,
                         log_file=tmp_path / "lab.log", timeout=180, extra_args=LAB_LIMITS, **kw)


@pytest.mark.slow
def test_lab_server_launch_and_stop_5_times_leaves_nothing(ci_lab, tmp_path):
    port = server.free_port()
    for _ in range(5):
        handle = launch_lab(ci_lab, tmp_path, draft=None, port=port)  # same port every time
        assert handle.healthy()
        handle.stop()
        assert_gone(handle)


@pytest.mark.slow
def test_killing_the_lab_server_mid_benchmark_returns_partial_failed_result(ci_lab, tmp_path):
    prompts = ci_lab.heldout_prompts(12, 32)
    with launch_lab(ci_lab, tmp_path) as handle:
        first = loadtest.run(handle.url, prompts[:1], max_new_tokens=8, progress=False)
        assert not first.failed and first.accept_length >= 1.0  # the lab speculates
        done = threading.Event()

        def kill_after_three():
            while len(bench_rows) < 3 and not done.is_set():
                time.sleep(0.02)
            handle.kill()

        bench_rows: list = []
        real = loadtest._one_request

        def counting(*a, **kw):
            row = real(*a, **kw)
            bench_rows.append(row)
            return row

        loadtest._one_request = counting
        killer = threading.Thread(target=kill_after_three)
        killer.start()
        try:
            result = loadtest.run(handle.url, prompts, max_new_tokens=24, progress=False)
        finally:
            loadtest._one_request = real
            done.set()
            killer.join()
    assert result.failed
    assert 3 <= len(result.completed) < len(prompts)
    assert result.completed["completion_tokens"].gt(0).all()
    assert_gone(handle)

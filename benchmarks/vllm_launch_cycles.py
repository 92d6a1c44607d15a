"""How long does a vLLM launch take, how long does stop take, and does either leave anything?

Runs N full cycles of the ci lab on vLLM's CPU build (`server.launch(backend="vllm")`, healthy
draft, 2 draft tokens), all on one port: launch until /health answers, one /v1/completions request
(8 tokens), stop. Per cycle it prints the time to healthy, the request's time and the stop time;
at the end the median / min / max and the leftovers, which should all be 0:

- processes: every process seen in the server's group during the cycle (API server, EngineCore,
  Worker, resource trackers; sampled every 0.1 s) that is still alive after stop;
- ports: the server port still bound after stop;
- temp files: anything left in the temp dir. The run gets its own temp dir (TMPDIR), so the
  count is what these launches left, not what other programs on the machine write to /tmp.

    nice .venv/bin/python benchmarks/vllm_launch_cycles.py [--cycles 20] [--lab ci]
        [--vllm-python PATH]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path

import requests

from eagle3lab.engines.vllm import launch as vllm_launch
from eagle3lab.serving import server
from eagle3lab.lab import load_lab


class GroupWatcher:
    """Samples the process group of the current launch (every 0.1 s) in a background thread."""

    def __init__(self):
        self.pgid = None
        self.seen: set[int] = set()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._done.is_set():
            if self.pgid is not None:
                self.seen.update(server.group_pids(self.pgid))
            time.sleep(0.1)

    def close(self):
        self._done.set()
        self._thread.join()


def one_cycle(lab, port: int, python: str, prompt, log_file: Path, watcher: GroupWatcher, tmp: Path) -> dict:
    """Launch, one request, stop; the times and what is left afterwards."""
    spawned = []
    real_init = server.ServerHandle.__init__

    def keep(self, *a, **kw):  # see the handle (and its group) before launch returns
        real_init(self, *a, **kw)
        spawned.append(self)
        watcher.seen, watcher.pgid = set(), self.pid

    server.ServerHandle.__init__ = keep
    began = time.monotonic()
    try:
        handle = server.launch("vllm", lab.target_dir, lab.draft_dir("healthy"), spec={"num_steps": 2},
                               port=port, vllm_python=python, log_file=log_file, timeout=900)
    finally:
        server.ServerHandle.__init__ = real_init
    healthy_s = time.monotonic() - began
    began = time.monotonic()
    reply = requests.post(f"{handle.url}/v1/completions", timeout=300, json={
        "model": str(lab.target_dir), "prompt": prompt, "max_tokens": 8, "temperature": 0, "ignore_eos": True})
    request_s = time.monotonic() - began
    tokens = reply.json()["usage"]["completion_tokens"] if reply.status_code == 200 else 0
    began = time.monotonic()
    handle.stop()
    stop_s = time.monotonic() - began
    time.sleep(0.15)  # the watcher's last sample
    watcher.pgid = None
    return {"healthy_s": healthy_s, "request_s": request_s, "stop_s": stop_s, "tokens": tokens,
            "processes_seen": len(watcher.seen),
            "left_processes": sum(server.process_alive(pid) for pid in watcher.seen),
            "left_ports": int(server.port_in_use(port)),
            "left_temp_files": sum(1 for _ in tmp.rglob("*"))}


def summary(values: list[float]) -> str:
    return f"median {statistics.median(values):.2f} s, min {min(values):.2f} s, max {max(values):.2f} s"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cycles", type=int, default=20)
    ap.add_argument("--lab", default="ci")
    ap.add_argument("--vllm-python", default=None)
    args = ap.parse_args()
    lab = load_lab(args.lab, build=False)
    prompt = lab.heldout_prompts(1, 48)[0]
    python = vllm_launch.find_vllm_python(args.vllm_python)
    logs = Path(tempfile.mkdtemp(prefix="vllm-cycles-logs-"))
    tmp = Path(tempfile.mkdtemp(prefix="e3l-", dir="/tmp"))  # short: vLLM's sockets go in it
    os.environ["TMPDIR"] = tempfile.tempdir = str(tmp)
    port = server.free_port()
    watcher = GroupWatcher()
    rows = []
    print(f"{args.cycles} cycles of the {args.lab} lab on vLLM ({python}), port {port}")
    try:
        for i in range(args.cycles):
            row = one_cycle(lab, port, python, prompt, logs / f"cycle-{i + 1}.log", watcher, tmp)
            rows.append(row)
            print(f"cycle {i + 1:2d}: healthy after {row['healthy_s']:6.2f} s, request {row['request_s']:5.2f} s "
                  f"({row['tokens']} tokens), stop {row['stop_s']:5.2f} s; processes seen "
                  f"{row['processes_seen']}, left: {row['left_processes']} processes, "
                  f"{row['left_ports']} ports, {row['left_temp_files']} temp files", flush=True)
    finally:
        watcher.close()
        shutil.rmtree(logs, ignore_errors=True)
    print(f"time to healthy: {summary([r['healthy_s'] for r in rows])}")
    print(f"stop:            {summary([r['stop_s'] for r in rows])}")
    print(f"requests answered with 8 tokens: {sum(r['tokens'] == 8 for r in rows)} of {len(rows)}")
    print(f"leftovers: {sum(r['left_processes'] for r in rows)} processes, "
          f"{sum(r['left_ports'] for r in rows)} ports, {sum(1 for _ in tmp.rglob('*'))} temp files")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

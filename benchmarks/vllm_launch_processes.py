"""How much does a vLLM CPU launch cost with vLLM's process layout, and with the model run inside
its EngineCore (VLLM_ENABLE_V1_MULTIPROCESSING=0, what `eagle3lab.engines.vllm.launch.VLLM_CPU_ENV`
sets on a machine without a GPU)?

vLLM's API server starts an EngineCore process, which by default starts a Worker process for the
model: on a CPU each of them imports torch and vLLM before anything is served. With the variable
at 0 the EngineCore runs the model itself (vLLM's uniproc executor): one import fewer.

Each round launches one server of the ci lab (healthy draft, 3 speculative tokens) per layout,
alternating, so both see the same machine; it sends one greedy request (16 tokens) and reads the
spec-decode counters from /metrics (both layouts must serve EAGLE-3), then stops it. Prints each
round (seconds to healthy; CPU seconds of the server's process group at that point, the exited
children included; its processes) and the ratios of the medians (in-EngineCore / vLLM's layout).
Measure on an idle machine: the CPU seconds are what a busy 2-core machine has to find.

    nice .venv/bin/python benchmarks/vllm_launch_processes.py [--rounds 3] [--vllm-python PATH]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

LAYOUTS = {"vLLM's layout (3 processes)": "1", "model in the EngineCore": "0"}


def group_cpu_seconds(pgid: int) -> tuple[float, int]:
    """(user + system CPU seconds of the group's live processes, their reaped children's
    included; how many processes), read where `server.group_pids` finds them."""
    from eagle3lab.serving import server

    pids, ticks = server.group_pids(pgid), 0
    for pid in pids:
        fields = server._stat_fields(pid) or []  # None once it has exited
        ticks += sum(int(f) for f in fields[11:15])  # utime stime cutime cstime
    return ticks / os.sysconf("SC_CLK_TCK"), len(pids)


def one_round(lab, multiprocessing: str, vllm_python) -> tuple[float, float, int]:
    """(seconds to healthy, CPU seconds by then, processes) of one launch with the layout."""
    import requests

    from eagle3lab.serving import server

    began = time.monotonic()
    with server.launch("vllm", lab.target_dir, lab.draft_dir("healthy"), spec={"num_steps": 3},
                       env={"VLLM_ENABLE_V1_MULTIPROCESSING": multiprocessing}, vllm_python=vllm_python) as srv:
        healthy = time.monotonic() - began
        cpu, procs = group_cpu_seconds(srv.pid)
        reply = requests.post(f"{srv.url}/v1/completions", timeout=120, json={
            "model": str(lab.target_dir), "prompt": "The capital of France is", "max_tokens": 16,
            "temperature": 0})
        reply.raise_for_status()
        metrics = requests.get(f"{srv.url}/metrics", timeout=30).text
        if "vllm:spec_decode_num_draft_tokens_total" not in metrics:
            raise SystemExit(f"layout {multiprocessing}: no spec-decode counters in /metrics")
    return healthy, cpu, procs


def main(argv=None) -> int:
    from eagle3lab.engines.vllm import launch as vllm_launch
    from eagle3lab.lab import load_lab

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--vllm-python", default=None)
    args = parser.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")
    lab = load_lab("ci", progress=False)
    python = vllm_launch.find_vllm_python(args.vllm_python)
    seen = {name: [] for name in LAYOUTS}
    for r in range(1, args.rounds + 1):
        for name, value in LAYOUTS.items():
            healthy, cpu, procs = one_round(lab, value, python)
            seen[name].append((healthy, cpu))
            print(f"round {r}  {name:28s} healthy {healthy:5.1f} s  CPU {cpu:5.1f} s  processes {procs}", flush=True)
    (old, new) = (seen[name] for name in LAYOUTS)
    for i, what in enumerate(("seconds to healthy", "CPU seconds")):
        a, b = statistics.median(x[i] for x in old), statistics.median(x[i] for x in new)
        print(f"median {what}: {a:.1f} (vLLM's layout) vs {b:.1f} (model in the EngineCore): {b / a:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

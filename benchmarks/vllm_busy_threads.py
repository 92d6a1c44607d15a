"""How fast does a vLLM CPU server answer when the other cores are busy, with torch's default
OpenMP thread count and with one thread?

With VLLM_CPU_OMP_THREADS_BIND="nobind" (what tests/conftest.py sets, see
benchmarks/vllm_parallel_launch.py) vLLM leaves the thread count to torch, which starts one OpenMP
thread per core. When another process keeps the other cores busy (the second pytest worker of
`make test`), the server's threads wait for each other at every parallel region. The suite
therefore also sets OMP_NUM_THREADS=1.

Each round launches one server of the ci lab (healthy draft, 3 speculative tokens) with the
setting, keeps `--busy` cores spinning (default: all but one), sends the same requests (greedy, then
temperature 0.7, as the doctor's defect probe does) and times them; the settings alternate round by
round, so both see the same machine. Prints each round (time to healthy, the requests' tokens
per second: sampled requests may stop early) and the ratio of the median rates (one thread /
default threads).

    nice .venv/bin/python benchmarks/vllm_busy_threads.py [--rounds 2] [--busy N] [--prompts 8]
        [--vllm-python PATH]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SETTINGS = {"default threads": {"VLLM_CPU_OMP_THREADS_BIND": "nobind", "OMP_NUM_THREADS": None},
            "OMP_NUM_THREADS=1": {"VLLM_CPU_OMP_THREADS_BIND": "nobind", "OMP_NUM_THREADS": "1"}}


def burners(n: int) -> list:
    """n processes that spin on a core each (what a second pytest worker does to the machine)."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def one_round(lab, env: dict, prompts, tokens: int, vllm_python) -> tuple[float, float, int]:
    """(seconds to healthy, seconds for the requests, tokens they returned) of one server launched
    with `env` (sampled requests may stop early, so the rate is what compares)."""
    from eagle3lab.serving import loadtest
    from eagle3lab.serving import server

    launch_env = {k: v for k, v in env.items() if v is not None}
    saved = os.environ.pop("OMP_NUM_THREADS", None)  # unset means torch's default in the server
    try:
        began = time.monotonic()
        with server.launch("vllm", lab.target_dir, lab.draft_dir("healthy"), spec={"num_steps": 3},
                           env=launch_env, vllm_python=vllm_python, timeout=900) as srv:
            up = time.monotonic() - began
            began, returned = time.monotonic(), 0
            for temperature in (0.0, 0.7):
                result = loadtest.run(srv.url, prompts, max_new_tokens=tokens, temperature=temperature,
                                      progress=False, api="openai")
                if result.failed:
                    raise RuntimeError(f"requests failed at temperature {temperature} (log {srv.log_file})")
                returned += int(result.requests["completion_tokens"].sum())
            return up, time.monotonic() - began, returned
    finally:
        if saved is not None:
            os.environ["OMP_NUM_THREADS"] = saved


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2, help="rounds per setting, alternating")
    parser.add_argument("--busy", type=int, default=max(1, (os.cpu_count() or 2) - 1),
                        help="cores kept spinning while the server answers (default: all but one)")
    parser.add_argument("--prompts", type=int, default=8, help="prompts per temperature")
    parser.add_argument("--tokens", type=int, default=32, help="tokens per request")
    parser.add_argument("--lab", default="ci")
    parser.add_argument("--vllm-python", default=None)
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from eagle3lab.experiments import bench_prompts
    from eagle3lab.lab import load_lab

    lab = load_lab(args.lab, progress=False)
    prompts = bench_prompts(lab, args.prompts, backend="vllm")
    names = list(SETTINGS)
    rates = {name: [] for name in names}
    spinning = burners(args.busy)
    try:
        for r in range(args.rounds):
            for name in (names if r % 2 == 0 else names[::-1]):
                up, serve, returned = one_round(lab, SETTINGS[name], prompts, args.tokens, args.vllm_python)
                rates[name].append(returned / serve)
                print(f"round {r + 1} {name:17s}: healthy after {up:6.1f} s; {2 * len(prompts)} requests, "
                      f"{returned} tokens in {serve:6.1f} s = {returned / serve:6.1f} tok/s", flush=True)
    finally:
        for proc in spinning:
            proc.kill()
            proc.wait()
    base, one = (statistics.median(rates[n]) for n in names)
    print(f"median tokens/s with {args.busy} busy core(s): {names[0]} {base:.1f}, {names[1]} {one:.1f}; "
          f"one thread / default = {one / base:.2f}x ({args.rounds} rounds each, alternating)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

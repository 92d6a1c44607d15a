"""How fast does read_log chew through a big SGLang server log?

Builds a synthetic 1,000,000-line SGLang log (decode batches with speculative fields, prefill
batches, HTTP access lines, with DP/TP prefixes and advancing timestamps), writes it to a
temporary file and times ``read_log`` on it. Goal: >= 300,000 lines/s on one core.

    .venv/bin/python benchmarks/bench_logs.py [--lines N] [--repeat R]
"""

from __future__ import annotations

import argparse
import importlib
import io
import os
import random
import tempfile
import time
from datetime import datetime, timedelta

from eagle3lab.sources.logfile import read_log


def synthetic_sglang_log(num_lines: int, seed: int = 0) -> str:
    """A realistic mix: ~65% decode, ~10% prefill, ~25% HTTP access lines."""
    rng = random.Random(seed)
    start = datetime(2025, 10, 22, 10, 0, 0)
    out = []
    for i in range(num_lines):
        stamp = (start + timedelta(seconds=i // 40)).strftime("%Y-%m-%d %H:%M:%S")
        rank = i % 8
        r = rng.random()
        if r < 0.65:
            accept = rng.uniform(1.2, 3.8)
            out.append(
                f"[{stamp} DP{rank} TP{rank}] Decode batch, #running-req: {rng.randint(1, 64)}, "
                f"#token: {rng.randint(100, 400000)}, token usage: {rng.random():.2f}, "
                f"accept len: {accept:.2f}, accept rate: {(accept - 1) / 3:.2f}, "
                f"cuda graph: {rng.random() < 0.95}, gen throughput (token/s): "
                f"{rng.uniform(50, 3000):.2f}, #queue-req: {rng.randint(0, 20)}, ")
        elif r < 0.75:
            out.append(
                f"[{stamp} DP{rank} TP{rank}] Prefill batch, #new-seq: {rng.randint(1, 8)}, "
                f"#new-token: {rng.randint(1, 60000)}, #cached-token: {rng.randint(0, 500000)}, "
                f"token usage: {rng.random():.2f}, #running-req: {rng.randint(0, 64)}, "
                f"#queue-req: {rng.randint(0, 20)}, #pending-token: 0, cuda graph: False, "
                f"input throughput (token/s): {rng.uniform(100, 30000):.2f}")
        else:
            out.append(f'[{stamp}] INFO:     127.0.0.1:{rng.randint(30000, 60000)} - '
                       f'"POST /generate HTTP/1.1" 200 OK')
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=1, help="best of R timed runs")
    args = parser.parse_args(argv)

    text = synthetic_sglang_log(args.lines)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "sglang_synthetic.log")
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        del text
        size_mb = os.path.getsize(path) / 1e6
        importlib.import_module("pandas")  # a one-time import, not part of reading
        read_log(io.StringIO("warm-up\n"))
        best = best_cpu = float("inf")
        for _ in range(args.repeat):
            t0, c0 = time.perf_counter(), time.process_time()
            df = read_log(path)
            best = min(best, time.perf_counter() - t0)
            best_cpu = min(best_cpu, time.process_time() - c0)
    n = df.attrs["lines"]
    print(f"file: {size_mb:.0f} MB, {len(df):,} records, {df.attrs['skipped']:,} skipped, "
          f"{len(df.attrs['malformed'])} malformed")
    print(f"read_log: {n:,} lines in {best:.2f} s = {n / best:,.0f} lines/s "
          f"(CPU time {best_cpu:.2f} s = {n / best_cpu:,.0f} lines/s; load average "
          f"{os.getloadavg()[0]:.1f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Measure the lab engine: accept length and speed-up by chain depth, faults, trees.

    .venv/bin/python benchmarks/bench_engine.py --preset default --prompts 8

Prints one table row per (configuration, faults) and, last, the rows as JSON. Greedy,
batch 1, one torch thread; baseline and speculative runs are interleaved per prompt.
"""

from __future__ import annotations

import argparse
import json
import sys

import torch


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", default="default")
    p.add_argument("--lab-dir", default=None, help="a built lab folder instead of the preset's")
    p.add_argument("--prompts", type=int, default=8)
    p.add_argument("--prompt-tokens", type=int, default=64)
    p.add_argument("--max-new-tokens", type=int, default=128)
    p.add_argument("--depths", default="1,2,3,4,5,6,7", help="chain depths (num_steps, topk=1)")
    p.add_argument("--trees", default="3/2/6,4/4/12", help="steps/topk/draft_tokens")
    p.add_argument("--faults", default="wiring-seed,no-ttt,embed-patch,quant-int4",
                   help="faults measured at the best chain depth")
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)

    from eagle3lab.decoder import make_lab_engine, run_bench
    from eagle3lab.lab import load_lab

    torch.set_num_threads(args.threads)
    lab = load_lab(args.preset, build=args.lab_dir is None, root=args.lab_dir)  # a folder is never built
    prompts = lab.heldout_prompts(args.prompts, args.prompt_tokens)
    rows = []

    def measure(spec, faults=(), engine=None):
        r = run_bench(lab, spec, list(faults), prompts=prompts, max_new_tokens=args.max_new_tokens,
                      engine=engine)
        s = r.summary()
        rows.append(s)
        print(f"{spec[0]}/{spec[1]}/{spec[2]:<3} {','.join(faults) or 'healthy':<22} "
              f"L={s['accept_length']:.2f}  speed-up {s['speedup']:.2f}x  "
              f"({s['tokens_per_s']:.0f} vs {s['baseline_tokens_per_s']:.0f} tok/s)  "
              f"c_draft {s['c_draft_ms']:.2f} ms  c_verify {s['c_verify_ms']:.2f} ms  "
              f"c_plain {s['c_plain_step_ms']:.2f} ms  predicted {s['predicted_speedup']:.2f}x  "
              f"lossless {s['lossless']}", flush=True)
        return s

    healthy, _ = make_lab_engine(lab, [])
    best = None
    for k in [int(x) for x in args.depths.split(",") if x]:
        s = measure((k, 1, k + 1), engine=healthy)
        if best is None or s["speedup"] > best["speedup"]:
            best = s
    for tree in [t for t in args.trees.split(",") if t]:
        measure(tuple(int(x) for x in tree.split("/")), engine=healthy)
    k = best["num_steps"] if best else 3
    for fault in [f for f in args.faults.split(",") if f]:
        measure((k, 1, k + 1), [fault])
    print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())

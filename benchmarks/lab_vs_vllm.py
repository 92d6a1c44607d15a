"""Lab engine vs vLLM on the same checkpoints and prompts: accept length side by side.

Goal (issue 15): on the DEFAULT lab, healthy draft, num_speculative_tokens=5, 16 prompts,
greedy, the lab engine (fed the boundaries vLLM 0.32 feeds, `--serve vllm==0.32.0`) and vLLM's
CPU build agree on the accept length to 2 decimals.

    .venv/bin/python benchmarks/lab_vs_vllm.py [--lab default] [--prompts 16] [--k 5]
        [--drafts healthy] [--max-new-tokens 128] [--vllm-python PATH]
"""

from __future__ import annotations

import argparse
import time

import pandas as pd

from eagle3lab.lab import load_lab
from eagle3lab.engines.vllm.reference import lab_vs_vllm


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lab", default="default")
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--prompt-tokens", type=int, default=64)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--k", type=int, default=5, help="num_speculative_tokens")
    ap.add_argument("--drafts", default="healthy", help="comma list of lab drafts")
    ap.add_argument("--temperature", type=float, default=0.0,
                    help="> 0 shows vLLM 0.32 CPU's temperature defect (docs/vllm.md)")
    ap.add_argument("--vllm-python", default=None)
    args = ap.parse_args()
    lab = load_lab(args.lab, build=False)
    drafts = {name: str(lab.draft_dir(name)) for name in args.drafts.split(",")}
    t0 = time.perf_counter()
    table = lab_vs_vllm(lab, drafts, k=args.k, n_prompts=args.prompts, prompt_tokens=args.prompt_tokens,
                        max_new_tokens=args.max_new_tokens, temperature=args.temperature,
                        python=args.vllm_python)
    pd.set_option("display.width", 200)
    print(f"lab {args.lab}, k={args.k}, {args.prompts} prompts x {args.max_new_tokens} tokens, temperature {args.temperature} "
          f"({time.perf_counter() - t0:.0f} s)")
    print(table.to_string(index=False))
    for row in table.itertuples():
        lab_al, vllm_al = f"{row.lab_accept_length:.2f}", f"{row.vllm_accept_length:.2f}"
        ci = row.lab_accept_length_ci95
        inside = ci is not None and ci[0] <= row.vllm_accept_length <= ci[1]
        print(f"{row.draft}: accept length lab {lab_al}  vLLM {vllm_al}  "
              f"{'EQUAL to 2 decimals' if lab_al == vllm_al else 'DIFFERENT'}; lab 95% interval "
              f"{ci}: vLLM {'inside' if inside else 'OUTSIDE'}")


if __name__ == "__main__":
    main()

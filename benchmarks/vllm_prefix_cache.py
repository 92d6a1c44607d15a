"""Does a vLLM server answer prompts it has already seen faster than new ones?

vLLM 0.32 keeps prefix caching on by default (`vllm/engine/arg_utils.py`), and the notebooks send
every server the same held-out prompts. A server kept from one notebook to the next (a proposed
saving: docs/development.md) would answer them from a warm cache, while the fresh servers it is
paired with start cold. This measures how far that would lean a paired ratio.

One server (the lab's target without speculation, or `--draft NAME --steps K`) is launched with
the report's settings. After one request that warms nothing measured (a prompt of its own), each
round sends a set of prompts it has not seen (cold), the same set again (warm), then another new
set (cold): the warm pass is compared with the mean of the two cold passes around it, so a server
that merely gets faster with time does not count as a cache. Prints each pass's tokens per second
and time to first token, and the median of the rounds' warm / cold ratios.

    .venv/bin/python benchmarks/vllm_prefix_cache.py [--lab ci] [--rounds 3] [--prompts 4]
        [--tokens 64] [--draft seed --steps 5] [--vllm-python PATH]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def one_pass(url: str, prompts, tokens: int) -> tuple[float, float]:
    """(tokens per second, mean time to first token in s) of the prompts sent one at a time."""
    from eagle3lab.serving import loadtest

    result = loadtest.run(url, prompts, max_new_tokens=tokens, progress=False, api="openai")
    if result.failed or not len(result.completed):
        raise RuntimeError(f"requests failed: {result.error}")
    return result.tokens_per_s, result.ttft_s


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lab", default="ci")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, each with prompts of its own")
    parser.add_argument("--prompts", type=int, default=4, help="prompts per round (the report's vLLM count)")
    parser.add_argument("--tokens", type=int, default=64, help="tokens per request (the report's)")
    parser.add_argument("--draft", default=None, help="a lab draft to serve (default: no speculation)")
    parser.add_argument("--steps", type=int, default=5, help="speculative tokens, with --draft")
    parser.add_argument("--vllm-python", default=None)
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from eagle3lab.engines.vllm.experiments import servable_draft
    from eagle3lab.experiments import bench_prompts
    from eagle3lab.lab import load_lab
    from eagle3lab.serving import server

    lab = load_lab(args.lab, progress=False)
    need = 2 * args.rounds * args.prompts + 1
    texts = bench_prompts(lab, need, backend="vllm")  # the notebooks' prompts for a vLLM server
    if len(texts) < need:
        raise SystemExit(f"the {args.lab} lab has {len(texts)} held-out texts; fewer rounds or prompts")
    draft = servable_draft(lab, args.draft) if args.draft else None  # the real lab's, materialized
    spec = {"num_steps": args.steps} if args.draft else None
    ratios = []
    with server.launch("vllm", lab.target_dir, draft, spec=spec, vllm_python=args.vllm_python, timeout=900) as srv:
        one_pass(srv.url, texts[-1:], args.tokens)  # the first request's start-up, on a prompt of its own
        for r in range(args.rounds):
            seen = texts[2 * r * args.prompts:(2 * r + 1) * args.prompts]
            new = texts[(2 * r + 1) * args.prompts:(2 * r + 2) * args.prompts]
            passes = [one_pass(srv.url, prompts, args.tokens) for prompts in (seen, seen, new)]
            (before, before_ttft), (warm, warm_ttft), (after, after_ttft) = passes
            cold = (before + after) / 2
            ratios.append(warm / cold)
            print(f"round {r + 1}: new {before:6.1f} tok/s (first token {before_ttft * 1e3:5.1f} ms), "
                  f"seen {warm:6.1f} ({warm_ttft * 1e3:5.1f} ms), new {after:6.1f} ({after_ttft * 1e3:5.1f} ms): "
                  f"seen / new {warm / cold:.3f}x", flush=True)
    served = f"the {args.draft} draft at {args.steps} tokens" if args.draft else "no speculation"
    print(f"{args.lab} lab on vLLM, {served}: prompts seen before answered at {statistics.median(ratios):.3f}x "
          f"the tokens per second of new ones (median of {args.rounds} rounds: "
          f"{', '.join(f'{x:.3f}' for x in ratios)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

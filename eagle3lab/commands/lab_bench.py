"""`eagle3lab lab bench`: speculative vs plain decoding of the lab target, interleaved."""

from __future__ import annotations

HELP = "benchmark speculative decoding on the lab (accept length, per-position, speed-up)"


def add_arguments(parser) -> None:
    from eagle3lab.decoder.faults import describe_faults

    parser.add_argument("--preset", default="default", help="lab preset: default or ci")
    parser.add_argument("--lab-dir", default=None, metavar="DIR",
                        help="a built lab folder instead of the preset's (e.g. a what-if lab "
                             "from `lab build --set ... --out DIR`)")
    parser.add_argument("--steps", type=int, default=None, help="--speculative-num-steps (default 3)")
    parser.add_argument("--topk", type=int, default=None, help="--speculative-eagle-topk (default 1)")
    parser.add_argument("--draft-tokens", type=int, default=None,
                        help="--speculative-num-draft-tokens (resolved as SGLang 0.5.23 would)")
    parser.add_argument("--fault", action="append", default=[], metavar="NAME",
                        help="repeatable: " + describe_faults())
    parser.add_argument("--serve", default=None, metavar="ENGINE==VERSION",
                        help="feed the draft the boundaries this engine would feed "
                        "(default sglang==0.5.23; e.g. vllm==0.32.0)")
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--prompts", type=prompt_count, default=8,
                        help="held-out prompts to decode, or 'all' (every held-out passage with "
                             "--prompt-tokens tokens)")
    parser.add_argument("--prompt-tokens", type=int, default=64)
    parser.add_argument("--max-new-tokens", type=int, default=128, help="new tokens per prompt (>= 128)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch CPU threads (1 is fastest for lab-sized models on a shared CPU)")
    parser.add_argument("--json", action="store_true", help="last line: the result as JSON")


def prompt_count(value: str):
    """--prompts: a positive count or 'all' (None)."""
    import argparse

    if value.strip().lower() == "all":
        return None
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or 'all', got {value!r}") from None


def resolve_spec(steps, topk, draft_tokens):
    """The newest SGLang's effective config as the engine's SpecParams, and its warnings."""
    from eagle3lab.spec import SpecConfig
    from eagle3lab.errors import EagleLabError
    from eagle3lab.spec import LATEST_SGLANG

    # Our defaults (SGLang itself refuses --speculative-num-steps without a topk).
    steps = 3 if steps is None else steps
    topk = 1 if topk is None else topk
    res = SpecConfig(algorithm="EAGLE3", num_steps=steps, topk=topk,
                     num_draft_tokens=draft_tokens).resolve(engine="sglang", version=LATEST_SGLANG,
                                                             arch="LlamaForCausalLM")
    if res.error:
        raise EagleLabError(f"SGLang {LATEST_SGLANG} refuses this configuration: {res.error}")
    return res.to_engine_params(), list(res.warnings)


def run(args) -> int:
    import sys

    from eagle3lab.decoder.faults import normalize_faults, parse_serve
    from eagle3lab.errors import EagleLabError

    for name in ("prompts", "prompt_tokens", "max_new_tokens", "threads"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            raise EagleLabError(f"--{name.replace('_', '-')} must be at least 1")
    if args.temperature < 0:
        raise EagleLabError("--temperature must be >= 0")
    faults = normalize_faults(args.fault)
    if args.serve is not None:
        parse_serve(args.serve)  # a bad --serve is said before torch and the lab load
    spec, warnings = resolve_spec(args.steps, args.topk, args.draft_tokens)
    import torch

    from eagle3lab.decoder.labbench import run_bench
    from eagle3lab.lab import load_lab
    for line in warnings:
        print(f"sglang 0.5.23: {line}", file=sys.stderr)
    torch.set_num_threads(args.threads)
    lab = load_lab(args.preset, build=args.lab_dir is None, root=args.lab_dir)  # a folder is never built
    n_prompts = args.prompts
    if n_prompts is None:  # 'all': every held-out passage long enough for a prompt
        n_prompts = len(lab.heldout_prompts(None, args.prompt_tokens))
    result = run_bench(lab, spec=spec, faults=faults, n_prompts=n_prompts,
                       prompt_tokens=args.prompt_tokens, max_new_tokens=args.max_new_tokens,
                       temperature=args.temperature, seed=args.seed, serve=args.serve)
    s = result.summary()
    print(f"lab {s['preset']}  draft {s['draft']}  faults {', '.join(s['faults']) or 'none'}  "
          f"boundaries {s['boundaries']} (as {s['serve']} feeds them)")
    print(f"spec num_steps={spec.num_steps} topk={spec.topk} num_draft_tokens={spec.num_draft_tokens}  "
          f"temperature={args.temperature}  {s['prompts']} prompts x {args.max_new_tokens} new tokens")
    ci = s["accept_length_ci95"]
    spread = f"95% CI over prompts {ci[0]:.2f}-{ci[1]:.2f}; " if ci else ""
    print(f"accept length   {s['accept_length']:.2f}  ({spread}bonus included; "
          f"accept rate {s['accept_rate']:.2f})")
    print("per position    " + "  ".join(f"{p:.2f}" for p in s["per_position_unconditional"])
          + "  (share of steps accepting >= i drafts)")
    print(f"tokens/s        spec {s['tokens_per_s']:.1f}   plain {s['baseline_tokens_per_s']:.1f}   "
          f"speed-up {s['speedup']:.2f}x")
    print(f"costs           draft step {s['c_draft_ms']:.2f} ms, verify {s['c_verify_ms']:.2f} ms, "
          f"plain step {s['c_plain_step_ms']:.2f} ms; L x plain / (k x draft + verify) = "
          f"{s['predicted_speedup']:.2f}x (the step's measured parts only)")
    print(f"lossless        {s['lossless']}")
    if args.json:
        from eagle3lab.commands.common import dumps

        print(dumps(s))  # NaN (not measured) as null
    return 0

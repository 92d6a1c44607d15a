"""`eagle3lab bench`: benchmark a running server (--url) or one launched for the occasion."""

from __future__ import annotations

HELP = "benchmark a server: tokens/s, time to first token, latency, accept length"


def add_server_arguments(parser) -> None:
    """Where to benchmark: a running server, or a backend to launch (shared with sweep)."""
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--url", action="append", default=None,
                       help="a running server (repeat for several in `sweep`)")
    where.add_argument("--backend", choices=["lab", "sglang"], help="launch this backend")
    parser.add_argument("--model-path", help="target model (default for lab: the lab's target)")
    parser.add_argument("--draft", help="draft folder, or a lab draft name (healthy, seed, no-ttt)")
    parser.add_argument("--lab", default="ci", help="lab preset for defaults and prompts (default ci)")
    parser.add_argument("--prompts", help="text file, one prompt per line "
                        "(default: the lab's held-out passages, cut to --prompt-tokens tokens)")
    parser.add_argument("--num-prompts", type=int, default=8)
    parser.add_argument("--prompt-tokens", type=int, default=64, help="lab prompt length in tokens")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for /health")
    parser.add_argument("--log-file", help="server log (launched backends)")


def add_arguments(parser) -> None:
    add_server_arguments(parser)
    parser.add_argument("--num-steps", type=int)
    parser.add_argument("--topk", type=int)
    parser.add_argument("--num-draft-tokens", type=int)
    parser.add_argument("--fault", action="append", help="lab fault(s) to switch on")
    parser.add_argument("--baseline", action="store_true",
                        help="also run without speculation (launched backends) and print the speed-up")
    parser.add_argument("--requests", action="store_true", help="print the per-request table")
    parser.add_argument("--json", action="store_true", help="print the summary as one JSON line")


def load_prompts(args) -> list:
    from pathlib import Path

    from eagle3lab.errors import EagleLabError

    if args.prompts:
        path = Path(args.prompts)
        if not path.is_file():
            raise EagleLabError(f"prompts file {path} not found")
        prompts = [line for line in path.read_text().splitlines() if line.strip()]
    else:
        from eagle3lab.lab import load_lab

        prompts = load_lab(args.lab, build=False).heldout_prompts(args.num_prompts, args.prompt_tokens)
    if not prompts:
        raise EagleLabError("no prompts")
    return prompts[: args.num_prompts] if args.num_prompts else prompts


def launch_target(args) -> tuple:
    """(model_path, draft_path) for a launched backend; lab defaults from the lab preset."""
    model, draft = args.model_path, args.draft
    if args.backend == "lab" and (model is None or (draft and "/" not in draft)):
        from eagle3lab.lab import load_lab

        lab = load_lab(args.lab, build=False)
        model = model or str(lab.target_dir)
        if draft and "/" not in draft:
            draft = str(lab.draft_dir(draft))
    if model is None:
        from eagle3lab.errors import EagleLabError

        raise EagleLabError("--model-path is required with --backend sglang")
    return model, draft


def run(args) -> int:
    import json

    from eagle3lab import loadtest, server

    prompts = load_prompts(args)
    spec = {"num_steps": args.num_steps, "topk": args.topk, "num_draft_tokens": args.num_draft_tokens,
            "fault": ",".join(args.fault) if args.fault else None}
    kwargs = dict(max_new_tokens=args.max_new_tokens, concurrency=args.concurrency,
                  temperature=args.temperature)
    results = {}
    if args.url:
        results["run"] = loadtest.run(server.connect(args.url[0]).url, prompts, **kwargs)
    else:
        model, draft = launch_target(args)
        with server.launch(args.backend, model, draft, spec=spec, log_file=args.log_file,
                           timeout=args.timeout) as srv:
            print(f"launched {srv!r}; log {srv.log_file}")
            results["run"] = loadtest.run(srv.url, prompts, **kwargs)
        if args.baseline:
            with server.launch(args.backend, model, None, spec={"fault": spec["fault"]},
                               timeout=args.timeout) as srv:
                results["baseline"] = loadtest.run(srv.url, prompts, **kwargs)
    if args.requests:
        print(results["run"].requests.drop(columns=["text"]).to_string(index=False))
    summary = results["run"].summary()
    if "baseline" in results:
        summary["baseline_tokens_per_s"] = results["baseline"].tokens_per_s
        summary["speedup"] = loadtest.speedup(results["run"], results["baseline"])
    if args.json:
        print(json.dumps(summary, default=str))
    else:
        for key, value in summary.items():
            print(f"{key:>22}: {value:.3f}" if isinstance(value, float) else f"{key:>22}: {value}")
    return 1 if results["run"].failed else 0

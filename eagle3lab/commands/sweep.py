"""`eagle3lab sweep`: benchmark a grid of speculative settings / faults, resumable."""

from __future__ import annotations

from eagle3lab.versions import LATEST_SGLANG

HELP = "sweep num_steps/topk/draft tokens/faults over launched or running servers (resumable)"


def add_arguments(parser) -> None:
    from eagle3lab.commands.bench import add_server_arguments

    add_server_arguments(parser)
    parser.add_argument("--grid", action="append", required=True, metavar="KEY=V1,V2",
                        help="an axis, e.g. num_steps=1,3,5 topk=1,4 fault=none,wiring-seed "
                             "(fault values combine with '+': wiring-seed+quant-int4)")
    parser.add_argument("--out", required=True, help="JSON-lines file; a rerun skips points in it")
    parser.add_argument("--version", default=LATEST_SGLANG, help="SGLang version for the effective config "
                        "(vLLM's rules for --backend vllm)")
    parser.add_argument("--baseline", action="store_true",
                        help="add no-speculation point(s) and a speedup column")


def parse_grid(items: list[str]) -> dict:
    from eagle3lab.errors import EagleLabError

    grid = {}
    for item in items:
        key, sep, values = item.partition("=")
        if not sep or not key.strip() or not values.strip():
            raise EagleLabError(f"--grid {item!r}: expected KEY=V1,V2,...")
        grid[key.strip().replace("-", "_")] = [_value(v.strip().replace("+", ",")) for v in values.split(",")]
    return grid


def _value(text: str):
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def run(args) -> int:
    from eagle3lab import loadtest
    from eagle3lab.commands.bench import launch_kwargs, launch_target, load_prompts

    grid = parse_grid(args.grid)
    if args.draft_layer_ids:
        grid["draft_layer_ids"] = [args.draft_layer_ids]
    prompts = load_prompts(args)
    kwargs = dict(max_new_tokens=args.max_new_tokens, concurrency=args.concurrency,
                  temperature=args.temperature, out=args.out, version=args.version,
                  baseline=args.baseline)
    if args.url:
        df = loadtest.sweep(grid, prompts, urls=args.url, **kwargs)
    else:
        model, draft = launch_target(args)
        df = loadtest.sweep(grid, prompts, backend=args.backend, model_path=model, draft_path=draft,
                            launch_timeout=args.timeout, launch_kwargs=launch_kwargs(args), **kwargs)
    cols = [c for prefix in ("asked_", "effective_num", "server_") for c in df.columns if c.startswith(prefix)]
    cols += [c for c in ("tokens_per_s", "speedup", "accept_length", "ttft_s", "latency_s", "failed", "skipped")
             if c in df]
    print(df[cols].to_string(index=False))
    skipped = int(df["skipped"].fillna(False).astype(bool).sum()) if "skipped" in df else 0
    note = f"; {skipped} skipped: no running server runs their settings (not recorded)" if skipped else ""
    print(f"{len(df) - skipped} points in {args.out}{note}")
    return 1 if "failed" in df and df["failed"].fillna(False).astype(bool).any() else 0

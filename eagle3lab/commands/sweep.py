"""`eagle3lab sweep`: benchmark a grid of speculative settings / faults, resumable."""

from __future__ import annotations

from eagle3lab.serving.loadsweep import DEFAULT_NUM_STEPS
from eagle3lab.spec import LATEST_SGLANG

HELP = ("sweep num_steps/topk/draft tokens/faults, or load (concurrency), over launched or running "
        "servers (resumable)")


def add_arguments(parser) -> None:
    from eagle3lab.commands.bench import add_server_arguments

    add_server_arguments(parser)
    parser.add_argument("--grid", action="append", required=True, metavar="KEY=V1,V2",
                        help="an axis, e.g. num_steps=1,3,5 topk=1,4 fault=none,wiring-seed "
                             "(fault values combine with '+': wiring-seed+quant-int4); "
                             "concurrency=1,2,4,8: load, one server per config serving every "
                             "concurrency, and the crossover with --baseline")
    parser.add_argument("--out", help="JSON-lines file; a rerun skips points in it (default: none)")
    parser.add_argument("--num-steps", type=int,
                        help="draft tokens per step for every point (a load sweep on a launched vLLM "
                             f"defaults to {DEFAULT_NUM_STEPS})")
    parser.add_argument("--version", default=LATEST_SGLANG, help="SGLang version for the effective config "
                        "(vLLM's rules for --backend vllm)")
    parser.add_argument("--baseline", action="store_true",
                        help="add no-speculation point(s) and a speedup column")
    parser.add_argument("--plot", metavar="PNG",
                        help="a load sweep with --baseline: save speed-up vs concurrency, measured and "
                             "predicted from costs, to this file")


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


def check_inputs(args, grid: dict):
    """Everything a sweep can refuse before it launches or measures anything: the URLs, the SGLang
    version, every point (`sweepinput.check_points`), the --out file (read, and writable:
    `sweepinput.check_out`); its torn lines said."""
    from eagle3lab.commands.bench import check_urls
    from eagle3lab.errors import EagleLabError
    from eagle3lab.spec import parse_version
    from eagle3lab.serving.sweepinput import check_out, check_points, grid_points

    check_urls(args)
    parse_version(args.version)
    if "label" in grid:  # the library's name for a point: here it would launch the same server twice
        raise EagleLabError("--grid label: not a setting (points are named by their settings here)")
    check_points(grid_points(grid), None if args.url else args.backend, args.url, args.version)
    if args.out:
        note = check_out(args.out).note()
        if note:
            print(note)


def run(args) -> int:
    from eagle3lab.serving import loadtest
    from eagle3lab.commands.bench import launch_target, load_prompts

    grid = parse_grid(args.grid)
    if args.draft_layer_ids:
        grid["draft_layer_ids"] = [args.draft_layer_ids]
    if args.num_steps is not None:
        grid["num_steps"] = [args.num_steps]
    check_inputs(args, grid)
    target = None if args.url else launch_target(args)
    if target and "draft" in grid:  # a lab draft's name is looked up next to the target
        from eagle3lab.serving.sweepinput import check_points, grid_points

        check_points(grid_points(grid), args.backend, None, args.version, target[0])
    servers = connect(args)
    if "concurrency" in grid:
        return run_load(args, grid, servers, target)
    prompts = load_prompts(args)
    kwargs = dict(max_new_tokens=args.max_new_tokens, concurrency=args.concurrency,
                  temperature=args.temperature, out=args.out, version=args.version,
                  baseline=args.baseline)
    df = over_servers(loadtest.sweep, args, grid, prompts, servers, target, **kwargs)
    cols = [c for prefix in ("asked_", "effective_num", "server_") for c in df.columns if c.startswith(prefix)]
    cols += [c for c in ("tokens_per_s", "speedup", "accept_length", "ttft_s", "latency_s", "failed", "skipped")
             if c in df]
    print(df[cols].to_string(index=False))
    skipped = int(df["skipped"].fillna(False).astype(bool).sum()) if "skipped" in df else 0
    note = f"; {skipped} skipped: no running server runs their settings (not recorded)" if skipped else ""
    print(f"{len(df) - skipped} points" + (f" in {args.out}" if args.out else "") + note)
    return print_failures(df)


def print_failures(df) -> int:
    """Each failed point with its reason (not only in the JSON lines); 1 if any failed."""
    failed = df[df["failed"].fillna(False).astype(bool)] if "failed" in df else df.iloc[0:0]
    for rec in failed.to_dict("records"):
        asked = ", ".join(f"{k[len('asked_'):]}={int(v) if isinstance(v, float) and v.is_integer() else v}"
                          for k, v in rec.items() if k.startswith("asked_")
                          and v is not None and not (isinstance(v, float) and v != v))
        print(f"FAILED {asked or 'point'}: {rec.get('error') or 'no reason recorded'}")
    return 1 if len(failed) else 0


LOAD_COLUMNS = [("tokens_per_s", "tok/s total", 1), ("request_tokens_per_s", "tok/s per req", 1),
                ("ttft_s", "TTFT s", 3), ("itl_s", "ITL s", 4), ("accept_length", "accept len", 2),
                ("baseline_tokens_per_s", "base tok/s", 1), ("baseline_request_tokens_per_s", "base tok/s req", 1),
                ("baseline_ttft_s", "base TTFT s", 3),
                ("speedup", "speed-up", 2), ("request_speedup", "speed-up/req", 2),
                ("decode_speedup", "decode speed-up", 2)]


def _with_ci(value, ci, digits: int) -> str:
    """'12.3 [11.0, 13.5]': a figure with its 95 % interval."""
    if value is None or value != value:
        return "-"
    has_ci = isinstance(ci, (list, tuple)) and len(ci) == 2
    return f"{value:.{digits}f}" + (f" [{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]" if has_ci else "")


def load_table(df):
    """The printed load table: each figure next to its 95 % interval."""
    import pandas as pd

    rows = []
    for rec in df.to_dict("records"):
        row = {c: rec[c] for c in df.columns if c.startswith("asked_")}
        row["concurrency"] = rec["concurrency"]
        for key, label, digits in LOAD_COLUMNS:
            if key in rec:
                row[label] = _with_ci(rec[key], rec.get(f"{key}_ci95"), digits)
        for key, label in (("occupancy", "busy"), ("baseline_occupancy", "base busy")):
            if key in rec and rec[key] == rec[key]:
                row[label] = f"{rec[key]:.1f}"
        if isinstance(rec.get("per_position"), list):
            row["per-position"] = " ".join(f"{r:.2f}" for r in rec["per_position"])
        if rec.get("failed") or rec.get("skipped"):
            row["note"] = "skipped" if rec.get("skipped") else f"FAILED: {rec.get('error')}"
        rows.append(row)
    return pd.DataFrame(rows)


def connect(args) -> list | None:
    """The servers at --url, each waited for up to --timeout (before the lab's prompts load)."""
    from eagle3lab.serving import server
    from eagle3lab.commands.bench import health_timeout

    if not args.url:
        return None
    return [server.connect(url, timeout=health_timeout(args, False)) for url in args.url]


def over_servers(sweep, args, grid, prompts, servers=None, target=None, **kwargs):
    """Run a sweep function on the running servers (--url, connected), or on servers it launches
    (--backend; `target`: bench.launch_target's folders)."""
    from eagle3lab.commands.bench import health_timeout, launch_kwargs, launch_target

    if args.url:
        return sweep(grid, prompts, urls=servers or connect(args), **kwargs)
    model, draft = target or launch_target(args)
    return sweep(grid, prompts, backend=args.backend, model_path=model, draft_path=draft,
                 launch_timeout=health_timeout(args, True), launch_kwargs=launch_kwargs(args), **kwargs)


def run_load(args, grid, servers=None, target=None) -> int:
    """Concurrency as the sweep's load dimension: the table, then the crossover per config."""
    from eagle3lab.serving import loadsweep
    from eagle3lab.commands.bench import load_prompts

    loadsweep.concurrencies(grid["concurrency"])  # bad values fail before anything launches
    prompts = load_prompts(args)
    kwargs = dict(max_new_tokens=args.max_new_tokens, temperature=args.temperature, out=args.out,
                  baseline=args.baseline)
    df = over_servers(loadsweep.sweep, args, grid, prompts, servers, target, **kwargs)
    print(load_table(df).to_string(index=False))
    print(f"{len(prompts)} prompts per window, {args.max_new_tokens} new tokens; [95 % intervals over prompts]; "
          "accept length and per-position rates (P(at least i accepted)) from the server's counters")
    tail = [c for c in loadsweep.concurrencies(grid["concurrency"]) if 2 * c > len(prompts)]
    if tail:
        print(f"at concurrency {', '.join(map(str, tail))} a window holds fewer than 2 rounds of "
              f"{len(prompts)} prompts: total tokens/s is set by its slowest requests ('busy' < concurrency "
              "= requests in flight on average); several times the concurrency in prompts measures steady load")
    skipped = df["skipped"].fillna(False).astype(bool) if "skipped" in df else None
    for config, cross in loadsweep.crossovers(df if skipped is None else df[~skipped]):
        if args.baseline:
            label = ", ".join(f"{k}={v}" for k, v in config.items()) or "speculation"
            print(f"crossover ({label}): {cross['text']}")
    if args.baseline:
        print_cost_models(df if skipped is None else df[~skipped], getattr(args, "plot", None))
    if skipped is not None and skipped.any():
        print(f"{int(skipped.sum())} rows skipped: no running server runs their settings (not recorded)")
    return 1 if "failed" in df and df["failed"].fillna(False).astype(bool).any() else 0


def print_cost_models(df, plot=None) -> None:
    """Prediction beside measurement per concurrency (decode speed-up), then what the fit says;
    the first config's plot saved to ``plot``."""
    from eagle3lab.serving import loadsweep

    for i, (config, rows) in enumerate(loadsweep.by_config(df) if "baseline_itl_s" in df else []):
        model = loadsweep.load_cost_model(rows.to_dict("records"))
        if plot and i == 0 and model["status"] == "ok":
            from eagle3lab.viz import plots

            plots.load_speedup(model, rows.to_dict("records")).savefig(plot, dpi=120)
            print(f"plot: {plot}")
        label = ", ".join(f"{k}={v}" for k, v in config.items()) or "speculation"
        if model["status"] != "ok":
            print(f"cost model ({label}): {model['text']}")
            continue
        print(f"decode speed-up, measured vs predicted by two cost models ({label}; "
              f"k = {model['rows'][0]['draft_tokens']}):")
        for name, text in loadsweep.MODELS.items():
            print(f"  {name}: {text}")
        for row in model["rows"]:
            ci = row["measured_ci95"]
            cells = [f"  concurrency {row['concurrency']:>3}: measured {row['measured']:.2f}"
                     + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")]
            for name in loadsweep.MODELS:
                rng = row[f"predicted_{name}_range"]
                flag = "" if row["anchor"] else " ok" if row[f"agrees_{name}"] else " OFF" if row[f"agrees_{name}"] is False else ""
                cells.append(f"{name} {row[f'predicted_{name}']:.2f}" + (f" [{rng[0]:.2f}, {rng[1]:.2f}]" if rng else "") + flag)
            print("  ".join(cells) + ("  (anchor)" if row["anchor"] else "")
                  + ("  (tokens extrapolated)" if row["extrapolated"] else ""))
        print(f"  {model['text']}")

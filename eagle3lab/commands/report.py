"""`eagle3lab report`: execute the notebooks and render the HTML post-mortem."""

from __future__ import annotations

DEFAULT_BACKEND = "lab"  # what the notebooks serve on unless told (their BACKEND parameter)
HELP = "execute the notebooks against a lab (or your server) and render the HTML post-mortem"


def add_arguments(parser) -> None:
    parser.add_argument("--lab", default="smollm2", choices=["smollm2", "ci", "default"],
                        help="lab the notebooks run against: smollm2 (SmolLM2-135M-Instruct with drafts "
                             "trained here; the default), or a toy lab (ci, default)")
    parser.add_argument("--backend", default=DEFAULT_BACKEND, choices=["lab", "vllm"],
                        help="who serves the lab's checkpoints: the lab server (default) or vLLM "
                             "(its CPU build from scripts/setup_vllm.sh, or $EAGLE3LAB_VLLM_PYTHON)")
    parser.add_argument("--out", default="reports", help="output folder (default: reports/)")
    parser.add_argument("--only", default=None, metavar="01,04",
                        help="comma-separated notebook numbers or names to run (default: all)")
    parser.add_argument("--timeout", type=int, default=1200, metavar="S",
                        help="seconds one cell may run before the notebook fails (default: 1200)")
    parser.add_argument("-p", "--param", action="append", default=[], metavar="NAME=VALUE",
                        help="set a parameters-cell value in every notebook that declares it, e.g. "
                             "-p SERVER_URL=http://gpu-box:30000 (repeatable)")
    parser.add_argument("--notebooks", default=None, metavar="DIR", help="notebook folder (default: notebooks/)")
    parser.add_argument("--no-progress", action="store_true", help="no per-cell progress bars")
    parser.add_argument("--screenshot", default=None, metavar="PNG",
                        help="also save a PNG of the post-mortem's first screen (needs /usr/bin/chromium)")
    parser.add_argument("--no-build", action="store_true",
                        help="do not check or build the lab first (notebooks build it on first use)")


def run(args) -> int:
    import sys
    from pathlib import Path

    from eagle3lab import engines
    from eagle3lab.report import render as report
    from eagle3lab.errors import EagleLabError

    if args.timeout <= 0:
        raise EagleLabError("--timeout must be a positive number of seconds")
    only = args.only.split(",") if args.only else None
    notebooks_dir = Path(args.notebooks) if args.notebooks else report.NOTEBOOKS_DIR
    report.list_notebooks(notebooks_dir, only)  # bad --only: say so before any work
    parameters = dict(report.parse_parameter(p) for p in args.param)
    if args.backend != DEFAULT_BACKEND:  # the notebooks' own default needs no parameter
        engines.get(args.backend).python()  # no vLLM: say how to get it before any notebook runs
        parameters.setdefault("BACKEND", args.backend)
    if not args.no_build:
        from eagle3lab.lab import load_lab

        # Build (or check) the lab here, where its progress shows, not inside a notebook cell.
        load_lab(args.lab, build=True)
    result = report.build_report(out=args.out, lab=args.lab, only=only, timeout=args.timeout,
                                 parameters=parameters,
                                 notebooks_dir=notebooks_dir,
                                 progress=not args.no_progress)
    total = sum(r.seconds for r in result.runs)
    print(result.summary().to_string(index=False))
    print(f"\npost-mortem: {result.index_path}  ({len(result.runs)} notebooks, {total:.0f} s)")
    if args.screenshot:
        print(f"screenshot: {report.screenshot(result.index_path, args.screenshot, height=1500)}")
    for err in result.errors:
        print(f"eagle3lab: error: {err}", file=sys.stderr)
    return 0 if result.ok else 1

"""`eagle3lab patch sglang --check|--apply|--revert`: the embedding-capture patch (id -1 = boundary 0)."""

from __future__ import annotations

HELP = "check, apply or revert the SGLang patch that lets draft id -1 capture the embedding"


def add_arguments(parser) -> None:
    parser.add_argument("package", choices=["sglang"], help="what to patch")
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--check", action="store_true",
                        help="exit 0 when the patch applies or is applied, 1 when it cannot")
    action.add_argument("--apply", action="store_true", help="apply (idempotent, all files or none)")
    action.add_argument("--revert", action="store_true", help="restore the files byte-identical")
    parser.add_argument("--sglang-dir", default=None,
                        help="the sglang/ package directory (default: the installed sglang)")
    parser.add_argument("--diff", action="store_true", help="also print the unified diff")


def run(args) -> int:
    from eagle3lab.wiring import patching

    if args.check:
        plan = patching.check(args.sglang_dir)
        print(plan.summary())
        if args.diff and plan.ok:
            print(patching.diff(args.sglang_dir), end="")
        verdict = ("patch applied" if plan.applied else "patch applies") if plan.ok else "patch cannot apply"
        print(verdict)
        return 0 if plan.ok else 1
    if args.diff:
        print(patching.diff(args.sglang_dir), end="")
    plan = patching.apply(args.sglang_dir) if args.apply else patching.revert(args.sglang_dir)
    print(plan.summary())
    print("patch applied" if args.apply else "patch reverted")
    return 0

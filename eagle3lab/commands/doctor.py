"""`eagle3lab doctor`: one ranked list of causes, with evidence and fixes, from a user's checkpoints."""

from __future__ import annotations

HELP = ("rank what makes an EAGLE-3 deployment's acceptance low, from the draft and target checkpoints "
        "(plus flags, a log or a server); exit 1 on an error finding")


def add_arguments(parser) -> None:
    parser.add_argument("--draft", required=True, metavar="DIR", help="draft checkpoint directory")
    parser.add_argument("--target", metavar="DIR", help="target model directory (config.json, safetensors)")
    parser.add_argument("--serve", metavar="ENGINE==VERSION",
                        help="serving engine and version, e.g. sglang==0.5.23 or vllm==0.33.0 "
                             "(default: both at their newest read version)")
    parser.add_argument("--flags", metavar='"..."', help="the server's launch flags, as one quoted string")
    parser.add_argument("--log", metavar="FILE", help="a server log (SGLang, vLLM, ...)")
    parser.add_argument("--url", metavar="URL", help="a running server (its /server_info and /metrics)")
    parser.add_argument("--prompts", metavar="FILE",
                        help="prompts as served (one per line, or JSON lines with text/prompt)")
    parser.add_argument("--platform", choices=("cuda", "rocm", "cpu", "xpu"),
                        help="where the engine runs (known defects that need a platform are notes without it)")
    parser.add_argument("--temperature", type=float, metavar="T",
                        help="your traffic's sampling temperature: known defects that need T > 0 apply; "
                             "with --url the doctor compares a greedy and a T window (docs/known-defects.md)")
    parser.add_argument("--static", action="store_true", help="configs and headers only; do not run the target")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def run(args) -> int:
    from eagle3lab.doctor import doctor

    report = doctor(args.draft, target=args.target, serve=args.serve, flags=args.flags, log=args.log,
                    url=args.url, prompts=args.prompts, empirical=not args.static,
                    platform=args.platform, temperature=args.temperature)
    print(report.to_json() if args.json else report)
    return report.exit_code

"""`eagle3lab wiring`: which target tensors the server feeds each draft slot, against training."""

from __future__ import annotations

from eagle3lab.errors import EagleLabError
from eagle3lab.spec import LATEST_SGLANG

HELP = "check a draft checkpoint's hidden-state wiring: trained vs served boundaries, slot by slot"


def add_arguments(parser) -> None:
    parser.add_argument("--draft", required=True, metavar="DIR", help="draft checkpoint directory")
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--target", metavar="DIR", help="target model directory (its config.json)")
    target.add_argument("--num-layers", type=int, metavar="N", help="target layer count, instead of --target")
    parser.add_argument("--arch", help="target architecture (default: from --target, else LlamaForCausalLM)")
    parser.add_argument("--train", metavar="NAME==VER|B,B,B",
                        help="how training captured: specforge==0.2.0, eagle==main, "
                             "hf-hidden-states==5.0.0:0,3,31 (indices), or boundaries 0,3,31 "
                             "(default: the config's eagle3lab.train_boundaries, else specforge==0.2.0)")
    parser.add_argument("--serve", default=f"sglang=={LATEST_SGLANG}", metavar="ENGINE==VER",
                        help="serving engine and version (default sglang==" + LATEST_SGLANG + ")")
    parser.add_argument("--patched", action="store_true",
                        help="the server has eagle3lab's embedding-capture patch applied")
    parser.add_argument("--no-cuda-graph", action="store_true",
                        help="the server runs with --disable-cuda-graph (matters for sglang 0.4.9-0.5.10)")


def parse_train(text: str | None):
    """'0,3,31' -> [0, 3, 31]; 'NAME==VER' -> 'NAME==VER'; 'NAME==VER:1,2,3' -> (name, ver, ids)."""
    if text is None:
        return None
    head, sep, tail = text.partition(":")
    try:
        if "==" not in text:
            return [int(b) for b in text.split(",")]
        if sep:
            name, _, version = head.partition("==")
            return (name.strip(), version.strip(), [int(i) for i in tail.split(",")])
    except ValueError:
        raise EagleLabError(f"--train: cannot read {text!r}; use NAME==VER, NAME==VER:I,I,I or B,B,B") from None
    return text


def run(args) -> int:
    from eagle3lab.wiring.slots import check

    target = args.target if args.target is not None else args.num_layers
    report = check(args.draft, target, train=parse_train(args.train), serve=args.serve, arch=args.arch,
                   cuda_graph=not args.no_cuda_graph, patched=args.patched)
    print(report)
    return 0 if report.ok else 1

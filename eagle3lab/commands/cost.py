"""`eagle3lab cost`: what one speculative step costs on your hardware, from three numbers you have,
and what another accept length would give there (`eagle3lab.cost.stepcost`)."""

from __future__ import annotations

HELP = ("the cost of one speculative step in no-speculation steps (accept length x baseline tok/s / "
        "speculative tok/s), its break-even accept length, and what another accept length would give")


def add_arguments(parser) -> None:
    parser.add_argument("--baseline-tps", type=float, required=True, metavar="B",
                        help="tokens/s without speculation")
    parser.add_argument("--spec-tps", type=float, required=True, metavar="S",
                        help="tokens/s with speculation, at the configuration below")
    parser.add_argument("--accept-length", type=float, required=True, metavar="L",
                        help="accept length at that configuration (SGLang's, bonus token included)")
    parser.add_argument("--steps", type=int, required=True, metavar="K", help="--speculative-num-steps")
    parser.add_argument("--topk", type=int, default=1, help="--speculative-eagle-topk (default 1)")
    parser.add_argument("--draft-tokens", type=int, metavar="N",
                        help="--speculative-num-draft-tokens as it ran (default: steps + 1 for a chain)")
    parser.add_argument("--kind", choices=("total", "decode"), default="total",
                        help="which tokens/s B and S are (both the same kind; default total)")
    parser.add_argument("--iid", type=float, action="append", default=[], metavar="A",
                        help="also say what an i.i.d. per-token rate A gives at this depth (repeat)")
    parser.add_argument("--what-if", action="append", default=[], metavar="L[:LO-HI]",
                        help="another accept length, optionally with its interval (repeat), "
                             "e.g. --what-if 3.3 --what-if 2.1:1.9-2.3")
    parser.add_argument("--json", action="store_true", help="print everything as one JSON object")


def parse_what_if(text: str):
    """'2.1' -> 2.1; '2.1:1.9-2.3' -> (2.1, (1.9, 2.3)); anything else is a one-line error."""
    from eagle3lab.errors import EagleLabError

    value, _, interval = str(text).partition(":")
    try:
        if not interval:
            return float(value)
        lo, sep, hi = interval.partition("-")
        if not sep:
            raise ValueError
        return float(value), (float(lo), float(hi))
    except ValueError:
        raise EagleLabError(f"--what-if {text!r}: give an accept length L, or L:LO-HI "
                            "(e.g. 2.1:1.9-2.3)") from None


def describe(cost, iid=(), what_if=()) -> list[str]:
    """The arithmetic as lines of text (also under `eagle3lab bench --baseline`)."""
    cfg = f"{cost.steps}/{cost.topk}/{cost.draft_tokens}"
    lines = [f"at {cfg} ({cost.kind} tokens/s): {cost.spec_tps:g} with speculation, {cost.baseline_tps:g} "
             f"without ({cost.speedup:.2f}x), accept length {cost.accept_length:g}",
             f"one speculative step costs {cost.cost:.2f} no-speculation steps "
             f"(C = L x B / S = {cost.accept_length:g} x {cost.baseline_tps:g} / {cost.spec_tps:g})"]
    be = cost.break_even_iid_rate
    lines.append(f"it pays above an accept length of {cost.break_even:.2f}" + (
        f" (an i.i.d. per-token rate of {be:.2f} at depth {cost.steps})" if be is not None else
        f", more than depth + 1 = {cost.max_accept_length}: it cannot pay at this depth"))
    lines.append(f"accept length {cost.accept_length:g} corresponds to an i.i.d. per-token rate of "
                 f"{cost.iid_rate:.2f} at depth {cost.steps}")
    for a in iid:
        length = cost.iid_accept_length(a)
        w = cost.what_if(length)
        lines.append(f"an i.i.d. rate of {a:g} gives accept length {length:.2f} at depth {cost.steps}: "
                     f"{w['speedup']:.2f}x, {w['tokens_per_s']:.1f} tok/s here")
    for item in what_if:
        value, interval = item if isinstance(item, tuple) else (item, None)
        w = cost.what_if(value, interval)
        if interval is None:
            lines.append(f"accept length {value:g} would give {w['speedup']:.2f}x, {w['tokens_per_s']:.1f} "
                         f"tok/s here (pays: {w['pays']})")
        else:
            (s_lo, s_hi), (t_lo, t_hi) = w["speedup_range"], w["tokens_per_s_range"]
            lines.append(f"accept length {value:g} [{interval[0]:g}, {interval[1]:g}] would give "
                         f"{w['speedup']:.2f}x [{s_lo:.2f}, {s_hi:.2f}], {w['tokens_per_s']:.1f} "
                         f"[{t_lo:.1f}, {t_hi:.1f}] tok/s here (pays: {w['pays']})")
    from eagle3lab.cost.stepcost import ASSUMPTIONS

    return lines + [ASSUMPTIONS]


def run(args) -> int:
    import json

    from eagle3lab.cost.stepcost import StepCost

    cost = StepCost(args.baseline_tps, args.spec_tps, args.accept_length, args.steps, args.topk,
                    args.draft_tokens, args.kind)
    what_if = [parse_what_if(w) for w in args.what_if]
    if args.json:
        print(json.dumps(cost.as_dict(iid=args.iid, what_if=what_if)))
    else:
        print("\n".join(describe(cost, args.iid, what_if)))
    return 0

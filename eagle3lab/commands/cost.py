"""`eagle3lab cost`: what one speculative step costs, in plain decode steps.

Two ways in. From three numbers a deployment has (`--baseline-tps`, `--spec-tps`, `--accept-length`
at `--steps`): the measured step cost C = L x B / S and what another accept length would give
there (`eagle3lab.cost.stepcost`). From a target's config.json (`--target-config`, optionally
`--draft-config`): every configuration's predicted step cost by its parts (the verify pass over the
union of experts, the draft steps, the per-step overhead), its break-even accept length and, with
an acceptance profile, its speed-up with a range; the best configuration and why
(`eagle3lab.cost.archcost`, `configadvice`). In the bandwidth-bound limit by default (a bound,
no measurement); fitted with two or more `--measured` configurations and `--baseline-tps`.
"""

from __future__ import annotations

HELP = ("the cost of one speculative step in no-speculation steps: measured (accept length x baseline tok/s / "
        "speculative tok/s), or predicted per configuration from a target's config.json (--target-config)")
OLD_REQUIRED = ("--baseline-tps", "--spec-tps", "--accept-length", "--steps")


def add_arguments(parser) -> None:
    parser.add_argument("--baseline-tps", type=float, metavar="B", help="tokens/s without speculation")
    parser.add_argument("--spec-tps", type=float, metavar="S",
                        help="tokens/s with speculation, at the configuration below")
    parser.add_argument("--accept-length", metavar="L[:LO-HI]",
                        help="accept length at that configuration (SGLang's, bonus token included); with "
                             "--target-config, the acceptance profile (an accept length at depth --steps)")
    parser.add_argument("--steps", type=int, metavar="K", help="--speculative-num-steps")
    parser.add_argument("--topk", type=int, default=1, help="--speculative-eagle-topk (default 1)")
    parser.add_argument("--draft-tokens", type=int, metavar="N",
                        help="--speculative-num-draft-tokens as it ran (default: steps + 1 for a chain)")
    parser.add_argument("--kind", choices=("total", "decode"), default="total",
                        help="which tokens/s B and S are (both the same kind; default total)")
    parser.add_argument("--iid", action="append", default=[], metavar="A[:LO-HI]",
                        help="an i.i.d. per-token rate: what it gives at this depth (repeat); with "
                             "--target-config, the acceptance profile")
    parser.add_argument("--what-if", action="append", default=[], metavar="L[:LO-HI]",
                        help="another accept length, optionally with its interval (repeat), "
                             "e.g. --what-if 3.3 --what-if 2.1:1.9-2.3")
    arch = parser.add_argument_group("from a target's config.json")
    arch.add_argument("--target-config", metavar="PATH", help="the target's config.json")
    arch.add_argument("--draft-config", metavar="PATH|mtp",
                      help="the draft's config.json, or 'mtp' for the target's own MTP layer (default: one "
                           "EAGLE-3 layer of the target's width, 32k draft vocabulary, said so)")
    arch.add_argument("--draft-vocab", type=int, metavar="N", help="the draft's LM-head vocabulary (draft_vocab_size)")
    arch.add_argument("--weight-bits", action="append", default=[], metavar="[PART=]BITS",
                      help="the target's weight bits, all parts or one (attention, mlp, shared, experts, router, "
                           "head), e.g. experts=4.5; default: the config's quantization_config or dtype")
    arch.add_argument("--context", type=int, default=0, metavar="TOKENS",
                      help="KV-cache tokens each forward reads (default 0: weights only, the bound)")
    arch.add_argument("--locality", type=float, default=1.0,
                      help="routing locality, 1 independent routing (the upper bound on experts read) .. 0")
    arch.add_argument("--rates-from", metavar="BENCH_JSON",
                      help="the acceptance profile from `eagle3lab bench --url ... --json` output")
    arch.add_argument("--measured", action="append", default=[], metavar="S/T/N:TPS:L",
                      help="a measured configuration (repeat; 2 or more with --baseline-tps fit the model), "
                           "e.g. 3/1/4:159.78:1.86")
    arch.add_argument("--config", action="append", default=[], metavar="S/T/N",
                      help="a configuration to price (repeat; default chains 1..7 and common trees)")
    parser.add_argument("--json", action="store_true", help="print everything as one JSON object")


def split_range(text, flag: str):
    """'2.1' -> (2.1, None); '2.1:1.9-2.3' -> (2.1, (1.9, 2.3)); else a one-line error."""
    from eagle3lab.errors import EagleLabError

    value, _, interval = str(text).partition(":")
    try:
        if not interval:
            return float(value), None
        lo, sep, hi = interval.partition("-")
        if not sep:
            raise ValueError
        return float(value), (float(lo), float(hi))
    except ValueError:
        raise EagleLabError(f"{flag} {text!r}: give a number V, or V:LO-HI (e.g. 2.1:1.9-2.3)") from None


def parse_what_if(text: str):
    """'2.1' -> 2.1; '2.1:1.9-2.3' -> (2.1, (1.9, 2.3)); anything else is a one-line error."""
    from eagle3lab.errors import EagleLabError

    try:
        value, interval = split_range(text, "--what-if")
    except EagleLabError:
        raise EagleLabError(f"--what-if {text!r}: give an accept length L, or L:LO-HI "
                            "(e.g. 2.1:1.9-2.3)") from None
    return value if interval is None else (value, interval)


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
    if args.target_config:
        return run_architecture(args)
    return run_measured(args)


def run_measured(args) -> int:
    """The three-number arithmetic (what `eagle3lab cost` always did)."""
    import json

    from eagle3lab.cost.stepcost import StepCost
    from eagle3lab.errors import EagleLabError

    missing = [flag for flag in OLD_REQUIRED if getattr(args, flag[2:].replace("-", "_")) is None]
    if missing:
        raise EagleLabError(f"give {', '.join(missing)} (a measured configuration), or --target-config PATH "
                            "(predict from the target's architecture)")
    length, interval = split_range(args.accept_length, "--accept-length")
    if interval is not None:
        raise EagleLabError("--accept-length takes one number here (its interval goes to --what-if L:LO-HI)")
    cost = StepCost(args.baseline_tps, args.spec_tps, length, args.steps, args.topk, args.draft_tokens, args.kind)
    iid = [split_range(a, "--iid")[0] for a in args.iid]
    what_if = [parse_what_if(w) for w in args.what_if]
    if args.json:
        print(json.dumps(cost.as_dict(iid=iid, what_if=what_if)))
    else:
        print("\n".join(describe(cost, iid, what_if)))
    return 0


# --------------------------------------------------------------------------- from the architecture

def build_model(args):
    """The StepModel the flags describe: target, draft, bits, context, locality."""
    from eagle3lab.cost.archcost import CostParams, StepModel
    from eagle3lab.cost.modelshape import default_draft, load_config, mtp_draft, parse_bits, read_draft, read_target

    target = read_target(args.target_config, parse_bits(args.weight_bits))
    if args.draft_config == "mtp":
        draft = mtp_draft(target)
    elif args.draft_config:
        draft = read_draft(args.draft_config, target)
    else:
        draft = default_draft(target, args.draft_vocab or 32000, load_config(args.target_config, "target config"))
    if args.draft_vocab and args.draft_config:
        draft = draft.with_vocab(args.draft_vocab)
    return StepModel(target, draft, CostParams(locality=args.locality, context=args.context))


def acceptance_profile(args):
    """The profile the flags give (None without one): --rates-from, --accept-length at --steps, --iid."""
    from eagle3lab.cost import acceptprofile
    from eagle3lab.errors import EagleLabError

    given = [f for f, v in (("--rates-from", args.rates_from), ("--accept-length", args.accept_length),
                            ("--iid", args.iid)) if v]
    if len(given) > 1:
        raise EagleLabError(f"give one acceptance profile, not {' and '.join(given)}")
    if args.rates_from:
        return acceptprofile.from_bench(args.rates_from)
    if args.accept_length:
        if args.steps is None:
            raise EagleLabError("--accept-length with --target-config needs --steps K (the depth it was measured at)")
        value, interval = split_range(args.accept_length, "--accept-length")
        return acceptprofile.from_accept_length(value, args.steps, interval, args.topk, args.draft_tokens)
    if args.iid:
        if len(args.iid) > 1:
            raise EagleLabError("with --target-config give one --iid A[:LO-HI] (the acceptance profile)")
        value, interval = split_range(args.iid[0], "--iid")
        return acceptprofile.from_iid(value, interval)
    return None


def measurements(args) -> list:
    """--measured configurations, plus --spec-tps at --steps/--topk/--draft-tokens when given."""
    from eagle3lab.cost.archfit import Measured, parse_measured
    from eagle3lab.errors import EagleLabError

    data = [parse_measured(m) for m in args.measured]
    if args.spec_tps is not None:
        if args.steps is None or args.accept_length is None:
            raise EagleLabError("--spec-tps needs --steps and --accept-length (the configuration it was measured at)")
        tokens = args.draft_tokens or args.steps + 1
        data.append(Measured(args.steps, args.topk, tokens, args.spec_tps,
                             split_range(args.accept_length, "--accept-length")[0]))
    if data and not args.baseline_tps:
        raise EagleLabError("measured configurations need --baseline-tps (tokens/s without speculation)")
    return data


def run_architecture(args) -> int:
    from eagle3lab.commands.common import dumps
    from eagle3lab.cost import archfit
    from eagle3lab.cost.archcost import parse_configuration
    from eagle3lab.cost.configadvice import advise

    model = build_model(args)
    profile = acceptance_profile(args)
    data = measurements(args)
    fit = archfit.fit(model, data, args.baseline_tps) if len(data) >= 2 else None
    if fit is not None:
        model = fit.model
    configs = [parse_configuration(c) for c in args.config] or None
    out = advise(model, profile, fit, args.baseline_tps, configs)
    if len(data) == 1:
        out["measured"] = one_measurement(model, data[0], args.baseline_tps)
    print(dumps(out) if args.json else "\n".join(architecture_lines(out)))
    return 0


def one_measurement(model, m, baseline_tps: float) -> dict:
    """One measured configuration beside the model: too few to fit, enough to compare."""
    from eagle3lab.cost.archfit import design_row

    measured = m.cost(baseline_tps)
    base, coef = design_row(model, m.steps, m.topk, m.draft_tokens)
    return {"configuration": m.label, "measured_step_cost": measured,
            "model_step_cost": model.parts(m.steps, m.topk, m.draft_tokens).step_cost,
            "fixed_share_that_fits": (measured - base) / coef,
            "note": "one measured configuration: compared, not fitted (fitting needs two or more)"}


# --------------------------------------------------------------------------- text

def architecture_lines(out: dict) -> list[str]:
    """`advise`'s dict as the text `eagle3lab cost --target-config` prints."""
    lines = model_lines(out["model"]) + [f"basis: {basis_text(out['basis'])}"]
    lines += [f"note: {n}" for n in out["notes"]]
    if "acceptance" in out:
        lines.append(f"acceptance: {acceptance_text(out['acceptance'])}")
    if "fit" in out:
        lines += fit_lines(out["fit"])
    lines.append("")
    lines += table_lines(out["configurations"], "acceptance" in out, bool(out.get("baseline_tokens_per_s")))
    if "measured" in out:
        m = out["measured"]
        lines.append(f"measured at {m['configuration']}: {m['measured_step_cost']:.2f} plain steps against the model's "
                     f"{m['model_step_cost']:.2f} (a fixed share of {m['fixed_share_that_fits']:.2f} of a plain step "
                     "would meet it; one configuration: compared, not fitted)")
    lines.append("")
    lines.append(f"best: {out['best']} -- {out['why']}" if out["best"] else f"ranking: {out['why']}")
    return lines


def model_lines(model: dict) -> list[str]:
    t, d = model["target"], model["draft"]
    head = f"target {t['name']} ({t['architecture']}, {t['family']} fields): {t['layers']} layers"
    if t.get("experts"):
        head += (f", {t['moe_layers']} MoE layers of {t['experts']} experts ({t['active']} per token), "
                 f"experts {model['expert_share_of_decode']:.0%} of a decode step's bytes")
    bits = ", ".join(f"{k} {v:g}" for k, v in t["bits"].items() if k != "fc")
    return [head + f"; a decode step reads {model['decode_gigabytes']:.1f} GB", f"  weight bits: {bits}",
            f"draft {d['name']} ({d['architecture']}): one forward = {model['draft_forward_over_decode']:.3f} plain "
            f"steps, its fc {model['fc_over_decode']:.3f} once per step, vocabulary {d['vocab']:,}"]


def basis_text(basis: str) -> str:
    from eagle3lab.cost.archcost import BOUND, BOUND_NOTE

    return BOUND_NOTE if basis == BOUND else basis


def acceptance_text(acc: dict) -> str:
    text = acc["source"]
    if acc.get("iid_rate") is not None and acc["kind"] != "iid rate":
        rng = acc.get("iid_rate_range")
        text += f" (i.i.d. rate {acc['iid_rate']:.2f}" + (f" [{rng[0]:.2f}, {rng[1]:.2f}])" if rng else ")")
    return text + "; trees get an accept length only where it was measured"


def fit_lines(fit: dict) -> list[str]:
    parts = [f"{name} {u['value']:.2f}" + (f" [{u['interval'][0]:.2f}, {u['interval'][1]:.2f}]" if u["interval"] else "")
             for name, u in fit["unknowns"].items()]
    loo = fit["leave_one_out"]
    lines = [f"fitted: {', '.join(parts)} (95 % intervals; {fit['degrees_of_freedom']} residual degrees of freedom)"]
    if loo["median_abs_error"] is not None:
        lines.append(f"  each configuration predicted from the others: median |error| {loo['median_abs_error']:.2f}, "
                     f"largest {loo['max_abs_error']:.2f} plain steps")
    return lines


def _fmt(value, rng=None, unit: str = "", digits: int = 2) -> str:
    if value is None:
        return "-"
    text = f"{value:.{digits}f}{unit}"
    lo, hi = (f"{v:.{digits}f}" for v in rng) if rng else ("", "")
    return text + (f" [{lo}, {hi}]" if rng and lo != hi else "")


def table_lines(rows: list[dict], with_profile: bool, with_tps: bool) -> list[str]:
    head = f"{'config':>8} {'verify':>7} {'draft':>6} {'overhead':>8} {'step cost':>18} {'break-even':>10}"
    if with_profile:
        head += f" {'accept length':>20} {'speed-up':>22}"
    if with_tps:
        head += f" {'tok/s':>22}"
    lines = [head + "   (costs in plain decode steps)"]
    for r in rows:
        line = (f"{r['configuration']:>8} {r['verify_cost']:7.2f} {r['draft_cost']:6.2f} {r['overhead']:8.2f} "
                f"{_fmt(r['step_cost'], r.get('step_cost_range')):>18} {r['break_even_accept_length']:10.2f}")
        if with_profile:
            line += (f" {_fmt(r.get('accept_length'), r.get('accept_length_range')):>20}"
                     f" {_fmt(r.get('speedup'), r.get('speedup_range'), 'x'):>22}")
        if with_tps and r.get("tokens_per_s") is not None:
            line += f" {_fmt(r['tokens_per_s'], r['tokens_per_s_range'], '', 1):>22}"
        lines.append(line)
    return lines

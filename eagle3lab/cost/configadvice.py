"""Which configuration, and what it will give: per configuration the step cost and its parts, the
break-even accept length, and with an acceptance profile the speed-up with its range; the best
configuration and why (the verify union, the draft steps, or the per-step overhead).

Why a separate step from the model: the same ranking serves `eagle3lab cost` (text and `--json`),
the post-mortem's advice for the incident (`costchecks.incident_advice`) and a notebook, so it
returns plain dicts. A speed-up is L / C (decode tokens/s with over without speculation); its
range takes the accept length's range and, for a fitted model, the step cost's prediction
interval (the bandwidth-bound limit has no interval: it is one number, a bound on the union).
Statistics layer: imports `archcost`, `archfit`, `acceptprofile`.
"""

from __future__ import annotations

from eagle3lab.cost.archcost import CHAINS, TREES, StepModel, chain_growth, expert_share


def configuration_row(model: StepModel, config, profile=None, fit=None, baseline_tps: float | None = None) -> dict:
    """One configuration as JSON: the model's parts, the break-even accept length, and with a
    profile the accept length, speed-up and tokens/s with their ranges."""
    parts = model.parts(*config)
    row = parts.as_dict()
    interval = fit.step_cost_interval(parts.steps, parts.topk, parts.draft_tokens) if fit else None
    row["step_cost_range"] = list(interval) if interval else None
    if profile is None:
        return row
    got = profile.accept_length(parts.steps, parts.topk, parts.draft_tokens)
    if got is None:
        row.update(accept_length=None, speedup=None, speedup_range=None,
                   note="the acceptance profile gives no accept length here (a tree, or beyond its positions)")
        return row
    value, (lo, hi) = got
    c, (c_lo, c_hi) = parts.step_cost, (interval or (parts.step_cost, parts.step_cost))
    c_lo = max(c_lo, 1e-9)
    speed = value / c
    rng = [lo / c_hi, hi / c_lo]
    row.update(accept_length=value, accept_length_range=[lo, hi], speedup=speed, speedup_range=rng,
               pays="yes" if rng[0] > 1 else "no" if rng[1] < 1 else "undecided")
    if baseline_tps:
        row.update(tokens_per_s=baseline_tps * speed, tokens_per_s_range=[baseline_tps * v for v in rng])
    return row


def best_row(rows: list[dict]) -> dict | None:
    """The configuration with the highest predicted speed-up (None without a profile)."""
    ranked = [r for r in rows if r.get("speedup") is not None]
    return max(ranked, key=lambda r: r["speedup"]) if ranked else None


def why(model: StepModel, rows: list[dict], best: dict | None) -> str:
    """What makes the best configuration best, in the model's own parts: its step cost split into
    the verify union, the draft steps and the overhead, and what one step more or less would
    change in cost and in accepted tokens."""
    if best is None:
        return ("no acceptance profile: the speed-up of each configuration is its accept length over its step "
                "cost. " + _cost_driver(model))
    lo, hi = best["speedup_range"]
    rng = f" [{lo:.2f}, {hi:.2f}]" if round(lo, 2) != round(hi, 2) else ""
    text = (f"{best['configuration']} gives {best['speedup']:.2f}x{rng}: its step costs "
            f"{best['step_cost']:.2f} plain steps = verify {best['verify_cost']:.2f}{_union_text(model, best)} + draft "
            f"{best['draft_cost']:.2f} + overhead {best['overhead']:.2f}.")
    for other, word in ((_chain(rows, best, +1), "more"), (_chain(rows, best, -1), "fewer")):
        if other is not None:
            text += " " + _neighbour_text(model, best, other, word)
    return text + " " + _cost_driver(model)


def _union_text(model: StepModel, row: dict) -> str:
    if not model.target.is_moe:
        return ""
    return (f" ({row['verify_union_cost']:.2f} of it reading {row['experts_in_verify']:.1f} experts per MoE layer "
            f"instead of {model.target.active})")


def _neighbour_text(model: StepModel, best: dict, other: dict, word: str) -> str:
    """One step more (or fewer): the cost it adds (saves), by part, against the tokens it adds (loses)."""
    a, b = (best, other) if word == "more" else (other, best)
    grow = chain_growth(model, a["steps"])
    gain = b["accept_length"] - a["accept_length"]
    verb, tokens = ("would add", "more") if word == "more" else ("would save", "fewer")
    return (f"One step {word} ({other['configuration']}) {verb} {grow['total']:.2f} plain steps (verify union "
            f"{grow['verify']:.2f}, draft {grow['draft']:.2f}) for {gain:.2f} {tokens} accepted tokens: "
            f"{other['speedup']:.2f}x.")


def _chain(rows: list[dict], best: dict, delta: int) -> dict | None:
    if best["topk"] != 1:
        return None
    return next((r for r in rows if r["topk"] == 1 and r["steps"] == best["steps"] + delta
                 and r.get("speedup") is not None), None)


def _cost_driver(model: StepModel) -> str:
    """Which part makes longer chains dear on this target, from a 1-step to a 7-step chain."""
    a, b = model.parts(1), model.parts(7)
    union, draft = b.verify_cost - a.verify_cost, b.draft_cost - a.draft_cost
    if model.target.is_moe:
        share = expert_share(model)
        lead = (f"A shorter chain is cheaper on this target: from 1/1/2 to 7/1/8 the verify union adds {union:.2f} "
                f"plain steps and the draft steps {draft:.2f}, because routed experts are {share:.0%} of a decode "
                f"step's bytes and each token verified reads experts the others did not")
    else:
        lead = (f"A dense target's verify pass costs one plain step at any length: from 1/1/2 to 7/1/8 only the "
                f"draft steps add cost ({draft:.2f} plain steps)")
    if model.params.overhead:
        lead += f"; the overhead of {model.params.overhead:.2f} plain steps is paid once per step, favouring longer steps"
    return lead + "."


def advise(model: StepModel, profile=None, fit=None, baseline_tps: float | None = None,
           configurations=None) -> dict:
    """Everything `eagle3lab cost --target-config` prints: the shapes, the basis, every
    configuration's row, the best one and why."""
    configs = list(configurations or CHAINS + TREES)
    rows = [configuration_row(model, c, profile, fit, baseline_tps) for c in configs]
    best = best_row(rows)
    out = {"basis": model.params.basis, "model": model.summary(), "configurations": rows,
           "best": None if best is None else best["configuration"], "why": why(model, rows, best),
           "notes": list(model.target.notes) + list(model.draft.notes)}
    if profile is not None:
        out["acceptance"] = profile.as_dict()
    if fit is not None:
        out["fit"] = fit.as_dict()
    if baseline_tps:
        out["baseline_tokens_per_s"] = baseline_tps
    return out

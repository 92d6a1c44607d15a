"""The post-mortem's "why one step cost 2.9 plain steps": the incident's own arithmetic, the union of
experts a verify pass reads on a sparse MoE, the architecture model's bound from Kimi-K2.5's public
config, the public comparisons, and which configuration would pay for two acceptance profiles.

Every figure is computed here from data with its provenance (`eagle3lab.cost.costchecks`: the public
configs, the project's H200 measurements, the public figures; the incident record); the page says
which figures are calculated, which are bounds and which were measured, and by whom.
"""

from __future__ import annotations

from eagle3lab.cost import costchecks
from eagle3lab.cost.archcost import expected_union
from eagle3lab.report.postmortem import tables as t

PASS_SIZES = (1, 2, 4, 6)  # tokens in a verify pass the table shows (a decode step, chains 1/1/2 .. 5/1/6)


def _h200(rows: list[dict], shape: str, n: int, key: str):
    return next((r[key] for r in rows if r["shape"].startswith(shape) and r["n"] == n), None)


def union_table(model) -> str:
    """Distinct experts per MoE layer, and the layer's time at n tokens over its time at 1, as the
    model gives it from the shape and as measured on an H200, beside a dense shape's."""
    rows = costchecks.h200_verify_rows()
    tgt = model.target
    head = ["tokens in the pass"] + [str(n) for n in PASS_SIZES]
    lines = [
        ["distinct experts read per layer (independent routing)"]
        + [f"{expected_union(tgt.experts, tgt.active, n):.1f}" for n in PASS_SIZES],
        ["Kimi-shaped MoE layer, time ÷ time at 1 token: model (shape alone)"]
        + [f"{_h200(rows, 'kimi', n, 'model'):.2f}" for n in PASS_SIZES],
        ["the same layer measured on an H200 (bf16)"] + [f"{_h200(rows, 'kimi', n, 'measured'):.2f}" for n in PASS_SIZES],
        ["dense Llama-3.1-8B-shaped layers measured on an H200"]
        + [f"{_h200(rows, 'llama', n, 'measured'):.2f}" for n in PASS_SIZES],
    ]
    table = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return "\n".join(table + ["| " + " | ".join(r) + " |" for r in lines])


def why_section(rec=None) -> str:
    """The section's Markdown."""
    cost = t.incident_cost(rec)
    model = costchecks.kimi_model()
    tgt = model.target
    parts = model.parts(5, 1, 6)
    full = costchecks.kimi_model(costchecks.DRAFT_VOCABS[1]).parts(5, 1, 6)
    public = {r["case"].split(":")[0].split(" (")[0]: r for r in costchecks.public_rows()}
    qwen, dsv3 = public.get("Qwen3-30B-A3B"), public.get("DeepSeek-V3 MTP")
    lo, hi = cost["cost_range"]
    k1 = cost["k"] + 1
    text = [
        "*Calculated from the incident's figures, Kimi-K2.5's public config and the project's H200 measurements "
        "of layers of its shape; nothing here was measured on the incident's server.*",
        "",
        f"**The incident's own arithmetic.** Accept length {cost['accept_length']:.2f} × {cost['baseline_tps']:g} tok/s "
        f"÷ {cost['spec_tps']:g} tok/s = **{cost['cost']:.2f}** plain decode steps per speculative step at 5/1/6 "
        f"({lo:.2f}–{hi:.2f} over the three logged accept lengths). Speculation there pays only above an accept "
        f"length of about {cost['cost']:.1f}, and even a draft accepted in full ({k1} tokens a step) would be capped "
        f"at {k1} ÷ {cost['cost']:.2f} = {k1 / cost['cost']:.2f}×.",
        "",
        f"**Why.** {rec_target(rec)} is a sparse mixture of experts: {tgt.experts} routed experts in each of its "
        f"{tgt.moe_layers} MoE layers, {tgt.active} active per token. A decode step reads {tgt.active} experts per "
        f"layer; a verify pass reads the union of its tokens' experts, E × (1 − (1 − k/E)ⁿ) = "
        f"{expected_union(tgt.experts, tgt.active, k1):.1f} for the {k1} tokens of a 5/1/6 step if tokens route "
        "independently, an upper bound. A dense target's verify pass reads the same weights as a decode step:",
        "",
        union_table(model),
        "",
        f"**From the config alone**, with routed experts in INT4 as its checkpoint stores them and TorchSpec's public "
        f"Kimi-K2.5 EAGLE-3 draft shape at a 32k vocabulary, one 5/1/6 step costs **{parts.step_cost:.2f}** plain "
        f"steps in the bandwidth-bound limit: verify {parts.verify_cost:.2f}, of which {parts.union_cost:.2f} for the "
        f"extra experts, and five draft steps {parts.draft_cost:.2f}; {full.step_cost:.2f} with the full vocabulary. "
        f"That is within {100 * abs(parts.step_cost / cost['cost'] - 1):.0f} % of the incident's {cost['cost']:.2f} "
        "with nothing fitted. It is a bound for one request at a time: time taken as bytes read, independent "
        "routing, no fixed cost per forward (with many requests in flight, extra experts cost less).",
    ]
    if qwen or dsv3:
        text += ["", "**What others measured.** " + _public_sentence(qwen, dsv3)]
    text += ["", "### Which configuration would pay", "", advice_markdown(rec)]
    return "\n".join(text)


def rec_target(rec=None) -> str:
    from eagle3lab.report import incident as incident_record

    return (rec or incident_record.load()).model["target"]


def _public_sentence(qwen: dict | None, dsv3: dict | None) -> str:
    out = []
    if qwen:
        out.append(f"Qwen3-30B-A3B at {qwen['configuration']} cost {qwen['measured']:.2f} plain steps and ran slower "
                   f"than no speculation (SpecForge issue #339); the model gives {qwen['model']:.2f}.")
    if dsv3:
        lo, hi = dsv3["measured_range"]
        f_lo, f_hi = dsv3.get("fixed_share_range") or (dsv3["fixed_share_fitting"],) * 2
        out.append(f"DeepSeek-V3's MTP at {dsv3['configuration']} on 8 GPUs cost {lo:.2f}–{hi:.2f} (sglang PR "
                   f"#3582), under the bound's {dsv3['model']:.2f}: a fixed cost per forward of {f_lo:.2f}–{f_hi:.2f} "
                   "of a decode step fits it, which dilutes the extra bytes.")
    return " ".join(out) + " Sources: docs/cost-model.md."


def advice_rows(rec=None) -> list[dict]:
    """One row per configuration: the bound's step cost and the predicted tok/s for the incident's
    own acceptance and for the public Kimi-K2.5 drafts' (ranges from the accept lengths and the
    draft vocabulary)."""
    rows = {}
    for r in costchecks.incident_advice():
        row = rows.setdefault(r["configuration"], {"configuration": r["configuration"],
                                                   "step cost (bound)": _range(r["step_cost"], r["step_cost_range"])})
        cell = f"{r['tokens_per_s']:.0f} ({r['tokens_per_s_range'][0]:.0f}–{r['tokens_per_s_range'][1]:.0f})"
        if r.get("measured_tokens_per_s"):
            cell += f"; measured {r['measured_tokens_per_s']:g}"
        if r.get("tokens_per_s_at_most"):
            cell += f"; at most {r['tokens_per_s_at_most']:.0f} †"
        key = "incident's acceptance: tok/s" if r["profile"] == "incident" else "public Kimi-K2.5 drafts: tok/s"
        row[key] = cell
    return list(rows.values())


def _range(point: float, rng) -> str:
    lo, hi = rng
    return f"{point:.2f}" if abs(hi - lo) < 0.005 else f"{point:.2f}–{hi:.2f}"


def advice_markdown(rec=None) -> str:
    """The advice table and what it says, in numbers."""
    advice = costchecks.incident_advice()
    floors = costchecks.incident_floors()
    own = [r for r in advice if r["profile"] == "incident"]
    pub = [r for r in advice if r["profile"] != "incident"]
    best_pub = max(pub, key=lambda r: r["tokens_per_s"])
    base = own[0]["baseline_tokens_per_s"]
    floor = floors.get("1/1/2")
    bound_112 = next(r["step_cost"] for r in own if r["configuration"] == "1/1/2")
    rows = advice_rows(rec)
    table = t.markdown_table(rows)
    profiles = costchecks.incident_profiles()
    beats = [r for r in own if r["tokens_per_s_range"][0] > base and not r.get("tokens_per_s_at_most")]
    lines = [
        f"Predicted tok/s against the incident's {base:g} tok/s without speculation, in the bandwidth-bound limit, "
        f"for two acceptance profiles: the {profiles['incident'][1]}, and the {profiles['public Kimi-K2.5 drafts'][1]}. "
        "Each is carried to other depths as an i.i.d. per-token rate; ranges span the accept lengths and the draft "
        "vocabulary.",
        "",
        table,
        "",
    ]
    if floor:
        lines.append(f"† The incident's first launch, run as 1/1/2, shows a server that spends more than bytes: "
                     f"{base:g} ÷ {floor['tokens_per_s']:g} tok/s gives a step cost of at least "
                     f"{floor['step_cost_at_least']:.2f} there, against the bound's {bound_112:.2f}.")
    near = [r for r in own if r["tokens_per_s"] > base and r not in beats]
    straddle = "".join(f": {r['configuration']}'s {r['tokens_per_s']:.0f} ({r['tokens_per_s_range'][0]:.0f}–"
                       f"{r['tokens_per_s_range'][1]:.0f}) straddles {base:g}"
                       + (f", and the first launch's cost caps it at {r['tokens_per_s_at_most']:.0f} †"
                          if r.get("tokens_per_s_at_most") else "") for r in near[:1])
    lines.append("With the incident's own acceptance carried as an i.i.d. rate " + (
        f"no configuration clearly beats no speculation{straddle}." if not beats else
        f"{', '.join(r['configuration'] for r in beats)} would beat no speculation.") + " " + _collapse_sentence(own, floor, base))
    longest = pub[-1]
    lines.append(f"With a draft as good as the public ones the bound's best is {best_pub['configuration']} at about "
                 f"{best_pub['tokens_per_s']:.0f} tok/s ({best_pub['tokens_per_s_range'][0]:.0f}–"
                 f"{best_pub['tokens_per_s_range'][1]:.0f}), while {longest['configuration']} gives "
                 f"{longest['tokens_per_s']:.0f}: each further draft token adds experts to every verify pass. "
                 + _sglang_auto_sentence(rec) + " Two chain lengths measured on the server tell where it sits.")
    return "\n".join(lines)


def collapse_at_112(own: list[dict], floor: dict | None, base: float) -> tuple[float, float]:
    """Predicted tok/s at 1/1/2 if the incident's draft accepts only at position 1 (no TTT): the
    whole logged accept length kept at 1/1/2's step cost (the bound's range; at least the first
    launch's measured floor where that is higher)."""
    from eagle3lab.report import incident as incident_record

    fig = incident_record.load().figure("after_fix_accept_length")
    row = next(r for r in own if r["configuration"] == "1/1/2")
    lo_cost, hi_cost = row["step_cost_range"]
    worst = max(hi_cost, floor["step_cost_at_least"]) if floor else hi_cost
    return base * fig.low / worst, base * fig.high / lo_cost


def _collapse_sentence(own: list[dict], floor: dict | None, base: float) -> str:
    lo, hi = collapse_at_112(own, floor, base)
    verdict = "above" if lo > base else "not clearly above"
    return (f"If instead the draft accepts at position 1 only (no TTT, the summary's arithmetic), 1/1/2 keeps the "
            f"whole accept length at its lower step cost: {lo:.0f}–{hi:.0f} tok/s, {verdict} {base:g}. Which of the "
            "two holds is what the per-position measurement (step 3 of the box) decides.")


def _sglang_auto_sentence(rec=None) -> str:
    """What SGLang chooses by itself for the incident's architecture when no speculative flags are
    given (its rules as read in the wheels, newest release read)."""
    from eagle3lab.engines.sglang.sglang_rules import _auto_choice, rules_for
    from eagle3lab.report import incident as incident_record
    from eagle3lab.spec import LATEST_SGLANG

    arch = (rec or incident_record.load()).model["architecture"]
    rules, _ = rules_for(LATEST_SGLANG)
    steps, topk, tokens = _auto_choice(rules, "EAGLE3", arch)
    return (f"SGLang {LATEST_SGLANG} itself picks {steps}/{topk}/{tokens} for {arch} when no speculative flags are "
            "given.")

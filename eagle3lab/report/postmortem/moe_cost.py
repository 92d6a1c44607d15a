"""The post-mortem's "why one step cost 2.9 plain steps": the incident's own arithmetic, the union of
experts a verify pass reads on a sparse MoE, the bytes model's step cost from Kimi-K2.5's public
config, the public comparisons, and which configuration would pay for two acceptance profiles.

Every figure is computed here from data with its provenance (`eagle3lab.cost.costchecks`: the public
configs, the project's H200 measurements, the public figures; the incident record); the page says
which figures are calculated, which are modelled and which were measured, and by whom.
"""

from __future__ import annotations

from eagle3lab.cost import costchecks
from eagle3lab.cost.archcost import expected_union
from eagle3lab.report.postmortem import tables as t

TIE_TPS = 2.0  # predicted tok/s this close to the best are named with it: the model is not that exact
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
        ["Kimi-shaped MoE layer, time ÷ time at 1 token, model"]
        + [f"{_h200(rows, 'kimi', n, 'model'):.2f}" for n in PASS_SIZES],
        ["the same, measured on an H200 (bf16)"] + [f"{_h200(rows, 'kimi', n, 'measured'):.2f}" for n in PASS_SIZES],
        ["dense Llama-3.1-8B-shaped layers, measured on an H200"]
        + [f"{_h200(rows, 'llama', n, 'measured'):.2f}" for n in PASS_SIZES],
    ]
    table = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return "\n".join(table + ["| " + " | ".join(r) + " |" for r in lines])


def why_section(rec=None) -> str:
    """The details page's section (the index says it in its first cause: `union_brief`)."""
    cost = t.incident_cost(rec)
    model = costchecks.kimi_model()
    tgt = model.target
    parts = model.parts(5, 1, 6)
    full = costchecks.kimi_model(costchecks.DRAFT_VOCABS[1]).parts(5, 1, 6)  # the incident's vocabulary is unknown
    lo, hi = cost["cost_range"]
    k1 = cost["k"] + 1
    text = [
        "*Calculated from the incident's figures and Kimi-K2.5's public config; H200 timings measured for this "
        "project, not in this run.*",
        "",
        f"**Arithmetic.** {cost['accept_length']:.3f}, the mean logged accept length, × "
        f"{cost['baseline_tps']:g} ÷ {cost['spec_tps']:g} tok/s = **{cost['cost']:.2f}** plain decode steps per 5/1/6 "
        f"step ({lo:.2f}–{hi:.2f} over the three logged values); every draft accepted, an accept length of {k1}, "
        f"would give at most {k1 / cost['cost']:.2f}×. Part of the {cost['cost']:.2f} may be CUDA graphs: if the "
        f"{cost['baseline_tps']:g} tok/s ran with them and the speculative runs without (the write-up does not say).",
        "",
        f"**Why.** {rec_target(rec)} routes each token to {tgt.active} of {tgt.experts} experts in each of its "
        f"{tgt.moe_layers} MoE layers. A verify pass of {k1} tokens reads the union of their experts, about "
        f"{expected_union(tgt.experts, tgt.active, k1):.1f} per layer on average if they route independently, "
        f"against {tgt.active} for a plain step. "
        + h200_sentence(k1),
        "",
        f"**A bytes model** (bytes read per step, one request at a time, nothing fitted) puts a 5/1/6 step at "
        f"**{parts.step_cost:.2f}** plain steps, {parts.union_cost:.2f} of it for the extra experts, within "
        f"{100 * abs(parts.step_cost / cost['cost'] - 1):.0f} % of {cost['cost']:.2f} ({full.step_cost:.2f} with the "
        "full draft vocabulary). " + _public_short(),
    ]
    return "\n".join(text)


def union_brief(rec=None) -> str:
    """Why a verify pass costs so much on this target, in a clause (the index's first cause): the
    union of experts it reads; the H200 layer timings that show it are on the details page."""
    tgt = costchecks.kimi_model().target
    k1 = t.incident_cost(rec)["k"] + 1
    return (f"verifying {k1} tokens reads about {expected_union(tgt.experts, tgt.active, k1):.0f} of {tgt.experts} "
            f"experts per MoE layer if they route independently, against {tgt.active} for a plain step "
            f"([why](details.html#{WHY_ANCHOR})).")


WHY_ANCHOR = "Why-one-step-cost-2.9-plain-steps"  # the details page's heading (page.details_markdown)


def h200_sentence(n: int) -> str:
    """The H200 measurements in one sentence: an MoE layer's time grows with the tokens of a verify
    pass, a dense layer's barely does."""
    rows = costchecks.h200_verify_rows()
    moe, dense = _h200(rows, "kimi", n, "measured"), _h200(rows, "llama", n, "measured")
    return (f"Measured on an H200 for this project, not in this run, a Kimi-shaped MoE layer takes {moe:.2f} times "
            f"as long for {n} tokens as for 1; a dense Llama-3.1-8B-shaped layer {dense:.2f} times "
            f"([details](details.html#{LAYERS_ANCHOR})).")


def rec_target(rec=None) -> str:
    from eagle3lab.report import incident as incident_record

    return (rec or incident_record.load()).model["target"]


def _public_cases() -> tuple[dict | None, dict | None]:
    """The public MoE step costs the page compares the bytes model with (costchecks.public_rows)."""
    public = {r["case"].split(":")[0].split(" (")[0]: r for r in costchecks.public_rows()}
    return public.get("Qwen3-30B-A3B"), public.get("DeepSeek-V3 MTP")


def _public_short() -> str:
    """The bytes model's misses where a step cost can be checked, both ways (others' MoE costs and the
    incident's 15/1/16 launch below it, the incident's 1/1/2 launch above it): a guide, not a forecast."""
    band = _public_band()
    if band is None:
        return ""
    low, high = band
    miss = incident_misses()
    return (f"Elsewhere it misses both ways: MoE costs others published are {low:.0f}–"
            f"{high:.0f} % below it ([details](details.html#{LAYERS_ANCHOR})), as is the "
            f"incident's {miss['long']} launch, by {miss['long_below'][0]:.0f}–{miss['long_below'][1]:.0f} % if it "
            f"accepted as 5/1/6 did; its {miss['short']} launch cost at least {miss['short_above']} % more.")


def _public_band() -> tuple[float, float] | None:
    """How far below the bytes model the MoE step costs others published came out, in percent
    (lowest, highest), or None where the public figures lack either case."""
    qwen, dsv3 = _public_cases()
    if not qwen or not dsv3:
        return None
    under = lambda x, model: 100 * (1 - x / model)  # noqa: E731
    lo, hi = dsv3["measured_range"]
    return (min(under(qwen["measured"], qwen["model"]), under(hi, dsv3["model"])), under(lo, dsv3["model"]))


def misses_brief() -> str:
    """The bytes model's error band in one plain sentence (the index; the details page names each
    case): from the farthest below it a measured step cost came out to the least above it."""
    miss = incident_misses()
    return (f"{_below_who(miss)} came out up to {_farthest_below(miss):.0f} % below the model, the incident's "
            f"{miss['short']} launch at least {miss['short_above']} % above it ([in full](details.html#{LAYERS_ANCHOR})).")


def _farthest_below(miss: dict) -> float:
    """How far below the bytes model the farthest measured step cost came out, in percent: others'
    published costs and the incident's long launch (`incident_misses`)."""
    band = _public_band()
    return max(miss["long_below"][1], band[1] if band else 0)


def incident_misses() -> dict:
    """How far the incident's own launches put a step's cost from the bytes model's: at 15/1/16, the
    cost its logged tok/s implies at the incident's acceptance carried there (percent below the
    model); at 1/1/2, the least cost the first launch implies (percent above, rounded down)."""
    import math

    c = costchecks.incident_long_chain()
    implied = [a * c["baseline_tokens_per_s"] / c["tokens_per_s"] for a in c["incident_accept_length_range"]]
    below = sorted(100 * (1 - x / c["step_cost"]) for x in implied)
    short = "1/1/2"
    model = next(r["step_cost_range"][1] for r in costchecks.incident_advice()  # its highest: the draft vocabulary
                 if r["profile"] == "incident" and r["configuration"] == short)
    least = costchecks.incident_floors()[short]["step_cost_at_least"]
    return {"long": c["configuration"], "long_below": tuple(below), "short": short,
            "short_above": math.floor(100 * (least / model - 1))}


def long_chain_sentence() -> str:
    """The bytes model against the incident's 15/1/16 launch (`costchecks.incident_long_chain`): the
    accept length the logged tok/s would need under it, against the incident's own acceptance there."""
    c = costchecks.incident_long_chain()
    lo, hi = c["incident_accept_length_range"]
    return (f"**The {c['configuration']} launch does not fit the model.** There it puts a step at {c['step_cost']:.2f} "
            f"plain steps, so the logged {c['tokens_per_s']:g} tok/s would need an accept length of "
            f"{c['accept_length_needed']:.1f} ({c['step_cost']:.2f} × {c['tokens_per_s']:g} ÷ {c['baseline_tokens_per_s']:g}), "
            f"against {lo:.2f}–{hi:.2f} for the incident's acceptance carried to that depth. Either that launch, made with "
            "the wiring still off, accepted almost twice as much, or the model overstates long chains, as it overstates "
            "the other MoE costs above.")


def public_markdown() -> str:
    """The details page's step-cost section: the H200 table of layers, and what public reports
    measured beside the bytes model (checked against others' numbers, not only the incident's)."""
    head = ("Distinct experts a verify pass reads per MoE layer, and a layer's time at n tokens over its time at 1, "
            "as the model gives it from the shape alone and as measured on an H200:\n\n"
            + union_table(costchecks.kimi_model()) + "\n\n")
    qwen, dsv3 = _public_cases()
    return (head + ((_public_sentence(qwen, dsv3) + " ") if qwen or dsv3 else "") + _sglang_auto_sentence()
            + "\n\n" + long_chain_sentence())


def _public_sentence(qwen: dict | None, dsv3: dict | None) -> str:
    out = []
    if qwen:
        out.append(f"Qwen3-30B-A3B at {qwen['configuration']} cost {qwen['measured']:.2f} plain steps and ran slower "
                   f"than no speculation (SpecForge issue #339); the model gives {qwen['model']:.2f}.")
    if dsv3:
        lo, hi = dsv3["measured_range"]
        f_lo, f_hi = dsv3.get("fixed_share_range") or (dsv3["fixed_share_fitting"],) * 2
        out.append(f"DeepSeek-V3's MTP at {dsv3['configuration']} on 8 GPUs cost {lo:.2f}–{hi:.2f} (sglang PR "
                   f"#3582), under the bytes model's {dsv3['model']:.2f}: a fixed cost per forward of {f_lo:.2f}–{f_hi:.2f} "
                   "of a decode step fits it, which dilutes the extra bytes.")
    return " ".join(out) + " Sources: docs/cost-model.md."


def advice_rows(rec=None) -> list[dict]:
    """One row per configuration: the bytes model's step cost and the predicted tok/s for the incident's
    own acceptance and for the public Kimi-K2.5 drafts' (ranges from the accept lengths and the
    draft vocabulary)."""
    rows = {}
    for r in costchecks.incident_advice():
        row = rows.setdefault(r["configuration"], {"configuration": r["configuration"],
                                                   "step cost (bytes model)": _range(r["step_cost"], r["step_cost_range"])})
        cell = f"{r['tokens_per_s']:.0f} ({r['tokens_per_s_range'][0]:.0f}–{r['tokens_per_s_range'][1]:.0f})"
        if r.get("measured_tokens_per_s"):
            cell += f"; reported {r['measured_tokens_per_s']:g}"  # the incident's own, as its write-up gives it
        if r.get("tokens_per_s_at_most"):
            cell += f"; at most {r['tokens_per_s_at_most']:.0f} †"
        key = "incident's acceptance: tok/s" if r["profile"] == "incident" else "public Kimi-K2.5 drafts: tok/s"
        row[key] = cell
    return list(rows.values())


def _range(point: float, rng) -> str:
    lo, hi = rng
    return f"{point:.2f}" if abs(hi - lo) < 0.005 else f"{point:.2f}–{hi:.2f}"


def _advice_facts() -> dict:
    """The advice's rows split by acceptance profile, with what every rendering of it reads: the
    baseline, the first launch's floors, the chains that beat the baseline at the incident's
    acceptance, and the public drafts' best (with those within TIE_TPS of it)."""
    advice = costchecks.incident_advice()
    own = [r for r in advice if r["profile"] == "incident"]
    pub = [r for r in advice if r["profile"] != "incident"]
    base = own[0]["baseline_tokens_per_s"]
    best_pub = max(pub, key=lambda r: r["tokens_per_s"])
    return {"own": own, "pub": pub, "base": base, "floors": costchecks.incident_floors(), "best_pub": best_pub,
            "beats": [r for r in own if r["tokens_per_s_range"][0] > base and not r.get("tokens_per_s_at_most")],
            "tied": [r for r in pub if r["tokens_per_s"] >= best_pub["tokens_per_s"] - TIE_TPS]}


def _position1_cap(row: dict, floors: dict) -> dict | None:
    """The first launch's floor on `row`'s step cost, where it caps the row's prediction (the † rows)."""
    return floors.get(row["configuration"]) if row.get("tokens_per_s_at_most") else None


def advice_markdown(rec=None, brief: bool = False) -> str:
    """What the advice table says, in numbers: the whole table with its notes, or `brief`, a table of
    configuration x acceptance profile and its verdict (both on the details page; the index says the
    verdict in its bottom line, `advice_verdict`)."""
    facts = _advice_facts()
    profiles = costchecks.incident_profiles()
    if brief:
        return _advice_brief(rec, facts, profiles)
    own, pub, base, beats, tied, best_pub = (facts[k] for k in ("own", "pub", "base", "beats", "tied", "best_pub"))
    floor = facts["floors"].get("1/1/2")
    model_112 = next(r["step_cost"] for r in own if r["configuration"] == "1/1/2")
    near = [r for r in own if r["tokens_per_s"] > base and r not in beats]
    own_sentence = "**If the incident's acceptance holds at every depth**, " + _own_verdict(beats, near, base, floor) + "."
    longest = pub[-1]
    pub_sentence = (f"**A draft as good as the public ones** does best at {' or '.join(r['configuration'] for r in tied)}, "
                    f"about {best_pub['tokens_per_s']:.0f} tok/s; {longest['configuration']} gives "
                    f"{longest['tokens_per_s']:.0f}, since each further draft token adds experts to every verify pass.")
    lines = [
        f"Predicted tok/s against {base:g} without speculation, with the bytes model, for two acceptance profiles "
        f"carried to other depths as an i.i.d. per-token rate: the incident's, "
        f"{profiles['incident'][1].split(': ', 1)[1]}, and the public Kimi-K2.5 drafts' model cards, "
        f"{profiles['public Kimi-K2.5 drafts'][1].split(': ', 1)[1]}. Ranges span the accept lengths and the draft "
        "vocabulary. A measured step cost above the model's lowers every figure.",
        "",
        t.markdown_table(advice_rows(rec)),
        "",
    ]
    if floor:
        lines.append(f"† The first launch ran as 1/1/2 at {floor['tokens_per_s']:g} tok/s, so its step cost was at "
                     f"least {base:g} ÷ {floor['tokens_per_s']:g} = {floor['step_cost_at_least']:.2f}, above the "
                     f"model's {model_112:.2f}.\n")
    lines.append(own_sentence + " " + _collapse_sentence(own, floor, base))
    lines.append(pub_sentence)
    return "\n".join(lines)


def advice_verdict(rec=None) -> str:
    """The index's answer to which configuration would pay, in a sentence of its bottom line: the
    verdict at the incident's acceptance and for a draft as good as the public ones, the model's error
    band, and the rule to switch by (cold reads 44-47 put a careful read of the index at 10-15 minutes,
    slowed by its numbers; the table by acceptance profile is on the details page). The band says
    step costs below and above the model, as the details page says them, each with whose figures (cold
    reads 90-103 re-read a band in speeds converted from step costs: "it mixes units")."""
    from eagle3lab.report.postmortem.known_box import items

    facts = _advice_facts()
    base, beats, tied = facts["base"], facts["beats"], facts["tied"]
    verdict = (f"{' and '.join(r['configuration'] for r in beats)} would beat {base:g} tok/s" if beats
               else f"nothing clearly beats {base:g} tok/s")
    miss, band = incident_misses(), _public_band()
    # how far below the model measured step costs came out: others' published ones where there are any;
    # else the incident's long launch, with its condition (its acceptance is assumed, not logged: read 98)
    below, who = ((band[1], "others' MoE figures") if band else
                  (miss["long_below"][1], f"the incident's {miss['long']} launch, if it accepted as "
                                          f"{_after_fix_label()} did"))
    miss_short = f"the incident's {miss['short']} launch"
    # each tied configuration with its own range over accept lengths and draft vocabularies (cold reads 124-131:
    # 121 alone read as the optimistic end; reads 139-144: one range over both rows "merges two rows")
    reach = " or ".join(f"{r['tokens_per_s']:.0f} ({lo:.0f}–{hi:.0f}) at {r['configuration']}"
                        for r in tied for lo, hi in [r["tokens_per_s_range"]])
    return (f"at the incident's acceptance, {verdict}; a draft accepting as the public drafts' model cards say "
            f"would reach about {reach}. "
            f"Both are bytes-model predictions, one request at a time ([the table](details.html#"
            f"{ADVICE_ANCHOR})); measured steps have cost up to {below:.0f} % less than the model predicts ({who}) and at "
            f"least {miss['short_above']} % more ({miss_short}). Keep only what "
            f"measures faster than no speculation ({items('baseline', 'chains', joined=' to ')}).")


def _after_fix_label() -> str:
    """The incident's patched launch, as steps/topk/draft tokens (the acceptance the band carries)."""
    from eagle3lab.report import incident as incident_record
    from eagle3lab.report.incident import config_label

    return config_label(incident_record.load().config("after_fix"))


def _below_who(miss: dict) -> str:
    """Whose step costs came out below the bytes model: others' published ones, where the public
    figures hold both cases, and the incident's long launch."""
    own = f"the incident's {miss['long']} launch"
    return f"Others' published MoE step costs and {own}" if _public_band() else own[0].upper() + own[1:]


def _advice_brief(rec, facts: dict, profiles: dict) -> str:
    """The table by acceptance profile: configuration x how the draft accepts, predicted tok/s, and
    the verdict (cold read 29 asked for a table, not a chained sentence; the details page, above the
    full table). A cell the first launch caps shows the cap alone (cold read 34 read "114 …; at most
    105" as a contradiction); the column of a draft accepting at position 1 only is filled at every
    chain (cold read 35: computable)."""
    from eagle3lab.report.postmortem.known_box import items

    public = profiles['public Kimi-K2.5 drafts'][1].split(': ', 1)[1].split(' (')[0]
    rate_lo, rate_hi = profiles["incident"][0].rate_range
    cols = {"incident": f"as the incident's: {rate_lo:.2f}–{rate_hi:.2f} accepted at each position",
            "position 1": "all at position 1 (no TTT)", "public": f"the public drafts' model cards: {public}"}
    base, floors, floor = facts["base"], facts["floors"], facts["floors"].get("1/1/2")
    beats, best_pub, tied = facts["beats"], facts["best_pub"], facts["tied"]
    rows = {}
    for r in facts["own"] + facts["pub"]:
        row = rows.setdefault(r["configuration"], {"configuration": r["configuration"], cols["incident"]: "",
                                                   cols["position 1"]: "", cols["public"]: ""})
        row[cols["incident" if r["profile"] == "incident" else "public"]] = _brief_cell(r, base)
        if r["profile"] == "incident":
            cap = _position1_cap(r, floors)
            point, low, high = position1_only(r, cap, base)
            row[cols["position 1"]] = (f"at most {low:.0f}–{high:.0f} †" if cap else _brief_cell(
                {**r, "tokens_per_s": point, "tokens_per_s_range": [low, high]}, base))
    dagger = (f" †: at most, as the first launch ran 1/1/2 at {floor['tokens_per_s']:g} tok/s."
              if floor else "")
    verdict = (f"{', '.join(r['configuration'] for r in beats)} would pay at the incident's acceptance"
               if beats else "At the incident's acceptance nothing clearly pays")
    return "\n".join([
        f"Predicted tok/s, one request at a time, against {base:g} without speculation, by how the draft accepts, "
        f"each step's cost from a bytes model (bytes read per step, nothing fitted): {_fit_words(rec)}. Parentheses: "
        f"the range over the accept lengths and the draft's vocabulary, whose output layer each step reads.{dagger}",
        "",
        t.markdown_table(list(rows.values())),
        "",
        f"{verdict}; a draft as good as the public ones would, about {best_pub['tokens_per_s']:.0f} tok/s at "
        f"{' or '.join(r['configuration'] for r in tied)}. " + misses_brief() + f" A shortlist to measure "
        f"({items('chains')} of the post-mortem's *Do next*), not a forecast; every figure below.",
    ])


def _brief_cell(r: dict, base: float) -> str:
    """An advice cell for the index: the prediction and its range, the write-up's figure where it
    reports one, or the first launch's cap alone (its range over the accept lengths) where that is
    lower than the range (the † rows)."""
    at_most = r.get("tokens_per_s_at_most")
    if at_most and at_most < r["tokens_per_s_range"][1]:
        low = base * r["accept_length_range"][0] / r["step_cost_at_least"]
        return f"at most {low:.0f}–{at_most:.0f} †"
    cell = f"{r['tokens_per_s']:.0f} ({r['tokens_per_s_range'][0]:.0f}–{r['tokens_per_s_range'][1]:.0f})"
    return cell + (f"; reported {r['measured_tokens_per_s']:g}" if r.get("measured_tokens_per_s") else "")


def bytes_model_costs() -> tuple[float, float]:
    """The bytes model's 5/1/6 step cost in plain steps, at the smallest and the largest draft
    vocabulary (the incident's is unknown)."""
    lo, hi = (costchecks.kimi_model(v).parts(5, 1, 6).step_cost for v in costchecks.DRAFT_VOCABS)
    return lo, hi


def experts() -> int:
    """The routed experts per MoE layer of the incident's target (its public config)."""
    return costchecks.kimi_model().target.experts


def _fit_words(rec=None) -> str:
    """How close the bytes model comes to the incident's own 5/1/6 step cost, over the draft
    vocabularies (cold read 35: the 32 k end alone, 2 %, picked the best case)."""
    cost, (lo, hi) = t.incident_cost(rec), bytes_model_costs()
    off = [100 * (c / cost["cost"] - 1) for c in (lo, hi)]
    return (f"{lo:.2f}–{hi:.2f} plain steps at 5/1/6, {off[0]:.0f}–{off[1]:.0f} % above the incident's "
            f"{cost['cost']:.2f}")


ADVICE_ANCHOR = "Which-configuration-would-pay"
LAYERS_ANCHOR = "The-step-cost:-layers-measured,-and-what-others-measured"  # details_markdown's heading


def _own_verdict(beats: list[dict], near: list[dict], base: float, floor: dict | None) -> str:
    """Whether a configuration beats no speculation under the incident's own acceptance: those whose
    range clears it, else the nearest whose point does but whose range straddles it, with the cap
    the first launch's measured cost puts on it (the table's †)."""
    if beats:
        return f"{', '.join(r['configuration'] for r in beats)} would beat {base:g} tok/s without speculation"
    text = "no configuration clearly beats no speculation"
    if not near:
        return text
    r = near[0]
    text += (f": {r['configuration']}'s {r['tokens_per_s']:.0f} ({r['tokens_per_s_range'][0]:.0f}–"
             f"{r['tokens_per_s_range'][1]:.0f}) straddles {base:g}")
    if r.get("tokens_per_s_at_most") and floor:
        text += f", and the first launch caps it at {r['tokens_per_s_at_most']:.0f} †"
    return text


def collapse_at_112(own: list[dict], floor: dict | None, base: float) -> tuple[float, float]:
    """Predicted tok/s at 1/1/2 if the incident's draft accepts only at position 1 (no TTT): the
    whole logged accept length kept at 1/1/2's step cost (the model's range, raised at both ends
    to the first launch's measured floor where that is higher)."""
    row = next(r for r in own if r["configuration"] == "1/1/2")
    return position1_only(row, floor, base)[1:]


def position1_only(row: dict, floor: dict | None, base: float) -> tuple[float, float, float]:
    """Predicted tok/s at `row`'s configuration if the incident's draft accepts only at position 1
    (no TTT): every chain then keeps the whole logged accept length, at its own step cost (the
    model's, raised to a launch's measured floor where one is given and higher): (point, low, high)."""
    from eagle3lab.report import incident as incident_record

    fig = incident_record.load().figure("after_fix_accept_length")
    lo_cost, hi_cost = row["step_cost_range"]
    least = floor["step_cost_at_least"] if floor else 0.0  # the incident's own server cost no less there
    return (base * fig.mid / max(row["step_cost"], least), base * fig.low / max(hi_cost, least),
            base * fig.high / max(lo_cost, least))


def _collapse_sentence(own: list[dict], floor: dict | None, base: float) -> str:
    from eagle3lab.report.postmortem.known_box import items

    lo, hi = collapse_at_112(own, floor, base)
    return (f"**If its draft accepts at position 1 only** (no TTT), 1/1/2 keeps the whole accept length at its lower "
            f"step cost: at most {lo:.0f}–{hi:.0f} tok/s, a ceiling set by the first launch's least step cost. "
            f"{items('per_position').capitalize()} of the post-mortem's *Do next* tells which holds.")


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

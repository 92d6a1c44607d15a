"""The report's first page, written as a post-mortem: the answer first (what happened, the causes
with their status, what to change, the next measurement), then the timeline figure by figure, the
incident's own cost, the hypotheses tested against the incident, and links to the evidence.

Every incident figure comes from the incident record, every lab figure from a notebook's recorded
evidence (`eagle3lab.report.evidence`); nothing is typed. Provenance is said once per table.
"""

from __future__ import annotations

from eagle3lab.report import incident as incident_record
from eagle3lab.report.postmortem import tables as t
from eagle3lab.report.postmortem.known_box import RUNBOOK  # the third page: Do next, item by item (runbook_markdown)
from eagle3lab.report.postmortem.known_box import old_releases

DETAILS = "details"  # the second page: the evidence in full (render.build_report writes it)
BOUNDARIES = ("Boundaries: where a draft's hidden states are taken, 0 the embedding output, k the input of layer k; "
              "configs name them by ids, numbered differently by release.")  # every page's header says it so
PAGE_TITLES = {"index": "EAGLE-3 post-mortem", DETAILS: "EAGLE-3 post-mortem: the evidence in detail",
               RUNBOOK: "EAGLE-3 post-mortem: the runbook"}
DETAILS_LINK = f"[the details page]({DETAILS}.html#Which-hypotheses-fit-the-incident)"
PAGES = {"01": ("01_config_bug", "What configuration did the server run?"),
         "02": ("02_wiring_mismatch", "Which hidden states does the server feed the draft?"),
         "03": ("03_embedding_fix", "The embedding-capture patch, per SGLang version, and what it buys"),
         "04": ("04_accept_length_analysis", "Where in the draft chain is acceptance lost?"),
         "05": ("05_what_if_sweeps", "Which hypothesis fits, what fixes it, which configuration wins")}


def _link(nb: str, present=None) -> str:
    """A link to notebook `nb`'s page, or just its number when the report (whose pages are
    `present`; None: all of them) has no such page."""
    name, _ = PAGES[nb]
    if present is not None and name not in present:
        return nb
    return f"[{nb}]({name}.html)"


def summary(ev: dict, rec, hyp_rows: list[dict], present=None) -> str:
    """The answer: what happened, the bottom line (what to do now, the wiring fix whatever release ran,
    what would pay), then the causes with their status (the reasoning on the details page). The box
    follows. (Cold reads 72, 77-79 asked for a bottom line at the top.)"""
    from eagle3lab.report.postmortem import known_box

    f = rec.figure
    return "\n".join([
        f"**What happened** (as reported). An EAGLE-3 draft for {rec.model['target']}, "
        f"{f('validation_accuracy').text()} accurate in training, made SGLang **slower than no speculation** at every "
        f"setting tried ({_spec_range(rec)} against {f('baseline_tps').text()} without it), ending, after a wiring patch, "
        f"with accept lengths {f('after_fix_accept_length').text()} of a possible 6.",
        "",
        why_slower(rec),
        "",
        "**Bottom line**",
        "",
        *bottom_line(ev, rec),
        "",
        *((ids, "") if (ids := known_box.ids_brief(ev, rec)) else ()),
        f"**The causes** ([each in full](details.html#{CAUSES_ANCHOR})):",
        "",
        causes_list(ev, rec, hyp_rows, present, brief=True),
    ])


def why_slower(rec) -> str:
    """The cause in a line, under what happened (cold reads 106, 107 asked for it): what a step cost,
    from the reported figures, beside what the bytes model predicts without them (read 108: the first
    alone restates the slowdown), against what a step returned; why acceptance was low stays open. The
    break-even is said as tokens a step must yield (cold reads 120-123 re-read "paid only above an accept
    length of 2.9": that it equals the step cost went unsaid). The model comes first: it uses none of the
    reported figures (cold reads 139-144 read the reported step cost alone as the slowdown restated)."""
    from eagle3lab.report.postmortem import moe_cost

    cost, (lo, hi) = t.incident_cost(rec), moe_cost.bytes_model_costs()
    return (f"**Why it was slower.** A model of the bytes each pass reads puts a 5/1/6 step on this "
            f"{moe_cost.experts()}-expert MoE at {lo:.1f}–{hi:.1f} plain decode steps; the reported "
            f"figures give {cost['cost']:.1f}. A step had to yield over {cost['cost']:.1f} tokens to pay; it yielded "
            f"{cost['accept_length']:.1f}. Why so few is open.")


def _spec_range(rec) -> str:
    """The speculative launches' tok/s as reported, lowest to highest."""
    spec = sorted(v for fig in rec.figures.values() if fig.unit == "tok/s" and fig.config not in (None, "none")
                  for v in fig.values)
    return f"{spec[0]:g}–{spec[-1]:g} tok/s"


def _patch_reach(ev: dict, rec) -> tuple[str, str] | None:
    """How far the incident's patch reached the draft on the releases its accept rate allows
    (`clue_fit`, notebook 03's tables): ("never", releases) where CUDA graphs off did not feed the
    trained layers either, ("graphs off", releases) where only graphs off did; None where graphs on
    did too, or the tables say nothing of it."""
    fit, trained = clue_fit(ev, rec), list(rec.model["trained_boundaries"])
    if not fit or fit[2]["fix_feeds"] == trained:
        return None
    return ("never" if fit[1]["fix_feeds"] != trained else "graphs off"), fit[0]


def patch_took(ev: dict, rec) -> str:
    """Whether the incident's patch took, in the wiring cause's row: on the releases its accept rate
    allows, CUDA graphs on, SGLang's default, reset its ids (cold reads 126-128 drew "it probably never
    took" only from the details page), a setting the write-up never reports; its served layers, a reading
    of SGLang's setter, look the same either way (cold read 104), as the details page says
    (`version_caveat`). Cold reads 108-110 re-read it in the bottom line, which now gives the action
    alone. Empty where the patch reached the draft either way."""
    reach = _patch_reach(ev, rec)
    if not reach:
        return ""
    why = f"([why](details.html#{CAUSES_ANCHOR}))"
    if reach[0] == "never":
        return f"On the releases its accept rate allows, the patch never reached the draft {why}."
    return (f"Whether the patch took is unknown. The accept rate suggests {old_releases(reach[1], rec)}, whose "
            "code, as read, ignores the patched ids when CUDA graphs are on (the default). The write-up states "
            f"neither release nor setting {why}.")


def bottom_line(ev: dict, rec) -> list[str]:
    """Three lines: serve without speculation now (every speculative launch reported was slower), the
    wiring as one action (the fix that needs neither a patch nor CUDA graphs off; the table under it
    for staying on a release: cold reads 108-110 asked for a plain decision), and what would pay."""
    from eagle3lab.report.postmortem import moe_cost
    from eagle3lab.report.postmortem.known_box import items, no_patch_ids, recommended_row

    best = recommended_row(ev)
    none = [r for r in ((ev or {}).get("fix_ids") or {}).get("rows") or [] if r.get("ids") == "none"]
    stay = (f"; on {old_releases(none[-1]['versions'], rec)} with CUDA graphs on, no ids work" if none else "")
    fix = (f"upgrade to SGLang {best['versions']} and set {no_patch_ids(best)}, no patch, CUDA graphs on; to stay "
           f"on your release, use the table below{stay}." if best
           else f"set the ids for your release ({items('ids')}).")
    return [
        "- **Now**: serve without speculation.",
        f"- **Wiring**: {fix}",
        f"- **What would pay**: {moe_cost.advice_verdict(rec)}",
    ]


def version_caveat(ev: dict, rec, present=None) -> str:
    """Which SGLang the incident ran decides what its server fed and whether its fix took: the
    write-up does not say; its accept rate's definition narrows the release, and its served boundaries,
    a reading of SGLang's setter, cannot tell CUDA graphs on from off (cold read 104)."""
    ids = ev.get("fix_ids") or {}
    rows = ids.get("rows")
    if not rows:  # a run recorded before the rows were
        fixed_on = ids.get("fixed_on") or ids.get("story_versions") or "the releases notebook 03 lists"
        return (f"The patch fixes it on SGLang {fixed_on} only, but the logged accept rate points to "
                f"{t.RATE_OLD_UNTIL} or earlier, where CUDA graphs ignore the ids.")
    served, trained = rec.model["served_boundaries_before_fix"], list(rec.model["trained_boundaries"])
    fit = clue_fit(ev, rec)
    if fit:
        versions, tw, on = fit
        fixed = tw["fix_feeds"] == trained  # graphs off fed the trained boundaries: the wiring was fixed there
        return (f"The write-up explains its served {served} by the `val + 1` in SGLang's "
                f"`set_eagle3_layers_to_capture`, a reading of the code. On {old_releases(versions, rec)}, which its accept "
                "rate points to, "
                "that is what the setter does whether CUDA graphs are on or off; with them on, `cuda_graph_runner.py` "
                "calls it again without the ids, so the reading cannot tell the two apart. With graphs off there, "
                f"the patch fed {tw['fix_feeds']}"
                + (": if it ran so, the wiring was fixed and cannot explain the accept length left" if fixed else "")
                + f". With graphs on (the default), the draft got {on['fix_feeds']} before and after the patch"
                + (", and the wiring can still explain it." if fixed else "."))
    story = [r for r in rows if r["config_feeds"] == served]
    if story:
        return (f"The write-up's served {served} fits SGLang {', '.join(r['versions'] for r in story)}; its logged "
                f"accept rate fits {t.RATE_OLD_UNTIL} or earlier (the table above).")
    return ("What the server fed depends on its SGLang version, which the write-up never states "
            f"({_link('03', present)}).")


def clue_fit(ev: dict, rec) -> tuple | None:
    """The newest releases before the CUDA-graph fix where, with graphs off, the write-up's served
    boundaries come out of its config ids (notebook 03's two tables): (versions, graphs-off row,
    graphs-on row), or None where no such release was recorded."""
    from eagle3lab.report.postmortem.known_box import covering_row, rows_before_graph_fix

    ids = ev.get("fix_ids") or {}
    served, off = rec.model["served_boundaries_before_fix"], ids.get("rows_graphs_off") or []
    both = [(r["versions"], tw, r) for r in rows_before_graph_fix(ev)
            for tw in [covering_row(off, r["versions"])] if tw and tw["config_feeds"] == served]
    return both[-1] if both else None


def wiring_brief(ev: dict, rec, present=None) -> str:
    """The wiring cause in a sentence (the index): whether the patch reached the draft hangs on two
    unstated facts; the reasoning is on the details page."""
    trained = rec.model["trained_boundaries"]
    took = patch_took(ev, rec)
    if not took:
        return f"Trained on {trained}. " + version_caveat(ev, rec, present) + " " + wiring_fix(ev, present, brief=True)
    return took


def wiring_suspect(ev: dict, rec) -> str:
    """The wiring among the suspects for the accept length left after the patch, where notebook 03's
    tables say the patch did not reach the draft with CUDA graphs on (the default): always where graphs
    off failed too, else if graphs were on (cold read 114: the page's own conclusion sat behind a
    re-read of the wiring row). Empty where the patch reached it either way."""
    reach = _patch_reach(ev, rec)
    return "" if not reach else "the wiring" + (", if CUDA graphs were on" if reach[0] == "graphs off" else "")


def acceptance_suspects(ev: dict, rec, full: str) -> str:
    """What may hold the accept length near the no-TTT arithmetic, as a list: no TTT (with the
    arithmetic), the write-up's INT4 guess, and the wiring where it is still open; none checked."""
    acc = rec.figure("validation_accuracy").mid
    suspects = [f"no TTT ({100 * acc:.1f} % accepted at position 1 and none after gives about {1 + acc:.2f})",
                "an INT4 target unlike the unquantized one it trained on (the write-up's guess)"]
    suspects += [w] if (w := wiring_suspect(ev, rec)) else []
    return (f"Suspects: {'; '.join(suspects)}. {'Neither' if len(suspects) == 2 else 'None'} is checked "
            f"([details]({full})).")


def acceptance_items(ev: dict, rec) -> str:
    """The items that settle the accept length: the training config and the per-position profile,
    and the release and CUDA graphs where the wiring is a suspect."""
    from eagle3lab.report.postmortem.known_box import STEP

    names = (["version"] if wiring_suspect(ev, rec) else []) + ["training", "per_position"]
    return "items " + t.and_list([str(STEP[n]) for n in names])


CAUSES_ANCHOR = "Causes-in-full"  # details_markdown's heading


def wiring_fix(ev: dict, present=None, brief: bool = False) -> str:
    """Where the fix is: the box's table, a row per release and CUDA-graph setting (notebook 03);
    `brief` (the index, where the box is): the item alone."""
    from eagle3lab.report.postmortem.known_box import items

    if (ev.get("fix_ids") or {}).get("rows"):
        return f"*Fix:* {items('ids')}'s ids." if brief else f"*Fix:* your release's ids ({items('ids')} of *Do next*)."
    return f"*Fix:* the ids {_link('03', present)} lists for your release."


def lab_caveat(lab: dict | None, brief: bool = False) -> str:
    """What the lab is, in a clause of the header, from its manifest: a reader must not take a lab
    figure for the incident's (the details page says more); `brief`, the index's: its name alone
    (cold reads 123-128 called the lab's label noise before the summary)."""
    lab = lab or {}
    params = f"a {lab['parameters'] / 1e6:.1f} M-parameter" if lab.get("parameters") else None
    if brief:
        return (lab.get("name") or (f"{params} target" if params else "a tiny target")) + " on a CPU"
    size = (f"{lab['name']}, a pretrained dense chat model" if lab.get("name") and params else
            f"{params}, {lab['layers']}-layer target" if params else "a tiny target")
    return f"{size}, on a CPU"


def lab_limits(ev: dict, lab: dict | None) -> str:
    """What makes the lab's drafts unlike the incident's, measured in this run: how repetitive its
    target's text is and how far its healthy draft got (the details page)."""
    acc = ev.get("acceptance") or {}
    rep = acc.get("heldout_repetition") or acc.get("repetition") or {}  # the larger sample where there is one
    toy = acc.get("toy_repetition") or {}
    parts = []
    if rep.get("share") is not None and toy.get("share") is not None:
        where = rep.get("origin") or "the lab's greedy answers"
        parts.append(f"{100 * rep['share']:.0f} % of the {rep['window']}-token spans of {where} repeat an "
                     f"earlier one, against {100 * toy['share']:.0f} % for the toy lab's target, 3 M parameters "
                     "trained here on Python source, whose text loops")
    elif rep.get("share") is not None:
        parts.append(f"{100 * rep['share']:.0f} % of the lab's greedy text's {rep['window']}-token spans repeat an "
                     "earlier one, which flatters acceptance")
    curve = ((ev.get("training_curve") or {}).get("curves") or {}).get("healthy") or []
    if curve:
        last, goal = curve[-1], (ev.get("training_curve") or {}).get("goal")
        parts.append(f"the lab's healthy draft, trained on {last['training_tokens']:,} tokens, accepts "
                     f"{last['accept_length']:.2f} tokens per step at 5/1/6"
                     + (f", short of the {goal:g} it was built for: notebook 04 plots the training curve"
                        if goal and last["ci95"][1] < goal else ""))
    return ("; ".join(parts) + ".") if parts else ""


def _target() -> str:
    return incident_record.load().model["target"]


def weak_reference(hyp_rows: list[dict]) -> str:
    """When the lab's own reference draft accepts less than the incident's low end, the lab cannot
    say which hypothesis fits the incident's level: say so, with the figures (else "")."""
    ref = next((r for r in hyp_rows if r["name"] == t.REFERENCE), None)
    rec = incident_record.load().figure("after_fix_accept_length")
    if ref is None or ref["_row"].get("accept_length") is None or ref["_row"]["accept_length"] >= rec.low:
        return ""
    row = ref["_row"]
    return (f"The lab's own reference draft accepts only {t.fmt(row['accept_length'], row.get('accept_length_ci95'))}, "
            f"below the incident's {_range()}: its drafts are weaker than the incident's, so it cannot say which fault "
            "explains the incident's level; what a row shows is its profile against the reference's.")


def _fit_sentence(fits: list[dict], tested: list[dict], hyp_rows: list[dict] | None = None) -> str:
    """What the lab's hypotheses say about the open cause (the details page's causes)."""
    if not tested:
        return "No hypothesis was measured in this run."
    where = f"Of the {len(tested)} hypotheses the lab tested at 5/1/6 (one at a time, on the lab)"
    ref = next((r for r in hyp_rows or [] if r["name"] == t.REFERENCE), None)
    if weak_reference(hyp_rows or []):
        row = ref["_row"]
        guess = ", the write-up's INT4 guess among them" if any(r["name"] == WRITEUP_GUESS for r in tested) else ""
        figure = f": the lab's fault-free draft accepts {t.fmt(row['accept_length'], row.get('accept_length_ci95'))}"
        return f"The lab's drafts are too weak to rank the {len(tested)} hypotheses it tested{guess}{figure} ({DETAILS_LINK})."
    if not fits:
        return f"{where}, none fits the incident's accept length."
    return (f"{where}, {len(fits)} give an accept length the incident's does not exclude and "
            f"{len(tested) - len(fits)} do not ({DETAILS_LINK}).")


WRITEUP_GUESS = "quant-int4"  # the write-up's own guess: an INT4 target at serving, unquantized in training


def _topk1_since() -> str:
    """The release from which every SGLang release read sets draft tokens = steps + 1 under topk 1
    (the rules as read in the wheels, oldest first)."""
    from eagle3lab.engines.sglang.sglang_rules import _R

    since = None
    for version, rules in _R.items():
        since = (since or version) if rules.topk1_adjust else None
    return since


def _later_launches(rec) -> str:
    """Which launches the override touched: those with topk 1 whose draft tokens were not steps + 1."""
    from eagle3lab.report.incident import config_label

    launches = [c for name, c in rec.configs.items() if name != "none"]
    hit = [c for c in launches if c["topk"] == 1 and c["num_draft_tokens"] != c["num_steps"] + 1]
    rest = [config_label(c) for c in launches if c not in hit]
    if not rest:
        return ""
    return f" Later launches ({' and '.join(rest)}) set steps + 1 themselves."


def causes_list(ev: dict, rec, hyp_rows: list[dict], present=None, brief: bool = False) -> str:
    """The causes in the summary's order, each with its status, what shows it and its fix; `brief`
    (the index): a sentence or two each, the reasoning on the details page."""
    from eagle3lab.report.postmortem.known_box import items as box_items

    f = rec.figure
    cost = t.incident_cost(rec)
    res = ev.get("resolution") or {}
    check = res.get("sglang_check")
    tested = [r for r in hyp_rows if r["name"] != t.REFERENCE]
    resolver = (f"{check['version']}'s resolver, run here, agrees"
                + ("" if check["agree"] == check["of"] else f" on {check['agree']} of {check['of']} flag sets")
                if check else "SGLang's rules, read in its wheels, say so")
    measured = (ev.get("training_slice") or {}).get("gap")
    if brief:
        return t.markdown_table(_brief_causes(ev, rec, present))
    items = [
        f"**Verify cost on a sparse MoE: calculated.** {cost['cost']:.2f} plain steps per 5/1/6 step "
        f"({cost['accept_length']:.3f}, the mean of the logged accept lengths "
        f"{t.and_list([f'{v:g}' for v in f('after_fix_accept_length').value])}, × {cost['baseline_tps']:g} ÷ "
        f"{cost['spec_tps']:g} tok/s): mostly the "
        "verify pass reading the union of its tokens' experts (next section), unless "
        f"the {f('baseline_tps').text()} ran with CUDA graphs and the speculative runs without. "
        "*Fix:* a shorter chain or a draft that accepts more ([which would pay](#Which-configuration-would-pay)).",
        f"**Config override: verified in SGLang's code.** With topk 1, SGLang runs steps + 1 draft tokens: "
        f"{f('draft_tokens_run_first').value}, not the 16 asked, at the first launch (every release since "
        f"{_topk1_since()}; {resolver}: {_link('01', present)})."
        + _later_launches(rec) + " *Fix:* draft tokens = steps + 1.",
        f"**Wiring mismatch: reported; its fix not confirmed.** Trained on {rec.model['trained_boundaries']}. "
        + version_caveat(ev, rec, present) + " " + wiring_fix(ev, present),
        f"**Acceptance near {cost['accept_length']:.1f}: open.** A draft without training-time test, accepting "
        f"only at position 1, at its training accuracy, gives 1 + {f('validation_accuracy').mid:.3f} = "
        f"{1 + f('validation_accuracy').mid:.2f}, inside the logged range: arithmetic, not evidence. "
        + _fit_sentence(t.consistent(hyp_rows), tested, hyp_rows)
        + f" *Next:* {box_items('per_position')} of *Do next*.",
        "**Training slice: " + ("candidate cause, " + t.slice_word(ev) if measured
                                else "candidate cause, not measured in this run")
        + ".** Training took the first 3 of 4 captured states, without the deepest. "
        + t.training_slice_short(ev).rstrip(".")
        + f" ({_link('03', present)}). *Fix:* retrain on low, middle and high layers; no server patch.",
    ]
    return _numbered(items)


def _numbered(items: list[str]) -> str:
    return "\n".join(f"{i}. {item}" for i, item in enumerate(items, 1))


def _brief_causes(ev: dict, rec, present) -> list[dict]:
    """The index's causes as a table's rows: status, what shows it in a sentence or two, the fix or
    the next item; the arithmetic and the reasoning on the details page (cold reads 56-68 put the index
    at 9-18 minutes with them inline, re-reading most the arithmetic and the version ranges)."""
    from eagle3lab.report.postmortem import moe_cost
    from eagle3lab.report.postmortem.known_box import items as box_items

    f = rec.figure
    cost = t.incident_cost(rec)
    full = f"details.html#{CAUSES_ANCHOR}"
    row = lambda cause, status, shows, then: {"cause": cause, "status": status, "what shows it": shows,  # noqa: E731
                                              "fix, or next": then}
    return [
        row("Verify cost on a sparse MoE", "calculated",
            f"**{cost['cost']:.2f}** plain steps ([how]({full})): " + moe_cost.union_brief(rec),
            "a shorter chain or a better draft"),
        row("Config override", "verified in SGLang's code",
            ("Only the first launch ran short: " if _later_launches(rec) else "The first launch ran ")
            + f"{f('draft_tokens_run_first').value} draft tokens, not the 16 asked ({_link('01', present)}).",
            "draft tokens = steps + 1"),
        row("Wiring mismatch", "reported; its fix not confirmed", wiring_brief(ev, rec, present),
            box_items("version", "ids")),
        row(f"Acceptance near {cost['accept_length']:.1f}", "open",
            acceptance_suspects(ev, rec, full), acceptance_items(ev, rec)),
        row("Training slice", "candidate cause",
            "Training left out the deepest of 4 captured states: it may cap the draft but not explain its drop from "
            f"training to serving; {t.slice_effect(ev)} ([details]({full})).",
            "retrain on low, middle and high layers; no server patch"),
    ]


# docs/sources.md section 7: 0.5.23 tokenizer_manager.py sets it for every finished request with a
# verify step; the OpenAI endpoints only with `return_spec_tokens_details` (under `sglext`)
PROMPTS_FORMAT = ("`prompts.jsonl` holds one prompt per line: plain text, or `{\"text\": \"…\", \"category\": "
                  "\"code\"}`, or `\"messages\"`, whose contents are joined by newlines. Each is sent to "
                  "`/generate` as written, with no chat template: write prompts in the chat format your draft was "
                  "trained on. No server flag is needed: SGLang's `/generate` returns the histogram with every "
                  "finished request.")


def next_measurement(hyp_rows: list[dict]) -> str:
    from eagle3lab.report.postmortem.known_box import CHAINS, PROBE, histogram_sentence, items

    sep = t.separating_position(hyp_rows)
    fits = t.consistent(hyp_rows)
    text = (f"Acceptance per draft position on the real server, and its step cost at {len(CHAINS)} chain lengths: "
            f"{items('per_position', 'chains')} of [the post-mortem's *Do next*](index.html#Known,-unknown,-do-next), "
            f"with `{PROBE}`. For a chain, each request's histogram of accepted drafts per verify "
            "step gives each position's rate; the script prints them with 95 % intervals, the accept length and the "
            "step cost. " + histogram_sentence() + " " + PROMPTS_FORMAT)
    if sep:
        text += "\n\n" + _separation_text(sep, t.separated_pairs(hyp_rows) if sep.get("groups", 0) < 2 else [])
    elif len(fits) == 1:
        r = fits[0]["_row"]
        text += (f"\n\nOnly *{t.short(fits[0]['name'])}* fits on the lab; its profile per position is "
                 f"{t.profile_text(r)}. A real server with the same profile, position 1 accepted and a collapse "
                 "after it, points to a draft that needs training-time test; every position low points to what the "
                 "lab could not reproduce: the target's numerics, the prompts.")
    return text


def _separation_text(sep: dict, pairs: list[dict] | None = None) -> str:
    """Where the hypotheses not excluded differ most, each rate with its interval and n, and how
    many groups the lab's own intervals separate (no claim finer than they allow)."""
    pos = sep["position"]
    groups = t.rate_groups(sep["rates"], sep.get("ci95"))
    cell = lambda n: f"*{t.short(n)}* {t.fmt(sep['rates'][n], (sep.get('ci95') or {}).get(n))} " \
                     f"(n = {(sep.get('n') or {}).get(n, '?')})"  # noqa: E731
    ordered = sorted(sep["rates"], key=sep["rates"].get)
    if len(groups) <= 1 and not pairs:
        return (f"On the lab the hypotheses not excluded differ most at **draft position {pos}**, but on its few "
                "prompts their intervals overlap: compare the server's whole profile (a high position 1 with a "
                "collapse after it, or every position low) with each row's in the table above.")
    text = (f"On the lab the hypotheses not excluded differ most at **draft position {pos}**. Each conditional rate "
            "below has its 95 % interval over prompts, and n is the number of verify steps that reached the "
            "position: " + "; ".join(cell(n) for n in ordered) + ".")
    if len(groups) > 1:
        parts = " | ".join(", ".join(f"*{t.short(n)}*" for n, _ in g) for g in groups)
        text += (f" Their intervals separate {len(groups)} groups, lowest first: {parts}. The real server's rate "
                 f"at position {pos}, measured over enough prompts to narrow its own interval, says which group "
                 "the incident belongs to; hypotheses inside a group need another measurement.")
    else:
        text += (" On the lab's few prompts their intervals overlap, so the lab shows the shapes, not where each "
                 "one's rate lies exactly: compare the server's whole profile (a high position 1 with a collapse "
                 "after it, or every position low) with each row's profile below, and measure the server over "
                 "enough prompts that its own intervals are narrow.")
        if pairs:
            said = "; ".join(f"at position {p['position']}, *{t.short(p['high'][0])}* "
                             f"{t.fmt(p['high'][1], p['high'][2])} against *{t.short(p['low'][0])}* "
                             f"{t.fmt(p['low'][1], p['low'][2])}" for p in pairs[:2])
            text += f" Pairs the lab's intervals do separate: {said}."
    return text


def hypotheses_section(hyp_rows: list[dict], figure: bool = False) -> str:
    if not hyp_rows:
        return "*Notebook 05 recorded no hypotheses in this run.*"
    rec = incident_record.load().figure("after_fix_accept_length")
    picture = ""
    if figure:
        from eagle3lab.report.postmortem.figures import hypotheses_figure

        picture = hypotheses_figure(hyp_rows, rec.low, rec.high) + "\n\n"
    # no switch names here (notebook 05 has them): the page speaks of hypotheses, not of lab switches; no
    # speed-up for the incident from a lab accept length (the configuration advice uses the incident's own)
    rows = [{**r, "hypothesis": r["stands for"]} for r in hyp_rows]
    weak = weak_reference(hyp_rows)  # the lab's reference is below the incident too: no verdict column
    table = t.markdown_table(rows, ["hypothesis", "accept length", "per position"] + ([] if weak else ["vs incident"]))
    n = t.prompts_text(hyp_rows) or "a few"
    head = (f"Each hypothesis alone at 5/1/6 on the lab, measured in this run over {n} prompts. Per position: "
            "conditional acceptance of draft positions 1–5, – where no step reached it. ")
    if weak:
        return head + weak + "\n\n" + picture + table
    return (head + "*Not excluded*: its "
            f"interval meets the incident's {_range()}, weak evidence with intervals this wide. *Excluded* speaks "
            f"of the lab only: on {_target()}, larger or combined with another fault, it could still play a part."
            "\n\n" + picture + table)


def _range() -> str:
    return incident_record.load().figure("after_fix_accept_length").text()


def trust_section(ev: dict, present=None) -> str:
    acc = ev.get("acceptance") or {}
    top = (acc.get("diagnosis") or [None])[0]
    score = t.blind_score()
    lines = []
    if top:
        lines.append("- *The diagnosis* (notebook 04) ranks causes from per-position acceptance and the draft's "
                     "standalone accuracy; the incident has no per-position data, so it was not run on it.")
        from eagle3lab.report import labwords
        from eagle3lab.report.postmortem.known_box import seed_misread

        built = "which was trained with TTT (its manifest)" if labwords.seed_ttt() else "which lacks TTT by construction"
        wrong = (": wrong about the cause (the draft is weak at every depth, and a low acc@2 reads as no TTT), "
                 "which is why the blind score below is what to trust" if seed_misread(ev) else "")
        lines.append(f"- **A check of the method, not a finding:** on {t.DRAFTS['seed']}, {built}, the diagnosis "
                     f"ranks *{t.CAUSE_WORDS.get(top, top)}* (`{top}`) first ({_link('04', present)}){wrong}.")
    if score:
        lines.append(f"- **What to trust is its blind score**: on a lab built after the diagnosis' rules were frozen "
                     f"(\"{score['lab']}\", built {score['built']}), whose drafts' faults were hidden from it, it named "
                     f"the right fault first for **{score['right']} of {score['of']}** drafts ({score['top1']} %; "
                     f"95 % interval {score['ci'][0]}–{score['ci'][1]} %; `{score['file']}`, not re-measured in this run).")
    return "\n".join(lines)


def evidence_section(runs_ok: dict) -> str:
    """The index's last line: the details page, then the notebook pages of this report by number (a
    notebook that failed says so; their questions are PAGES')."""
    links = [f"[{name[:2]}]({name}.html)" + (" (**failed in this run**)" if ok is False else "")
             for name, ok in (runs_ok or {n: None for n, _ in PAGES.values()}).items()]
    return f"[The evidence in full]({DETAILS}.html); notebooks " + ", ".join(links) + ", with code."


def index_markdown(ev: dict, run_info: dict, rec=None) -> str:
    """The first page, as Markdown (the report renders it with no code cells), short enough to read
    in ten minutes: the answer (what happened, the bottom line, the causes), the known/unknown/do-next
    box whose Known is the timeline, then links to the evidence."""
    from eagle3lab.report.postmortem import known_box

    rec = rec or incident_record.load()
    present = set(run_info["runs_ok"]) if run_info.get("runs_ok") else None
    hyp_rows = t.hypothesis_rows(ev, rec)
    parts = [
        f"# EAGLE-3 post-mortem: {rec.model['target']} speculative decoding slower than none",
        header(run_info, index=True),
        "## Summary", summary(ev, rec, hyp_rows, present),
        "## Known, unknown, do next", known_box.box(rec, ev, present),
        "## The evidence", evidence_section(run_info.get("runs_ok", {})),
    ]
    return "\n\n".join(p for p in parts if p)


def header(run_info: dict, index: bool = False) -> str:
    """What the figures are and the page's notation, once; `index`: what the lab is, its results being
    on the details page (cold reads 35-40 found the index's label covering almost nothing), and no
    intervals, boundaries or ids to define (the index speaks of layers, as the write-up does)."""
    if index:
        engine = run_info.get("backend") not in (None, "lab")  # a real engine's name says what ran; the lab's own
        by = f", decoded by {run_info.get('by')}" if engine else ""  # engine is said on the details page (reads 123-128)
        lab = (f"Lab results: {lab_caveat(run_info.get('lab'), brief=True)}{by}: mechanisms, not "
               "effect sizes. ")
        return (f"*Incident figures: as reported in its write-up; no SGLang server ran for this page. {lab}"
                "5/1/6: steps, topk, draft tokens. Accept length: tokens per verify step, bonus included. "
                "TTT: training-time test, training a draft on its own guesses. [More terms](#Terms).*")
    lab = f"Lab figures: measured in this run ({run_info.get('what', 'the lab')}, {run_info.get('when', '')}) unless said otherwise. "
    return (f"*Incident figures: as reported in its write-up; no SGLang server ran for this page. {lab}"
            "5/1/6: steps, topk, draft tokens. Accept length: tokens per verify step, bonus included. "
            f"TTT: training-time test, training a draft on its own guesses. Brackets: 95 % intervals. {BOUNDARIES} "
            "[More terms](#Terms).*")


def runbook_markdown(ev: dict, run_info: dict, rec=None) -> str:
    """The third page: the box's *Do next*, item by item, each with its commands, caveats and the
    tables to read its result by, open (cold reads 55, 65: "split the reader's runbook from the
    incident forensics"; the index keeps each item in a line or two)."""
    from eagle3lab.report.postmortem import known_box

    rec = rec or incident_record.load()
    present = set(run_info["runs_ok"]) if run_info.get("runs_ok") else None
    parts = [
        f"# The runbook: what to do next about the {rec.model['target']} EAGLE-3 draft",
        "*[Back to the post-mortem](index.html). The post-mortem's *Do next*, item by item, in order. Incident "
        f"figures: as reported in its write-up. 5/1/6: steps, topk, draft tokens. {BOUNDARIES} [More terms](#Terms).*",
        "## What you need", known_box.needs_words(prompts=False) + "\n\n" + f"Prompts: {known_box.NUM_PROMPTS} or "
        "more like your traffic. " + PROMPTS_FORMAT,
    ]
    for heading, body in known_box.runbook_sections(rec, ev, present):
        parts += [f"## {heading}", body]
    return "\n\n".join(p for p in parts if p)


def details_markdown(ev: dict, run_info: dict, rec=None) -> str:
    """The second page: the evidence behind the first, in full: the timeline figure by figure, the
    causes and the step cost as the index gives them in brief, what each SGLang release fed the draft, the hypotheses against the incident, the next measurement's
    details, others' step costs, whether the diagnosis can be trusted, and the run itself."""
    from eagle3lab.report.postmortem import known_box, moe_cost

    rec = rec or incident_record.load()
    present = set(run_info["runs_ok"]) if run_info.get("runs_ok") else None
    hyp_rows = t.hypothesis_rows(ev, rec)
    limits = lab_limits(ev, run_info.get("lab"))
    releases = known_box.release_table(ev, rec, present)  # the box shows only the ids to set
    parts = [
        "# EAGLE-3 post-mortem: the evidence in detail",
        header(run_info).replace("*Incident", "*[Back to the post-mortem](index.html). Incident", 1),
        "## Timeline, figure by figure",
        "Each incident figure beside the lab's figure of the same definition at the same configuration "
        f"({t.DRAFTS['seed']}, served as SGLang served the incident's). "
        + " ".join(x for x in (t.baseline_sentence(ev), t.lab_cost_sentence(ev, rec)) if x) + "\n\n"
        + t.markdown_table(t.timeline_rows(ev, rec)),
        "## Causes in full", causes_list(ev, rec, hyp_rows, present),
        "## Why one step cost 2.9 plain steps", moe_cost.why_section(rec),
        *(("## What each SGLang release fed the draft", releases) if releases else ()),
        "## Which hypotheses fit the incident", hypotheses_section(hyp_rows, figure=True),
        "## The next measurement, in detail", next_measurement(hyp_rows),
        "## Which configuration would pay", moe_cost.advice_markdown(rec, brief=True) + "\n\n"
        + moe_cost.advice_markdown(rec),
        "## The step cost: layers measured, and what others measured", moe_cost.public_markdown(),
        "## Can the diagnosis be trusted?", trust_section(ev, present),
        "## About this run", (limits + "\n\n" if limits else "") + (run_info.get("about") or ""),
    ]
    return "\n\n".join(p for p in parts if p)

"""The report's first page, written as a post-mortem: the answer first (what happened, the causes
with their status, what to change, the next measurement), then the timeline figure by figure, the
incident's own cost, the hypotheses tested against the incident, and links to the evidence.

Every incident figure comes from the incident record, every lab figure from a notebook's recorded
evidence (`eagle3lab.evidence`); nothing is typed. Provenance is said once per table.
"""

from __future__ import annotations

from eagle3lab import incident as incident_record
from eagle3lab.postmortem import tables as t

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


def _commands(lines: list[tuple[str, str]]) -> str:
    """A "check your own deployment" box: what each command answers, then the command."""
    body = "\n".join(f"> - {why}:<br>`{cmd}`" for why, cmd in lines)
    return "> **Check your own deployment**\n>\n" + body


def summary(ev: dict, rec, hyp_rows: list[dict]) -> str:
    f = rec.figure
    cost = t.incident_cost(rec)
    fits = [r for r in t.consistent(hyp_rows)]
    res = ev.get("resolution") or {}
    check = res.get("sglang_check")
    verified_by = (f"SGLang {check['version']}'s own resolver, run in this run" if check else
                   "SGLang's rules, read in its released wheels")
    lines = [
        f"**What happened.** An EAGLE-3 draft for {rec.model['target']}, {f('validation_accuracy').text()} accurate "
        f"in training, made SGLang **slower than no speculation**: {f('first_tps').text()} against "
        f"{f('baseline_tps').text()} at its first flags, {f('steps15_tps').text()} with 15 steps, and "
        f"{f('after_fix_tps').text()} after a wiring fix at 5/1/6, where SGLang logged accept lengths "
        f"{f('after_fix_accept_length').text()} of a possible 6.",
        "",
        "**Why.** Three causes stacked up.",
        f"1. *A silent config override* (**verified** in SGLang's code: {verified_by}): steps 1 with topk 1 "
        f"verifies {f('draft_tokens_run_first').value} draft tokens, not the 16 asked.",
        f"2. *A hidden-state wiring mismatch* (**verified** in SGLang's capture code, read in its wheels): the "
        f"draft was trained on boundaries {rec.model['trained_boundaries']} and served "
        f"{rec.model['served_boundaries_before_fix']}. The embedding-capture patch fixes it, on SGLang versions "
        "where the new ids feed the trained boundaries.",
        f"3. *Accept length stuck near {cost['accept_length']:.1f} after the fix* (**open**). "
        + _fit_sentence(fits, hyp_rows)
        + f" At the incident's own step cost, speculation at 5/1/6 pays only above an accept length of "
          f"**{cost['cost']:.1f}**.",
        "",
        "**Next measurement.** Acceptance per draft position on the real server, which SGLang returns per "
        "request: the command and how to read it are below.",
    ]
    return "\n".join(lines)


def _fit_sentence(fits: list[dict], rows: list[dict]) -> str:
    tested = [r for r in rows if r["name"] != t.REFERENCE]
    if not tested:
        return "No hypothesis was measured in this run."
    if not fits:
        return f"None of the {len(tested)} hypotheses the lab tested fits the incident's accept length at 5/1/6."
    return (f"Of the {len(tested)} hypotheses the lab tested at 5/1/6, {len(fits)} cannot be excluded by the "
            f"incident's accept length ({_names(fits)}) and {len(tested) - len(fits)} can.")


def _names(rows: list[dict]) -> str:
    names = [f"*{r['stands for'].split(' (')[0]}*" for r in rows]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def causes_table(ev: dict, rec, present=None) -> str:
    res = ev.get("resolution") or {}
    fix = ev.get("fix") or {}
    wiring = ev.get("wiring") or {}
    ids = ev.get("fix_ids") or {}
    before, after = fix.get("before") or {}, fix.get("after") or {}
    rows = [
        {"cause": "config override: steps 1, topk 1 runs 2 draft tokens",
         "status": "verified in SGLang's code",
         "evidence": (f"SGLang's own resolver agrees ({res['sglang_check']['agree']} of {res['sglang_check']['of']} "
                      "flag sets)" if res.get("sglang_check") else "SGLang's rules read in its wheels")
                     + f"; {_link('01', present)}",
         "fix": "with topk 1, set draft tokens = steps + 1"},
        {"cause": "wiring mismatch: trained on [embedding, layer 3, layer 31], served layers 3, 31, 59",
         "status": "verified in SGLang's code; its cost measured on the lab",
         "evidence": (f"lab: acc@1 {100 * wiring['acc1_trained']:.0f} % as trained, {100 * wiring['acc1_served']:.0f} % "
                      f"as served; accept length {t.fmt(before.get('accept_length'), before.get('accept_length_ci95'))} → "
                      f"{t.fmt(after.get('accept_length'), after.get('accept_length_ci95'))} with the fix"
                      if wiring and before and after else "see notebook 02")
                     + f"; {_link('02', present)}, {_link('03', present)}",
         "fix": "ids that feed the trained boundaries for your SGLang version; the embedding needs the patch"},
        {"cause": "the fix's ids one layer off on newer SGLang",
         "status": "verified in SGLang's code; no measurable cost on the lab",
         "evidence": (f"the ids feed the trained boundaries on {ids.get('fixed_on', '?')} only" if ids else "")
                     + f"; {_link('03', present)}",
         "fix": "use the ids notebook 03 lists for your version"},
        {"cause": "accept length near 1.8 after the fix",
         "status": "open: hypotheses tested on the lab",
         "evidence": f"the hypotheses table below; {_link('04', present)}, {_link('05', present)}",
         "fix": "measure per-position acceptance on the server (below)"},
    ]
    return t.markdown_table(rows, ["cause", "status", "evidence", "fix"])


def actions(ev: dict, rec, hyp_rows) -> str:
    cost = t.incident_cost(rec)
    lines = [
        "1. **Check what the server runs**, not what you asked: with topk 1, SGLang sets the draft tokens to "
        "steps + 1 and says so in one log line.",
        "2. **Check the wiring** slot by slot for your SGLang version before benchmarking; capturing the "
        "embedding (id −1) needs the patch.",
        "3. **Know your break-even accept length** from your own figures: accept length × no-speculation tok/s "
        f"/ speculative tok/s is the cost of one step in plain steps (the incident's: {cost['cost']:.1f} at 5/1/6).",
        "4. **Measure acceptance per draft position** on your server before retraining (next section).",
        "",
        _commands([
            ("what SGLang runs for your flags", "eagle3lab config -- --speculative-num-steps 5 "
                                                "--speculative-eagle-topk 1 --speculative-num-draft-tokens 6"),
            ("which boundary feeds each slot", "eagle3lab wiring --draft DRAFT_DIR --target TARGET_DIR "
                                               "--serve sglang==VERSION"),
            ("whether your SGLang needs the embedding patch", "eagle3lab patch sglang --check"),
            ("per-position acceptance, speed-up and break-even on your server",
             "eagle3lab bench --url http://HOST:30000 --prompts prompts.jsonl"),
        ]),
    ]
    return "\n".join(lines)


def next_measurement(hyp_rows: list[dict]) -> str:
    sep = t.separating_position(hyp_rows)
    fits = t.consistent(hyp_rows)
    from eagle3lab.engines.sglang.meta_info import FIRST_HISTOGRAM_RELEASE

    text = (f"SGLang from {FIRST_HISTOGRAM_RELEASE} returns with every request how many of its verify steps "
            "accepted exactly n draft tokens (`meta_info[\"spec_correct_drafts_histogram\"]`, read in its "
            "released wheels); for a chain (topk 1) that is the acceptance of each draft position. "
            "`eagle3lab bench --url http://HOST:30000 --prompts prompts.jsonl` reads it and prints each "
            "position's rate with its interval, and the same by prompt length and category.")
    if sep:
        groups = t.rate_groups(sep["rates"])
        parts = "; ".join(f"near {_span(g)}: " + ", ".join(f"*{HYP(n)}*" for n, _ in g) for g in groups)
        text += (f"\n\nOn the lab the hypotheses not excluded differ most at **position {sep['position']}** "
                 f"(each reached by at least {t.MIN_AT_RISK} verify steps), in {len(groups)} groups: {parts}. "
                 f"The real server's conditional rate at position {sep['position']}, with its 95 % interval, "
                 "says which group the incident belongs to; the hypotheses inside a group need another measurement.")
    elif len(fits) == 1:
        r = fits[0]["_row"]
        text += (f"\n\nOnly *{HYP(fits[0]['name'])}* fits on the lab; its profile per position is "
                 f"{t.profile_text(r)}. If the real server's profile looks like it (first position accepted, "
                 "a collapse after it), the incident's draft needs training-time test; if every position is low, "
                 "look at what the lab could not reproduce (the target's numerics, the prompts).")
    return text


def _span(group) -> str:
    rates = [r for _, r in group]
    return f"{min(rates):.2f}" if max(rates) - min(rates) < 0.005 else f"{min(rates):.2f}–{max(rates):.2f}"


def HYP(name: str) -> str:  # noqa: N802 - reads as a noun in f-strings
    return t.HYPOTHESES.get(name, name).split(" (")[0]


def cost_section(ev: dict, rec) -> str:
    cost = t.incident_cost(rec)
    after = (ev.get("fix") or {}).get("after") or {}
    lab_c = t.lab_cost(after)
    lines = [
        f"- One speculative step at 5/1/6 cost **{t.fmt(cost['cost'], cost['cost_range'])}** no-speculation steps on "
        f"the incident's hardware (accept length × {rec.figure('baseline_tps').text()} / "
        f"{rec.figure('after_fix_tps').text()}, the range from the logged accept lengths). Speculation there pays "
        f"only above an accept length of **{cost['cost']:.1f}**.",
        f"- Read as independent per-token acceptance, the logged {cost['accept_length']:.2f} at depth {cost['k']} is a "
        f"rate of **{cost['iid_rate']:.2f}**; the draft's {rec.figure('validation_accuracy').text()} training accuracy, "
        f"if it held at every position, would give {cost['accept_length_at_training_accuracy']:.2f}, "
        f"{cost['accept_length_at_training_accuracy'] / cost['cost']:.2f}× at that cost.",
    ]
    if lab_c is not None:
        lines.append(f"- The lab's own step at 5/1/6 costs **{lab_c:.1f}** plain steps (measured in this run, the same "
                     "formula), so the lab's tokens/s are not the incident's: its acceptance is compared, its speed "
                     "is carried over through the incident's cost (last column below).")
    pred = ev.get("prediction") or {}
    if pred.get("of"):
        lines.append(f"- How far a cost model can be trusted: calibrated on the lab's measured step costs, it predicts "
                     f"**{pred['inside']} of {pred['of']}** of this run's configurations' speed-ups inside their "
                     f"measured intervals ({_link('05')}).")
    lines.append("\n*Assumption, stated once: a step's cost is set by the configuration and the hardware, not by "
                 "how much is accepted; one request at a time.*")
    return "\n".join(lines)


def hypotheses_section(hyp_rows: list[dict], figure: bool = False) -> str:
    if not hyp_rows:
        return "*Notebook 05 recorded no hypotheses in this run.*"
    rec = incident_record.load().figure("after_fix_accept_length")
    picture = ""
    if figure:
        from eagle3lab.postmortem.figures import hypotheses_figure

        picture = hypotheses_figure(hyp_rows, rec.low, rec.high) + "\n\n"
    rows = [{**r, "hypothesis": f"{r['stands for']}" + (f" (`{r['name']}`)" if r["name"] != t.REFERENCE else "")}
            for r in hyp_rows]
    table = t.markdown_table(rows, ["hypothesis", "accept length", "per position", "vs incident",
                                    "on the incident's GPU"])
    return ("Each lab switch alone at 5/1/6, the lab measured in this run (accept length with its 95 % interval "
            "over prompts; per position: the conditional acceptance of draft positions 1–5, – where no step reached "
            f"it). *Not excluded*: its interval meets the incident's {_range()} range; the last column carries "
            "its accept length to the incident's cost.\n\n" + picture + table)


def _range() -> str:
    return incident_record.load().figure("after_fix_accept_length").text()


def trust_section(ev: dict, present=None) -> str:
    acc = ev.get("acceptance") or {}
    top = (acc.get("diagnosis") or [None])[0]
    score = t.blind_score()
    lines = []
    if top:
        lines.append(f"- **A check of the method, not a finding:** on {t.DRAFTS['seed']}, which lacks TTT by "
                     f"construction, the diagnosis ranks *{top}* first ({_link('04', present)}).")
    if score:
        lines.append(f"- **What to trust:** the diagnosis' blind score, strict top-1 **{score['top1']} %** "
                     f"({score['right']}/{score['of']}; 95 % interval {score['ci'][0]}–{score['ci'][1]} %) on a lab "
                     f"built after its rules froze ({score['lab']}, built {score['built']}; `{score['file']}`, "
                     "not re-measured in this run).")
    return "\n".join(lines)


def evidence_section(runs_ok: dict) -> str:
    """A link per notebook page of this report, with the question it answers."""
    questions = {name: q for name, q in PAGES.values()}
    lines = []
    for name, ok in (runs_ok or {n: None for n, _ in PAGES.values()}).items():
        failed = " — **this notebook failed in this run**" if ok is False else ""
        lines.append(f"- [{name[:2]} · {questions.get(name, name)}]({name}.html){failed}")
    return "\n".join(lines)


def index_markdown(ev: dict, run_info: dict, rec=None) -> str:
    """The whole first page, as Markdown (the report renders it with no code cells)."""
    rec = rec or incident_record.load()
    present = set(run_info["runs_ok"]) if run_info.get("runs_ok") else None
    hyp_rows = t.hypothesis_rows(ev, rec)
    timeline = t.timeline_rows(ev, rec)
    parts = [
        f"# EAGLE-3 post-mortem: {rec.model['target']} speculative decoding slower than none",
        f"*Incident figures are quoted as reported (`data/incident/`); lab figures were measured in this run "
        f"({run_info.get('what', 'the lab')}, {run_info.get('when', '')}). 5/1/6 means steps/topk/draft tokens; "
        "accept length is tokens per verify step, the bonus token included; brackets are 95 % intervals over "
        "prompts.*",
        "## Summary", summary(ev, rec, hyp_rows),
        "## Causes and their status", causes_table(ev, rec, present),
        "## What to change in your own deployment", actions(ev, rec, hyp_rows),
        "## The next measurement", next_measurement(hyp_rows),
        "## Timeline, figure by figure",
        "Each incident figure beside the lab's figure of the same definition at the same configuration "
        f"({t.DRAFTS['seed']}: trained like the incident's, without TTT; served as SGLang served the incident's).\n\n"
        + t.markdown_table(timeline),
        "## The incident's own cost", cost_section(ev, rec),
        "## Which hypotheses fit the incident", hypotheses_section(hyp_rows, figure=True),
        "## Can the diagnosis be trusted?", trust_section(ev, present),
        "## The evidence", "One page per notebook, with its code, in this folder:\n\n"
        + evidence_section(run_info.get("runs_ok", {})),
    ]
    if run_info.get("about"):
        parts += ["## About this run", run_info["about"]]
    return "\n\n".join(p for p in parts if p)

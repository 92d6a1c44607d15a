"""The report's first page, written as a post-mortem: the answer first (what happened, the causes
with their status, what to change, the next measurement), then the timeline figure by figure, the
incident's own cost, the hypotheses tested against the incident, and links to the evidence.

Every incident figure comes from the incident record, every lab figure from a notebook's recorded
evidence (`eagle3lab.report.evidence`); nothing is typed. Provenance is said once per table.
"""

from __future__ import annotations

from eagle3lab.report import incident as incident_record
from eagle3lab.report.postmortem import tables as t

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


def summary(ev: dict, rec, hyp_rows: list[dict], lab: dict | None = None) -> str:
    f = rec.figure
    cost = t.incident_cost(rec)
    tested = [r for r in hyp_rows if r["name"] != t.REFERENCE]
    lines = [
        f"**What happened** (as reported). An EAGLE-3 draft for {rec.model['target']}, "
        f"{f('validation_accuracy').text()} accurate in training, made SGLang **slower than no speculation**: "
        f"{f('first_tps').text()} against {f('baseline_tps').text()} at its first flags, {f('steps15_tps').text()} "
        f"with 15 steps, and {f('after_fix_tps').text()} after a wiring fix at 5/1/6, where SGLang logged accept "
        f"lengths {f('after_fix_accept_length').text()} of a possible 6.",
        "",
        "**Why.** Three problems stacked up: two causes whose mechanisms are verified in SGLang's code, and a third "
        "still open.",
        f"1. *A silent config override* (**verified**: SGLang's own resolver, and the rule read in every release "
        f"since 0.4.5.post3): steps 1 with topk 1 verifies {f('draft_tokens_run_first').value} draft tokens, not "
        "the 16 asked.",
        f"2. *A hidden-state wiring mismatch* (**its mechanism verified in SGLang's code; its fix not confirmed**): "
        f"the draft was trained on boundaries {rec.model['trained_boundaries']} and served "
        f"{rec.model['served_boundaries_before_fix']}. " + version_caveat(ev, rec),
        f"3. *Accept length stuck near {cost['accept_length']:.1f} after the fix* (**open**). The incident's own "
        f"figures fit one simple reading (arithmetic, not evidence: a served first position need not accept at the "
        f"training accuracy): the first position accepted at {f('validation_accuracy').text()} and none after it "
        f"gives 1 + {f('validation_accuracy').mid:.3f} = {1 + f('validation_accuracy').mid:.2f}, inside the logged "
        "range: the profile of a draft trained without TTT. "
        + _fit_sentence(t.consistent(hyp_rows), tested)
        + f" At the incident's own step cost, speculation at 5/1/6 pays only above an accept length of "
          f"about **{cost['cost']:.1f}**.",
        "",
        "**What the lab can and cannot say.** " + lab_caveat(ev, lab, hyp_rows),
        "",
        "**Next measurement.** Acceptance per draft position on the real server, which SGLang returns with "
        "every request: the command and how to read it are below.",
    ]
    return "\n".join(lines)


def version_caveat(ev: dict, rec) -> str:
    """Which SGLang the incident ran decides whether its fix fed the trained boundaries; the
    write-up does not say, and its two clues (the ids' behaviour, the accept rate's definition)
    disagree: said on the first screen, not left in a timeline cell."""
    from eagle3lab.wiring.boundaries import default_boundaries
    from eagle3lab.engines.sglang.sglang_capture import SGLANG_CUDA_GRAPH_RESET

    ids = ev.get("fix_ids") or {}
    default = default_boundaries(rec.model["target_layers"])
    first = SGLANG_CUDA_GRAPH_RESET[0]
    fixed_on = ids.get("fixed_on") or "the releases notebook 03 lists"
    return (f"Only SGLang {ids.get('story_versions') or fixed_on} feeds those boundaries for the incident's ids, and "
            f"there the embedding-capture patch and ids {rec.model['config_ids_after_fix']} fix it. But the accept "
            f"rate the incident logged follows SGLang {t.RATE_OLD_UNTIL} or earlier, where CUDA graphs (from {first}) "
            f"reset every id to the default boundaries {default}, before and after the fix. The write-up does not "
            "state its version, so **whether the fix took effect is not known**: the next measurement tells "
            "(wiring still off: position 1 low too; on the lab it gives an accept length below the incident's, "
            "weak evidence that the fix did take effect).")


def lab_caveat(ev: dict, lab: dict | None, hyp_rows: list[dict]) -> str:
    """The lab's limits in one paragraph, from its manifest and what the run measured: a reader
    must not take a lab figure for the incident's."""
    lab = lab or {}
    prompts = t.prompts_text(hyp_rows)
    rep = ((ev.get("acceptance") or {}).get("repetition") or {})
    size = (f"a {lab['parameters'] / 1e6:.1f} M-parameter, {lab['layers']}-layer target on a CPU"
            if lab.get("parameters") else "a tiny target on a CPU")
    parts = [f"The lab re-creates the incident's mechanisms on {size}, not on {_target()}"]
    if prompts:
        parts.append(f"{prompts} prompts per configuration, so its intervals are wide")
    if rep.get("share") is not None:
        parts.append(f"its greedy text repeats itself ({100 * rep['share']:.0f} % of {rep['window']}-token spans repeat an "
                     "earlier one), which flatters acceptance")
    return ("; ".join(parts) + ". It can show which mechanism produces the incident's accept length and the "
            "shape of its per-position profile; it cannot say how large an effect is on the incident's model, and "
            "its tokens/s are not the incident's: speed is carried to the incident's hardware by arithmetic on "
            "the incident's own figures (calculated, not measured).")


def _target() -> str:
    return incident_record.load().model["target"]


def _fit_sentence(fits: list[dict], tested: list[dict]) -> str:
    if not tested:
        return "No hypothesis was measured in this run."
    where = f"Of the {len(tested)} hypotheses the lab tested at 5/1/6 (one at a time, on the lab)"
    if not fits:
        return f"{where}, none fits the incident's accept length."
    return (f"{where}, {len(fits)} give an accept length the incident's does not exclude ({_names(fits)}) "
            f"and {len(tested) - len(fits)} do not.")


def _names(rows: list[dict]) -> str:
    names = [f"*{t.short(r['name'])}*" for r in rows]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def causes_table(ev: dict, rec, present=None) -> str:
    res = ev.get("resolution") or {}
    fix = ev.get("fix") or {}
    wiring = ev.get("wiring") or {}
    ids = ev.get("fix_ids") or {}
    before, after = fix.get("before") or {}, fix.get("after") or {}
    check = res.get("sglang_check")
    lab_wiring = (f"on the lab, acc@1 {100 * wiring['acc1_trained']:.0f} % as trained against "
                  f"{100 * wiring['acc1_served']:.0f} % as served; accept length "
                  f"{t.fmt(before.get('accept_length'), before.get('accept_length_ci95'))} → "
                  f"{t.fmt(after.get('accept_length'), after.get('accept_length_ci95'))} with the fix"
                  if wiring and before and after else "see notebook 02")
    newer = (f"; the fix's ids feed the trained boundaries on SGLang {ids['fixed_on']} only (later releases "
             "shift them one layer)" if ids.get("fixed_on") else "")
    rows = [
        {"cause": "1 · config override: steps 1, topk 1 runs 2 draft tokens",
         "status": "verified in SGLang's code",
         "evidence": (f"SGLang {check['version']}'s own resolver, run in this run, agrees on {check['agree']} of "
                      f"{check['of']} flag sets" if check else "SGLang's rules read in its wheels")
                     + f"; {_link('01', present)}",
         "fix": "with topk 1, set draft tokens = steps + 1"},
        {"cause": f"2 · wiring mismatch: trained on {rec.model['trained_boundaries']}, served "
                  f"{rec.model['served_boundaries_before_fix']}",
         "status": "mechanism verified in SGLang's capture code; whether the fix took effect depends on the "
                   "unstated version (see the summary); its cost measured on the lab",
         "evidence": lab_wiring + newer + f"; {_link('02', present)}, {_link('03', present)}",
         "fix": "ids that feed the trained boundaries on your SGLang version (notebook 03 lists them); up to "
                "0.5.10.post1 with CUDA graphs none do (upgrade, or --disable-cuda-graph)"},
        {"cause": "3 · accept length near 1.8 after the fix",
         "status": "open: hypotheses tested on the lab",
         "evidence": f"the hypotheses below; {_link('04', present)}, {_link('05', present)}",
         "fix": "first measure acceptance per position on the server (below)"},
    ]
    return t.markdown_table(rows, ["cause", "status", "evidence", "fix"])


def actions(ev: dict, rec, hyp_rows) -> str:
    cost = t.incident_cost(rec)
    lines = [
        "1. **Check how your draft was trained**: with training-time test or without (TTT; "
        f"{TTT_OPTION}). The incident's write-up does not say; without it a draft accepts its first position "
        "and collapses after it.",
        "2. **Check what the server runs**, not what you asked: with topk 1, SGLang sets the draft tokens to "
        "steps + 1 and says so in one log line.",
        "3. **Check the wiring** slot by slot for your SGLang version before benchmarking: which ids feed the "
        "embedding, and whether that needs the patch, changes from release to release (notebook 03).",
        "4. **Know your break-even accept length** from your own figures: accept length × no-speculation tok/s "
        f"/ speculative tok/s is the cost of one step in plain steps (the incident's: {cost['cost']:.1f} at 5/1/6). "
        f"That cost is a problem of its own: it caps the speed-up at {cost['k'] + 1} / {cost['cost']:.2f} = "
        f"{(cost['k'] + 1) / cost['cost']:.2f}× even if every draft were accepted, so profile the draft and verify "
        "passes on the server too.",
        "5. **Measure acceptance per draft position** on your server before retraining (next section).",
        "",
        _commands([
            ("install eagle3lab (not on PyPI: in a clone of the repository this report was rendered from; "
             "Python 3.11, a CPU is enough)", "bash scripts/setup.sh && source .venv/bin/activate"),
            ("what SGLang runs for your flags", "eagle3lab config -- --speculative-num-steps 5 "
                                                "--speculative-eagle-topk 1 --speculative-num-draft-tokens 6"),
            ("which boundary feeds each slot", "eagle3lab wiring --draft DRAFT_DIR --target TARGET_DIR "
                                               "--serve sglang==VERSION"),
            ("whether your SGLang needs the embedding patch", "eagle3lab patch sglang --check"),
            ("per-position acceptance and accept length on your server (the more prompts, the narrower the "
             "intervals; the breakdown by kind needs several per kind)",
             "eagle3lab bench --url http://HOST:30000 --prompts prompts.jsonl --num-prompts 64"),
            ("your step cost and break-even, from your own no-speculation and speculative tok/s",
             "eagle3lab cost --baseline-tps B --spec-tps S --accept-length L --steps 5"),
        ]),
        "",
        PROMPTS_FORMAT,
    ]
    return "\n".join(lines)


# docs/sources.md section 9: SpecForge 0.2.0 `TrainingConfig.ttt_length` (default 7); its GitHub
# scripts/train_eagle3.py `--ttt-length` (default 7)
TTT_OPTION = "SpecForge's `ttt_length`, default 7; 1 means no TTT"
# docs/sources.md section 7: 0.5.23 tokenizer_manager.py sets it for every finished request with a
# verify step; the OpenAI endpoints only with `return_spec_tokens_details` (under `sglext`)
PROMPTS_FORMAT = ("`prompts.jsonl`: one prompt per line, either plain text or a JSON object "
                  "`{\"text\": \"…\", \"category\": \"code\"}` (or `\"messages\"` for a chat); the category "
                  "is optional and gives the breakdown by kind. No server flag is needed: SGLang's `/generate`, "
                  "which `bench --url` calls, returns the histogram with every finished request (its OpenAI "
                  "endpoints only when a request sets `return_spec_tokens_details`).")


def next_measurement(hyp_rows: list[dict]) -> str:
    sep = t.separating_position(hyp_rows)
    fits = t.consistent(hyp_rows)
    from eagle3lab.engines.sglang.meta_info import FIRST_HISTOGRAM_RELEASE

    text = (f"SGLang from {FIRST_HISTOGRAM_RELEASE} returns with every request how many of its verify steps "
            "accepted exactly n draft tokens (`meta_info[\"spec_correct_drafts_histogram\"]`, read in its "
            "released wheels); for a chain (topk 1) that is the acceptance of each draft position. "
            "`eagle3lab bench --url` (in the box above) reads it and prints each position's rate with its "
            "interval, and the same by prompt length and category.")
    if sep:
        text += "\n\n" + _separation_text(sep, t.separated_pairs(hyp_rows) if sep.get("groups", 0) < 2 else [])
    elif len(fits) == 1:
        r = fits[0]["_row"]
        text += (f"\n\nOnly *{t.short(fits[0]['name'])}* fits on the lab; its profile per position is "
                 f"{t.profile_text(r)}. If the real server's profile looks like it (first position accepted, "
                 "a collapse after it), the incident's draft needs training-time test; if every position is low, "
                 "look at what the lab could not reproduce (the target's numerics, the prompts).")
    return text


def _separation_text(sep: dict, pairs: list[dict] | None = None) -> str:
    """Where the hypotheses not excluded differ most, each rate with its interval and n, and how
    many groups the lab's own intervals separate (no claim finer than they allow)."""
    pos = sep["position"]
    groups = t.rate_groups(sep["rates"], sep.get("ci95"))
    cell = lambda n: f"*{t.short(n)}* {t.fmt(sep['rates'][n], (sep.get('ci95') or {}).get(n))} " \
                     f"(n = {(sep.get('n') or {}).get(n, '?')})"  # noqa: E731
    ordered = sorted(sep["rates"], key=sep["rates"].get)
    text = (f"On the lab the hypotheses not excluded are told apart best at **draft position {pos}** (conditional rate, "
            f"95 % interval over prompts, n = verify steps that reached it): " + "; ".join(cell(n) for n in ordered) + ".")
    if len(groups) > 1:
        parts = " | ".join(", ".join(f"*{t.short(n)}*" for n, _ in g) for g in groups)
        text += (f" Their intervals separate {len(groups)} groups ({parts}, lowest first): the real server's rate "
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


def cost_section(ev: dict, rec) -> str:
    cost = t.incident_cost(rec)
    after = (ev.get("fix") or {}).get("after") or {}
    lab_c = t.lab_cost(after)
    lo, hi = cost["cost_range"]
    lines = [
        "*Calculated from the incident's reported figures, not measured.*",
        "",
        f"- One speculative step at 5/1/6 cost **{cost['cost']:.2f}** no-speculation steps on the incident's "
        f"hardware ({lo:.2f}–{hi:.2f} across the three logged accept lengths; accept length × "
        f"{rec.figure('baseline_tps').text()} / {rec.figure('after_fix_tps').text()}). Speculation there pays only "
        f"above an accept length of about **{cost['cost']:.1f}**.",
        f"- Read as independent per-token acceptance, the logged mean {cost['accept_length']:.2f} at depth "
        f"{cost['k']} is a rate of **{cost['iid_rate']:.2f}** per token. Had the draft's "
        f"{rec.figure('validation_accuracy').text()} training accuracy held at every position (a hypothetical), "
        f"the accept length would be {cost['accept_length_at_training_accuracy']:.2f}: "
        f"{cost['accept_length_at_training_accuracy'] / cost['cost']:.2f}× of no speculation at that cost.",
    ]
    if lab_c is not None:
        lines.append(f"- The lab's own step at 5/1/6 costs **{lab_c:.1f}** plain steps (measured in this run, the same "
                     "formula), so the lab's tokens/s are not the incident's: its acceptance is compared, its speed "
                     "is carried over through the incident's cost (the hypotheses' last column).")
    pred = ev.get("prediction") or {}
    if pred.get("of"):
        lines.append(f"- How far a cost model can be trusted: calibrated on the lab's measured step costs, each "
                     f"configuration predicted from the others' timings (leave one out), it puts "
                     f"**{pred['inside']} of {pred['of']}** of this run's measured speed-ups inside their 95 % intervals "
                     f"({_link('05')}); with 6 prompts those intervals are wide, so this is a weak test.")
    lines.append("\n*Assumption, stated once: a step's cost is set by the configuration and the hardware, not by "
                 "how much is accepted; one request at a time; the three figures measured on the same prompts "
                 "(the write-up gives neither its GPU, its prompts nor its concurrency).*")
    return "\n".join(lines)


GPU_COLUMN = "calculated for the incident's GPU"


def hypotheses_section(hyp_rows: list[dict], figure: bool = False) -> str:
    if not hyp_rows:
        return "*Notebook 05 recorded no hypotheses in this run.*"
    rec = incident_record.load().figure("after_fix_accept_length")
    picture = ""
    if figure:
        from eagle3lab.report.postmortem.figures import hypotheses_figure

        picture = hypotheses_figure(hyp_rows, rec.low, rec.high) + "\n\n"
    # no switch names here (notebook 05 has them): the page speaks of hypotheses, not of lab switches
    rows = [{**r, "hypothesis": r["stands for"], GPU_COLUMN: r["on the incident's GPU"]} for r in hyp_rows]
    table = t.markdown_table(rows, ["hypothesis", "accept length", "per position", "vs incident", GPU_COLUMN])
    n = t.prompts_text(hyp_rows) or "a few"
    return (f"Each hypothesis alone at 5/1/6 on the lab, measured in this run over {n} prompts (per position: "
            "conditional acceptance of draft positions 1–5; – where no step reached it). *Not excluded*: its "
            f"interval meets the incident's {_range()}; with intervals this wide, weak evidence. Faults other than "
            "no TTT are applied to the lab's TTT draft. *Excluded* speaks "
            f"of the lab only: on {_target()}, larger or combined with another fault, it could still play a part. "
            "The last column is arithmetic: the accept length at the incident's step cost, as a speed-up."
            "\n\n" + picture + table)


def _range() -> str:
    return incident_record.load().figure("after_fix_accept_length").text()


def trust_section(ev: dict, present=None) -> str:
    acc = ev.get("acceptance") or {}
    top = (acc.get("diagnosis") or [None])[0]
    score = t.blind_score()
    lines = []
    if top:
        lines.append("- *The diagnosis* is eagle3lab's rule-based ranking of causes from a run's per-position "
                     "acceptance and the draft's standalone accuracy (notebook 04); it needs per-position data, "
                     "which the incident never had, so it has not been run on the incident.")
        lines.append(f"- **A check of the method, not a finding:** on {t.DRAFTS['seed']}, which lacks TTT by "
                     f"construction, the diagnosis ranks *{CAUSE_WORDS.get(top, top)}* (`{top}`) first "
                     f"({_link('04', present)}).")
    if score:
        lines.append(f"- **What to trust is its blind score**: on a lab built after the diagnosis' rules were frozen "
                     f"(\"{score['lab']}\", built {score['built']}), whose drafts' faults were hidden from it, it named "
                     f"the right fault first for **{score['right']} of {score['of']}** drafts ({score['top1']} %; "
                     f"95 % interval {score['ci'][0]}–{score['ci'][1]} %; `{score['file']}`, not re-measured in this run).")
    return "\n".join(lines)


# the diagnosis' causes (eagle3lab.acceptance.diagnosis.cause_rules.CAUSES) in words
CAUSE_WORDS = {"config_adjusted": "the server adjusted the configuration", "wiring": "a wiring mismatch",
               "vocab_mapping": "a broken vocabulary map", "multi_step": "a draft trained one step deep (no TTT)",
               "quantization": "a quantized target", "distribution_shift": "prompts unlike the training data",
               "context_length": "contexts longer than training", "sampling": "the sampling settings",
               "healthy": "no fault"}


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
        f"*Incident figures are quoted as reported in the incident's write-up (`data/incident/`); lab figures were "
        f"measured in this run ({run_info.get('what', 'the lab')}, {run_info.get('when', '')}). 5/1/6 means "
        "steps/topk/draft tokens; accept length is tokens per verify step, the bonus token included; brackets are "
        "95 % intervals over prompts unless said otherwise (per position: the wider of a jackknife over prompts "
        "and the exact binomial interval). A boundary b is the hidden state entering layer b (0 = the embedding). "
        "The write-up names the captured states two ways (id 2 \"capture before layer 3 runs\", and \"output "
        "after layer 3\"); this report follows SGLang's capture code: id 2 feeds boundary 3.*",
        "## Summary", summary(ev, rec, hyp_rows, run_info.get("lab")),
        "## Causes and their status", causes_table(ev, rec, present),
        "## What to change in your own deployment", actions(ev, rec, hyp_rows),
        "## The next measurement", next_measurement(hyp_rows),
        "## Timeline, figure by figure",
        "Each incident figure beside the lab's figure of the same definition at the same configuration "
        f"({t.DRAFTS['seed']}: trained on the incident's boundaries {rec.model['trained_boundaries']} without TTT, "
        "served as SGLang served the incident's). Step numbers are the write-up's order.\n\n"
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

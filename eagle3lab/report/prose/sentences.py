"""The sentences each notebook shows, every figure interpolated from a measurement."""

from __future__ import annotations

from eagle3lab.experiments import BASELINE, _int
from eagle3lab.spec import LATEST_SGLANG
from eagle3lab.report import labwords
from eagle3lab.report.prose.words import (_ci, _count, _depths, _finite, _get, _prompts, _vt, ci_text, compare,
                                   compare_words, origin, speedup_words, where)


def flag_set_sentence(measured, backend: str = "lab") -> str:
    """Prose for notebook 01, every figure taken from `measured`: each speed-up beside the
    baseline it divides (a row's own paired run, or the one no-speculation server), intervals checked."""
    runs = measured.drop(index=BASELINE, errors="ignore")
    if not len(runs):
        return "Nothing was measured."
    shared = measured.loc[BASELINE] if BASELINE in measured.index else None
    first = runs.iloc[0]
    lines = [f"*{origin(where(backend)[0], first)}; {labwords.draft('seed')}, not the incident's; tokens/s of "
             "whole requests, prefill included:*"]
    verdicts = []
    for label, row in runs.iterrows():
        sp, sp_ci = row["speedup"], _get(row, "speedup_ci95")
        base = _get(row, "baseline_tokens_per_s", None if shared is None else shared["tokens_per_s"])
        verdicts.append(compare(sp, sp_ci, 1.0, None) if _ci(sp_ci) else
                        ("higher" if sp > 1.05 else "lower" if sp < 0.95 else "same"))
        lines.append(f"- *{label}*: runs {_int(row['draft tokens run'])} draft tokens per step, accept length "
                     f"**{ci_text(row['accept_length'], _get(row, 'accept_length_ci95'))}**, "
                     f"**{row['tokens_per_s']:.1f} tok/s** against {ci_text(base, None, '.1f')} tok/s without "
                     f"speculation on the same prompts: {speedup_words(sp, sp_ci)} no speculation.")
    if "higher" in verdicts:
        lines.append("\nAt least one flag set beats plain decoding on this draft, beyond the noise.")
    elif all(v == "lower" for v in verdicts):
        lines.append("\nNo flag set beats plain decoding: fixing the flags alone cannot help while the "
                     "draft accepts this little.")
    elif verdicts:
        lines.append("\nNo flag set beats plain decoding beyond the noise.")
    return "\n".join(lines)


# How prose names the lab's drafts: never by a name that reads as the incident's, and from the
# lab's own manifest (`eagle3lab.report.labwords`), so a property said of a draft is the draft's.


def fix_sentence(measured, before: str, after: str, backend: str = "lab") -> str:
    """Prose for notebook 03: how much the fix moved accept length and tokens/s, in words chosen
    from the intervals (a title never says "barely moved" when the intervals separate)."""
    b, a = measured.loc[before], measured.loc[after]
    al = compare(a["accept_length"], _get(a, "accept_length_ci95"), b["accept_length"],
                 _get(b, "accept_length_ci95"))
    moved = {"higher": "rose", "lower": "fell", "same": "did not move measurably"}.get(al, "changed")
    return (f"Accept length {moved}: **{ci_text(b['accept_length'], _get(b, 'accept_length_ci95'))}** before "
            f"the fix, **{ci_text(a['accept_length'], _get(a, 'accept_length_ci95'))}** after; throughput "
            f"**{b['tokens_per_s']:.1f}** → **{a['tokens_per_s']:.1f} tok/s**. With the fix the server is "
            f"{speedup_words(a['speedup'], _get(a, 'speedup_ci95'))} plain decoding (before: "
            f"{speedup_words(b['speedup'], _get(b, 'speedup_ci95'))} it). *({origin(where(backend)[0], a)}; "
            f"{labwords.draft('seed')}, not the incident's.)*")


def fix_title(measured, before: str, after: str, backend: str = "lab") -> str:
    """The title of notebook 03's finding, its direction taken from the intervals."""
    b, a = measured.loc[before], measured.loc[after]
    on = where(backend)[1]
    al = compare(a["accept_length"], _get(a, "accept_length_ci95"), b["accept_length"],
                 _get(b, "accept_length_ci95"))
    if al == "higher":
        if labwords.seed_ttt():
            return (f"The fix works {on} for {labwords.draft('seed')} (accept length {b['accept_length']:.2f} "
                    f"→ {a['accept_length']:.2f}); what the training slice itself costs is below, and notebooks "
                    "04 and 05 measure the rest.")
        return (f"The fix works {on} for {labwords.draft('seed')} (accept length {b['accept_length']:.2f} "
                f"→ {a['accept_length']:.2f}); that draft was trained without TTT by construction, and "
                "notebooks 04 and 05 measure how much that limits it.")
    if al == "lower":
        return f"The fix made acceptance worse {on}."
    return f"The fix did not move accept length measurably {on}."


def accuracy_sentence(right, served) -> str:
    """Prose for notebook 02 from two evaluate_draft frames: which wiring scores higher at which
    depths (a headline that holds at depth 1 only says so)."""
    r = right["accuracy"].to_numpy(float)
    sv = served["accuracy"].to_numpy(float)
    depths = right["depth"].to_numpy(int)
    worse = [int(d) for d, x, y in zip(depths, r, sv) if y < 0.9 * x]
    better = [int(d) for d, x, y in zip(depths, r, sv) if y > x]
    k = int(depths.max())
    text = (f"With the boundaries it was trained on, the draft's acc@1 is **{r[0]:.1%}**"
            + (f" (acc@{k} **{r[-1]:.1%}**)" if k > 1 else "")
            + f"; fed what the server feeds it, acc@1 is **{sv[0]:.1%}**"
            + (f" (acc@{k} **{sv[-1]:.1%}**)" if k > 1 else "") + ". ")
    if worse == [int(d) for d in depths]:
        text += "The served wiring costs accuracy at every depth."
    elif worse:
        text += (f"The served wiring costs accuracy at depth {_depths(worse)}"
                 + (f" and scores no lower at depth {_depths(better)}" if better else "")
                 + (" — deeper positions, where its accuracy is low either way" if better else "")
                 + "; depth 1 is what decides acceptance, since every later draft needs it accepted first.")
    else:
        text += "The served wiring costs little accuracy."
    if "positions" in right:
        text += (f" *(Measured in this run, teacher-forced on held-out text: n = {_int(right['positions'].iloc[0])} "
                 "scored tokens at depth 1 per wiring.)*")
    return text


def gap_sentence(gap) -> str:
    """Notebook 04: accept length predicted from standalone acc@k versus served, in words that
    name the two measures and the direction."""
    st, sv = float(gap["accept_length_standalone"].iloc[-1]), float(gap["accept_length_served"].iloc[-1])
    direction = compare(sv, None, st, None)
    words = {"higher": "is **higher** than", "lower": "is **lower** than",
             "same": "is about the same as"}.get(direction, "cannot be compared with")
    return (f"Read as if each acc@i were the conditional rate at position i (an assumption, not a "
            f"measurement: acc@i is teacher-forced, scored at every position whether or not the "
            f"draft's earlier tokens were right), the draft's acc@k predicts an accept length of "
            f"**{st:.2f}**; the served conditional rates give **{sv:.2f}**, which {words} that. "
            "The two are different measures: served acceptance is conditional on the draft's own "
            "earlier tokens having been accepted, on the target's own continuation."
            + (f" The draft's acc@2 ({float(gap['standalone'].iloc[1]):.1%}) is far below its acc@1 "
               f"({float(gap['standalone'].iloc[0]):.1%}): the pattern of a draft trained without TTT."
               if len(gap) > 1 and gap["standalone"].iloc[1] < 0.5 * gap["standalone"].iloc[0] else ""))


def log_sentence(log, requested_draft_tokens: int | None = None, source: str = "the server log of this run") -> str:
    """Prose for the log section: how many decode lines, accept length range, throughput."""
    decode = log[log["accept_len"].notna()]
    lens = decode["accept_len"]
    if not len(lens):
        return "The log has no line with an accept length."
    text = (f"The log has **{len(decode)}** line{'s' if len(decode) != 1 else ''} with an accept length; "
            f"it ranges from **{lens.min():.2f}** "
            f"to **{lens.max():.2f}** (mean **{lens.mean():.2f}**)")
    if requested_draft_tokens:
        text += f", out of at most {requested_draft_tokens} tokens per verify step"
    tput = decode["gen_throughput"].dropna() if "gen_throughput" in decode else []
    if len(tput):
        text += f"; the log's own generation throughput averages **{tput.mean():.1f} tok/s**"
    return text + f". *({source}.)*"


def diagnosis_sentence(findings, short: bool = False, standalone: bool = False,
                       n_steps: int | None = None) -> str:
    """The top findings, in words (`short`: the top cause only). The order is the rules' ranking;
    no probability is claimed (the rules' weights are hand-set, not calibrated). `standalone`:
    the diagnosis was also given the draft's teacher-forced acc@k, so it does not say "served
    statistics alone"."""
    if not findings:
        return "No finding."
    basis = ("the served statistics and the draft's standalone acc@k" if standalone
             else "the served statistics alone")
    top = findings[0]
    if short:
        n = f", n = {_int(n_steps)} verify steps measured in this run" if _finite(n_steps) else ""
        return f"Diagnosis from {basis}{n}: **{top.cause}** ranked first."
    text = (f"Ranked first: **{top.cause}**. " + top.evidence
            + f"\n\nNext check: {top.next_check}")
    if len(findings) > 1:
        text += "\n\nAlso considered, in rank order: " + ", ".join(f.cause for f in findings[1:])
    return text


def winner_sentence(sweep, backend: str = "lab") -> str:
    """The measured best configuration, and which others its interval does not separate from."""
    best_i = sweep["speedup"].idxmax()
    best, worst = sweep.loc[best_i], sweep.loc[sweep["speedup"].idxmin()]
    cfg = lambda r: f"{int(r['num_steps'])}/{int(r['topk'])}/{int(r['num_draft_tokens'])}"  # noqa: E731
    ties = [cfg(r) for i, r in sweep.iterrows() if i != best_i and compare(
        best["speedup"], _get(best, "speedup_ci95"), r["speedup"], _get(r, "speedup_ci95")) == "same"]
    text = (f"*{origin(where(backend)[0], best)} per point; the lab's healthy draft.* "
            f"Highest measured speed-up: **{int(best['num_steps'])} steps, topk {int(best['topk'])}, "
            f"{int(best['num_draft_tokens'])} draft tokens** (steps/topk/draft tokens {cfg(best)}) — accept length "
            f"**{ci_text(best['accept_length'], _get(best, 'accept_length_ci95'))}**, speed-up "
            f"**{ci_text(best['speedup'], _get(best, 'speedup_ci95'), unit='×')}**. ")
    if ties:
        text += (f"Its interval overlaps those of {', '.join(ties)}: on this budget these are "
                 "not distinguishable, so none of them is *the* winner. ")
    else:
        text += "Its interval separates it from every other point. "
    text += (f"The lowest point ({cfg(worst)}) reaches "
             f"{ci_text(worst['speedup'], _get(worst, 'speedup_ci95'), unit='×')}.")
    return text


def resolution_sentence(resolved) -> str:
    """Which flag sets run something else than asked, in words."""
    changed = resolved[resolved["changed"]]
    if not len(changed):
        return "Every flag set runs as asked."
    parts = [f"*{label}* asks for {row['asked steps/topk/draft'][2]} draft tokens but runs "
             f"**{row['num_draft_tokens']}**" for label, row in changed.iterrows()]
    warned = {w for ws in resolved["warnings"] for w in ws} if "warnings" in resolved else set()
    said = (f"SGLang says so only in its server log ({_count(len(warned), 'distinct warning line')}, "
            "in the table of warnings); the server starts and runs anyway." if warned else
            "SGLang prints no warning about it; the server starts and runs anyway.")
    return "; ".join(parts) + " — " + said


def seed_ids_sentence(by_version, measured, version: str = LATEST_SGLANG) -> str:
    """Notebook 03: what the incident's fixed ids feed on `version`, per version, and what the
    one-layer offset costs on the lab (accept length and speed-up, intervals compared)."""
    from eagle3lab.experiments import SEED_FIX_IDS, SEED_TRAINED

    def row_for(v):
        for label, row in by_version.iterrows():
            lo, _, hi = str(label).partition(" – ")
            if v in (lo, hi) or (hi and _vt(lo) <= _vt(v) <= _vt(hi)):
                return label, row
        return None, None

    label, row = row_for(version)
    fed_col = next(c for c in by_version.columns if c.startswith("fix "))
    ok_col = next(c for c in by_version.columns if c.startswith("fix = trained"))
    good = [str(v) for v, r in by_version.iterrows() if bool(r[ok_col])]
    text = ""
    if row is not None:
        fed = row[fed_col]
        text += (f"On SGLang **{version}**, the incident's fixed ids {SEED_FIX_IDS} feed **{fed}** on its "
                 f"DeepSeek-V3-style target, " + ("exactly the boundaries it was trained on. " if bool(row[ok_col])
                                                  else f"not the **{SEED_TRAINED}** it was trained on"))
        if not bool(row[ok_col]) and isinstance(fed, list):
            off = sum(1 for f, t in zip(fed, SEED_TRAINED) if f != t)
            text += f": {off} of {len(SEED_TRAINED)} slots are one layer off. "
        text += (f"The ids that feed the trained boundaries there: **{row['ids that feed the trained boundaries']}**. ")
    if good:
        text += (f"The incident's ids were right only on SGLang {', '.join(good)} (deepseek_v2.py adds 1 to every id "
                 "there; from 0.5.13 it adds 1 only when the first id is 1). ")
    names = list(measured.index)
    if len(names) == 2:
        a, b = (measured.loc[n] for n in names)
        verdict = compare_words(a["accept_length"], _get(a, "accept_length_ci95"), b["accept_length"],
                                _get(b, "accept_length_ci95"), "higher than", "lower than",
                                "not distinguishable from")
        text += (f"\n\nOn the lab (lab, measured in this run, {_prompts(a)}) the same offset (*{names[0]}*, boundaries {a['boundaries']}) gives accept length "
                 f"**{ci_text(a['accept_length'], _get(a, 'accept_length_ci95'))}**, {verdict} "
                 f"*{names[1]}* (boundaries {b['boundaries']}): "
                 f"**{ci_text(b['accept_length'], _get(b, 'accept_length_ci95'))}**; speed-up "
                 f"{ci_text(a['speedup'], _get(a, 'speedup_ci95'), unit='×')} against "
                 f"{ci_text(b['speedup'], _get(b, 'speedup_ci95'), unit='×')}. ")
        direction = compare(a["accept_length"], _get(a, "accept_length_ci95"), b["accept_length"],
                            _get(b, "accept_length_ci95"))
        if direction == "same":
            text += ("So on the lab a one-layer offset costs nothing measurable (neighbouring boundaries of "
                     "the residual stream carry nearly the same state), and the offset alone does not "
                     "explain why the incident's fix disappointed. Why it did is an open question: one "
                     "hypothesis is that its draft was trained without TTT, tested with the others in "
                     f"notebook 05 ({labwords.draft('no-ttt')} lacks TTT by construction). The "
                     "offset is still not the wiring the draft was trained on, and a real target may be "
                     "less forgiving: use the ids above and measure.")
        elif direction == "lower":
            text += "The offset costs acceptance: the ids above are worth fixing."
        else:
            text += "Here the offset wiring scores higher, which a one-layer shift does not explain: rerun with more prompts."
    return text


def vllm_resolution_sentence(on_vllm, check=None) -> str:
    """Notebook 01 on vLLM: what vLLM runs for each flag set (a chain of num_speculative_tokens),
    what it changes on its own, and whether vLLM's own resolver agrees."""
    lines = []
    for label, row in on_vllm.iterrows():
        asked = row["asked steps/topk/draft"]
        if row.get("refused"):
            lines.append(f"- *{label}*: vLLM refuses it ({row['refused']}).")
            continue
        k = _int(row["num_speculative_tokens"])
        text = (f"- *{label}*: vLLM takes one number, `num_speculative_tokens` = **{k}** (eagle3lab passes "
                f"num_steps), and verifies a chain of **{k + 1}** tokens per step")
        if asked[2] is not None and asked[2] != k + 1:
            text += f", not the {asked[2]} draft tokens asked"
        silent = list(row.get("silent changes") or [])
        lines.append(text + (f"; it also changes, unasked: {'; '.join(silent)}." if silent else "."))
    if check is not None and len(check):
        agree = int(check["agree"].sum())
        lines.append(f"\nvLLM {check['vllm_version'].iloc[0]}'s own `EngineArgs(...).create_engine_config()` "
                     f"agrees with eagle3lab's vLLM rules on **{agree} of {len(check)}** flag sets.")
    return "\n".join(lines)


def capture_sentence(table) -> str:
    """Notebook 02 on vLLM: rule vs measurement, and what the draft's own ids feed on each engine."""
    agree = int(table["agree"].sum())
    own = table.iloc[0]
    sglang_col = next(c for c in table.columns if c.startswith("SGLang"))
    rule_col = next(c for c in table.columns if c.startswith("vLLM") and "rule" in c)
    return (f"The running vLLM captured what eagle3lab's rule says for **{agree} of {len(table)}** id sets "
            f"(each captured tensor equals transformers' hidden state of that boundary). The draft's own ids "
            f"{own['config ids']} feed **{own[rule_col]}** on vLLM (an id is a boundary, 0 is the embedding) "
            f"and **{own[sglang_col]}** on {sglang_col.replace(' feeds', '')} (+1 rule); it was trained on "
            f"**{own['trained on']}**.")


def source_sentence(obs) -> str:
    """Where an observation's acceptance comes from and how much it rests on."""
    names = {"lab": "the lab engine's step records", "vllm-metrics": "vLLM's /metrics counters (this "
             "benchmark's window)", "log": "the server log", "meta_info": "SGLang's per-request meta_info"}
    where = names.get(obs.source, obs.source)
    counted = {True: "conditional", False: "unconditional", None: "not per position"}[obs.conditional]
    n = f"{obs.n_steps} verify steps" if obs.n_steps else "an unknown number of steps"
    reqs = f" over {obs.n_requests} requests" if obs.n_requests else ""
    return f"Source: {where}; {n}{reqs}; per-position rates as counted: {counted}."


def other_prompts_sentence(faults) -> str:
    """Which of `faults` decode other prompts than the notebooks' shared ones (computed from the
    fault table, so the sentence names only rows the sweep has)."""
    from eagle3lab.decoder.faults import FAULTS

    own = [f for f in faults if f in FAULTS and FAULTS[f].prompts]
    if not own:
        return "Every row decodes the notebooks' shared prompts."
    names = ", ".join(f"`{f}`" for f in own)
    return (f"Every row decodes the notebooks' shared prompts except {names}, whose point is other "
            "prompts: " + ("its" if len(own) == 1 else "their") + " speed-up is measured on those.")


def repetition_share(tokens, window: int = 4) -> dict | None:
    """How repetitive the generated text is (every request of a lab run): the share of
    `window`-token spans that already occurred earlier in the same generation, with its counts.
    None without token records."""
    if tokens is None or not len(tokens) or "text" not in tokens:
        return None
    from eagle3lab.acceptance.stats import repeated_spans

    generated = tokens[tokens["kind"] != "prefill"] if "kind" in tokens else tokens
    groups = generated.groupby("request") if "request" in generated else [(0, generated)]
    repeats, spans = repeated_spans((list(group["text"]) for _, group in groups), window)
    if not spans:
        return None
    return {"share": repeats / spans, "spans": spans, "window": window,
            "requests": int(generated["request"].nunique()) if "request" in generated else 1}


def repetition_sentence(tokens, window: int = 4, toy: dict | None = None, heldout: dict | None = None) -> str:
    """A tiny target's greedy text loops: the sentence says so when it does (`repetition_share`),
    so the token view is read for its colours, not as the target's prose. On the real-model lab
    its figure stands beside the toy's (`toy`) and its held-out responses' (`heldout`)."""
    rep = repetition_share(tokens, window)
    if rep is None:
        return ""
    share = rep["share"]
    figure = (f"{share:.0%} of the generated {window}-token spans repeat an earlier span of the same "
              f"generation (measured in this run, n = {rep['spans']} spans over {rep['requests']} requests)")
    if toy or heldout:
        beside = [f"{h['share']:.0%} over {h['origin']} (n = {h['spans']} spans, {h['requests']} responses)"
                  for h in (heldout, toy) if h and h.get("share") is not None]
        return (f"*Text quality, the lab's pretrained chat model: {figure}; "
                + "; ".join(beside) + ". Code, lists and chat formulas repeat in real text too; the toy's "
                "greedy text loops.*")
    if share >= 0.3:
        return (f"*The lab's tiny target loops: {figure}. Its greedy text is degenerate; read the view "
                "for how each token was produced, not as text.*")
    return f"*{figure[0].upper()}{figure[1:]}.*"


def under_load_markdown(result) -> str:
    """Notebook 05's load section in words: per draft and depth the crossover (from intervals) and
    which cost model the measurement follows, each with its origin; then what changes on a GPU."""
    from eagle3lab.serving import loadsweep

    lines = []
    if not result.get("measured"):
        lines.append(f"**Nothing is measured under load on the {result.get('backend', 'lab')} backend**: "
                     f"{result['why']}.")
        if result.get("vllm_available"):
            walls = [(s["provenance"] or {}).get("wall_s") for s in result.get("stored", [])]
            took = (f" (the stored sweeps below took {sum(walls) / 60:.0f} min where they were measured)"
                    if walls and all(isinstance(w, (int, float)) for w in walls) else "")
            lines.append("vLLM's CPU build is installed here: `BACKEND = \"vllm\"` (or `LOAD_LIVE = True`) measures "
                         f"this section in this run{took}.")
        else:
            lines.append("`bash scripts/setup_vllm.sh` installs vLLM's CPU build (.venv-vllm); with it, "
                         "`BACKEND = \"vllm\"` measures this section in this run.")
    from eagle3lab.experiments import load_groups

    groups = load_groups(result)
    if not groups:
        lines.append(f"No load sweep of the {result.get('lab', 'this')} lab is stored in data/load/, so there is "
                     "no figure to show.")
    for draft, origin, rows in groups:
        lines.append(f"\n**The lab's {draft} draft** ({origin}):")
        for config, cross in loadsweep.crossovers(rows):
            k = config.get("num_steps", "?")
            lines.append(f"- k = {k}: {cross['text']}.")
        for config, model in loadsweep.cost_models(rows):
            if model["status"] == "ok":
                lines.append(f"- k = {config.get('num_steps', '?')}, {model['text']}.")
    lines.append("\n" + loadsweep.GPU_NOTE)
    return "\n".join(lines)



def training_curve_sentence(curves: dict, goal: float, name: str = "healthy") -> str:
    """Where the draft's accept length stands against its training tokens and the goal, and
    whether it was still rising (the last two intervals separate)."""
    pts = curves.get(name) or []
    if len(pts) < 2:
        return ""
    first, prev, last = pts[0], pts[-2], pts[-1]

    def at(p):
        return f"{p['accept_length']:.2f} [{p['ci95'][0]:.2f}, {p['ci95'][1]:.2f}] at {p['training_tokens']:,} tokens"

    rising = prev["ci95"][1] < last["ci95"][0]
    reached = last["ci95"][0] >= goal
    return (f"The {name} draft's accept length at 5/1/6 grows with training: {at(first)}, {at(last)} "
            f"(the shipped draft; the lab's replay over {last.get('prompts', '?')} held-out chat prompts). "
            + (f"It reaches the goal of {goal:g}. " if reached else
               f"**The goal of {goal:g} is not reached** with this machine's training budget; ")
            + ("it was still rising between the last two points (their intervals separate): more training "
               "would raise it, by how much is not measured here." if rising else
               "the last two points' intervals overlap: no claim that more training would raise it."))

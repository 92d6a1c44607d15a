"""The post-mortem's tables, computed from the incident record and the notebooks' recorded evidence.

Each row sets an incident figure (as reported, `eagle3lab.report.incident`) beside the lab's figure of
the same definition at the same configuration, measured in the run, and decides the verdict from
the lab's interval: "consistent" when the interval meets the incident's reported range, "higher"
or "lower" when it lies beyond it. Where the lab cannot measure the same thing (tokens/s on the
incident's hardware), the row says why in numbers: the cost of one speculative step.
"""

from __future__ import annotations

import math
import statistics

from eagle3lab.report import incident as incident_record
from eagle3lab.cost import stepcost

# What each lab switch stands for in the incident (notebook 05's hypotheses), short: the page's
# table has one row each. `embed-patch` is the lab's seed-like draft served with the wiring fixed:
# on the toy labs it was trained without TTT, on the real-model lab with TTT (so there it is the
# training slice alone): `hypothesis_words` says which.
HYPOTHESES = {
    "embed-patch": "no TTT, wiring fixed (the incident's draft after the fix, if trained without TTT)",
    "no-ttt": "no TTT, standard wiring",
    "wiring-seed": "wiring still off (as before the fix)",
    "quant-int4": "target quantized to int4 at serve time",
    "quant-int8": "target quantized to int8 at serve time",
    "domain-shift": "prompts unlike the training data",
    "long-context": "prompts longer than the draft's training windows",
    "no-d2t": "vocabulary map dropped (no d2t)",
    "normed-last": "final norm on the last captured state",
    "no-template": "draft trained without the chat template, served with it",
    "healthy (no fault)": "none: TTT draft served as trained (the reference)",
}
TRAINING_SLICE = "trained on [embedding, low, mid], wiring fixed (the training slice alone)"


def hypothesis_words(name: str) -> str:
    """What a lab switch stands for in the incident, for the lab the run used."""
    from eagle3lab.report import labwords

    if name == "embed-patch" and labwords.seed_ttt():
        return TRAINING_SLICE
    return HYPOTHESES.get(name, name)


REFERENCE = "healthy (no fault)"

class _DraftWords:
    """`DRAFTS[name]`: the active lab's words for its draft (`eagle3lab.report.labwords`)."""

    def __getitem__(self, name: str) -> str:
        from eagle3lab.report import labwords

        return labwords.draft(name)


DRAFTS = _DraftWords()


def _ci(value):
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(_finite(v) for v in value):
        return float(value[0]), float(value[1])
    return None


def _finite(x) -> bool:
    try:
        return x is not None and math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


def and_list(words: list[str]) -> str:
    """Words as the pages list them: "a, b and c"."""
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def fmt(point, ci=None, digits: int = 2, unit: str = "") -> str:
    """`1.90 [1.76, 2.08]`, `n/a` for a missing figure."""
    if not _finite(point):
        return "n/a"
    text = f"{float(point):.{digits}f}{unit}"
    ci = _ci(ci)
    return text if ci is None else f"{text} [{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]"


def against_range(point, ci, low: float, high: float) -> str:
    """"consistent", "higher" or "lower": a lab figure (its interval) against a reported range.
    Without an interval the point itself must fall inside the range to be called consistent."""
    if not _finite(point):
        return "not measured"
    lo, hi = _ci(ci) or (float(point), float(point))
    if hi < low:
        return "lower"
    if lo > high:
        return "higher"
    return "consistent"


def against_one(ci, point, reference: float = 1.0) -> str:
    """"above", "below" or "not distinguishable": a ratio's interval against 1."""
    ci = _ci(ci)
    if ci is None:
        return "not measured" if not _finite(point) else "no interval"
    if ci[0] > reference:
        return "above"
    if ci[1] < reference:
        return "below"
    return "not distinguishable"


# --------------------------------------------------------------------------- the incident's own cost

def incident_step_cost(rec=None, accept_length: float | None = None):
    """The incident's own figures at its fixed configuration as a `stepcost.StepCost` (accept
    length: the mean of the logged values unless given)."""
    rec = rec or incident_record.load()
    cfg = rec.config("after_fix")
    L = rec.figure("after_fix_accept_length").mid if accept_length is None else accept_length
    return stepcost.StepCost(rec.figure("baseline_tps").mid, rec.figure("after_fix_tps").mid, L,
                             cfg["num_steps"], cfg["topk"], cfg["num_draft_tokens"])


def incident_cost(rec=None) -> dict:
    """What the incident's own figures say of its step cost at the fixed configuration
    (`stepcost.StepCost`: accept length × baseline / speculative tok/s plain steps, so speculation
    there pays only above that accept length), with the range from the logged accept lengths."""
    rec = rec or incident_record.load()
    length = rec.figure("after_fix_accept_length")
    mid, low, high = (incident_step_cost(rec, L) for L in (length.mid, length.low, length.high))
    train = rec.figure("validation_accuracy").mid
    return {"k": mid.steps, "baseline_tps": mid.baseline_tps, "spec_tps": mid.spec_tps,
            "accept_length": mid.accept_length, "cost": mid.cost, "cost_range": (low.cost, high.cost),
            "iid_rate": mid.iid_rate, "iid_rate_range": (low.iid_rate, high.iid_rate),
            "training_accuracy": train, "accept_length_at_training_accuracy": mid.iid_accept_length(train),
            "step": mid}


def lab_cost(row: dict, rec=None) -> float | None:
    """The lab's own cost of one speculative step at the incident's fixed configuration, in plain
    steps: the incident's formula on the lab's measurement (accept length × paired baseline tok/s
    / speculative tok/s)."""
    cfg = (rec or incident_record.load()).config("after_fix")
    try:
        return stepcost.StepCost(row["baseline_tokens_per_s"], row["tokens_per_s"], row["accept_length"],
                                 cfg["num_steps"], cfg["topk"], cfg["num_draft_tokens"]).cost
    except (KeyError, TypeError, ValueError, stepcost.StatsError):
        return None


# --------------------------------------------------------------------------- timeline, like for like

def _speedup_cell(row: dict | None) -> str:
    if not row:
        return "not measured in this run"
    return (f"{fmt(row.get('speedup'), row.get('speedup_ci95'), unit='×')} of its paired no-speculation run "
            f"({fmt(row.get('tokens_per_s'), None, 1)} over {fmt(row.get('baseline_tokens_per_s'), None, 1)} tok/s)")


def timeline_rows(ev: dict, rec=None) -> list[dict]:
    """One row per incident figure in timeline order: the figure as reported, the lab's figure of
    the same definition at the same configuration, and the verdict."""
    rec = rec or incident_record.load()
    flags = (ev.get("flag_sets") or {}).get("rows", {})
    by_cfg = {tuple(r.get("asked") or ()): r for r in flags.values()}
    fix = ev.get("fix") or {}
    acc = ev.get("acceptance") or {}
    wiring = ev.get("wiring") or {}
    res = ev.get("resolution") or {}
    cost = incident_cost(rec)
    rows = []

    def add(step, figure, lab, verdict):
        rows.append({"step": step, "incident (as reported)": figure, "lab, same measure (this run)": lab,
                     "verdict": verdict})

    trained = rec.figure("validation_accuracy")
    add(1, f"trained on {rec.figure('train_samples').value:,} samples: **{trained.text()}** validation accuracy "
           "(the write-up does not say of which positions)",
        "the lab's drafts: step 4's row", "no counterpart: the lab's draft is small")
    first = rec.config("first")
    runs = next((r for r in res.get("rows", []) if r.get("asked") == [first["num_steps"], first["topk"],
                                                                   first["num_draft_tokens"]]), None)
    if runs:
        same = runs["runs"][2] == rec.figure("draft_tokens_run_first").value
        check = res.get("sglang_check")
        by = (f"SGLang {check['version']}'s own resolver agrees on {check['agree']} of {check['of']} flag sets"
              if check else f"SGLang {res.get('version', '')}'s rules, read in its wheel")
        add(2, f"{incident_record.config_label(first)} runs **{rec.figure('draft_tokens_run_first').value}** draft tokens",
            f"runs **{runs['runs'][2]}** ({by})", "same" if same else "differs")
    tries = [("first", "first_tps", 2), ("steps15", "steps15_tps", 3)]
    for name, fid, step in tries:
        cfg = rec.config(name)
        lab_row = by_cfg.get((cfg["num_steps"], cfg["topk"], cfg["num_draft_tokens"]))
        inc = rec.figure(fid)
        where = against_one((lab_row or {}).get("speedup_ci95"), (lab_row or {}).get("speedup"))
        verdict = {"below": "slower than no speculation on the lab too, at the lab's own step cost: the direction, "
                            "not the incident's cause",
                   "above": "faster on the lab, at the lab's own step cost",
                   "not distinguishable": "not distinguishable from no speculation on the lab"}.get(where, where)
        add(step, f"{incident_record.config_label(cfg)}, wiring off: **{inc.text()}** = "
                  f"{rec.speedup(fid):.2f}× of {rec.figure('baseline_tps').text()}",
            _speedup_cell(lab_row), verdict)
    s1 = by_cfg.get(tuple(rec.config("first")[k] for k in ("num_steps", "topk", "num_draft_tokens")))
    s15 = by_cfg.get(tuple(rec.config("steps15")[k] for k in ("num_steps", "topk", "num_draft_tokens")))
    if s1 and s15:
        lo15, hi1 = (_ci(s15.get("speedup_ci95")) or (None, None))[1], (_ci(s1.get("speedup_ci95")) or (None, None))[0]
        order = ("reproduced" if lo15 is not None and hi1 is not None and lo15 < hi1
                 else "not distinguishable on the lab")
        add(3, f"15 steps slower than 1 step ({rec.figure('steps15_tps').text()} < {rec.figure('first_tps').text()})",
            f"{fmt(s15['speedup'], s15.get('speedup_ci95'), unit='×')} against {fmt(s1['speedup'], s1.get('speedup_ci95'), unit='×')}",
            order)
    ids = ev.get("fix_ids") or {}
    model = rec.model
    off = ids.get("rows_graphs_off") or []
    served, trained = model["served_boundaries_before_fix"], list(model["trained_boundaries"])
    if ids.get("story_versions"):
        story_off = [r["versions"] for r in off if r["config_feeds"] == served]
        add(4, f"the server fed **{served}**, training used "
               f"**{model['trained_boundaries']}** (ids {model['config_ids_before_fix']})",
            f"SGLang's capture rule, read in its wheels, feeds {served} for those ids "
            + _on_and_off(ids["story_versions"], story_off),
            f"same there; the logged accept rate points to {RATE_OLD_UNTIL} or earlier, where a reading of the setter "
            "gives it with CUDA graphs on or off (on, the replayed steps fed the default layers)" if story_off
            else f"same there; {VERSION_CLUES}")
    if ids.get("fixed_on"):
        fixed_off = [r["versions"] for r in off if r["fix_feeds"] == trained]
        add(5, f"ids rewritten to **{model['config_ids_after_fix']}** with the embedding patch",
            "they feed the trained boundaries " + _on_and_off(ids["fixed_on"], fixed_off)
            + f"; on {ids['latest']} they feed {ids['fed_latest']}",
            "depends on the SGLang version and CUDA graphs (the write-up states neither)")
    if wiring:
        add(4, f"standalone test with the right wiring: **{rec.figure('standalone_accuracy').text()}** accuracy "
               "(the write-up does not say over which positions)",
            f"{DRAFTS['seed']}: acc@1 {fmt(100 * wiring['acc1_trained'], None, 1)} % as trained, "
            f"{fmt(100 * wiring['acc1_served'], None, 1)} % as served (n = {wiring.get('positions', '?')} tokens)",
            "the wiring's cost carries over, not the draft")
    after = fix.get("after")
    if after:
        add(6, f"5/1/6 after the fix: **{rec.figure('after_fix_tps').text()}** = {rec.speedup('after_fix_tps'):.2f}×",
            _speedup_cell(after),
            f"differs in cost: a step costs {cost['cost']:.1f} plain steps for the incident, calculated, and "
            f"{fmt(lab_cost(after), None, 1)} on the lab's CPU, measured")
    if acc or after:
        src = acc if acc.get("accept_length") is not None else after
        length = rec.figure("after_fix_accept_length")
        add(6, f"accept length **{length.text()}** (SGLang's log, bonus token included)",
            f"{fmt(src.get('accept_length'), src.get('accept_length_ci95'))} ({DRAFTS['seed']}, fixed)",
            against_range(src.get("accept_length"), src.get("accept_length_ci95"), length.low, length.high))
        rate = rec.figure("after_fix_accept_rate")
        k1 = rec.config("after_fix")["num_steps"] + 1
        ci = _ci(src.get("accept_length_ci95"))
        lab_rate = None if not _finite(src.get("accept_length")) else float(src["accept_length"]) / k1
        add(6, f"accept rate **{rate.text()}** (SGLang's logged rate; about accept length / {k1}: "
               f"{length.low / k1:.2f}–{length.high / k1:.2f}, {RATE_DEFINITION})",
            fmt(lab_rate, None if ci is None else (ci[0] / k1, ci[1] / k1)) + f" (the lab's accept length / {k1})",
            against_range(lab_rate, None if ci is None else (ci[0] / k1, ci[1] / k1), rate.low, rate.high))
    rows.sort(key=lambda r: r["step"])
    return rows


def lab_cost_sentence(ev: dict, rec=None) -> str:
    """Why the lab's ratios resemble the incident's without reproducing it: each comes from its own
    step cost (the lab's measured on its CPU, the incident's calculated from its figures)."""
    after = (ev.get("fix") or {}).get("after") or {}
    lab = lab_cost(after, rec)
    if lab is None:
        return ""
    return (f"The lab's step cost, {lab:.1f} plain steps measured on its CPU at 5/1/6 against the incident's "
            f"{incident_cost(rec)['cost']:.1f} calculated, makes its ratios show the direction, not the incident's size.")


# docs/sources.md section 3: which releases print which accept rate (read in SGLang's wheels)
RATE_OLD_UNTIL = "0.5.10.post1"
RATE_DEFINITION = (f"the rate SGLang 0.5.3.post2–{RATE_OLD_UNTIL} print; 0.5.11 and later print (accept length − 1) "
                   "/ 5, which would read 0.15–0.17 here")


def _on_and_off(on: str, off: list[str]) -> str:
    """Where notebook 03's tables find something: with CUDA graphs on (the default), and, where the
    run recorded the graphs-off table, with them off."""
    return f"on {', '.join(off)} with CUDA graphs off, and on {on} with them on" if off else f"on {on}"


VERSION_CLUES = f"but the logged accept rate points to {RATE_OLD_UNTIL} or earlier: the version is not known"


# the incident's timeline numbers its stages (rows' "step"), headed "stage" on the page: a step there is a decode
# or verify pass, and the box's to-dos are items
HEADINGS = {"step": "stage"}


def markdown_table(rows: list[dict], columns: list[str] | None = None) -> str:
    if not rows:
        return ""
    columns = columns or list(rows[0])
    cell = lambda v: str(v).replace("|", "\\|").replace("\n", " ")  # noqa: E731
    lines = ["| " + " | ".join(HEADINGS.get(c, c) for c in columns) + " |", "|" + "---|" * len(columns)]
    return "\n".join(lines + ["| " + " | ".join(cell(r.get(c, "")) for c in columns) + " |" for r in rows])


# --------------------------------------------------------------------------- hypotheses

def hypothesis_rows(ev: dict, rec=None) -> list[dict]:
    """Each lab hypothesis at the incident's fixed configuration: its accept length and
    per-position profile, consistent with the incident's reported range or excluded. No speed-up
    for the incident comes from a lab accept length: the configuration advice uses the incident's
    own acceptance and public drafts' (`moe_cost`)."""
    rec = rec or incident_record.load()
    table = (ev.get("hypotheses") or {}).get("rows", {})
    length = rec.figure("after_fix_accept_length")
    rows = []
    for name, row in table.items():
        verdict = against_range(row.get("accept_length"), row.get("accept_length_ci95"), length.low, length.high)
        rows.append({"name": name, "stands for": hypothesis_words(name),
                     "accept length": fmt(row.get("accept_length"), row.get("accept_length_ci95")),
                     "per position": profile_text(row),
                     "vs incident": ("reference" if name == REFERENCE else
                                     "**not excluded**" if verdict == "consistent" else f"excluded ({verdict})"),
                     "_verdict": verdict, "_row": row})
    return rows


def prompts_text(rows: list[dict]) -> str:
    """How many prompts the hypotheses' rows decoded: `6`, or `4–6` when they differ."""
    n = sorted({int(r["_row"]["prompts"]) for r in rows if r["_row"].get("prompts")})
    return "" if not n else str(n[0]) if n[0] == n[-1] else f"{n[0]}–{n[-1]}"


def short(name: str) -> str:
    """A hypothesis' short name, as the page's sentences and figure use it."""
    return hypothesis_words(name).split(" (")[0]


def profile_text(row: dict) -> str:
    rates = row.get("per_position") or []
    return " · ".join("–" if r is None else f"{r:.2f}" for r in rates) or "n/a"


def consistent(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r["_verdict"] == "consistent" and r["name"] != REFERENCE]


MIN_AT_RISK = 30  # steps that reached a position: below it a rate's interval says little


def separating_position(rows: list[dict], min_n: int = MIN_AT_RISK) -> dict | None:
    """Among the hypotheses not excluded, the draft position whose 95 % intervals separate them into
    the most groups (`rate_groups`; among equals, whose rates differ most), counting only positions
    every one of them reached at least `min_n` times: the one
    measurement on the real server that would tell them apart. Carries each rate's 95 % interval
    and steps at risk, so that a reader sees how far the lab's own sample separates them."""
    cands = consistent(rows)
    if len(cands) < 2:
        return None
    best = None
    depth = max(len(r["_row"].get("per_position") or []) for r in cands)
    for i in range(depth):
        at = _at_position(cands, i, min_n)
        if len(at) < len(cands):
            continue
        vals = {k: v[0] for k, v in at.items()}
        cis = {k: v[1] for k, v in at.items()}
        ns = {k: v[2] for k, v in at.items()}
        spread = max(vals.values()) - min(vals.values())
        groups = len(rate_groups(vals, cis if all(cis.values()) else None))
        # the position whose intervals separate most groups; among equals, the widest spread
        if best is None or (groups, spread) > (best["groups"], best["spread"]):
            best = {"position": i + 1, "spread": spread, "groups": groups, "rates": vals, "ci95": cis, "n": ns}
    return best


def separated_pairs(rows: list[dict], min_n: int = MIN_AT_RISK) -> list[dict]:
    """Pairs of hypotheses not excluded whose 95 % intervals at one draft position do not overlap
    (each reached at least `min_n` times), lowest position first: what the lab's own sample does
    tell apart when no grouping of all of them holds."""
    cands = consistent(rows)
    out = []
    depth = max((len(r["_row"].get("per_position") or []) for r in cands), default=0)
    for i in range(depth):
        at = {k: v[:2] for k, v in _at_position(cands, i, min_n).items() if v[1]}
        names = sorted(at, key=lambda k: at[k][0])
        for a_i, a in enumerate(names):
            for b in names[a_i + 1:]:
                if at[a][1][1] < at[b][1][0]:
                    out.append({"position": i + 1, "low": (a, *at[a]), "high": (b, *at[b])})
    return out


def _at_position(cands: list[dict], i: int, min_n: int) -> dict:
    """{name: (rate, 95 % interval or None, steps at risk)} at draft position i + 1, for the
    hypotheses that reached it at least `min_n` times."""
    at = {}
    for r in cands:
        row = r["_row"]
        rates, n, ci = (row.get(k) or [] for k in ("per_position", "per_position_n", "per_position_ci95"))
        if i < len(rates) and rates[i] is not None and i < len(n) and (n[i] or 0) >= min_n:
            at[r["name"]] = (rates[i], _ci(ci[i]) if i < len(ci) else None, int(n[i]))
    return at


GROUP_GAP = 0.15  # without intervals: rates closer than this at one position are one group


def rate_groups(rates: dict, cis: dict | None = None, gap: float = GROUP_GAP) -> list[list[tuple[str, float]]]:
    """Hypotheses grouped by their rate at one position, lowest first. With 95 % intervals a new
    group starts only where the next interval lies wholly above every interval of the group so far
    (the lab's sample separates them); without, wherever the next rate is `gap` above the last."""
    cis = cis or {}
    groups: list[list[tuple[str, float]]] = []
    top = None  # the highest upper end of the current group's intervals
    for name, rate in sorted(rates.items(), key=lambda kv: kv[1]):
        ci = _ci(cis.get(name))
        if groups and (rate - groups[-1][-1][1] < gap if not cis else (ci is None or top is None or ci[0] <= top)):
            groups[-1].append((name, rate))
            top = None if ci is None or top is None else max(top, ci[1])
        else:
            groups.append([(name, rate)])
            top = None if ci is None else ci[1]
    return groups


# --------------------------------------------------------------------------- the method's blind score

HELD_OUT = "lab6"  # the newest lab built after the diagnosis rules froze (docs/report-method.md)


def blind_score(name: str = HELD_OUT) -> dict | None:
    """The diagnosis' strict top-1 score on a held-out lab (data/validation/<name>.txt, written
    by benchmarks/validate_diagnosis.py): what a reader should trust, rather than its verdict on
    a lab draft whose fault is known by construction."""
    import re

    from eagle3lab.paths import DATA_DIR

    path = DATA_DIR / "validation" / f"{name}.txt"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return None
    m = re.search(r"^all\s+strict top-1 (\d+) % \((\d+)/(\d+); 95 % CI (\d+)-(\d+) %\)", text, re.M)
    built = re.search(r"built (\d{4}-\S+)", text)
    if not m:
        return None
    return {"lab": name, "top1": int(m.group(1)), "right": int(m.group(2)), "of": int(m.group(3)),
            "ci": (int(m.group(4)), int(m.group(5))), "built": built.group(1) if built else "?",
            "file": f"data/validation/{name}.txt"}


# --------------------------------------------------------------------------- reading the ratios

OTHER_PROMPTS = ("domain-shift", "long-context")  # rows that decode other prompts than the shared ones


def baselines(ev: dict) -> list[float]:
    """The no-speculation tok/s of every measured row that decoded the notebooks' shared prompts:
    identical greedy decodes, so their spread is the machine's drift during the run."""
    rows = list(((ev.get("flag_sets") or {}).get("rows") or {}).values())
    rows += [r for r in ((ev.get("fix") or {}).get("before"), (ev.get("fix") or {}).get("after")) if r]
    rows += [r for name, r in ((ev.get("hypotheses") or {}).get("rows") or {}).items() if name not in OTHER_PROMPTS]
    return [float(r["baseline_tokens_per_s"]) for r in rows if _finite(r.get("baseline_tokens_per_s"))]


def baseline_sentence(ev: dict) -> str:
    """Said once, where ratios first appear: each speed-up divides by its own interleaved
    no-speculation run, and how far this run's identical no-speculation decodes drifted."""
    base = sorted(baselines(ev))
    text = ("Each lab speed-up divides by its own no-speculation run, decoded alternately with it on the same "
            "prompts, so the machine's drift cancels")
    if len(base) < 2:
        return text + "."
    mid = statistics.median(base)
    return text + (f": this run's {len(base)} identical no-speculation decodes ranged {base[0]:.1f}–{base[-1]:.1f} "
                   f"tok/s, {100 * (base[-1] - base[0]) / mid:.0f} % of their median. Compare ratios and accept "
                   "lengths, never by raw tok/s across rows.")


# --------------------------------------------------------------------------- the training slice

def slice_word(ev: dict) -> str:
    """The training slice's effect on the lab in two words, for its status: small where the ratio's
    interval lies within 10 % of 1, else its direction."""
    gap = (ev.get("training_slice") or {}).get("gap") or {}
    ci = gap.get("ratio_ci95") or (0, 2)
    verdict = against_one(gap.get("ratio_ci95"), gap.get("ratio"))
    if verdict == "not distinguishable":
        return "no effect on the lab"
    return "small on the lab" if 0.9 < ci[0] and ci[1] < 1.1 else f"{'lower' if verdict == 'below' else 'higher'} on the lab"


def slice_effect(ev: dict) -> str:
    """What the lab's test of the training slice found, in a clause (the index's causes table), in
    words: its ratio is on the details page (cold reads 124-131 read a lab effect size on the index as
    noise, or as at odds with the header's "mechanisms, not effect sizes")."""
    if not ((ev.get("training_slice") or {}).get("gap") or {}):
        return "not measured in this run"
    word = slice_word(ev).removesuffix(" on the lab")
    return {"no effect": "no effect on the lab", "small": "a small effect on the lab"}.get(
        word, f"acceptance {word} without the deepest on the lab")


def training_slice_short(ev: dict) -> str:
    """The training slice's result in one sentence (the causes list; its status says small or not)."""
    sl = ev.get("training_slice") or {}
    gap = sl.get("gap") or {}
    if not gap.get("ratio"):
        return "The lab did not measure it in this run."
    n = (sl.get("trained_emb_low_mid") or {}).get("prompts")
    said = {"small on the lab": "; on the incident's model, unknown",
            "no effect on the lab": ": no measurable change"}.get(slice_word(ev), "")
    built = ", measured when it was built" if "manifest" in (sl.get("source") or "") else ""
    return (f"On the lab{built}{f' ({n} held-out prompts, training-time test)' if n else ''}, that slice reaches "
            f"{fmt(gap['ratio'], gap.get('ratio_ci95'))} times the accept length of low, middle and high "
            f"layers{said}.")


def training_slice_text(ev: dict) -> str:
    """What the lab measured of a draft trained on [embedding, low, mid] against one trained on
    [low, mid, high], both with TTT and each served as trained (notebook 03 records it)."""
    sl = ev.get("training_slice") or {}
    a, b = sl.get("trained_emb_low_mid"), sl.get("trained_low_mid_high")
    if not a or not b:
        return "The lab did not measure it in this run."
    gap = sl.get("gap") or {}
    verdict = against_one(gap.get("ratio_ci95"), gap.get("ratio"))
    said = {"below": "lower, beyond the intervals", "above": "higher, beyond the intervals",
            "not distinguishable": "not distinguishable"}.get(verdict, verdict)
    n = a.get("prompts")
    over = f" over {n} held-out chat prompts" if n else ""
    if "manifest" in (sl.get("source") or ""):
        over += " (its replay when it was built, its manifest; not re-measured in this run)"
    return (f"On the lab{over}, a draft trained that way, with TTT and served as trained, accepts "
            f"{fmt(a.get('accept_length'), a.get('accept_length_ci95'))} tokens per step against "
            f"{fmt(b.get('accept_length'), b.get('accept_length_ci95'))} for the same recipe on low, middle and high "
            f"layers (ratio {fmt(gap.get('ratio'), gap.get('ratio_ci95'))}): {said}. If it matters, the fix is a "
            f"retrain on the intended boundaries; no server setting changes it.")


# the diagnosis' causes (eagle3lab.acceptance.diagnosis.cause_rules.CAUSES) in words
CAUSE_WORDS = {"config_adjusted": "the server adjusted the configuration", "wiring": "a wiring mismatch",
               "vocab_mapping": "a broken vocabulary map", "multi_step": "a draft trained one step deep (no TTT)",
               "quantization": "a quantized target", "distribution_shift": "prompts unlike the training data",
               "context_length": "contexts longer than training", "sampling": "the sampling settings",
               "healthy": "no fault"}

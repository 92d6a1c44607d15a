"""The box at the top of the post-mortem: what is known (each fact with its quote), what the
write-up never states, and what to do next, in order, each step with its command.

Why a box: a reader acting the same day needs the facts, the gaps and the order of the next steps
before any evidence. Facts come from the incident record (quotes checked against the story by
tests/test_incident.py), the gaps from its `unstated` list (checked against the story too), the
commands from what eagle3lab and its standalone probe script (`eagle3_probe.py`) accept.
"""

from __future__ import annotations

from eagle3lab.paths import PROBE_SCRIPT
from eagle3lab.report.postmortem.tables import RATE_OLD_UNTIL
from eagle3lab.report import incident as incident_record

# The write-up's own words for the wiring (tests/test_incident.py checks they are in the story).
TRAINED_QUOTE = "cat([embed_output, layer3, layer31])"
WIRING_QUOTE = "taking the first 3 of 4 captured hidden states"
SERVED_QUOTE = "SGLang was passing cat([layer3, layer31, layer59])"
KNOWN_FIGURES = ("draft_tokens_run_first",)  # the override, in its own words (the figures are the record's)
PROBE = PROBE_SCRIPT.name
CHAINS = ("1/1/2", "2/1/3", "3/1/4", "5/1/6")  # the advice's configurations (postmortem.moe_cost)
PROMPTS = "prompts.jsonl"
NUM_PROMPTS = 64  # the box's probe line; intervals per position narrow enough to tell a collapse after position 1
PROBE_LINE = (f"python3 {PROBE} --url http://HOST:30000 --prompts {PROMPTS} --num-prompts {NUM_PROMPTS} "
              "--max-new-tokens 256")  # items 4 to 6, on the index and the runbook alike
INFO_LINE = "curl -s http://HOST:30000/get_server_info"  # every SGLang release read (docs/probe.md)
GRAPH_RESET = "sglang-cuda-graph-aux-ids-reset"  # the known defect step 1's relaunch tests


def _quote(text: str) -> str:
    return "“" + " ".join(text.split()) + "”"


def known_lines(rec) -> list[str]:
    """The timeline as reported, in four lines, with the write-up's words for what the draft was fed
    and what the first launch ran (the details page sets the lab's figures beside each; cold reads
    67-79 slowed on a six-row table whose ids and boundaries the index no longer needs)."""
    from eagle3lab.report.incident import config_label

    f = rec.figure
    label = lambda name: config_label(rec.config(name))  # noqa: E731
    bold = lambda fid: f"**{f(fid).text()}**"  # noqa: E731
    return [
        f"Trained on {f('train_samples').value:,} samples to {f('validation_accuracy').text()} validation accuracy, "
        f"on {_quote(TRAINED_QUOTE)}, {_quote(WIRING_QUOTE)}.",
        f"Launched at {label('first')}: {_quote(f('draft_tokens_run_first').quote)}; {bold('first_tps')}. "
        f"Relaunched at {label('steps15')}: {bold('steps15_tps')}.",
        f"A standalone test found the wiring off: {_quote(SERVED_QUOTE)}, by the write-up's reading of SGLang's code. "
        f"With the right inputs the draft scored {f('standalone_accuracy').text()}.",
        f"SGLang patched to capture the embedding, relaunched at {label('after_fix')}: {bold('after_fix_tps')}, accept "
        f"length {bold('after_fix_accept_length')}, accept rate {f('after_fix_accept_rate').text()}.",
    ]


def unknown_line(rec) -> str:
    return "; ".join(u["what"] for u in rec.unstated) + "."


def accuracy_flag(rec) -> str:
    """Item 5's probe flag: the draft's validation accuracy, so the script names the row of the table of
    profiles its rates fit (cold reads 111, 112, 116, 117, 119 asked for the row, not the table)."""
    return f"--draft-accuracy {rec.figure('validation_accuracy').mid:g}"


def rate_clue(rec) -> tuple[float, float]:
    """What SGLang 0.5.11 and later would print as the accept rate for the logged accept lengths:
    (L − 1) / steps, against the logged 0.29–0.30 (L / draft tokens, 0.5.10.post1 and earlier)."""
    length, k = rec.figure("after_fix_accept_length"), rec.config("after_fix")["num_steps"]
    return (length.low - 1) / k, (length.high - 1) / k


REPEATS = 3  # runs per configuration in item 6's keep rule: kept only if its slowest beats B's fastest
STEP = {"version": 1, "training": 2, "ids": 3, "baseline": 4, "per_position": 5, "chains": 6}  # do_next_lines' order
IDS_KEY = "eagle_config.eagle_aux_hidden_state_layer_ids"  # where SGLang reads the ids (eagle3lab.doctor.formats)
PATCH_LINE = "eagle3lab patch sglang --apply --sglang-dir SGLANG_DIR"  # eagle3lab.commands.patch
WIRING_LINE = ("eagle3lab wiring --draft DRAFT_DIR --target TARGET_DIR --train B,B,B "
               "--serve sglang==VERSION")  # eagle3lab.commands.wiring: its "fix:" line names the ids


def launch_line(chain: str = "5/1/6") -> str:
    """SGLang's launch flags for `chain` (steps/topk/draft tokens), as eagle3lab launches SGLang
    (engines.argv.sglang_style), without host and port: the reader adds the flags they serve with."""
    from eagle3lab.engines.argv import sglang_style
    from eagle3lab.spec import SpecConfig

    steps, topk, tokens = (int(x) for x in chain.split("/"))
    argv = sglang_style(["python3", "-m", "sglang.launch_server"], "sglang", "TARGET_DIR", "DRAFT_DIR",
                        spec=SpecConfig(num_steps=steps, topk=topk, num_draft_tokens=tokens))
    drop = {i for i, a in enumerate(argv) if a in ("--host", "--port")}
    return " ".join(a for i, a in enumerate(argv) if i not in drop and i - 1 not in drop)


def items(first: str, last: str | None = None, joined: str = " and ") -> str:
    """The box's items by name, as the page refers to them: "item 4", "items 3 and 4", "items 3 to 5"
    ("item", not "step": a step on this page is a decode or verify pass)."""
    if last is None:
        return f"item {STEP[first]}"
    return f"items {STEP[first]}{joined}{STEP[last]}"


def rows_before_graph_fix(ev: dict | None) -> list[dict]:
    """Notebook 03's table of releases (`records.fix_ids` rows) up to the release whose CUDA graphs
    first feed the config's ids; a grouped label (`0.5.4.post2 – 0.5.10`) counts by its last release."""
    from eagle3lab.known_defects.row import parse_version

    fixed = parse_version(graph_reset_fixed_in())
    return [r for r in ((ev or {}).get("fix_ids") or {}).get("rows") or []
            if parse_version(r["versions"].split("–")[-1].strip()) < fixed]


def covering_row(rows: list[dict], versions: str) -> dict | None:
    """The row of `rows` whose release range holds the last release of `versions`."""
    from eagle3lab.known_defects.row import parse_version

    last = parse_version(versions.split("–")[-1].strip())
    for r in rows:
        ends = [parse_version(v.strip()) for v in r["versions"].split("–")]
        if ends[0] <= last <= ends[-1]:
            return r
    return None


def release_rows(ev: dict | None, rec) -> list[dict]:
    """Notebook 03's two tables as one, a row per release range and CUDA-graph setting: what the
    incident's config ids and its patched ids fed, and the ids that feed the trained boundaries.
    Where `--disable-cuda-graph` changes nothing, one row says "either"."""
    from eagle3lab.experiments.fixids import IDS_SEP

    fix = (ev or {}).get("fix_ids") or {}
    on, off = fix.get("rows") or [], fix.get("rows_graphs_off") or []
    m = rec.model
    cols = ("SGLang", "CUDA graphs", f"boundaries fed by the original ids {m['config_ids_before_fix']}",
            f"by ids {m['config_ids_after_fix']}, SGLang patched",
            f"ids that feed boundaries {m['trained_boundaries']}")

    def row(r, graphs, versions=None):
        ids = (r["ids"].split(IDS_SEP)[0] if r.get("ids") and r["ids"] != "none"
               else "none work: `--disable-cuda-graph` or upgrade" if graphs.startswith("on") and off else "none")
        return dict(zip(cols, (versions or r["versions"], graphs, r["config_feeds"], r["fix_feeds"], ids)))

    out = []
    for r in on:
        twin = covering_row(off, r["versions"]) if off else None
        same = twin is not None and (twin["config_feeds"], twin["fix_feeds"]) == (r["config_feeds"], r["fix_feeds"])
        if twin is None or same:
            out.append(row(r, "either" if same else "on"))
        else:
            out += [row(r, "on (default)"), row(twin, "off", r["versions"])]
    return out


def recommended_row(ev: dict | None) -> dict | None:
    """The newest releases whose ids feed the trained boundaries with no patch and CUDA graphs on
    (notebook 03's rows), the fix that needs neither a source patch nor `--disable-cuda-graph`."""
    from eagle3lab.experiments.fixids import NO_PATCH

    before = rows_before_graph_fix(ev)
    rows = [r for r in ((ev or {}).get("fix_ids") or {}).get("rows") or []
            if NO_PATCH in r.get("ids", "") and r not in before]
    return rows[-1] if rows else None


def upgrade_words(ev: dict | None) -> str:
    """The simplest wiring fix in words (`recommended_row`): upgrade to the releases whose ids feed the
    trained boundaries with no patch and CUDA graphs on (the table's rows where the run recorded none)."""
    best = recommended_row(ev)
    if not best:
        return "the ids of your release's row below"
    return f"simplest, upgrade to SGLang {best['versions']} and set {no_patch_ids(best)}, no patch, CUDA graphs on"


def no_ids_words(ev: dict | None, rec) -> str:
    """The releases and CUDA-graph setting where no ids feed the trained boundaries, said beside the
    simplest fix (cold reads 46-48: the one fact that decides whether the wiring fix did anything sat
    in the folded table)."""
    fix = (ev or {}).get("fix_ids") or {}
    off = fix.get("rows_graphs_off") or []
    none = [(r["versions"], covering_row(off, r["versions"])) for r in fix.get("rows") or [] if r.get("ids") == "none"]
    if not none or not all(twin and twin.get("ids", "none") != "none" for _, twin in none):
        return ""  # graphs off must serve those releases for the sentence's second way out to hold
    how = ("with the embedding-capture patch" if all("with the patch" in twin["ids"] for _, twin in none)
           else "and its graphs-off ids in the table")
    return (f" On {', '.join(old_releases(v, rec) for v, _ in none)} with CUDA graphs on, no ids work: upgrade, or "
            f"`--disable-cuda-graph` {how}.")


def old_releases(versions: str, rec) -> str:
    """`versions` as "0.5.10.post1 or earlier" where the range runs from the first release that serves
    the draft to the one the logged accept rate allows (its post release has the same files)."""
    ends = [v.strip() for v in versions.split("–")]
    if ends[0] == first_serving_release(rec) and ends[-1] == POST_SAME[1] and RATE_OLD_UNTIL == POST_SAME[0]:
        return f"{RATE_OLD_UNTIL} or earlier"
    return versions


def no_patch_ids(row: dict) -> str:
    """The ids of a release's row that need no patch (the first alternative that says so)."""
    from eagle3lab.experiments.fixids import IDS_SEP, NO_PATCH

    return next(i for i in row["ids"].split(IDS_SEP) if NO_PATCH in i).replace(NO_PATCH, "")


def first_serving_release(rec) -> str | None:
    """The first SGLang release whose model file for the incident's architecture has the EAGLE-3
    capture setter (eagle3lab.engines.sglang.sglang_capture, read in the wheels)."""
    from eagle3lab.engines.sglang.sglang_capture import SGLANG_FILES, SGLANG_SETTER_SINCE

    return SGLANG_SETTER_SINCE.get(SGLANG_FILES.get(rec.model["architecture"], ""))


NB03 = "03_embedding_fix"  # the notebook with the patch and the tables of releases


def _nb03(text: str, present=None) -> str:
    """A link to notebook 03's page as `text`, or the bare text where this report has no such page."""
    return text if present is not None and NB03 not in present else f"[{text}]({NB03}.html)"


def do_next_lines(rec, ev: dict | None = None, present=None) -> list[str]:
    """The ordered next steps (`STEP`), each with what it settles and its command."""
    lo, hi = rate_clue(rec)
    rate = rec.figure("after_fix_accept_rate")
    base = rec.figure("baseline_tps").text().split()[0]
    table = bool(release_rows(ev, rec))
    return [
        f"**Read `version` and `disable_cuda_graph`**: `{INFO_LINE}`. The incident's logged accept rate "
        f"{rate.text()} points to {RATE_OLD_UNTIL} or earlier: later releases define it differently and would print "
        f"{lo:.2f}–{hi:.2f}.",
        "**Check the draft's training script**: its boundaries (this page reads the write-up's “layer3” as the input "
        "of layer 3, as its reading of SGLang's `val + 1` implies; if it meant the output, the layer ids below move "
        "up by one, the embedding's does not), its TTT (in SpecForge, `ttt_length` 1 means none) "
        "and the checkpoint its states came from; without TTT, retrain rather than patch the server. Its config "
        "against the target's:<br>"
        "`eagle3lab doctor --draft DRAFT_DIR --target TARGET_DIR`",
        (f"**Set the ids** in the draft's `config.json` (`{IDS_KEY}`): {upgrade_words(ev)}."
         + no_ids_words(ev, rec) + " Other releases: the table below." if table
         else f"**Set the ids** {_nb03('notebook 03', present)} lists for your release in the "
         f"draft's `config.json` (`{IDS_KEY}`). " + patch_words(present)),
        f"**Measure B**, your tok/s without speculation (the incident's {base} came from an unknown benchmark): "
        f"relaunch without speculative flags, CUDA graphs as you will serve, and run<br>`{PROBE_LINE}`",
        f"**Measure acceptance per draft position** (SGLang {histogram_from()} or later; before it, the script prints "
        f"the accept length only): relaunch at {CHAINS[-1]} "
        f"with item {STEP['ids']}'s ids and your other flags<br>`{launch_line(CHAINS[-1])}`"
        f"<br>then run<br>`{PROBE_LINE} --baseline-tps B {accuracy_flag(rec)}`",
        f"**Measure chain lengths** {', '.join(CHAINS[:-2])} and {CHAINS[-2]} the same way, with your draft and with a "
        "public one (" + " or ".join(f"`{d}`" for d in public_drafts()) + f"); run each, and B, {REPEATS} times; keep "
        "the fastest only if its slowest run beats B's fastest. Then check it at your load and sampling: the script "
        "sends one request at a time, greedily (temperature 0), and with speculation on, SGLang lowers its limit on "
        f"running requests to {speculative_cap()} unless `--max-running-requests` is set.",
    ]


def patch_words(present=None) -> str:
    """What "with the patch" means in the table of releases (the box's fold says it beside the rows
    that need it)."""
    return (f"\"With the patch\": SGLang's embedding capture patched, as the write-up did or with `{PATCH_LINE}` "
            f"({_nb03('its diff', present)}).")


def speculative_cap() -> int:
    """The requests in flight SGLang allows with speculation when `--max-running-requests` is unset:
    what its rules (checked against 0.5.23's own resolver, tests/test_config_sglang.py) make of the
    box's 5/1/6 launch line (cold reads 37, 40 found it only in notebook 01's warnings)."""
    from eagle3lab.engines.effective import SpecConfig

    return SpecConfig.from_cli(launch_line(CHAINS[-1]).split()[3:]).resolve().max_running_requests


def profile_case(rates, acc: float) -> str:
    """Which row of `profile_table` a per-position profile falls in, as the diagnosis' cause it names
    (`acceptance.diagnosis.cause_rules`: its stages in order, the first that fits;
    tests/test_postmortem.py checks it against `diagnose` on a grid of profiles)."""
    from eagle3lab.acceptance.diagnosis.cause_rules import THRESHOLDS as T
    from eagle3lab.acceptance.diagnosis.diagnose import acceptance_signature

    sig = acceptance_signature(rates, acc)
    if sig["keep1"] < T["dead"] or (sig["tail_drop"] < T["collapse"] and sig["keep1"] < T["first_ok"]):
        return "wiring"
    if sig["tail_drop"] < T["sag"]:
        return "multi_step"
    return "healthy" if sig["keep1"] >= T["healthy"] else "quantization"


def profile_table(rec) -> str:
    """What item 5's per-position profile calls for: the diagnosis' thresholds
    (`acceptance.diagnosis.cause_rules.THRESHOLDS`, set on eagle3lab's lab) as multiples of the
    draft's training accuracy, the incident's figures beside them, a row per verdict in the order the
    diagnosis tries them (cold reads 34-36: a level, middling profile, which the incident's accept
    lengths imply, had no row; thresholds a reader can scale to their own draft)."""
    from eagle3lab.acceptance.diagnosis.cause_rules import THRESHOLDS as T
    from eagle3lab.acceptance.diagnosis.diagnose import diagnose
    from eagle3lab.cost.costchecks import incident_profiles
    from eagle3lab.report.postmortem.tables import CAUSE_WORDS, markdown_table

    acc = rec.figure("validation_accuracy").mid
    steps = rec.config("after_fix")["num_steps"]
    lo, hi = incident_profiles()["incident"][0].rate_range
    level = [f.cause for f in diagnose(per_position=[lo] * steps, standalone_acc=acc)][:3]
    at = lambda k: f"{T[k] * acc:.2f} ({T[k]:g} ×)"  # noqa: E731
    later = f"positions 2–{steps} pooled"
    rows = [
        (f"either position 1 under {at('dead')}, or position 1 under {at('first_ok')} with {later} under "
         f"{100 * T['collapse']:.0f} % of position 1", "wrong inputs", f"recheck item {STEP['ids']}'s ids"),
        (f"{later} under {100 * T['sag']:.0f} % of position 1", "no TTT", f"retrain (item {STEP['training']})"),
        (f"position 1 at {at('healthy')} or more", "a healthy draft", f"item {STEP['chains']} decides"),
        (f"anything else, e.g. {lo:.2f}–{hi:.2f} at every position, as the incident's accept lengths allow",
         ", then ".join(CAUSE_WORDS[c] for c in level).replace(CAUSE_WORDS["wiring"], f"the ids (item {STEP['ids']})"),
         "check them in that order"),
    ]
    head = ("The first row that fits, by eagle3lab's diagnosis thresholds (set on its lab) as multiples of the "
            f"draft's validation accuracy, {100 * acc:.1f} % here (use your draft's own); `{PROBE}` prints positions "
            f"2–{steps} pooled, their drafts accepted over reached, and, given `--draft-accuracy`, the row that fits:")
    notes = quantized_words(rec)
    return (head + "\n\n" + markdown_table([dict(zip(("profile at 5/1/6", "reads as", "do"), r)) for r in rows])
            + (f"\n\n{notes}" if notes else ""))


def misread_words(ev: dict | None) -> str:
    """The rule's known miss, beside the table (cold reads 44-53 found it only on notebook 04): on the
    lab the diagnosis read a draft trained with TTT, weak at every depth, as one without."""
    if not seed_misread(ev):
        return ""
    return (f"Before a retrain, confirm item {STEP['training']}: on the lab, this rule read a draft trained with TTT, "
            "weak at every position, as one without.")


def seed_misread(ev: dict | None) -> bool:
    """Whether this run's diagnosis ranked no TTT first for the lab's seed-like draft, which was
    trained with TTT (the page's method check and the profile fold say so)."""
    from eagle3lab.report import labwords

    top = ((((ev or {}).get("acceptance") or {}).get("diagnosis")) or [None])[0]
    return top == "multi_step" and labwords.seed_ttt()


def quantized_words(rec=None) -> str:
    """What "a quantized target" means for this incident: the served checkpoint's routed-expert bits,
    read from its `quantization_config` (data/cost/targets, eagle3lab.cost.modelshape), against the
    states the draft was trained on (cold reads 41-44 asked how to check the write-up's INT4 guess)."""
    from eagle3lab.cost import costchecks

    bits = costchecks.kimi_model().target.bits["routed_experts"]
    if bits >= 16:
        return ""
    target = (rec or incident_record.load()).model["target"]
    return (f"A quantized target: {target}'s checkpoint stores its routed experts at {bits:g} bits per weight, "
            f"scales included (its `quantization_config`); if the draft's training states came from a bf16 copy, "
            f"the served target feeds it other values (item {STEP['training']}).")


def graph_reset_fixed_in() -> str:
    """The SGLang release whose CUDA graphs first feed the config's aux layer ids (the registry's
    `sglang-cuda-graph-aux-ids-reset`, bounds read in the wheels)."""
    from eagle3lab.known_defects import by_id

    return by_id(GRAPH_RESET).ranges[-1][1]


def public_drafts() -> list[str]:
    """The public Kimi-K2.5 drafts the advice quotes (data/cost/public-figures.json)."""
    from eagle3lab.cost.costchecks import public_kimi_drafts

    return public_kimi_drafts()


def histogram_from() -> str:
    """The first SGLang release that returns a per-request acceptance histogram (read in the wheels)."""
    from eagle3lab.engines.sglang.meta_info import HISTOGRAM_RELEASES

    return next(rel for rel, fields in HISTOGRAM_RELEASES if fields).split(" - ")[0]


RUNBOOK = "runbook"  # the third page (page.runbook_markdown): Do next item by item, its tables open
TITLES = {"version": "Confirm the SGLang version and CUDA graphs", "training": "Check how the draft was trained",
          "ids": "Set the ids", "baseline": "Measure B", "per_position": "Measure acceptance per draft position",
          "chains": "Measure chain lengths"}  # each item's name, on the box and as the runbook's heading


def item_heading(name: str) -> str:
    """The runbook's heading for the box's item `name` (its anchor is the heading, spaces as '-')."""
    return f"Item {STEP[name]}: {TITLES[name][0].lower()}{TITLES[name][1:]}"


def item_anchor(name: str) -> str:
    """The address of the item's section of the runbook (its heading, spaces as '-')."""
    return f"{RUNBOOK}.html#{item_heading(name).replace(' ', '-')}"


def item_link(name: str) -> str:
    """The item's name in bold, linking to its section of the runbook."""
    return f"[**{TITLES[name]}**]({item_anchor(name)})"


def do_next_brief(rec, ev: dict | None = None, present=None) -> list[str]:
    """The box's items on the index, a line each with its command (the runbook has each in full, its
    look-up tables open: cold reads 56-79 put the index at 9-18 minutes with more on it)."""
    lo, hi = rate_clue(rec)
    best = recommended_row(ev)  # None where the run recorded no table of releases
    ids = (f": `{IDS_KEY}` in the draft's `config.json`, from the table above." if best
           else f" {_nb03('notebook 03', present)} lists for your release in the draft's `config.json`.")
    return [
        f"{item_link('version')}: `{INFO_LINE}`. The logged accept rate {rec.figure('after_fix_accept_rate').text()} "
        f"suggests {RATE_OLD_UNTIL} or earlier (later releases would print {lo:.2f}–{hi:.2f}).",
        f"{item_link('training')}: its layers, inputs or outputs; its TTT (SpecForge's `ttt_length`; 1 means "
        "none); the checkpoint that produced its states.",
        item_link("ids") + ids,
        f"{item_link('baseline')}, tok/s without speculation: `{PROBE_LINE}`",
        f"{item_link('per_position')} (SGLang {histogram_from()} or later), at {CHAINS[-1]} with "
        f"{items('ids')}'s ids: "
        f"`{PROBE_LINE} --baseline-tps B {accuracy_flag(rec)}`",
        f"{item_link('chains')} {', '.join(CHAINS[:-2])} and {CHAINS[-2]} the same way, with your draft and a public "
        f"one (`{public_drafts()[0]}`), {REPEATS} runs each, B too; keep one only if its slowest run beats B's fastest.",
    ]


def box(rec=None, ev: dict | None = None, present=None) -> str:
    """The box as Markdown: its own section, right after the summary (not a blockquote: the renderer
    draws no table inside one); each item in brief, the runbook linked for each in full."""
    rec = rec or incident_record.load()
    parts = ["**Known**, as reported:", ""]
    parts += [f"- {line}" for line in known_lines(rec)]
    parts += ["", f"**Never stated**: {unknown_line(rec)}", "", "**Do next, in order**"]
    parts += [f"{i}. {line}" for i, line in enumerate(do_next_brief(rec, ev, present), 1)]
    parts += ["", needs_words(package=False)]
    return "\n".join(parts)


def needs_words(prompts: bool = True, package: bool = True) -> str:
    """What the box's commands need: the probe script alone, a prompts file (`prompts`: said here; the
    runbook gives its format instead), and for the `eagle3lab` commands this project's package
    (`package`: the runbook, whose items use them; cold reads 55-64: "the page never says how to
    install it")."""
    return (f"`{PROBE}`, next to this page, needs only Python 3" + (
        f"; `{PROMPTS}`: {NUM_PROMPTS} or more prompts like your traffic, one per line, in your draft's chat format"
        if prompts else "") + "." + (" The `eagle3lab` commands need this project's package, not on PyPI: "
                                    "`pip install -e .` in a checkout of its repository." if package else ""))


def runbook_sections(rec=None, ev: dict | None = None, present=None) -> list[tuple[str, str]]:
    """The runbook's sections, (heading, Markdown): each item in full, the tables to act on open
    after the item they serve (cold reads 35-38 and 56-65 asked for them open)."""
    rec = rec or incident_record.load()
    full = do_next_lines(rec, ev, present)
    after = {STEP["ids"]: release_table(ev, rec, present, brief=True),
             STEP["per_position"]: "\n\n".join(x for x in (histogram_sentence(), profile_table(rec),
                                                             misread_words(ev)) if x)}
    return [(item_heading(name), "\n\n".join(x for x in (full[n - 1], after.get(n)) if x))
            for name, n in STEP.items()]


# 0.5.10.post1, the newest release the logged accept rate allows, has 0.5.10's files byte for byte where
# the draft's features are decided (tests/test_patching.py reads both wheels; docs/sources.md section 8):
# the table's rows ending at 0.5.10 hold for it. The table reads minor releases only.
POST_SAME = ("0.5.10.post1", "0.5.10")
WIRING_FILES = ("srt/models/deepseek_v2.py", "srt/model_executor/model_runner.py",
                "srt/model_executor/cuda_graph_runner.py")
RELEASES_ANCHOR = "What-each-SGLang-release-fed-the-draft"  # the details page's section (page.details_markdown)


def release_table(ev: dict | None, rec, present=None, brief: bool = False) -> str:
    """Notebook 03's tables of releases: what the incident's ids fed and the ids to set, per release
    and CUDA-graph setting (empty where the run recorded none); `brief` (the box): the ids to set
    only, what each release fed being evidence (the details page)."""
    rows = release_rows(ev, rec)
    if not rows:
        return ""
    from eagle3lab.report.postmortem.tables import markdown_table

    first = first_serving_release(rec)
    why_none = "" if brief else " (its model file has no EAGLE-3 capture)"
    notes = (f"; none before {first} serves this draft{why_none}" if first else "") + (
        f"; {POST_SAME[0]} behaves as {POST_SAME[1]}, the same files"
        if any(r["SGLang"].endswith(f"– {POST_SAME[1]}") for r in rows) else "")
    if not brief:
        return f"By SGLang release, from each wheel's code ({_nb03('03', present)}){notes}:\n\n" + markdown_table(rows)
    keep = _brief_columns(rows)
    return (f"The ids for a draft trained on {rec.model['trained_boundaries']}, as the incident's, read in each "
            f"release's code ([what each fed](details.html#{RELEASES_ANCHOR})){notes}. {patch_words(present)} "
            "For other boundaries, "
            f"`{WIRING_LINE}` prints them (`--serve vllm==VERSION` for vLLM). {vllm_words(rec)}:\n\n"
            + markdown_table([{c: r[c] for c in keep} for r in rows]))


def ids_brief(ev: dict | None, rec) -> str:
    """The index's table under the bottom line: what to set for the wiring, by release and CUDA-graph
    setting (cold reads 88, 90-92 asked for it there: which release runs decides the first action),
    0.5.10.post1 named in the row it shares with 0.5.10 (`POST_SAME`), and the layers read as inputs
    (cold reads 123-134: the write-up also says "output after layer 3"). Where item 5's histogram is
    missing, item 5 says (read 133 found it here, away from the step it blocks). Empty where the run
    recorded no table."""
    rows = release_rows(ev, rec)
    if not rows:
        return ""
    from eagle3lab.report.postmortem.tables import and_list, markdown_table

    first, graphs, ids = _brief_columns(rows)
    post = lambda v: v[:-len(POST_SAME[1])] + POST_SAME[0] if v.endswith(f"– {POST_SAME[1]}") else v  # noqa: E731
    table = [{"SGLang": post(r[first]), "CUDA graphs": r[graphs], "ids to set": r[ids]} for r in rows]
    layers = and_list([f"“layer{b}”" for b in rec.model["trained_boundaries"] if b != 0])  # the write-up's words
    return (f"Ids for this draft, read in code, not run. This table reads {layers} as inputs; if training took "
            "outputs, as the write-up also says, add 1 to each id except the embedding's "
            f"({items('training')}). Other drafts: [the runbook]({item_anchor('ids')}).\n\n"
            + markdown_table(table))


def _brief_columns(rows: list[dict]) -> list[str]:
    """`release_rows`' columns the brief tables keep: the release, the CUDA-graph setting, the ids to set."""
    cols = list(rows[0])
    return [cols[0], cols[1], cols[-1]]


def vllm_words(rec) -> str:
    """Whether the newest vLLM read feeds the draft's trained boundaries, and with which ids
    (eagle3lab.engines.vllm.vllm_capture, read in vLLM's source: docs/sources.md section 2; cold reads
    37, 39 and 40 asked for vLLM's ids)."""
    from eagle3lab import engines
    from eagle3lab.wiring.conventions import CaptureError, ids_for, serve_boundaries

    latest = engines.get("vllm").capture_versions[-1]
    want, arch, n = rec.model["trained_boundaries"], rec.model["architecture"], rec.model["target_layers"]
    try:
        return f"vLLM, read up to {latest}: ids {ids_for(want, 'vllm', latest, arch, n)}, no patch"
    except CaptureError:
        pass
    from eagle3lab.engines.vllm.vllm_capture import model_path

    try:  # vLLM reads ids as boundaries: why the boundaries themselves fail says why no ids serve them
        serve_boundaries("vllm", latest, arch, list(want), n)
        why = "no ids feed them"
    except CaptureError as exc:
        why = exc.short
    return f"vLLM, read up to {latest}, cannot serve this draft ({why} in `{model_path(arch)}`, its file for {arch})"


def histogram_sentence() -> str:
    """Which SGLang releases return which per-request histogram field (read in the wheels)."""
    from eagle3lab.engines.sglang.meta_info import HISTOGRAM_RELEASES

    said = []
    for releases, fields in HISTOGRAM_RELEASES:
        if fields:
            said.append(f"{releases.replace(' - ', '–')} " + " and ".join(f"`{f}`" for f in fields))
    first = HISTOGRAM_RELEASES[0][0].replace("<= ", "")
    return (f"SGLang returns each request's acceptance histogram in `meta_info` as: {'; '.join(said)}; "
            f"up to {first} none (the script says so and reads the accept length only).")

# %% [markdown]
# # 04 · Where acceptance is lost
#
# After the fix the incident's server logged a low accept length with 6 draft tokens, while its
# training reported a high first-step accuracy (its figures are set beside the lab's below). The
# logs say *how much* is accepted; to see *where* the chain breaks we need acceptance per draft
# position, and to see what it costs, the arithmetic that links per-token acceptance to accept
# length and tokens/s.
#
# This notebook serves the lab's seed-like draft after the fix, reads the server log back, computes
# per-position served acceptance, compares it with the draft's standalone acc@k (a different
# measure, see below), lets you explore accept length versus depth interactively, and checks the
# diagnosis on a draft whose fault is known.

# %% tags=["parameters"]
# Parameters: change these to point the notebook at your own deployment.
LAB = "smollm2"          # lab: "smollm2" (SmolLM2-135M-Instruct, drafts trained here) or a toy lab: "ci", "default"
LOG_FILE = None          # a server log (SGLang, vLLM, llama.cpp) to read; None = run the lab server
SERVER_URL = None        # a running SGLang server to benchmark and read back; None = the lab server
BACKEND = "lab"          # "lab", or "vllm": serve on vLLM (its CPU build here) and read its /metrics
DRAFT = "seed"           # lab draft to serve
FAULTS = ["embed-patch"] # lab faults: the seed-like draft served after the embedding fix
                         # (on vLLM: the ids that feed its training boundaries)
STEPS, TOPK, DRAFT_TOKENS = 5, 1, 6
NUM_PROMPTS = None       # prompts to decode; None = the preset's budget
MAX_NEW_TOKENS = None    # new tokens per prompt; None = the preset's budget

# %%
%matplotlib inline
from IPython.display import display
from eagle3lab import experiments
from eagle3lab.acceptance import diagnosis
from eagle3lab.report import glossary
from eagle3lab.viz import plots
from eagle3lab.report import postmortem
from eagle3lab.acceptance import predict
from eagle3lab.report import prose
from eagle3lab.report.postmortem import records
from eagle3lab.spec import SpecConfig
from eagle3lab.viz.style import apply_style

apply_style()
budget = experiments.budget(LAB, num_prompts=NUM_PROMPTS, max_new_tokens=MAX_NEW_TOKENS)
served_rates, observed, standalone = None, None, None

# %% [markdown]
# ## The log, read back
#
# `eagle3lab.sources.logfile.read_log` turns the server's `Decode batch` lines into a table; with no log
# given, the lab server is started with the seed's fixed configuration and a benchmark is run
# against it, exactly as one would against SGLang. The prompts are the same as in notebooks 01
# and 03.

# %%
run = experiments.serve_and_log(LOG_FILE, server_url=SERVER_URL, lab=LAB, draft=DRAFT, faults=FAULTS,
                                spec=SpecConfig(num_steps=STEPS, topk=TOPK, num_draft_tokens=DRAFT_TOKENS),
                                backend=BACKEND, **budget)
log = run.log
measured = log[log["accept_len"].notna()]  # SGLang decode lines, vLLM / llama.cpp metric lines
measured[["line", "engine", "kind", "time", "accept_len", "accept_rate_raw", "gen_throughput"]].tail()

# %%
glossary.define("accept_rate_raw")

# %%
plots.log_timeline(log, title="Accept length and throughput, as logged") if len(measured) else \
    prose.markdown("*No log line carries an accept length: the run was shorter than the server's "
                   "logging interval.*")

# %%
prose.headline(prose.log_sentence(log, run.effective_draft_tokens,
                                  **({"source": "the log file given"} if LOG_FILE else {})))

# %% [markdown]
# ## Per-position acceptance
#
# Each verify step accepts 0..k drafts. Position i's conditional rate is the share of steps that
# accept draft i among those that accepted drafts 1..i−1 (`n`: how many steps reached position i).
# On the lab these rates come from the lab engine decoding the same prompts as the server. SGLang's
# log lines carry only the mean accept length, but SGLang 0.5.23 returns with every request how
# many verify steps accepted exactly n drafts (`meta_info["spec_correct_drafts_histogram"]`): on a
# real SGLang server, `eagle3lab bench --url` turns that into this table. On vLLM they come from its `/metrics`
# counters, read just before and after the benchmark; vLLM counts *unconditionally* (steps that
# accepted at least i drafts), so its table is shown as it counts and converted to conditional
# rates (from the per-request histograms vLLM returns, so the intervals hold). Each rate's 95 %
# interval is the wider of the jackknife over prompts and the exact binomial (Clopper-Pearson) over
# the n steps at risk, so a rate from few steps gets a wide interval; a position no step reached
# has no rate ("no data"). Next to them, the draft's standalone acc@i: a teacher-forced accuracy,
# not a conditional rate, drawn on the same 0–1 scale for comparison.

# %%
glossary.define("steps at risk")

# %%
per_pos, standalone = run.per_position, run.standalone_acc
prose.markdown(prose.source_sentence(run.observation))
if run.per_position_unconditional is not None:
    display(run.per_position_unconditional.assign(counted="P(at least i accepted), as vLLM counts"))
if per_pos is None:
    prose.markdown("*This log carries no per-position acceptance (SGLang's log lines give only the mean "
                   "accept length; its per-request histogram, read by `eagle3lab bench --url`, and vLLM's "
                   "and llama.cpp's logs do).*")
else:
    per_pos = prose.with_exact_intervals(per_pos)
    # the explorer's chain: a position no step reached adds nothing to accept length
    served_rates = per_pos["rate"].fillna(0.0).tolist()
    display(prose.per_position_display(per_pos))
    display(plots.per_position_bars(per_pos, standalone=standalone,
                                    title="Served acceptance by draft position vs standalone accuracy"))

# %%
glossary.define("gap columns")

# %%
if per_pos is not None and standalone is not None:
    gap = predict.gap_table(standalone, per_pos)
    display(prose.mask_unreached(gap, per_pos["n"]) if "n" in per_pos else gap)
    display(plots.gap_plot(gap, n=per_pos["n"].tolist() if "n" in per_pos else None))
    prose.markdown(prose.gap_sentence(gap))

# %% [markdown]
# ## Accept length versus depth — interactive
#
# Put in an acceptance (an i.i.d. per-token rate, or each position's rate: they start at the served
# rates above), a depth and the step's costs (a draft step and a verify pass relative to a target
# step: they start at the lab's costs calibrated on this report's measurements). The measured point
# is drawn with its interval, and the explorer says whether the model's value there falls inside it.
# The first explorer needs a live kernel (JupyterLab); the second runs in the page itself.

# %%
from eagle3lab.viz import widgets

observed = run.observed
glossary.define("draft_over_target")
curve = widgets.lab_curve(run=run)
point = widgets.measured_point(run, draft=DRAFT, spec=(STEPS, TOPK, DRAFT_TOKENS))
explorer = widgets.AcceptanceExplorer(rates=served_rates, depth=STEPS, curve=curve, measured=point)
explorer

# %%
widgets.explorer_html(served_rates, depth=STEPS, curve=curve, measured=point)

# %% [markdown]
# The same curves, static:

# %%
plots.accept_vs_depth(observed, rates=served_rates, max_depth=max(8, STEPS),
                      title="Accept length vs draft depth: i.i.d. model, served rates, observed")

# %% [markdown]
# ## Diagnosis: a check of the method
#
# The diagnosis ranks causes from the served statistics and, when it has them, the draft's
# standalone acc@k. The lab's drafts are built with known properties (its manifest says how each was
# trained), so what the diagnosis says of them checks the method; it is not a finding about the incident. The method's
# blind score on a lab built after its rules froze follows the table.

# %%
glossary.define("multi_step")
findings = diagnosis.diagnose(run.observation, standalone_acc=standalone)
toy_rep, heldout_rep = experiments.toy_repetition(LAB), experiments.heldout_repetition(LAB)
records.acceptance(run, per_pos, findings, toy_repetition=toy_rep, heldout_repetition=heldout_rep)
prose.wrapped_table(diagnosis.findings_frame(findings))

# %%
prose.markdown(prose.diagnosis_sentence(findings, standalone=standalone is not None)
               + "\n\n" + postmortem.trust_markdown())

# %% [markdown]
# ## Beside the incident

# %%
prose.markdown(postmortem.beside_incident(steps=(6,)))

# %% [markdown]
# ## One generation, token by token
#
# Green: accepted drafts (darker = deeper in the chain); purple: the bonus token after a fully
# accepted chain; red: the target's token that replaced a rejected draft. On the real-model lab the
# prompt is a held-out chat request (its kind is named) and the text the model's answer; on the toy
# labs it is a passage of a held-out Python source file (codec tables skipped: they read as noise).

# %%
view = run.token_view_of(experiments.prompt_sources(LAB, budget["num_prompts"])) if run.tokens is not None else None
if view is None:
    prose.markdown("*Token provenance needs the lab engine (BACKEND=\"lab\"): "
                   "a server returns tokens, not how each was produced.*")
else:
    display(view)
    prose.markdown(prose.repetition_sentence(run.tokens, toy=toy_rep, heldout=heldout_rep))

# %% [markdown]
# ## How well trained are the lab's drafts?
#
# On the real-model lab: each draft's accept length at 5/1/6 against the response tokens it trained
# on (snapshots taken during training, replayed over the lab's held-out chat prompts when the lab
# was built). A draft still gaining with more tokens is limited by its training budget.

# %%
if experiments.is_real_lab(LAB):
    from eagle3lab.lab import load_lab

    curves = {n: load_lab(LAB).training_curve(n) for n in ("healthy", "no-ttt")}
    records.training_curve(curves, experiments.ACCEPT_GOAL)
    display(plots.training_curve_plot(curves, goal=experiments.ACCEPT_GOAL))
    prose.markdown(prose.training_curve_sentence(curves, experiments.ACCEPT_GOAL))
else:
    prose.markdown(f"*The {LAB} lab records no training curve (the real-model lab, `LAB = \"smollm2\"`, does).*")

# %% [markdown]
# ## On which prompts is acceptance lost?
#
# Every per-request source gives each request's acceptance histogram: SGLang from 0.5.9 in
# `meta_info` (the lab server returns it the same way), vLLM with `--per-request-spec-decode-metrics`,
# the lab engine its step records. Broken down by prompt length (within one category) and by
# category (at matched prompt lengths), with 95 % intervals over requests. On the lab, through the
# lab server: held-out code of two lengths (the long ones several times the drafts' training length)
# and the domain-shift fault's numbers; with `SERVER_URL`, the same prompts sent to your server.

# %%
glossary.define("domain-shift")

# %%
from eagle3lab.experiments import byprompt_lab

BY_PROMPT_LAB = LAB if SERVER_URL else experiments.sweep_lab(LAB)
if BY_PROMPT_LAB != LAB:
    display(experiments.by_kind_table(LAB))
    prose.markdown(prose.other_lab_sentence(BY_PROMPT_LAB, LAB, "the breakdown by prompt length and category below",
                                            "its 48 prompts at the real model's speed on this CPU do not fit the "
                                            "report's time; the table above is the real model's accept length by "
                                            "prompt kind, replayed over its 96 held-out chat prompts when the lab "
                                            "was built"))
if SERVER_URL or BACKEND == "lab":
    by_prompt, by_prompt_draft = byprompt_lab.run_by_prompt(BY_PROMPT_LAB, server_url=SERVER_URL)
    display(byprompt_lab.plot_by_prompt(by_prompt))
    prose.markdown(byprompt_lab.markdown(by_prompt, by_prompt_draft))
else:  # vLLM's CPU build here: `eagle3lab bench --url ... --prompts` gives the same breakdown from its server
    prose.markdown(f"*BACKEND is {BACKEND!r}: this breakdown runs on the lab server here; on your own server, "
                   "`eagle3lab bench --url URL --prompts prompts.jsonl` prints it (and the doctor with `--url` and "
                   "`--prompts` names a fall with length or a gap between categories).*")


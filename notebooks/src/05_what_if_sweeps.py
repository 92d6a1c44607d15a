# %% [markdown]
# # 05 · What if? Sweeps over the configuration and over each hypothesis
#
# The incident's write-up ended with open hypotheses for the gap between standalone accuracy and
# served acceptance (a quantized INT4 target, different numerical precision or residual handling,
# a bug only in batched inference, more wiring issues). The lab adds others a deployer meets (a
# draft trained without training-time test, a draft trained without the chat template (the
# real-model lab), prompts unlike the training data and longer contexts (the toy labs), a dropped
# vocabulary map) and cannot test some of the write-up's (batching, the target's own
# numerics at scale). On the lab each can be switched on alone,
# so we measure which ones are consistent with the incident's reported accept length at its fixed
# configuration, which are excluded, and which measurement on the real server would separate the
# consistent ones; then which configuration wins once the draft is sound.

# %%
from eagle3lab.report import glossary

glossary.define("d2t", "normed-last", "quant-int4")

# %% tags=["parameters"]
# Parameters: change these to point the notebook at your own deployment.
LAB = "smollm2"          # lab: "smollm2" (SmolLM2-135M-Instruct, drafts trained here) or a toy lab: "ci", "default"
SERVER_URLS = None       # running servers (one per GPU machine) to spread a sweep over; None = lab
BACKEND = "lab"          # "lab", or "vllm": the configuration sweep on vLLM servers (chains only)
DRAFT = "healthy"        # lab draft for the configuration sweep
SWEEP_LAB = None         # lab for the configuration sweep; None = LAB, or the toy "default" lab when LAB
                         # is the real model (8 configurations at ~12 tok/s do not fit the report's time)
CHAIN_STEPS = [1, 2, 3, 5, 7]        # chain depths (topk 1, draft tokens = steps + 1)
TREES = [(3, 2, 6), (5, 2, 8), (5, 4, 12)]  # (steps, topk, draft tokens) tree configurations
FAULTS = None            # lab faults to switch on one at a time; None = the lab's own (experiments.lab_faults)
SEED_SPEC = (5, 1, 6)    # the seed's configuration after its fix
NUM_PROMPTS = None       # prompts per point; None = the preset's budget
MAX_NEW_TOKENS = None    # new tokens per prompt; None = the preset's budget
SWEEP_FILE = None        # with SERVER_URLS: append points to this file and resume from it
LOAD_DRAFTS = ["healthy", "seed"]  # under load (vLLM): the lab drafts (seed: served with its fix)
LOAD_KS = [3, 6]                   # under load: draft tokens per step
LOAD_LEVELS = [1, 2, 4, 8]         # under load: requests in flight
LOAD_PROMPTS = 16                  # under load: prompts per window
LOAD_LIVE = False                  # on the lab backend: measure under load on vLLM in this run anyway

# %%
%matplotlib inline
from IPython.display import display
from eagle3lab import experiments
from eagle3lab.viz import plots
from eagle3lab.report import postmortem
from eagle3lab.report import prose
from eagle3lab.report.postmortem import records
from eagle3lab.viz.style import apply_style

apply_style()
budget = experiments.budget(LAB, num_prompts=NUM_PROMPTS, max_new_tokens=MAX_NEW_TOKENS)
FAULTS = FAULTS or experiments.lab_faults(LAB)
SWEEP_LAB = SWEEP_LAB or experiments.sweep_lab(LAB)
sweep_budget = experiments.preset_budget(SWEEP_LAB, num_prompts=NUM_PROMPTS, max_new_tokens=MAX_NEW_TOKENS)

# %% [markdown]
# ## Which hypothesis explains the gap?
#
# Every lab fault alone at the seed's configuration, next to the seed after its fix
# (`embed-patch`: the lab's seed-like draft, trained on [embedding, low, mid], now fed the
# boundaries it was trained on; on the toy labs it was also trained without training-time test) and the lab's healthy draft: accept length, per-position acceptance,
# and the speed-up over no speculation measured on the same prompts (faults are lab switches, so this
# part always runs on the lab). Each row decodes its prompts with and without speculation,
# interleaved; the line under the table says which rows decode other prompts. Accept length
# here is the engine's mean per verify step (outside a rendered report, notebooks 01 and 03 read
# SGLang's `meta_info` from the lab server instead, which also counts the first token, produced by
# prefill, so the same configuration reads slightly higher there).

# %%
hypotheses = experiments.fault_sweep(FAULTS, lab=LAB, spec=SEED_SPEC, **budget)
display(hypotheses.drop(columns=["per_position", "per_position_n", "per_position_ci95", "draft_over_target"], errors="ignore"))
prose.markdown(prose.other_prompts_sentence(FAULTS))

# %%
experiments.per_position_table(hypotheses)

# %%
plots.fault_plot(hypotheses)

# %% [markdown]
# ## Which hypotheses are consistent with the incident?

# %%
records.hypotheses(hypotheses)
prose.markdown(postmortem.hypotheses_markdown())

# %% [markdown]
# ## What wins once it is fixed: depth, topk and draft tokens
#
# The healthy draft over a grid of configurations; each point records the configuration SGLang's
# rules make effective next to the one asked for. On vLLM each chain runs on its own vLLM server,
# interleaved with a server without speculation (three at a time); vLLM's EAGLE-3 drafts a chain,
# so the trees are left out.

# %%
grid = experiments.config_grid(CHAIN_STEPS, TREES)
if BACKEND == "vllm":
    from eagle3lab.engines.vllm import experiments as experiments_vllm

    trees = experiments_vllm.chain_grid(grid)[1]
    prose.markdown(f"On {prose.where(BACKEND)[0]}: {len(grid) - len(trees)} chains measured, "
                   f"{len(trees)} trees left out ({', '.join('/'.join(map(str, t)) for t in trees) or 'none'}).")
if SWEEP_LAB != LAB:
    prose.markdown(prose.other_lab_sentence(SWEEP_LAB, LAB, "the configuration sweep and the cost model's check"))
sweep = experiments.config_sweep(grid, lab=SWEEP_LAB, urls=SERVER_URLS, draft=DRAFT, file=SWEEP_FILE,
                                 backend=BACKEND, **sweep_budget)
sweep.drop(columns=["per_position", "per_position_n", "per_position_ci95"], errors="ignore")

# %%
plots.speedup_vs_depth(sweep, title=f"Speed-up over no speculation {prose.where(BACKEND)[1]}: "
                                    "chains by depth" + (", and trees" if (sweep["topk"] > 1).any() else ""))

# %%
experiments.speedup_table(sweep)

# %% [markdown]
# ## How well the lab's cost model predicts these speed-ups
#
# The step's costs (a draft step, a verify pass growing with the tokens it verifies, a per-step
# overhead, prefill), calibrated on this report's measured timings in units of each configuration's
# own no-speculation step, predict each configuration's speed-up from its measured accept length;
# each configuration is predicted from the others' timings (leave one out), so its own never enter
# its prediction. A prediction inside the measured 95 % interval counts as right.

# %%
from eagle3lab.cost import costfit
from eagle3lab.serving import measurements

store = measurements.active()
if store is None:
    prose.markdown("*No report measurement store: run this notebook through `eagle3lab report` to see the "
                   "prediction error (`benchmarks/cost_model_error.py` measures it on its own).*")
else:
    errors = costfit.prediction_table(measurements.records_of(store, SWEEP_LAB))
    display(errors[["configuration", "accept_length", "predicted", "measured", "interval", "inside"]])
    display(plots.prediction_plot(errors))
    records.prediction(errors)
    prose.markdown(costfit.error_summary(errors))

# %%
prose.markdown(prose.winner_sentence(sweep, backend=BACKEND))

# %% [markdown]
# ## Under load: does it still pay with many requests in flight?
#
# Everything above is one request at a time. Deployers serve batches, and the field reports that
# this is where speculation stops paying. On vLLM one server per (draft, k) and one without
# speculation serve the same prompts at each concurrency, taking turns; the speed-up's interval
# decides the crossover, and two cost models calibrated at the lowest concurrency say which cost
# the measurement follows.

# %%
load = experiments.under_load(SWEEP_LAB if BACKEND == "lab" and not LOAD_LIVE else LAB, backend=BACKEND, drafts=LOAD_DRAFTS, ks=LOAD_KS, levels=LOAD_LEVELS,
                              num_prompts=LOAD_PROMPTS, live=LOAD_LIVE)
prose.markdown(prose.under_load_markdown(load))

# %%
for figure in experiments.load_figures(load):
    display(figure)

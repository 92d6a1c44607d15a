# %% [markdown]
# # 03 · The embedding-capture fix: what it feeds, what it buys, and why it is not enough
#
# Having found the wiring mismatch, the incident's investigator patched SGLang's model file so that an
# id of `-1` in `eagle_aux_hidden_state_layer_ids` captures the embedding output (boundary 0),
# rewrote the draft's ids from `[2, 30, 58]` to `[-1, 2, 30]`, restarted with 5 steps and 6 draft
# tokens — and measured roughly the same tokens per second as before. Two things decide what that
# fix was worth: whether the new ids really feed the boundaries training used (that depends on the
# SGLang version), and how good the draft is once they do (one open hypothesis: it was trained
# without TTT; notebook 05 tests it with the others).
#
# Here: **the patch** (eagle3lab's reusable version of it, shown as a diff against a real SGLang
# package), **what it changes** in the boundaries SGLang feeds, and **the lab served with embedding
# capture**, measured against the unpatched seed and against no speculation.

# %% tags=["parameters"]
# Parameters: change these to point the notebook at your own deployment.
LAB = "smollm2"          # lab: "smollm2" (SmolLM2-135M-Instruct, drafts trained here) or a toy lab: "ci", "default"
SERVER_URL = None        # a running (patched) SGLang server to measure as is; None = the lab server
SGLANG_DIR = None        # an `sglang` package directory to diff against; None = the installed one
BACKEND = "lab"          # "lab", or "vllm": measure the fix on vLLM (there it is other ids, not a patch)
STEPS, TOPK, DRAFT_TOKENS = 5, 1, 6   # the incident's configuration after the fix
NUM_PROMPTS = None       # prompts per measurement; None = the preset's budget
MAX_NEW_TOKENS = None    # new tokens per prompt; None = the preset's budget

# %%
%matplotlib inline
from IPython.display import display
from eagle3lab import experiments
from eagle3lab.viz import plots
from eagle3lab.report import postmortem
from eagle3lab.report import prose
from eagle3lab.report.postmortem import records
from eagle3lab.spec import SpecConfig
from eagle3lab.viz.style import apply_style

apply_style()
budget = experiments.budget(LAB, num_prompts=NUM_PROMPTS, max_new_tokens=MAX_NEW_TOKENS)

# %% [markdown]
# ## The patch
#
# `eagle3lab.wiring.patching` works on a copy here (the installed package is never modified): it
# checks which model files need the patch in this SGLang version and shows the diff.

# %%
from eagle3lab.wiring import patching

sglang_copy = experiments.sglang_source_copy(SGLANG_DIR)
plan = patching.check(sglang_copy)
where = prose.short_path(SGLANG_DIR) if SGLANG_DIR else "the installed package, copied"
prose.markdown(f"SGLang **{plan.version}** ({where}): file by file, whether it needs the patch.")
plan.to_frame()

# %%
prose.show_diff(patching.diff(sglang_copy))

# %% [markdown]
# ## What the patch changes
#
# SGLang's own `set_eagle3_layers_to_capture`, run from the copy before and after patching: the
# boundaries that the seed's fixed ids select (on the lab's target), in the order they reach the
# draft.

# %%
from eagle3lab.lab import load_lab

lab = load_lab(LAB)
capture_table = experiments.capture_before_after(sglang_copy, lab.num_layers)
capture_table

# %% [markdown]
# ## Do the seed's fixed ids feed what training used? It depends on the SGLang version
#
# The seed's draft was trained on boundaries `[0, 3, 31]` of a 61-layer DeepSeek-V3-style target,
# and its fix wrote the ids `[-1, 2, 30]`, counting on SGLang adding 1 to each id. Whether it does
# is decided by `set_eagle3_layers_to_capture` in `srt/models/deepseek_v2.py`, which changed in
# SGLang 0.5.13 (from then on: +1 only when the first id is 1). The table applies each version's rule
# (`eagle3lab.wiring.conventions`, read in each wheel) to the seed's ids, and lists the ids that work.
# Served with CUDA graphs (SGLang's default), 0.4.9 – 0.5.10 reset every id to the default
# boundaries `[2, N//2, N-3]` = `[2, 30, 58]` for decode and verify (`cuda_graph_runner.py`,
# docs/sources.md section 2): on those releases neither the incident's ids nor its fix change what
# is fed, which is why their row reads `[2, 30, 58]` in both columns.
# The second table serves the same ids with `--disable-cuda-graph`: there those releases feed the
# ids as eager prefill does.

# %%
by_version = experiments.seed_ids_by_version()
graphs_off = experiments.seed_ids_by_version(cuda_graph=False)
records.fix_ids(by_version, story_served=experiments.SEED_SERVED, latest=experiments.LATEST_SGLANG,
                graphs_off=graphs_off)
display(by_version)
graphs_off.rename_axis("SGLang, --disable-cuda-graph")

# %% [markdown]
# The same offset on the lab: the lab's seed-like draft (drafts/seed) served at the seed's configuration with the
# boundaries it was trained on, and with two slots one layer low, as the seed's ids land on
# SGLang 0.5.13 and later (the lab's target is a Llama, whose rule always adds 1, so the offset is
# applied directly to the boundaries).

# %%
trained_lab = list(lab.load_draft("seed").train_boundaries)
wirings = experiments.measure_wirings(
    {"the incident's ids on SGLang ≥ 0.5.13": experiments.lab_analog(trained_lab),
     "ids that feed the trained boundaries": trained_lab},
    lab=LAB, spec=(STEPS, TOPK, DRAFT_TOKENS), draft="seed", **budget)
wirings[["boundaries", "accept_length", "accept_length_ci95", "speedup", "speedup_ci95", "prompts"]]

# %%
prose.markdown(prose.seed_ids_sentence(by_version, wirings))

# %% [markdown]
# ## Served with embedding capture: measured
#
# The lab's seed-like draft (drafts/seed) served three ways at the seed's configuration: as SGLang fed it before the fix,
# with the fix (embedding capture, the ids it was trained on), and no speculation, on the same
# prompts as in notebook 01 (how they were measured in this run: below). On vLLM the
# embedding needs no patch (id 0 is the embedding): the fix is the ids, so the two variants are
# the draft's own ids and the ids that feed its training boundaries (a temporary copy of its
# config; the checkpoint is not touched).

# %%
spec = SpecConfig(num_steps=STEPS, topk=TOPK, num_draft_tokens=DRAFT_TOKENS)
before, after = experiments.fix_labels(BACKEND)
fix = experiments.measure_variants({before: ["wiring-seed"], after: ["embed-patch"]},
                                   spec, lab=LAB, server_url=SERVER_URL, draft="seed", backend=BACKEND,
                                   **budget)
prose.markdown(prose.measured_how(BACKEND, SERVER_URL))
fix

# %%
plots.speed_plot(fix, title=f"The fix {prose.where(BACKEND)[1]}")

# %%
records.fix(fix, before, after)
prose.markdown("**" + prose.fix_title(fix, before, after, backend=BACKEND) + "** "
               + prose.fix_sentence(fix, before, after, backend=BACKEND))

# %% [markdown]
# ## After the fix: the training slice alone
#
# The fix feeds the seed's draft the boundaries it was trained on, [embedding, low, mid]. Whether
# that slice itself costs acceptance against the usual [low, mid, high] is a question of training,
# not of serving: on a lab whose drafts include both, trained with the same recipe (TTT, same data),
# each served as trained, the two are compared over the lab's held-out prompts.

# %%
from eagle3lab.report.postmortem import tables

slice_record = records.training_slice(lab)
prose.markdown(tables.training_slice_text({"training_slice": slice_record})
               if slice_record else f"*The {LAB} lab has no draft trained on [embedding, low, mid] with TTT "
               "(the real-model lab, `LAB = \"smollm2\"`, has).*")

# %% [markdown]
# ## Beside the incident
#
# The incident's figures for the fix (as reported) next to the lab's of the same definition.

# %%
prose.markdown(postmortem.beside_incident(steps=(4, 5, 6)))

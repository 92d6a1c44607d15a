# %% [markdown]
# # 01 · The silent draft-token adjustment
#
# The incident launched SGLang with `--speculative-num-steps 1 --speculative-eagle-topk 1
# --speculative-num-draft-tokens 16` and got fewer tokens per second than without speculation.
# With `topk = 1` SGLang drafts a chain, and it quietly sets the number of draft tokens to
# `num_steps + 1`, printing a single warning line. The investigator then tried 15 steps (slower
# still) and later 5 steps with 6 draft tokens.
#
# This notebook asks SGLang's rules what each flag set really runs (and SGLang's own resolver
# when the `sglang` package is installed), then **measures** each on the lab against no
# speculation, with the lab's seed-like draft (`drafts/seed`: trained on [embedding, low, mid] like the
# incident's, on a far smaller model; not the incident's draft) served the way SGLang served the incident's.

# %% tags=["parameters"]
# Parameters: change these to point the notebook at your own deployment.
LAB = "smollm2"          # lab: "smollm2" (SmolLM2-135M-Instruct, drafts trained here) or a toy lab: "ci", "default"
SERVER_URL = None        # a running SGLang server, e.g. "http://gpu-box:30000": measure it as is
BACKEND = "lab"          # "lab"; "vllm": one vLLM server per flag set (its CPU build here, yours on a GPU);
                         # "sglang" on a GPU machine: one SGLang server per flag set
TARGET_DIR = None        # target model for BACKEND="sglang"/"vllm"; None = the lab's target
DRAFT_DIR = None         # EAGLE-3 draft for BACKEND="sglang"/"vllm"; None = the lab's seed-like draft (drafts/seed)
FAULTS = ["wiring-seed"] # lab faults the lab server runs with (the seed's draft as SGLang feeds it;
                         # on vLLM: the draft's own ids, as vLLM reads them)
NUM_PROMPTS = None       # prompts per measurement; None = the preset's budget
MAX_NEW_TOKENS = None    # new tokens per prompt; None = the preset's budget
SGLANG_VERSION = None    # the SGLang version whose rules the resolver applies; None = the newest read

# %%
from eagle3lab.report import glossary, labwords

labwords.use(LAB)  # "the lab" below names this run's lab (the parameters may change it)
glossary.define("the incident", "TTT", "the lab", "accept length", "speed-up", "depth", "bonus token", "topk")

# %%
%matplotlib inline
from IPython.display import display
from eagle3lab import experiments
from eagle3lab.viz import plots
from eagle3lab.report import prose
from eagle3lab.report import postmortem
from eagle3lab.report.postmortem import records
from eagle3lab.viz.style import apply_style

apply_style()
budget = experiments.budget(LAB, num_prompts=NUM_PROMPTS, max_new_tokens=MAX_NEW_TOKENS)
flag_sets = experiments.SEED_FLAG_SETS
prose.markdown("The incident's flag sets, in the order it tried them:\n\n"
               + "\n".join(f"- `{' '.join(cfg.to_flags())}`" for cfg in flag_sets.values()))

# %% [markdown]
# ## What will SGLang actually run?
#
# `eagle3lab.engines.effective` applies SGLang's rules for the version given (read in its
# `srt/server_args.py`); `num_draft_tokens` is what the server verifies per step.

# %%
arch = experiments.target_arch(TARGET_DIR, LAB)
resolved = experiments.resolve_flag_sets(flag_sets, version=SGLANG_VERSION, arch=arch)
resolved.drop(columns=["warnings"])

# %%
experiments.warnings_table(resolved)

# %%
prose.headline(prose.resolution_sentence(resolved))

# %% [markdown]
# ### SGLang's own resolver
#
# When the `sglang` package is importable, the same flags go through SGLang's own
# `ServerArgs` resolution, the ground truth for the table above.

# %%
ground_truth = experiments.resolve_flag_sets(flag_sets, version=SGLANG_VERSION, arch=arch, use_sglang=True) \
    if experiments.sglang_installed() else None
agree = None
if ground_truth is None:
    prose.markdown("*SGLang is not installed here; skipping the cross-check.*")
else:
    agree = experiments.compare_resolutions(resolved, ground_truth)
    display(agree)
    prose.markdown(f"SGLang's resolver agrees with eagle3lab's on **{int(agree['agree'].sum())} of "
                   f"{len(agree)}** flag sets.")
records.resolution(resolved, agree, version=SGLANG_VERSION or experiments.LATEST_SGLANG)

# %% [markdown]
# ## What will vLLM run?
#
# vLLM has no num_steps/topk/num_draft_tokens triple: its `--speculative-config` takes one number,
# `num_speculative_tokens` (k), and drafts a chain of k tokens, verifying k + 1. eagle3lab passes
# k = num_steps. `eagle3lab.engines.vllm.vllm_rules` replays vLLM 0.32's `create_engine_config` (what it runs and
# what it changes without asking), and, with `BACKEND="vllm"`, vLLM's own resolver checks it.

# %%
from eagle3lab.engines.vllm import experiments as experiments_vllm

if BACKEND == "vllm":
    from eagle3lab.lab import load_lab

    lab_obj = load_lab(LAB)
    target_dir, draft_dir = TARGET_DIR or lab_obj.target_dir, DRAFT_DIR or lab_obj.draft_dir("seed")
    on_vllm = experiments_vllm.resolve_flag_sets(flag_sets, target_dir, draft_dir)
    vllm_check = experiments_vllm.check_flag_sets(flag_sets, target_dir, draft_dir)
    display(on_vllm)
    display(vllm_check[["ours", "agree", "vllm_version"]])
    prose.markdown(prose.vllm_resolution_sentence(on_vllm, vllm_check))
else:
    prose.markdown(f"*BACKEND is {BACKEND!r}: set BACKEND=\"vllm\" to see what vLLM runs for these flags.*")

# %% [markdown]
# ## Measured: tokens/s and accept length against no speculation
#
# The same held-out prompts are decoded greedily for each flag set (these prompts are the same in
# every notebook). Each flag set is decoded prompt by prompt beside its own no-speculation run:
# `baseline_tokens_per_s` is the baseline its `speedup` divides. Tokens/s are whole requests,
# prefill included.

# %%
prose.markdown(prose.measured_how(BACKEND, SERVER_URL))

# %%
measured = experiments.measure_flag_sets(
    flag_sets, lab=LAB, backend=BACKEND, server_url=SERVER_URL, target_dir=TARGET_DIR,
    draft_dir=DRAFT_DIR, draft="seed", faults=FAULTS, **budget)
records.flag_sets(measured, flag_sets)
measured

# %%
plots.speed_plot(measured, title=f"The incident's flag sets {prose.where(BACKEND)[1]}")

# %%
prose.markdown(prose.flag_set_sentence(measured, backend=BACKEND))

# %% [markdown]
# ## Beside the incident
#
# The incident's figures for these flag sets (as reported) next to the lab's of the same
# definition; the verdict is decided from the lab's interval.

# %%
prose.markdown(postmortem.beside_incident(steps=(2, 3)))

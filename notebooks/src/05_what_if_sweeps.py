# %% [markdown]
# # 05 · What if? Sweeps over the configuration and over each hypothesis
#
# The seed's investigation ended with several open hypotheses for the gap between standalone
# accuracy and served acceptance: a quantized target, a draft trained without training-time test,
# prompts unlike the training data, longer contexts... On the lab each can be switched on alone,
# so we measure which one reproduces the seed's signature, what fixes it, and which configuration
# wins once it is fixed.

# %% tags=["parameters"]
# Parameters: change these to point the notebook at your own deployment.
LAB = "default"          # lab preset: "ci" (tiny, for tests) or "default"
SERVER_URLS = None       # running servers (one per GPU machine) to spread a sweep over; None = lab
DRAFT = "healthy"        # lab draft for the configuration sweep
STEPS = [1, 2, 3, 5, 7]  # chain depths to sweep
TOPK = [1, 2]            # topk values to sweep (tree drafting for topk > 1)
DRAFT_TOKENS = [4, 8]    # draft tokens for topk > 1
FAULTS = ["wiring-seed", "no-ttt", "quant-int4", "domain-shift", "no-d2t", "normed-last"]
NUM_PROMPTS = None       # prompts per point; None = the preset's budget
MAX_NEW_TOKENS = None    # new tokens per prompt; None = the preset's budget
SWEEP_FILE = None        # append points here and resume from it; None = a fresh temporary file

# %%
%load_ext eagle3lab.story
%matplotlib inline
import pandas as pd
from IPython.display import display
from eagle3lab import story, analysis, plots
from eagle3lab.style import apply_style

apply_style()
pd.set_option("display.precision", 3)
budget = story.budget(LAB, num_prompts=NUM_PROMPTS, max_new_tokens=MAX_NEW_TOKENS)

# %% [markdown]
# ## Which hypothesis explains the gap?
#
# Every fault at the seed's configuration (5 steps, 6 draft tokens), one at a time, against the
# healthy draft: accept length, per-position acceptance and speed-up over no speculation.

# %%
%%needs eagle3lab.bench eagle3lab.engine eagle3lab.lab.lab
hypotheses = story.fault_sweep(FAULTS, lab=LAB, urls=SERVER_URLS, draft=DRAFT, file=SWEEP_FILE, **budget)
hypotheses

# %%
%%needs eagle3lab.bench eagle3lab.engine eagle3lab.lab.lab
story.fault_plot(hypotheses)

# %%
%%needs eagle3lab.bench eagle3lab.engine eagle3lab.lab.lab
story.markdown(story.hypothesis_sentence(hypotheses))

# %% [markdown]
# ## What wins once it is fixed: depth, topk and draft tokens
#
# The healthy draft over a grid of configurations; each point records the configuration SGLang's
# rules make effective next to the one asked for.

# %%
%%needs eagle3lab.bench eagle3lab.engine eagle3lab.lab.lab
grid = story.config_grid(STEPS, TOPK, DRAFT_TOKENS)
sweep = story.config_sweep(grid, lab=LAB, urls=SERVER_URLS, draft=DRAFT, file=SWEEP_FILE, **budget)
sweep

# %%
%%needs eagle3lab.bench eagle3lab.engine eagle3lab.lab.lab
plots.throughput_vs_depth(story.chain_rows(sweep), title="Measured tokens/s vs chain depth")

# %%
%%needs eagle3lab.bench eagle3lab.engine eagle3lab.lab.lab
plots.sweep_heatmap(sweep, x="num_steps", y="topk", value="speedup", title="Speed-up over no speculation")

# %%
%%needs eagle3lab.bench eagle3lab.engine eagle3lab.lab.lab
story.markdown(story.winner_sentence(sweep))

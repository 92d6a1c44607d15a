# %% [markdown]
# # 02 · What training fed the draft versus what the server feeds it
#
# The incident's second bug was silent: training fed the draft's `fc` layer the concatenation of
# boundaries `[0, 3, 31]` (the embedding, the inputs of layers 3 and 31), while the SGLang it ran
# read the ids `[2, 30, 58]` in the draft's config and fed boundaries `[3, 31, 59]`. The write-up
# does not say which SGLang that was. Adding 1 to every id in `deepseek_v2.py` is what its 0.5.11
# and 0.5.12 releases do (notebook 03 shows, version by version, what the same ids do: the rule
# changed in 0.5.13), while the accept rate it logged follows the definition of 0.5.10.post1 and
# earlier (docs/sources.md section 3). Before 0.5.11 the ids give `[3, 31, 59]` only with CUDA graphs
# off (notebook 03's second table), but a reading of the setter shows the `+ 1` with them on too
# (`cuda_graph_runner.py` then calls it again without the ids): the clues narrow the release, not
# the CUDA-graph setting, and the version stays unknown. A
# boundary b is the state entering layer b: the write-up's "layer3", captured before layer 3
# runs, is boundary 3.
# The server ran, outputs
# stayed correct (speculative decoding is lossless), and only acceptance showed that something was
# off.
#
# This notebook reproduces the check on the lab: **the wiring report** (slot by slot, the boundary
# training used and the boundary the server will feed), **the cosine-similarity matrix** between
# the two captures (which finds an offset numerically, without trusting any convention), and
# **standalone accuracy** of the draft with the right wiring versus as served.
#

# %%
from eagle3lab.report import glossary

glossary.define("boundary", "slot", "fc", "lossless", "acc@k")

# %% tags=["parameters"]
# Parameters: change these to point the notebook at your own checkpoints.
LAB = "smollm2"          # lab: "smollm2" (SmolLM2-135M-Instruct, drafts trained here) or a toy lab: "ci", "default"
DRAFT_DIR = None         # your EAGLE-3 draft checkpoint directory; None = the lab's seed-like draft (drafts/seed)
TARGET_DIR = None        # your target model directory (config.json + weights); None = the lab's
TRAIN = None             # how the draft was trained, e.g. ("specforge", "0.2.0"); None = the lab draft's record
SERVE = None             # the engine and version that serves it, e.g. ("sglang", "0.5.23");
                         # None = SGLang's newest read, or vLLM's with BACKEND="vllm"
BACKEND = "lab"          # "vllm": also measure which states the running vLLM captures (its CPU build here)
EVAL_TEXTS = None        # held-out texts for standalone accuracy; None = the preset's budget
DEPTH = 5                # unrolled depth for standalone accuracy (the incident served 5 steps)

# %%
%matplotlib inline
import pandas as pd
from IPython.display import display
from eagle3lab import experiments
from eagle3lab.viz import plots
from eagle3lab.report import prose
from eagle3lab.report.postmortem import records
from eagle3lab.viz.style import apply_style

apply_style()
budget = experiments.budget(LAB, eval_texts=EVAL_TEXTS)
serve = experiments.serve_engine(SERVE, BACKEND)

# %%
from eagle3lab.lab import load_lab

lab = load_lab(LAB)
draft_dir = DRAFT_DIR or lab.draft_dir("seed")
target_dir = TARGET_DIR or lab.target_dir
target, tokenizer = experiments.load_target(TARGET_DIR, lab)
prose.markdown(f"Target: `{prose.short_path(target_dir)}` ({lab.num_layers} layers) · draft: "
               f"`{prose.short_path(draft_dir)}`")

# %% [markdown]
# ## The wiring report
#
# Each slot of the draft's `fc` input: the boundary training used, the boundary the server will
# feed, and a verdict with the fix.

# %%
from eagle3lab.wiring import slots as wiring

report = wiring.check(draft_dir, target=target_dir, train=TRAIN, serve=serve)
wiring_table = report.to_frame()
wiring_table

# %%
bad = wiring_table[wiring_table["verdict"] != "ok"]
prose.markdown(
    f"**{len(bad)} of {len(wiring_table)} slots** are fed a different boundary than training used."
    if len(bad) else "Every slot is fed the boundary training used.")

# %% [markdown]
# ## vLLM's capture rule next to SGLang's, measured
#
# vLLM reads the same ids differently: an id is a boundary (0 is the embedding, N the last layer's
# output before the final norm), where SGLang's Llama adds 1. With `BACKEND="vllm"` the draft is
# loaded in vLLM with its own ids and with the ids that feed its training boundaries, and the
# states the running model captures are read back from it and compared with transformers'.

# %%
if BACKEND == "vllm":
    from eagle3lab.engines.vllm import experiments as experiments_vllm

    captured = experiments_vllm.capture_table(lab, draft="seed" if DRAFT_DIR is None else DRAFT_DIR)
    display(captured)
    prose.headline(prose.capture_sentence(captured))
else:
    prose.markdown(f"*BACKEND is {BACKEND!r}: set BACKEND=\"vllm\" to measure what vLLM captures.*")

# %% [markdown]
# ## The numbers agree: cosine similarity between the two captures
#
# Capture the target's hidden states on the same held-out text at every boundary and compare the
# tensors the draft was trained on with the tensors the server feeds. Slots are numbered from 0,
# as in the wiring table above. Each cell is a mean cosine: near 1 (deep red on this scale) the two
# tensors are the same state, near 0 (white) unrelated. A cell near 1 off the outlined diagonal is
# an offset; a row with no cell near 1 is a training tensor the server never feeds.

# %%
from eagle3lab.wiring import capture
from eagle3lab.viz import plots

texts = lab.eval_sequences(budget["eval_texts"])
ids = texts[0][:128]
train_b = list(report.trained)
serve_b = list(report.fed)
train_capture = capture.capture(target, ids, train_b)
serve_capture = capture.capture(target, ids, serve_b)
matrix = wiring.wiring_matrix(train_capture, serve_capture)
plots.wiring_heatmap(matrix, train_b, serve_b,
                     "Cosine similarity: training capture vs served capture")

# %% [markdown]
# ## Standalone accuracy: right wiring versus as served
#
# Teacher-forced top-1 accuracy of the draft at each unrolled depth on held-out text (acc@k), once
# with the boundaries it was trained on and once with the boundaries the server feeds. `positions`
# is the number of scored tokens; `loss` is the cross-entropy of the draft against the target's
# top token (nats), the quantity the lab's drafts are trained on, so it falls as accuracy rises.
# This is a property of the draft alone: what a server measures (served acceptance) is a different
# quantity, compared with this one in notebook 04.

# %%
glossary.define("served acceptance")

# %%
from eagle3lab.lab import evaluate_draft

from eagle3lab.lab import Eagle3Draft

draft = lab.load_draft("seed") if DRAFT_DIR is None else Eagle3Draft.from_pretrained(draft_dir)
accuracy = pd.concat([
    evaluate_draft(target, draft, texts, wiring=train_b, depth=DEPTH, tokenizer=tokenizer).assign(wiring=f"as trained {train_b}"),
    evaluate_draft(target, draft, texts, wiring=serve_b, depth=DEPTH, tokenizer=tokenizer).assign(wiring=f"as served {serve_b}"),
])
accuracy

# %%
plots.accuracy_plot(accuracy)

# %%
right, served = (accuracy[accuracy["wiring"] == w] for w in accuracy["wiring"].unique())
records.wiring(train_b, serve_b, accuracy, serve)
prose.markdown(prose.accuracy_sentence(right, served))

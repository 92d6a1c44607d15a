"""SGLang's rows of the known-defect registry. Every `ranges` below equals the reading of
`scripts/read_releases.py` in docs/known-defects-releases.json (read rows: the row's code
signature in eagle3lab/known_defects/probes.py, run on every sglang wheel 0.4.0-0.5.23;
reported rows: the code path, or the report). "sglang X" is the PyPI wheel."""

from __future__ import annotations

from eagle3lab.known_defects.row import KnownDefect, Source
from eagle3lab.known_defects.settings import (CUSTOM_IDS, GRAPH_TRAP, GRAPHS_ON, NO_REJECTION, NORM_BEFORE_FC, PD,
                                              SPEC_V2, T_POSITIVE, TREE, target_is)

_VL = ("Qwen2_5_VLForConditionalGeneration", "Qwen3VLForConditionalGeneration", "Qwen3VLMoeForConditionalGeneration")
_GREEDY_SOURCE = Source(
    thread="sgl-project/sglang PR #37134 (merged: rejection sampling on HIP), PR #31214 (closed), PR #21275 (closed)",
    quote="#37134: \"EAGLE spec-decode verify has been committing `argmax` on ROCm, ignoring `temperature` and "
          "`top_p` entirely, with nothing in the log saying so. At `temp > 0` it degenerates into repetition "
          "loops.\" ... \"On every non-HIP platform it reduces to the predicate it replaces\"; #21275: "
          "\"`TREE_SPEC_KERNEL_AVAILABLE` evaluates to `False` on HIP, forcing all Eagle3 requests to greedy "
          "verification regardless of requested temperature\"",
    versions="the PRs name no release; the bounds were read in releases")
_GATE_CODE = ("python/sglang/srt/speculative: the verify gate on the default path (spec v1 while "
              "SGLANG_ENABLE_SPEC_V2 defaults off, i.e. to 0.5.10.post1; spec v2 from 0.5.11): 0.5.1-0.5.2 "
              "eagle_utils.py and 0.5.3-0.5.10.post1 eagle_info.py `if is_all_greedy or not "
              "TREE_SPEC_KERNEL_AVAILABLE` with the kernel CUDA(/MUSA)-only (spec_utils.py); 0.5.11-0.5.13.post1 "
              "eagle_info_v2.py `... or _is_npu or _is_hip`; 0.5.14 eagle_utils.py `... or _is_npu or _is_hip`, "
              "0.5.15 adds `_is_xpu`, 0.5.16 `_is_cpu`; 0.5.21-0.5.23 `_verify_uses_greedy`: `is_all_greedy or "
              "is_cpu or is_xpu or (is_hip and not use_rejection_sampling)`")

ROWS: tuple[KnownDefect, ...] = (
    KnownDefect(
        id="sglang-cuda-graph-aux-ids-reset", engine="sglang",
        title="CUDA-graph capture resets the aux layer ids to the default",
        ranges=(("0.4.9", "0.5.11"),), end_kind="fixed", platforms=("cuda", "rocm"), conditions=(GRAPHS_ON, CUSTOM_IDS),
        symptom=("decode/verify steps replayed from CUDA graphs feed the default boundaries [2, N//2, N-3] "
                 "while prefill/extend feed the config's ids: a draft trained on other ids gets mixed "
                 "features and low acceptance; with --disable-cuda-graph it recovers"),
        source=Source(
            thread="sgl-project/sglang PR #22836 (merged); earlier attempt PR #9076 (closed)",
            quote="\"The `CudaGraphRunner` had a workaround that called `set_eagle3_layers_to_capture()` without "
                  "args, which used default layer IDs instead of config-specified ones — breaking models with "
                  "custom `eagle_aux_hidden_state_layer_ids`.\"",
            versions="states no release; the bounds were read in releases"),
        code=("python/sglang/srt/model_executor/cuda_graph_runner.py calls `set_eagle3_layers_to_capture()` with "
              "no ids (0.4.7-0.5.10.post1) and model_runner.py reads the config's ids from 0.4.9 (0.4.9 l.334-341); "
              "0.5.11 `init_aux_hidden_state_capture` sets them before the graphs are captured"),
        workaround=("upgrade to SGLang >= 0.5.11, or serve with --disable-cuda-graph, or use ids whose "
                    "boundaries are the default (SpecForge's default [1, N//2-1, N-4])")),
    KnownDefect(
        id="sglang-tree-accept-rate-metric", engine="sglang",
        title="the server's accept rate divides by num_steps + 1, wrong for trees",
        ranges=(("0.5.3.post2", "0.5.5.post3"),), end_kind="fixed", platforms=(), conditions=(TREE,),
        symptom=("the decode log's 'accept rate' and the spec_accept_rate gauge are accepted / (verify steps "
                 "x (num_steps + 1)) although a tree verifies num_draft_tokens per step: the rate is off "
                 "(too high for the usual num_draft_tokens > num_steps + 1); accept length itself is right"),
        source=Source(
            thread="sgl-project/sglang PR #13212 (merged 2025-11-13; the denominator came with PR #11572)",
            quote="\"total_draft_tokens is wrong when speculative_num_draft_tokens != "
                  "self.server_args.speculative_num_steps + 1\"",
            versions="states no release; the bounds were read in releases"),
        code=("python/sglang/srt/managers/scheduler_metrics_mixin.py `total_draft_tokens = spec_num_..._forward_ct * "
              "((speculative_num_steps or 0) + 1)` (0.5.3.post2 l.260-262); 0.5.5.post3 uses "
              "`speculative_num_draft_tokens or draft_tokens_fallback` (l.276-279)"),
        workaround="read accept length (or spec_verify_ct) instead of the accept rate; upgrade to >= 0.5.5.post3",
        severity="info"),
    KnownDefect(
        id="sglang-rocm-greedy-verify", engine="sglang",
        title="EAGLE verify on ROCm commits argmax: temperature and top_p are ignored",
        ranges=(("0.5.1", None),), last_read="0.5.23", platforms=("rocm",), conditions=(T_POSITIVE, NO_REJECTION),
        symptom=("at temperature > 0 every verify is greedy: accept length at T > 0 as high as at T = 0, and "
                 "the output is the greedy one (repetition loops on long outputs), silently"),
        source=_GREEDY_SOURCE,
        code=_GATE_CODE + ("; with rejection sampling HIP samples from 0.5.21 (the rule reading "
                           "rocm_gate_with_rejection_sampling), but arg_groups/speculative_hook.py turns it on by "
                           "default only for EAGLE with topk 1 and no token map, not for EAGLE3 (0.5.23 l.29-63); "
                           "0.5.22+ also turn it on under --speculative-use-block-verification"),
        workaround=("on SGLang >= 0.5.21 pass --speculative-use-rejection-sampling (topk 1; the draft's "
                    "vocabulary must be the target's), else measure sampled acceptance on CUDA")),
    KnownDefect(
        id="sglang-cpu-greedy-verify", engine="sglang",
        title="EAGLE verify on CPU commits argmax: temperature and top_p are ignored",
        ranges=(("0.5.1", "0.5.11"), ("0.5.16", None)), last_read="0.5.23", platforms=("cpu",),
        conditions=(T_POSITIVE,),
        symptom=("at temperature > 0 every verify is greedy, even with --speculative-use-rejection-sampling: "
                 "accept length at T > 0 as high as at T = 0 and greedy output; 0.5.11-0.5.15.post1 take the "
                 "sampling path instead, whose kernels are CUDA-only"),
        source=_GREEDY_SOURCE, code=_GATE_CODE,
        workaround="measure sampled acceptance on CUDA; treat T > 0 acceptance from a CPU SGLang as greedy's"),
    KnownDefect(
        id="sglang-xpu-greedy-verify", engine="sglang",
        title="EAGLE verify on XPU commits argmax: temperature and top_p are ignored",
        ranges=(("0.5.1", "0.5.11"), ("0.5.15", None)), last_read="0.5.23", platforms=("xpu",),
        conditions=(T_POSITIVE,),
        symptom=("at temperature > 0 every verify is greedy, even with --speculative-use-rejection-sampling: "
                 "accept length at T > 0 as high as at T = 0 and greedy output"),
        source=_GREEDY_SOURCE, code=_GATE_CODE,
        workaround="measure sampled acceptance on CUDA; treat T > 0 acceptance from an XPU SGLang as greedy's"),
    KnownDefect(
        id="sglang-cuda-graph-max-bs-trap", engine="sglang",
        title="running batches above cuda_graph_max_bs decode eagerly, and stay there",
        ranges=(("0.4.0", None),), first_open=True, last_read="0.5.23", platforms=("cuda", "rocm"),
        conditions=(GRAPHS_ON, GRAPH_TRAP),
        symptom=("once the running batch exceeds the largest captured graph, decode runs eager and slower, "
                 "requests stay longer and the batch grows: an absorbing state; throughput, not acceptance, "
                 "collapses. The thread measured it without speculation (median running batch 67 with max-bs 32 "
                 "vs 23 with 128); with speculation SGLang caps the running batch at 48 unless "
                 "--max-running-requests is given, so it bites when --cuda-graph-max-bs is below that"),
        source=Source(
            thread="sgl-project/sglang#33483 (open); PR #21005 (merged: capture cuda_graph_max_bs itself), "
                   "PR #33900 (open: warn once), PR #40346 (open)",
            quote="title: \"`max_running_requests` (4096) and `cuda_graph_max_bs` (32) defaults are derived "
                  "independently; crossing the graph ceiling is an absorbing state\"; the log it quotes shows "
                  "max_running_requests=4096, i.e. serving without speculation (which resets it to 48)",
            versions="the thread gives no version range; PR #40346 measured on SGLang v0.5.20"),
        code=("the decode graph runner's `can_run` replays a batch only when its size <= self.max_bs, else eager: "
              "model_executor/cuda_graph_runner.py (0.4.0-0.5.13.post1, 0.5.9 l.403), "
              "model_executor/runner/decode_cuda_graph_runner.py (0.5.14-0.5.23); present in every release read, "
              "so the first bound is the oldest release read"),
        workaround=("set --cuda-graph-max-bs at or above --max-running-requests (SGLang resets the latter to 48 "
                    "for speculation when not given), or cap --max-running-requests at the graph ceiling")),
    KnownDefect(
        id="sglang-verify-top-p-renorm", engine="sglang",
        title="EAGLE verify renormalises top-p on every sampled step, even with top_p = 1",
        ranges=(("0.4.4.post2", "0.5.1"), ("0.5.14", "0.5.16")), end_kind="fixed", platforms=(),
        conditions=(T_POSITIVE,),
        symptom=("at temperature > 0 each verify step runs top_p_renorm_prob over batch x draft tokens x vocab "
                 "(a sort and prefix sum) although top_p is 1: TPOT rises and the speedup shrinks while accept "
                 "length is unchanged (a speed defect, not an acceptance one)"),
        source=Source(
            thread="sgl-project/sglang#6949 (open), fix PR #9404 (merged 2025-08-20); later PR #31294 skips the "
                   "top-k renorm too",
            quote="#6949, 2025-08-20: \"The high cost of verify is because the top_p renorm is executed by default "
                  "during the verification process ... This is a very expensive operator that requires sorting "
                  "and calculating prefix sums.\"",
            versions="states no release; the bounds were read in releases"),
        code=("python/sglang/srt/speculative/eagle_utils.py `target_probs = top_p_renorm_prob(...)` with no guard "
              "(0.4.4.post2 l.349-0.4.10.post2 l.443); 0.5.1 l.465 `if not torch.all(sampling_info.top_ps == 1.0)`; "
              "the rewritten verify of 0.5.14-0.5.15.post1 (eagle_utils.py, 0.5.14 l.482) calls it unguarded "
              "again (a regression the release reading found); 0.5.16 guards it with "
              "`if sampling_info.need_top_p_sampling`"),
        workaround="upgrade to SGLang >= 0.5.16 (or 0.5.1-0.5.13.post1); greedy traffic does not run the renorm",
        severity="info"),
    KnownDefect(
        id="sglang-pd-first-draft-inputs", engine="sglang",
        title="prefill/decode disaggregation feeds the decode side's first draft step mock or wrong inputs",
        ranges=(("0.4.6.post5", "0.5.3"),), end_kind="fixed", platforms=(), conditions=(PD,),
        symptom=("the first draft step after the hand-off gets fake top-k (and, before 0.4.8, mock hidden "
                 "states; to 0.5.2 the target's rather than the draft's): its drafts are rejected, so accept "
                 "length is lower the shorter the outputs"),
        source=Source(
            thread="sgl-project/sglang#10059 (open), PRs #7242, #9976, #10616, #10801 (merged)",
            quote="#10616: \"In `process_prebuilt_extend` of the decode side, `topk_p` and `topk_index` are fake\" "
                  "(the code's comment: \"the first token will have acc rate of 0\"); #10801: \"transfer the draft "
                  "model hidden states in spec_info rather than target model hidden states in pd + eagle, to "
                  "improve the eagle/mtp acceptance rate in first decode draft forward\"",
            versions="the threads name no release; the bounds were read in releases"),
        code=("python/sglang/srt/disaggregation/decode_schedule_batch_mixin.py mocks `topk_p = torch.arange(...)` "
              "(0.4.6.post5-0.5.2); prefill.py sends `logits_output.hidden_states` (0.4.8-0.5.2); 0.5.3 sends "
              "`batch.spec_info.topk_p` and `spec_info.hidden_states`"),
        workaround="upgrade to SGLang >= 0.5.3 for disaggregated EAGLE serving"),
    KnownDefect(
        id="sglang-norm-before-fc-ignored", engine="sglang",
        title="the draft config's norm_before_fc is ignored: the fc input is not normalised",
        ranges=(("0.4.4.post2", "0.5.17"),), end_kind="fixed", platforms=(), conditions=(NORM_BEFORE_FC,),
        symptom=("a draft trained with norm_before_fc (an RMSNorm over the concatenated aux states, e.g. "
                 "nvidia/gpt-oss-120b-Eagle3-v3, speculators --norm-before-fc) gets un-normalised features: the "
                 "server runs but acceptance is low. On GPT-OSS targets, ids ending at N (e.g. [24, 30, 36]) were "
                 "also shifted to [25, 31, 37] up to 0.5.16, so the last boundary was never captured and the draft "
                 "crashed on a short fc input (the wiring check's capture rules flag those ids)"),
        source=Source(
            thread="sgl-project/sglang PR #32334 (merged 2026-07-27; fixes #32226)",
            quote="\"SGLang shifted these to `[25, 31, 37]` and did not capture the final boundary after all 36 "
                  "GPT-OSS blocks ... After correcting the capture, the server launched but acceptance remained "
                  "low because the draft config's `norm_before_fc: true` and its `input_norm.weight` were "
                  "ignored.\"",
            versions="states no release; the bounds were read in releases (the PR is about GPT-OSS; the ignored "
                     "key is read by llama_eagle3.py for every target)"),
        code=("python/sglang/srt/models/llama_eagle3.py (LlamaForCausalLMEagle3, first in 0.4.4.post2) never reads "
              "norm_before_fc up to 0.5.16; 0.5.17 l.165-169 builds input_norm when eagle_config or the config sets "
              "it; gpt_oss.py's setter adds 1 to every id in 0.5.1-0.5.16 and keeps ids whose max is N from 0.5.17"),
        workaround="upgrade to SGLang >= 0.5.17, or serve the draft on vLLM (which reads norm_before_fc)"),
    KnownDefect(
        id="sglang-qwen35-aux-not-captured", engine="sglang",
        title="Qwen3.5 targets never capture EAGLE-3 aux states: start-up fails",
        ranges=(("0.5.11", "0.5.22"),), end_kind="fixed", platforms=(),
        conditions=(target_is("Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration"),),
        symptom=("no aux hidden states are collected, the wrapper's tuple unpack fails during CUDA graph capture "
                 "(`ValueError: too many values to unpack`): the server does not start with an EAGLE-3 draft"),
        source=Source(
            thread="sgl-project/sglang PR #25408 (closed), PR #38307 (open when read)",
            quote="#38307: \"Serving a Qwen3.5 model ... with `--speculative-algorithm EAGLE3` ... crashes on current "
                  "main during CUDA graph capture ... With EAGLE3 no aux states are collected, so the inner forward "
                  "returns a plain tensor and the wrapper's tuple unpack fails.\"",
            versions="states no release; the bounds were read in releases"),
        code=("python/sglang/srt/models/qwen3_vl.py `Qwen3VLForConditionalGeneration.set_eagle3_layers_to_capture` "
              "writes `model.layers_to_capture` (from 0.5.11), which qwen3_5.py's Qwen3_5ForCausalLM never reads "
              "(it marks layers with `_is_layer_to_capture`); 0.5.22 adds Qwen3_5ForCausalLM's setter and the "
              "wrapper calls it"),
        workaround="upgrade to SGLang >= 0.5.22",
        severity="error"),
    KnownDefect(
        id="sglang-qwen-vl-low-acceptance", engine="sglang",
        title="Qwen-VL EAGLE-3 drafts accept ~1.0 token per step",
        ranges=(("0.5.5.post3", None),), read=False, platforms=(), conditions=(target_is(*_VL),),
        reported_in="sglang 0.5.5.post3 (SpecForge#310: accept length 2.195 on 0.5.4, about 1.0 on 0.5.5.post3)",
        symptom="accept length about 1.0 (nothing accepted) on MMStar where 0.5.4 gave 2.2 with the same draft",
        source=Source(
            thread="sgl-project/SpecForge#310 (open)",
            quote="\"I test use sglang==0.5.4 ... Average Accept length: 2.195 ... But if I use the "
                  "sglang==0.5.5.post3. The average accept length is about 1.0 which is not correct.\"",
            versions="the thread names 0.5.4 (good) and 0.5.5.post3 (bad); for Qwen3-VL it reports downgrading to "
                     "0.5.3 with a code change"),
        code=("not read: no code change is named, and qwen2_5_vl.py's EAGLE-3 setter is the same in every release "
              "from 0.5.4 to 0.5.5.post3; PR #25408 / #38307, cited with it, concern Qwen3.5 "
              "(row sglang-qwen35-aux-not-captured)"),
        workaround="measure on 0.5.4 with the same draft; compare greedy accept length across versions",
        severity="info"),
    KnownDefect(
        id="sglang-spec-v2-vl-acceptance", engine="sglang",
        title="spec v2 lowers EAGLE-3 acceptance on Qwen2.5-VL",
        ranges=(("0.5.4.post1", None),), last_read="0.5.23", read=False, path=True, platforms=(),
        conditions=(SPEC_V2, target_is("Qwen2_5_VLForConditionalGeneration")),
        reported_in="sglang main of 2025-11-27 (PR #14063's branch, between 0.5.5.post3 and 0.5.6)",
        symptom="MMStar accept length 2.14 with spec v2 against 3.18 with spec v1 (the PR's measurement)",
        source=Source(
            thread="sgl-project/sglang PR #14063 (closed; fixed the crash of #14060)",
            quote="\"TODO: Align qwen2.5-vl accept length in spec v2 with spec v1\" with MMStar accept_length "
                  "3.1804 (spec v1) and 2.1397 (spec v2)",
            versions="states no release"),
        code=("not read: no line is named. The ranges are the life of the path read in releases: spec v2 "
              "(speculative/eagle_worker_v2.py) with Qwen2.5-VL's EAGLE-3 setter, from 0.5.4.post1; spec v2 is "
              "opt-in (SGLANG_ENABLE_SPEC_V2) to 0.5.10.post1 and the default from 0.5.11"),
        workaround="on 0.5.4.post1-0.5.13 run spec v1 (SGLANG_ENABLE_SPEC_V2=0) and compare accept length",
        severity="info"),
)

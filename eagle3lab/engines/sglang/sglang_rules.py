"""SGLang's speculative-argument rules, per version, read in its source.

The seed's first bug: `--speculative-num-steps 1 --speculative-eagle-topk 1
--speculative-num-draft-tokens 16` runs with 2 draft tokens, because SGLang sets
num_draft_tokens = num_steps + 1 whenever topk == 1 and says so in one warning line.
`resolve_sglang_rules` predicts that before launch (`SpecConfig(...).resolve(...)` calls it
through `eagle3lab.engines.effective`); `eagle3lab.sources.logfile.config_from_log` finds it afterwards.

Every rule below was read in the SGLang wheels' source (`pip download --no-deps sglang==X`):
`sglang/srt/server_args.py` up to 0.5.13.post1, and `sglang/srt/arg_groups/speculative_hook.py`
(`_handle_eagle_family`, `_auto_choose_speculative_params`) from 0.5.14 on. Read by hand:
0.4.3 0.4.6 0.4.10 0.5.1 0.5.2 0.5.5 0.5.7 0.5.9 0.5.14 0.5.18 0.5.22 0.5.23; then every release
0.4.0-0.5.23 by `scripts/read_releases.py` (known_defects/rule_probes.py), which added a row
(`_then`) wherever a field it reads changes (docs/sources.md section 8; tests/
test_known_defects_table.py compares every release). A version between two rows uses the rules
of the row below it, and says so.
`resolve(..., use_sglang=True)` asks the installed SGLang instead (engines/sglang/resolver.py);
tests/test_config_sglang.py checks that both agree.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from eagle3lab.spec import (LATEST_SGLANG, PUBLISHED_SGLANG, ResolvedSpec, SpecConfig, parse_version,
                            record_changes, version_str)


# Architectures in SGLang's `_auto_choose_speculative_params` (3, 1, 4) branch, as they grew.
_DS = ("DeepseekV3ForCausalLM", "DeepseekV2ForCausalLM")
_AUTO_314_0_5_1 = _DS + ("GptOssForCausalLM",)
_AUTO_314_0_5_5 = ("DeepseekV32ForCausalLM",) + _AUTO_314_0_5_1 + (
    "BailingMoeForCausalLM", "BailingMoeV2ForCausalLM")
_AUTO_314_0_5_6_POST1 = _AUTO_314_0_5_5 + (
    "Glm4MoeForCausalLM", "MistralLarge3ForCausalLM", "PixtralForConditionalGeneration")
_AUTO_314_0_5_7 = _AUTO_314_0_5_6_POST1 + ("MiMoV2FlashForCausalLM",)
_AUTO_314_0_5_9 = _AUTO_314_0_5_7 + (
    "Glm4MoeLiteForCausalLM", "GlmMoeDsaForCausalLM", "BailingMoeV2_5ForCausalLM")
_AUTO_314_0_5_14 = _AUTO_314_0_5_9 + ("MiMoV2ForCausalLM",)

# Architectures whose MTP draft lives in the target checkpoint: SGLang fills in the draft
# path itself and warns "DeepSeek MTP does not require setting speculative_draft_model_path."
_MTP_0_4_10 = ("DeepseekV3ForCausalLM", "Glm4MoeForCausalLM")
_MTP_0_5_5 = _MTP_0_4_10 + ("DeepseekV32ForCausalLM", "BailingMoeForCausalLM",
                            "BailingMoeV2ForCausalLM")
_MTP_0_5_7 = _MTP_0_5_5 + ("MistralLarge3ForCausalLM", "PixtralForConditionalGeneration")
_MTP_0_5_9 = _MTP_0_5_7 + ("Glm4MoeLiteForCausalLM", "GlmMoeDsaForCausalLM",
                           "BailingMoeV2_5ForCausalLM")
_MTP_0_5_14 = _MTP_0_5_9 + ("DeepseekV4ForCausalLM", "HYV3ForCausalLM")
_MTP_0_5_22 = _MTP_0_5_14 + ("HYV4ForCausalLM", "Qwen4ExpForConditionalGeneration")
_MTP_NO_WARNING = ("MistralLarge3ForCausalLM", "PixtralForConditionalGeneration")

# SGLang's warnings, verbatim.
W_ADJUST = ("speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when "
            "speculative_eagle_topk == 1")
W_TOPK_PAGE = "speculative_eagle_topk is adjusted to 1 when page_size > 1"
W_MAX_RUNNING = ("Max running requests is reset to 48 for speculative decoding. You can "
                 "override this by explicitly setting --max-running-requests.")
W_MTP_PATH = "DeepSeek MTP does not require setting speculative_draft_model_path."
W_CPU_OVERLAP = "Overlap schedule is not implemented for speculative decoding on CPU."
W_SYNC_V2 = ("Non-overlap (synchronous) spec v2 is used for eagle/eagle3/standalone "
             "speculative decoding.")
W_OVERLAP_0_4 = "Overlap scheduler is disabled because of using eagle speculative decoding."
W_OVERLAP_0_5_3 = ("Overlap scheduler is disabled because of using eagle3 and standalone "
                   "speculative decoding.")
W_OVERLAP_0_5_5 = ("Overlap scheduler is disabled because of using eagle3 or standalone "
                   "speculative decoding.")
W_OVERLAP_0_5_7 = ("Overlap scheduler is disabled when spec v2 is off or using unsupported "
                   "speculative algorithm. You can set env SGLANG_ENABLE_SPEC_V2=True to "
                   "enable the experimental overlap scheduler. ")
E_TRTLLM = "trtllm_mha backend only supports topk = 1 for speculative decoding."
E_PAGE_FLASHINFER = (
    "speculative_eagle_topk > 1 with page_size > 1 is unstable and produces incorrect "
    "results for paged attention backends. This combination is only supported for the "
    "'flashinfer' backend.")


@dataclass(frozen=True)
class SglangRules:
    """The speculative-argument rules of one SGLang version, as read in its source."""

    version: str
    source: str
    eagle3: bool = True                      # EAGLE3 accepted as an algorithm
    static_defaults: tuple | None = None     # 0.4.3: fixed field defaults, no auto choice
    auto_414: tuple = ()                     # archs auto-choosing (3, 1, 4)
    auto_other: tuple = (5, 4, 8)            # the "all other models" branch
    mtp_archs: tuple = ()
    mtp_warning_exempt: tuple = ()
    standalone: bool = False                 # STANDALONE algorithm exists (auto (3,1,4))
    page_topk: str | None = None             # None | "reset_topk" | backend list name
    page_backends: tuple = ()
    trtllm_topk_error: bool = False
    max_running_warning: bool = False
    overlap_warning: str | None = None       # printed on the GPU default path
    cpu_overlap: bool = False                # device=cpu turns overlap off, with a warning
    sync_v2_warning: bool = False            # "Non-overlap (synchronous) spec v2 ..."
    none_topk_crashes: bool = False          # `topk > 1` evaluated with topk=None
    topk1_adjust: bool = True                # topk 1 sets num_draft_tokens = num_steps + 1 (from 0.4.5.post3)


_SA = "sglang/srt/server_args.py"
_HOOK = "sglang/srt/arg_groups/speculative_hook.py (_handle_eagle_family)"
_READ = "read release by release (scripts/read_releases.py; docs/sources.md section 8)"


def _then(prev: SglangRules, version: str, **changes) -> SglangRules:
    """The rules of `prev` with the fields the release reading found changed in `version`."""
    return replace(prev, version=version, source=f"{_SA if parse_version(version) < parse_version('0.5.14') else _HOOK} "
                   f"{version}: {', '.join(changes)} {_READ}", **changes)


_R = {}
# 0.4.3: EAGLE only; fields default to steps=5, topk=8, draft=64; nothing adjusted.
_R["0.4.3"] = SglangRules("0.4.3", f"{_SA} 0.4.3 __post_init__", eagle3=False, static_defaults=(5, 8, 64))
_R["0.4.3.post3"] = _then(_R["0.4.3"], "0.4.3.post3", static_defaults=(5, 4, 8))
_R["0.4.4"] = _then(_R["0.4.3.post3"], "0.4.4", overlap_warning=W_OVERLAP_0_4)
_R["0.4.4.post2"] = _then(_R["0.4.4"], "0.4.4.post2", eagle3=True)
# 0.4.4.post4: (5, 4, 8) chosen at run time for every architecture, and no topk-1 adjustment yet
_R["0.4.4.post4"] = _then(_R["0.4.4.post2"], "0.4.4.post4", static_defaults=None, auto_other=(5, 4, 8),
                          topk1_adjust=False)
_R["0.4.5.post3"] = _then(_R["0.4.4.post4"], "0.4.5.post3", topk1_adjust=True, page_topk="reset_topk")
# 0.4.6: auto (5,4,8) for every arch; page_size>1 silently forces topk=1 (then the
# topk==1 rule shrinks the draft tokens too); "Overlap scheduler is disabled ...".
_R["0.4.6"] = SglangRules("0.4.6", f"{_SA} 0.4.6 __post_init__ + auto_choose_speculative_params",
                          page_topk="reset_topk", overlap_warning=W_OVERLAP_0_4)
_R["0.4.6.post3"] = _then(_R["0.4.6"], "0.4.6.post3", mtp_archs=("DeepseekV3ForCausalLM",))
_R["0.4.7"] = _then(_R["0.4.6.post3"], "0.4.7", auto_414=_DS)
# 0.4.9: the page_size rule is gone (sglang PR#7643 per docs/sources.md)
_R["0.4.9"] = _then(_R["0.4.7"], "0.4.9", page_topk=None)
_R["0.4.9.post5"] = _then(_R["0.4.9"], "0.4.9.post5", mtp_archs=_MTP_0_4_10)
# 0.4.10: DeepSeek gets (3,1,4); MTP archs get their draft path filled in.
_R["0.4.10"] = SglangRules("0.4.10", f"{_SA} 0.4.10 __post_init__ + auto_choose_speculative_params",
                           auto_414=_DS, mtp_archs=_MTP_0_4_10, overlap_warning=W_OVERLAP_0_4)
# 0.5.1: GptOss joins (3,1,4); trtllm_mha refuses topk > 1.
_R["0.5.1"] = SglangRules("0.5.1", f"{_SA} 0.5.1 __post_init__", auto_414=_AUTO_314_0_5_1,
                          mtp_archs=_MTP_0_4_10, trtllm_topk_error=True, overlap_warning=W_OVERLAP_0_4)
# 0.5.2: topk>1 with page_size>1 refused unless flashinfer; STANDALONE.
_R["0.5.2"] = SglangRules("0.5.2", f"{_SA} 0.5.2 _handle_speculative_decoding", auto_414=_AUTO_314_0_5_1,
                          mtp_archs=_MTP_0_4_10, standalone=True, page_topk="error",
                          page_backends=("flashinfer",), trtllm_topk_error=True,
                          overlap_warning=W_OVERLAP_0_4, none_topk_crashes=True)
_R["0.5.3"] = _then(_R["0.5.2"], "0.5.3", auto_414=_AUTO_314_0_5_5, mtp_archs=_MTP_0_5_5)
_R["0.5.3.post2"] = _then(_R["0.5.3"], "0.5.3.post2", overlap_warning=W_OVERLAP_0_5_3)
_R["0.5.4.post1"] = _then(_R["0.5.3.post2"], "0.5.4.post1", max_running_warning=True, overlap_warning=W_OVERLAP_0_5_5)
# 0.5.5: the "Max running requests is reset to 48" warning appears.
_R["0.5.5"] = SglangRules("0.5.5", f"{_SA} 0.5.5 _handle_speculative_decoding", auto_414=_AUTO_314_0_5_5,
                          mtp_archs=_MTP_0_5_5, standalone=True, page_topk="error",
                          page_backends=("flashinfer",), trtllm_topk_error=True,
                          max_running_warning=True, overlap_warning=W_OVERLAP_0_5_5,
                          none_topk_crashes=True)
_R["0.5.6.post1"] = _then(_R["0.5.5"], "0.5.6.post1", auto_414=_AUTO_314_0_5_6_POST1, mtp_archs=_MTP_0_5_7,
                          mtp_warning_exempt=_MTP_NO_WARNING)
# 0.5.7: fa3 also allowed with topk>1 and page_size>1; new overlap wording.
_R["0.5.7"] = SglangRules("0.5.7", f"{_SA} 0.5.7 _handle_speculative_decoding", auto_414=_AUTO_314_0_5_7,
                          mtp_archs=_MTP_0_5_7, mtp_warning_exempt=_MTP_NO_WARNING, standalone=True,
                          page_topk="error", page_backends=("flashinfer", "fa3"), trtllm_topk_error=True,
                          max_running_warning=True, overlap_warning=W_OVERLAP_0_5_7,
                          none_topk_crashes=True)
_R["0.5.8"] = _then(_R["0.5.7"], "0.5.8", auto_414=_AUTO_314_0_5_7 + ("Glm4MoeLiteForCausalLM",), auto_other=(3, 1, 4),
                    mtp_archs=_MTP_0_5_7 + ("Glm4MoeLiteForCausalLM",))
# 0.5.9: the "all other models" default becomes (3,1,4) (read release by release: from 0.5.8).
_R["0.5.9"] = SglangRules("0.5.9", f"{_SA} 0.5.9 auto_choose_speculative_params",
                          auto_414=_AUTO_314_0_5_9, auto_other=(3, 1, 4), mtp_archs=_MTP_0_5_9,
                          mtp_warning_exempt=_MTP_NO_WARNING, standalone=True, page_topk="error",
                          page_backends=("flashinfer", "fa3"), trtllm_topk_error=True,
                          max_running_warning=True, overlap_warning=W_OVERLAP_0_5_7,
                          none_topk_crashes=True)
# 0.5.11: spec v2 on by default, so no overlap warning; MiMoV2 and HYV3 join
_R["0.5.11"] = _then(_R["0.5.9"], "0.5.11", overlap_warning=None, auto_414=_AUTO_314_0_5_14,
                     mtp_archs=_MTP_0_5_9 + ("HYV3ForCausalLM",))
_R["0.5.12"] = _then(_R["0.5.11"], "0.5.12", mtp_archs=_MTP_0_5_14)
_R["0.5.13"] = _then(_R["0.5.12"], "0.5.13", sync_v2_warning=True)
# 0.5.14: rules move to arg_groups/speculative_hook.py; spec v2 (overlap) is the
# default path; flashinfer/fa3/triton implement the paged tree.
_R["0.5.14"] = SglangRules("0.5.14", f"{_HOOK} 0.5.14", auto_414=_AUTO_314_0_5_14, auto_other=(3, 1, 4),
                           mtp_archs=_MTP_0_5_14, mtp_warning_exempt=_MTP_NO_WARNING, standalone=True,
                           page_topk="error", page_backends=("flashinfer", "fa3", "triton"),
                           trtllm_topk_error=True, max_running_warning=True, sync_v2_warning=True,
                           none_topk_crashes=True)
_R["0.5.16"] = _then(_R["0.5.14"], "0.5.16", cpu_overlap=True)
# 0.5.18: device=cpu disables the overlap schedule, with a warning (read release by release: from 0.5.16).
_R["0.5.18"] = SglangRules("0.5.18", f"{_HOOK} 0.5.18", auto_414=_AUTO_314_0_5_14, auto_other=(3, 1, 4),
                           mtp_archs=_MTP_0_5_14, mtp_warning_exempt=_MTP_NO_WARNING, standalone=True,
                           page_topk="error", page_backends=("flashinfer", "fa3", "triton"),
                           trtllm_topk_error=True, max_running_warning=True, cpu_overlap=True,
                           sync_v2_warning=True, none_topk_crashes=True)
_R["0.5.20"] = _then(_R["0.5.18"], "0.5.20", mtp_archs=_MTP_0_5_22)
_R["0.5.22"] = SglangRules("0.5.22", f"{_HOOK} 0.5.22", auto_414=_AUTO_314_0_5_14, auto_other=(3, 1, 4),
                           mtp_archs=_MTP_0_5_22, mtp_warning_exempt=_MTP_NO_WARNING, standalone=True,
                           page_topk="error", page_backends=("flashinfer", "fa3", "triton"),
                           trtllm_topk_error=True, max_running_warning=True, cpu_overlap=True,
                           sync_v2_warning=True, none_topk_crashes=True)
_R["0.5.23"] = SglangRules("0.5.23", f"{_HOOK} 0.5.23", auto_414=_AUTO_314_0_5_14, auto_other=(3, 1, 4),
                           mtp_archs=_MTP_0_5_22, mtp_warning_exempt=_MTP_NO_WARNING, standalone=True,
                           page_topk="error", page_backends=("flashinfer", "fa3", "triton"),
                           trtllm_topk_error=True, max_running_warning=True, cpu_overlap=True,
                           sync_v2_warning=True, none_topk_crashes=True)
SGLANG_RULES = sorted(_R.values(), key=lambda r: parse_version(r.version))
_GROK = ("Grok1ForCausalLM", "Grok1VForCausalLM")  # (5, 4, 8) in every version read

# Architecture names any rule above mentions, plus common ones that simply take the
# "all other models" branch; others are accepted with a note.
KNOWN_ARCHS = frozenset(
    _AUTO_314_0_5_14 + _MTP_0_5_22 + _GROK + ("LlamaForCausalLM",) + (
        "Qwen2ForCausalLM", "Qwen3ForCausalLM", "Qwen3MoeForCausalLM", "Qwen2MoeForCausalLM",
        "MistralForCausalLM", "MixtralForCausalLM", "Gemma2ForCausalLM", "Gemma3ForCausalLM",
        "Phi3ForCausalLM", "Llama4ForConditionalGeneration", "KimiK25ForConditionalGeneration",
        "Qwen3NextForCausalLM", "MiniMaxM2ForCausalLM"))


def rules_for(version: str) -> tuple[SglangRules, list[str]]:
    """The rules in force for `version` (PEP 440 order: 0.4.4.post2 is its own release), and
    notes when they are another row's."""
    from packaging.version import Version

    parse_version(version)  # bad input -> EagleLabError
    asked = Version(version.strip().lstrip("v"))
    read = [(Version(r.version), r) for r in SGLANG_RULES]
    below = [r for v, r in read if v <= asked]
    if not below:
        first = read[0][1]
        return first, [f"version {version} is older than any read ({first.version}): "
                       f"used the rules of {first.version}"]
    rules = below[-1]
    if Version(rules.version) == asked:
        return rules, []
    if parse_version(version) > parse_version(LATEST_SGLANG):
        return rules, [f"unknown version {version}: used the rules of {rules.version}"]
    if version in PUBLISHED_SGLANG or version_str(parse_version(version)) in PUBLISHED_SGLANG:
        return rules, [f"sglang {version}: the rules of {rules.version} (every release from 0.4.0 to "
                       f"{LATEST_SGLANG} was read; none between them changes a field the reading covers, "
                       "docs/sources.md section 8)"]
    return rules, [f"sglang {version} (not a published release): used the rules of {rules.version}, "
                   "the nearest version read below it"]


# ----------------------------------------------------------------------------- the config



def _auto_choice(rules: SglangRules, algorithm: str, arch: str) -> tuple:
    """`_auto_choose_speculative_params` of that version."""
    if rules.standalone and algorithm == "STANDALONE":
        return (3, 1, 4)
    if arch == "LlamaForCausalLM" or arch in _GROK:
        return (5, 4, 8)
    if arch in rules.auto_414:
        return (3, 1, 4)
    return rules.auto_other


def resolve_sglang_rules(spec: SpecConfig, version: str = LATEST_SGLANG,
                         arch: str = "LlamaForCausalLM") -> ResolvedSpec:
    """Replay SGLang's EAGLE-family argument handling for `version` (order as in the source)."""
    rules, notes = rules_for(version)
    res = ResolvedSpec(engine="sglang", version=version, arch=arch, algorithm=spec.algorithm,
                       num_steps=spec.num_steps, topk=spec.topk,
                       num_draft_tokens=spec.num_draft_tokens, page_size=spec.page_size or 1,
                       attention_backend=spec.attention_backend,
                       max_running_requests=spec.max_running_requests,
                       cuda_graph_max_bs=spec.cuda_graph_max_bs, notes=notes,
                       rules_version=rules.version, asked=spec)
    res.notes.append(f"rules: {rules.source}")
    warn = res.warnings.append
    algorithm = "EAGLE" if spec.algorithm == "NEXTN" else spec.algorithm
    if spec.device == "cpu" and res.attention_backend is None:
        res.attention_backend = "torch_native"  # overrides.py: no AMX -> torch_native
    if spec.attention_backend == "trtllm_mha" and spec.page_size is None and rules.trtllm_topk_error:
        res.page_size = 64  # "TensorRT-LLM MHA only supports page_size of 16, 32, 64 or 128"

    if rules.static_defaults is not None:  # 0.4.3-0.4.4.post3: fixed defaults, nothing adjusted
        if algorithm != "EAGLE" and not (rules.eagle3 and algorithm == "EAGLE3"):
            res.error = (f"ValueError: SGLang {rules.version} knows only the EAGLE algorithm "
                         f"(EAGLE3 came later); {spec.algorithm} is refused")
            return res
        if rules.overlap_warning:
            warn(rules.overlap_warning)
        steps, topk, ndt = rules.static_defaults
        res.num_steps = spec.num_steps or steps
        res.topk = spec.topk or topk
        res.num_draft_tokens = spec.num_draft_tokens or ndt
        return record_changes(res, spec)
    if algorithm == "STANDALONE" and not rules.standalone:
        res.error = f"ValueError: STANDALONE speculative decoding does not exist in {rules.version}"
        return res

    if res.max_running_requests is None:
        res.max_running_requests = 48
        if rules.max_running_warning:
            warn(W_MAX_RUNNING)
    overlap_off = spec.disable_overlap_schedule
    if rules.overlap_warning:
        warn(rules.overlap_warning)
    if rules.cpu_overlap and spec.device == "cpu" and not overlap_off:
        overlap_off = True
        warn(W_CPU_OVERLAP)
    if rules.sync_v2_warning and overlap_off:
        warn(W_SYNC_V2)

    has_draft = spec.draft_model_path is not None or algorithm == "EAGLE3"
    if arch in rules.mtp_archs and has_draft and arch not in rules.mtp_warning_exempt:
        warn(W_MTP_PATH)

    if res.num_steps is None:
        if res.topk is not None or res.num_draft_tokens is not None:
            res.error = ("AssertionError: SGLang chooses steps, topk and draft tokens together: "
                         "with speculative_num_steps unset, speculative_eagle_topk and "
                         "speculative_num_draft_tokens must be unset too")
            return res
        res.num_steps, res.topk, res.num_draft_tokens = _auto_choice(rules, algorithm, arch)
        res.notes.append(f"steps/topk/draft tokens chosen by SGLang for {arch}: "
                         f"{res.num_steps}/{res.topk}/{res.num_draft_tokens}")

    if rules.trtllm_topk_error and res.attention_backend == "trtllm_mha":
        if res.topk is None:
            return _none_topk(res)
        if res.topk > 1:
            res.error = f"ValueError: {E_TRTLLM}"
            return res

    if rules.page_topk == "reset_topk" and res.page_size > 1:
        if res.topk is None:
            return _none_topk(res)
        if res.topk > 1:
            res.topk = 1
            warn(W_TOPK_PAGE)

    if rules.topk1_adjust and res.topk == 1 and res.num_draft_tokens != res.num_steps + 1:
        warn(W_ADJUST)
        res.num_draft_tokens = res.num_steps + 1

    if rules.page_topk == "error":
        if res.topk is None and rules.none_topk_crashes:
            return _none_topk(res)
        if res.topk > 1 and res.page_size > 1 and res.attention_backend not in rules.page_backends:
            if res.attention_backend is None:
                res.notes.append(
                    f"topk {res.topk} with page_size {res.page_size}: SGLang starts only if the "
                    f"attention backend it picks is one of {', '.join(rules.page_backends)}")
            elif rules.page_backends == ("flashinfer", "fa3", "triton"):
                res.error = (f"ValueError: speculative_eagle_topk > 1 with page_size > 1 is only "
                             f"supported on {rules.page_backends}; got attention_backend="
                             f"{res.attention_backend!r}. Use page_size == 1 or one of those "
                             "backends.")
                return res
            else:
                res.error = f"ValueError: {E_PAGE_FLASHINFER}"
                return res
    return record_changes(res, spec)


def _none_topk(res: ResolvedSpec) -> ResolvedSpec:
    res.error = ("TypeError: '>' not supported between instances of 'NoneType' and 'int' "
                 "(speculative_num_steps given without speculative_eagle_topk)")
    return res

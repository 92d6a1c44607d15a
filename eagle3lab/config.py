"""Which speculative configuration actually runs: SGLang's (and vLLM's) rules, per version.

The seed's first bug: `--speculative-num-steps 1 --speculative-eagle-topk 1
--speculative-num-draft-tokens 16` runs with 2 draft tokens, because SGLang sets
num_draft_tokens = num_steps + 1 whenever topk == 1 and says so in one warning line.
`SpecConfig(...).resolve(...)` predicts that before launch;
`eagle3lab.sources.logfile.config_from_log` finds it afterwards.

Every rule below was read in the SGLang wheels' source (`pip download --no-deps sglang==X`):
`sglang/srt/server_args.py` up to 0.5.9, and `sglang/srt/arg_groups/speculative_hook.py`
(`_handle_eagle_family`, `_auto_choose_speculative_params`) from 0.5.14 on. Versions read:
0.4.3 0.4.6 0.4.10 0.5.1 0.5.2 0.5.5 0.5.7 0.5.9 0.5.14 0.5.18 0.5.22 0.5.23. A version
between two read ones uses the rules of the nearest read version below it, and says so.
`resolve(..., use_sglang=True)` asks the installed SGLang instead (see sglang_resolver.py);
tests/test_config_sglang.py checks that both agree.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field, replace

from eagle3lab.errors import EagleLabError
from eagle3lab.versions import LATEST_SGLANG, SGLANG_RELEASES

# ----------------------------------------------------------------------------- versions

PUBLISHED_SGLANG = SGLANG_RELEASES  # eagle3lab.versions: tells "published but not read" from "unknown"


def parse_version(text: str) -> tuple[int, int, int]:
    """'0.5.2', '0.5.2.post1', '0.5.0rc2' -> (0, 5, 2); anything else is bad input."""
    m = re.fullmatch(r"v?(\d+)\.(\d+)(?:\.(\d+))?((?:\.?(?:post|rc|dev|a|b)\d*)*)", text.strip())
    if not m:
        raise EagleLabError(f"not a version number: {text!r} (expected e.g. 0.5.23)")
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def version_str(v: tuple[int, int, int]) -> str:
    return ".".join(map(str, v))


# ----------------------------------------------------------------------------- SGLang rules

# Architectures in SGLang's `_auto_choose_speculative_params` (3, 1, 4) branch, as they grew.
_DS = ("DeepseekV3ForCausalLM", "DeepseekV2ForCausalLM")
_AUTO_314_0_5_1 = _DS + ("GptOssForCausalLM",)
_AUTO_314_0_5_5 = ("DeepseekV32ForCausalLM",) + _AUTO_314_0_5_1 + (
    "BailingMoeForCausalLM", "BailingMoeV2ForCausalLM")
_AUTO_314_0_5_7 = _AUTO_314_0_5_5 + (
    "Glm4MoeForCausalLM", "MistralLarge3ForCausalLM", "PixtralForConditionalGeneration",
    "MiMoV2FlashForCausalLM")
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


_SA = "sglang/srt/server_args.py"
_HOOK = "sglang/srt/arg_groups/speculative_hook.py (_handle_eagle_family)"
SGLANG_RULES = [
    # 0.4.3: EAGLE only; fields default to steps=5, topk=8, draft=64; nothing adjusted.
    SglangRules("0.4.3", f"{_SA} 0.4.3 __post_init__", eagle3=False, static_defaults=(5, 8, 64)),
    # 0.4.6: auto (5,4,8) for every arch; page_size>1 silently forces topk=1 (then the
    # topk==1 rule shrinks the draft tokens too); "Overlap scheduler is disabled ...".
    SglangRules("0.4.6", f"{_SA} 0.4.6 __post_init__ + auto_choose_speculative_params",
                page_topk="reset_topk", overlap_warning=W_OVERLAP_0_4),
    # 0.4.10: DeepSeek gets (3,1,4); the page_size rule is gone (sglang PR#7643 per
    # docs/sources.md); MTP archs get their draft path filled in.
    SglangRules("0.4.10", f"{_SA} 0.4.10 __post_init__ + auto_choose_speculative_params",
                auto_414=_DS, mtp_archs=_MTP_0_4_10, overlap_warning=W_OVERLAP_0_4),
    # 0.5.1: GptOss joins (3,1,4); trtllm_mha refuses topk > 1.
    SglangRules("0.5.1", f"{_SA} 0.5.1 __post_init__", auto_414=_AUTO_314_0_5_1,
                mtp_archs=_MTP_0_4_10, trtllm_topk_error=True, overlap_warning=W_OVERLAP_0_4),
    # 0.5.2: topk>1 with page_size>1 refused unless flashinfer; STANDALONE.
    SglangRules("0.5.2", f"{_SA} 0.5.2 _handle_speculative_decoding", auto_414=_AUTO_314_0_5_1,
                mtp_archs=_MTP_0_4_10, standalone=True, page_topk="error",
                page_backends=("flashinfer",), trtllm_topk_error=True,
                overlap_warning=W_OVERLAP_0_4, none_topk_crashes=True),
    # 0.5.5: the "Max running requests is reset to 48" warning appears.
    SglangRules("0.5.5", f"{_SA} 0.5.5 _handle_speculative_decoding", auto_414=_AUTO_314_0_5_5,
                mtp_archs=_MTP_0_5_5, standalone=True, page_topk="error",
                page_backends=("flashinfer",), trtllm_topk_error=True,
                max_running_warning=True, overlap_warning=W_OVERLAP_0_5_5,
                none_topk_crashes=True),
    # 0.5.7: fa3 also allowed with topk>1 and page_size>1; new overlap wording.
    SglangRules("0.5.7", f"{_SA} 0.5.7 _handle_speculative_decoding", auto_414=_AUTO_314_0_5_7,
                mtp_archs=_MTP_0_5_7, mtp_warning_exempt=_MTP_NO_WARNING, standalone=True,
                page_topk="error", page_backends=("flashinfer", "fa3"), trtllm_topk_error=True,
                max_running_warning=True, overlap_warning=W_OVERLAP_0_5_7,
                none_topk_crashes=True),
    # 0.5.9: the "all other models" default becomes (3,1,4).
    SglangRules("0.5.9", f"{_SA} 0.5.9 auto_choose_speculative_params",
                auto_414=_AUTO_314_0_5_9, auto_other=(3, 1, 4), mtp_archs=_MTP_0_5_9,
                mtp_warning_exempt=_MTP_NO_WARNING, standalone=True, page_topk="error",
                page_backends=("flashinfer", "fa3"), trtllm_topk_error=True,
                max_running_warning=True, overlap_warning=W_OVERLAP_0_5_7,
                none_topk_crashes=True),
    # 0.5.14: rules move to arg_groups/speculative_hook.py; spec v2 (overlap) is the
    # default path; flashinfer/fa3/triton implement the paged tree.
    SglangRules("0.5.14", f"{_HOOK} 0.5.14", auto_414=_AUTO_314_0_5_14, auto_other=(3, 1, 4),
                mtp_archs=_MTP_0_5_14, mtp_warning_exempt=_MTP_NO_WARNING, standalone=True,
                page_topk="error", page_backends=("flashinfer", "fa3", "triton"),
                trtllm_topk_error=True, max_running_warning=True, sync_v2_warning=True,
                none_topk_crashes=True),
    # 0.5.18: device=cpu disables the overlap schedule, with a warning.
    SglangRules("0.5.18", f"{_HOOK} 0.5.18", auto_414=_AUTO_314_0_5_14, auto_other=(3, 1, 4),
                mtp_archs=_MTP_0_5_14, mtp_warning_exempt=_MTP_NO_WARNING, standalone=True,
                page_topk="error", page_backends=("flashinfer", "fa3", "triton"),
                trtllm_topk_error=True, max_running_warning=True, cpu_overlap=True,
                sync_v2_warning=True, none_topk_crashes=True),
    SglangRules("0.5.22", f"{_HOOK} 0.5.22", auto_414=_AUTO_314_0_5_14, auto_other=(3, 1, 4),
                mtp_archs=_MTP_0_5_22, mtp_warning_exempt=_MTP_NO_WARNING, standalone=True,
                page_topk="error", page_backends=("flashinfer", "fa3", "triton"),
                trtllm_topk_error=True, max_running_warning=True, cpu_overlap=True,
                sync_v2_warning=True, none_topk_crashes=True),
    SglangRules("0.5.23", f"{_HOOK} 0.5.23", auto_414=_AUTO_314_0_5_14, auto_other=(3, 1, 4),
                mtp_archs=_MTP_0_5_22, mtp_warning_exempt=_MTP_NO_WARNING, standalone=True,
                page_topk="error", page_backends=("flashinfer", "fa3", "triton"),
                trtllm_topk_error=True, max_running_warning=True, cpu_overlap=True,
                sync_v2_warning=True, none_topk_crashes=True),
]
_GROK = ("Grok1ForCausalLM", "Grok1VForCausalLM")  # (5, 4, 8) in every version read

# Architecture names any rule above mentions, plus common ones that simply take the
# "all other models" branch; others are accepted with a note.
KNOWN_ARCHS = frozenset(
    _AUTO_314_0_5_14 + _MTP_0_5_22 + _GROK + ("LlamaForCausalLM",) + (
        "Qwen2ForCausalLM", "Qwen3ForCausalLM", "Qwen3MoeForCausalLM", "Qwen2MoeForCausalLM",
        "MistralForCausalLM", "MixtralForCausalLM", "Gemma2ForCausalLM", "Gemma3ForCausalLM",
        "Phi3ForCausalLM", "Llama4ForConditionalGeneration", "KimiK25ForConditionalGeneration",
        "Qwen3NextForCausalLM", "MiniMaxM2ForCausalLM"))
_ARCH_PATTERN = re.compile(r"[A-Z][A-Za-z0-9_]*(For[A-Za-z]+|Model)")


def rules_for(version: str) -> tuple[SglangRules, list[str]]:
    """The rules in force for `version`, and notes when they are borrowed from another."""
    asked = parse_version(version)
    read = [(parse_version(r.version), r) for r in SGLANG_RULES]
    below = [r for v, r in read if v <= asked]
    if not below:
        first = read[0][1]
        return first, [f"version {version} is older than any read ({first.version}): "
                       f"used the rules of {first.version}"]
    rules = below[-1]
    if parse_version(rules.version) == asked:
        return rules, []
    if asked > parse_version(LATEST_SGLANG):
        return rules, [f"unknown version {version}: used the rules of {rules.version}"]
    published = version in PUBLISHED_SGLANG or version_str(asked) in PUBLISHED_SGLANG
    what = "source not read" if published else "not a published release"
    return rules, [f"sglang {version} ({what}): used the rules of {rules.version}, "
                   "the nearest version read below it"]


# ----------------------------------------------------------------------------- the config


@dataclass(frozen=True)
class ConfigFinding:
    """One lint result: a short code, 'error' | 'warning' | 'info', and the reason with numbers."""

    code: str
    severity: str
    message: str


ALGORITHMS = ("EAGLE3", "EAGLE", "NEXTN", "STANDALONE")
_POSITIVE_INT_FIELDS = ("num_steps", "topk", "num_draft_tokens", "page_size",
                        "cuda_graph_max_bs", "max_running_requests")


@dataclass(frozen=True)
class SpecConfig:
    """The speculative settings a user asks for (None = not given, the engine decides)."""

    algorithm: str = "EAGLE3"
    num_steps: int | None = None
    topk: int | None = None
    num_draft_tokens: int | None = None
    page_size: int | None = None
    attention_backend: str | None = None
    cuda_graph_max_bs: int | None = None
    max_running_requests: int | None = None
    device: str = "cuda"
    disable_overlap_schedule: bool = False
    model_path: str | None = None
    draft_model_path: str | None = None

    def __post_init__(self):
        algo = str(self.algorithm or "").upper()
        if algo not in ALGORITHMS:
            raise EagleLabError(f"speculative algorithm {self.algorithm!r} is not modelled; "
                                f"choose one of {', '.join(ALGORITHMS)}")
        object.__setattr__(self, "algorithm", algo)
        for name in _POSITIVE_INT_FIELDS:
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int):
                raise EagleLabError(f"{name} must be a whole number, got {value!r}")
            if value < 1:
                raise EagleLabError(f"{name} must be at least 1, got {value}")

    # --------------------------------------------------------------- construction

    @classmethod
    def from_flags(cls, argv: list[str] | str) -> "SpecConfig":
        """Parse `python -m sglang.launch_server` flags (other known flags are accepted and ignored)."""
        return cls(**parse_launch_flags(argv))

    from_cli = from_flags

    @classmethod
    def from_server_info(cls, info: dict) -> "SpecConfig | None":
        """What a running server says it runs (SGLang's /get_server_info, top level or nested
        under `server_args`; the lab front end answers the same); None without speculation."""
        fields = server_info_fields(info)
        if str(fields.get("algorithm") or "").upper() not in ALGORITHMS:
            return None
        return cls(**fields)

    def asked(self) -> dict:
        return asdict(self)

    def given(self) -> dict:
        """The fields set away from their defaults (what a launch command must pass)."""
        defaults = SpecConfig()
        return {k: v for k, v in asdict(self).items() if v != getattr(defaults, k)}

    def to_flags(self, engine: str = "sglang") -> list[str]:
        """Launch flags: SGLang's `launch_server`, or the lab server (`eagle3lab serve`, which
        takes SGLang's speculative flags and nothing else). `model_path` is left to the caller."""
        if engine not in ("sglang", "lab"):
            raise EagleLabError(f"no launch flags for engine {engine!r}: use 'sglang' or 'lab'")
        given = self.given()
        if engine == "lab":
            extra = sorted(set(given) - set(LAB_FIELDS) - {"model_path", "device"})
            if extra:
                raise EagleLabError(f"the lab server takes only {', '.join(LAB_FIELDS)}; "
                                    f"not {', '.join(extra)}")
        flags = ["--speculative-algorithm", self.algorithm]
        for name, (flag, _) in SPEC_NAMES.items():
            if name in ("algorithm", "model_path") or name not in given:
                continue
            value = given[name]
            flags += [flag] if value is True else [flag, str(value)]
        return flags

    def server_info(self) -> dict:
        """The speculative keys of /get_server_info for this config, as the lab front end
        reports them (SGLang's ServerArgs names)."""
        return {SPEC_NAMES[name][1]: getattr(self, name) for name in LAB_FIELDS}

    def to_engine_params(self):
        """The lab engine's `SpecParams` (needs the three numbers: resolve the config first)."""
        from eagle3lab.engine.speculate import SpecParams

        missing = [n for n in ("num_steps", "topk", "num_draft_tokens") if getattr(self, n) is None]
        if missing:
            raise EagleLabError(f"{', '.join(missing)} unset: resolve the config first "
                                "(SpecConfig.resolve(...).effective)")
        return SpecParams(self.num_steps, self.topk, self.num_draft_tokens)

    # --------------------------------------------------------------- resolution

    def resolve(self, engine: str = "sglang", version: str | None = None,
                arch: str = "LlamaForCausalLM", use_sglang: bool = False) -> "ResolvedSpec":
        """What the engine will actually run for this config on a target of class `arch`."""
        engine, version = _split_engine(engine, version)
        arch_notes = check_arch(arch)
        if engine == "vllm":
            if use_sglang:
                raise EagleLabError("use_sglang applies to engine='sglang' only")
            res = resolve_vllm(self, version, arch)
        elif use_sglang:  # already linted
            res = resolve_with_sglang([self], version=version, arch=arch)[0]
            res.notes[:0] = arch_notes
            return res
        else:
            res = resolve_sglang_rules(self, version, arch)
        res.notes[:0] = arch_notes
        res.findings.extend(lint(self, res))
        return res


def _split_engine(engine: str, version: str | None) -> tuple[str, str]:
    name, _, pinned = (engine or "sglang").partition("==")
    name = name.strip().lower()
    if name not in ("sglang", "vllm"):
        raise EagleLabError(f"unknown engine {engine!r}: use sglang[==X] or vllm[==X]")
    if pinned and version and pinned != version:
        raise EagleLabError(f"two versions given: {engine} and version={version}")
    version = pinned or version or (LATEST_SGLANG if name == "sglang" else "main")
    if name == "sglang":
        parse_version(version)
    return name, version


def check_arch(arch: str) -> list[str]:
    """Bad names are errors; well-formed but unknown ones get a note on the branch they take."""
    if not arch or not _ARCH_PATTERN.fullmatch(arch):
        raise EagleLabError(f"{arch!r} is not an architecture name: pass the target's "
                            "config.json architectures[0], e.g. LlamaForCausalLM")
    if arch in KNOWN_ARCHS:
        return []
    return [f"architecture {arch} is not named in SGLang's rules: it takes the "
            "'all other models' branch of the automatic choice"]


@dataclass
class ResolvedSpec:
    """What runs: the effective values, the engine's own warnings, our findings, what changed."""

    engine: str
    version: str
    arch: str
    algorithm: str
    num_steps: int | None
    topk: int | None
    num_draft_tokens: int | None
    page_size: int | None = None
    attention_backend: str | None = None
    max_running_requests: int | None = None
    cuda_graph_max_bs: int | None = None
    warnings: list[str] = field(default_factory=list)
    findings: list[ConfigFinding] = field(default_factory=list)
    changed: dict = field(default_factory=dict)   # field -> (asked, effective)
    notes: list[str] = field(default_factory=list)
    error: str | None = None                      # the engine refuses to start: why
    source: str = "rules"                         # "rules" (this module) or "sglang" (real)
    rules_version: str | None = None
    asked: SpecConfig | None = None

    @property
    def differs(self) -> bool:
        """True when what runs is not what was asked (or nothing runs)."""
        return bool(self.changed) or self.error is not None

    @property
    def triple(self) -> tuple:
        return (self.num_steps, self.topk, self.num_draft_tokens)

    @property
    def effective(self) -> SpecConfig:
        """The config that runs, as a SpecConfig (what to launch, report or decode with)."""
        if self.error:
            raise EagleLabError(f"{self.engine} {self.version} will not start: {self.error}")
        asked = self.asked or SpecConfig(algorithm=self.algorithm)
        return replace(asked, algorithm=self.algorithm, num_steps=self.num_steps, topk=self.topk,
                       num_draft_tokens=self.num_draft_tokens, page_size=self.page_size,
                       attention_backend=self.attention_backend,
                       max_running_requests=self.max_running_requests,
                       cuda_graph_max_bs=self.cuda_graph_max_bs)

    def to_engine_params(self):
        """The lab engine's SpecParams for what runs."""
        return self.effective.to_engine_params()

    def to_frame(self):
        """One row per setting: asked, effective, changed, and the reason if any."""
        import pandas as pd

        asked = self.asked.asked() if self.asked else {}
        reasons = {f.code: f.message for f in self.findings}
        rows = []
        for name in ("num_steps", "topk", "num_draft_tokens", "page_size", "attention_backend",
                     "max_running_requests", "cuda_graph_max_bs"):
            rows.append({"setting": name, "asked": asked.get(name),
                         "effective": getattr(self, name), "changed": name in self.changed,
                         "why": _why(name, reasons)})
        return pd.DataFrame(rows)

    def findings_frame(self):
        import pandas as pd

        return pd.DataFrame([asdict(f) for f in self.findings],
                            columns=["code", "severity", "message"])

    def summary(self) -> str:
        """Human-readable report (what the CLI prints)."""
        lines = [f"{self.engine} {self.version} ({self.source}"
                 + (f", rules of {self.rules_version}" if self.rules_version
                    and self.rules_version != self.version else "")
                 + f"), target {self.arch}, {self.algorithm}"]
        if self.error:
            lines.append(f"REFUSED TO START: {self.error}")
        lines.append(f"effective: num_steps={self.num_steps} topk={self.topk} "
                     f"num_draft_tokens={self.num_draft_tokens} page_size={self.page_size} "
                     f"max_running_requests={self.max_running_requests}")
        for name, (was, now) in self.changed.items():
            lines.append(f"changed: {name} {was} -> {now}")
        for note in self.notes:
            lines.append(f"note: {note}")
        for w in self.warnings:
            lines.append(f"engine warning: {w}")
        for f in self.findings:
            lines.append(f"{f.severity}: [{f.code}] {f.message}")
        return "\n".join(lines)


_WHY_CODES = {"num_draft_tokens": ("draft-tokens-adjusted", "draft-tokens-unset",
                                   "draft-tokens-unreachable", "vllm-chain"),
              "topk": ("topk-reset-page", "vllm-chain", "topk-unset"),
              "num_steps": ("auto-params", "depth-untrained"),
              "max_running_requests": ("max-running-reset",),
              "cuda_graph_max_bs": ("cuda-graph-below-running",),
              "page_size": ("page-size-topk",)}


def _why(name: str, reasons: dict) -> str:
    return " ".join(reasons[c] for c in _WHY_CODES.get(name, ()) if c in reasons)


# ----------------------------------------------------------------------------- SGLang (rules)


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

    if rules.static_defaults is not None:  # 0.4.3
        if algorithm != "EAGLE":
            res.error = (f"ValueError: SGLang {rules.version} knows only the EAGLE algorithm "
                         f"(EAGLE3 came later); {spec.algorithm} is refused")
            return res
        steps, topk, ndt = rules.static_defaults
        res.num_steps = spec.num_steps or steps
        res.topk = spec.topk or topk
        res.num_draft_tokens = spec.num_draft_tokens or ndt
        return _finish(res, spec)
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

    if res.topk == 1 and res.num_draft_tokens != res.num_steps + 1:
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
    return _finish(res, spec)


def _none_topk(res: ResolvedSpec) -> ResolvedSpec:
    res.error = ("TypeError: '>' not supported between instances of 'NoneType' and 'int' "
                 "(speculative_num_steps given without speculative_eagle_topk)")
    return res


def _finish(res: ResolvedSpec, spec: SpecConfig) -> ResolvedSpec:
    for name in ("num_steps", "topk", "num_draft_tokens", "page_size", "max_running_requests"):
        asked, now = getattr(spec, name), getattr(res, name)
        if asked is not None and asked != now:
            res.changed[name] = (asked, now)
    return res


# ----------------------------------------------------------------------------- SGLang (real)


def _is_speculative_warning(logger: str, message: str) -> bool:
    """SGLang warnings about speculative decoding (not the platform/deprecation chatter)."""
    text = message.lower()
    return logger.endswith("speculative_hook") or any(
        w in text for w in ("specul", "eagle", "draft"))


def resolve_with_sglang(specs: list[SpecConfig], version: str | None = None,
                        arch: str | list[str] = "LlamaForCausalLM",
                        python: str | None = None) -> list[ResolvedSpec]:
    """Resolve many configs with the installed SGLang's own ServerArgs, in one subprocess."""
    from eagle3lab.sglang_resolver import resolve_with_sglang as run

    archs = [arch] * len(specs) if isinstance(arch, str) else list(arch)
    requests = [{"arch": a, "args": _server_args(s)} for s, a in zip(specs, archs)]
    out = run(requests, python=python)
    installed = out.get("sglang_version") or "?"
    notes = []
    if version and installed != version:
        notes.append(f"asked for sglang {version} but the installed sglang is {installed}: "
                     f"these are {installed}'s answers")
    results = []
    for spec, a, r in zip(specs, archs, out["results"]):
        f = r["fields"]
        res = ResolvedSpec(
            engine="sglang", version=installed, arch=a,
            algorithm=f.get("speculative_algorithm") or spec.algorithm,
            num_steps=f.get("speculative_num_steps"), topk=f.get("speculative_eagle_topk"),
            num_draft_tokens=f.get("speculative_num_draft_tokens"),
            page_size=f.get("page_size"), attention_backend=f.get("attention_backend"),
            max_running_requests=f.get("max_running_requests"),
            cuda_graph_max_bs=_first(f.get("cuda_graph_max_bs_decode"),
                                     f.get("cuda_graph_max_bs")),
            warnings=[m for lg, m in r["warnings"] if _is_speculative_warning(lg, m)],
            notes=list(notes), error=r["error"], source="sglang", rules_version=installed,
            asked=spec)
        res = res if res.error else _finish(res, spec)
        res.findings.extend(lint(spec, res))
        results.append(res)
    return results


def _first(*values):
    return next((v for v in values if v is not None), None)


def outcome(res: ResolvedSpec) -> tuple:
    """What two resolutions must share to agree: the refusal (exception type) or the
    effective values, and the speculative warnings in order."""
    if res.error:
        return ("refused", res.error.split(":")[0]), tuple(res.warnings)
    return ((res.num_steps, res.topk, res.num_draft_tokens, res.page_size,
             res.max_running_requests), tuple(res.warnings))


def compare_with_sglang(specs: list[SpecConfig], arch: str | list[str] = "LlamaForCausalLM",
                        version: str = LATEST_SGLANG, real: list[ResolvedSpec] | None = None):
    """Our rules vs the installed SGLang (or its answers `real`), one row per config."""
    import pandas as pd

    archs = [arch] * len(specs) if isinstance(arch, str) else list(arch)
    if real is None:
        real = resolve_with_sglang(specs, version=version, arch=archs)
    rows = []
    for spec, a, r in zip(specs, archs, real):
        ours = spec.resolve(engine="sglang", version=version, arch=a)
        rows.append({"arch": a, "asked": (spec.num_steps, spec.topk, spec.num_draft_tokens),
                     "page_size": spec.page_size, "device": spec.device,
                     "ours": ours.error or ours.triple, "sglang": r.error or r.triple,
                     "ours_warnings": len(ours.warnings), "sglang_warnings": len(r.warnings),
                     "agree": outcome(ours) == outcome(r)})
    return pd.DataFrame(rows)


def _server_args(spec: SpecConfig) -> dict:
    """ServerArgs keyword arguments for `spec` (the draft path is the config-only dir)."""
    args = {SPEC_NAMES[name][1]: getattr(spec, name) for name in _SERVER_ARGS_ALWAYS}
    for name in ("page_size", "cuda_graph_max_bs"):
        if getattr(spec, name) is not None:
            args[SPEC_NAMES[name][1]] = getattr(spec, name)
    if spec.draft_model_path is not None or spec.algorithm == "EAGLE3":
        args["speculative_draft_model_path"] = "@model"
    return args


# ----------------------------------------------------------------------------- vLLM

VLLM_SOURCE = ("vllm/config/speculative.py (SpeculativeConfig.num_speculative_tokens, gt=0, "
               "else taken from the draft config) and the EAGLE proposer "
               "(vllm/v1/spec_decode/eagle.py, later llm_base_proposer.py): one draft token, "
               "then `for _ in range(self.num_speculative_tokens - 1)`, a chain")


def resolve_vllm(spec: SpecConfig, version: str = "main",
                 arch: str = "LlamaForCausalLM") -> ResolvedSpec:
    """vLLM: num_speculative_tokens = k drafts per step, drafted as a chain (no topk tree).

    Reported in SGLang's terms: num_steps = k, topk = 1, num_draft_tokens = k + 1 (the
    verify width: k drafts plus the root). Source: VLLM_SOURCE (vllm main, read via search).
    For `vllm serve` flags (method guess, draft max length, batch budget, refusals) see
    `eagle3lab.vllm_rules.resolve_vllm_serve`, checked against vLLM 0.32.0's own EngineArgs.
    """
    k = spec.num_steps
    if k is None and spec.num_draft_tokens is not None:
        k = spec.num_draft_tokens - 1
    res = ResolvedSpec(engine="vllm", version=version, arch=arch, algorithm=spec.algorithm,
                       num_steps=k, topk=1, num_draft_tokens=None if k is None else k + 1,
                       page_size=spec.page_size, attention_backend=spec.attention_backend,
                       max_running_requests=spec.max_running_requests,
                       cuda_graph_max_bs=spec.cuda_graph_max_bs, asked=spec,
                       notes=[f"rules: {VLLM_SOURCE}",
                              "num_speculative_tokens = num_steps; reported as SGLang's "
                              "num_draft_tokens = k + 1 (k drafts + the verified root)"])
    if k is None:
        res.error = ("ValueError: num_speculative_tokens must be provided (vLLM takes it from "
                     "the draft config's num_lookahead_tokens when present)")
        return res
    if k < 1:
        res.error = f"ValueError: num_speculative_tokens must be > 0, got {k}"
        return res
    return _finish(res, spec)


# ----------------------------------------------------------------------------- vLLM launch flags
# (eagle3lab.server.launch(backend="vllm") builds `python -m vllm.entrypoints.openai.api_server`
# from these; the CPU settings it adds when no GPU is present live in eagle3lab.server.)

VLLM_METHODS = {"EAGLE3": "eagle3", "EAGLE": "eagle"}
# SpecConfig fields with a vLLM serve flag; the others have no counterpart there.
_VLLM_FIELD_FLAGS = {"max_running_requests": "--max-num-seqs"}
_VLLM_NO_COUNTERPART = ("page_size", "attention_backend", "cuda_graph_max_bs")


def vllm_speculative_config(spec: SpecConfig, draft_path=None) -> dict:
    """vLLM's ``--speculative-config`` for a spec: method, draft model, k drafts per step.

    k = num_steps (else num_draft_tokens - 1), as `resolve_vllm` models it; vLLM drafts a
    chain, so topk > 1 cannot be served (an error here, a warning in `lint`).
    """
    method = VLLM_METHODS.get(spec.algorithm)
    if method is None:
        raise EagleLabError(f"algorithm {spec.algorithm} has no vLLM method here; use "
                            f"{' or '.join(VLLM_METHODS)}")
    if spec.topk is not None and spec.topk > 1:
        raise EagleLabError(f"topk={spec.topk}: vLLM's EAGLE-3 drafts a chain (topk 1); "
                            "give num_steps (num_speculative_tokens) only")
    res = resolve_vllm(spec)
    if res.error:
        raise EagleLabError(f"vLLM refuses this configuration: {res.error}")
    draft = draft_path if draft_path is not None else spec.draft_model_path
    if draft is None:
        raise EagleLabError("vLLM's EAGLE-3 needs a draft model (draft_path)")
    return {"method": method, "model": str(draft), "num_speculative_tokens": res.num_steps}


def to_vllm_flags(spec: SpecConfig, draft_path=None) -> list[str]:
    """`vllm serve` flags for a spec (without model, host, port): the speculative config and
    the fields that have a vLLM flag; a set field without a vLLM counterpart is an error."""
    unmapped = [f for f in _VLLM_NO_COUNTERPART if getattr(spec, f) is not None]
    if spec.disable_overlap_schedule:
        unmapped.append("disable_overlap_schedule")
    if unmapped:
        raise EagleLabError(f"{', '.join(unmapped)}: SGLang settings with no vLLM flag here; "
                            "pass vLLM's own flags as extra arguments instead")
    flags = ["--speculative-config", json.dumps(vllm_speculative_config(spec, draft_path))]
    for name, flag in _VLLM_FIELD_FLAGS.items():
        if getattr(spec, name) is not None:
            flags += [flag, str(getattr(spec, name))]
    return flags


# ----------------------------------------------------------------------------- findings

# SpecForge trains EAGLE-3 drafts with ttt_length 7 (every example config).
TRAINED_DEPTH = 7


def lint(spec: SpecConfig, res: ResolvedSpec) -> list[ConfigFinding]:
    """Our findings about the effective config; each message carries its numbers."""
    out: list[ConfigFinding] = []
    add = lambda code, sev, msg: out.append(ConfigFinding(code, sev, msg))  # noqa: E731
    if res.error:
        add("engine-refuses", "error", f"{res.engine} {res.version} will not start: {res.error}")
        return out
    steps, topk, ndt = res.triple
    if "num_draft_tokens" in res.changed and res.topk == 1:
        was, now = res.changed["num_draft_tokens"]
        add("draft-tokens-adjusted", "warning",
            f"asked {was} draft tokens but topk=1 drafts a chain: {res.engine} verifies "
            f"num_steps + 1 = {steps} + 1 = {now}; to verify {was}, pass "
            f"--speculative-num-steps {was - 1} (or topk > 1 for a tree)")
    if "topk" in res.changed and res.engine == "sglang":
        add("topk-reset-page", "warning",
            f"topk {res.changed['topk'][0]} was reset to 1 because page_size {res.page_size} > 1")
    if spec.num_steps is None and res.engine == "sglang" and steps is not None:
        add("auto-params", "info",
            f"no steps/topk/draft tokens given: SGLang {res.rules_version} picks "
            f"{steps}/{topk}/{ndt} for {res.arch}")
    if steps is not None and topk is None:
        add("topk-unset", "error", f"num_steps={steps} without topk: give --speculative-eagle-topk")
    if steps is not None and topk is not None and topk > 1 and ndt is None:
        add("draft-tokens-unset", "error",
            f"topk={topk} > 1 but num_draft_tokens is unset: SGLang keeps None and the tree "
            "has no verify width; give --speculative-num-draft-tokens")
    if steps and topk and ndt:
        capacity = 1 + steps * topk
        if ndt > capacity:
            add("draft-tokens-unreachable", "warning",
                f"num_draft_tokens={ndt} > 1 + steps x topk = 1 + {steps} x {topk} = {capacity}: "
                f"the draft tree never has that many tokens (bench_speculative.py skips such "
                f"configs); at most {capacity} can be verified")
        if topk > 1 and ndt < steps + 1:
            add("depth-unverifiable", "info",
                f"num_draft_tokens={ndt} < num_steps + 1 = {steps + 1}: at most {ndt - 1} "
                f"draft tokens are verified per step, so the last {steps + 1 - ndt} of "
                f"{steps} draft steps can never be accepted")
        if steps > TRAINED_DEPTH + 1:
            add("depth-untrained", "warning",
                f"num_steps={steps} drafts deeper than the {TRAINED_DEPTH} steps EAGLE-3 drafts "
                f"are trained for (SpecForge ttt_length={TRAINED_DEPTH}); positions beyond "
                f"{TRAINED_DEPTH} are rarely accepted and cost a draft forward each")
        if res.algorithm == "EAGLE3" and steps == 1:
            add("depth-shallow", "info",
                f"num_steps=1 drafts a single token per step (at most 2 tokens per verify); "
                f"EAGLE-3 drafts are trained for {TRAINED_DEPTH}-step rollouts")
        mrr = res.max_running_requests
        if topk > 1 and mrr and mrr > 1:
            add("tree-at-batch", "info",
                f"topk={topk} tree with up to {mrr} running requests: each verify costs "
                f"{ndt} tokens per request; trees pay at batch size 1, chains (topk=1) "
                "usually win at larger batches (EAGLE#269)")
    if (res.engine == "sglang" and topk and topk > 1 and (res.page_size or 1) > 1
            and res.attention_backend is None):
        add("page-size-topk", "warning",
            f"topk={topk} > 1 with page_size={res.page_size}: SGLang {res.rules_version} "
            "refuses this unless the attention backend it picks for your GPU implements the "
            "paged tree (flashinfer/fa3/triton in 0.5.14+, flashinfer only in 0.5.2-0.5.5); "
            "pass --attention-backend to know before launch")
    if spec.max_running_requests is None and res.max_running_requests == 48:
        add("max-running-reset", "info",
            "max_running_requests unset: SGLang caps it at 48 with speculative decoding")
    cg, mrr = res.cuda_graph_max_bs, res.max_running_requests
    if cg is not None and mrr is not None and cg < mrr:
        add("cuda-graph-below-running", "warning",
            f"cuda_graph_max_bs={cg} < max_running_requests={mrr}: decode batches of "
            f"{cg + 1}..{mrr} requests run without CUDA graphs (eager, slower; sglang#33483)")
    if res.engine == "vllm" and spec.topk is not None and spec.topk > 1:
        add("vllm-chain", "warning",
            f"topk={spec.topk} asked, but vLLM's EAGLE-3 drafts a chain of "
            f"num_speculative_tokens={steps} tokens (topk 1)")
    return out


# ----------------------------------------------------------------------------- CLI flags

# The one name table: SpecConfig field -> (SGLang launch flag, SGLang ServerArgs and
# /get_server_info key). Flags, server info and ServerArgs are all derived from it.
SPEC_NAMES = {
    "algorithm": ("--speculative-algorithm", "speculative_algorithm"),
    "num_steps": ("--speculative-num-steps", "speculative_num_steps"),
    "topk": ("--speculative-eagle-topk", "speculative_eagle_topk"),
    "num_draft_tokens": ("--speculative-num-draft-tokens", "speculative_num_draft_tokens"),
    "draft_model_path": ("--speculative-draft-model-path", "speculative_draft_model_path"),
    "page_size": ("--page-size", "page_size"),
    "attention_backend": ("--attention-backend", "attention_backend"),
    "cuda_graph_max_bs": ("--cuda-graph-max-bs", "cuda_graph_max_bs_decode"),
    "max_running_requests": ("--max-running-requests", "max_running_requests"),
    "device": ("--device", "device"),
    "disable_overlap_schedule": ("--disable-overlap-schedule", "disable_overlap_schedule"),
    "model_path": ("--model-path", "model_path"),
}
# Other spellings of the same settings: launch_server aliases, older ServerArgs keys, vLLM.
FLAG_ALIASES = {"--decode-attention-backend": "attention_backend",
                "--cuda-graph-max-bs-decode": "cuda_graph_max_bs", "--model": "model_path",
                "--speculative-draft-model": "draft_model_path",
                "--num-speculative-tokens": "num_steps"}  # vLLM
SERVER_KEY_ALIASES = {"cuda_graph_max_bs": "cuda_graph_max_bs"}
LAB_FIELDS = ("algorithm", "num_steps", "topk", "num_draft_tokens", "draft_model_path")
_SERVER_ARGS_ALWAYS = ("algorithm", "num_steps", "topk", "num_draft_tokens", "max_running_requests",
                       "attention_backend", "device", "disable_overlap_schedule")
_SWITCHES = ("disable_overlap_schedule",)
_FLAG_FIELDS = {flag: name for name, (flag, _) in SPEC_NAMES.items() if name not in _SWITCHES}
_FLAG_FIELDS.update(FLAG_ALIASES)
_SWITCH_FIELDS = {SPEC_NAMES[name][0]: name for name in _SWITCHES}


def server_info_fields(info: dict) -> dict:
    """SpecConfig fields a /get_server_info answer reports (top level, else `server_args`)."""
    nested = info.get("server_args") if isinstance(info.get("server_args"), dict) else {}
    keys = {key: name for name, (_, key) in SPEC_NAMES.items()}
    keys.update({alias: name for alias, name in SERVER_KEY_ALIASES.items()})
    out = {}
    for key, name in keys.items():
        value = info.get(key, nested.get(key))
        if value is not None and name not in out:
            out[name] = value
    return out


def parse_launch_flags(argv: list[str] | str) -> dict:
    """launch_server flags -> SpecConfig keyword arguments; unknown flags are an error."""
    from eagle3lab.sglang_resolver import LAUNCH_FLAGS, SWITCH_FLAGS

    tokens = argv.split() if isinstance(argv, str) else list(argv)
    if tokens[:3] == ["python", "-m", "sglang.launch_server"] or tokens[:3] == ["python3", "-m", "sglang.launch_server"]:
        tokens = tokens[3:]
    values: dict = {}
    unknown, stray = [], []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        i += 1
        if not tok.startswith("--"):
            stray.append(tok)
            continue
        flag, eq, inline = tok.partition("=")
        flag = flag.replace("_", "-")
        flag = _expand_abbreviation(flag, LAUNCH_FLAGS | set(_FLAG_FIELDS))
        if flag in _SWITCH_FIELDS or (flag in SWITCH_FLAGS and flag not in _FLAG_FIELDS):
            if flag in _SWITCH_FIELDS:
                values[_SWITCH_FIELDS[flag]] = True
            continue
        if flag not in LAUNCH_FLAGS and flag not in _FLAG_FIELDS and flag != "--speculative-config":
            unknown.append(flag)
            continue
        if eq:
            value = inline
        elif i < len(tokens) and not tokens[i].startswith("--"):
            value = tokens[i]
            i += 1
        else:
            raise EagleLabError(f"{flag} needs a value")
        if flag == "--speculative-config":
            values.update(_vllm_speculative_config(value))
        elif flag in _FLAG_FIELDS:
            name = _FLAG_FIELDS[flag]
            values[name] = _int_value(flag, value) if name in _POSITIVE_INT_FIELDS else value
    if unknown:
        raise EagleLabError(f"unknown launch_server flag(s): {', '.join(unknown)}")
    if stray:
        raise EagleLabError(f"unexpected argument(s) without a flag: {' '.join(stray)}")
    return values


def _expand_abbreviation(flag: str, known) -> str:
    """argparse (and so launch_server) accepts any unambiguous prefix: --tp for --tp-size."""
    if flag in known:
        return flag
    matches = sorted(k for k in known if k.startswith(flag))
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        raise EagleLabError(f"ambiguous flag {flag}: could be {', '.join(matches[:6])}")
    return flag


def _int_value(flag: str, text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise EagleLabError(f"{flag} takes a whole number, got {text!r}") from None
    if value < 1:
        raise EagleLabError(f"{flag} must be at least 1, got {value}")
    return value


def _vllm_speculative_config(text: str) -> dict:
    """vLLM's --speculative-config JSON: method and num_speculative_tokens."""
    try:
        cfg = json.loads(text)
    except json.JSONDecodeError as exc:
        raise EagleLabError(f"--speculative-config is not JSON: {exc}") from None
    out = {}
    if "num_speculative_tokens" in cfg:
        out["num_steps"] = _int_value("num_speculative_tokens", str(cfg["num_speculative_tokens"]))
    method = str(cfg.get("method", "eagle3")).upper()
    out["algorithm"] = method if method in ALGORITHMS else "EAGLE3"
    if cfg.get("model"):
        out["draft_model_path"] = cfg["model"]
    return out


__all__ = ["SpecConfig", "ResolvedSpec", "ConfigFinding", "SglangRules", "SGLANG_RULES",
           "rules_for", "resolve_sglang_rules", "resolve_with_sglang", "resolve_vllm",
           "lint", "parse_launch_flags", "outcome", "compare_with_sglang",
           "W_ADJUST"]


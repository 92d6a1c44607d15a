"""The speculative config at the bottom of eagle3lab: what a user asks (`SpecConfig`), what an
engine runs (`ResolvedSpec`), the three numbers the lab engine decodes with (`SpecParams`), the
one name table (`SPEC_NAMES`: field -> SGLang flag and server-info key, with the other
spellings; a server's argparse flags are built from it, `add_flag_arguments`, and read back,
`SpecConfig.from_args`), the chain rule k -> (k, 1, k + 1), the one `ENGINE==VERSION` parser, and
the engine versions eagle3lab knows (every SGLang release from 0.4.0 on, PyPI 2026-11; the vLLM
release its rules were read in; `LATEST`, the newest per engine). See docs/sources.md.

Imports errors and the standard library only: every room above may use it. Resolving a config
is an engine's work: `SpecConfig.resolve` calls the resolver `eagle3lab.engines.effective` registers here
(`set_resolver`), so this module needs nothing above it.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, replace

from eagle3lab.errors import EagleLabError

# ----------------------------------------------------------------------------- versions

SGLANG_RELEASES = tuple((
    "0.4.0 0.4.1 0.4.2 0.4.3 0.4.4 0.4.4.post1 0.4.4.post3 0.4.5 0.4.6 0.4.7 0.4.8 0.4.9 0.4.10 "
    "0.5.0rc0 0.5.0rc1 0.5.0rc2 0.5.1 0.5.2 0.5.3 0.5.4 0.5.5 0.5.6 0.5.7 0.5.8 0.5.9 0.5.10 "
    "0.5.11 0.5.12 0.5.13 0.5.14 0.5.15 0.5.16 0.5.17 0.5.18 0.5.19 0.5.20 0.5.21 0.5.22 "
    "0.5.23").split())
LATEST_SGLANG = SGLANG_RELEASES[-1]

# Capture rules (eagle3lab/engines/sglang/sglang_capture.py): every release from the first EAGLE-3 capable one,
# 0.4.4, read; the 0.5.0 release candidates before rc2 were skipped.
SGLANG_CAPTURE_READ = tuple(v for v in SGLANG_RELEASES[SGLANG_RELEASES.index("0.4.4"):]
                            if v not in ("0.5.0rc0", "0.5.0rc1"))
# The vLLM release whose source eagle3lab's vLLM rules were read in and checked against.
VLLM_VERSION = "0.32.0"
# The newest version per engine: the default wherever a version is not given.
LATEST = {"sglang": LATEST_SGLANG, "vllm": VLLM_VERSION}
PUBLISHED_SGLANG = SGLANG_RELEASES  # tells "published but not read" from "unknown"


def parse_version(text: str) -> tuple[int, int, int]:
    """'0.5.2', '0.5.2.post1', '0.5.0rc2' -> (0, 5, 2); anything else is bad input."""
    m = re.fullmatch(r"v?(\d+)\.(\d+)(?:\.(\d+))?((?:\.?(?:post|rc|dev|a|b)\d*)*)", text.strip())
    if not m:
        raise EagleLabError(f"not a version number: {text!r} (expected e.g. 0.5.23)")
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def version_str(v: tuple[int, int, int]) -> str:
    return ".".join(map(str, v))


def record_changes(res: "ResolvedSpec", spec: "SpecConfig") -> "ResolvedSpec":
    """Note in `res.changed` every asked field the engine ran differently."""
    for name in ("num_steps", "topk", "num_draft_tokens", "page_size", "max_running_requests"):
        asked, now = getattr(spec, name), getattr(res, name)
        if asked is not None and asked != now:
            res.changed[name] = (asked, now)
    return res


def split_engine(text: str, version: str | None = None,
                 default: str = "sglang") -> tuple[str, str | None]:
    """The one `ENGINE==VERSION` parser: 'sglang==0.5.9' -> ('sglang', '0.5.9'), 'vLLM' ->
    ('vllm', version). An '==' with nothing on one side ('sglang==', '==0.5.9') is an error, as
    is a pin that disagrees with `version`; what a missing version means is the caller's to say."""
    name, sep, pinned = str(text or default).strip().partition("==")
    name, pinned = name.strip().lower(), pinned.strip()
    if sep and not (name and pinned):
        raise EagleLabError(f"{str(text).strip()!r}: nothing {'after' if name else 'before'} '==' "
                            "(write ENGINE==VERSION, e.g. sglang==0.5.23, or ENGINE alone for its newest rules)")
    if pinned and version and pinned != version:
        raise EagleLabError(f"two versions given: {text} and version={version}")
    return name, pinned or version


def chain(k: int) -> tuple[int, int, int]:
    """The chain rule: k drafts per step is (num_steps k, topk 1, k + 1 draft tokens verified,
    the root included), what SGLang enforces for topk 1 and how vLLM is reported."""
    return int(k), 1, int(k) + 1


# The label of the run without speculation (notebooks, sweeps, plots).
BASELINE = "no speculation"


# ----------------------------------------------------------------------------- names

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
# The three numbers every engine's effective config comes down to (Observation, logs, rows).
SPEC_KEYS = ("num_steps", "topk", "num_draft_tokens")
# Every spelling a spec dict may use for a field (ours, SGLang's ServerArgs keys, vLLM's) -> field.
FIELD_SPELLINGS = {**{name: name for name in SPEC_NAMES if name not in ("model_path", "device")},
                   **{key: name for name, (_, key) in SPEC_NAMES.items()
                      if name not in ("model_path", "device", "cuda_graph_max_bs")},
                   **SERVER_KEY_ALIASES, "num_speculative_tokens": "num_steps", "eagle_topk": "topk",
                   "draft_path": "draft_model_path"}
LAB_FIELDS = ("algorithm", "num_steps", "topk", "num_draft_tokens", "draft_model_path")
# Who takes SGLang's launch flags (SpecConfig.to_flags), and which fields of them (None: all).
SGLANG_FLAGS_TAKEN_BY = {"sglang": None, "lab": LAB_FIELDS}
_SERVER_ARGS_ALWAYS = ("algorithm", "num_steps", "topk", "num_draft_tokens", "max_running_requests",
                       "attention_backend", "device", "disable_overlap_schedule")
_SWITCHES = ("disable_overlap_schedule",)
_FLAG_FIELDS = {flag: name for name, (flag, _) in SPEC_NAMES.items() if name not in _SWITCHES}
_FLAG_FIELDS.update(FLAG_ALIASES)
_SWITCH_FIELDS = {SPEC_NAMES[name][0]: name for name in _SWITCHES}


def add_flag_arguments(group, fields=LAB_FIELDS, help: dict | None = None) -> None:
    """One argparse flag per field, named by SPEC_NAMES (dest: its server-info key) and typed as
    SpecConfig checks it, so a field added to the table is a flag of every server built on it;
    `SpecConfig.from_args` reads the namespace back."""
    for name in fields:
        flag, key = SPEC_NAMES[name]
        if name in _SWITCHES:
            group.add_argument(flag, dest=key, action="store_true", help=(help or {}).get(name))
        else:
            group.add_argument(flag, dest=key, default=None, help=(help or {}).get(name),
                               type=int if name in _POSITIVE_INT_FIELDS else None)


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
        """Parse `python -m sglang.launch_server` flags (other known flags are accepted and ignored;
        `eagle3lab.engines.effective.parse_launch_flags`, registered below it)."""
        if len(_RESOLVER) < 2:
            raise EagleLabError("no flag parser registered: import eagle3lab.engines.effective")
        return cls(**_RESOLVER[1](argv))

    from_cli = from_flags

    @classmethod
    def from_args(cls, args, fields=LAB_FIELDS) -> "SpecConfig | None":
        """The config an argparse namespace of `add_flag_arguments(fields)` carries (a server's
        argv parsed back into the object it was made from); None without an algorithm."""
        values = {name: getattr(args, SPEC_NAMES[name][1], None) for name in fields}
        if not values.get("algorithm"):
            return None
        return cls(**{name: value for name, value in values.items() if value is not None})

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
        if engine not in SGLANG_FLAGS_TAKEN_BY:
            raise EagleLabError(f"no launch flags for engine {engine!r}: use "
                                + " or ".join(map(repr, SGLANG_FLAGS_TAKEN_BY)))
        given = self.given()
        only = SGLANG_FLAGS_TAKEN_BY[engine]
        if only is not None:
            extra = sorted(set(given) - set(only) - {"model_path", "device"})
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
        missing = [n for n in ("num_steps", "topk", "num_draft_tokens") if getattr(self, n) is None]
        if missing:
            raise EagleLabError(f"{', '.join(missing)} unset: resolve the config first "
                                "(SpecConfig.resolve(...).effective)")
        return SpecParams(self.num_steps, self.topk, self.num_draft_tokens)

    # --------------------------------------------------------------- resolution

    def resolve(self, engine: str = "sglang", version: str | None = None,
                arch: str = "LlamaForCausalLM", use_sglang: bool = False) -> "ResolvedSpec":
        """What the engine will actually run for this config on a target of class `arch`
        (`eagle3lab.engines.effective.resolve`: the engine's rules, then our findings)."""
        if not _RESOLVER:
            raise EagleLabError("no resolver registered: import eagle3lab.engines.effective")
        return _RESOLVER[0](self, engine, version, arch, use_sglang)


# ----------------------------------------------------------------------------- resolution hook

_RESOLVER: list = []


def set_resolver(resolve, parse_flags) -> None:
    """`eagle3lab.engines.effective` registers its `resolve(spec, engine, version, arch, use_sglang)` and
    `parse_launch_flags(argv)` here (they read the engines' rules, which sit above this module)."""
    _RESOLVER[:] = [resolve, parse_flags]


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



@dataclass(frozen=True)
class SpecParams:
    """The effective speculative configuration (SGLang's three numbers)."""

    num_steps: int = 3
    topk: int = 1
    num_draft_tokens: int = 4

    def __post_init__(self):
        if self.num_steps < 1 or self.topk < 1 or self.num_draft_tokens < 2:
            raise ValueError(f"need num_steps >= 1, topk >= 1, num_draft_tokens >= 2; got {self}")

    @classmethod
    def of(cls, spec) -> "SpecParams":
        """From a SpecParams, a config ResolvedSpec, a dict or a (steps, topk, draft) tuple."""
        if spec is None:
            return cls()
        if isinstance(spec, cls):
            return spec
        if isinstance(spec, dict):
            return cls(int(spec["num_steps"]), int(spec["topk"]), int(spec["num_draft_tokens"]))
        if isinstance(spec, (tuple, list)):
            return cls(*(int(x) for x in spec))
        return cls(int(spec.num_steps), int(spec.topk), int(spec.num_draft_tokens))

    @property
    def is_chain(self) -> bool:
        return self.topk == 1

    @property
    def drafts_per_round(self) -> int:
        """Draft tokens verified per round (root excluded)."""
        if self.is_chain:
            return min(self.num_steps, self.num_draft_tokens - 1)
        return min(self.num_draft_tokens - 1, self.topk + (self.num_steps - 1) * self.topk ** 2)


__all__ = ["SpecConfig", "ResolvedSpec", "ConfigFinding", "SpecParams", "SPEC_NAMES", "FLAG_ALIASES",
           "SERVER_KEY_ALIASES", "LAB_FIELDS", "ALGORITHMS", "BASELINE", "LATEST", "LATEST_SGLANG",
           "SGLANG_RELEASES", "VLLM_VERSION", "chain", "split_engine", "parse_version",
           "server_info_fields", "add_flag_arguments"]

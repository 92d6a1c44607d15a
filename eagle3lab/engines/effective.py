"""Which speculative configuration actually runs, and what is wrong with it.

`resolve(spec, engine, version, arch)` (what `SpecConfig.resolve` calls): the architecture
check, the engine's own rules (`eagle3lab.engines.get(engine).resolve`: SGLang's per version in
engines/sglang/rules.py, vLLM's chain in engines/vllm/flags.py, or the installed SGLang with
`use_sglang=True`), then our findings (`lint`). Also the launch-flag parser behind
`SpecConfig.from_flags`. The config itself, its names and versions are `eagle3lab.spec`.
"""

from __future__ import annotations

import json
import re

from eagle3lab import engines, spec as _spec
from eagle3lab.engines.sglang.sglang_rules import KNOWN_ARCHS
from eagle3lab.errors import EagleLabError
from eagle3lab.spec import (_FLAG_FIELDS, _SERVER_ARGS_ALWAYS, _SWITCH_FIELDS, ALGORITHMS,
                            LATEST_SGLANG, SPEC_NAMES, ConfigFinding, ResolvedSpec, SpecConfig,
                            record_changes)

_ARCH_PATTERN = re.compile(r"[A-Z][A-Za-z0-9_]*(For[A-Za-z]+|Model)")
_POSITIVE_INT_FIELDS = ("num_steps", "topk", "num_draft_tokens", "page_size",
                        "cuda_graph_max_bs", "max_running_requests")


def resolve(spec: SpecConfig, engine: str = "sglang", version: str | None = None,
            arch: str = "LlamaForCausalLM", use_sglang: bool = False) -> ResolvedSpec:
    """What the engine will actually run for `spec` on a target of class `arch`."""
    name, version = _spec.split_engine(engine, version)
    if name not in engines.resolving():
        raise EagleLabError(f"unknown engine {engine!r}: use "
                            + " or ".join(f"{n}[==X]" for n in engines.resolving()))
    eng = engines.get(name)
    version = eng.check_version(version)
    arch_notes = check_arch(arch)
    if use_sglang:
        if not eng.asks_itself:
            raise EagleLabError("use_sglang applies to engine='sglang' only")
        res = resolve_with_sglang([spec], version=version, arch=arch)[0]
        res.notes[:0] = arch_notes
        return res
    res = eng.resolve(spec, version, arch)
    res.notes[:0] = arch_notes
    res.findings.extend(lint(spec, res))
    return res


def check_arch(arch: str) -> list[str]:
    """Bad names are errors; well-formed but unknown ones get a note on the branch they take."""
    if not arch or not _ARCH_PATTERN.fullmatch(arch):
        raise EagleLabError(f"{arch!r} is not an architecture name: pass the target's "
                            "config.json architectures[0], e.g. LlamaForCausalLM")
    if arch in KNOWN_ARCHS:
        return []
    return [f"architecture {arch} is not named in SGLang's rules: it takes the "
            "'all other models' branch of the automatic choice"]



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
    from eagle3lab.engines.sglang.sglang_resolver import resolve_with_sglang as run

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
        res = res if res.error else record_changes(res, spec)
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
    own = engines.get(res.engine).lint_codes  # findings about this engine's own rules
    if "num_draft_tokens" in res.changed and res.topk == 1:
        was, now = res.changed["num_draft_tokens"]
        add("draft-tokens-adjusted", "warning",
            f"asked {was} draft tokens but topk=1 drafts a chain: {res.engine} verifies "
            f"num_steps + 1 = {steps} + 1 = {now}; to verify {was}, pass "
            f"--speculative-num-steps {was - 1} (or topk > 1 for a tree)")
    if "topk" in res.changed and "topk-reset-page" in own:
        add("topk-reset-page", "warning",
            f"topk {res.changed['topk'][0]} was reset to 1 because page_size {res.page_size} > 1")
    if spec.num_steps is None and "auto-params" in own and steps is not None:
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
    if ("page-size-topk" in own and topk and topk > 1 and (res.page_size or 1) > 1
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
    if "vllm-chain" in own and spec.topk is not None and spec.topk > 1:
        add("vllm-chain", "warning",
            f"topk={spec.topk} asked, but vLLM's EAGLE-3 drafts a chain of "
            f"num_speculative_tokens={steps} tokens (topk 1)")
    return out



# ----------------------------------------------------------------------------- CLI flags

def parse_launch_flags(argv: list[str] | str) -> dict:
    """launch_server flags -> SpecConfig keyword arguments; unknown flags are an error."""
    from eagle3lab.engines.sglang.sglang_resolver import LAUNCH_FLAGS, SWITCH_FLAGS

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




_spec.set_resolver(resolve, parse_launch_flags)

__all__ = ["resolve", "resolve_with_sglang", "lint", "parse_launch_flags", "outcome",
           "compare_with_sglang", "check_arch"]

"""The doctor's acceptance-by-prompt check (`--url` with `--prompts`): on which prompts the served
draft loses acceptance.

It sends every prompt of the file (up to MAX_PROMPTS) at temperature 0, reads each request's
acceptance histogram (SGLang >= 0.5.9 and the lab server: meta_info; vLLM: its per-request
spec-decode metrics) and breaks acceptance down by prompt length and by category
(`eagle3lab.acceptance.byprompt`). It names a fall with length, or a gap between categories, only when the
95 % intervals separate, and otherwise says nothing of either: a reader acts on a finding, so a
noise-level difference must not become one. A fall with length names the draft's
max_position_embeddings and the training length its checkpoint records (or that it records none).
"""

from __future__ import annotations

from eagle3lab.acceptance import byprompt
from eagle3lab.doctor.ranking import CheckStatus
from eagle3lab.errors import EagleLabError
from eagle3lab.acceptance.diagnosis.findings import Finding

CHECK = "acceptance by prompt"
MAX_PROMPTS = 64
NEW_TOKENS = 48


def by_prompt_checks(server, api: str, prompts, draft_config: dict, k: int | None,
                     max_new_tokens: int = NEW_TOKENS) -> tuple[list[Finding], CheckStatus, dict]:
    """(findings, check status, facts) of the by-prompt window on `server` (a Server handle)."""
    from eagle3lab.serving import loadtest

    try:
        pset = byprompt.read_prompts(getattr(prompts, "path", None) or prompts)  # the file: categories too
    except EagleLabError as exc:
        return [], CheckStatus(CHECK, False, str(exc)), {}
    texts = pset.texts[:MAX_PROMPTS]
    result = loadtest.run(server, texts, max_new_tokens=max_new_tokens, temperature=0.0,
                          progress=False, api=api)
    if not len(result.completed):
        return [], CheckStatus(CHECK, False, f"no request completed: {result.error}"), {}
    found = byprompt.from_load_test(result, pset, k, "the doctor's window, temperature 0")
    if found is None:
        return [], CheckStatus(CHECK, False, _no_histogram(api)), {}
    window = (f"{len(result.completed)} requests of {pset.source}, {max_new_tokens} new tokens each, "
              "temperature 0; each request's acceptance histogram")
    findings = [f for f in (_length_finding(found, draft_config, window),
                            _category_finding(found, window)) if f is not None]
    return findings, CheckStatus(CHECK, True, window, round(result.wall_s, 2)), {"by_prompt": found.summary()}


def _no_histogram(api: str) -> str:
    from eagle3lab.engines.sglang.meta_info import no_histogram_line

    if api == "openai":
        return ("vLLM returned no per-request acceptance: start it with --per-request-spec-decode-metrics "
                "summary (vLLM 0.32 has it, vllm/config/observability.py)")
    return no_histogram_line()


def _fmt(row: dict) -> str:
    tokens = "" if row.get("prompt_tokens") is None else f", median prompt {row['prompt_tokens']:.0f} tokens"
    return (f"{row['accept_length']:.2f} [{row['lo']:.2f}, {row['hi']:.2f}] over {row['requests']} requests"
            f"{tokens}; position 1 {row['per_position'][0]:.2f}")


def _length_finding(found, draft_config: dict, window: str) -> Finding | None:
    fall = byprompt.length_fall(found)
    if fall is None:
        return None
    short, long = fall["short"], fall["long"]
    lengths = byprompt.draft_lengths_line(draft_config)
    evidence = (f"accept length {_fmt(short)} on prompts of {short['length']} against {_fmt(long)} on "
                f"{long['length']} (95 % intervals over requests do not overlap); {lengths}; {window}")
    return Finding("context_length", "warning",
                   f"acceptance falls with prompt length: {short['accept_length']:.2f} at {short['length']}, "
                   f"{long['accept_length']:.2f} at {long['length']}", evidence,
                   "train (or pick) a draft on sequences as long as your prompts, or cap speculation to short "
                   "contexts", 0.8, "metrics", CHECK,
                   data={"short": _slim(short), "long": _slim(long),
                         "max_position_embeddings": draft_config.get("max_position_embeddings"),
                         "train_seq_len": byprompt.training_length(draft_config)[0]})


def _category_finding(found, window: str) -> Finding | None:
    gap = byprompt.category_gap(found)
    if gap is None:
        return None
    low, high = gap["low"], gap["high"]
    evidence = (f"accept length {_fmt(low)} on category {low['category']!r} against {_fmt(high)} on "
                f"{high['category']!r} (95 % intervals over requests do not overlap); {window}"
                + "".join(f"; {n}" for n in found.notes))
    return Finding("distribution_shift", "warning",
                   f"acceptance differs by category: {low['category']} {low['accept_length']:.2f}, "
                   f"{high['category']} {high['accept_length']:.2f}", evidence,
                   f"add {low['category']!r}-like prompts (answered by the target) to the draft's training data",
                   0.8, "metrics", CHECK, data={"low": _slim(low), "high": _slim(high)})


def _slim(row: dict) -> dict:
    keep = ("length", "category", "requests", "prompt_tokens", "accept_length", "lo", "hi", "per_position")
    return {k: row[k] for k in keep if k in row}

"""What the deployment itself says: the launch flags and a server log (a running server: served.py).

Flags go through `eagle3lab.engines.effective` (the engine's resolution rules and their lint); a log
through the observation layer (`eagle3lab.sources.logfile`: `observe_log`, `config_from_log`)
(SGLang's adjustment warning and the printed ServerArgs); acceptance statistics then go to
`diagnosis.diagnose`. These are observations of an effect: they rank below facts read in the
checkpoints (`findings.SOURCE_RANK`).
"""

from __future__ import annotations

from eagle3lab import engines
from eagle3lab.doctor.ranking import CheckStatus
from eagle3lab.acceptance.diagnosis.findings import Finding
from eagle3lab.errors import EagleLabError

SEVERITY = {"error": "error", "warning": "warning", "info": "info"}


def observed_checks(serve, *, flags=None, log=None, facts=None,
                    temperature=None) -> tuple[list[Finding], list[CheckStatus], dict]:
    findings, checks, extra = [], [], {}
    if flags:
        f, c = _flags(serve, flags)
        findings += f
        checks.append(c)
    if log:
        f, c, e = _log(log, facts or {})
        findings += f
        checks.append(c)
        extra.update(e)
        f, c = _log_signatures(log, temperature)
        findings += f
        checks += c
    return findings, checks, extra


def _flags(serve, flags: str) -> tuple[list[Finding], CheckStatus]:
    from eagle3lab.spec import SpecConfig

    engine = serve or "sglang"
    try:
        spec = SpecConfig.from_cli(flags)
        res = spec.resolve(engine)
    except EagleLabError as exc:
        return [Finding("config", "error", "the launch flags cannot be resolved", str(exc), "", 0.9, "config",
                        "flags")], CheckStatus("flags", True, str(exc))
    out = [Finding("config_adjusted" if "adjust" in c.code else "config", SEVERITY.get(c.severity, "info"),
                   c.code, c.message, "", 0.95, "config", "flags") for c in res.findings]
    return out, CheckStatus("flags", True, f"{res.engine} {res.version}: steps {res.num_steps}, topk {res.topk}, "
                                           f"draft tokens {res.num_draft_tokens}")


def _log(log, facts) -> tuple[list[Finding], CheckStatus, dict]:
    from eagle3lab.sources.logfile import LogReadError, config_from_log, observe_log, read_log

    try:
        frame = read_log(log)
    except LogReadError as exc:  # binary, compressed in a format not read: a check that could not run
        return [], CheckStatus("log", False, str(exc)), {}
    if frame.empty:
        from eagle3lab.sources.logfile import binary_note

        why = binary_note(frame) or "not an SGLang, vLLM, llama.cpp or TensorRT-LLM server log?"
        return [], CheckStatus("log", False, f"{log}: no speculative-decoding or scheduler record in "
                               f"{frame.attrs.get('lines', 0)} line(s) ({why})"), {}
    evidence = config_from_log(log)
    obs = observe_log(frame)
    out, extra = [], {}
    if evidence["adjusted"]:
        out.append(Finding("config_adjusted", "error", "the server adjusted the speculative config",
                           "; ".join(evidence["evidence"])[:400], "pass flags the engine keeps "
                           "(`eagle3lab config -- FLAGS` shows what it runs)", 0.95, "log", "log"))
    al = frame["accept_len"].dropna() if "accept_len" in frame.columns else []
    if obs.accept_length is not None and obs.accept_length == obs.accept_length and len(al):
        mean = float(obs.accept_length)
        extra["log_accept_length"] = round(mean, 3)
        checkpoint_causes = sorted({f.cause for f in facts.get("_findings", [])})
        out.append(Finding("acceptance", "warning" if mean < 2 else "info",
                           f"the log's accept length is {mean:.2f} over {len(al)} records",
                           f"min {float(al.min()):.2f}, max {float(al.max()):.2f}"
                           + (f"; checkpoint findings above explain it first: {checkpoint_causes}"
                              if checkpoint_causes else ""), "", 0.5, "log", "log"))
    return out, CheckStatus("log", True, f"{len(frame)} records"), extra


def _log_signatures(log, temperature) -> tuple[list[Finding], list[CheckStatus]]:
    """Known-defect signatures on a vLLM log's per-position acceptance, read at `temperature`
    (a log does not say which temperature its traffic had: without it, nothing is matched)."""
    from eagle3lab.doctor.defects import CHECK, signature_findings, window_from_observation
    from eagle3lab.sources.logfile import observe_log

    check = CHECK + " (signature)"
    try:
        obs = observe_log(log)
    except EagleLabError:  # said once, by the log check
        return [], []
    eng = engines.lookup(obs.engine)
    if eng is None or eng.observes_acceptance_via != "/metrics" or obs.per_position is None:
        return [], []
    if temperature is None:
        return [], [CheckStatus(check, False, "the log does not say its traffic's temperature: pass "
                                "--temperature to match known-defect signatures")]
    window = window_from_observation(obs, temperature, f"the log's {obs.n_steps} drafts at the temperature given")
    if temperature <= 0 or window is None:
        return [], [CheckStatus(check, False, "the signatures need traffic sampled at temperature > 0")]
    findings, detail = signature_findings("vllm", window, None, source="log")
    return findings, [CheckStatus(check, True, detail)]

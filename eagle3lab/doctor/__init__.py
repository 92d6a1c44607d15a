"""`doctor()`: from a user's checkpoints (and logs or a server when given), the causes ranked. Not: the rules it applies (acceptance.diagnosis, known_defects, wiring).

    report = doctor("drafts/my-eagle3", target="models/target", serve="sglang==0.5.23")
    print(report); report.to_frame(); report.exit_code

Three kinds of evidence, merged into one ranked list (`report.DoctorReport`):
* static checks (`static.py`): configs and safetensors headers only;
* empirical checks (`empirical.py`): the target run on a few prompts, the draft scored on every
  candidate set of boundaries, the vocabulary map and the rope base;
* observations (`observed.py`): a server log, the flags given;
* a running server (`served.py`, `url=`): the config it runs, the draft it serves, its acceptance
  (vLLM's /metrics, SGLang's meta_info) through `diagnosis.diagnose`.

May import everything below the front door (engines, lab, decoder, serving,
experiments); only cli/commands import it.
"""

from __future__ import annotations

import time

from eagle3lab.doctor.formats import DoctorInputError, read_draft_spec, read_target_spec
from eagle3lab.doctor.prompts import read_prompts
from eagle3lab.doctor.ranking import CheckStatus, DoctorReport
from eagle3lab.acceptance.diagnosis.findings import Finding

__all__ = ["doctor", "DoctorReport", "Finding", "CheckStatus", "DoctorInputError"]


def doctor(draft, target=None, serve=None, *, flags: str | None = None, log=None, url: str | None = None,
           prompts=None, empirical: bool = True, max_positions: int = 2000,
           memory_budget_bytes: int | None = None, platform: str | None = None,
           temperature: float | None = None) -> DoctorReport:
    """Check an EAGLE-3 draft (and its target) and rank what would make acceptance low.

    draft / target: checkpoint directories. serve: 'sglang==0.5.23' / 'vllm==0.33.0' (None: both
    engines at their newest read version). flags: the launch flags, as one string. log: a server
    log file. url: a running server (SGLang, the lab's or vLLM; docs/doctor.md). prompts: a file of prompts (one per line, or JSON lines with
    "text"/"prompt") or a list of strings. empirical=False skips running the target.
    platform: 'cuda' / 'rocm' / 'cpu' / 'xpu' (None: unknown; known defects that need one are
    notes). temperature: your traffic's sampling temperature: known-defect rows that need T > 0
    apply, the log's traffic is read at it, and at --url the doctor probes a greedy and a sampled
    window (docs/known-defects.md).
    """
    from eagle3lab.doctor.static import static_checks

    spec = read_draft_spec(draft)
    tspec = read_target_spec(target) if target is not None else None
    temperature = _temperature(temperature)
    prompts = read_prompts(prompts)  # read once, before anything loads: unusable text is said now
    _check_log_path(log)
    findings, checks, facts = static_checks(spec, tspec, serve)
    if prompts is not None:
        checks += prompts.checks()
    from eagle3lab.doctor.defects import static_defects

    f, c = static_defects(serve, flags=flags, platform=platform, temperature=temperature, facts=facts,
                          spec=spec, target=tspec)
    findings += f
    checks += c
    if empirical:
        from eagle3lab.doctor.empirical import empirical_checks

        t0 = time.perf_counter()
        f, c, extra = empirical_checks(spec, tspec, serve, prompts=prompts, max_positions=max_positions,
                                       memory_budget_bytes=memory_budget_bytes, static=findings)
        findings += f
        checks += c
        facts.update(extra)
        facts["empirical_seconds"] = round(time.perf_counter() - t0, 2)
    else:
        checks.append(CheckStatus("empirical wiring", False, "skipped (empirical=False / --static)"))
    if flags or log:
        from eagle3lab.doctor.observed import observed_checks

        f, c, extra = observed_checks(serve, flags=flags, log=log, facts=facts, temperature=temperature)
        findings += f
        checks += c
        facts.update(extra)
    if url:
        from eagle3lab.doctor.server_probe import served_checks

        t0 = time.perf_counter()
        f, c, extra = served_checks(url, serve, spec=spec, tspec=tspec, flags=flags, prompts=prompts,
                                    facts=facts, temperature=temperature)
        findings += f
        checks += c
        facts.update(extra)
        facts["server_seconds"] = round(time.perf_counter() - t0, 2)
    return DoctorReport(str(spec.path), str(tspec.path) if tspec else None, serve, findings, checks, facts)


def _check_log_path(log) -> None:
    """A --log that names no file is refused before the target loads; what a file holds that the
    doctor cannot use is a check that could not run (observed._log)."""
    from pathlib import Path

    if log is None or not isinstance(log, (str, Path)) or (isinstance(log, str) and "\n" in log):
        return  # log text or lines, not a path
    path = Path(log)
    if path.is_dir():
        raise DoctorInputError(f"--log: {path} is a folder, not a log file")
    if not path.exists():
        raise DoctorInputError(f"--log: {path} not found")


def _temperature(value) -> float | None:
    """A sampling temperature: a number >= 0, or None (unknown)."""
    if value is None:
        return None
    try:
        t = float(value)
    except (TypeError, ValueError):
        raise DoctorInputError(f"temperature must be a number >= 0, got {value!r}") from None
    if not t >= 0 or t == float("inf"):
        raise DoctorInputError(f"temperature must be a number >= 0, got {value!r}")
    return t


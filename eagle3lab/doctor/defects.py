"""The doctor's known-defect checks (`eagle3lab.known_defects`): statically from `--serve
ENGINE==VERSION`, `--flags` and `--platform`, and by signature on acceptance windows whose
temperature is known (the doctor's own probe windows at `--url`, a `--log` at `--temperature`).

Why two ways: a version match says a defect *can* bite this deployment; a signature says the
traffic shows it. A row whose platform or settings are unknown is a note ("applies if you run
on ROCm"), never a warning: most deployers know their platform, the doctor does not.
"""

from __future__ import annotations

from eagle3lab.doctor.ranking import CheckStatus
from eagle3lab.acceptance.diagnosis.findings import Finding
from eagle3lab.errors import EagleLabError

CHECK = "known defects"


def static_defects(serve, flags=None, platform=None, temperature=None, facts=None, spec=None, target=None):
    """(findings, checks) for the rows matching --serve's engine and version; the draft checkpoint
    (and --target, or the draft's recorded verifier) fill in the settings a row reads from them."""
    from eagle3lab import known_defects as kd
    from eagle3lab.doctor.static import parse_serve

    if serve is None or "==" not in str(serve):
        return [], [CheckStatus(CHECK, False, "no --serve ENGINE==VERSION: the registry is matched by version")]
    (engine, version), = parse_serve(serve)
    try:
        settings = kd.settings_from_flags(flags, engine, version)
        platform = platform or _platform_from_flags(settings, flags)
        if temperature is not None:
            settings["temperature"] = float(temperature)
        ids = _custom_ids(engine, version, facts or {}, spec)
        if ids is not None:
            settings["custom_aux_ids"] = ids
        settings.update(_checkpoint_settings(spec, target))
        matches = kd.match(engine, version, platform, settings)
    except EagleLabError as exc:
        return [], [CheckStatus(CHECK, False, str(exc))]
    findings = [_finding(m, engine, version) for m in matches]
    detail = (f"{engine} {version}" + (f" on {platform}" if platform else " (platform unknown)") +
              f": {len(matches)} of {sum(r.engine == engine for r in kd.KNOWN_DEFECTS)} rows match "
              f"({sum(m.status == 'applies' for m in matches)} for certain)")
    return findings, [CheckStatus(CHECK, True, detail)]


def _platform_from_flags(settings, flags) -> str | None:
    """--device cpu / xpu in the flags (SGLang's flag); nothing else names a platform."""
    import shlex

    tokens = shlex.split(flags) if flags else []
    for i, tok in enumerate(tokens):
        flag, eq, inline = tok.partition("=")
        if flag == "--device":
            value = inline if eq else (tokens[i + 1] if i + 1 < len(tokens) else "")
            return {"cpu": "cpu", "xpu": "xpu", "cuda": "cuda"}.get(value.strip().lower())
    return None


def _checkpoint_settings(spec, target) -> dict:
    """What the checkpoints tell the registry: the draft config's keys (`known_defects.draft_settings`)
    and the target's architecture, from --target or the draft's recorded verifier (never guessed)."""
    from eagle3lab import known_defects as kd

    out = kd.draft_settings(spec.config, spec.arch_config) if spec is not None else {}
    arch = target.arch if target is not None else ((spec.provenance.get("verifier_architectures") or [None])[0]
                                                    if spec is not None else None)
    if arch:
        out["target_arch"] = arch
    return out


def _custom_ids(engine, version, facts, spec) -> bool | None:
    """Whether the draft's ids, read as the engine reads them without CUDA graphs, feed other
    boundaries than the default set (the static wiring check's facts: `num_layers`, `arch`);
    None when unknown."""
    from eagle3lab.wiring.boundaries import CaptureError, ConventionError, default_boundaries
    from eagle3lab.wiring.conventions import serve_boundaries

    n, arch = facts.get("num_layers"), facts.get("arch")
    if spec is None or not isinstance(n, int) or not arch:
        return None
    ids, key = spec.layer_ids(engine)
    try:
        fed = serve_boundaries(engine, version, arch, ids, n, key, cuda_graph=False)
    except (CaptureError, ConventionError):
        return None
    return sorted(fed) != sorted(default_boundaries(n))


def _finding(m, engine, version) -> Finding:
    """A read row says "known defect ... Affected: ..."; a row no release confirms says "reported
    defect ... Reported in ..." and ranks at half weight (an ordering, never printed)."""
    row = m.defect
    certain = m.status == "applies"
    title = f"{'known' if row.read else 'reported'} defect in {engine} {version}: {row.title}"
    if not certain:
        title += " (applies if " + " and ".join(m.unknown) + ")"
    on = f" on {', '.join(row.platforms)}" if row.platforms else ""
    where = (f"Affected: {engine} {row.versions}{on}" if row.read else
             f"Reported in {row.reported_in}; as reported: {engine} {row.versions}{on}")
    evidence = (f"{row.symptom}. {where}; {row.bounds_how}. Source: {row.source.thread}: {row.source.quote} "
                f"(versions: {row.source.versions}). Code: {row.code}")
    return Finding("known_defect", row.severity if certain else "info", title, evidence, row.workaround,
                   (0.9 if certain else 0.5) * (1.0 if row.read else 0.5), "config", CHECK,
                   data={"id": row.id, "status": m.status, "unknown": list(m.unknown), "read": row.read,
                         "versions": row.versions, "reference": row.source.thread})


# --------------------------------------------------------------------------- signatures


def window_from_observation(obs, temperature, source: str):
    """An unconditional per-position Observation (vLLM /metrics, a vLLM log) as a `Window`."""
    from eagle3lab.known_defects import Window

    table = obs.per_position
    if table is None or not obs.n_steps:
        return None
    rates = table["rate"].to_numpy(dtype=float)
    if obs.conditional:  # back to P(at least i accepted)
        import numpy as np

        from eagle3lab.acceptance.stats import unconditional_rates

        rates = unconditional_rates(np.nan_to_num(rates))
    drafts = int(obs.n_steps)
    return Window(drafts, tuple(int(round(r * drafts)) for r in rates), temperature, source)


def signature_findings(engine, sampled, greedy=None, version=None, source="metrics"):
    """(findings, detail) for every registry row of `engine` with a signature, run on the windows."""
    from eagle3lab import known_defects as kd

    findings, notes = [], []
    for row in kd.KNOWN_DEFECTS:
        if row.engine != engine or row.signature is None:
            continue
        res = row.signature(sampled, greedy)
        notes.append(f"{row.id}: {'match' if res.matched else 'no match' if res.matched is False else 'cannot tell'}"
                     f" ({res.evidence})")
        if not res.matched:
            continue
        inside = "" if version is None else (
            f"; the server reports {engine} {version}, " + ("inside" if _affects(row, version) else "outside")
            + f" the affected versions ({row.span})")
        caveat = ("" if greedy is not None else
                  "; without a greedy window a draft whose recurrence breaks after one step looks the same: "
                  "compare with greedy traffic")
        findings.append(Finding(
            "known_defect", "warning", f"the acceptance has the signature of a known defect: {row.title}",
            f"{res.evidence}{inside}{caveat}. Known defect {row.id}: {row.symptom}. Upstream: {row.source.thread}",
            row.workaround, res.weight, source, CHECK + " (signature)",
            data={"id": row.id, **res.data}))
    return findings, "; ".join(notes)


def _affects(row, version) -> bool:
    try:
        return row.affects(version)
    except EagleLabError:
        return False

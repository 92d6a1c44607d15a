"""What each notebook records for the post-mortem: its measured frames turned into evidence
(`eagle3lab.report.evidence`), one function per finding, so the index reads the same numbers the
notebook shows. Each function records its payload in the running notebook and returns it."""

from __future__ import annotations

from eagle3lab.report import evidence


def _record(key: str, payload: dict) -> dict:
    try:
        evidence.record(key, payload)
    except ImportError:  # outside IPython (the CLI, a test): nothing to record into
        evidence._THIS_KERNEL[key] = evidence.plain(payload)
    return evidence.plain(payload)


def resolution(resolved, agree=None, version: str | None = None, sglang_version: str | None = None) -> dict:
    """Notebook 01: each flag set asked and run (SGLang's rules), and SGLang's own resolver's verdict."""
    rows = [{"label": label, "asked": list(r["asked steps/topk/draft"]),
             "runs": [r["num_steps"], r["topk"], r["num_draft_tokens"]], "changed": bool(r["changed"]),
             "warnings": len(r["warnings"])} for label, r in resolved.iterrows()]
    check = None if agree is None else {"agree": int(agree["agree"].sum()), "of": int(len(agree)),
                                        "version": sglang_version or version}
    return _record("resolution", {"rows": rows, "version": version, "sglang_check": check})


def flag_sets(measured, flag_sets: dict) -> dict:
    """Notebook 01: each flag set measured against its paired no-speculation run."""
    rows = {}
    for label, cfg in flag_sets.items():
        if label in measured.index:
            rows[label] = {**evidence.row(measured.loc[label]),
                           "asked": [cfg.num_steps, cfg.topk, cfg.num_draft_tokens]}
    return _record("flag_sets", {"rows": rows})


def training_slice(lab) -> dict | None:
    """Notebook 03: the seed's training slice alone, on a lab whose drafts include one trained on
    [embedding, low, mid] with TTT (the real-model lab; `RealLab.training_slice`). None elsewhere."""
    if not hasattr(lab, "training_slice"):
        return None
    return _record("training_slice", lab.training_slice())


def training_curve(curves: dict, goal: float) -> dict:
    """Notebook 04 on the real-model lab: accept length against training tokens per draft (the
    lab's replay, its manifest) and the goal it was built for."""
    return _record("training_curve", {"curves": curves, "goal": goal})


def wiring(trained, served, accuracy, engine) -> dict:
    """Notebook 02: the lab draft's boundaries as trained and as served, and its acc@1 each way."""
    first = accuracy[accuracy["depth"] == 1]
    acc = list(first["accuracy"])
    positions = int(first["positions"].iloc[0]) if "positions" in first and len(first) else None
    return _record("wiring", {"trained": list(trained), "served": list(served), "engine": list(engine),
                              "acc1_trained": acc[0] if acc else None,
                              "acc1_served": acc[1] if len(acc) > 1 else None, "positions": positions})


def _fix_rows(by_version) -> list[dict]:
    cols = by_version.columns
    config_col = next(c for c in cols if c.startswith("config ids"))
    fix_col = next(c for c in cols if c.startswith("fix ") and "feeds" in c)
    ok_col = next(c for c in cols if c.startswith("fix = trained"))
    ids_col = next(c for c in cols if c.startswith("ids that feed"))
    return [{"versions": str(v), "config_feeds": [int(x) for x in r[config_col]] if isinstance(r[config_col], list) else [],
             "fix_feeds": [int(x) for x in r[fix_col]] if isinstance(r[fix_col], list) else [],
             "fix_works": bool(r[ok_col]), "ids": str(r[ids_col])}
            for v, r in by_version.iterrows()]


def fix_ids(by_version, story_served, latest: str, graphs_off=None) -> dict:
    """Notebook 03: on which SGLang versions the incident's ids feed what its story reports, and on
    which its fixed ids feed the trained boundaries; `graphs_off`, the same table served with
    `--disable-cuda-graph` (its rows as `rows_graphs_off`)."""
    config_col = next(c for c in by_version.columns if c.startswith("config ids"))
    fix_col = next(c for c in by_version.columns if c.startswith("fix ") and "feeds" in c)
    ok_col = next(c for c in by_version.columns if c.startswith("fix = trained"))
    story = [str(v) for v, r in by_version.iterrows() if list(r[config_col]) == list(story_served)]
    fixed = [str(v) for v, r in by_version.iterrows() if bool(r[ok_col])]
    latest_row = next((r for v, r in by_version.iterrows() if latest in _versions(str(v))), None)
    return _record("fix_ids", {"story_versions": ", ".join(story) or "none of the versions read",
                               "fixed_on": ", ".join(fixed) or "none of the versions read",
                               "latest": latest,
                               "fed_latest": None if latest_row is None else latest_row[fix_col],
                               "rows": _fix_rows(by_version),
                               "rows_graphs_off": None if graphs_off is None else _fix_rows(graphs_off)})


def _versions(label: str) -> list[str]:
    """The versions a grouped label (`0.5.13 – 0.5.23`) names, as written (its two ends)."""
    return [p.strip() for p in label.split("–")]


def fix(table, before: str, after: str) -> dict:
    """Notebook 03: the lab's no-TTT draft at the fixed configuration before and after the fix."""
    return _record("fix", {"before": evidence.row(table.loc[before]), "after": evidence.row(table.loc[after])})


def acceptance(run, per_pos, findings, toy_repetition=None, heldout_repetition=None) -> dict:
    """Notebook 04: accept length and per-position acceptance after the fix, the diagnosis, and
    how often the lab's generated text repeats itself (said on the index beside the lab's figures)."""
    from eagle3lab.report.prose import repetition_share

    obs = run.observation
    rates = [] if per_pos is None else [
        {"position": int(r["position"]), "rate": r.get("rate"), "lo": r.get("lo"), "hi": r.get("hi"),
         "n": r.get("n")} for _, r in per_pos.iterrows()]
    return _record("acceptance", {"accept_length": obs.accept_length, "accept_length_ci95": obs.accept_length_ci95,
                                  "per_position": rates, "standalone": run.standalone_acc,
                                  "diagnosis": [f.cause for f in findings], "cost_ratio": run.cost_ratio,
                                  "source": obs.source, "n_steps": obs.n_steps,
                                  "repetition": repetition_share(getattr(run, "tokens", None)),
                                  "toy_repetition": toy_repetition, "heldout_repetition": heldout_repetition})


def hypotheses(table) -> dict:
    """Notebook 05: each hypothesis at the fixed configuration."""
    return _record("hypotheses", {"rows": {name: evidence.row(r) for name, r in table.iterrows()}})


def prediction(table) -> dict:
    """Notebook 05: how many configurations' measured speed-ups the lab's cost model predicts
    within their intervals (`costfit.prediction_table`)."""
    from eagle3lab.cost import costfit

    inside, n, share = costfit.share_inside(table)
    return _record("prediction", {"inside": inside, "of": n, "share": share})

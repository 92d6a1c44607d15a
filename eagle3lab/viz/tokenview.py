"""One generation, token by token, as HTML: how each token was produced.

Made to be read: dark text on light backgrounds (every kind at least WCAG's 4.5:1 contrast,
tests/test_plots.py), the draft position as a small number after each accepted token rather than a
shade of one colour, a thin bar where each verify step ends, a token of only spaces shown as ·
and a line break as ↵ (so neither is invisible), and a legend that says what each mark means.
Colours from the Okabe-Ito palette (eagle3lab.viz.style), lightened for backgrounds.
"""

from __future__ import annotations

import html as _html
from typing import Sequence

import pandas as pd

from eagle3lab.viz.plotbase import PlotError, need

TOKEN_KINDS = ("prompt", "target", "accepted", "bonus", "replaced")
# eagle3lab.decoder Generation.kinds and other spellings -> the view's kinds
_KIND_ALIASES = {"draft": "accepted", "replacement": "replaced", "rejected": "replaced",
                 "prefill": "target"}

# kind -> (background, text colour, what it means); backgrounds are Okabe-Ito hues lightened
TOKEN_STYLE = {
    "accepted": ("#c8eadc", "#111111", "a draft token the target accepted (number: its position in the chain)"),
    "bonus": ("#f3d3e6", "#111111", "bonus: the target's own token after a fully accepted chain"),
    "replaced": ("#fbd3bd", "#111111", "the target's token replacing a rejected draft"),
    "target": ("#ffffff", "#111111", "the target's token from prefill or plain decoding"),
    "prompt": ("#ffffff", "#555555", "prompt"),
}
STEP_END = "#555555"  # the bar after a bonus or replaced token: one verify step ends there


def _visible(text: str) -> str:
    """Escaped token text; a token that is only spaces or tabs shows them (· and →), so it can be
    seen; a line break shows as ↵ and breaks the line."""
    text = str(text)
    if text and not text.strip(" \t"):
        text = text.replace(" ", "·").replace("\t", "→")
    return _html.escape(text).replace("\n", "↵<br>")


def _span(kind: str, text: str, tip: str, position=None, cls: str | None = None) -> str:
    bg, fg, _ = TOKEN_STYLE[kind]
    sub = f'<sub style="font-size:9px;color:#333">{int(position)}</sub>' if position else ""
    end = f"border-right:2px solid {STEP_END};margin-right:2px;" if kind in ("bonus", "replaced") else ""
    underline = "text-decoration:underline dotted;" if kind == "target" else ""
    cls = cls or f"e3l-tok e3l-{kind}"
    return (f'<span class="{cls}" title="{_html.escape(tip)}" style="background:{bg};color:{fg};'
            f'{end}{underline}border-radius:2px;padding:0 1px;">{text}{sub}</span>')


def token_html(tokens: pd.DataFrame, title: str | None = None) -> str:
    """One generation as HTML: each token marked by how it was produced.

    tokens: DataFrame(text, kind[, position]) with kind in prompt | accepted (a draft the target
    accepted, ``position`` 1..k in its chain) | bonus (the extra target token after a fully
    accepted chain) | replaced (the target token that replaced a rejected draft; ``draft_text``
    optional, shown on hover).
    """
    need(tokens, ["text", "kind"], "token view")
    if "position" not in tokens and "depth" in tokens:  # eagle3lab.decoder.labbench tokens frame
        tokens = tokens.assign(position=tokens["depth"].where(tokens["depth"] > 0))
    bad = set(tokens["kind"]) - set(TOKEN_KINDS) - set(_KIND_ALIASES)
    if bad:
        raise PlotError(f"unknown token kinds {sorted(bad)} (expected {TOKEN_KINDS})")
    spans = []
    for row in tokens.itertuples(index=False):
        kind = _KIND_ALIASES.get(row.kind, row.kind)
        position = getattr(row, "position", None)
        position = None if position is None or pd.isna(position) else int(position)
        if kind == "accepted":
            position = position or 1
            tip = f"accepted draft, position {position}"
        elif kind == "replaced":
            draft = getattr(row, "draft_text", None)
            tip = TOKEN_STYLE[kind][2] + (f" (draft said {draft!r})" if draft is not None and not pd.isna(draft) else "")
            position = None
        else:
            tip, position = TOKEN_STYLE[kind][2], None
        spans.append(_span(kind, _visible(row.text), tip, position))
    head = f"<div style='font-weight:bold'>{_html.escape(title)}</div>" if title else ""
    return (f'<div class="e3l-tokens" style="font-family:monospace;font-size:14px;white-space:pre-wrap;'
            f'line-height:1.9;color:#111;background:#fff;padding:4px;">{head}{legend_html()}{"".join(spans)}</div>')


def legend_html() -> str:
    """What each mark means, drawn with the marks themselves."""
    key = "e3l-key"
    items = [_span("accepted", "tok", "", 2, key) + " accepted draft (2: its position)",
             _span("bonus", "tok", "", cls=key) + " bonus token",
             _span("replaced", "tok", "", cls=key) + " replaced a rejected draft",
             f'<span style="border-right:2px solid {STEP_END};padding-right:2px">&nbsp;</span> one verify step ends',
             "· a space token, ↵ a line break"]
    return ('<div class="e3l-legend" style="font-family:sans-serif;font-size:12px;margin-bottom:6px;">'
            + " &nbsp; ".join(items) + "</div>")


def token_view(tokens: pd.DataFrame, title: str | None = None):
    """token_html wrapped for notebook display (IPython.display.HTML)."""
    from IPython.display import HTML

    return HTML(token_html(tokens, title=title))


def tokens_from_steps(step_tokens: Sequence[Sequence[str]], accepted: Sequence[int],
                      depth: int, prompt: str | None = None) -> pd.DataFrame:
    """Build the token view's DataFrame from per-step emitted token texts and accepted counts.

    Step i emitted ``accepted[i] + 1`` tokens: the accepted drafts (positions 1..accepted), then
    the bonus token when accepted == depth, else the replacement of the rejected draft.
    """
    rows = [] if prompt is None else [{"text": prompt, "kind": "prompt", "position": None}]
    for texts, n in zip(step_tokens, accepted):
        if len(texts) != n + 1:
            raise PlotError(f"a step with {n} accepted drafts emits {n + 1} tokens, got {len(texts)}")
        for pos, text in enumerate(texts[:-1], start=1):
            rows.append({"text": text, "kind": "accepted", "position": pos})
        rows.append({"text": texts[-1], "kind": "bonus" if n == depth else "replaced", "position": None})
    return pd.DataFrame(rows)


def tokens_from_generation(generation, tokenizer, with_prompt: bool = True) -> pd.DataFrame:
    """The token view's DataFrame from an eagle3lab.decoder Generation (kinds and depths per token)."""
    rows = []
    if with_prompt:
        rows.append({"text": tokenizer.decode(generation.prompt_ids), "kind": "prompt", "position": None})
    for tok, kind, depth in zip(generation.output_ids, generation.kinds, generation.depths):
        rows.append({"text": tokenizer.decode([tok]), "kind": _KIND_ALIASES.get(kind, kind),
                     "position": depth or None})
    return pd.DataFrame(rows)

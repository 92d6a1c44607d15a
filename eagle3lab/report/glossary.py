"""The terms the post-mortem uses, each defined once in plain words, where a reader first meets it.

Notebooks call `define("acc@k", "TTT")` right after the cell that first uses a term; the
rendered definition carries a ``<dfn title="term">`` tag, so `undefined_before_use` can check any sequence
of rendered text blocks (notebook cells in reading order) for a term used before its definition.
"""

from __future__ import annotations

import re

from eagle3lab.errors import EagleLabError

# term -> (plain definition, regex that finds a use of the term in prose)
TERMS: dict[str, tuple[str, str]] = {
    "the incident": (
        "the case this report retells: an EAGLE-3 draft for Kimi-K2.5 served by SGLang, slower than no "
        "speculation; its figures are quoted as reported (data/incident/), never measured here.",
        r"\b[Tt]he incident\b|\bincident's\b"),
    "the lab": (
        "a small, real stand-in built on this machine: a tiny Llama target trained on Python source, EAGLE-3 "
        "drafts trained on it with and without training-time test, decoded by eagle3lab's own engine behind an "
        "SGLang-compatible API. It shows mechanisms, not the size of effects on a large model or "
        "tokens/s on a GPU.",
        r"\b[Tt]he lab\b|\blab's\b|\blab server\b"),
    "accept length": (
        "tokens produced per verify step of the target, the bonus token included (SGLang's "
        "`accept len`): 1 means no draft token was ever accepted.",
        r"\baccept length"),
    "bonus token": (
        "the one token the target always adds itself at the end of a verify step: the "
        "correction after a rejected draft, or one more token after a fully accepted chain.",
        r"\bbonus\b"),
    "depth": (
        "how many tokens the draft proposes in a row (`--speculative-num-steps`, k); with topk 1 the "
        "server verifies depth + 1 *draft tokens* (`--speculative-num-draft-tokens`, the bonus "
        "slot included), so 5 steps run 6 draft tokens. Every plot's depth axis is k, the steps.",
        r"\bdepths?\b|\bdraft tokens\b"),
    "topk": (
        "how many candidates the draft keeps at each step (`--speculative-eagle-topk`): 1 drafts a "
        "single chain, more than 1 a tree of candidates verified together.",
        r"\btopk\b"),
    "lossless": (
        "speculative decoding never changes the output: the target checks every drafted token, so a "
        "bad draft costs speed, never correctness.",
        r"\blossless\b"),
    "boundary": (
        "a point in the target's residual stream: boundary 0 is the embedding output and boundary k "
        "the output of layer k−1 (the input of layer k), before any final norm.",
        r"\bboundar(y|ies)\b"),
    "slot": (
        "one of the three hidden states an EAGLE-3 draft's `fc` layer reads, concatenated in a fixed "
        "order; each slot expects the boundary it was trained on. Slots are numbered from 0, like "
        "the ids in the draft's config and SGLang's layer ids.",
        r"\bslots?\b"),
    "fc": (
        "the EAGLE-3 draft's first layer: a linear map from the concatenated hidden states of three "
        "target boundaries (its slots) down to one hidden state.",
        r"`fc`|\bfc\b"),
    "acc@k": (
        "standalone accuracy at depth k (not top-k): teacher-forced on held-out text, how often the "
        "draft's top token at the k-th step of its chain equals the target's top token, with the "
        "true text as input at every step.",
        r"acc@"),
    "served acceptance": (
        "what a server measures: the share of drafted tokens the target accepts while generating, "
        "with the draft reading its own earlier guesses; per position it is conditional on every "
        "earlier position having been accepted. A different measure from acc@k.",
        r"\bserved acceptance\b"),
    "TTT": (
        "training-time test: the draft is trained unrolled on its own outputs, as it runs when "
        "serving. A draft trained without it (one step, teacher forcing only) predicts the first "
        "token well and the later ones poorly.",
        r"\bTTT\b|training-time test"),
    "steps at risk": (
        "for a draft position i, the number of verify steps that reached it (every earlier draft "
        "accepted): the sample behind that position's conditional rate (`n` in the tables).",
        r"\bsteps at risk\b|\bper_position_n\b"),
    "draft_over_target": (
        "the measured cost ratio: seconds of one draft step over seconds of one target decode step, "
        "on this machine. One part of a speculative step's cost: the step also pays one verify pass, "
        "which on the lab costs more than a target step (eagle3lab.cost.costfit measures each part).",
        r"draft_over_target|\bcost ratio\b"),
    "gap columns": (
        "in the gap table, per draft position i: `standalone` (acc@i), `served` (conditional served "
        "rate), `gap` (standalone − served), `ratio` (served / standalone), `term_standalone` and "
        "`term_served` (the product of rates up to i: position i's contribution to accept length, "
        "read with each rate as the conditional one), `lost` (their difference).",
        r"\bterm_(standalone|served)\b"),
    "quant-int4": (
        "a lab fault: the target's weights quantized to int4 (group-wise, weight-only) at serve time, "
        "while the draft was trained on the full-precision target.",
        r"\bquant-int[48]\b"),
    "domain-shift": (
        "a lab fault: prompts unlike the training corpus (English prose and number lists instead of "
        "Python source); it decodes other prompts than the other rows.",
        r"\bdomain-shift\b"),
    "accept_rate_raw": (
        "the `accept rate` field of an SGLang decode log line: accepted drafts over verify steps × "
        "(draft tokens − 1).",
        r"accept_rate_raw"),
    "d2t": (
        "the draft-to-target vocabulary map: the draft predicts over a smaller vocabulary and `d2t` "
        "turns its ids into the target's.",
        r"\bd2t\b"),
    "normed-last": (
        "a lab fault: the last captured hidden state goes through the target's final norm (as some "
        "engines capture it) although the draft was trained on the raw one.",
        r"\bnormed-last\b"),
    "multi_step": (
        "acceptance that collapses after the first draft position: the chain breaks early although "
        "the first token is often right.",
        r"\bmulti[_ -]step\b"),
    "speed-up": (
        "tokens/s with speculation over tokens/s without, on the same prompts; here always a ratio of "
        "runs interleaved prompt by prompt, with a 95 % interval over prompts.",
        r"\bspeed-?ups?\b"),
}

# The term rides in the tag's title: Jupyter's Markdown sanitizer keeps the attribute but moves
# the tag's text out of it.
_DFN = re.compile(r'<dfn title="([^"]+)"')
_DEFINITION = re.compile(r'<dfn title="[^"]+"[^\n]*')  # a definition line, its wording included


class GlossaryError(EagleLabError):
    """A term that is not in the glossary."""


def definition(term: str) -> str:
    """The plain definition of `term`."""
    try:
        return TERMS[term][0]
    except KeyError:
        raise GlossaryError(f"no glossary entry {term!r}; known: {', '.join(TERMS)}") from None


def define_markdown(*terms: str) -> str:
    """Markdown that defines `terms` (each tagged ``<dfn>`` so checks can find it)."""
    items = [f'<dfn title="{term}"></dfn>**{term}**: {definition(term)}' for term in terms]
    return "> **Terms.** " + "<br>\n> ".join(items)


def define(*terms: str):
    """Display the definitions of `terms` in a notebook."""
    from IPython.display import Markdown, display

    display(Markdown(define_markdown(*terms)))


def defined_in(text: str) -> set[str]:
    """The glossary terms a block of rendered text defines."""
    return {m.strip() for m in _DFN.findall(text or "")} & set(TERMS)


def uses(text: str, term: str) -> bool:
    """Does `text` (its definitions removed) use `term`?"""
    return re.search(TERMS[term][1], _DEFINITION.sub("", text)) is not None


def undefined_before_use(blocks, slack: int = 1) -> list[tuple[str, int, int | None]]:
    """Terms first used in block i but defined only after block i + `slack` (or never).

    `blocks`: text in reading order (markdown cells and rendered outputs). A definition in the
    block that uses the term, or up to `slack` blocks later (the Terms cell right after the
    paragraph), counts as "where first used". Returns (term, first use, definition or None).
    """
    blocks = list(blocks)
    defined_at: dict[str, int] = {}
    for i, text in enumerate(blocks):
        for term in defined_in(text):
            defined_at.setdefault(term, i)
    problems = []
    for term in TERMS:
        first = next((i for i, text in enumerate(blocks) if uses(text, term)), None)
        if first is None:
            continue
        at = defined_at.get(term)
        if at is None or at > first + slack:
            problems.append((term, first, at))
    return problems


def defined_twice(blocks) -> list[str]:
    """Terms defined more than once across `blocks`."""
    seen, twice = set(), []
    for text in blocks:
        for term in defined_in(text):
            if term in seen and term not in twice:
                twice.append(term)
            seen.add(term)
    return twice

"""Acceptance by prompt: accept length and per-position rates by prompt-length bucket and by
category, with intervals over requests, from any per-request source.

Why: a deployment's mean hides *which* prompts lose acceptance. Users report acceptance that
falls with context (speculators#684: accept length 2.30 at 2k tokens, 1.69 at 8k, 1.08 at 20k;
sglang#6783: a 2,048-token draft slower than no speculation past 2k) and that differs by domain.
Every per-request source gives the same two frames: verify steps (request, accepted) and requests
(request, prompt_tokens, category):
* SGLang >= 0.5.9 and the lab server: each request's histogram in meta_info
  (`engines.sglang.meta_info`); vLLM: `metrics.speculative_decoding.acceptance_histogram` with
  `--per-request-spec-decode-metrics` (both in `LoadTestResult.requests["spec_histogram"]`);
* the lab engine: its step records (`LabBenchResult.steps`).
Accept length here is 1 + accepted drafts per verify step (the histograms' own figure; SGLang's
completion_tokens / spec_verify_ct also counts the prefill token). Intervals: `stats`
(jackknife over requests, widened to the exact binomial interval for rates).

A prompts file (`read_prompts`): one prompt per line, or JSON lines with `text` (or `prompt`, or
`messages`: a chat, whose contents are joined by newlines) and an optional `category`.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from eagle3lab.acceptance import stats
from eagle3lab.errors import EagleLabError

MIN_LENGTH_SPREAD = 1.5  # longest / shortest prompt below this: one length bucket, no length claim
LENGTH_BUCKETS = 3


class PromptsError(EagleLabError):
    """A prompts file that cannot be read at all (missing, empty, nothing usable)."""


@dataclass
class PromptSet:
    """Prompts as read: texts, their categories (None where none is given) and the lines left
    out, counted by reason."""

    texts: list
    categories: list
    skipped: Counter = field(default_factory=Counter)
    source: str = "prompts"

    @property
    def has_categories(self) -> bool:
        return any(c is not None for c in self.categories)

    def skipped_line(self) -> str | None:
        n = sum(self.skipped.values())
        if not n:
            return None
        why = "; ".join(f"{reason}: {count}" for reason, count in self.skipped.most_common())
        return f"{n} line(s) of {self.source} left out ({why})"


def text_of(record: dict):
    """The prompt text of a JSON record: text, prompt, or a chat's contents joined by newlines."""
    for key in ("text", "prompt"):
        if isinstance(record.get(key), str) and record[key].strip():
            return record[key]
    messages = record.get("messages")
    if isinstance(messages, list) and messages:
        parts = [m.get("content") for m in messages if isinstance(m, dict)]
        if parts and all(isinstance(p, str) for p in parts) and "".join(parts).strip():
            return "\n".join(parts)
    return None


def _category_of(record: dict):
    """(category, why not) of a record: a non-empty string, else the reason it is unusable."""
    if "category" not in record or record["category"] is None:
        return None, "no category"
    value = record["category"]
    if not isinstance(value, str) or not value.strip():
        return None, f"unknown category {value!r} (not a name)"
    return value.strip(), None


def read_prompts(prompts, categories=None) -> PromptSet:
    """A PromptSet from a path or a list (of strings or JSON records). `categories`: the names
    allowed (None: any). When some records give a category, a record without one, or with one
    not allowed, is a counted skip; a line without text too. Nothing usable is an error."""
    if isinstance(prompts, PromptSet):
        return prompts
    if isinstance(prompts, (list, tuple)):
        items, source = list(prompts), "the prompts given"
    else:
        from eagle3lab.paths import read_text_file

        path = Path(prompts)
        text = read_text_file(path, "--prompts", PromptsError)  # missing, a folder, not UTF-8: one clear line
        items, source = [line for line in text.splitlines() if line.strip()], path.name
    records, skipped = _records(items)
    out = _with_categories(records, skipped, categories, source)
    if not out.texts:
        raise PromptsError(f"no usable prompt in {source}" + (f" ({out.skipped_line()})" if out.skipped else ""))
    return out


def _records(items) -> tuple[list, Counter]:
    """Each item as a dict with text (and maybe category); JSON lines parsed, plain lines kept."""
    records, skipped = [], Counter()
    for item in items:
        if isinstance(item, dict):
            records.append(item)
        elif isinstance(item, str) and item.lstrip().startswith("{"):
            try:
                rec = json.loads(item)
            except json.JSONDecodeError:
                skipped["not valid JSON"] += 1
                continue
            records.append(rec if isinstance(rec, dict) else {})
        elif isinstance(item, str):
            records.append({"text": item.replace("\\n", "\n")})
        else:
            skipped["not text"] += 1
    return records, skipped


def _with_categories(records, skipped: Counter, allowed, source: str) -> PromptSet:
    categorised = any("category" in r for r in records)
    texts, cats = [], []
    for rec in records:
        text = text_of(rec)
        if text is None:
            skipped["no text"] += 1
            continue
        cat = None
        if categorised:
            cat, why = _category_of(rec)
            if why is None and allowed is not None and cat not in allowed:
                why = f"unknown category {cat!r} (not one of {', '.join(allowed)})"
            if why:
                skipped[why] += 1
                continue
        texts.append(text)
        cats.append(cat)
    return PromptSet(texts, cats, skipped, source)


# --------------------------------------------------------------------------- grouping

def length_buckets(lengths, n: int = LENGTH_BUCKETS) -> pd.Series:
    """Prompt-length buckets labelled '32-48 tokens': one per distinct length when there are at
    most n, else n of equal count; one bucket when the longest prompt is under MIN_LENGTH_SPREAD
    x the shortest (nothing to compare)."""
    lengths = pd.Series(lengths, dtype=float)
    if lengths.isna().all():
        return pd.Series(["unknown length"] * len(lengths), index=lengths.index)
    lo, hi = lengths.min(), lengths.max()
    if hi < MIN_LENGTH_SPREAD * max(lo, 1):
        codes = pd.Series(0, index=lengths.index)
    elif lengths.nunique() <= n:  # a few lengths (a test set of short and long prompts): one each
        codes = lengths.rank(method="dense") - 1
    else:
        codes = pd.qcut(lengths.rank(method="first"), q=min(n, len(lengths)), labels=False)
    labels = {}
    for code in sorted(codes.dropna().unique()):
        part = lengths[codes == code]
        labels[code] = f"{int(part.min())}-{int(part.max())} tokens"
    return codes.map(labels)


def breakdown(steps: pd.DataFrame, requests: pd.DataFrame, by: str, k: int) -> pd.DataFrame:
    """One row per group of requests (`by`: a column of `requests`): requests, prompt tokens
    (median), verify steps, accept length with its interval, and conditional per-position rates
    with theirs. Groups keep their order of first appearance by length (shortest first)."""
    rows = []
    order = requests.sort_values("prompt_tokens") if "prompt_tokens" in requests else requests
    for group in pd.unique(order[by].dropna()):
        members = requests.loc[requests[by] == group, "request"]
        part = steps[steps["request"].isin(members)]
        if not len(part):
            continue
        ci = stats.accept_length_ci(part.assign(drafted=k))
        table = stats.per_position(part, k=k, conditional=True)
        tokens = requests.loc[requests[by] == group, "prompt_tokens"] if "prompt_tokens" in requests else None
        rows.append({by: group, "requests": int(part["request"].nunique()),
                     "prompt_tokens": None if tokens is None or tokens.isna().all() else float(tokens.median()),
                     "verify_steps": int(len(part)), "accept_length": stats.accept_length(part),
                     "lo": None if ci is None else ci[0], "hi": None if ci is None else ci[1],
                     "per_position": table["rate"].round(4).tolist(),
                     "per_position_lo": table["lo"].round(4).tolist(),
                     "per_position_hi": table["hi"].round(4).tolist()})
    return pd.DataFrame(rows)


@dataclass
class ByPrompt:
    """Acceptance broken down by prompt length and by category (None without categories)."""

    by_length: pd.DataFrame
    by_category: pd.DataFrame | None
    k: int
    n_requests: int
    source: str
    notes: list = field(default_factory=list)

    def text(self) -> str:
        """The breakdown as printed by `eagle3lab bench`."""
        out = [f"acceptance by prompt ({self.source}; {self.n_requests} requests; accept length = 1 + "
               "accepted drafts per verify step, 95 % intervals over requests):"]
        for title, table, key in (("by prompt length", self.by_length, "length"),
                                  ("by category", self.by_category, "category")):
            if table is None or not len(table):
                continue
            out.append(f"  {title}:")
            for row in table.to_dict("records"):
                ci = "" if row["lo"] is None else f" [{row['lo']:.2f}, {row['hi']:.2f}]"
                rates = " ".join(f"{r:.2f}" for r in row["per_position"])
                out.append(f"    {str(row[key]):<20} {row['requests']:>3} req  accept length "
                           f"{row['accept_length']:.2f}{ci}  per position (conditional) {rates}")
        return "\n".join(out + [f"  note: {n}" for n in self.notes])

    def summary(self) -> dict:
        def rows(t):
            return None if t is None else json.loads(t.to_json(orient="records"))
        return {"by_length": rows(self.by_length), "by_category": rows(self.by_category),
                "notes": list(self.notes)}


def by_prompt(steps: pd.DataFrame, requests: pd.DataFrame, k: int, source: str, notes=()) -> ByPrompt:
    """The breakdown from verify steps (request, accepted) and requests (request, prompt_tokens,
    category). Each comparison holds the other factor still: with categories, lengths are
    compared within the largest category, and categories at matched prompt lengths
    (`_length_matched`), so a category of long prompts does not pass for a category gap."""
    requests = requests.copy()
    notes = list(notes)
    has_cats = "category" in requests and requests["category"].notna().any()
    lengths = requests
    if has_cats:
        largest = requests["category"].value_counts().index[0]
        lengths = requests[requests["category"] == largest]
        if requests["category"].nunique() > 1:
            notes.append(f"prompt lengths compared within the largest category ({largest})")
    lengths = lengths.assign(length=length_buckets(lengths["prompt_tokens"]) if "prompt_tokens" in lengths
                             else "unknown length")
    by_category = None
    if has_cats:
        matched, note = _length_matched(requests)
        notes += [note] if note else []
        by_category = breakdown(steps, matched, "category", k)
    return ByPrompt(breakdown(steps, lengths, "length", k), by_category, k,
                    int(steps["request"].nunique()), source, notes)


def _length_matched(requests: pd.DataFrame) -> tuple[pd.DataFrame, str | None]:
    """The requests of comparable prompt length across categories: those no longer than
    MIN_LENGTH_SPREAD x the longest of the categories' shortest prompts (all of them when a
    category would keep fewer than two, or lengths are unknown), and a note when some are left out."""
    if "prompt_tokens" not in requests or requests["prompt_tokens"].isna().any():
        return requests, None
    cap = MIN_LENGTH_SPREAD * requests.groupby("category")["prompt_tokens"].min().max()
    kept = requests[requests["prompt_tokens"] <= cap]
    if kept["category"].value_counts().reindex(requests["category"].dropna().unique()).fillna(0).min() < 2:
        return requests, "categories compared over every prompt length (too few prompts of matched length)"
    if len(kept) == len(requests):
        return requests, None
    return kept, (f"categories compared at matched prompt lengths (up to {int(cap)} tokens: "
                  f"{len(kept)} of {len(requests)} requests)")


def from_load_test(result, prompts: PromptSet | None, k: int | None, source: str,
                   tokenizer=None) -> ByPrompt | None:
    """The breakdown of a LoadTestResult whose requests carry histograms (SGLang, the lab
    server, vLLM with per-request metrics); None when none does. Prompt lengths: the server's
    prompt_tokens, else the tokenizer's count."""
    from eagle3lab.engines.sglang.meta_info import skipped_line, steps_from_histograms

    done = result.completed
    steps, skipped = steps_from_histograms(done, max_accepted=k)
    if not len(steps):
        return None
    depth = int(k) if k else int(steps["accepted"].max())
    requests = done[["request", "prompt_tokens"]].copy()
    if requests["prompt_tokens"].isna().all() and tokenizer is not None and prompts is not None:
        requests["prompt_tokens"] = [len(tokenizer(prompts.texts[i], add_special_tokens=False)["input_ids"])
                                     for i in requests["request"]]
    requests["category"] = [prompts.categories[i] if prompts is not None and i < len(prompts.categories)
                            else None for i in requests["request"]]
    notes = [n for n in (skipped_line(skipped, len(done)), prompts and prompts.skipped_line()) if n]
    return by_prompt(steps, requests, depth, source, notes)


# --------------------------------------------------------------------------- what separates

def _separated(low: dict, high: dict) -> bool:
    return low["hi"] is not None and high["lo"] is not None and low["hi"] < high["lo"]


def length_fall(result: ByPrompt) -> dict | None:
    """The longest-prompt bucket's accept-length interval wholly below the shortest's: what and
    by how much; None when the intervals overlap (or there is one bucket)."""
    table = result.by_length
    if table is None or len(table) < 2:
        return None
    short, long = table.iloc[0].to_dict(), table.iloc[-1].to_dict()
    return {"short": short, "long": long} if _separated(long, short) else None


def category_gap(result: ByPrompt) -> dict | None:
    """The category with the lowest accept length, its interval wholly below the highest's;
    None when every pair's intervals overlap."""
    table = result.by_category
    if table is None or len(table) < 2:
        return None
    ordered = table.sort_values("accept_length")
    low, high = ordered.iloc[0].to_dict(), ordered.iloc[-1].to_dict()
    return {"low": low, "high": high} if _separated(low, high) else None


def training_length(config: dict) -> tuple[int | None, str | None]:
    """(tokens, where) of the draft's training sequence length as its checkpoint records it:
    eagle3lab's `eagle3lab.train_seq_len`; None when the checkpoint does not say (SpecForge
    0.2.0 and speculators 0.9.0 write none into config.json: docs/sources.md section 7)."""
    lab = config.get("eagle3lab") if isinstance(config.get("eagle3lab"), dict) else {}
    value = lab.get("train_seq_len")
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value, "config.json eagle3lab.train_seq_len"
    return None, None


def draft_lengths_line(config: dict) -> str:
    """'max_position_embeddings 1024; trained on 96-token sequences (config.json ...)'."""
    parts = []
    mpe = config.get("max_position_embeddings")
    if isinstance(mpe, int):
        parts.append(f"the draft's max_position_embeddings is {mpe}")
    length, where = training_length(config)
    parts.append(f"it was trained on {length}-token sequences ({where})" if length else
                 "its checkpoint does not record its training length")
    return "; ".join(parts)


def steps_and_requests_of_lab(result) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(steps, requests) of a LabBenchResult: the engine's own step records."""
    steps = result.steps[["request", "accepted"]]
    requests = result.requests[["request", "prompt_tokens"]].copy()
    return steps, requests

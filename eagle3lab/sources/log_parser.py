"""The line grammar of speculative-decoding server logs, and the parser that applies it.

Lines are parsed field by field (``key: value`` pairs), never by a fixed field order, so
prefixes (docker, Ray, ANSI colours, custom logging formats, cloud-logging JSON), unknown
or reordered fields and new engine versions do not break it. Each engine's vocabulary
(markers, fields) lives in `eagle3lab.sources.grammars`; formats: docs/sources.md.

Speed: most lines of a big log share a handful of shapes. The first line of each shape is
parsed field by field; from its fields we compile a *template* regex (values become
groups, everything else literal) that parses the following lines of the same shape in one
C-level ``fullmatch``. Template rows are converted column-wise per block of lines while
they are still in the CPU cache. ``benchmarks/bench_logs.py`` measures it.
"""

from __future__ import annotations

import json
import math
import operator
import re
from dataclasses import dataclass, field

from eagle3lab.sources.grammars import NUM, llamacpp, sglang, trtllm, vllm
from eagle3lab.sources.log_frame import (COLUMNS, ENGINES, FLOAT_COLUMNS, INT_COLUMNS, KINDS,
                                         _TIME_FORMATS, _TIME_PARTS, _TRUE, _concat, _derive,
                                         _floats, _int_array, _merge_parts, _object_array,
                                         _parse_unique, _part_column, _slow_part, _times)

_MAX_TEMPLATES = 32


# --------------------------------------------------------------------------- line grammar

_NUM = NUM
_NUM_RX = re.compile(r"\s*(" + _NUM + r")")
_ANSI_RX = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>]")
# Lines worth a closer look besides "batch" lines.
_OTHER_RX = re.compile(r"metrics|acceptance|\[AR\]|WARN|peculative|Avg generation|"
                       r"num_(?:draft|accepted)|#running-req|#new-token|Engine \d")
_MARKER_RX = re.compile("|".join([
    sglang.MARKER, vllm.MARKER_V1, vllm.MARKER_V0, vllm.MARKER_STATS, llamacpp.MARKER,
    vllm.MARKER_OFFLINE_MEAN, vllm.MARKER_OFFLINE_POS, trtllm.MARKER, vllm.MARKER_OFFLINE_COUNT]))
_DT_RX = re.compile(r"(?<!\d)(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?)")
_MDT_RX = re.compile(r"(?<![\d-])(\d\d-\d\d \d\d:\d\d:\d\d)(?:[.,]\d+)?")
_CLOCK_RX = re.compile(r"(?<![\d:])(\d\d:\d\d:\d\d)(?:[.,]\d+)?")
_RANK_RX = re.compile(r"\b(DP|TP|EP|PP)(\d+)\b")
_ENGINE_IDX_RX = re.compile(r"\bEngine (\d+):")
# A bracketed timestamp whose start was clipped by a copy-paste: "025-06-23 10:27:56 TP0] ".
_CLIPPED_RX = re.compile(r"\s*[\d\s:.,-]*(?:(?:DP|TP|EP|PP)\d+\s*)*\]")
# Leading decorations before a log level: docker name, Ray/vLLM "(Name pid=N)", a bracketed
# timestamp, a plain timestamp.
_LEAD = (r"\s*(?:[\w.-]+\s+\|\s?)?(?:\([^)]*\)\s*)?(?:\[[^\]]*\]\s*)?"
         r"(?:\d{4}-\d\d-\d\d[ T][\d:.,]+\s*)?")
_LEVEL_RX = re.compile(_LEAD + r"(?P<level>WARNING|WARN|INFO|DEBUG|ERROR|CRITICAL)\b:?\s*")
_WARN_TAIL_RX = re.compile(r"(?:\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)?\s*)?(?:\d+\s+)?"
                           r"(?:\[[^\]]*\]\s*)?(?:[\w./-]+\.py:\d+\]?:?\s*)?")
_SPEC_WARN_RX = re.compile(
    r"speculative_\w+ (?:is|are|was|has been|will be) (?:adjusted|changed|overridden|"
    r"overwritten|disabled|ignored|reset|forced|clamped)"
    r"|spec(?:ulative)?(?: decoding)? (?:is|has been) (?:disabled|not supported)", re.I)
_LLAMA_FIELDS = llamacpp.FIELDS
_LLAMA_POS_RX = llamacpp.PER_POSITION_RX

# key (lower case, as printed) -> (column, conversion): every engine's fields (grammars/).
_KEYS: dict[str, tuple[str | None, str]] = {**sglang.KEYS, **vllm.KEYS}
_RATE_COLUMNS = {"draft_accept_rate", "token_usage", "accept_rate_raw"}
# Known fields we do not keep: recognised so that a cut line ("token usaccept rate") can be
# told from a genuine field whose name merely ends like a known one ("swa token usage").
_IGNORED = sglang.IGNORED | vllm.IGNORED
_ALL_KEYS = sorted(set(_KEYS) | _IGNORED, key=len, reverse=True)


@dataclass
class _Record:
    """One parsed line: values by column, plus value spans for building a template."""

    engine: str
    kind: str
    values: dict = field(default_factory=dict)
    malformed: bool = False
    spans: list | None = None  # (start, end, column or None, conv) over the text; None: no template


# Regex per conversion for template groups.
_SPAN_PATTERNS = {
    "num": _NUM, "bool": r"True|False|true|false", "text": r"[^,\n]*", "list":
    r"(?:" + _NUM + r")(?:,[ \t]*(?:" + _NUM + r"))*", "_dt": r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?",
    "_mdt": r"\d\d-\d\d \d\d:\d\d:\d\d", "_clock": r"\d\d:\d\d:\d\d", "rank": r"\d+",
    "iter": r"[^\]\n]*", "frac": r"(?:[.,]\d+)?",
}


def _strip_ansi(line: str) -> str:
    return _ANSI_RX.sub("", line)


def _parse_line(text: str) -> _Record | None:
    """Parse one line field by field; None when it carries no record."""
    stripped = text.lstrip()
    if stripped.startswith("{"):
        return _parse_json_line(stripped)
    m = _MARKER_RX.search(text)
    if m is None:
        return _parse_warning(text) or _parse_markerless_sglang(text)
    group = m.lastgroup
    if group == "sg":
        rec = _Record("sglang", "decode" if m.group("sgkind") == "Decode" else "prefill")
        _parse_prefix(text, m.start(), rec)
        if m.group("iter") is not None:
            rec.spans.append((m.start("iter"), m.end("iter"), None, "iter"))
        glued = _MARKER_RX.search(text, m.end())
        if glued is not None:
            rec.malformed = True  # two lines glued together: keep the first one's fields
        _parse_fields(text, m.end(), rec, glued.start() if glued else len(text))
        return rec
    if group in ("vspec", "v0", "vstats"):
        kind = "stats" if group == "vstats" else "spec"
        rec = _Record("vllm", kind)
        _parse_prefix(text, m.start(), rec)
        _parse_fields(text, m.end() if group != "vstats" else m.start(), rec)
        return rec
    rec = _Record({"llama": "llamacpp", "ar": "trtllm"}.get(group, "vllm"), "spec")
    _parse_prefix(text, m.start(), rec)
    rec.spans = None
    if group == "llama":
        _parse_llama(text, m.start(), rec)
    elif group == "ar":
        rec.kind = "_ar"
        rec.values["_stat"] = m.group("arstat").upper()
        rec.values["accept_len"] = _leading_number(text[m.end():])
    elif group == "offmean":
        rec.kind = "_mean"
        rec.values["accept_len"] = _leading_number(text[m.end():])
    elif group == "offpos":
        rec.kind = "_pos"
        rec.values["_pos"] = int(m.group("pos"))
        rec.values["_rate"] = _leading_number(text[m.end():])
    else:  # offcount
        rec.kind = "_count"
        rec.values["_key"] = m.group("offkey")
        rec.values["_count"] = _leading_number(text[m.end():])
    if any(isinstance(v, float) and v is _BAD for v in rec.values.values()):
        rec.malformed = True
    return rec


class _BadNumber(float):
    """A value that should have been a number but was not (NaN, flags the line malformed)."""


_BAD = _BadNumber("nan")


def _leading_number(s: str) -> float:
    m = _NUM_RX.match(s)
    return float(m.group(1)) if m else _BAD


def _parse_prefix(text: str, end: int, rec: _Record) -> None:
    """Time and ranks from the text before the record marker, with spans for the template.

    The first timestamp found (full date first) is the record's time; other timestamps and
    any other digits (pids, source line numbers, a kubectl timestamp) become variable parts
    of the template, so they do not make every line a new shape.
    """
    prefix = text[:end]
    rec.spans = spans = []
    taken: list[tuple[int, int]] = []

    def free(start: int, stop: int) -> bool:
        return all(stop <= a or start >= b for a, b in taken)

    for rx, part in ((_DT_RX, "_dt"), (_MDT_RX, "_mdt"), (_CLOCK_RX, "_clock")):
        for m in rx.finditer(prefix):
            if not free(m.start(), m.end()):
                continue
            keep = not any(p in rec.values for p in _TIME_PARTS)
            if keep:
                rec.values[part] = m.group(1)
            spans.append((m.start(1), m.end(1), part if keep else None, part))
            if m.end() > m.end(1):  # fractional seconds outside the group vary per line
                spans.append((m.end(1), m.end(), None, "frac"))
            taken.append((m.start(), m.end()))
    for m in _RANK_RX.finditer(prefix):
        if free(m.start(2), m.end(2)):
            col = m.group(1).lower()
            rec.values[col] = float(m.group(2))
            spans.append((m.start(2), m.end(2), col, "rank"))
            taken.append((m.start(2), m.end(2)))
    m = _ENGINE_IDX_RX.search(prefix)
    if m and "dp" not in rec.values and free(m.start(1), m.end(1)):
        rec.values["dp"] = float(m.group(1))
        spans.append((m.start(1), m.end(1), "dp", "rank"))
        taken.append((m.start(1), m.end(1)))
    for m in _DIGITS_RX.finditer(prefix):
        if free(m.start(), m.end()):
            spans.append((m.start(), m.end(), None, "rank"))
    if prefix.count("]") > prefix.count("[") and _CLIPPED_RX.match(prefix):
        rec.malformed = True  # first line clipped by a copy-paste


_DIGITS_RX = re.compile(r"\d+")
_PIECE_RX = re.compile(r"([^,]*)(,|$)")


def _parse_fields(text: str, pos: int, rec: _Record, end: int | None = None) -> None:
    """Read `key: value` pieces separated by commas; bare numbers continue a list value."""
    last_list = None  # (column, start) of a list value being extended
    values, spans = rec.values, rec.spans
    for m in _PIECE_RX.finditer(text, pos, len(text) if end is None else end):
        piece = m.group(1)
        start = m.start(1)
        if not piece.strip():
            if m.group(2) == "":
                break
            continue
        colon = piece.find(":")
        if colon < 0:
            num = _NUM_RX.fullmatch(piece.rstrip(" .)]"))
            if last_list is not None and num:
                col, lstart = last_list
                values[col] = values[col] + (float(num.group(1)),)
                _extend_span(spans, lstart, start + num.end(1))
            elif piece.strip() not in (".",):
                rec.malformed = True  # a fragment: the line was cut or glued
            if m.group(2) == "":
                break
            continue
        last_list = None
        raw_key = piece[:colon]
        key = raw_key.strip().lower()
        vstart = start + colon + 1
        value = piece[colon + 1:]
        column, conv = _lookup_key(key, rec)
        lead = len(value) - len(value.lstrip())
        vstart += lead
        value = value.strip()
        if column is None:  # a field we do not keep: still a variable part of the shape
            num = _NUM_RX.match(value)
            if num and num.end() == len(value):
                spans.append((vstart, vstart + len(value), None, "num"))
            elif value:
                spans.append((vstart, start + len(piece), None, "text"))
            continue
        if conv == "bool":
            low = value.lower()
            if low in ("true", "false"):
                values[column] = 1.0 if low == "true" else 0.0
                spans.append((vstart, vstart + len(value), column, "bool"))
            else:
                rec.malformed = True
            continue
        if conv == "list" and value[:1] in "[(" and value:  # "[0.89, 0.76]" in some docs
            value, vstart = value[1:], vstart + 1
        num = _NUM_RX.match(value)
        if not num:
            rec.malformed = True
            continue
        number = float(num.group(1))
        after = value[num.end():]
        if after and after[0] not in " %)]":
            rec.malformed = True  # "2.2.1", "12ab": a damaged number
        conv = "pct" if (after.startswith("%") and column in _RATE_COLUMNS) else conv
        if conv == "pct":
            number /= 100.0
        if conv == "list":
            values[column] = (number,)
            last_list = (column, vstart)
        else:
            values[column] = number
        spans.append((vstart + num.start(1), vstart + num.end(1), column, conv))
        if m.group(2) == "":
            break


def _extend_span(spans: list, start: int, end: int) -> None:
    for i in range(len(spans) - 1, -1, -1):
        if spans[i][0] == start:
            spans[i] = (start, end, spans[i][2], spans[i][3])
            return


def _lookup_key(key: str, rec: _Record) -> tuple[str | None, str]:
    """Column for a field name; a name fused from two cut lines marks the record malformed."""
    hit = _KEYS.get(key)
    if hit:
        return hit
    if key.endswith(" graph"):  # cuda / npu / cpu / musa graph
        return ("graph", "bool")
    if key in _IGNORED:
        return (None, "num")
    for known in _ALL_KEYS:
        if key.endswith(known) and key[-len(known) - 1].isalnum() and known[0].isalnum():
            rec.malformed = True  # "token usaccept rate": a line cut mid-field
            return _KEYS.get(known, (None, "num"))
    return (None, "num")


def _parse_llama(text: str, start: int, rec: _Record) -> None:
    """llama.cpp: `draft acceptance = R (A accepted / D generated), mean acceptance length = L,
    acceptance rate per position = (...)` (llama.cpp PR #24536)."""
    for column, rx in _LLAMA_FIELDS:
        m = rx.search(text, start)
        if m:
            rec.values[column] = float(m.group(1))
    m = _LLAMA_POS_RX.search(text, start)
    if m:
        nums = [p.strip() for p in m.group(1).split(",") if p.strip()]
        try:
            rec.values["per_position"] = tuple(float(p) for p in nums)
        except ValueError:
            rec.malformed = True
        if not m.group(2):
            rec.malformed = True  # list cut before its ")"


def _parse_warning(text: str) -> _Record | None:
    """SGLang/vLLM logger warnings, and SGLang's speculative overrides printed without level."""
    if "WARN" in text:
        m = _LEVEL_RX.match(text)
        if m and m.group("level").startswith("WARN"):
            tail = _WARN_TAIL_RX.match(text, m.end())
            return _warning_record(text, tail.end(), vllm=_looks_vllm(text, m))
    m = _SPEC_WARN_RX.search(text)
    if m:
        lead = _LEVEL_RX.match(text)
        if lead and not lead.group("level").startswith("WARN"):
            return None  # an INFO line that mentions it
        start = re.match(_LEAD, text).end()
        return _warning_record(text, start, vllm=False)
    return None


def _looks_vllm(text: str, m: re.Match) -> bool:
    return bool(re.match(r"\s*\((?:APIServer|EngineCore|VllmWorker)", text)
                or re.match(r"\d\d-\d\d ", text[m.end():]))


def _warning_record(text: str, msg_start: int, vllm: bool) -> _Record:
    rec = _Record("vllm" if vllm else "sglang", "warning")
    _parse_prefix(text, msg_start, rec)
    rec.spans = None
    rec.malformed = False
    rec.values["message"] = text[msg_start:].strip()
    return rec


def _parse_markerless_sglang(text: str) -> _Record | None:
    """A scheduler line whose `Decode batch` marker was clipped away: keep its fields."""
    if "#running-req:" not in text:
        return None
    starts = [i for i in (text.find("#new-seq"), text.find("#running-req")) if i >= 0]
    start = min(starts)
    kind = "prefill" if ("#new-seq" in text or "input throughput" in text) else "decode"
    rec = _Record("sglang", kind, malformed=True)
    _parse_prefix(text, start, rec)
    _parse_fields(text, start, rec)
    rec.malformed = True
    rec.spans = None
    return rec


_JSON_TEXT_KEYS = ("textPayload", "message", "log", "msg", "MESSAGE", "text")
_JSON_TIME_KEYS = ("timestamp", "time", "@timestamp", "receiveTimestamp", "ts")


def _parse_json_line(text: str) -> _Record | None:
    """Cloud-logging / docker json-file wrappers: parse the wrapped line, keep the wrapper's time."""
    try:
        obj = json.loads(text)
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    inner = None
    for key in _JSON_TEXT_KEYS:
        if isinstance(obj.get(key), str):
            inner = obj[key]
            break
    if inner is None and isinstance(obj.get("jsonPayload"), dict):
        payload = obj["jsonPayload"]
        inner = next((payload[k] for k in _JSON_TEXT_KEYS if isinstance(payload.get(k), str)), None)
    if inner is None:
        return None
    inner = _strip_ansi(inner.rstrip("\n"))
    if inner.lstrip().startswith("{"):
        return None
    rec = _parse_line(inner)
    if rec is None:
        return None
    rec.spans = None
    if not any(part in rec.values for part in _TIME_PARTS):
        stamp = next((obj[k] for k in _JSON_TIME_KEYS if isinstance(obj.get(k), str)), None)
        if stamp:
            rec.values["_dt"] = stamp
    return rec


# --------------------------------------------------------------------------- templates


class _Raw:
    """A match on an ANSI-stripped line that remembers the raw line."""

    __slots__ = ("groups", "string")

    def __init__(self, match: re.Match, raw: str):
        self.groups, self.string = match.groups, raw


_groups = operator.methodcaller("groups")
_string = operator.attrgetter("string")


class _Template:
    """A compiled shape of line: fullmatch parses a line; groups map to columns."""

    __slots__ = ("pattern", "fullmatch", "engine", "kind", "columns", "lines", "matches", "hits")

    def __init__(self, text: str, rec: _Record):
        spans = sorted(rec.spans, key=lambda s: s[0])
        pattern, pos, columns = [], 0, []
        for start, end, column, conv in spans:
            if start < pos:
                raise ValueError("overlapping spans")
            pattern.append(re.escape(text[pos:start]))
            body = _SPAN_PATTERNS["num" if conv == "pct" else conv]
            if column is None:
                pattern.append(f"(?:{body})")
            else:
                pattern.append(f"({body})")
                columns.append((column, conv))
            pos = end
        pattern.append(re.escape(text[pos:]))
        self.pattern = "".join(pattern)
        self.fullmatch = re.compile(self.pattern, re.ASCII).fullmatch  # ASCII digits: faster
        self.hits = 0
        self.engine, self.kind, self.columns = rec.engine, rec.kind, columns
        self.lines: list[int] = []
        self.matches: list[re.Match] = []  # .string is the raw line

    def check(self, text: str, rec: _Record) -> bool:
        """The template must read back exactly what the field parser read."""
        m = self.fullmatch(text)
        if m is None:
            return False
        for (column, conv), value in zip(self.columns, m.groups()):
            got = _convert_one(value, conv)
            want = rec.values.get(column)
            if want is None or not _same(got, want):
                return False
        return True


def _same(a, b) -> bool:
    if isinstance(a, tuple) or isinstance(b, tuple):
        return a == b
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    return (math.isnan(a) and math.isnan(b)) or a == b


def _convert_one(value: str, conv: str):
    if conv == "bool":
        return 1.0 if value.lower() == "true" else 0.0
    if conv == "list":
        return tuple(float(v) for v in value.split(","))
    if conv in _TIME_PARTS:
        return value
    number = float(value)
    return number / 100.0 if conv == "pct" else number


# --------------------------------------------------------------------------- the parser


class _Parser:
    """Feed batches of lines; collects template rows and slow-path records column-wise."""

    def __init__(self):
        self.n = 0  # lines seen
        self.used = 0  # lines that carry record data
        self.templates: list[_Template] = []
        self.parts: list[dict] = []  # column -> array, one sorted part per block of lines
        self.slow: list[tuple[int, str, _Record]] = []
        self.malformed: list[int] = []
        self._open_spec = None  # last offline `mean acceptance length` record (line index)
        self._counts: dict = {}
        self._block_start = 0  # parts before this index are merged, sorted blocks

    def feed(self, block: str) -> None:
        """Parse a block of lines: known shapes by their template, the rest field by field."""
        n = self.n
        other = _OTHER_RX.search
        templates = self.templates
        first = templates[0] if templates else None
        if first is not None:  # the hot path: the most common shape, locals only
            match_first, add_line, add_match = (first.fullmatch, first.lines.append,
                                                first.matches.append)
        else:
            match_first = add_line = add_match = None
        one_line = self._one_line
        for n, line in enumerate(block.split("\n"), n + 1):
            if "batch" not in line and ("HTTP/" in line or other(line) is None):
                continue  # HTTP access lines are the commonest noise: rejected cheaply
            if match_first is not None:
                m = match_first(line)
                if m is not None:
                    add_line(n)
                    add_match(m)
                    continue
            one_line(n, line)
            if first is None and templates:
                first = templates[0]
                match_first, add_line, add_match = (first.fullmatch, first.lines.append,
                                                    first.matches.append)
        n = self.n + block.count("\n") + 1
        self.n = n
        self._flush_templates()

    def _one_line(self, n: int, line: str) -> None:
        text = _strip_ansi(line) if "\x1b" in line else line
        for t in self.templates:
            m = t.fullmatch(text)
            if m is not None:
                t.lines.append(n)
                t.matches.append(m if text is line else _Raw(m, line))
                return
        self._slow(n, line, text)

    def _slow(self, n: int, line: str, text: str) -> None:
        if len(text) > 1 << 16:
            text = text[: 1 << 16]  # a megabyte "line" is binary junk or a paste accident
        try:
            rec = _parse_line(text)
        except (ValueError, OverflowError, RecursionError):
            rec = None
        if rec is None:
            return
        offline_mean = rec.kind == "_mean"
        if offline_mean:
            rec.kind = "spec"
        elif rec.kind.startswith("_"):
            self._offline_piece(n, line, rec)
            return
        self.slow.append((n, line, rec))
        self.used += 1
        if rec.malformed:
            self.malformed.append(n)
        elif rec.spans and "\x1b" not in text:
            self._add_template(text, rec)
        self._open_spec = len(self.slow) - 1 if offline_mean else None
        if offline_mean:  # counters printed just before by vLLM's offline spec_decode.py
            for key, col in (("accepted_tokens", "accepted"), ("draft_tokens", "drafted")):
                if key in self._counts and col not in rec.values:
                    rec.values[col] = self._counts[key]
            self.used += len(self._counts)
        self._counts = {}

    def _offline_piece(self, n: int, line: str, rec: _Record) -> None:
        """Lines that belong to a neighbouring record: vLLM offline per-position lines and
        counters, TensorRT-LLM [AR] statistics (the AVERAGE line becomes the record)."""
        kind = rec.kind
        if kind == "_ar":
            self.used += 1
            if rec.values.pop("_stat") in ("AVERAGE", "MEAN", "AVG"):
                rec.kind = "spec"
                self.slow.append((n, line, rec))
                if rec.malformed:
                    self.malformed.append(n)
            return
        if kind == "_count":
            self._counts[rec.values["_key"]] = rec.values["_count"]
            return
        # acceptance at token i: X
        pos, rate = rec.values["_pos"], rec.values["_rate"]
        target = self.slow[self._open_spec][2] if self._open_spec is not None else None
        current = target.values.get("per_position", ()) if target is not None else None
        if target is None or len(current) != pos:
            if pos != 0:
                return  # an orphan position line: not a record
            rec.kind = "spec"
            rec.values = {k: v for k, v in rec.values.items() if not k.startswith("_")}
            rec.values["per_position"] = ()
            self.slow.append((n, line, rec))
            self._open_spec = len(self.slow) - 1
            target, current = rec, ()
        target.values["per_position"] = current + (rate,)
        if rec.malformed:
            self.malformed.append(self.slow[self._open_spec][0])
        self.used += 1

    def _add_template(self, text: str, rec: _Record) -> None:
        try:
            template = _Template(text, rec)
        except (ValueError, re.error):
            return
        if not template.check(text, rec):
            return
        self.templates.insert(0, template)
        if len(self.templates) > _MAX_TEMPLATES:
            old = self.templates.pop()
            self._flush_one(old)

    def _flush_templates(self) -> None:
        # Most-used shapes first, so the common line matches on the first try.
        self.templates.sort(key=lambda t: -(len(t.lines) + t.hits))
        start = self._block_start
        for t in self.templates:
            self._flush_one(t)
        if len(self.parts) - start > 1:  # one part per block, in line order, while in cache
            self.parts[start:] = [_merge_parts(self.parts[start:])]
        self._block_start = len(self.parts)

    def _flush_one(self, t: _Template) -> None:
        if not t.lines:
            return
        import numpy as np

        matches = t.matches
        fields = list(zip(*map(_groups, matches))) if t.columns else []
        raws = np.fromiter(map(_string, matches), dtype=object, count=len(matches))
        self._add_part(t, np.array(t.lines, dtype=np.int64), raws, fields)
        t.lines, t.matches = [], []

    def _add_part(self, t: _Template, lines, raws, fields) -> None:
        """Convert one template's rows column-wise (C-speed float parsing)."""
        import numpy as np

        count = len(lines)
        part = {"line": lines.astype(np.int64), "raw": raws, "_n": count,
                "engine": np.full(count, ENGINES.index(t.engine), dtype=np.int8),
                "kind": np.full(count, KINDS.index(t.kind), dtype=np.int8)}
        bad = np.zeros(count, dtype=bool)
        for (column, conv), values in zip(t.columns, fields):
            if conv in _TIME_PARTS:
                part[column] = _object_array(values)
            elif conv == "bool":
                part[column] = np.fromiter(map(_TRUE.__contains__, values), bool, count) * 1.0
            elif conv == "list":
                part[column] = _object_array([_convert_one(v, "list") for v in values])
            else:
                arr, bad_here = _floats(values)
                part[column] = arr / 100.0 if conv == "pct" else arr
                bad |= bad_here
        if bad.any():
            self.malformed.extend(part["line"][bad].tolist())
        self.parts.append(part)
        self.used += count
        t.hits += count

    def frame(self):
        """All records as one DataFrame in line order, with fixed columns and dtypes."""
        import numpy as np
        import pandas as pd

        blocks = self.parts  # sorted, consecutive line ranges
        slow = _slow_part(self.slow) if self.slow else None
        parts = blocks + ([slow] if slow else [])
        total = sum(p["_n"] for p in parts)
        present = set().union(*(p.keys() for p in parts)) if parts else set()
        present.discard("_n")
        data = {}
        where = None
        if slow is not None and blocks:  # slow-path records slot in between, by line number
            where = np.searchsorted(_concat(blocks, "line", np.int64), slow["line"])
        for column in present:
            merged = np.concatenate([_part_column(p, column) for p in blocks]) if blocks else None
            if slow is not None:
                extra = _part_column(slow, column)
                merged = extra if merged is None else np.insert(merged, where, extra)
            data[column] = merged
        data.setdefault("line", np.empty(0, dtype=np.int64))
        for column in ("engine", "kind", "raw"):
            data.setdefault(column, np.empty(0, dtype=object if column == "raw" else np.int8))
        for part in _TIME_PARTS:  # parse each distinct stamp once
            if part in data:
                data[part] = _parse_unique(data[part], _TIME_FORMATS[part])
        for column in [*FLOAT_COLUMNS, *INT_COLUMNS, "graph"]:
            data.setdefault(column, np.full(total, np.nan))
        for column in ("per_position", "message"):
            data.setdefault(column, np.full(total, None, dtype=object))
        _derive(data)
        columns = {
            "line": data["line"],
            "engine": pd.Categorical.from_codes(data["engine"], categories=list(ENGINES)),
            "kind": pd.Categorical.from_codes(data["kind"], categories=list(KINDS)),
            "time": _times(total, *(data.get(part) for part in _TIME_PARTS)),
            "graph": pd.arrays.BooleanArray(data["graph"] == 1.0, np.isnan(data["graph"])),
        }
        for column in FLOAT_COLUMNS:
            columns[column] = data[column].astype(np.float64, copy=False)
        for column in INT_COLUMNS:
            columns[column] = _int_array(data[column])
        for column in ("per_position", "message", "raw"):
            columns[column] = pd.Series(data[column], dtype=object, copy=False)
        return pd.DataFrame({c: columns[c] for c in COLUMNS}, copy=False)



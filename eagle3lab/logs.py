"""Turn speculative-decoding server logs into a tidy DataFrame.

Public API: ``read_log(source, engine="auto")``, ``summarize(df)`` (records and accept
length per engine and kind), ``plot_log(df, path=None)``, ``sglang_accept_rate_definition(df)``
and ``LogReadError``. The CLI is ``eagle3lab logs`` (eagle3lab/commands/logs.py).

``read_log(source)`` reads SGLang scheduler lines (``Decode batch`` / ``Prefill batch``),
vLLM spec-decode and engine metric lines (V0, V1, offline example summaries), llama.cpp
``draft acceptance = ...`` lines, TensorRT-LLM ``[AR]`` statistics and SGLang/vLLM
warnings, one row per record, in line order.

Lines are parsed field by field (``key: value`` pairs), never by a fixed field order, so
prefixes (docker, Ray, ANSI colours, custom logging formats, cloud-logging JSON), unknown
or reordered fields and new engine versions do not break it. Formats and their history:
``../shared/reference/log-formats.md``; SGLang's emitter is
``srt/managers/scheduler_components/metrics_reporter.py`` (sglang 0.5.23).

Speed: most lines of a big log share a handful of shapes. The first line of each shape is
parsed field by field; from its fields we compile a *template* regex (values become
groups, everything else literal) that parses the following lines of the same shape in one
C-level ``fullmatch``. Template rows are converted column-wise per block of lines while
they are still in the CPU cache. ``benchmarks/bench_logs.py`` measures it.
"""

from __future__ import annotations

import codecs
import gc
import json
import math
import operator
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from eagle3lab.errors import EagleLabError

ENGINES = ("sglang", "vllm", "llamacpp", "trtllm")
KINDS = ("decode", "prefill", "spec", "stats", "warning")

# Column order of the result; dtypes are fixed so empty and full frames look alike.
FLOAT_COLUMNS = ["token_usage", "gen_throughput", "input_throughput", "accept_len",
                 "accept_rate_raw", "draft_accept_rate"]
INT_COLUMNS = ["dp", "tp", "ep", "pp", "running_req", "queue_req", "num_tokens", "new_token",
               "cached_token", "accepted", "drafted", "num_spec_tokens", "emitted"]
COLUMNS = ["line", "engine", "kind", "time", "dp", "tp", "ep", "running_req", "queue_req",
           "num_tokens", "token_usage", "gen_throughput", "input_throughput", "graph",
           "accept_len", "accept_rate_raw", "draft_accept_rate", "per_position", "accepted",
           "drafted", "num_spec_tokens", "emitted", "new_token", "cached_token", "pp",
           "message", "raw"]
_TIME_PARTS = ("_dt", "_mdt", "_clock")  # full date-time / vLLM MM-DD time / time of day
_OBJECT_COLUMNS = ("per_position", "message", "raw") + _TIME_PARTS

_CHUNK_BYTES = 1 << 17  # 128 KiB blocks: a block's strings are still in cache when converted
_FIRST_BLOCK = 1 << 15  # a small first block: line shapes are learnt line by line
_BATCH_LINES = 1 << 15  # lines per block for iterables
_MAX_TEMPLATES = 32


class LogReadError(EagleLabError):
    """The log source cannot be read (missing path, a directory, permission denied)."""


# --------------------------------------------------------------------------- public API


def read_log(source, engine: str = "auto"):
    """Read a log into a DataFrame, one row per recognised record (see module doc).

    ``source``: a path (str or Path), log text (a str containing a newline, or bytes), or an
    iterable of lines. A str naming an existing file is a path; a str that names nothing and
    looks like a path raises ``LogReadError``, as do directories and unreadable files.
    ``engine``: "auto" or one of ENGINES to keep only that engine's records.

    Columns: ``COLUMNS`` (see log-formats.md for each engine's fields). ``engine`` and
    ``kind`` are categoricals (ENGINES, KINDS; kind "stats" is vLLM's engine throughput
    line), counts and ranks are nullable Int64, ``graph`` nullable boolean, ``accept_len``
    always includes the bonus token, ``accept_rate_raw`` is SGLang's printed rate (its
    meaning changed between versions), ``draft_accept_rate`` is accepted / drafted.
    A time without a date borrows the nearest record's date, else 1900-01-01.

    ``df.attrs``: ``skipped`` (lines that carry no record data), ``malformed`` (line numbers
    of cut or damaged records, which keep whatever fields they still carry), ``lines``
    (lines read), ``source`` (a path or "<text>").
    """
    if engine != "auto" and engine not in ENGINES:
        raise LogReadError(f"unknown engine {engine!r}; choose auto or one of {', '.join(ENGINES)}")
    parser = _Parser()
    batches, label = _line_batches(source)
    # Millions of small tuples, none of them cyclic: the cyclic GC would rescan them all
    # again and again (measurably slower on big logs), so pause it while parsing.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for block in batches:
            parser.feed(block)
        df = parser.frame()
    finally:
        if gc_was_enabled:
            gc.enable()
    if engine != "auto":
        dropped = int((df["engine"] != engine).sum())
        df = df[df["engine"] == engine].reset_index(drop=True)
        parser.used -= dropped
        kept = set(df["line"].tolist())
        parser.malformed = [n for n in parser.malformed if n in kept]
    df.attrs["skipped"] = parser.n - parser.used
    df.attrs["malformed"] = sorted(set(parser.malformed))
    df.attrs["lines"] = parser.n
    df.attrs["source"] = label
    return df


# --------------------------------------------------------------------------- reading lines


def _line_batches(source) -> tuple[Iterator[str], str]:
    """Blocks of lines joined by newlines from any kind of source, and a label."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        return _text_batches(_decode_bytes(bytes(source))), "<text>"
    if isinstance(source, str):
        if "\n" in source or "\r" in source or source == "":
            return _text_batches(source), "<text>"
        path = Path(source)
        try:
            if path.is_file():
                return _file_batches(path), str(path)
            is_dir = path.is_dir()
        except (OSError, ValueError):  # name too long, NUL byte, no permission
            is_dir = False
        if is_dir or not _looks_like_log_text(source):
            _check_path(path)
        return _text_batches(source), "<text>"
    if isinstance(source, os.PathLike):
        path = Path(source)
        _check_path(path)
        return _file_batches(path), str(path)
    if hasattr(source, "read") or isinstance(source, Iterable):
        return _iter_batches(source), getattr(source, "name", "<lines>")
    raise LogReadError(f"cannot read a log from a {type(source).__name__}")


def _looks_like_log_text(s: str) -> bool:
    """A one-line str that names no file: a log line rather than a mistyped path?"""
    return len(s) > 4096 or ": " in s or " = " in s or ", " in s


def _check_path(path: Path) -> None:
    """Raise a one-line LogReadError for a path that is not a readable regular file."""
    try:
        if path.is_dir():
            raise LogReadError(f"{path} is a directory, not a log file")
        if not path.exists():
            raise LogReadError(f"{path}: no such file")
        if not path.is_file():
            raise LogReadError(f"{path} is not a regular file")
    except OSError as exc:
        raise LogReadError(f"{path}: {exc.strerror or exc}") from None


def _decode_bytes(data: bytes) -> str:
    return data.decode(_sniff_encoding(data[:4096]), errors="replace")


def _sniff_encoding(head: bytes) -> str:
    """UTF-16 logs come from Windows shells ("> out.log"): a BOM and mostly-NUL high bytes
    (a BOM alone may be junk at the start of a damaged file). Everything else is UTF-8."""
    for bom, high in ((codecs.BOM_UTF16_LE, head[3::2]), (codecs.BOM_UTF16_BE, head[2::2])):
        if head.startswith(bom) and high and high.count(0) > len(high) // 2:
            return "utf-16"
    return "utf-8-sig" if head.startswith(codecs.BOM_UTF8) else "utf-8"


def _text_batches(text: str) -> Iterator[str]:
    """Blocks of whole lines joined by "\\n" (no trailing newline), a few MiB each."""
    if "\r" in text:
        text = text.replace("\r\n", "\n")
    if text.endswith("\n"):
        text = text[:-1]
    if text == "":
        return
    size = _FIRST_BLOCK
    pos = 0
    while pos <= len(text):
        cut = text.find("\n", pos + size)
        if cut < 0:
            yield text[pos:]
            return
        yield text[pos:cut]
        pos = cut + 1
        size = _CHUNK_BYTES


def _file_batches(path: Path) -> Iterator[str]:
    """Stream a file in blocks: one decoded block and its records in memory at a time."""
    try:
        f = open(path, "rb")
    except OSError as exc:
        raise LogReadError(f"{path}: {exc.strerror or exc}") from None
    with f:
        try:
            block = f.read(_FIRST_BLOCK)
        except OSError as exc:
            raise LogReadError(f"{path}: {exc.strerror or exc}") from None
        decoder = codecs.getincrementaldecoder(_sniff_encoding(block[:4096]))(errors="replace")
        pending: list[str] = []  # pieces of a line longer than a block (no quadratic joins)
        while True:
            text = decoder.decode(block, final=not block)
            cut = text.rfind("\n") if block else len(text)
            if cut < 0:
                pending.append(text)
            else:
                body = "".join(pending) + text[:cut] if pending else text[:cut]
                pending = [text[cut + 1:]] if block else []
                if block or body:
                    if "\r" in body:
                        body = body.replace("\r\n", "\n")
                    yield body
            if not block:
                return
            try:
                block = f.read(_CHUNK_BYTES)
            except OSError as exc:
                raise LogReadError(f"{path}: {exc.strerror or exc}") from None


def _iter_batches(lines) -> Iterator[str]:
    batch: list[str] = []
    for item in lines:
        if isinstance(item, (bytes, bytearray)):
            item = bytes(item).decode("utf-8", errors="replace")
        item = str(item)
        if item.endswith("\n"):
            item = item[:-1]
        if item.endswith("\r"):
            item = item[:-1]
        batch.append(item)
        if len(batch) >= _BATCH_LINES:
            yield "\n".join(batch)
            batch = []
    if batch:
        yield "\n".join(batch)


# --------------------------------------------------------------------------- line grammar

_NUM = r"-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|NaN|-?inf"
_NUM_RX = re.compile(r"\s*(" + _NUM + r")")
_ANSI_RX = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>]")
# Lines worth a closer look besides "batch" lines.
_OTHER_RX = re.compile(r"metrics|acceptance|\[AR\]|WARN|peculative|Avg generation|"
                       r"num_(?:draft|accepted)|#running-req|#new-token|Engine \d")
_MARKER_RX = re.compile(
    r"(?P<sg>(?P<sgkind>Decode|Prefill) batch(?:\s*\[(?P<iter>[^\]]*)\])?[.,:]?)"
    r"|(?P<vspec>SpecDecoding metrics:)"
    r"|(?P<v0>Speculative metrics:)"
    r"|(?P<vstats>Avg prompt throughput:|Avg generation throughput:)"
    r"|(?P<llama>draft acceptance\s*=)"
    r"|(?P<offmean>(?<![A-Za-z])mean acceptance length:)"
    r"|(?P<offpos>(?<![A-Za-z])acceptance at token (?P<pos>\d+)\s*:)"
    r"|(?P<ar>\[AR\]\s*(?P<arstat>[A-Za-z0-9]+)\s*:)"
    r"|(?P<offcount>(?<![A-Za-z_])num_(?P<offkey>drafts|draft_tokens|accepted_tokens):)"
)
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
_LLAMA_FIELDS = (
    ("draft_accept_rate", re.compile(r"draft acceptance\s*=\s*(" + _NUM + ")")),
    ("accepted", re.compile(r"(\d+)\s+accepted\b")),
    ("drafted", re.compile(r"(\d+)\s+generated\b")),
    ("accept_len", re.compile(r"mean acceptance length\s*=\s*(" + _NUM + ")")),
)
_LLAMA_POS_RX = re.compile(r"acceptance rate per position\s*=\s*\(([^)]*)(\)?)")

# key (lower case, as printed) -> (column, conversion). conversion "num" takes the leading
# number ("150 tokens" -> 150, "38.8%" -> 38.8 then /100 for rate columns), "bool" True/False.
_KEYS: dict[str, tuple[str | None, str]] = {
    # SGLang (metrics_reporter.py, 0.5.23; older builds)
    "#running-req": ("running_req", "num"), "#queue-req": ("queue_req", "num"),
    "#token": ("num_tokens", "num"), "#full token": ("num_tokens", "num"),
    "token usage": ("token_usage", "num"), "full token usage": ("token_usage", "num"),
    "gen throughput (token/s)": ("gen_throughput", "num"),
    "input throughput (token/s)": ("input_throughput", "num"),
    "accept len": ("accept_len", "num"), "accept rate": ("accept_rate_raw", "num"),
    "#new-token": ("new_token", "num"), "#cached-token": ("cached_token", "num"),
    # vLLM V1 SpecDecoding metrics (vllm/v1/spec_decode/metrics.py)
    "draft acceptance rate": ("draft_accept_rate", "num"),
    "avg draft acceptance rate": ("draft_accept_rate", "num"),
    "mean acceptance length": ("accept_len", "num"),
    "accepted": ("accepted", "num"), "drafted": ("drafted", "num"),
    "per-position acceptance rate": ("per_position", "list"),
    # vLLM V0 Speculative metrics (vllm/spec_decode/metrics.py)
    "number of speculative tokens": ("num_spec_tokens", "num"),
    "number of accepted tokens": ("accepted", "num"),
    "number of draft tokens": ("drafted", "num"),
    "number of emitted tokens": ("emitted", "num"),
    # vLLM engine stats (vllm/v1/metrics/loggers.py; V0 engine/metrics.py)
    "avg prompt throughput": ("input_throughput", "num"),
    "avg generation throughput": ("gen_throughput", "num"),
    "running": ("running_req", "num"), "waiting": ("queue_req", "num"),
    "pending": ("queue_req", "num"), "gpu kv cache usage": ("token_usage", "num"),
}
_RATE_COLUMNS = {"draft_accept_rate", "token_usage", "accept_rate_raw"}
# Known fields we do not keep: recognised so that a cut line ("token usaccept rate") can be
# told from a genuine field whose name merely ends like a known one ("swa token usage").
_IGNORED = {
    "#new-seq", "#swa token", "swa token usage", "mamba num", "mamba usage", "largest-len",
    "cap len", "block accept len", "pre-allocated usage", "#prealloc-req", "#transfer-req",
    "#retracted-req", "#host-receive-req", "waiting-image-req", "#pending-token",
    "#bootstrap-req", "#inflight-req", "#optimistic-req", "cache hit rate", "#cache_miss",
    "est. decode tflops/s (per gpu)", "est. read bw (gb/s per gpu)", "accepted throughput",
    "drafted throughput", "system efficiency", "prefix cache hit rate", "swapped",
    "cpu kv cache usage",
}
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


def _merge_parts(parts: list) -> dict:
    """Several parts of one block as one part in line order (small arrays: cheap to take)."""
    import numpy as np

    columns = set().union(*(p.keys() for p in parts)) - {"_n"}
    merged = {c: np.concatenate([_part_column(p, c) for p in parts]) for c in columns}
    order = np.argsort(merged["line"], kind="stable")
    merged = {c: v[order] for c, v in merged.items()}
    merged["_n"] = len(order)
    return merged


def _concat(parts: list, column: str, dtype):
    import numpy as np

    if not parts:
        return np.empty(0, dtype=dtype)
    return np.concatenate([p[column] for p in parts]).astype(dtype, copy=False)


_TRUE = frozenset(("True", "true"))


def _part_column(part: dict, column: str):
    """One part's values for a column, materialising constants and absent columns."""
    import numpy as np

    value = part.get(column)
    n = part["_n"]
    if isinstance(value, str):
        return np.full(n, value, dtype=object)
    if value is None:
        return np.full(n, None, dtype=object) if column in _OBJECT_COLUMNS else np.full(n, np.nan)
    return value


def _object_array(values):
    """A 1-D object array (tuples stay elements, never a second dimension)."""
    import numpy as np

    return np.fromiter(values, dtype=object, count=len(values))


def _floats(values):
    """Strings to float64 at C speed; values that are not numbers become NaN and are flagged."""
    import numpy as np

    n = len(values)
    try:
        return np.fromiter(map(float, values), np.float64, n), np.zeros(n, dtype=bool)
    except ValueError:
        out = np.empty(n)
        bad = np.zeros(n, dtype=bool)
        for i, v in enumerate(values):
            try:
                out[i] = float(v)
            except ValueError:
                out[i] = np.nan
                bad[i] = True
        return out, bad


def _int_array(values):
    import numpy as np
    import pandas as pd

    values = values.astype(float, copy=False)
    missing = np.isnan(values)
    if missing.all():
        return pd.arrays.IntegerArray(np.zeros(len(values), dtype=np.int64), missing)
    finite = values[~missing]
    if finite.size and (np.any(finite != np.round(finite)) or np.any(np.abs(finite) > 2**53)):
        return values  # a damaged value made it non-integral: keep floats rather than lie
    return pd.arrays.IntegerArray(np.where(missing, 0, values).astype(np.int64), missing)


def _slow_part(slow: list) -> dict:
    import numpy as np

    count = len(slow)
    part: dict = {"_n": count, "line": np.array([n for n, _, _ in slow], dtype=np.int64),
                  "raw": _object_array([line for _, line, _ in slow]),
                  "engine": np.array([ENGINES.index(r.engine) for _, _, r in slow], dtype=np.int8),
                  "kind": np.array([KINDS.index(r.kind) for _, _, r in slow], dtype=np.int8)}
    columns = set()
    for _, _, rec in slow:
        columns.update(k for k in rec.values if not k.startswith("_") or k in _TIME_PARTS)
    for column in columns:
        values = [rec.values.get(column) for _, _, rec in slow]
        if column in _OBJECT_COLUMNS:
            part[column] = _object_array(values)
        else:
            part[column] = np.array([np.nan if v is None else float(v) for v in values])
    return part


def _derive(data: dict) -> None:
    """Fill what the printed numbers determine (vLLM definitions, log-formats.md)."""
    import numpy as np

    vllm = data["engine"] == ENGINES.index("vllm")
    acc, drafted = data["accepted"].astype(float), data["drafted"].astype(float)
    rate = data["draft_accept_rate"]
    with np.errstate(divide="ignore", invalid="ignore"):
        fill = vllm & np.isnan(rate) & ~np.isnan(acc) & (drafted > 0)
        rate[fill] = acc[fill] / drafted[fill]
        # V0: emitted tokens over verify steps (drafted / k) = tokens per step incl. bonus.
        k, emitted = data["num_spec_tokens"].astype(float), data["emitted"].astype(float)
        accept = data["accept_len"]
        fill = vllm & np.isnan(accept) & (k > 0) & (drafted > 0) & ~np.isnan(emitted)
        accept[fill] = emitted[fill] * k[fill] / drafted[fill]
    # Unconditional per-position rates sum to accepted / drafts: 1 + sum = mean length.
    for i in np.flatnonzero(vllm & np.isnan(accept)):
        pp = data["per_position"][i]
        if pp:
            accept[i] = 1.0 + sum(pp)


_TIME_FORMATS = {"_dt": None, "_mdt": "%m-%d %H:%M:%S", "_clock": "%H:%M:%S"}


def _times(n: int, full, mdt, clock):
    """One Timestamp column from full, month-day and time-of-day prefixes (parsed, in order).

    Missing parts are borrowed: a time of day takes the date of the nearest dated record,
    else 1900-01-01 (strptime's convention for "no date") rolling over at midnight; a vLLM
    month-day takes year 1900.
    """
    import pandas as pd

    nat = pd.Series(pd.NaT, index=range(n), dtype="datetime64[ns]")
    full = nat if full is None else pd.Series(full)
    out = full if mdt is None else full.fillna(pd.Series(mdt))
    if clock is None:
        return out
    clock = pd.Series(clock)
    need = out.isna() & clock.notna()
    if need.any():
        tod = clock - pd.Timestamp("1900-01-01")
        dates = full.dt.normalize().bfill().ffill()
        if dates.isna().all():
            # A time of day that jumps back by more than 12 h crossed midnight.
            secs = tod.dt.total_seconds().where(need).ffill()
            days = (secs.diff() < -12 * 3600).cumsum()
            dates = pd.Timestamp("1900-01-01") + pd.to_timedelta(days, unit="D")
        out = out.where(~need, dates + tod)
    return out.astype("datetime64[ns]")


def _parse_unique(values, fmt):
    """Parse strings once per distinct value (a busy log repeats each second many times)."""
    import numpy as np
    import pandas as pd

    codes, uniques = pd.factorize(pd.Series(values, dtype=object), use_na_sentinel=True)
    result = np.full(len(values), np.datetime64("NaT"), dtype="datetime64[ns]")
    if len(uniques):
        uniq = pd.Series(np.asarray(uniques, dtype=object)).astype(str)
        parsed = pd.to_datetime(uniq, format=fmt or "%Y-%m-%d %H:%M:%S",
                                errors="coerce").astype("datetime64[ns]")
        rest = parsed.isna()
        if fmt is None and rest.any():  # fractions, "T", zones: ISO 8601, zones to naive UTC
            iso = uniq[rest].str.replace(",", ".", regex=False)
            parsed[rest] = pd.to_datetime(iso, format="ISO8601", errors="coerce", utc=True
                                          ).dt.tz_localize(None).astype("datetime64[ns]")
        parsed = parsed.to_numpy()
        ok = codes >= 0
        result[ok] = parsed[codes[ok]]
    return result


# --------------------------------------------------------------------------- summaries


def sglang_accept_rate_definition(df) -> dict:
    """Which of SGLang's two `accept rate` definitions a log's decode lines follow.

    Older builds print accept_len / (num_steps + 1) (bonus included); newer ones print
    accepted drafts / (forward passes x (num_draft_tokens - 1)) = (accept_len - 1) / k
    (log-formats.md). Both are printed with 2 decimals, so a definition fits when one
    integer k reproduces every printed rate within rounding. Returns {"definition": "old" |
    "new" | "ambiguous" | "unknown", "k": the denominator (num_steps + 1 for old,
    num_draft_tokens - 1 for new) or None, "rows": decode lines used}.
    """
    import numpy as np

    rows = df[(df["engine"] == "sglang") & df["accept_len"].notna() & df["accept_rate_raw"].notna()
              & (df["accept_rate_raw"] > 0)]
    length = rows["accept_len"].to_numpy(float)
    rate = rows["accept_rate_raw"].to_numpy(float)
    fits = {}
    for name, numerator in (("old", length), ("new", length - 1.0)):
        if len(rows) == 0 or np.all(numerator <= 0):
            continue
        k = int(round(float(np.median(numerator / rate))))
        if k < 1:
            continue
        tolerance = 0.005 + 0.005 / k + 1e-9  # rate and length each rounded to 2 decimals
        if np.all(np.abs(numerator / k - rate) <= tolerance):
            fits[name] = k
    if len(fits) == 1:
        (definition, k), = fits.items()
    else:
        definition, k = ("ambiguous" if fits else "unknown"), None
    return {"definition": definition, "k": k, "rows": len(rows)}


_MAX_PLOT_POINTS = 20_000


def summarize(df):
    """Records by engine and kind, with accept length and throughput statistics."""
    import pandas as pd

    if df.empty:
        return pd.DataFrame(columns=["engine", "kind", "records", "accept_len_mean",
                                     "accept_len_median", "accept_len_min", "accept_len_max",
                                     "gen_throughput_mean", "input_throughput_mean",
                                     "malformed"])
    malformed = set(df.attrs.get("malformed", []))
    grouped = df.assign(malformed=df["line"].isin(malformed)).groupby(
        ["engine", "kind"], sort=True, observed=True)
    out = grouped.agg(records=("line", "size"),
                      accept_len_mean=("accept_len", "mean"),
                      accept_len_median=("accept_len", "median"),
                      accept_len_min=("accept_len", "min"),
                      accept_len_max=("accept_len", "max"),
                      gen_throughput_mean=("gen_throughput", "mean"),
                      input_throughput_mean=("input_throughput", "mean"),
                      malformed=("malformed", "sum"))
    return out.reset_index()


def plot_log(df, path=None):
    """Accept length (top) and generation throughput (bottom) over time when every plotted
    record has a timestamp (seconds since each file's first record when there are several
    files), else over line number; one line per `file` (if that column exists). Saves to
    `path` when given; returns the matplotlib Figure."""
    import matplotlib.pyplot as plt

    from eagle3lab.style import COLORS, apply_style

    apply_style()
    panels = [("accept_len", "accept length\n(tokens/step)", COLORS["observed"]),
              ("gen_throughput", "gen throughput\n(token/s)", COLORS["model"])]
    fig, axes = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    if "file" not in df.columns:
        df = df.assign(file=df.attrs.get("source", "log"))
    files = list(dict.fromkeys(df["file"]))
    rows = df[df["accept_len"].notna() | df["gen_throughput"].notna()]
    use_time = len(rows) > 0 and rows["time"].notna().all()
    elapsed = use_time and len(files) > 1
    if elapsed:
        start = rows.groupby("file", sort=False)["time"].transform("min")
        rows = rows.assign(elapsed=(rows["time"] - start).dt.total_seconds())
    x_col = "elapsed" if elapsed else "time" if use_time else "line"
    for ax, (column, label, color) in zip(axes, panels):
        for i, name in enumerate(files):
            part = rows[(rows["file"] == name) & rows[column].notna()]
            if part.empty:
                continue
            step = max(1, len(part) // _MAX_PLOT_POINTS)
            part = part.iloc[::step]
            kwargs = {"color": color} if len(files) == 1 else {"color": f"C{i}"}
            ax.plot(part[x_col], part[column], marker=".", markersize=3, linewidth=0.8,
                    label=Path(str(name)).name, **kwargs)
        ax.set_ylabel(label)
        if not ax.lines:
            ax.text(0.5, 0.5, f"no {column} in these logs", ha="center", va="center",
                    transform=ax.transAxes, color=COLORS["baseline"])
    if len(files) > 1:  # one legend entry per file, whichever panel it appears in
        handles = {line.get_label(): line for ax in axes for line in ax.lines}
        axes[0].legend(handles.values(), handles.keys(), fontsize="x-small",
                       loc="upper left", bbox_to_anchor=(1.01, 1.0))
    axes[-1].set_xlabel({"elapsed": "seconds since the file's first record", "time": "time",
                         "line": "line number"}[x_col])
    axes[0].set_title("Speculative decoding from server logs")
    if x_col == "time":
        import matplotlib.dates as mdates

        locator = mdates.AutoDateLocator()
        axes[-1].xaxis.set_major_locator(locator)
        axes[-1].xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
    if path is not None:
        try:
            fig.savefig(path)
        except (OSError, ValueError) as exc:
            raise LogReadError(f"cannot write {path}: {exc}") from None
        finally:
            plt.close(fig)
    return fig


__all__ = ["read_log", "summarize", "plot_log", "sglang_accept_rate_definition", "LogReadError",
           "COLUMNS", "ENGINES", "KINDS"]

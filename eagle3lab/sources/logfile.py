"""A server log, read: `read_log` turns SGLang/vLLM/llama.cpp/TensorRT-LLM speculative-decoding
logs into a tidy frame (one row per record, `eagle3lab.sources.log_frame`), and `observe_log`
turns a log into an `Observation`, with the effective config read from the log itself where
it says it (SGLang's adjustment warning, its printed server args).

``read_log(source)`` reads SGLang scheduler lines (``Decode batch`` / ``Prefill batch``),
vLLM spec-decode and engine metric lines (V0, V1, offline example summaries), llama.cpp
``draft acceptance = ...`` lines, TensorRT-LLM ``[AR]`` statistics and SGLang/vLLM
warnings, one row per record, in line order. The grammar: `eagle3lab.sources.log_parser`;
the formats and where they were read: docs/sources.md. The CLI is ``eagle3lab logs``.
"""

from __future__ import annotations

import codecs
import gc
import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from eagle3lab.sources.log_frame import (COLUMNS, ENGINES, KINDS, LogReadError,  # noqa: F401
                                         plot_log, sglang_accept_rate_definition, summarize)
from eagle3lab.sources.log_parser import _Parser

_CHUNK_BYTES = 1 << 17  # 128 KiB blocks: a block's strings are still in cache when converted
_FIRST_BLOCK = 1 << 15  # a small first block: line shapes are learnt line by line
_BATCH_LINES = 1 << 15  # lines per block for iterables




# --------------------------------------------------------------------------- public API


def read_log(source, engine: str = "auto"):
    """Read a log into a DataFrame, one row per recognised record (see module doc).

    ``source``: a path (str or Path), log text (a str containing a newline, or bytes), or an
    iterable of lines. A str naming an existing file is a path; a str that names nothing and
    looks like a path raises ``LogReadError``, as do directories and unreadable files.
    ``engine``: "auto" or one of ENGINES to keep only that engine's records.

    Columns: ``COLUMNS`` (see docs/sources.md section 3 for each engine's fields). ``engine`` and
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
    share = 0.0
    try:
        for i, block in enumerate(batches):
            if i == 0:
                share = _binary_share(block[:4096])
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
    df.attrs["binary_share"] = share  # of the first block: `binary_note` says what 0 records were
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


# Compressed logs: read through the standard library where it can (gzip, bzip2, xz: logs are
# rotated and shipped that way), named where it cannot, never read as text (their bytes would
# be "lines" that hold no record, with nothing said). The magic bytes, as CPython 3.11's gzip,
# tarfile and zipfile tell them apart, and zstd's from RFC 8878: docs/bad-input.md.
_COMPRESSED = ((b"\x1f\x8b", "gzip", "gzip"), (b"BZh", "bzip2", "bz2"), (b"\xfd7zXZ\x00", "xz", "lzma"),
               (b"\x28\xb5\x2f\xfd", "zstd", None), (b"PK\x03\x04", "zip", None))
_BINARY_SHARE = 0.05  # more undecodable or NUL characters than this in the first block: not a text log


def _open_log(path: Path):
    """A binary file object of the log's bytes: decompressed where the standard library reads the
    format; a LogReadError naming the format where it does not."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(8)
    except OSError as exc:
        raise LogReadError(f"{path}: {exc.strerror or exc}") from None
    for magic, name, module in _COMPRESSED:
        if head.startswith(magic):
            if module is None:
                raise LogReadError(f"{path} is {name}-compressed: decompress it first and pass the log")
            import importlib

            return importlib.import_module(module).open(path, "rb")
    return open(path, "rb")


def binary_note(df) -> str:
    """'' or why a frame without records came from a file that is not text (random bytes, an
    image, a checkpoint): read_log counts such lines as skipped; this says what they were."""
    share = df.attrs.get("binary_share") or 0.0
    if len(df) or share <= _BINARY_SHARE:
        return ""
    return f"it looks binary, not a text log ({100 * share:.0f}% of its first characters are not text)"


def _binary_share(text: str) -> float:
    """Share of undecodable (U+FFFD) and NUL characters in a decoded block."""
    return (text.count("\ufffd") + text.count("\x00")) / len(text) if text else 0.0


def _file_batches(path: Path) -> Iterator[str]:
    """Stream a file in blocks: one decoded block and its records in memory at a time."""
    f = _open_log(path)
    with f:
        try:
            block = f.read(_FIRST_BLOCK)
        except (OSError, EOFError) as exc:  # a damaged archive
            raise LogReadError(f"{path}: {getattr(exc, 'strerror', None) or exc}") from None
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
            except (OSError, EOFError) as exc:
                raise LogReadError(f"{path}: {getattr(exc, 'strerror', None) or exc}") from None


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




# --------------------------------------------------------------------------- the config a log states

# `server_args=ServerArgs(key=value, ...)` (SGLang up to 0.5.x) and `server_args={'key': value,
# ...}` (0.5.23 engine.py `_server_args_for_logging`): the resolved values, printed at start.
_SERVER_ARGS_FIELD = re.compile(
    r"['\"]?\b(speculative_num_steps|speculative_eagle_topk|speculative_num_draft_tokens|"
    r"speculative_algorithm|page_size|max_running_requests)['\"]?\s*[=:]\s*('?[\w.]+'?)")
ADJUSTED = "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1"


def config_from_log(source) -> dict:
    """Evidence in a log about which speculative config ran.

    `source`: a read_log() frame, or what read_log accepts (a path or the log text); with the
    latter the printed server args (resolved values, which read_log does not keep) are read
    too. Looks for SGLang's adjustment warning, the server-args values, and the largest accept
    length (it cannot exceed num_steps + 1).
    Returns {"adjusted", "server_args", "max_accept_len", "evidence"}.
    """
    df, texts = _frame_and_lines(source)
    return _config_evidence(df, texts)


def _config_evidence(df, texts) -> dict:
    evidence, server_args = [], {}
    adjusted = False
    for t in texts:
        if ADJUSTED in t:
            adjusted = True
            evidence.append(t.strip())
        if "server_args" in t or "ServerArgs(" in t:
            for key, value in _SERVER_ARGS_FIELD.findall(t):
                value = value.strip("'")
                server_args[key] = int(value) if value.isdigit() else value
    max_al = None
    if df is not None and "accept_len" in df.columns:
        col = df["accept_len"].dropna()
        max_al = float(col.max()) if len(col) else None
    steps = server_args.get("speculative_num_steps")
    if max_al is not None and isinstance(steps, int) and max_al > steps + 1 + 1e-6:
        evidence.append(f"accept len {max_al:.2f} > num_steps + 1 = {steps + 1}: the logged "
                        "server args are not the config that produced these metrics")
    if server_args:
        evidence.append("server args: " + ", ".join(f"{k}={v}" for k, v in server_args.items()))
    return {"adjusted": adjusted, "server_args": server_args, "max_accept_len": max_al,
            "evidence": evidence}


def _frame_and_lines(source, engine: str = "auto"):
    """(read_log frame, text lines to scan: its messages and the printed server args) for a
    frame, a path, log text or lines."""
    if hasattr(source, "columns"):
        for col in ("raw", "message"):
            if col in source.columns:
                return source, [str(t) for t in source[col].dropna().tolist()]
        return source, []
    if not isinstance(source, (str, bytes, Path)):
        source = _Lines(source)  # an iterable is read twice
    frame = read_log(source, engine=engine)
    return frame, [str(m) for m in frame["message"].dropna()] + _server_args_lines(source)


class _Lines(list):
    """An iterable's lines, kept to be read twice, under its name (stdin: '<stdin>')."""

    def __init__(self, lines):
        super().__init__(lines)
        self.name = getattr(lines, "name", "<lines>")


def _server_args_lines(source) -> list[str]:
    """The lines that print SGLang's server args (a path is streamed, not loaded)."""
    wanted = ("server_args", "ServerArgs(")
    if isinstance(source, bytes):
        lines = _decode_bytes(source).splitlines()
    elif isinstance(source, Path) or (isinstance(source, str) and "\n" not in source
                                      and not _looks_like_log_text(source)):
        import io

        with io.TextIOWrapper(_open_log(Path(source)), errors="replace") as fh:
            return [line for line in fh if any(w in line for w in wanted)]
    elif isinstance(source, str):
        lines = source.splitlines()
    else:
        lines = [str(line) for line in source]
    return [line for line in lines if any(w in line for w in wanted)]


# --------------------------------------------------------------------------- a log -> Observation

from eagle3lab.spec import SPEC_KEYS, SPEC_NAMES, chain  # noqa: E402


def effective_from_log(evidence: dict, requested=None) -> dict:
    """The effective num_steps / topk / num_draft_tokens a log states: its server args, else
    SGLang's adjustment warning applied to the requested num_steps (topk 1, steps + 1)."""
    args = evidence["server_args"]
    out = {k: args.get(SPEC_NAMES[k][1]) for k in SPEC_KEYS}
    out = {k: v for k, v in out.items() if isinstance(v, int)}
    steps = out.get("num_steps", getattr(requested, "num_steps", None))
    if evidence["adjusted"] and "num_draft_tokens" not in out and steps:
        out.update(zip(SPEC_KEYS, chain(steps)))
    return out


def observe_log(source, requested=None, engine: str = "auto"):
    """A server log as an `Observation`: accept length (mean of the logged values, bonus
    included), per-position acceptance where the engine logs it (vLLM, llama.cpp:
    unconditional rates, pooled and returned conditional), throughput, warnings, and the
    effective config the log states (`effective_from_log`). `requested`: the SpecConfig that
    was asked for, when known (what the effective config is compared with)."""
    from eagle3lab.acceptance import stats
    from eagle3lab.sources.observation import Observation

    frame, texts = _frame_and_lines(source, engine)
    evidence = _config_evidence(frame, texts)
    has_positions = frame["per_position"].map(lambda v: isinstance(v, (list, tuple)) and len(v) > 0)
    per_pos = stats.per_position_from_log(frame, conditional=True) if has_positions.any() else None
    decode = frame[frame["kind"] == "decode"]["gen_throughput"].dropna()
    warnings = [str(m) for m in frame.loc[frame["kind"] == "warning", "message"].dropna()]
    warnings += [e for e in evidence["evidence"] if e not in warnings and ADJUSTED in e]
    engines = frame["engine"].value_counts()
    asked = {} if requested is None else {k: getattr(requested, k) for k in SPEC_KEYS
                                          if getattr(requested, k) is not None}
    return Observation(
        source="log", engine=str(engines.idxmax()) if engines.max() > 0 else None,
        effective=effective_from_log(evidence, requested), requested=asked,
        accept_length=stats.accept_length_of_intervals(frame["accept_len"]),
        per_position=per_pos, conditional=True if per_pos is not None else None,
        tokens_per_s=float(decode.mean()) if len(decode) else None,
        n_steps=int(per_pos["n"].iloc[0]) if per_pos is not None else None,  # drafts
        warnings=warnings, frame=frame)

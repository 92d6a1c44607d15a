"""The frame `read_log` returns: its columns and dtypes, the column-wise assembly of parsed
lines into it (times parsed once per distinct stamp, derived columns), and what is computed
from it (`summarize`, `sglang_accept_rate_definition`, `plot_log`).

Columns: ``COLUMNS``. ``engine`` and ``kind`` are categoricals (ENGINES, KINDS; kind "stats"
is vLLM's engine throughput line), counts and ranks are nullable Int64, ``graph`` nullable
boolean, ``accept_len`` always includes the bonus token, ``accept_rate_raw`` is SGLang's
printed rate (its meaning changed between versions, docs/sources.md), ``draft_accept_rate``
is accepted / drafted, ``per_position`` vLLM's / llama.cpp's unconditional rates.
"""

from __future__ import annotations

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



class LogReadError(EagleLabError):
    """The log source cannot be read (missing path, a directory, permission denied)."""


# --------------------------------------------------------------------------- assembly

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
    """Fill what the printed numbers determine (vLLM definitions, docs/sources.md section 3)."""
    import numpy as np

    from eagle3lab.acceptance.stats import accept_length_from_rates, accept_length_of_counts

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
        accept[fill] = accept_length_of_counts(emitted[fill], drafted[fill] / k[fill])
    # Unconditional per-position rates sum to accepted / drafts: 1 + sum = mean length.
    for i in np.flatnonzero(vllm & np.isnan(accept)):
        pp = data["per_position"][i]
        if pp:
            accept[i] = accept_length_from_rates(pp, conditional=False)


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
    (docs/sources.md section 3). Both are printed with 2 decimals, so a definition fits when one
    integer k reproduces every printed rate within rounding. Returns {"definition": "old" |
    "new" | "ambiguous" | "unknown", "k": the denominator (num_steps + 1 for old,
    num_draft_tokens - 1 for new) or None, "rows": decode lines used}.
    """
    import numpy as np

    # only SGLang's grammar fills accept_rate_raw (its decode line's "accept rate")
    rows = df[df["accept_len"].notna() & df["accept_rate_raw"].notna() & (df["accept_rate_raw"] > 0)]
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

    from eagle3lab.viz.style import COLORS, apply_style

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


__all__ = ["summarize", "plot_log", "sglang_accept_rate_definition", "LogReadError",
           "COLUMNS", "ENGINES", "KINDS"]

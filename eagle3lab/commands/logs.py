"""`eagle3lab logs FILE...`: summarise speculative-decoding server logs."""

from __future__ import annotations

import sys
from pathlib import Path

HELP = "summarise SGLang/vLLM/llama.cpp/TRT-LLM logs: accept length and throughput per file"

_MAX_PLOT_POINTS = 20_000


def add_arguments(parser) -> None:
    parser.add_argument("files", nargs="+", metavar="FILE", help="log files ('-' reads stdin)")
    parser.add_argument("--csv", metavar="OUT", help="write every record of every file as CSV")
    parser.add_argument("--plot", metavar="OUT.png",
                        help="plot accept length and generation throughput over time")
    parser.add_argument("--engine", default="auto",
                        choices=["auto", "sglang", "vllm", "llamacpp", "trtllm"],
                        help="keep only this engine's records (default: all)")


def run(args) -> int:
    import pandas as pd

    from eagle3lab.logs import LogReadError, read_log

    frames, failed = [], 0
    for name in args.files:
        try:
            df = read_log(sys.stdin if name == "-" else name, engine=args.engine)
        except LogReadError as exc:
            print(f"eagle3lab: error: {exc}", file=sys.stderr)
            failed += 1
            continue
        df.insert(0, "file", name)
        print(format_summary(name, df))
        frames.append(df)
    if frames:
        table = pd.concat(frames, ignore_index=True)
        if args.csv:
            write_csv(table, args.csv)
            print(f"wrote {len(table):,} records to {args.csv}")
        if args.plot:
            plot_log(table, args.plot)
            print(f"wrote {args.plot}")
    return 2 if failed else 0


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
        ["engine", "kind"], sort=True)
    out = grouped.agg(records=("line", "size"),
                      accept_len_mean=("accept_len", "mean"),
                      accept_len_median=("accept_len", "median"),
                      accept_len_min=("accept_len", "min"),
                      accept_len_max=("accept_len", "max"),
                      gen_throughput_mean=("gen_throughput", "mean"),
                      input_throughput_mean=("input_throughput", "mean"),
                      malformed=("malformed", "sum"))
    return out.reset_index()


def format_summary(name: str, df) -> str:
    attrs = df.attrs
    head = (f"== {name}: {attrs.get('lines', 0):,} lines, {len(df):,} records, "
            f"{attrs.get('skipped', 0):,} skipped, {len(attrs.get('malformed', [])):,} malformed")
    if df.empty:
        return head + "\n   (no speculative-decoding or scheduler records found)"
    table = summarize(df).to_string(index=False, float_format=lambda x: f"{x:.2f}",
                                    na_rep="-")
    return head + "\n" + table


def write_csv(df, path: str) -> None:
    out = df.copy()
    out["per_position"] = [" ".join(f"{v:g}" for v in pp) if isinstance(pp, tuple) else ""
                           for pp in out["per_position"]]
    try:
        out.to_csv(path, index=False)
    except OSError as exc:
        from eagle3lab.errors import EagleLabError

        raise EagleLabError(f"cannot write {path}: {exc.strerror or exc}") from None


def plot_log(df, path: str) -> None:
    """Accept length (top) and generation throughput (bottom) per file, over time when every
    plotted record has a timestamp, else over line number."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from eagle3lab.errors import EagleLabError
    from eagle3lab.style import COLORS, apply_style

    apply_style()
    panels = [("accept_len", "accept length\n(tokens/step)", COLORS["observed"]),
              ("gen_throughput", "gen throughput\n(token/s)", COLORS["model"])]
    fig, axes = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    files = list(dict.fromkeys(df["file"]))
    rows = df[df["accept_len"].notna() | df["gen_throughput"].notna()]
    use_time = len(rows) > 0 and rows["time"].notna().all()
    x_col = "time" if use_time else "line"
    for ax, (column, label, color) in zip(axes, panels):
        for i, name in enumerate(files):
            part = rows[(rows["file"] == name) & rows[column].notna()]
            if part.empty:
                continue
            step = max(1, len(part) // _MAX_PLOT_POINTS)
            part = part.iloc[::step]
            kwargs = {"color": color} if len(files) == 1 else {"color": f"C{i}"}
            ax.plot(part[x_col], part[column], marker=".", markersize=3, linewidth=0.8,
                    label=Path(name).name, **kwargs)
        ax.set_ylabel(label)
        if not ax.lines:
            ax.text(0.5, 0.5, f"no {column} in these logs", ha="center", va="center",
                    transform=ax.transAxes, color=COLORS["baseline"])
    if len(files) > 1 and axes[0].lines:
        axes[0].legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    axes[-1].set_xlabel("time" if use_time else "line number")
    axes[0].set_title("Speculative decoding from server logs")
    if use_time:
        import matplotlib.dates as mdates

        locator = mdates.AutoDateLocator()
        axes[-1].xaxis.set_major_locator(locator)
        axes[-1].xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
    try:
        fig.savefig(path)
    except (OSError, ValueError) as exc:
        raise EagleLabError(f"cannot write {path}: {exc}") from None
    finally:
        plt.close(fig)

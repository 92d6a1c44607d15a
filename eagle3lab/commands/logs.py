"""`eagle3lab logs FILE...`: summarise speculative-decoding server logs."""

from __future__ import annotations

import sys

HELP = "summarise SGLang/vLLM/llama.cpp/TRT-LLM logs: accept length and throughput per file"


def add_arguments(parser) -> None:
    parser.add_argument("files", nargs="+", metavar="FILE", help="log files ('-' reads stdin)")
    parser.add_argument("--csv", metavar="OUT", help="write every record of every file as CSV")
    parser.add_argument("--plot", metavar="OUT.png",
                        help="plot accept length and generation throughput over time")
    parser.add_argument("--engine", default="auto",
                        choices=["auto", "sglang", "vllm", "llamacpp", "trtllm"],
                        help="keep only this engine's records (default: all)")
    parser.add_argument("--diagnose", action="store_true",
                        help="rank likely causes of a low accept length from each log's observation")


def run(args) -> int:
    import pandas as pd

    from eagle3lab.sources.logfile import LogReadError, observe_log, plot_log

    frames, failed = [], 0
    for name in args.files:
        try:
            # stdin as bytes where it has them: decoded leniently, never a UnicodeDecodeError
            obs = observe_log(getattr(sys.stdin, "buffer", sys.stdin) if name == "-" else name, engine=args.engine)
        except LogReadError as exc:
            print(f"eagle3lab: error: {exc}", file=sys.stderr)
            failed += 1
            continue
        df = obs.frame
        df.insert(0, "file", name)
        print(format_summary(name, df))
        print(format_observation(obs, args.diagnose))
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


def format_summary(name: str, df) -> str:
    """A header line (lines, records, skipped, malformed) and the per engine/kind table."""
    from eagle3lab.sources.logfile import summarize

    attrs = df.attrs
    lines, skipped = attrs.get("lines", 0), attrs.get("skipped", 0)
    # lines = lines read into records + lines skipped (a record may span lines: vLLM's offline
    # per-position lines, TensorRT-LLM's [AR] block)
    head = (f"== {name}: {lines:,} lines ({lines - skipped:,} read into {len(df):,} records, "
            f"{skipped:,} skipped), {len(attrs.get('malformed', [])):,} malformed")
    if df.empty:
        from eagle3lab.sources.logfile import binary_note

        why = binary_note(df)
        return head + "\n   (no speculative-decoding or scheduler records found" + (f": {why})" if why else ")")
    table = summarize(df).to_string(index=False, float_format=lambda x: f"{x:.2f}",
                                    na_rep="-")
    return head + "\n" + table


def format_observation(obs, diagnose: bool = False) -> str:
    """What the log says ran and how much was accepted (the Observation), and optionally the
    diagnosis from those numbers alone."""
    eff = obs.effective
    lines = ["   effective config (as the log states it): " + (
        f"num_steps={eff.get('num_steps')} topk={eff.get('topk')} "
        f"num_draft_tokens={eff.get('num_draft_tokens')}" if eff else "not stated")]
    if obs.accept_length is not None:
        lines.append(f"   accept length {obs.accept_length:.2f} (mean of the logged values, bonus included)")
    if obs.per_position is not None:
        # a position no chain reached has no rate (NaN): a dash, not 0.00
        rates = " ".join("-" if r != r else f"{r:.2f}" for r in obs.per_position["rate"])
        never = " (-: no chain reached that position)" if "-" in rates.split() else ""
        lines.append(f"   per-position acceptance (conditional) {rates}{never}")
    lines += [f"   the server changed the config: {w}" for w in obs.warnings
              if "adjusted to speculative_num_steps" in w]
    if diagnose and obs.frame is not None and obs.frame.empty:
        lines.append("   diagnosis: none (no records in this log: nothing to diagnose)")
    elif diagnose:
        from eagle3lab.acceptance.diagnosis import diagnose as run_diagnosis

        top = run_diagnosis(obs)[0]
        lines.append(f"   diagnosis: {top.cause} (ranked first by the rules): {top.evidence}")
    return "\n".join(lines)


def write_csv(df, path: str) -> None:
    """Every record as CSV; per-position rates as one space-separated cell."""
    out = df.copy()
    out["per_position"] = [" ".join(f"{v:g}" for v in pp) if isinstance(pp, tuple) else ""
                           for pp in out["per_position"]]
    try:
        out.to_csv(path, index=False)
    except OSError as exc:
        from eagle3lab.errors import EagleLabError

        raise EagleLabError(f"cannot write {path}: {exc.strerror or exc}") from None

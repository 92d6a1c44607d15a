"""The `eagle3lab` command: one entry point, one subcommand module each."""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading

from eagle3lab.commands import (bench, config, cost, doctor, lab, logs, patch, report, serve, sweep,
                                wiring)
from eagle3lab.errors import EagleLabError

# name -> module under eagle3lab.commands (each has HELP, add_arguments, run).
COMMANDS = {"logs": logs, "config": config, "wiring": wiring, "lab": lab, "serve": serve,
            "bench": bench, "sweep": sweep, "patch": patch, "report": report,
            "doctor": doctor, "cost": cost}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="eagle3lab",
        description="Find out why EAGLE-3 speculative decoding does not pay off: logs, config, "
        "wiring, a real CPU lab, benchmarks and the rendered post-mortem.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module in COMMANDS.items():
        p = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    try:
        with _terminate_as_exit():
            return int(args._run(args) or 0)
    except EagleLabError as exc:
        print(f"eagle3lab: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("eagle3lab: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Terminated:
        print("eagle3lab: terminated (servers it launched were stopped)", file=sys.stderr)
        return 143


class Terminated(BaseException):
    """SIGTERM, raised where the command is, so every `with` it is in stops what it started (a
    BaseException, like KeyboardInterrupt: no `except Exception` in a measuring loop swallows it)."""


@contextlib.contextmanager
def _terminate_as_exit():
    """Why: Python's default SIGTERM ends the process without unwinding, and servers a sweep or a
    bench launched (their own process groups) would outlive it; raised as an exception, the
    servers' context managers stop them. Main thread only; the previous handler comes back."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def raise_terminated(signum, frame):
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())

"""`eagle3lab config`: which speculative configuration the engine will actually run."""

from __future__ import annotations

import argparse
import json

from eagle3lab.spec import LATEST_SGLANG

HELP = "predict the effective speculative config for launch_server flags (exit 1 if it differs)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--engine", default=f"sglang=={LATEST_SGLANG}",
                        help=f"engine[==version]: sglang=={LATEST_SGLANG} (default), sglang==0.4.10, vllm")
    parser.add_argument("--arch", default="LlamaForCausalLM",
                        help="the target's config.json architectures[0] (default LlamaForCausalLM)")
    parser.add_argument("--use-sglang", action="store_true",
                        help="ask the installed SGLang's own ServerArgs resolver (a subprocess)")
    parser.add_argument("--use-vllm", action="store_true",
                        help="with --engine vllm: also ask the vLLM venv's own EngineArgs (a subprocess)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("flags", nargs=argparse.REMAINDER,
                        help="launch_server flags, after a lone --: -- --speculative-num-steps 1 ... "
                        "(none: what SGLang picks by itself for --arch)")


def run(args: argparse.Namespace) -> int:
    from eagle3lab import engines
    from eagle3lab.spec import SpecConfig, split_engine

    flags = list(args.flags)
    if flags[:1] == ["--"]:
        flags = flags[1:]
    name, _ = split_engine(args.engine)  # 'sglang==' (an empty version) is refused here
    _check_asks_itself(args, name)
    eng = engines.lookup(name)
    if eng is not None and eng.config_command is not None:  # its own launch flags (vLLM's `vllm serve`)
        return eng.config_command(args, flags)
    spec = SpecConfig.from_cli(flags)
    res = spec.resolve(engine=args.engine, arch=args.arch, use_sglang=args.use_sglang)
    if args.json:
        print(json.dumps(_as_json(res), indent=2, default=str))
    else:
        print(res.summary())
        print("verdict: " + ("the effective config DIFFERS from what was asked" if res.differs
                             else "runs as asked"))
    return 1 if res.differs else 0


def _check_asks_itself(args, name: str) -> None:
    """--use-sglang / --use-vllm ask that engine's own resolver: refused for the other engine,
    rather than ignored."""
    from eagle3lab.errors import EagleLabError

    for flag, wanted in (("use_sglang", "sglang"), ("use_vllm", "vllm")):
        if getattr(args, flag) and name != wanted:
            raise EagleLabError(f"--{flag.replace('_', '-')} asks {wanted}'s own resolver: it needs "
                                f"--engine {wanted} (got --engine {args.engine})")


def _as_json(res) -> dict:
    from dataclasses import asdict

    out = asdict(res)
    out["changed"] = {k: list(v) for k, v in res.changed.items()}
    out["differs"] = res.differs
    return out

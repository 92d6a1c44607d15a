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
    from eagle3lab.spec import SpecConfig

    flags = list(args.flags)
    if flags[:1] == ["--"]:
        flags = flags[1:]
    if args.engine.strip().lower().startswith("vllm"):
        return _run_vllm(args, flags)
    spec = SpecConfig.from_cli(flags)
    res = spec.resolve(engine=args.engine, arch=args.arch, use_sglang=args.use_sglang)
    if args.json:
        print(json.dumps(_as_json(res), indent=2, default=str))
    else:
        print(res.summary())
        print("verdict: " + ("the effective config DIFFERS from what was asked" if res.differs
                             else "runs as asked"))
    return 1 if res.differs else 0


def _as_json(res) -> dict:
    from dataclasses import asdict

    out = asdict(res)
    out["changed"] = {k: list(v) for k, v in res.changed.items()}
    out["differs"] = res.differs
    return out


def _run_vllm(args: argparse.Namespace, flags: list[str]) -> int:
    """`vllm serve` flags through eagle3lab's vLLM rules (and, with --use-vllm, vLLM itself)."""
    from dataclasses import asdict

    from eagle3lab.errors import EagleLabError
    from eagle3lab.spec import split_engine
    from eagle3lab.engines.vllm.rules import VLLM_RULES_VERSION, parse_vllm_flags, resolve_vllm_serve

    _, version = split_engine(args.engine)
    if version and version != VLLM_RULES_VERSION:
        raise EagleLabError(f"vLLM rules are read for {VLLM_RULES_VERSION} only, not {version}")
    serve = parse_vllm_flags(flags)
    res = resolve_vllm_serve(serve)
    real = None
    if args.use_vllm:
        from eagle3lab.engines.vllm.rules import compare_with_vllm

        table, installed = compare_with_vllm([serve])
        real = {"vllm_version": installed, **table.iloc[0].to_dict()}
    if args.json:
        out = {**asdict(res), "differs": res.differs}
        if real is not None:
            out["vllm_itself"] = real
        print(json.dumps(out, indent=2, default=str))
    else:
        print(res.summary())
        if real is not None:
            print(f"vllm {real['vllm_version']} itself: {real['vllm']} "
                  f"({'agrees' if real['agree'] else 'DISAGREES'})")
        print("verdict: " + ("the effective config DIFFERS from what was asked" if res.differs
                             else "runs as asked"))
    return 1 if res.differs else 0

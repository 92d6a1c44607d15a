"""`eagle3lab config --engine vllm -- FLAGS`: `vllm serve` flags through eagle3lab's vLLM rules
(`rules.resolve_vllm_serve`), and with --use-vllm through vLLM itself (`ENGINE.config_command`)."""

from __future__ import annotations

import json


def run_config(args, flags: list[str]) -> int:
    """`vllm serve` flags through eagle3lab's vLLM rules (and, with --use-vllm, vLLM itself)."""
    from dataclasses import asdict

    from eagle3lab.errors import EagleLabError
    from eagle3lab.spec import split_engine
    from eagle3lab.engines.vllm.vllm_rules import VLLM_RULES_VERSION, parse_vllm_flags, resolve_vllm_serve

    _, version = split_engine(args.engine)
    if version and version != VLLM_RULES_VERSION:
        raise EagleLabError(f"vLLM rules are read for {VLLM_RULES_VERSION} only, not {version}")
    serve = parse_vllm_flags(flags)
    res = resolve_vllm_serve(serve)
    real = None
    if args.use_vllm:
        from eagle3lab.engines.vllm.vllm_rules import compare_with_vllm

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

"""Ask a real vLLM what it would run for `vllm serve` flags: its own EngineArgs, in a subprocess.

Why a subprocess: vLLM lives in its own venv (`eagle3lab.engines.vllm.env.vllm_python`), its import
takes ~20 s and prints platform chatter. Many flag sets are resolved in one subprocess so a
grid of hundreds costs one import. Each flag set goes through what `vllm serve` does with it:
vLLM's own argument parser (`vllm.entrypoints.launchers.cli_args.make_arg_parser`), then
`AsyncEngineArgs.from_cli_args(...).create_engine_config(usage_context=OPENAI_API_SERVER)`,
which builds every config object (model, draft, scheduler) from config.json files without
loading weights.

Protocol: the parent writes a JSON list of argv lists to the worker's stdin
(`python -m eagle3lab.engines.vllm.vllm_resolver`); the worker prints one JSON object
``{"vllm_version": ..., "platform": ..., "results": [...]}`` on its last stdout line.
Each result: {"fields": {...} | None, "error": "ExceptionType(ConfigClass)" | None,
"message": str | None}.
"""

from __future__ import annotations

import json
import sys

# What the worker reads back from the VllmConfig (names as in eagle3lab.engines.effective.VllmResolution).
FIELDS = ("method", "num_speculative_tokens", "draft_tensor_parallel_size", "tensor_parallel_size",
          "max_model_len", "draft_max_model_len", "draft_max_position_embeddings",
          "max_num_batched_tokens", "max_num_seqs", "enable_chunked_prefill")


def resolve_with_vllm(argvs: list[list[str]], python: str | None = None,
                      timeout: float = 600) -> dict:
    """Resolve each `vllm serve` argv with vLLM's own parser and EngineArgs, in one subprocess."""
    from eagle3lab.errors import EagleLabError
    from eagle3lab.engines.vllm.env import vllm_env, vllm_python

    python = vllm_python(python)
    from eagle3lab.workers import run_json_worker

    out = run_json_worker(python, "eagle3lab.engines.vllm.vllm_resolver", argvs, vllm_env(), timeout, "vLLM's resolver")
    if out.get("import_error"):
        raise EagleLabError(f"vllm is not importable with {python} ({out['import_error']})")
    return out


# ----------------------------------------------------------------------------- worker


def error_key(exc: BaseException) -> str:
    """'ValidationError(SpeculativeConfig)' for pydantic errors (which config refused), else the type."""
    name = type(exc).__name__
    title = getattr(exc, "title", None)
    return f"{name}({title})" if name == "ValidationError" and title else name


def _fields(cfg) -> dict:
    spec, sched, model = cfg.speculative_config, cfg.scheduler_config, cfg.model_config
    draft = spec.draft_model_config if spec is not None else None
    return {
        "method": spec.method if spec else None,
        "num_speculative_tokens": spec.num_speculative_tokens if spec else None,
        "draft_tensor_parallel_size": spec.draft_tensor_parallel_size if spec else None,
        "tensor_parallel_size": cfg.parallel_config.tensor_parallel_size,
        "max_model_len": model.max_model_len,
        "draft_max_model_len": draft.max_model_len if draft is not None else None,
        "draft_max_position_embeddings": (getattr(draft.hf_config, "max_position_embeddings", None)
                                          if draft is not None else None),
        "max_num_batched_tokens": sched.max_num_batched_tokens,
        "max_num_seqs": sched.max_num_seqs,
        "enable_chunked_prefill": bool(sched.enable_chunked_prefill),
    }


def _resolve_one(parser, argv: list[str], usage_context) -> dict:
    from vllm.engine.arg_utils import AsyncEngineArgs

    try:
        ns = parser.parse_args(argv)
        if getattr(ns, "model_tag", None):  # `vllm serve MODEL` positional form
            ns.model = ns.model_tag
        cfg = AsyncEngineArgs.from_cli_args(ns).create_engine_config(usage_context=usage_context)
    except SystemExit as exc:  # argparse refusing a flag
        return {"fields": None, "error": "SystemExit", "message": f"argparse exit {exc.code}"}
    except Exception as exc:  # noqa: BLE001 - vLLM refuses with ValueError / pydantic errors
        return {"fields": None, "error": error_key(exc), "message": str(exc)[:600]}
    return {"fields": _fields(cfg), "error": None, "message": None}


def _worker() -> None:
    import contextlib
    import io
    import logging
    import warnings

    warnings.filterwarnings("ignore")
    argvs = json.loads(sys.stdin.read() or "[]")
    try:
        import vllm
        from vllm.entrypoints.launchers.cli_args import make_arg_parser
        from vllm.platforms import current_platform
        from vllm.usage.usage_lib import UsageContext
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except Exception as exc:  # noqa: BLE001 - reported to the parent as a clear error
        print(json.dumps({"import_error": f"{type(exc).__name__}: {exc}"}))
        return
    logging.disable(logging.WARNING)
    parser = make_arg_parser(FlexibleArgumentParser())
    results = []
    for argv in argvs:
        with contextlib.redirect_stderr(io.StringIO()):  # argparse's usage text on refusals
            results.append(_resolve_one(parser, list(argv), UsageContext.OPENAI_API_SERVER))
    print(json.dumps({"vllm_version": vllm.__version__, "platform": current_platform.device_type,
                      "results": results}, default=str))


if __name__ == "__main__":
    _worker()

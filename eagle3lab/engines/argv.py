"""Launch command lines every engine shares: a spec as plain fields, spec fields as flags, the
SGLang-style argv (`--model-path ... --speculative-*`) that SGLang and the lab server both take.

Imports spec and errors only (the engine folders build on it; eagle3lab.serving.server asks them).
"""

from __future__ import annotations

import os
from pathlib import Path

from eagle3lab.errors import ServerError
from eagle3lab.spec import SPEC_NAMES, SpecConfig

DEFAULT_HOST = "127.0.0.1"


def spec_dict(spec) -> dict:
    """A spec as a plain dict: a dict as is; a ``SpecConfig`` without the fields left at their
    defaults (so ``device="cuda"`` is not forced on anyone)."""
    if spec is None:
        return {}
    if isinstance(spec, dict):
        return dict(spec)
    return spec.given()


def spec_to_args(spec, backend: str = "sglang") -> list[str]:
    """Launch flags for a spec: a ``SpecConfig``, or a dict of its fields plus the lab
    server's ``fault``/``faults`` (``--fault``) and any other ``key`` (``--key-with-dashes``).

    The speculative flags come from ``SpecConfig.to_flags`` (one name table, spec.SPEC_NAMES);
    None/False are skipped, True is a bare flag. ``model_path`` is left to ``build_command``.
    """
    if isinstance(spec, SpecConfig):  # the resolved object straight to its flags
        return spec.to_flags(backend) if set(spec.given()) - {"model_path"} else []
    items = spec_dict(spec)
    fields = {k: items.pop(k) for k in list(items) if k in SPEC_NAMES and k != "model_path"}
    items.pop("model_path", None)
    fields = {k: v for k, v in fields.items() if v is not None}
    args = SpecConfig(**fields).to_flags(backend) if fields else []
    for key, value in items.items():
        if value is None or value is False:
            continue
        if key in ("fault", "faults"):
            values = value.split(",") if isinstance(value, str) else list(value)
            args += [a for v in values if str(v).strip() and str(v).strip().lower() != "none"
                     for a in ("--fault", str(v).strip())]
            continue
        flag = "--" + key.replace("_", "-")
        if value is True:
            args.append(flag)
        elif isinstance(value, (list, tuple)):
            args += [flag, *map(str, value)]
        else:
            args += [flag, str(value)]
    return args


def fault_names(value) -> list[str]:
    items = value.split(",") if isinstance(value, str) else list(value)
    return [str(v).strip() for v in items if str(v).strip() and str(v).strip().lower() != "none"]


def sglang_style(head: list[str], flags_for: str, model_path, draft_path=None, spec=None,
                 host: str = DEFAULT_HOST, port: int = 30000, extra_args=()) -> list[str]:
    """`head` + SGLang's launch flags for a spec (`flags_for`: whose flags, SpecConfig.to_flags)."""
    model_path = model_path if model_path is not None else spec_dict(spec).get("model_path")
    if model_path is None:
        raise ServerError("model_path is required (the target model directory or hub id)")
    args = ["--model-path", str(model_path), "--host", host, "--port", str(port)]
    spec_args = spec_to_args(spec, flags_for)
    if draft_path is not None and "--speculative-draft-model-path" not in spec_args:
        args += ["--speculative-draft-model-path", str(draft_path)]
    if ("--speculative-draft-model-path" in args + spec_args
            and "--speculative-algorithm" not in spec_args):
        args += ["--speculative-algorithm", "EAGLE3"]
    return head + args + spec_args + [str(a) for a in extra_args]


def has_gpu() -> bool:
    """An NVIDIA or AMD GPU device node is present (and CUDA_VISIBLE_DEVICES does not hide it)."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return False
    return any(Path(p).exists() for p in ("/dev/nvidiactl", "/dev/nvidia0", "/dev/kfd"))

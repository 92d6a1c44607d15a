"""Which Python runs vLLM: vLLM lives in its own venv (it pins a torch the main venv cannot).

Lookup order (`eagle3lab.engines.vllm.launch.find_vllm_python`): an explicit path > env
`EAGLE3LAB_VLLM_PYTHON` > the repo's `.venv-vllm/bin/python` > this python if it has vLLM.
Code in the main venv talks to vLLM only through subprocesses run with that interpreter
(`vllm_resolver.py`, `vllm_reference.py`), like `sglang_resolver.py` does for SGLang.
"""

from __future__ import annotations

import os
from pathlib import Path

from eagle3lab.spec import VLLM_VERSION  # noqa: F401  (the vLLM release the rules were read in)


REPO_ROOT = Path(__file__).resolve().parents[3]
VLLM_VENV = REPO_ROOT / ".venv-vllm"


def vllm_python(explicit: str | os.PathLike | None = None) -> str:
    """Path of a Python that runs vLLM; one lookup for launching and for these workers
    (`eagle3lab.engines.vllm.launch.find_vllm_python`: explicit > $EAGLE3LAB_VLLM_PYTHON > .venv-vllm > this
    python if it has vLLM)."""
    from eagle3lab.engines.vllm.launch import find_vllm_python

    return find_vllm_python(explicit)


def vllm_env(**extra: str) -> dict:
    """Environment for a vLLM subprocess on a CPU-only machine: offline, quiet, small KV cache."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false", "VLLM_CPU_KVCACHE_SPACE": "1",
           "VLLM_LOGGING_LEVEL": os.environ.get("VLLM_LOGGING_LEVEL", "WARNING"),
           "PYTHONWARNINGS": "ignore"}
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env

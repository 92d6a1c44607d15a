#!/usr/bin/env bash
# Run the whole test suite (what CI runs): the browser test needs Debian's chromium.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v chromium >/dev/null; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
    || echo "warning: could not install chromium; the browser test will fail" >&2
fi
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
# Two workers: tests/conftest.py sends each module, or the modules sharing a costly fixture, to one
# worker, the longest first; EAGLE3LAB_TEST_WORKERS=0 runs in one process. The slowest ten tests
# close every run, so a slow-down shows in every CI log.
workers=${EAGLE3LAB_TEST_WORKERS:-2}
exec .venv/bin/python -m pytest -n "$workers" --durations=10 "$@"

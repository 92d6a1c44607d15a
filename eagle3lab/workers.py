"""Run one of eagle3lab's worker modules in another Python (SGLang's or vLLM's venv) and read
its one JSON answer back.

Why: SGLang's resolver and vLLM (its resolver, its capture, its decoding) need their own
packages and pinned torch; the main venv talks to them through a subprocess that prints one
JSON line (the last line starting with "{" on stdout) and never imports them itself.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from contextlib import contextmanager
from pathlib import Path

from eagle3lab.errors import EagleLabError

SOCKET_PATH_MAX = 107  # sun_path (108 bytes with the NUL); vLLM puts "<TMPDIR>/<uuid4>" sockets there


@contextmanager
def private_tmpdir(env: dict, prefix: str = "eagle3lab-worker-"):
    """`env` with TMPDIR set to a fresh folder inside the caller's temp dir, removed afterwards.

    Why: vLLM leaves files in the temp dir of every process that builds an engine
    (`vllm_dist_<hex>`, its FileStore; ZMQ sockets; docs/vllm.md), and nothing removes them.
    A folder whose path would leave no room for those socket names is not used (env unchanged)."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        if len(str(path)) + 37 > SOCKET_PATH_MAX:
            yield env
        else:
            yield {**env, "TMPDIR": str(path)}
    finally:
        shutil.rmtree(path, ignore_errors=True)


def run_json_worker(python: str, module: str, payload, env: dict, timeout: float, what: str) -> dict:
    """`python -m module` with `payload` as JSON on stdin (in its own temp dir, removed after);
    its last JSON line on stdout, parsed.
    `what` names the worker in errors ("SGLang's resolver"): a time-out, a Python that cannot
    start, or a worker that died without answering each give a clear EagleLabError."""
    try:
        with private_tmpdir(env) as env:
            proc = subprocess.run([python, "-m", module], input=json.dumps(payload), capture_output=True,
                                  text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired as exc:
        raise EagleLabError(f"{what} did not finish within {timeout:.0f} s") from exc
    except OSError as exc:
        raise EagleLabError(f"cannot run {python}: {exc}") from exc
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if not lines:
        tail = (proc.stderr or "").strip().splitlines()[-3:]
        raise EagleLabError(f"{what} failed (exit {proc.returncode}): {' | '.join(tail)}")
    return json.loads(lines[-1])

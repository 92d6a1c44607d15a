"""Run one of eagle3lab's worker modules in another Python (SGLang's or vLLM's venv) and read
its one JSON answer back.

Why: SGLang's resolver and vLLM (its resolver, its capture, its decoding) need their own
packages and pinned torch; the main venv talks to them through a subprocess that prints one
JSON line (the last line starting with "{" on stdout) and never imports them itself.
"""

from __future__ import annotations

import json
import subprocess

from eagle3lab.errors import EagleLabError


def run_json_worker(python: str, module: str, payload, env: dict, timeout: float, what: str) -> dict:
    """`python -m module` with `payload` as JSON on stdin; its last JSON line on stdout, parsed.
    `what` names the worker in errors ("SGLang's resolver"): a time-out, a Python that cannot
    start, or a worker that died without answering each give a clear EagleLabError."""
    try:
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

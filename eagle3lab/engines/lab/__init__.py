"""The lab server (`python -m eagle3lab serve`): eagle3lab's own engine behind SGLang's HTTP API. Not: the decoder it serves (decoder).

May import: spec, errors, boundaries, engines.argv/base, engines.sglang.sglang_capture (its capture rule
is SGLang's).
"""

from __future__ import annotations

import sys

from eagle3lab.engines.argv import sglang_style
from eagle3lab.engines.base import Engine
from eagle3lab.engines.lab.lab_capture import served_by_lab
from eagle3lab.errors import EagleLabError


def launch_argv(model_path, draft_path=None, spec=None, host="127.0.0.1", port=30000, extra_args=(), **_):
    """`python -m eagle3lab serve` with SGLang's speculative flags and `--fault`."""
    return sglang_style([sys.executable, "-m", "eagle3lab", "serve"], "lab", model_path, draft_path,
                        spec, host, port, extra_args)


def check_version(version: str | None) -> str | None:
    if version:
        raise EagleLabError(f"the lab server has no versions (got {version!r}); write 'lab'")
    return None


def _capture(version, arch, ids, n, key, cuda_graph, patched):
    return served_by_lab(ids, n)


ENGINE = Engine(
    name="lab", resolve=None, check_version=check_version, launch_argv=launch_argv, capture=_capture,
    log_grammar="sglang", observes_acceptance_via="step records", api="generate",
    python=lambda explicit=None: explicit or sys.executable, serves_one_request_at_a_time=True,
    takes_faults=True, emulates="sglang", in_process=True, title="the lab", runs_on_cpu=True)

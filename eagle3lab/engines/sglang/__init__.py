"""SGLang: its speculative-argument rules per version, its own resolver, launch argv, capture rule and `meta_info` reader. Not: the embedding-capture patch (wiring.patching) or its log grammar (sources.grammars).

May import: spec, errors, workers, boundaries, sources, engines.argv/base. The SGLang patch is
`eagle3lab.wiring.patching` (its own room); the log grammar is `sources/grammars/sglang.py`.
"""

from __future__ import annotations

import sys

from eagle3lab.engines.argv import fault_names, sglang_style, spec_dict
from eagle3lab.engines.base import Engine
from eagle3lab.engines.sglang import sglang_capture as capture
from eagle3lab.engines.sglang.defect_flags import defect_flags
from eagle3lab.engines.sglang.sglang_rules import resolve_sglang_rules
from eagle3lab.errors import ServerError
from eagle3lab.spec import LATEST_SGLANG, parse_version


def launch_argv(model_path, draft_path=None, spec=None, host="127.0.0.1", port=30000, extra_args=(), **_):
    """`python -m sglang.launch_server` with SGLang's flags; lab faults are an error."""
    given = spec_dict(spec)
    faults = fault_names(given.get("fault") or []) + fault_names(given.get("faults") or [])
    if faults:
        raise ServerError(f"faults ({','.join(faults)}) are switches of the lab engine; SGLang has "
                          "no --fault flag: use backend='lab' for faults")
    return sglang_style([sys.executable, "-m", "sglang.launch_server"], "sglang", model_path,
                        draft_path, spec, host, port, extra_args)


def check_version(version: str | None) -> str:
    version = version or LATEST_SGLANG
    parse_version(version)
    return version


ENGINE = Engine(
    name="sglang", resolve=resolve_sglang_rules, check_version=check_version,
    launch_argv=launch_argv, capture=capture.serve, log_grammar="sglang",
    observes_acceptance_via="meta_info", api="generate", python=lambda explicit=None: explicit or sys.executable,
    latest=LATEST_SGLANG, asks_itself=True, has_known_defects=True, patchable=True,
    lint_codes=frozenset({"topk-reset-page", "auto-params", "page-size-topk"}),
    capture_versions=capture.SGLANG_VERSIONS, model_file=capture.model_path, rules_by_version=True,
    defect_flags=defect_flags, title="SGLang")

"""vLLM: its `vllm serve` rules and own resolver, serve flags, launch, capture rule, `/metrics` reader, and vLLM as the lab engine's reference. Not: server control (serving).

May import: spec, errors, workers, boundaries, sources, engines.argv/base; `reference` and
`experiments` sit higher (they drive the lab engine and the notebooks' runs) and import those.
"""

from __future__ import annotations

from eagle3lab.wiring.boundaries import ConventionError
from eagle3lab.engines.base import Engine
from eagle3lab.engines.vllm import vllm_capture as capture
from eagle3lab.engines.vllm.command import run_config
from eagle3lab.engines.vllm.flags import resolve_vllm
from eagle3lab.engines.vllm.launch import VLLM_CPU_ENV, build_vllm_command, find_vllm_python, server_tempdir
from eagle3lab.spec import VLLM_VERSION


def launch_argv(model_path, draft_path=None, spec=None, host="127.0.0.1", port=8000, extra_args=(),
                python=None, gpu=None, **_):
    """vLLM's OpenAI server argv (`launch.build_vllm_command`)."""
    return build_vllm_command(model_path, draft_path, spec, host, port, extra_args, python=python, gpu=gpu)


def check_version(version: str | None) -> str:
    """vLLM's config rule here is version-free: any version (default "main") is taken as given."""
    return version or "main"


def launch_env(gpu: bool) -> dict:
    """vLLM's CPU build needs a KV cache size (docs/vllm.md); nothing on a GPU."""
    import os

    return {} if gpu else {k: v for k, v in VLLM_CPU_ENV.items() if k not in os.environ}


def _capture(version, arch, ids, n, key, cuda_graph, patched):
    if patched:
        raise ConventionError("the embedding-capture patch is for SGLang, not vLLM")
    return capture.serve(version, arch, ids, n, key)


ENGINE = Engine(
    name="vllm", resolve=resolve_vllm, check_version=check_version, launch_argv=launch_argv,
    capture=_capture, log_grammar="vllm", observes_acceptance_via="/metrics", api="openai",
    python=find_vllm_python, latest=VLLM_VERSION, has_known_defects=True, default_port=8000,
    own_tmpdir=server_tempdir, launch_env=launch_env,
    reads_top_level_ids=True, drafts_chains_only=True, needs_draft_length=True, lint_codes=frozenset({"vllm-chain"}),
    capture_versions=capture.VLLM_VERSIONS, model_file=capture.model_path, title="vLLM",
    pinned=VLLM_VERSION, build="its CPU build, `vllm-cpu`", runs_on_cpu=True, separate_python=True,
    config_command=run_config, servers_at_once=3)

__all__ = ["ENGINE"]

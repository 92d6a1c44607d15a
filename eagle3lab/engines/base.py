"""What an engine is to eagle3lab: the `Engine` record each engine folder fills in.

Every fact eagle3lab uses about a serving engine is one field here, so code outside
`eagle3lab.engines` asks `engines.get(name).<field>` instead of testing the engine's name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable


@dataclass(frozen=True)
class Engine:
    """One serving engine (see docs/library.md "Adding an engine" for what each field must give)."""

    name: str
    # resolve(spec, version, arch) -> ResolvedSpec: what the engine runs for a SpecConfig
    # (None: the engine takes what it is given, e.g. the lab server).
    resolve: Callable | None
    # check_version(version) -> version: a version string this engine's rules understand
    # (`spec.split_engine` hands it the pin of ENGINE==VERSION, or None for the default).
    check_version: Callable
    # launch_argv(model_path, draft_path, spec, host, port, extra_args, **opts) -> argv
    launch_argv: Callable
    # capture(version, arch, ids, num_layers, key, cuda_graph, patched) -> boundaries.Boundaries:
    # which hidden-state boundaries the draft's (validated) layer ids feed on this engine
    # (engines/<name>/capture.py; `conventions.serve_boundaries` is the public door)
    capture: Callable
    log_grammar: str                 # the sources/grammars module its log lines are read with
    observes_acceptance_via: str     # "meta_info" (per request), "/metrics" (counters), "step records"
    api: str                         # "generate" (SGLang's /generate) or "openai"
    python: Callable                 # python(explicit=None) -> the interpreter that runs the engine
    latest: str | None = None        # newest version known (spec.LATEST)
    asks_itself: bool = False        # the installed engine can answer resolve() (use_sglang)
    serves_one_request_at_a_time: bool = False
    takes_faults: bool = False       # the lab's --fault switches
    default_port: int = 30000
    # its known quirks are rows of eagle3lab.known_defects (`known_defects.match(name, ...)`)
    has_known_defects: bool = False
    # own_tmpdir(env) -> a fresh TMPDIR for one launch, or None (vLLM leaves files there)
    own_tmpdir: Callable | None = None
    launch_env: Callable = field(default=lambda gpu: {})  # extra environment for a launch

    # the SGLang embedding-capture patch (eagle3lab.wiring.patching) exists for it: (stock, patched) to try
    patchable: bool = False
    # reads the draft config's top-level `eagle_aux_hidden_state_layer_ids` before `eagle_config`'s
    reads_top_level_ids: bool = False
    # drafts a chain only (topk 1), however the flags read (vLLM's EAGLE proposer)
    drafts_chains_only: bool = False
    # refuses speculation without a draft length (vLLM's num_speculative_tokens has no default)
    needs_draft_length: bool = False
    # the findings of eagle3lab.engines.effective.lint that are about this engine's own rules
    lint_codes: frozenset = frozenset()
    # the engine whose rules and versions it follows (the lab server emulates SGLang)
    emulates: str | None = None
    # eagle3lab's own engine: it also decodes in this process, with the lab's tokenizer (prompts go
    # as token ids; the report's measurement store measures it here)
    in_process: bool = False
    # on a CPU, how many of its servers fit in memory together (vLLM's CPU build: a few GiB each);
    # None: as many as asked (the lab) or one at a time (a GPU engine)
    servers_at_once: int | None = None
    # the versions whose capture rule was read, oldest first (empty: no rule per version, the
    # lab engine follows SGLang's); model_file(arch) -> the engine's source file for `arch`
    capture_versions: tuple = ()
    model_file: Callable | None = None
    # its config rules change with its version, so resolve() needs one (SGLang; vLLM's are version-free)
    rules_by_version: bool = False
    # defect_flags(flags: {flag: value}, version) -> {setting: value}: what this engine's own flags and
    # per-version defaults mean for the known-defect registry's settings (engines/<name>/defect_flags.py)
    defect_flags: Callable | None = None
    title: str = ""                  # how prose names it: "SGLang", "vLLM", "the lab"
    # the release eagle3lab installs and launches itself, and which build (vLLM's CPU wheel);
    # None: the user brings the engine
    pinned: str | None = None
    build: str = ""
    runs_on_cpu: bool = False        # runs on this machine's CPU, so the lab's checkpoints are its default
    separate_python: bool = False    # runs in its own interpreter (`--vllm-python`, `python(explicit)`)
    # `eagle3lab config` on its own launch flags: config_command(args, flags) -> exit code
    # (None: the flags are SGLang's, read into a SpecConfig and resolved)
    config_command: Callable | None = None

    @property
    def patch_options(self) -> tuple:
        """The capture variants to try: stock, and patched where the patch exists."""
        return (False, True) if self.patchable else (False,)

    @property
    def resolves_configs(self) -> bool:
        return self.resolve is not None

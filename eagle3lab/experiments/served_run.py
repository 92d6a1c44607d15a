"""One configuration served and read back (notebook 04): the server log, the acceptance
observation behind it, the draft's standalone accuracy, and the tokens as they were produced."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from eagle3lab.acceptance import stats
from eagle3lab.experiments.shared import LAB_SERVER_ARGS, bench_prompts
from eagle3lab.spec import SpecConfig

if TYPE_CHECKING:
    from eagle3lab.sources.observation import Observation


def cost_ratio(run=None, default: float = 0.1) -> float:
    """Draft-step cost relative to a target step, measured by a run when it has one. When the run
    measured none, `default` is an assumption, and a warning says so (a speed-up curve drawn from
    it is a what-if, not a measurement)."""
    import warnings

    value = getattr(run, "cost_ratio", None) if run is not None else None
    if value:
        return float(value)
    warnings.warn(f"no draft/target step cost was measured{' by this run' if run is not None else ''}: "
                  f"assuming a draft step costs {default:g} of a target step", stacklevel=2)
    return default


@dataclass
class ServedRun:
    """A served configuration read back: its `Observation` (on the lab, the engine's step
    records for the same prompts; from a running server, each request's acceptance histogram;
    else the server log), the log itself, and what the notebook shows."""

    observation: Observation
    log: Any                     # the server log, read_log's frame
    tokens: Any = None           # one row per generated token (lab engine)
    prompt_text: str | None = None
    prompt_texts: list | None = None
    standalone_acc: list | None = None
    server_info: dict = field(default_factory=dict)

    @property
    def num_steps(self) -> int:
        obs = self.observation
        return int(obs.effective.get("num_steps") or obs.requested.get("num_steps") or 0)

    @property
    def effective_draft_tokens(self) -> int | None:
        return self.observation.effective.get("num_draft_tokens")

    @property
    def accept_length(self) -> float:
        value = self.observation.accept_length
        return float("nan") if value is None else value

    @property
    def per_position(self):
        """Conditional per-position acceptance with 95 % intervals (None when unknown). A source
        that counts unconditionally (vLLM's /metrics) is converted: from its per-request
        histograms where the server returned them (intervals kept), else from the counters."""
        obs = self.observation
        if obs.per_position is None or obs.conditional is not False:
            return obs.per_position
        if obs.frame is not None and len(obs.frame):
            return stats.per_position(obs.frame, k=len(obs.per_position), conditional=True)
        from eagle3lab.engines.vllm.metrics import conditional

        return conditional(obs)

    @property
    def per_position_unconditional(self):
        """P(at least i drafts accepted) per position, as vLLM counts (None when not counted so)."""
        obs = self.observation
        return obs.per_position if obs.conditional is False else None

    @property
    def steps(self):
        return self.observation.step_records

    @property
    def cost_ratio(self) -> float | None:
        return self.observation.costs.get("draft_over_target")

    @property
    def observed(self):
        """DataFrame(depth, accept_length[, speedup]) of this run, for depth plots."""
        import pandas as pd

        return pd.DataFrame({"depth": [self.num_steps], "accept_length": [self.accept_length]})

    @property
    def token_view(self):
        """The first request's generation, token by token (plots.token_view)."""
        return self.token_view_of()

    def token_view_of(self, sources=None, avoid=("encodings/",)):
        """One request's generation, token by token: the first whose prompt does not come from a
        held-out file under `avoid` (the lab's stdlib text starts with codec tables, which read as
        noise), with the file named in the title."""
        import pandas as pd

        from eagle3lab.viz import plots

        if self.tokens is None or not len(self.tokens):
            return None
        requests = sorted(self.tokens["request"].unique())
        pick = requests[0]
        if sources:
            pick = next((r for r in requests if r < len(sources)
                         and not any(str(sources[r]).startswith(a) for a in avoid)), pick)
        first = self.tokens[self.tokens["request"] == pick]
        prompt_text = self.prompt_texts[pick] if self.prompt_texts and pick < len(self.prompt_texts) \
            else self.prompt_text
        where = "" if not sources or pick >= len(sources) else \
            f" (prompt: {sources[pick]})" if " " in str(sources[pick]) else \
            f" (prompt: a passage of `{sources[pick]}` from Python's standard library)"
        kinds = {"prefill": "prompt", "draft": "accepted", "accepted": "accepted", "bonus": "bonus",
                 "replacement": "replaced", "target": "replaced"}
        rows = [] if prompt_text is None else [{"text": prompt_text, "kind": "prompt", "position": None}]
        rows += [{"text": r.text, "kind": kinds.get(r.kind, "replaced"),
                  "position": r.depth if r.depth else None} for r in first.itertuples()]
        return plots.token_view(pd.DataFrame(rows), title=f"Request {pick + 1}{where}: how each token "
                                                          "was produced")


def _no_log():
    """An empty log frame (a server measured through its per-request data, no log file read)."""
    import pandas as pd

    return pd.DataFrame(columns=["line", "engine", "kind", "time", "accept_len", "accept_rate_raw",
                                 "gen_throughput"])


def serve_and_log(log_file=None, server_url=None, lab: str = "default", draft: str = "seed",
                  faults=(), spec: SpecConfig | None = None, num_prompts: int = 4,
                  max_new_tokens: int = 64, eval_texts: int = 8, backend: str = "lab", **_) -> ServedRun:
    """Read a given log; or benchmark a running server and read `log_file`; or, on the lab,
    serve `spec` + `faults`, benchmark it, read its log back, and run the same prompts through
    the lab engine at the config the server reports it runs, for per-step statistics and the
    draft's standalone accuracy. `spec`: the SpecConfig asked for (what the log's effective
    config is compared with). backend="vllm": serve it on vLLM and read its /metrics
    (`experiments_vllm.serve_and_observe`)."""
    from eagle3lab import engines
    from eagle3lab.serving import loadtest
    from eagle3lab.serving import server
    from eagle3lab.errors import EagleLabError
    from eagle3lab.sources.lab_steps import observe_lab
    from eagle3lab.sources.logfile import observe_log

    spec = spec or SpecConfig()
    if server_url or log_file:
        observed = None
        if server_url:  # each request's acceptance histogram (SGLang >= 0.5.9, vLLM's /metrics): no log needed
            prompts = bench_prompts(lab, num_prompts, backend="sglang")
            _, observed = loadtest.measure(server.connect(server_url), prompts, max_new_tokens=max_new_tokens,
                                           progress=False)
        logged = observe_log(log_file, requested=spec) if log_file else None
        if observed is None and logged is None:
            raise EagleLabError("the server at SERVER_URL returned no acceptance (no speculation, or an SGLang "
                                "before 0.5.9 without per-request histograms): set LOG_FILE to its log")
        return ServedRun(observed or logged, logged.frame if logged is not None else _no_log())

    from eagle3lab.serving import measurements
    from eagle3lab.lab import evaluate_draft, load_lab

    engine = engines.get(backend)
    lab_obj = load_lab(lab)
    if engine.observes_acceptance_via == "/metrics":
        from eagle3lab.engines.vllm import experiments as experiments_vllm

        return ServedRun(**experiments_vllm.serve_and_observe(
            lab_obj, bench_prompts(lab_obj, num_prompts), draft=draft, faults=faults, spec=spec,
            max_new_tokens=max_new_tokens, eval_texts=eval_texts))
    if not engine.in_process:
        raise EagleLabError(f"backend {backend!r}: serve_and_log launches 'lab' or 'vllm'; for SGLang "
                            "give SERVER_URL and LOG_FILE of your running server")
    prompts = bench_prompts(lab_obj, num_prompts)
    fault_flags = [a for f in faults for a in ("--fault", f)]
    with server.launch("lab", lab_obj.target_dir, lab_obj.draft_dir(draft), spec=spec,
                       extra_args=(*LAB_SERVER_ARGS, "--decode-log-interval", "8", *fault_flags)) as srv:
        info = srv.server_info()
        loadtest.run(srv.url, prompts, max_new_tokens=max_new_tokens, progress=False)
        logged = srv.observation(requested=spec)
    running = SpecConfig.from_server_info(info)  # resolved once, by the server; parsed back once
    result = measurements.lab_bench(lab_obj, running, list(faults), prompts=prompts,
                                    max_new_tokens=max_new_tokens)
    served_draft = lab_obj.load_draft(result.plan.draft_name)
    acc = evaluate_draft(lab_obj, served_draft, lab_obj.eval_sequences(eval_texts),  # notebook 02's sample
                         wiring=served_draft.train_boundaries, depth=running.num_steps)
    return ServedRun(observe_lab(result, requested=spec, warnings=logged.warnings), logged.frame,
                     tokens=result.tokens, prompt_text=lab_obj.tokenizer.decode(prompts[0]),
                     prompt_texts=[lab_obj.tokenizer.decode(p) for p in prompts],
                     standalone_acc=acc["accuracy"].tolist(), server_info=info)


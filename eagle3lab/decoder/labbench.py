"""Benchmark speculative decoding against plain decoding of the same target, interleaved.

`run_bench(lab, spec=(3, 1, 4), faults=["wiring-seed"])` decodes held-out prompts with and
without speculation in the same process, alternating which goes first, and returns a
`LabBenchResult` with per-step and per-token DataFrames, accept length, per-position acceptance,
tokens/s of both, measured draft-step and verify costs, and whether greedy outputs matched.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import pandas as pd

from eagle3lab.decoder.faults import FaultPlan, build_engine, domain_shift_texts, plan_faults
from eagle3lab.decoder.speculate import Generation, SamplingParams, SpecEngine
from eagle3lab.spec import SpecParams


@dataclass
class LabBenchResult:
    spec: SpecParams
    plan: FaultPlan
    boundaries: list[int]
    temperature: float
    steps: pd.DataFrame  # one row per verify step
    tokens: pd.DataFrame  # one row per generated token (provenance)
    requests: pd.DataFrame  # one row per request: tokens/s of both runs, accept length, match
    lossless: bool | None
    preset: str | None = None
    extra: dict = field(default_factory=dict)

    # -- headline figures -------------------------------------------------------------------
    @property
    def accept_length(self) -> float:
        """Mean tokens per verify step, bonus included (SGLang's `accept len`)."""
        from eagle3lab.acceptance.stats import accept_length

        return accept_length(self.steps) if len(self.steps) else float("nan")

    def accept_length_ci(self, level: float = 0.95):
        """Interval (95% by default) of the accept length over prompts (stats.accept_length_ci); None with < 2."""
        from eagle3lab.acceptance.stats import accept_length_ci

        return accept_length_ci(self.steps, ci=level) if len(self.steps) else None

    @property
    def accept_rate(self) -> float:
        """SGLang 0.5.23's `accept rate`: accepted drafts / (verify steps x (draft tokens - 1))."""
        from eagle3lab.acceptance.stats import draft_acceptance_rate

        return draft_acceptance_rate(self.steps["accepted"].sum(), len(self.steps),
                                     self.spec.num_draft_tokens - 1)

    @property
    def per_position_unconditional(self) -> list[float]:
        """Unconditional acceptance at draft position i: share of steps with >= i accepted
        (vLLM's convention; `observation().per_position` is the conditional one)."""
        from eagle3lab.acceptance.stats import position_rates

        depth = min(int(self.steps["drafted"].max()) if len(self.steps) else 0, self.spec.num_steps)
        if not depth:
            return []
        return [float(r) for r in position_rates(self.steps, depth, conditional=False)]

    def observation(self):
        """This run as an `Observation` (eagle3lab.sources.lab_steps)."""
        from eagle3lab.sources.lab_steps import observe_lab

        return observe_lab(self)

    @property
    def tokens_per_s(self) -> float:
        r = self.requests
        return float(r["spec_tokens"].sum() / r["spec_s"].sum())

    @property
    def baseline_tokens_per_s(self) -> float:
        r = self.requests
        return float(r["base_tokens"].sum() / r["base_s"].sum())

    @property
    def speedup(self) -> float:
        return self.tokens_per_s / self.baseline_tokens_per_s

    @property
    def costs(self) -> dict:
        """Measured costs (seconds): one draft forward, one verify pass, one plain step."""
        s, r = self.steps, self.requests
        c_draft = float(s["draft_s"].sum() / (len(s) * self.spec.num_steps)) if len(s) else float("nan")
        c_verify = float(s["verify_s"].mean()) if len(s) else float("nan")
        c_plain = float(r["base_decode_s"].sum() / max(1, (r["base_tokens"] - 1).sum()))
        k = self.spec.num_steps
        L = self.accept_length
        return {
            "c_draft_ms": 1e3 * c_draft, "c_verify_ms": 1e3 * c_verify, "c_plain_step_ms": 1e3 * c_plain,
            "draft_over_target": c_draft / c_plain,
            "verify_over_plain": c_verify / c_plain,
            # the step's measured parts: k draft forwards and one verify pass, against one plain step
            # (no per-step overhead or prefill: eagle3lab.cost.costfit calibrates those across configurations)
            "predicted_speedup": L * c_plain / (k * c_draft + c_verify),
        }

    def summary(self) -> dict:
        out = {
            "preset": self.preset,
            "draft": self.plan.draft_name,
            "faults": list(self.plan.faults),
            "serve": self.plan.serve,
            "boundaries": list(self.boundaries),
            "num_steps": self.spec.num_steps,
            "topk": self.spec.topk,
            "num_draft_tokens": self.spec.num_draft_tokens,
            "temperature": self.temperature,
            "prompts": int(len(self.requests)),
            "new_tokens": int(self.requests["spec_tokens"].sum()),
            "verify_steps": int(len(self.steps)),
            "accept_length": self.accept_length,
            "accept_length_ci95": _rounded(self.accept_length_ci()),
            "accept_rate": self.accept_rate,
            "per_position_unconditional": self.per_position_unconditional,
            "tokens_per_s": self.tokens_per_s,
            "baseline_tokens_per_s": self.baseline_tokens_per_s,
            "speedup": self.speedup,
            "lossless": self.lossless,
            # greedy: every request's output equals plain decoding; sampled: a greedy side check
            # (the distribution itself is tested statistically in tests/test_engine.py)
            "lossless_check": "greedy outputs identical" if self.temperature <= 0
            else "greedy side check on 2 prompts",
            **self.costs,
            **self.extra,
        }
        return {k: (round(v, 4) if isinstance(v, float) and math.isfinite(v) else v) for k, v in out.items()}


def _rounded(pair):
    return None if pair is None else [round(x, 4) for x in pair]


# --------------------------------------------------------------------------------------
def bench_prompts(lab, n: int, prompt_tokens: int, kinds=(), *, long_tokens: int | None = None,
                  max_len: int | None = None) -> list[list[int]]:
    """Held-out prompts, or domain-shifted / long ones when those faults are on."""
    tok = lab.tokenizer
    if "domain-shift" in kinds:
        texts = domain_shift_texts(n + 4)
    elif "long-context" in kinds:
        texts = list(lab.heldout_texts(max(4 * n, 16)))
    else:
        return [list(p) for p in lab.heldout_prompts(n, prompt_tokens)]
    want = long_tokens if "long-context" in kinds else prompt_tokens
    if max_len is not None:
        want = min(want, max_len)
    if "long-context" not in kinds:
        return [tok.encode(t)[:want] for t in texts[:n]]
    stream: list[int] = []
    for t in texts:
        stream += tok.encode(t)
    if len(stream) < want:
        stream = (stream * (want // max(1, len(stream)) + 1))
    stride = max(1, (len(stream) - want) // max(1, n))
    return [stream[i * stride: i * stride + want] for i in range(n)]


def lab_train_seq_len(lab) -> int:
    """Longest sequence the lab's drafts were trained on (from the manifest), else 256."""
    m = getattr(lab, "manifest", {}) or {}
    for path in (("config", "draft", "seq_len"), ("config", "draft_seq_len"), ("config", "seq_len"),
                 ("draft", "seq_len"), ("seq_len",)):
        node = m
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, int):
            return node
    return 256


def make_lab_engine(lab, faults=(), *, max_seq_len: int | None = None, serve: str | None = None,
                    draft=None) -> tuple[SpecEngine, FaultPlan]:
    """The engine the lab serves under `faults` (draft chosen by the plan unless given), feeding
    the draft the boundaries `serve` (ENGINE==VERSION, default SGLang 0.5.23) would feed."""
    plan = plan_faults(faults, lab.num_layers, serve=serve)
    max_pos = int(getattr(lab.target.config, "max_position_embeddings", 2048))
    draft = draft if draft is not None else lab.load_draft(plan.draft_name)
    engine = build_engine(lab.target, draft, plan, max_seq_len=min(max_seq_len or max_pos, max_pos),
                          tokenizer=lab.tokenizer)
    return engine, plan


def plan_prompts(lab, engine: SpecEngine, plan: FaultPlan, spec, n_prompts: int, prompt_tokens: int,
                 max_new_tokens: int) -> list[list[int]]:
    """The prompts `run_bench` decodes when none are given: held-out ones, or those the plan's
    prompt faults (domain-shift, long-context) ask for, cut to fit the engine's room."""
    spec = SpecParams.of(spec)
    room = (engine.max_seq_len - max_new_tokens - spec.num_steps * spec.topk - 8
            - len(engine.served_prompt([])))  # a served chat template's ids come on top
    long_tokens = min(4 * lab_train_seq_len(lab), room)
    return bench_prompts(lab, n_prompts, prompt_tokens, plan.prompt_kinds, long_tokens=long_tokens,
                         max_len=room)


def run_bench(lab, spec=(3, 1, 4), faults=(), *, prompts: list[list[int]] | None = None,
              n_prompts: int = 8, prompt_tokens: int = 64, max_new_tokens: int = 128,
              temperature: float = 0.0, seed: int = 0, engine: SpecEngine | None = None,
              progress: bool = True, serve: str | None = None) -> LabBenchResult:
    """Decode prompts plainly and speculatively (interleaved) and measure both.

    `serve`: ENGINE==VERSION whose capture rule feeds the draft (default sglang==0.5.23)."""
    spec = SpecParams.of(spec)
    if engine is None:
        engine, plan = make_lab_engine(lab, faults, serve=serve)
    else:
        plan = plan_faults(faults, engine.target.num_layers, serve=serve)
    if prompts is None:
        prompts = plan_prompts(lab, engine, plan, spec, n_prompts, prompt_tokens, max_new_tokens)
    sampling = SamplingParams(temperature=temperature)
    _warm_up(engine, prompts[0], spec, sampling)
    step_rows, token_rows, req_rows = [], [], []
    iterator = range(len(prompts))
    if progress:
        from tqdm.auto import tqdm

        iterator = tqdm(iterator, desc=f"bench {spec.num_steps}/{spec.topk}/{spec.num_draft_tokens}",
                        leave=False)
    matched = []
    for r in iterator:
        prompt = prompts[r]
        sp = SamplingParams(temperature=temperature, seed=seed + r)
        runs = {}
        order = ("base", "spec") if r % 2 == 0 else ("spec", "base")
        for which in order:
            t0 = time.perf_counter()
            if which == "base":
                g = engine.generate_plain(prompt, max_new_tokens, sp)
            else:
                g = engine.generate(prompt, max_new_tokens, spec, sp)
            runs[which] = (g, time.perf_counter() - t0)
        (base, base_s), (sg, spec_s) = runs["base"], runs["spec"]
        if sampling.greedy:
            matched.append(base.output_ids == sg.output_ids)
        req_rows.append({"request": r, "prompt_tokens": len(prompt),
                         "base_tokens": len(base.output_ids), "base_s": base_s,
                         "base_decode_s": base.decode_s,
                         "spec_tokens": len(sg.output_ids), "spec_s": spec_s,
                         "verify_steps": sg.num_verify, "accept_length": sg.accept_length,
                         "match": base.output_ids == sg.output_ids})
        step_rows += steps_frame_rows(sg, r)
        token_rows += token_frame_rows(sg, r, lab.tokenizer if lab is not None else None)
    lossless = all(matched) if sampling.greedy else _greedy_check(engine, prompts[:2], spec)
    return LabBenchResult(spec=spec, plan=plan, boundaries=list(engine.boundaries),
                       temperature=temperature, steps=pd.DataFrame(step_rows),
                       tokens=pd.DataFrame(token_rows), requests=pd.DataFrame(req_rows),
                       lossless=lossless, preset=getattr(lab, "preset", None))


def steps_frame_rows(g: Generation, request: int = 0) -> list[dict]:
    """One row per verify step of a generation."""
    return [{"request": request, "step": s.step, "drafted": s.drafted, "accepted": s.accepted,
             "accept_len": s.accept_len, "accepted_depths": s.accepted_depths,
             "draft_s": s.draft_s, "verify_s": s.verify_s} for s in g.steps]


def token_frame_rows(g: Generation, request: int = 0, tokenizer=None) -> list[dict]:
    """Provenance of each generated token: prefill / accepted draft at depth i / bonus / replacement."""
    rows = []
    for i, (t, kind, depth) in enumerate(zip(g.output_ids, g.kinds, g.depths)):
        rows.append({"request": request, "index": i, "token": t,
                     "text": tokenizer.decode([t]) if tokenizer is not None else None,
                     "kind": kind, "depth": depth})
    # verify step of each token: a step ends at each bonus/replacement
    step = 0
    for row in rows:
        row["step"] = step if row["kind"] != "prefill" else -1
        if row["kind"] in ("bonus", "replacement"):
            step += 1
    return rows


def steps_frame(g: Generation, request: int = 0) -> pd.DataFrame:
    return pd.DataFrame(steps_frame_rows(g, request))


def tokens_frame(g: Generation, request: int = 0, tokenizer=None) -> pd.DataFrame:
    return pd.DataFrame(token_frame_rows(g, request, tokenizer))


def _warm_up(engine: SpecEngine, prompt, spec, sampling) -> None:
    engine.generate_plain(prompt[:16], 8, sampling)
    engine.generate(prompt[:16], 8, spec, sampling)


def _greedy_check(engine: SpecEngine, prompts, spec, n_tokens: int = 32) -> bool:
    greedy = SamplingParams()
    return all(engine.generate_plain(p, n_tokens, greedy).output_ids
               == engine.generate(p, n_tokens, spec, greedy).output_ids for p in prompts)

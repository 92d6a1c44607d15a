"""The cost model calibrated on a measurement store, and its prediction error (issue 31 item 3).

Synthetic stores built from known costs pin what the code determines (the calibration recovers
them exactly, a prediction never uses the predicted configuration's own timings); the shipped ci
lab's rendered report (conftest.ci_report) checks the same code on a real store."""

import math

import numpy as np
import pytest

from eagle3lab.cost import costfit
from eagle3lab.cost.costfit import CostCurve, LabCosts
from eagle3lab.acceptance.stats import StatsError

TRUE = LabCosts(d0=0.2, d1=0.05, d_tree=0.04, v0=1.0, v_log=0.25, v_tree=0.1, other=0.03, first_extra=0.15,
                prefill_spec=2.2, prefill_base=1.9, tokens=121)
# (steps, topk, draft tokens, accepted drafts per step): 120 decoded tokens split evenly into steps
GRID = [(1, 1, 2, 1), (2, 1, 3, 2), (3, 1, 4, 3), (5, 1, 6, 1), (5, 1, 6, 3), (7, 1, 8, 4), (15, 1, 16, 1),
        (3, 2, 6, 2), (5, 2, 8, 3), (5, 4, 12, 4)]
MEDIAN_ERROR = 0.15  # the ci report's leave-one-out predictions: median |predicted / measured - 1|


def _store(costs=TRUE, grid=GRID, prompts=3, unit_s=(0.006, 0.011), verify_scale=None):
    """Records as `measurements` writes them, timed exactly by `costs`; each configuration's plain
    step u differs (the machine's load), which the calibration must cancel."""
    records = []
    for j, (k, topk, n, acc) in enumerate(grid):
        u = unit_s[j % len(unit_s)]
        t = costs.tokens
        steps_per_prompt = (t - 1) // (acc + 1)
        d = float(costs.draft_cost(k, topk)) * u
        v = float(costs.verify_cost(n, topk)) * u * (verify_scale.get(j, 1.0) if verify_scale else 1.0)
        sid = f"spec{j}"
        base_rows, spec_rows, steps = [], [], []
        for p in range(prompts):
            base_decode = (t - 1) * u
            base_rows.append({"prompt": p, "prompt_tokens": 48, "tokens": t, "output": "x",
                              "prefill_s": costs.prefill_base * u, "decode_s": base_decode,
                              "seconds": base_decode + costs.prefill_base * u})
            for s in range(steps_per_prompt):
                steps.append({"request": p, "step": s, "drafted": k, "accepted": acc, "accept_len": acc + 1,
                              "accepted_depths": list(range(1, acc + 1)),
                              "draft_s": d + (costs.first_extra * u if s == 0 else 0.0), "verify_s": v})
            decode = steps_per_prompt * (d + v + costs.other * u) + costs.first_extra * u
            spec_rows.append({"prompt": p, "prompt_tokens": 48, "tokens": t, "output": "x",
                              "prefill_s": costs.prefill_spec * u, "decode_s": decode,
                              "seconds": decode + costs.prefill_spec * u, "verify_steps": steps_per_prompt,
                              "accept_length": acc + 1.0})
        key = {"kind": "spec", "draft": "healthy", "spec": [k, topk, n], "boundaries": [2, 4, 5], "prompts": "p",
               "use_d2t": True}
        records.append({"id": sid, "key": key, "prompts": spec_rows, "steps": steps, "tokens": []})
        records.append({"id": f"base{j}", "key": {"kind": "baseline", "prompts": "p", "paired_with": sid},
                        "prompts": base_rows})
    return records


def test_calibration_recovers_the_costs_whatever_each_configurations_load():
    fitted = costfit.lab_costs(_store())
    for name in ("d0", "d1", "d_tree", "v0", "v_log", "v_tree", "other", "first_extra", "prefill_spec",
                 "prefill_base"):
        assert getattr(fitted, name) == pytest.approx(getattr(TRUE, name), abs=1e-9), name
    assert fitted.tokens == 121 and fitted.calibrated_on == len(GRID)


def test_a_model_that_holds_predicts_every_configuration_exactly():
    table = costfit.prediction_table(_store())
    assert np.allclose(table["predicted"], table["measured"], atol=1e-3)  # both rounded to 3 digits
    assert table["inside"].all() and costfit.share_inside(table) == (len(GRID), len(GRID), 1.0)
    # the measured speed-up is (tokens / wall time) over (tokens / wall time), as the report quotes it
    k, topk, n, acc = GRID[0]
    steps = (TRUE.tokens - 1) // (acc + 1)
    spec = TRUE.prefill_spec + TRUE.first_extra + steps * float(TRUE.step_cost(k, n, topk))
    assert table.loc[0, "measured"] == round((TRUE.prefill_base + TRUE.tokens - 1) / spec, 3)
    assert list(table.columns[:6]) == ["configuration", "draft", "switches", "num_steps", "topk", "num_draft_tokens"]


def test_leave_one_out_never_uses_the_predicted_configurations_own_timings():
    """One configuration's verify pass timed 1.5x (load during its run only): its leave-one-out
    prediction is the true model's, its pooled one is not; the others barely move."""
    odd = 4
    honest = costfit.prediction_table(_store())
    skewed = costfit.prediction_table(_store(verify_scale={odd: 1.5}))
    pooled = costfit.prediction_table(_store(verify_scale={odd: 1.5}), calibration="pooled")
    assert skewed.loc[odd, "predicted"] == pytest.approx(honest.loc[odd, "predicted"], abs=1e-3)
    assert skewed.loc[odd, "measured"] < honest.loc[odd, "measured"] - 0.1  # it did run slower
    assert pooled.loc[odd, "predicted"] < honest.loc[odd, "predicted"] - 0.01  # pooled sees its own timing
    with pytest.raises(StatsError, match="calibration must be one of"):
        costfit.prediction_table(_store(), calibration="own")


def test_too_few_configurations_and_unpaired_records():
    two = _store(grid=GRID[:2])
    with pytest.raises(StatsError, match="2 measured configuration"):
        costfit.prediction_table(two)
    assert len(costfit.prediction_table(two, calibration="pooled")) == 2
    alone = [r for r in _store(grid=GRID[:3]) if r["id"] != "base0"]  # a spec record without its baseline
    assert len(costfit.timings(alone)) == 2
    with pytest.raises(StatsError, match="no measured configuration"):
        costfit.calibrate([])


def test_a_term_the_configurations_cannot_separate_is_zero():
    chains = costfit.lab_costs(_store(grid=[g for g in GRID if g[1] == 1]))
    assert chains.d_tree == 0.0 and chains.v_tree == 0.0  # no tree among them
    assert chains.v_log == pytest.approx(TRUE.v_log)
    one_depth = costfit.lab_costs(_store(grid=[(5, 1, 6, 1), (5, 1, 6, 3)]))
    assert one_depth.d1 == 0.0 and one_depth.v_log == 0.0
    assert one_depth.d0 == pytest.approx(float(TRUE.draft_cost(5)))  # the one depth's draft cost, whole


def test_the_explorers_curve_is_the_calibrated_step_cost():
    curve = TRUE.curve()
    k = np.arange(1, 11)
    assert np.allclose(curve.step_cost(k), TRUE.step_cost(k))
    assert np.allclose(curve.speedup(2.0, k), TRUE.speedup(2.0, k))
    assert curve.kind == "total" and CostCurve(draft=0.1).kind == "decode"
    old = CostCurve.assumed(0.05)  # the old explorer: L / (1 + k r)
    assert old.speedup(1.9, 5) == pytest.approx(1.9 / 1.25)


def test_the_measured_point_of_a_configuration():
    records = _store()
    point = costfit.point_for(records, "healthy", (5, 1, 6), accept_length=4.0)
    assert point["depth"] == 5 and point["accept_length"] == 4.0 and len(point["interval"]) == 2
    assert costfit.point_for(records, "healthy", (5, 1, 6), accept_length=2.0)["accept_length"] == 2.0
    assert costfit.point_for(records, "seed", (5, 1, 6)) is None


def test_error_summary_says_the_share_against_the_target():
    table = costfit.prediction_table(_store())
    line = costfit.error_summary(table)
    assert line.startswith(f"{len(GRID)} of {len(GRID)} configurations (100%)") and "meets the 90% target" in line


def test_the_ci_reports_store(ci_report):
    """The rendered ci report's own store: every configuration the notebooks measured pairs with
    its baseline, gets a finite prediction, and the leave-one-out predictions land near the measured
    speed-ups. The 90 % target (prediction inside each configuration's 95 % interval) is a timing
    figure measured with 6 prompts by benchmarks/cost_model_error.py: the report's 2-prompt intervals
    are t intervals with one degree of freedom, wide where the two prompts differ and a few % wide
    where they agree, so their share inside is a coin toss on a busy machine (CI at 655884c: 15 of 17,
    the 15/1/16 row 0.340 predicted against [0.186, 0.332] and the no-d2t row 0.439 against
    [0.497, 0.531])."""
    from eagle3lab.serving import measurements

    records = measurements.Store(ci_report.out_dir / "measurements.jsonl").records()
    specs = [r for r in records if r["key"]["kind"] == "spec"]
    table = costfit.prediction_table(records)
    assert len(table) == len(specs) >= 15  # 01's flag sets, 03's wirings and fix, 05's hypotheses and grid
    assert all(math.isfinite(v) and v > 0 for v in table["predicted"])
    costs = costfit.lab_costs(records)
    assert 0.5 < costs.v0 < 2.0, f"a verify pass of one token should cost about one plain step: {costs.v0:.2f}"
    # The cost model has no prompt-length term: a row decoding other prompts (long-context,
    # domain-shift) is left out (measured on a fresh clone: the long-context row predicted 0.64x,
    # measured 1.20x). The claim on the rest: the typical prediction is within 15 % of the measured
    # speed-up (CI at 655884c: median 5.7 %; a model pricing a verify pass at one plain step, the
    # old explorer's, was 27 % off at 5/1/6: docs/cost-model.md).
    shared = table[~table["switches"].str.contains("other prompts")]
    error = ((shared["predicted"] - shared["measured"]) / shared["measured"]).abs()
    assert len(shared) >= 13 and error.median() <= MEDIAN_ERROR, (
        f"median relative error {error.median():.1%} (bound {MEDIAN_ERROR:.0%}): {shared.to_string()}")


def test_a_store_written_before_spec_rows_carried_their_decode_time():
    """Older stores: the speculative rows had no prefill_s/decode_s. Their prefill is taken as the
    baseline's, and the difference lands in the per-step rest O (so the totals still add up)."""
    records = _store()
    for r in records:
        if r["key"]["kind"] == "spec":
            for row in r["prompts"]:
                row.pop("decode_s"), row.pop("prefill_s")
    fitted = costfit.lab_costs(records)
    assert fitted.prefill_spec == pytest.approx(TRUE.prefill_base)
    assert fitted.other > TRUE.other
    table = costfit.prediction_table(records, calibration="pooled")
    assert np.allclose(table["predicted"], table["measured"], atol=0.02)


def test_the_benchmark_measures_what_each_notebook_measures(monkeypatch):
    """benchmarks/cost_model_error.py reads each notebook's parameters cell and measures the same
    configurations: a parameter left None there (05's FAULTS: the lab's own faults) is resolved as the
    notebook resolves it (the benchmark crashed on it at 655884c). The measuring calls are recorded,
    not run: this checks the wiring, the benchmark itself measures."""
    import importlib.util
    from pathlib import Path
    from types import SimpleNamespace

    from eagle3lab import experiments, lab
    from eagle3lab.serving import measurements

    calls = {}
    record = lambda name: lambda *a, **k: calls.setdefault(name, []).append((a, k))  # noqa: E731
    for name in ("measure_flag_sets", "measure_wirings", "measure_variants", "fault_sweep", "config_sweep"):
        monkeypatch.setattr(experiments, name, record(name))
    monkeypatch.setattr(experiments, "bench_prompts", lambda lab_obj, n: [f"prompt {i}" for i in range(n)])
    monkeypatch.setattr(measurements, "lab_bench", record("lab_bench"))
    monkeypatch.setattr(lab, "load_lab", lambda name, progress=False: SimpleNamespace(
        load_draft=lambda draft: SimpleNamespace(train_boundaries=(0, 2, 4))))
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "cost_model_error.py"
    spec = importlib.util.spec_from_file_location("cost_model_error", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    bench.measure_report_configurations("ci", 6, 8, log=lambda message: None)
    assert sorted(calls) == ["config_sweep", "fault_sweep", "lab_bench", "measure_flag_sets", "measure_variants",
                             "measure_wirings"], calls
    (faults,), kwargs = calls["fault_sweep"][0]
    assert list(faults) == list(experiments.lab_faults("ci")) and faults, faults
    assert kwargs["spec"] == (5, 1, 6) and (kwargs["num_prompts"], kwargs["max_new_tokens"]) == (6, 8)
    assert calls["measure_flag_sets"][0][1]["faults"] == ["wiring-seed"]

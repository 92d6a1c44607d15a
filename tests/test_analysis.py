"""Acceptance statistics (stats), models (predict) and the diagnosis on synthetic chains with known rates."""

import numpy as np
import pandas as pd
import pytest

from eagle3lab.acceptance import diagnosis as D
from eagle3lab.acceptance.diagnosis import findings as F
from eagle3lab.acceptance import predict as P
from eagle3lab.acceptance import stats as S
from eagle3lab.errors import EagleLabError


def simulate(rates, n=4000, seed=0, requests=None, context=None):
    """Per-step accepted counts for a chain with conditional acceptance `rates`."""
    rng = np.random.default_rng(seed)
    accepted = np.zeros(n, int)
    alive = np.ones(n, bool)
    for c in rates:
        alive &= rng.random(n) < c
        accepted += alive
    df = pd.DataFrame({"accepted": accepted, "k": len(rates)})
    if requests:
        df["request"] = np.arange(n) % requests
    return df


def test_accept_length_includes_bonus():
    assert S.accept_length(pd.DataFrame({"accepted": [0, 1, 2, 3]})) == pytest.approx(2.5)
    assert S.accept_length([0, 0, 0]) == 1.0
    assert S.accept_length(pd.DataFrame({"accept_len": [1, 2, 4]})) == pytest.approx(7 / 3)


def test_accept_length_from_meta_is_pooled():
    metas = [{"completion_tokens": 100, "spec_verify_ct": 50},
             {"completion_tokens": 10, "spec_verify_ct": 10}]
    assert S.accept_length_from_meta(metas) == pytest.approx(110 / 60)
    with pytest.raises(EagleLabError):
        S.accept_length_from_meta([{"completion_tokens": 5}])


def test_requests_without_a_verify_count_are_left_out_of_the_pool():
    # counting the third request as 0 verify steps would give 210 / 60 = 3.5
    metas = [{"completion_tokens": 100, "spec_verify_ct": 50},
             {"completion_tokens": 10, "spec_verify_ct": 10}, {"completion_tokens": 100}]
    assert S.accept_length_from_meta(metas) == pytest.approx(110 / 60)
    assert S.accept_length_pooled([100, 10, 100], [50, 10, np.nan]) == pytest.approx(110 / 60)
    assert np.isnan(S.accept_length_pooled([100], []))


def test_wilson_interval():
    # (p + z^2/2n -+ z sqrt(p(1-p)/n + z^2/4n^2)) / (1 + z^2/n), z = 1.96
    assert S.wilson_interval(12, 13) == pytest.approx((0.6669, 0.9863), abs=1e-4)
    assert S.wilson_interval(10, 10) == pytest.approx((0.7225, 1.0), abs=1e-4)
    assert S.wilson_interval(0, 0) == (0.0, 1.0)
    assert S.share_text(8, 10) == "80 % (8/10; 95 % CI 49-94 %)"


def test_findings_show_no_probability():
    found = D.diagnose(per_position=[0.01, 0.0])
    assert "%" not in str(found[0]).split(":")[0]
    from eagle3lab.report import prose

    assert "confidence" not in prose.diagnosis_sentence(found)
    assert "%)" not in prose.diagnosis_sentence(found, short=True)


def test_iid_formula_and_edges():
    assert P.expected_accept_length(0.0, 5) == 1.0
    assert P.expected_accept_length(1.0, 5) == 6.0
    a, k = 0.8, 6
    assert P.expected_accept_length(a, k) == pytest.approx(sum(a ** i for i in range(k + 1)))
    np.testing.assert_allclose(P.expected_accept_length(0.5, np.arange(1, 4)), [1.5, 1.75, 1.875])
    with pytest.raises(EagleLabError):
        P.expected_accept_length(1.5, 3)


def test_fit_iid_rate_inverts_the_model():
    for a in (0.1, 0.5, 0.77, 0.95):
        assert P.fit_iid_rate(P.expected_accept_length(a, 6), 6) == pytest.approx(a, abs=1e-7)
    assert P.fit_iid_rate(1.0, 4) == pytest.approx(0.0, abs=1e-7)
    with pytest.raises(EagleLabError):
        P.fit_iid_rate(9.0, 6)


def test_general_formula_matches_simulation():
    rates = [0.9, 0.6, 0.5, 0.3]
    df = simulate(rates, n=20000)
    assert S.accept_length(df) == pytest.approx(S.accept_length_from_rates(rates), abs=0.03)
    uncond = S.unconditional_rates(rates)
    assert S.accept_length_from_rates(uncond, conditional=False) == \
        pytest.approx(S.accept_length_from_rates(rates))
    np.testing.assert_allclose(S.conditional_rates(uncond), rates)


def test_per_position_recovers_rates_with_honest_intervals():
    rates = [0.8, 0.5, 0.7]
    table = S.per_position(simulate(rates, n=5000), conditional=True, n_boot=500)
    assert list(table.columns) == ["position", "rate", "lo", "hi", "n"]
    assert (table["lo"] <= table["rate"]).all() and (table["rate"] <= table["hi"]).all()
    assert all(lo <= r <= hi for lo, r, hi in zip(table["lo"], rates, table["hi"]))
    assert table["n"].iloc[0] == 5000 and table["n"].iloc[1] < 5000
    uncond = S.per_position(simulate(rates, n=5000), conditional=False, n_boot=200)
    np.testing.assert_allclose(uncond["rate"], np.cumprod(rates), atol=0.03)
    assert (uncond["n"] == 5000).all()


def test_per_position_interval_by_request_is_wider_for_correlated_requests():
    rng = np.random.default_rng(1)
    # requests differ a lot (easy vs hard prompts): steps within a request are correlated
    parts = [simulate([p] * 3, n=100, seed=i).assign(request=i)
             for i, p in enumerate(rng.choice([0.2, 0.9], size=20))]
    df = pd.concat(parts, ignore_index=True)
    by_request = S.per_position(df, conditional=True, n_boot=400)
    by_step = S.per_position(df.drop(columns="request"), conditional=True, n_boot=400)
    width = lambda t: (t["hi"] - t["lo"]).iloc[0]
    assert width(by_request) > 1.5 * width(by_step)


def test_per_position_rejects_counts_beyond_depth():
    with pytest.raises(EagleLabError):
        S.per_position(pd.DataFrame({"accepted": [0, 5]}), k=3, conditional=True)
    with pytest.raises(EagleLabError):
        S.accepted_counts(pd.DataFrame({"x": [1]}))


def test_per_position_from_vllm_log_rows():
    rows = pd.DataFrame({"per_position": [(0.8, 0.4, 0.2), (0.6, 0.3, 0.1), None],
                         "drafted": [300, 100, None]})
    table = S.per_position_from_log(rows, conditional=False)
    np.testing.assert_allclose(table["rate"], [0.75, 0.375, 0.175])
    cond = S.per_position_from_log(rows, conditional=True)
    np.testing.assert_allclose(cond["rate"], [0.75, 0.5, 0.175 / 0.375])


def test_rate_conversions_match_documented_examples():
    old = P.rate_conversions(2.17, num_steps=3)
    assert old["sglang_old_accept_rate"] == pytest.approx(0.5425)
    new = P.rate_conversions(3.05, num_steps=3, num_draft_tokens=4)
    assert new["sglang_new_accept_rate"] == pytest.approx(0.6833, abs=1e-3)
    assert new["vllm_draft_acceptance_rate"] == pytest.approx(0.6833, abs=1e-3)
    for kind in ("sglang_old", "sglang_new", "vllm"):
        key = {"sglang_old": "sglang_old_accept_rate", "sglang_new": "sglang_new_accept_rate",
               "vllm": "vllm_draft_acceptance_rate"}[kind]
        assert P.accept_length_from_rate(new[key], kind, 3, 4) == pytest.approx(3.05)


def test_gap_table_terms_sum_to_the_accept_length_gap():
    acc = [0.77] * 6
    served = [0.7, 0.2, 0.2, 0.2, 0.2, 0.2]
    gap = P.gap_table(acc, served)
    total = S.accept_length_from_rates(acc) - S.accept_length_from_rates(served)
    assert gap["lost"].sum() == pytest.approx(total)
    assert gap["lost"].idxmax() == 1  # position 2 loses the most


def test_cost_model_break_even_and_best_depth():
    cost = P.CostModel(c_draft=0.002, c_verify=0.02)
    assert cost.break_even_accept_length(3) == pytest.approx(1.3)
    assert cost.speedup(1.3, 3) == pytest.approx(1.0)
    assert P.best_depth(cost, a=0.0)["depth"] == 0  # nothing accepted: do not speculate
    deep = P.best_depth(cost, a=0.95, max_depth=12)["depth"]
    shallow = P.best_depth(cost, a=0.5, max_depth=12)["depth"]
    assert deep > shallow >= 1
    table = P.throughput_vs_depth(cost, rates=[0.9, 0.5], max_depth=4)
    assert len(table) == 4 and table["accept_length"].is_monotonic_increasing


def test_fit_cost_model_recovers_costs_per_batch_size():
    rows = []
    for bs, (cd, cv) in {1: (0.002, 0.020), 8: (0.004, 0.030)}.items():
        for k in range(0, 6):
            t = cv + k * cd if k else cv
            rows.append({"batch_size": bs, "k": k, "step_time": t * (1 + 0.001 * (k % 2))})
    fits = P.fit_cost_models(pd.DataFrame(rows))
    assert fits.set_index("batch_size").loc[8, "c_draft"] == pytest.approx(0.004, rel=0.05)
    assert fits.set_index("batch_size").loc[1, "c_verify"] == pytest.approx(0.020, rel=0.05)
    with pytest.raises(EagleLabError):
        P.fit_cost_model(pd.DataFrame({"k": [1, 1], "step_time": [1, 1]}))


def causes(findings):
    return [f.cause for f in findings]


def test_diagnose_config_adjusted_comes_first():
    found = D.diagnose(per_position=[0.75, 0.7], standalone_acc=[0.77, 0.75],
                       requested_draft_tokens=16, effective_draft_tokens=2)
    assert found[0].cause == "config_adjusted"
    assert "16" in found[0].evidence and found[0].next_check


def test_diagnose_zero_acceptance_points_at_wiring_or_vocab():
    assert causes(D.diagnose(per_position=[0.005, 0.0, 0.0], standalone_acc=[0.77] * 3))[:2] == \
        ["vocab_mapping", "wiring"]
    assert causes(D.diagnose(per_position=[0.09, 0.05, 0.05], standalone_acc=[0.77] * 3))[0] == "wiring"


def test_diagnose_multi_step_collapse():
    df = simulate([0.72, 0.2, 0.15, 0.15, 0.1], n=3000)
    found = D.diagnose(steps=df, standalone_acc=[0.77, 0.7, 0.7, 0.7, 0.7])
    assert found[0].cause == "multi_step"
    assert any(s in found[0].evidence for s in ("72", "71", "73"))


def test_diagnose_uniform_drop_and_healthy():
    acc = [0.8, 0.75, 0.75, 0.7]
    drop = D.diagnose(per_position=[0.55, 0.5, 0.5, 0.48], standalone_acc=acc)
    assert set(causes(drop)[:2]) == {"quantization", "distribution_shift"}
    shifted = D.diagnose(per_position=[0.55, 0.5, 0.5, 0.48], standalone_acc=acc,
                         standalone_acc_served=[0.57, 0.52, 0.5, 0.5])
    assert shifted[0].cause == "distribution_shift"
    healthy = D.diagnose(per_position=[0.79, 0.74, 0.75, 0.69], standalone_acc=acc)
    assert healthy[0].cause == "healthy"


def test_diagnose_context_decay():
    rng = np.random.default_rng(3)
    ctx = rng.integers(50, 2000, size=2000)
    p = np.where(ctx > 1000, 0.2, 0.8)
    accepted = np.minimum(rng.geometric(1 - p) - 1, 4)
    df = pd.DataFrame({"accepted": accepted, "k": 4})
    found = D.diagnose(steps=df, context_lengths=ctx)
    assert "context_length" in causes(found)
    flat = D.diagnose(steps=df.assign(accepted=rng.permutation(accepted)), context_lengths=ctx)
    assert "context_length" not in causes(flat)


def test_findings_frame_and_validation():
    frame = F.findings_frame(D.diagnose(per_position=[0.01, 0.0]))
    assert list(frame.columns) == ["rank", "cause", "evidence", "next_check"]
    with pytest.raises(ValueError):
        D.cause_rules.finding("gremlins", 0.5, [])


def test_steps_frame_from_engine_generations():
    from types import SimpleNamespace as NS

    step = lambda acc: NS(drafted=3, accepted=acc, draft_s=0.01, verify_s=0.02)
    gens = [NS(prompt_ids=[1] * 10, steps=[step(3), step(0), step(1)]),
            NS(prompt_ids=[1] * 4, steps=[step(2)])]
    frame = S.steps_frame(gens)
    assert list(frame["context_length"]) == [11, 15, 16, 5]
    assert list(frame["request"]) == [0, 0, 0, 1]
    assert S.accept_length(frame) == pytest.approx(1 + 6 / 4)
    assert S.draft_depth(frame) == 3
    with pytest.raises(EagleLabError):
        S.steps_frame([NS(prompt_ids=[1], steps=[])])


def test_cost_model_from_engine_timings():
    frame = pd.DataFrame({"drafted": [4, 4], "accepted": [1, 3], "draft_s": [0.008, 0.012],
                          "verify_s": [0.02, 0.03]})
    cost = P.cost_model_from_steps(frame, baseline_tokens_per_s=50)
    assert cost.c_draft == pytest.approx(0.0025) and cost.c_verify == pytest.approx(0.025)
    assert cost.c_target == pytest.approx(0.02)
    with pytest.raises(EagleLabError):
        P.cost_model_from_steps(frame.drop(columns="verify_s"))


def test_diagnose_sampling_only_when_temperature_is_positive():
    acc = [0.8, 0.75, 0.75, 0.7]
    served = [0.5, 0.48, 0.47, 0.45]
    hot = causes(D.diagnose(per_position=served, standalone_acc=acc, temperature=0.8))
    assert "sampling" in hot[:3]
    assert "sampling" not in causes(D.diagnose(per_position=served, standalone_acc=acc, temperature=0))


def test_signature_tail_is_weighted_by_reach():
    # position 4 reached almost never: its 1.0 must not hide the collapse at positions 2-3
    sig = D.acceptance_signature([0.9, 0.05, 0.05, 1.0], standalone_acc=0.9)
    assert sig["tail_drop"] < 0.2
    assert sig["keep1"] == pytest.approx(1.0)
    assert D.diagnose(per_position=[0.9, 0.05, 0.05, 1.0], standalone_acc=0.9)[0].cause == "multi_step"


def test_diagnose_flags_depth_risk_when_training_evaluated_only_acc1():
    # effective depth 1: later positions are never served; a draft evaluated only at depth 1
    shallow = D.diagnose(per_position=[0.88], standalone_acc=[0.57],
                         requested_draft_tokens=16, effective_draft_tokens=2)
    assert causes(shallow)[0] == "config_adjusted" and "multi_step" in causes(shallow)[:3]
    deep = D.diagnose(per_position=[0.88], standalone_acc=[0.57, 0.55, 0.5],
                      requested_draft_tokens=16, effective_draft_tokens=2)
    assert "multi_step" not in causes(deep)


def test_diagnose_context_beyond_training_length_ranks_context_first():
    # two context lengths only (the binned-decay rule needs more): the window comparison decides
    ctx = np.repeat([50, 200], 100)
    accepted = np.where(ctx > 100, np.arange(200) % 2, 3)  # AL 4 within 100 tokens, 1.5 beyond
    steps = pd.DataFrame({"accepted": accepted, "context_length": ctx})
    kwargs = dict(per_position=[0.40, 0.9, 0.95], standalone_acc_served=[0.66, 0.6, 0.56],
                  standalone_acc=[0.53, 0.5, 0.5])
    found = D.diagnose(**kwargs, steps=steps, draft_max_context=100)
    assert found[0].cause == "context_length"
    assert "100 tokens" in found[0].evidence
    assert D.diagnose(**kwargs, steps=steps, draft_max_context=1000)[0].cause != "context_length"
    flat = steps.assign(accepted=np.arange(200) % 3)  # no loss beyond the window
    assert D.diagnose(**kwargs, steps=flat, draft_max_context=100)[0].cause != "context_length"


def test_no_prompt_shift_verdict_from_sampled_text():
    kwargs = dict(per_position=[0.56, 0.58, 0.56], standalone_acc=[0.36, 0.35, 0.35],
                  standalone_acc_served=[0.30, 0.29, 0.29])
    assert D.diagnose(**kwargs, temperature=0.0)[0].cause == "distribution_shift"
    assert D.diagnose(**kwargs, temperature=0.8)[0].cause == "healthy"


def test_best_depth_per_batch_size_gets_shallower_when_drafting_costs_more():
    rows = []
    for bs, (cd, cv) in {1: (0.001, 0.020), 64: (0.012, 0.030)}.items():
        rows += [{"batch_size": bs, "k": k, "step_time": cv + k * cd} for k in range(0, 7)]
    table = P.best_depths(P.fit_cost_models(pd.DataFrame(rows)), a=0.8, max_depth=10)
    depth = table.set_index("batch_size")["depth"]
    assert depth[1] > depth[64] >= 0


def test_weak_first_position_then_collapse_points_at_inputs_not_training():
    # measured on the default lab: wiring-seed [0.29, 0.04, 0.0] vs no-ttt [0.71, 0.01, 0.14]
    served_text_acc = [0.58]
    wiring = D.diagnose(per_position=[0.29, 0.04, 0.0], standalone_acc=[0.41],
                        standalone_acc_served=served_text_acc)
    assert wiring[0].cause == "wiring" and "vocab_mapping" in causes(wiring)[:3]
    no_ttt = D.diagnose(per_position=[0.71, 0.01, 0.14], standalone_acc=[0.41],
                        standalone_acc_served=served_text_acc)
    assert no_ttt[0].cause == "multi_step"
    hot = D.diagnose(per_position=[0.21, 0.04, 0.0], standalone_acc=[0.41],
                     standalone_acc_served=[0.39], temperature=0.8)
    assert hot[0].cause == "sampling"


def test_accept_length_interval_keeps_requests_whole():
    steps = pd.DataFrame({"request": [0, 0, 1, 1, 2, 2, 3, 3], "accepted": [0, 0, 3, 3, 0, 1, 2, 0],
                          "drafted": 3})
    lo, hi = S.accept_length_ci(steps)
    assert lo < S.accept_length(steps) < hi and 1.0 <= lo and hi <= 4.0
    assert S.accept_length_ci(steps) == (lo, hi)  # deterministic
    assert S.accept_length_ci(steps.drop(columns="request")) is None  # no requests, no interval
    assert S.accept_length_ci(steps[steps["request"] == 1]) is None
    with_gap = pd.concat([steps, pd.DataFrame({"request": [4], "accepted": [np.nan]})])
    assert S.accept_length_ci(with_gap) == (lo, hi)  # a step without a count is left out
    alike = pd.DataFrame({"request": [0, 0, 1, 1], "accept_len": [2, 3, 3, 2]})
    assert S.accept_length_ci(alike) == pytest.approx((2.5, 2.5))


def test_sign_test_is_the_one_sided_binomial_tail():
    assert S.sign_test(7, 0) == pytest.approx(1 / 128)
    assert S.sign_test(0, 0) == 1.0
    assert S.sign_test(2, 1) == pytest.approx(4 / 8)  # P(X >= 2), X ~ Bin(3, 1/2)


def _replay_case(served, reference, margins=(), standalone=(0.35, 0.34, 0.34)):
    steps = pd.DataFrame({"accepted": served, "context_length": np.arange(len(served)) + 10})
    rates = S.per_position(steps, k=3, conditional=True, n_boot=0)["rate"].to_numpy()
    replay = {"reference_accepted": list(reference), "tokens_checked": 300,
              "mismatch_margins": list(margins)}
    return D.diagnose(per_position=rates, steps=steps, standalone_acc=list(standalone),
                      replay=replay, temperature=0.0, depth=3)


def test_replay_served_equal_to_the_drafts_own_replay_is_healthy():
    served = [0, 1, 3, 2, 0, 1] * 20
    found = _replay_case(served, served)
    assert [f.cause for f in found] == ["healthy"]
    # a near-tie mismatch (margin below THRESHOLDS['tie_margin']) is numerics, not a target change
    assert _replay_case(served, served, margins=[1e-5])[0].cause == "healthy"


def test_replay_served_steps_accepting_less_than_the_replay_is_wiring():
    reference = [0, 1, 3, 2, 0, 1] * 20
    served = list(reference)
    for i in range(2, 120, 12):  # 10 steps lose a draft, none gains one: p = 2**-10
        served[i] -= 1
    assert [f.cause for f in _replay_case(served, reference)][:2] == ["wiring", "vocab_mapping"]
    served[4] += 1  # 10 worse, 1 better: still p < 0.01
    assert _replay_case(served, reference)[0].cause == "wiring"
    # unknown reference steps (NaN: the text ended) are left out of the comparison
    assert _replay_case(served, reference[:-1] + [np.nan])[0].cause == "wiring"
    with pytest.raises(EagleLabError):
        _replay_case(served, reference[:-1])


def test_replay_a_served_token_the_reference_target_would_not_pick_is_quantization():
    served = [0, 1, 3, 2, 0, 1] * 20
    found = _replay_case(served, served, margins=[0.05])
    assert [f.cause for f in found] == ["quantization"]
    # with the target changed the replay is no counterfactual: no wiring verdict from it
    worse = [max(a - 1, 0) for a in served]
    assert "wiring" not in [f.cause for f in _replay_case(worse, served, margins=[0.05])]


def test_replay_near_zero_position_one_is_vocab_mapping():
    reference = [0, 1, 3, 2, 0, 1] * 20
    found = _replay_case([0] * 120, reference)
    assert [f.cause for f in found][:2] == ["vocab_mapping", "wiring"]


def test_a_draft_whose_own_evaluation_decays_with_depth_is_multi_step():
    served = [0, 1, 3, 2, 0, 1] * 20
    found = _replay_case(served, served, standalone=(0.41, 0.19, 0.13, 0.11, 0.1))
    assert [f.cause for f in found][:2] == ["multi_step", "healthy"]
    assert found[0].weight == pytest.approx(0.85)
    # at a served depth of 1 it is still named, with the depth it will cost at
    shallow = D.diagnose(per_position=[0.5], standalone_acc=[0.41, 0.19, 0.13], depth=1)
    assert shallow[0].cause == "multi_step" and "evaluated at (3)" in shallow[0].evidence
    # acc@2..k at >= 75 % of acc@1 is a draft that drafts deep
    assert "multi_step" not in [f.cause for f in _replay_case(served, served,
                                                               standalone=(0.4, 0.32, 0.3))]


def test_exact_binomial_interval_matches_clopper_pearson():
    assert S.exact_binomial_interval(5, 10) == pytest.approx((0.1871, 0.8129), abs=1e-4)
    assert S.exact_binomial_interval(0, 10) == pytest.approx((0.0, 0.3085), abs=1e-4)
    assert S.exact_binomial_interval(10, 10) == pytest.approx((0.6915, 1.0), abs=1e-4)
    assert S.exact_binomial_interval(1, 3, level=0.9) == pytest.approx((0.0170, 0.8647), abs=1e-4)
    assert all(np.isnan(S.exact_binomial_interval(0, 0)))
    lo, hi = S.wilson_interval(3, 4)
    elo, ehi = S.exact_binomial_interval(3, 4)
    assert elo < lo and ehi > hi  # exact is the wider (it is guaranteed to cover)
    with pytest.raises(S.StatsError):
        S.exact_binomial_interval(5, 4)


def test_one_conversion_each_way_between_conditional_and_unconditional():
    cond = np.array([0.8, 0.5, 0.25])
    uncond = S.unconditional_rates(cond)
    np.testing.assert_allclose(uncond, [0.8, 0.4, 0.1])
    np.testing.assert_allclose(S.conditional_rates(uncond), cond)
    assert S.conditional_rates([0.5, 0.0, 0.0])[2] == 0.0  # nothing reached position 2
    assert np.isnan(S.conditional_rates([0.5, 0.0, 0.0], undefined=np.nan)[2])
    assert S.accept_length_from_rates(cond) == pytest.approx(S.accept_length_from_rates(uncond, conditional=False))


def test_accept_length_from_counts_every_source_form():
    assert S.accept_length_of_counts(24, 8) == 3.0
    assert np.isnan(S.accept_length_of_counts(5, 0))
    np.testing.assert_allclose(S.accept_length_of_counts([6, 9], [3, 0]), [2.0, np.nan])
    assert S.accept_length_of_accepted(16, 8) == 3.0 and np.isnan(S.accept_length_of_accepted(1, 0))
    assert S.request_accept_length({"completion_tokens": 30, "spec_verify_ct": 10}) == 3.0
    assert S.request_accept_length({"spec_accept_length": 2.5, "spec_verify_ct": 10}) == 2.5
    assert S.accept_length_of_intervals([2.0, None, 3.0]) == 2.5
    assert S.accept_length_of_intervals([]) is None
    assert S.draft_acceptance_rate(6, 4, 3) == 0.5 and np.isnan(S.draft_acceptance_rate(1, 0, 3))


def test_rate_rules_are_a_table_of_known_causes_and_stages():
    stages = {s.name for s in D.STAGES}
    for rule in D.RATE_RULES:
        assert rule.cause in D.CAUSES and rule.stage in stages and rule.reads and rule.threshold
    # one row per rule per cause: no branch names a cause twice, except the two position-1
    # vocabulary rows and the two serve-side distribution_shift rows, whose own conditions exclude
    # each other
    from collections import Counter

    twice = {k for k, n in Counter((r.branch, r.cause) for r in D.RATE_RULES).items() if n > 1}
    assert twice == {("dead", "vocab_mapping"), ("serve-side loss", "distribution_shift")}
    found = D.diagnose(per_position=[0.02, 0.5], standalone_acc=[0.6, 0.5])
    assert found[0].check == "position 1: dead" and found[0].source == "statistics"

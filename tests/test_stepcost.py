"""The incident's cost arithmetic as a tool: every figure pinned from its formula (issue 31 item 3)."""

import json

import pytest

from eagle3lab.acceptance import predict
from eagle3lab.cost import stepcost
from eagle3lab.cli import main
from eagle3lab.acceptance.stats import StatsError
from eagle3lab.cost.stepcost import StepCost

# the incident's figures at 5/1/6 after the fix (seed text): 90 tok/s without, 54.8 with, L about 1.78
B, S, L = 90.0, 54.8, 1.78
INCIDENT = StepCost(B, S, L, 5, 1, 6)


def test_the_incidents_step_cost_and_break_even_are_L_times_B_over_S():
    assert INCIDENT.cost == L * B / S  # exact: the formula
    assert round(INCIDENT.cost, 2) == 2.92  # "about 2.9 no-speculation steps"
    assert INCIDENT.break_even == INCIDENT.cost
    assert INCIDENT.speedup == S / B


def test_iid_rates_both_ways_at_depth_5():
    assert INCIDENT.iid_accept_length(0.75) == (1 - 0.75 ** 6) / (1 - 0.75)  # 3.288..., "about 3.3"
    a = INCIDENT.iid_rate
    assert predict.expected_accept_length(a, 5) == pytest.approx(L, abs=1e-8)  # the rate that gives 1.78
    assert round(a, 2) == 0.44
    be = INCIDENT.break_even_iid_rate
    assert predict.expected_accept_length(be, 5) == pytest.approx(INCIDENT.cost, abs=1e-8)
    # a step dearer than depth + 1 tokens can never pay: no rate breaks even
    assert StepCost(90, 10, 1.8, 5).break_even_iid_rate is None


def test_what_if_another_accept_length_and_its_interval():
    w = INCIDENT.what_if(3.3)
    assert w["speedup"] == 3.3 / INCIDENT.cost and w["tokens_per_s"] == B * 3.3 / INCIDENT.cost
    assert w["pays"] == "yes" and w["speedup_range"] is None
    w = INCIDENT.what_if(2.9, (2.5, 3.2))
    assert w["speedup_range"] == [2.5 / INCIDENT.cost, 3.2 / INCIDENT.cost]
    assert w["tokens_per_s_range"] == [B * 2.5 / INCIDENT.cost, B * 3.2 / INCIDENT.cost]
    assert w["pays"] == "undecided"  # the range straddles 1
    assert INCIDENT.what_if(1.9, (1.8, 2.0))["pays"] == "no"


@pytest.mark.parametrize("args, message", [
    ((-90, S, L, 5), "baseline tokens/s must be a positive number"),
    ((B, 0, L, 5), "speculative tokens/s must be a positive number"),
    ((B, S, 6.5, 5), "outside [1, 6]"),
    ((B, S, 0.9, 5), "outside [1, 6]"),
    ((B, S, L, 0), "steps must be a whole number"),
    ((B, S, L, 5, 1, 1), "draft tokens must be a whole number >= 2"),
    ((B, S, 2.5, 5, 1, 2), "outside [1, 2]"),  # 5 steps but 2 draft tokens verified: at most 2
    ((B, float("nan"), L, 5), "positive number"),
])
def test_bad_numbers_are_one_line_errors(args, message):
    with pytest.raises(StatsError, match=message.replace("[", r"\[").replace("]", r"\]")):
        StepCost(*args)


def test_bad_what_ifs_and_rates():
    with pytest.raises(StatsError, match="within"):
        INCIDENT.iid_accept_length(1.5)
    with pytest.raises(StatsError, match="lo above hi"):
        INCIDENT.what_if(2.0, (2.2, 1.9))
    with pytest.raises(StatsError, match="outside"):
        INCIDENT.what_if(7.0)
    with pytest.raises(StatsError, match="kind"):
        StepCost(B, S, L, 5, kind="prefill")


def test_the_notebook_frames():
    table = stepcost.cost_table(B, S, L, 5, 1, 6, iid=(0.75,))
    values = dict(zip(table["quantity"], table["value"]))
    assert values["one speculative step costs (no-speculation steps)"] == L * B / S
    assert values["accept length an i.i.d. a = 0.75 gives"] == (1 - 0.75 ** 6) / 0.25
    assert values["i.i.d. rate for the measured accept length"] == INCIDENT.iid_rate
    frame = stepcost.what_if_table(INCIDENT, {"healthy": 3.3, "seed after fix": (1.9, (1.7, 2.1))})
    assert list(frame.index) == ["healthy", "seed after fix"]
    assert frame.loc["healthy", "total_tokens_per_s"] == B * 3.3 / INCIDENT.cost
    assert frame.loc["seed after fix", "speedup_range"] == [1.7 / INCIDENT.cost, 2.1 / INCIDENT.cost]


def test_the_labs_own_step_cost_beside_the_incidents():
    lab = stepcost.lab_step_cost({"tokens_per_s": 124.2, "baseline_tokens_per_s": 111.5, "accept_length": 1.9,
                                  "num_steps": 5, "topk": 1, "num_draft_tokens": 6, "draft_over_target": 0.06,
                                  "verify_over_plain": 1.4})
    assert lab["step_cost"] == 1.9 / (124.2 / 111.5) and lab["configuration"] == "5/1/6"  # L / speed-up = L B / S
    assert lab["draft_over_target"] == 0.06 and lab["verify_over_target"] == 1.4
    frame = stepcost.compare_costs(INCIDENT, lab)
    assert frame.loc["one speculative step, in no-speculation steps", "incident"] == INCIDENT.cost
    assert frame.loc["one speculative step, in no-speculation steps", "lab"] == lab["step_cost"]
    assert frame.loc["one draft step / one target step", "incident"] != frame.loc[
        "one draft step / one target step", "incident"]  # NaN: the incident reported no draft cost
    with pytest.raises(StatsError, match="no speed-up"):
        stepcost.lab_step_cost({"accept_length": 2.0, "num_steps": 3, "baseline_tokens_per_s": 1.0})


def test_the_cost_command(capsys):
    code = main(["cost", "--baseline-tps", "90", "--spec-tps", "54.8", "--accept-length", "1.78", "--steps", "5",
                 "--draft-tokens", "6", "--iid", "0.75", "--what-if", "3.3", "--what-if", "2.1:1.9-2.3"])
    out = capsys.readouterr().out
    assert code == 0
    assert "one speculative step costs 2.92 no-speculation steps" in out
    assert "corresponds to an i.i.d. per-token rate of 0.44 at depth 5" in out
    assert "an i.i.d. rate of 0.75 gives accept length 3.29 at depth 5" in out
    assert f"accept length 3.3 would give {3.3 / INCIDENT.cost:.2f}x" in out
    assert "[1.9, 2.3]" in out and "Assumptions:" in out
    assert main(["cost", "--baseline-tps", "90", "--spec-tps", "54.8", "--accept-length", "1.78", "--steps", "5",
                 "--what-if", "3.3", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["step_cost"] == L * B / S and data["what_if"][0]["speedup"] == 3.3 / INCIDENT.cost


@pytest.mark.parametrize("argv, message", [
    (["--baseline-tps", "-1"], "baseline tokens/s must be a positive number"),
    (["--accept-length", "9"], "outside [1, 6]"),
    (["--what-if", "two"], "--what-if 'two': give an accept length L, or L:LO-HI"),
    (["--what-if", "2.0:1.5"], "give an accept length L, or L:LO-HI"),
    (["--iid", "1.2"], "within [0, 1]"),
])
def test_the_cost_command_refuses_bad_numbers_in_one_line(argv, message, capsys):
    base = {"--baseline-tps": "90", "--spec-tps": "54.8", "--accept-length": "1.78", "--steps": "5"}
    args = ["cost"] + [x for k, v in base.items() if k not in argv for x in (k, v)] + argv
    assert main(args) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_bench_with_a_baseline_prints_the_step_cost():
    from eagle3lab.commands import bench

    summary = {"baseline_tokens_per_s": B, "tokens_per_s": S, "accept_length": L, "num_steps": 5, "topk": 1,
               "num_draft_tokens": 6, "concurrency": 1}
    cost = bench.step_cost(summary)
    assert cost["step_cost"] == L * B / S and cost["iid_rate"] == INCIDENT.iid_rate
    lines = bench.cost_lines({**summary, "step_cost": cost})
    assert "one speculative step costs 2.92 no-speculation steps" in lines[0]
    # a server that reports no accept length: said, not raised
    assert "not computed" in bench.step_cost({**summary, "accept_length": float("nan")})["note"]
    assert "4 requests ran at once" in bench.step_cost({**summary, "concurrency": 4})["assumptions"]


def test_the_labs_step_cost_from_a_measured_point():
    point = {"depth": 5, "topk": 1, "num_draft_tokens": 6, "accept_length": 1.9, "speedup": 0.95,
             "draft_over_target": 0.07, "verify_over_target": 1.3}
    lab = stepcost.lab_step_cost(point)
    assert lab["step_cost"] == 1.9 / 0.95 and lab["verify_over_target"] == 1.3 and lab["configuration"] == "5/1/6"

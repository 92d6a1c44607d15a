"""Sources of acceptance observations: a log (with the effective config it states), per-request
meta_info, the lab engine's step records; each yields one Observation, and diagnose() reads it."""

import io
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from eagle3lab.acceptance import diagnosis
from eagle3lab.acceptance import stats
from eagle3lab.engines.sglang.sglang_rules import W_ADJUST
from eagle3lab.spec import SpecConfig
from eagle3lab.sources.logfile import config_from_log as from_log
from eagle3lab.sources.logfile import observe_log
from eagle3lab.engines.sglang.meta_info import observe_meta_info

SAMPLES = Path(__file__).resolve().parents[1] / "data" / "samples" / "logs"
SEED = SpecConfig(num_steps=1, topk=1, num_draft_tokens=16)


def test_from_log_finds_the_adjustment():
    df = pd.DataFrame({
        "message": ["server_args=ServerArgs(model_path='m', speculative_algorithm='EAGLE3', "
                    "speculative_num_steps=1, speculative_eagle_topk=1, "
                    "speculative_num_draft_tokens=2, page_size=1)",
                    W_ADJUST, "Decode batch, accept len: 1.80"],
        "accept_len": [None, None, 1.8]})
    ev = from_log(df)
    assert ev["adjusted"] and ev["server_args"]["speculative_num_draft_tokens"] == 2
    assert ev["max_accept_len"] == pytest.approx(1.8)
    clean = from_log(pd.DataFrame({"message": ["hello"], "accept_len": [None]}))
    assert not clean["adjusted"] and clean["server_args"] == {}



def test_from_log_reads_a_log_file_with_server_args(tmp_path):
    log = tmp_path / "server.log"
    log.write_text(
        f"[2026-02-05 02:44:20] WARNING speculative_hook.py:1170: {W_ADJUST}\n"
        "[2026-02-05 02:44:21] server_args=ServerArgs(model_path='m', "
        "speculative_algorithm='EAGLE3', speculative_num_steps=1, speculative_eagle_topk=1, "
        "speculative_num_draft_tokens=2, page_size=1)\n"
        "[2026-02-05 02:45:00] Decode batch, #running-req: 1, #token: 100, token usage: 0.01, "
        "accept len: 1.80, accept rate: 0.40, cuda graph: True, gen throughput (token/s): 54.8, "
        "#queue-req: 0\n")
    ev = from_log(log)
    assert ev["adjusted"]
    assert ev["server_args"]["speculative_num_draft_tokens"] == 2
    assert ev["max_accept_len"] == pytest.approx(1.8)
    assert from_log(str(log))["server_args"] == ev["server_args"]


def test_sglang_0_5_23_server_args_dict_is_read():
    text = ("[2026-02-05 02:44:21] server_args={'model_path': 'm', 'speculative_algorithm': 'EAGLE3', "
            "'speculative_num_steps': 3, 'speculative_eagle_topk': 1, 'speculative_num_draft_tokens': 4}\n"
            "[2026-02-05 02:45:00] Decode batch, #running-req: 1, accept len: 2.50, cuda graph: True, "
            "gen throughput (token/s): 54.8, #queue-req: 0\n")
    obs = observe_log(text)
    assert obs.effective == {"num_steps": 3, "topk": 1, "num_draft_tokens": 4}
    assert obs.accept_length == pytest.approx(2.5) and obs.tokens_per_s == pytest.approx(54.8)
    assert obs.per_position is None and obs.conditional is None  # SGLang logs only the mean


def test_diagnose_names_config_adjusted_on_the_adjustment_sample():
    """Done-when of issue 14: the log states the adjustment, so diagnose() sees the effective
    draft tokens (2) rather than the requested ones (16)."""
    sample = SAMPLES / "sglang_warning_num_draft_tokens_adjusted_SOURCE_STRING.txt"
    obs = observe_log(sample, requested=SEED)
    assert obs.requested["num_draft_tokens"] == 16
    assert obs.effective == {"num_steps": 1, "topk": 1, "num_draft_tokens": 2}
    assert any(W_ADJUST in w for w in obs.warnings)
    findings = diagnosis.diagnose(obs)
    assert findings[0].cause == "config_adjusted"
    assert "2 draft tokens are verified per step although 16 were requested" in findings[0].evidence
    # without the requested config the warning alone still names it
    alone = diagnosis.diagnose(observe_log(sample))
    assert alone[0].cause == "config_adjusted" and W_ADJUST in alone[0].evidence
    # and a log without the warning does not
    clean = observe_log(SAMPLES / "sglang_issue11948_eagle3_accept_rate_trailing_comma.log", requested=SEED)
    assert clean.effective == {} and "config_adjusted" not in [f.cause for f in diagnosis.diagnose(clean)]


def test_the_lab_servers_log_states_its_adjustment():
    """The lab front end logs like SGLang 0.5.23: the adjustment warning and server_args."""
    from eagle3lab.engines.lab import frontend as srv

    root = Path(__file__).resolve().parents[1] / "data" / "lab" / "ci"
    log = io.StringIO()
    srv.setup_logging(log)
    state = srv.load_state(str(root / "target"), str(root / "drafts" / "healthy"), spec=SEED,
                           max_prompt_tokens=64, max_new_tokens=32)
    assert state.spec.num_draft_tokens == 2
    obs = observe_log(log.getvalue(), requested=SEED)
    assert obs.effective == {"num_steps": 1, "topk": 1, "num_draft_tokens": 2}
    assert diagnosis.diagnose(obs)[0].cause == "config_adjusted"


def test_vllm_log_per_position_is_made_conditional_once():
    obs = observe_log(SAMPLES / "vllm_issue19254_v0.9_specdecoding_mean_len_per_pos.log")
    assert obs.engine == "vllm" and obs.conditional is True
    frame = obs.frame[obs.frame["per_position"].map(lambda v: isinstance(v, tuple) and len(v) > 0)]
    uncond = stats.per_position_from_log(frame, conditional=False)["rate"].to_numpy()
    np.testing.assert_allclose(obs.per_position["rate"].to_numpy(),
                               stats.conditional_rates(uncond))
    assert obs.n_steps == int(obs.per_position["n"].iloc[0])  # drafts behind position 1


def test_meta_info_accept_length_is_pooled_and_config_from_server_info():
    metas = [{"completion_tokens": 30, "spec_verify_ct": 10}, {"completion_tokens": 10, "spec_verify_ct": 10}]
    info = {"speculative_algorithm": "EAGLE3", "speculative_num_steps": 3, "speculative_eagle_topk": 1,
            "speculative_num_draft_tokens": 4}
    obs = observe_meta_info(metas, server_info=info, requested=SpecConfig(num_steps=3, topk=1, num_draft_tokens=8))
    assert obs.accept_length == pytest.approx(40 / 20)  # pooled, not (3 + 1) / 2
    assert obs.effective == {"num_steps": 3, "topk": 1, "num_draft_tokens": 4} and obs.n_requests == 2
    assert diagnosis.diagnose(obs)[0].cause == "config_adjusted"
    assert observe_meta_info([{"completion_tokens": 5}]).accept_length is None  # no speculation


def test_diagnose_takes_an_observation_or_the_same_numbers():
    from eagle3lab.sources.observation import Observation

    table = pd.DataFrame({"position": [1, 2, 3], "rate": [0.9, 0.05, 0.05], "lo": np.nan, "hi": np.nan,
                          "n": [100, 90, 5]})
    obs = Observation(source="test", per_position=table, conditional=True, accept_length=1.95)
    by_obs = diagnosis.diagnose(obs, standalone_acc=0.9)
    by_numbers = diagnosis.diagnose(per_position=[0.9, 0.05, 0.05], accept_len=1.95, standalone_acc=0.9)
    assert [f.cause for f in by_obs] == [f.cause for f in by_numbers] and by_obs[0].cause == "multi_step"
    # unconditional rates are converted, never read as conditional
    uncond = Observation(source="test", per_position=table.assign(rate=[0.9, 0.045, 0.00225]),
                         conditional=False)
    assert diagnosis.diagnose(uncond, standalone_acc=0.9)[0].cause == "multi_step"


def test_readme_module_table_matches_the_tree():
    import re

    root = Path(__file__).resolve().parents[1]
    readme = (root / "docs" / "library.md").read_text()  # the module table moved out of the README (#38)
    table = readme.split("| module | job |", 1)[1].split("\n\n", 1)[0]
    named = set()
    for cell in re.findall(r"^\| ([^|]+) \|", table, re.M):
        named |= {part for n in re.findall(r"`([\w.]+)`", cell) for part in n.split(".")}
    package = root / "eagle3lab"
    tree = {p.stem for p in package.glob("*.py") if not p.stem.startswith("_")}
    tree |= {p.name for p in package.iterdir() if (p / "__init__.py").exists()}
    assert tree <= named, f"not in the README's module table: {sorted(tree - named)}"
    assert not any("../shared" in p.read_text() for p in package.rglob("*.py"))  # sources live in docs/
    assert (root / "docs" / "sources.md").is_file()


def test_logs_print_a_never_reached_position_as_a_dash():
    from eagle3lab.commands.logs import format_observation
    from eagle3lab.sources.observation import Observation

    table = pd.DataFrame({"position": [1, 2, 3], "rate": [0.5, 0.0, np.nan], "lo": np.nan, "hi": np.nan,
                          "n": [10, 5, 0]})
    text = format_observation(Observation(source="test", per_position=table, conditional=True))
    assert "per-position acceptance (conditional) 0.50 0.00 - (-: no chain reached that position)" in text


def test_an_unmeasured_cost_ratio_is_said_to_be_assumed():
    from eagle3lab import experiments

    with pytest.warns(UserWarning, match="assuming a draft step costs 0.1 of a target step"):
        assert experiments.cost_ratio(None) == 0.1

"""The notebooks' experiments, prose and figures: flag sets, tidy measurements, prose from numbers."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from eagle3lab import experiments
from eagle3lab.viz import plots
from eagle3lab.report import prose


def test_seed_flag_sets_resolve_to_the_silent_adjustment():
    table = experiments.resolve_flag_sets(experiments.SEED_FLAG_SETS, version="0.5.23")
    first = table.iloc[0]
    assert first["asked steps/topk/draft"] == (1, 1, 16)
    assert (first["num_steps"], first["topk"], first["num_draft_tokens"]) == (1, 1, 2)
    assert first["changed"] and any("adjusted" in w for w in first["warnings"])
    assert list(table["num_draft_tokens"][1:]) == [16, 6] and not table["changed"][1:].any()


def test_compare_resolutions_flags_a_disagreement():
    ours = experiments.resolve_flag_sets(experiments.SEED_FLAG_SETS)
    theirs = ours.copy()
    theirs.iloc[0, theirs.columns.get_loc("num_draft_tokens")] = 16
    agree = experiments.compare_resolutions(ours, theirs)
    assert list(agree["agree"]) == [False, True, True]


def test_budget_and_seed_flags():
    assert experiments.budget("ci", num_prompts=None)["num_prompts"] == experiments.BUDGETS["ci"]["num_prompts"]
    assert experiments.budget("default", max_new_tokens=7)["max_new_tokens"] == 7
    assert experiments.SEED_FLAG_SETS["steps 1, topk 1, 16 draft tokens"].to_flags()[-2:] == \
        ["--speculative-num-draft-tokens", "16"]
    assert experiments.config_grid([1, 3], [(5, 2, 8)]) == [(1, 1, 2), (3, 1, 4), (5, 2, 8)]
    from eagle3lab.decoder.faults import seed_fix_ids

    assert seed_fix_ids(61) == [-1, 1, 29]


def _measured():
    return pd.DataFrame({"draft tokens run": [None, 2, 16], "tokens_per_s": [90.0, 56.8, 46.7],
                         "accept_length": [math.nan, 1.5, 1.9], "speedup": [1.0, 56.8 / 90, 46.7 / 90]},
                        index=[experiments.BASELINE, "steps 1", "steps 15"])


def test_prose_states_only_the_measured_figures():
    text = prose.flag_set_sentence(_measured())
    assert "90.0 tok/s" in text and "56.8 tok/s" in text and "46.7 tok/s" in text
    assert "slower (0.63×) than" in text and "slower (0.52×) than" in text and "No flag set beats" in text
    fix = prose.fix_sentence(_measured(), "steps 1", "steps 15")
    assert "**1.50** before" in fix and "**1.90** after" in fix and "56.8" in fix and "46.7" in fix


def test_winner_sentence_names_the_fastest_point():
    sweep = pd.DataFrame({"num_steps": [1, 3, 5], "topk": [1, 1, 2], "num_draft_tokens": [2, 4, 8],
                          "accept_length": [1.8, 3.1, 3.5], "tokens_per_s": [120.0, 190.0, 150.0],
                          "baseline_tokens_per_s": [100.0] * 3, "speedup": [1.2, 1.9, 1.5]})
    text = prose.winner_sentence(sweep)
    assert "3 steps, topk 1, 4 draft tokens" in text and "1.90×" in text and "1/1/2" in text
    # with intervals, a point whose interval overlaps the best one's is called a tie
    sweep["speedup_ci95"] = [[1.1, 1.3], [1.6, 2.2], [1.4, 1.7]]
    text = prose.winner_sentence(sweep)
    assert "overlaps those of 5/2/8" in text and "1/1/2" not in text.split("overlaps")[1].split(":")[0]


def test_capture_before_after_on_the_installed_sglang(tmp_path):
    copy = experiments.sglang_source_copy(dest=tmp_path)
    table = experiments.capture_before_after(copy, lab_layers=8).set_index("model file")
    deepseek = table.loc["srt/models/deepseek_v2.py"]
    assert deepseek["after patch"][0] == 0  # the embedding is captured once patched
    assert deepseek["before patch"] != deepseek["after patch"]
    assert not list(tmp_path.glob("**/*.orig"))


def test_fault_plot_draws_each_rows_interval():
    import matplotlib

    matplotlib.use("Agg")
    import pandas as pd

    table = pd.DataFrame({
        "accept_length": [4.0, 1.4, 1.9],
        "accept_length_ci95": [[3.5, 4.6], None, [1.8, 2.1]],
        "speedup": [2.1, 0.7, 1.0],
        "per_position": [[0.8, 0.7], [0.3, 0.0], [0.8, 0.1]],
    }, index=["healthy (no fault)", "wiring-seed", experiments.SEED_AFTER_FIX])
    errors = plots._interval_errors(table)
    assert errors.shape == (2, 3)
    assert errors[:, 0] == pytest.approx([0.5, 0.6]) and list(errors[:, 1]) == [0.0, 0.0]
    assert errors[:, 2] == pytest.approx([0.1, 0.2])
    fig = plots.fault_plot(table)
    bars = fig.axes[0]
    assert "95% CI" in bars.get_xlabel()
    assert len(bars.lines) + len(bars.collections) > 0  # the error bars are drawn


def test_the_sglang_copy_for_notebooks_goes_when_the_interpreter_exits(tmp_path):
    """Notebook 03 copies SGLang's sources to a temporary folder once per run: the copy (and the
    patched copy `capture_before_after` makes) must not outlive the kernel."""
    import os
    import subprocess
    import sys

    code = ("from eagle3lab import experiments\n"
            "copy = experiments.sglang_source_copy()\n"
            "experiments.capture_before_after(copy, lab_layers=8)\n"
            "print(copy, (copy / 'srt/models/deepseek_v2.py').is_file())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                         env={**os.environ, "TMPDIR": str(tmp_path)})
    assert out.returncode == 0, out.stderr[-2000:]
    copy, copied = out.stdout.split()
    assert copied == "True" and copy.startswith(str(tmp_path / "eagle3lab-sglang-"))
    assert list(tmp_path.iterdir()) == []  # nothing left in the temp dir


def test_experiments_ask_the_engine_record_not_its_name():
    """experiments.py tests no engine name; what differs per engine comes from engines.get."""
    import re
    from pathlib import Path

    from eagle3lab.spec import LATEST_SGLANG, VLLM_VERSION

    names = r"['\"](vllm|sglang|lab)['\"]"
    compare = re.compile(rf"{names} *(==|!=)|(==|!=) *{names}|in \(({names}, *)+|backend *(==|!=|in )")
    text = "".join(p.read_text() for p in sorted(Path(experiments.__file__).parent.glob("*.py")))
    assert [line for line in text.splitlines() if compare.search(line)] == []
    assert experiments.serve_engine(backend="lab") == ("sglang", LATEST_SGLANG)  # the lab emulates SGLang
    assert experiments.serve_engine(backend="vllm") == ("vllm", VLLM_VERSION)
    assert experiments.fix_labels("lab") == experiments.fix_labels("sglang") != experiments.fix_labels("vllm")

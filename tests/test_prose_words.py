"""Words chosen from values and intervals: a headline never contradicts its own numbers, an
interval always contains its estimate, and a difference is called one only beyond the noise."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from eagle3lab import experiments
from eagle3lab.report import prose
from eagle3lab.acceptance import stats
from eagle3lab.experiments import BASELINE


def test_compare_calls_a_difference_only_when_intervals_separate():
    assert prose.compare(2.0, [1.9, 2.1], 1.5, [1.4, 1.6]) == "higher"
    assert prose.compare(1.5, [1.4, 1.6], 2.0, [1.9, 2.1]) == "lower"
    assert prose.compare(1.10, [0.95, 1.25], 1.06, [0.98, 1.14]) == "same"
    assert prose.compare(1.04, None, 1.0, None) == "same"       # no interval: within 5 % is a tie
    assert prose.compare(1.30, None, 1.0, None) == "higher"
    assert prose.compare(float("nan"), None, 1.0, None) == "unknown"
    assert prose.compare_words(2.0, [1.9, 2.1], 1.5, [1.4, 1.6]) == "higher than"
    assert prose.compare_words(1.1, [0.9, 1.3], 1.0, [0.9, 1.2]) == "not distinguishable from"


def test_speedup_words_follow_the_interval_not_the_point():
    assert prose.speedup_words(1.04, [1.01, 1.07]).startswith("faster")
    assert prose.speedup_words(1.20, [0.90, 1.50]).startswith("not distinguishable")
    assert prose.speedup_words(0.80, [0.70, 0.90]).startswith("slower")
    assert "[0.70, 0.90]" in prose.speedup_words(0.80, [0.70, 0.90])


def test_interval_holds_flags_an_interval_that_excludes_its_estimate():
    assert prose.interval_holds(1.5, [1.4, 1.6])
    assert not prose.interval_holds(1.453, [1.5, 1.6])
    assert prose.interval_holds(1.5, None)


def _fix_table(before, before_ci, after, after_ci):
    return pd.DataFrame({"accept_length": [np.nan, before, after],
                         "accept_length_ci95": [None, before_ci, after_ci],
                         "tokens_per_s": [100.0, 90.0, 140.0], "speedup": [1.0, 0.9, 1.4],
                         "speedup_ci95": [None, [0.85, 0.95], [1.3, 1.5]]},
                        index=[BASELINE, "before", "after"])


def test_fix_headline_direction_matches_its_numbers():
    up = _fix_table(1.32, [1.25, 1.40], 1.91, [1.80, 2.00])
    title, text = prose.fix_title(up, "before", "after"), prose.fix_sentence(up, "before", "after")
    assert "works" in title and "barely" not in title and "did not move" not in title
    assert text.startswith("Accept length rose") and "faster (1.40× [1.30, 1.50]) than" in text
    flat = _fix_table(1.32, [1.20, 1.45], 1.36, [1.25, 1.50])
    assert "did not move accept length measurably" in prose.fix_title(flat, "before", "after")
    assert prose.fix_sentence(flat, "before", "after").startswith("Accept length did not move measurably")


def _acc(values):
    return pd.DataFrame({"depth": np.arange(1, len(values) + 1), "accuracy": values})


def test_accuracy_headline_is_qualified_by_depth():
    right, served = _acc([0.56, 0.16, 0.13, 0.10, 0.08]), _acc([0.18, 0.15, 0.12, 0.11, 0.10])
    text = prose.accuracy_sentence(right, served)
    assert "at depth 1" in text and "no lower at depth 4, 5" in text and "every depth" not in text
    everywhere = prose.accuracy_sentence(right, _acc([0.1, 0.05, 0.04, 0.03, 0.02]))
    assert "at every depth" in everywhere


def test_gap_sentence_names_both_measures_and_the_direction():
    from eagle3lab.acceptance import predict

    gap = predict.gap_table([0.56, 0.16, 0.13], [0.6, 0.5, 0.4])
    text = prose.gap_sentence(gap)
    assert "is **higher** than" in text and "different measures" in text and "teacher-forced" in text
    assert "trained without TTT" in text  # acc@2 16 % against acc@1 56 %
    assert "TTT" not in prose.gap_sentence(predict.gap_table([0.6, 0.5, 0.4], [0.6, 0.5, 0.4]))


def test_interleaved_table_pairs_prompts_and_its_intervals_hold():
    rng = np.random.default_rng(1)
    rows = []
    for prompt in range(6):
        for run, tps, al in ((BASELINE, 100, None), ("spec", 130, 2.0)):
            for repeat in range(2):
                tokens = 64
                seconds = tokens / (tps * rng.uniform(0.8, 1.2))
                rows.append({"run": run, "prompt": prompt, "repeat": repeat, "ok": True, "tokens": tokens,
                             "seconds": seconds, "verify": tokens / al if al else np.nan})
    table = experiments.interleaved_table(pd.DataFrame(rows))
    spec = table.loc["spec"]
    assert spec["accept_length"] == pytest.approx(2.0) and spec["prompts"] == 6 and spec["requests"] == 12
    for col in ("tokens_per_s", "speedup", "accept_length"):
        assert prose.interval_holds(spec[col], spec[f"{col}_ci95"]), col
    assert spec["speedup_ci95"][0] > 1.0  # a 30 % speed-up with ±20 % noise still separates from 1
    assert table.loc[BASELINE, "speedup"] == pytest.approx(1.0)


def test_ratio_ci_needs_two_prompts_and_contains_the_ratio():
    assert stats.ratio_ci([10], [1], [10], [2]) is None
    ci = stats.ratio_ci([10, 10, 10], [1, 1.2, 0.9], [10, 10, 10], [2, 2.1, 1.9])
    assert prose.interval_holds((30 / 3.1) / (30 / 6.0), ci)


def test_seed_ids_by_version_reconciles_notebooks_02_and_03():
    table = experiments.seed_ids_by_version()
    fix_col = "fix [-1, 2, 30] (patched) feeds"
    assert table.loc["0.5.11 – 0.5.12", fix_col] == [0, 3, 31]
    assert table.loc["0.5.11 – 0.5.12", "config ids [2, 30, 58] feed"] == [3, 31, 59]
    assert table.loc["0.5.14 – 0.5.23", fix_col] == [0, 2, 30]
    assert "[0, 3, 31] (no patch)" in table.loc["0.5.14 – 0.5.23", "ids that feed the trained boundaries"]
    assert "[-1, 3, 31] with the patch" in table.loc["0.5.13", "ids that feed the trained boundaries"]
    # served with --disable-cuda-graph, 0.5.4.post2 - 0.5.10 feed the ids as 0.5.11 - 0.5.12 do (no graph reset);
    # the table starts at deepseek_v2's first EAGLE-3 setter, 0.5.4.post2 (read release by release)
    assert experiments.serving_releases()[:2] == ["0.5.4.post2", "0.5.5"]
    off = experiments.seed_ids_by_version(cuda_graph=False)
    assert list(off.index) == ["0.5.4.post2 – 0.5.12", "0.5.13", "0.5.14 – 0.5.23"]
    assert off.loc["0.5.4.post2 – 0.5.12", fix_col] == [0, 3, 31]
    assert off.loc["0.5.4.post2 – 0.5.12", "config ids [2, 30, 58] feed"] == [3, 31, 59]
    assert table.loc["0.5.4.post2 – 0.5.10", fix_col] == [2, 30, 58]  # with graphs, the default set either way
    assert experiments.lab_analog([0, 2, 12]) == [0, 1, 11]
    text = prose.seed_ids_sentence(table, pd.DataFrame())
    assert "feed **[0, 2, 30]**" in text and "2 of 3 slots are one layer off" in text
    measured = pd.DataFrame({"boundaries": [[0, 1, 11], [0, 2, 12]], "accept_length": [1.92, 1.90],
                             "accept_length_ci95": [[1.84, 2.02], [1.80, 2.02]], "speedup": [1.08, 1.01],
                             "speedup_ci95": [[0.93, 1.27], [0.92, 1.12]]}, index=["offset", "exact"])
    assert "costs nothing measurable" in prose.seed_ids_sentence(table, measured)
    measured["accept_length_ci95"] = [[1.30, 1.45], [1.80, 2.02]]
    measured["accept_length"] = [1.38, 1.90]
    assert "The offset costs acceptance" in prose.seed_ids_sentence(table, measured)


def test_per_position_table_shows_n():
    table = pd.DataFrame({"per_position": [[0.8, 0.5], [0.4, float("nan")]],
                          "per_position_n": [[100, 80], [100, 0]]}, index=["healthy", "no-ttt"])
    out = experiments.per_position_table(table)
    assert out.loc["healthy", "position 2"] == "0.50 (n=80)" and out.loc["no-ttt", "position 2"] == "– (n=0)"
    table["per_position_ci95"] = [[[0.7, 0.9], [0.01, 0.84]], [[0.3, 0.5], None]]
    out = experiments.per_position_table(table)
    assert out.loc["healthy", "position 2"] == "0.50 [0.01, 0.84] (n=80)" and out.loc["no-ttt", "position 2"] == "– (n=0)"


def test_resolution_sentence_counts_the_warnings_it_mentions():
    import pandas as pd

    resolved = pd.DataFrame({"changed": [True, False], "asked steps/topk/draft": [(1, 1, 16), (5, 1, 6)],
                             "num_draft_tokens": [2, 6], "warnings": [["w one", "w two"], []]},
                            index=["a", "b"])
    text = prose.resolution_sentence(resolved)
    assert "2 distinct warning lines" in text and "nothing else" not in text
    resolved["warnings"] = [["w one"], []]
    assert "1 distinct warning line," in prose.resolution_sentence(resolved)


def test_a_position_without_steps_reads_no_data_and_small_n_gets_a_wide_interval():
    import pandas as pd

    per_pos = pd.DataFrame({"position": [1, 2, 3], "rate": [0.8, 0.0, 0.0], "lo": [0.7, 0.0, 0.0],
                            "hi": [0.9, 0.0, 0.0], "n": [100, 1, 0]})
    shown = prose.per_position_display(prose.with_exact_intervals(per_pos)).iloc[:, 0].tolist()
    assert shown[2] == "no data (n = 0)"
    assert shown[1] == "0.000 [0.000, 0.975] (n = 1)"   # not "0.000 [0.000, 0.000]"


def test_diagnosis_names_its_basis():
    from types import SimpleNamespace

    found = [SimpleNamespace(cause="multi_step", evidence=[], next_check="x")]
    assert "statistics alone" in prose.diagnosis_sentence(found, short=True)
    with_acc = prose.diagnosis_sentence(found, short=True, standalone=True)
    assert "statistics alone" not in with_acc and "acc@k" in with_acc


def test_other_prompts_sentence_names_only_rows_the_sweep_has():
    text = prose.other_prompts_sentence(["no-ttt", "domain-shift"])
    assert "`domain-shift`" in text and "long-context" not in text
    assert prose.other_prompts_sentence(["no-ttt"]) == "Every row decodes the notebooks' shared prompts."


def test_repetition_sentence_says_when_the_text_loops():
    import pandas as pd

    loop = pd.DataFrame({"request": [0] * 12, "kind": ["draft"] * 12, "text": list("abcabcabcabc")})
    assert "degenerate" in prose.repetition_sentence(loop) and "n = 9 spans over 1 requests" in prose.repetition_sentence(loop)
    prose_text = pd.DataFrame({"request": [0] * 8, "kind": ["draft"] * 8, "text": list("abcdefgh")})
    assert "degenerate" not in prose.repetition_sentence(prose_text)
    assert prose.repetition_sentence(prose_text).startswith("*0% of the generated")

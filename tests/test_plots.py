"""Plot functions return figures built from the data they are given."""

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from eagle3lab import predict, stats
from eagle3lab import plots as P
from eagle3lab.errors import EagleLabError


def steps(rate=0.7, n=1000, k=5, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"accepted": np.minimum(rng.geometric(1 - rate, n) - 1, k), "k": k})


def test_accept_vs_depth_draws_model_curves_and_observed_points():
    observed = pd.DataFrame({"depth": [2, 4], "accept_length": [2.1, 2.6], "lo": [2.0, 2.5],
                             "hi": [2.2, 2.7]})
    fig = P.accept_vs_depth(observed, a=[0.5, 0.8], max_depth=6)
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    curve = ax.lines[0].get_ydata()
    np.testing.assert_allclose(curve, predict.expected_accept_length(0.5, np.arange(7)))
    labels = ax.get_legend_handles_labels()[1]
    assert "observed" in labels and "i.i.d. a = 0.80" in labels


def test_per_position_bars_heights_are_the_rates():
    table = stats.per_position(steps(), conditional=True, n_boot=200)
    fig = P.per_position_bars(table, standalone=[0.8] * 5)
    heights = [p.get_height() for p in fig.axes[0].patches]
    np.testing.assert_allclose(heights, table["rate"])
    grouped = pd.concat([table.assign(label="healthy"), table.assign(label="no-ttt")])
    assert len(P.per_position_bars(grouped).axes[0].patches) == 10


def test_gap_plot_and_throughput_and_heatmap():
    gap = predict.gap_table([0.8] * 5, stats.per_position(steps(0.5), conditional=True, n_boot=100))
    fig = P.gap_plot(gap)
    # served (0.5 per position) below the acc@k prediction (0.8): the title says below, not "lost -x"
    assert "below the acc@k prediction" in fig.axes[1].get_title()
    above = P.gap_plot(predict.gap_table([0.3] * 5, stats.per_position(steps(0.5), conditional=True, n_boot=100)))
    assert "above the acc@k prediction" in above.axes[1].get_title()
    table = predict.throughput_vs_depth(predict.CostModel(0.002, 0.02), a=0.8, max_depth=6)
    fig = P.throughput_vs_depth(table)
    assert any("no speculation" == t for t in fig.axes[0].get_legend_handles_labels()[1])
    sweep = pd.DataFrame({"num_steps": [1, 3, 1, 3], "topk": [1, 1, 4, 4], "speedup": [1.2, 1.5, 0.9, 1.1]})
    fig = P.sweep_heatmap(sweep, value="speedup")
    texts = sorted(t.get_text() for t in fig.axes[0].texts)
    assert texts == ["0.90", "1.10", "1.20", "1.50"]


def test_log_timeline_from_read_log_rows():
    log = pd.DataFrame({"time": pd.date_range("2026-01-01", periods=5, freq="10s"),
                        "accept_len": [1.7, 1.8, None, 1.9, 1.75],
                        "gen_throughput": [50, 52, None, 55, 51]})
    fig = P.log_timeline(log)
    assert len(fig.axes) == 4  # per series: batches in log order, and a histogram
    assert len(fig.axes[0].lines[0].get_ydata()) == 4
    assert list(fig.axes[0].lines[0].get_xdata()) == [1, 2, 3, 4]  # batch index, not clock time
    with pytest.raises(EagleLabError):
        P.log_timeline(pd.DataFrame({"message": ["x"]}))
    # vLLM: throughput and acceptance on different lines; old SGLang: no accept length at all
    split = pd.DataFrame({"line": [1, 2, 3, 4], "accept_len": [None, 2.1, None, 2.4],
                          "gen_throughput": [260.0, None, 820.0, None]})
    fig = P.log_timeline(split)
    assert [len(ax.lines[0].get_ydata()) for ax in fig.axes[::2]] == [2, 2]
    assert len(P.log_timeline(split.drop(columns="accept_len")).axes) == 2


def test_log_timeline_on_real_sample_logs():
    from pathlib import Path

    from eagle3lab.sources.logfile import read_log

    logs = Path(__file__).resolve().parents[1] / "data" / "samples" / "logs"
    fig = P.log_timeline(read_log(logs / "sglang_issue11948_eagle3_accept_rate_trailing_comma.log"))
    assert len(fig.axes[0].lines[0].get_ydata()) == 5


def test_token_html_marks_each_kind():
    tokens = P.tokens_from_steps([["The", " cat"], ["<x>\n"], ["sat", " on", " mat"]], [1, 0, 2],
                                 depth=2, prompt="Q:")
    assert list(tokens["kind"]) == ["prompt", "accepted", "replaced", "replaced", "accepted",
                                    "accepted", "bonus"]
    html = P.token_html(tokens)
    assert html.count("e3l-accepted") == 3 and html.count("e3l-bonus") == 1
    assert "&lt;x&gt;" in html and "<x>" not in html  # escaped
    assert "position 2" in html
    assert P.token_view(tokens).data == html
    with pytest.raises(EagleLabError):
        P.tokens_from_steps([["a"]], [1], depth=2)
    with pytest.raises(EagleLabError):
        P.token_html(pd.DataFrame({"text": ["a"], "kind": ["weird"]}))


def test_tokens_from_engine_generation():
    from types import SimpleNamespace as NS

    class Tok:
        def decode(self, ids):
            return "".join(chr(96 + i) for i in ids)

    gen = NS(prompt_ids=[1, 2], output_ids=[3, 4, 5, 6],
             kinds=["prefill", "draft", "replacement", "bonus"], depths=[0, 1, 0, 0])
    tokens = P.tokens_from_generation(gen, Tok())
    assert list(tokens["kind"]) == ["prompt", "target", "accepted", "replaced", "bonus"]
    assert list(tokens["text"]) == ["ab", "c", "d", "e", "f"]
    html = P.token_html(tokens)
    assert html.count("e3l-replaced") == 1 and html.count("e3l-target") == 1


def test_plots_read_bench_sweep_columns():
    sweep = pd.DataFrame({"num_steps": [1, 3, 5], "accept_length": [1.8, 2.5, 2.9],
                          "tokens_per_s": [80.0, 95.0, 90.0]})
    fig = P.accept_vs_depth(sweep, a=0.7, max_depth=6)
    assert "observed" in fig.axes[0].get_legend_handles_labels()[1]
    fig = P.throughput_vs_depth(sweep, baseline_tokens_per_s=60.0)
    np.testing.assert_allclose(fig.axes[0].lines[0].get_ydata(), [80.0, 95.0, 90.0])


def test_token_html_reads_engine_bench_tokens_frame():
    frame = pd.DataFrame({"request": 0, "index": range(5), "text": ["a", "b", "c", "\n", "d"],
                          "kind": ["prefill", "draft", "draft", "replacement", "bonus"],
                          "depth": [0, 1, 2, 0, 0]})
    html = P.token_html(frame)
    assert "position 2" in html and html.count("e3l-accepted") == 2 and "↵" in html


def test_speedup_vs_depth_draws_chains_trees_and_intervals():
    sweep = pd.DataFrame({"num_steps": [1, 3, 5, 3], "topk": [1, 1, 1, 2], "num_draft_tokens": [2, 4, 6, 6],
                          "speedup": [1.4, 1.9, 2.2, 1.9],
                          "speedup_ci95": [[1.3, 1.6], [1.8, 2.2], [1.5, 3.0], [1.8, 2.0]]})
    fig = P.speedup_vs_depth(sweep)
    labels = fig.axes[0].get_legend_handles_labels()[1]
    assert any(label.startswith("chains") for label in labels)
    assert "tree: 3 steps, topk 2, 6 draft tokens" in labels
    assert any(label.startswith("no speculation") for label in labels)
    assert "predicted" not in " ".join(labels)


def test_wiring_heatmap_labels_slots_and_boundaries():
    matrix = pd.DataFrame([[1.0, 0.2], [0.3, 0.9]], index=[0, 2], columns=[2, 12])
    fig = P.wiring_heatmap(matrix, [0, 2], [2, 12], "t")
    ax = fig.axes[0]
    # numbered from 0, like wiring.check's table (its "slot" column) and the draft config's ids
    assert [t.get_text() for t in ax.get_yticklabels()] == ["slot 0: b=0", "slot 1: b=2"]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["slot 0: b=2", "slot 1: b=12"]
    assert len(ax.patches) == 2  # the intended pairing, outlined


def test_speedup_vs_depth_ticks_every_depth_and_keeps_the_legend_below():
    sweep = pd.DataFrame({"num_steps": [1, 2, 3, 5, 7], "topk": [1] * 5, "num_draft_tokens": [2, 3, 4, 6, 8],
                          "speedup": [1.1, 1.3, 1.4, 1.2, 1.0]})
    fig = P.speedup_vs_depth(sweep)
    ax = fig.axes[0]
    assert list(ax.get_xticks()) == [1, 2, 3, 5, 7]
    anchor = ax.get_legend().get_bbox_to_anchor().transformed(ax.transAxes.inverted())
    assert anchor.y1 <= 0  # below the axes, not beside them


def test_gap_plot_draws_a_position_without_steps_as_missing():
    gap = pd.DataFrame({"position": [1, 2, 3], "standalone": [0.6, 0.3, 0.2], "served": [0.8, 0.0, 0.0],
                        "lost": [-0.2, 0.1, 0.0]})
    fig = P.gap_plot(gap, n=[10, 1, 0])
    left = fig.axes[0]
    served = next(line for line in left.get_lines() if line.get_label().startswith("served"))
    y = served.get_ydata()
    assert y[1] == 0.0 and y[2] != y[2]  # n = 1 is a rate (0); n = 0 is no data, not 0
    assert any("no data" in t.get_text() for t in left.texts)
    assert "conditional" not in left.get_ylabel() or "acc@i" in left.get_ylabel()


def test_fault_plot_draws_intervals_sized_by_n():
    table = pd.DataFrame({"accept_length": [2.0, 1.5], "speedup": [1.2, 0.9],
                          "per_position": [[0.8, 0.5], [0.6, 0.0]], "per_position_n": [[500, 400], [1, 0]]},
                         index=["healthy (no fault)", "embed-patch"])
    fig = P.fault_plot(table)
    right = fig.axes[1]
    sizes = [c.get_sizes()[0] for c in right.collections if hasattr(c, "get_sizes") and len(c.get_sizes())]
    assert max(sizes) > 3 * min(sizes)  # n = 500 drawn larger than n = 1
    assert any(type(c).__name__ == "LineCollection" for c in right.collections)  # error bars

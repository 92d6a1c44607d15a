"""Plot functions return figures built from the data they are given."""

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from eagle3lab.acceptance import predict
from eagle3lab.acceptance import stats
from eagle3lab.viz import plots as P
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


# --------------------------------------------------------------------------- issue 31: figures a reader can trust

import itertools  # noqa: E402

from eagle3lab.viz import style  # noqa: E402
from eagle3lab.spec import BASELINE  # noqa: E402

# Machado, Oliveira & Fernandes (2009), "A physiologically-based model for simulation of color
# vision deficiency", IEEE TVCG 15(6): severity-1.0 matrices on linear RGB.
CVD = {"protanopia": [[0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216],
                      [-0.003882, -0.048116, 1.051998]],
       "deuteranopia": [[0.367322, 0.860646, -0.227968], [0.280085, 0.672501, 0.047413],
                        [-0.011820, 0.042940, 0.968881]],
       "tritanopia": [[1.255528, -0.076749, -0.178779], [-0.078411, 0.930809, 0.147602],
                      [0.004733, 0.691367, 0.303900]]}


def _lab_under(color, deficiency):
    """CIELAB (D65) of a colour as seen with a deficiency."""
    from matplotlib.colors import to_rgb

    c = np.asarray(to_rgb(color))
    linear = np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
    seen = np.clip(np.asarray(CVD[deficiency]) @ linear, 0, 1)
    xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]]) @ seen
    t = xyz / np.array([0.95047, 1.0, 1.08883])
    f = np.where(t > (6 / 29) ** 3, np.cbrt(t), t / (3 * (6 / 29) ** 2) + 4 / 29)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def _closest_pair(colors):
    return min((float(np.linalg.norm(_lab_under(a, d) - _lab_under(b, d))), a, b, d)
               for a, b in itertools.combinations(colors, 2) for d in CVD)


def test_colours_stay_apart_for_colour_blind_readers():
    """Every pair of role colours at least 8 CIELAB units apart under protanopia, deuteranopia and
    tritanopia (matplotlib's tab10 roles, used before: 4.6, orange against green), and every pair
    of line colours at least 15."""
    worst = _closest_pair(style.COLORS.values())
    assert worst[0] >= 8, worst
    assert _closest_pair(["#1f77b4", "#ff7f0e", "#7f7f7f", "#2ca02c", "#d62728", "#9467bd"])[0] < 8
    assert _closest_pair(style.PALETTE)[0] >= 15, _closest_pair(style.PALETTE)


def _measured_table():
    """A notebook table of three runs, each speed-up against its own no-speculation run (the
    baselines differ, as they do under load), one with a 2-prompt interval that runs to 600."""
    return pd.DataFrame({
        "run": [BASELINE, "steps 1", "steps 15", "steps 5"], "draft tokens run": [None, 2, 16, 6],
        "tokens_per_s": [169.9, 75.3, 63.9, 101.0],
        "tokens_per_s_ci95": [[120.0, 230.0], [47.0, 120.0], [58.0, 70.0], [80.0, 600.0]],
        "accept_length": [np.nan, 1.30, 1.31, 1.31], "accept_length_ci95": [None, [1.2, 1.4], [1.2, 1.4], [1.2, 1.4]],
        "speedup": [1.0, 0.97, 0.53, 0.77], "speedup_ci95": [None, [0.73, 1.28], [0.45, 0.62], [0.65, 0.92]]}
    ).set_index("run")


def test_each_speedup_is_drawn_beside_the_baseline_it_divides():
    table = _measured_table()
    fig = P.speed_plot(table, title="flag sets")
    left = fig.axes[0]
    widths = [p.get_width() for p in left.patches]
    runs = table.drop(index=BASELINE)
    np.testing.assert_allclose(widths[:3], runs["tokens_per_s"])
    np.testing.assert_allclose(widths[3:], runs["tokens_per_s"] / runs["speedup"])  # each run's own baseline
    assert not [line for line in left.lines if line.get_linestyle() == "--"]  # no shared baseline line
    assert "total tokens/s" in left.get_xlabel()
    assert [t.get_text() for t in left.texts] == ["0.97× [0.73, 1.28]", "0.53× [0.45, 0.62]", "0.77× [0.65, 0.92]"]
    assert left.get_xlim()[1] < 600  # the 600 tok/s interval end is cut at the axis, marked with an arrow
    assert any(c.get_offsets().shape[0] == 1 for c in left.collections if type(c).__name__ == "PathCollection")
    with_own = runs.assign(baseline_tokens_per_s=[77.7, 120.9, 130.5],
                           baseline_tokens_per_s_ci95=[[70, 85], [110, 130], [120, 140]])
    widths = [p.get_width() for p in P.speed_plot(with_own).axes[0].patches]
    assert widths[3:] == [77.7, 120.9, 130.5]


def test_speedups_say_which_tokens_per_second_they_divide():
    sweep = pd.DataFrame({"num_steps": [1, 3], "topk": [1, 1], "num_draft_tokens": [2, 4], "speedup": [1.4, 1.9]})
    assert "total tokens/s" in P.speedup_vs_depth(sweep).axes[0].get_ylabel()
    table = pd.DataFrame({"accept_length": [2.0], "speedup": [1.2], "per_position": [[0.8]]}, index=["healthy"])
    assert "total tokens/s" in P.fault_plot(table).axes[0].get_xlabel()
    predicted = pd.DataFrame({"num_steps": [1, 3], "topk": [1, 1], "predicted": [1.3, 2.0]})
    labels = P.speedup_vs_depth(sweep, predicted=predicted).axes[0].get_legend_handles_labels()[1]
    assert any(label.startswith("predicted by the cost model") for label in labels)


def _every_figure():
    gap = predict.gap_table([0.8] * 5, stats.per_position(steps(0.5), conditional=True, n_boot=100))
    sweep = pd.DataFrame({"num_steps": [1, 2, 3, 5, 7, 3, 5], "topk": [1, 1, 1, 1, 1, 2, 4],
                          "num_draft_tokens": [2, 3, 4, 6, 8, 6, 12], "speedup": [1.6, 1.7, 2.0, 1.9, 2.9, 2.1, 2.2],
                          "speedup_ci95": [[1.1, 2.4], [1.3, 2.1], [1.3, 2.9], [1.3, 2.8], [2.2, 3.8], [1.5, 2.8],
                                           [1.7, 2.8]]})
    hypotheses = pd.DataFrame({
        "accept_length": [4.2, 1.9, 1.3, 6.0, 1.0], "accept_length_ci95": [[3.1, 5.9], [1.8, 2.1], [1.2, 1.6],
                                                                          [6.0, 6.0], None],
        "speedup": [2.33, 0.95, 0.77, 1.79, 0.38],
        "per_position": [[0.85, 0.86, 0.79], [0.82, 0.1, 0.03], [0.3, 0.03, 0.0], [1.0, 1.0, 1.0], [0.0, 0.0, 0.0]],
        "per_position_n": [[600, 500, 430], [300, 240, 24], [500, 150, 4], [40, 40, 40], [700, 0, 0]]},
        index=["healthy (no fault)", "embed-patch", "wiring-seed", "domain-shift", "no-d2t"])
    prediction = pd.DataFrame({"configuration": ["a 1/1/2", "a 5/1/6", "b 5/1/6"], "predicted": [1.2, 1.9, 0.9],
                               "measured": [1.5, 2.0, 0.95], "interval": [[1.2, 1.9], [1.3, 2.8], [0.7, 1.2]],
                               "inside": [True, True, True]})
    observed = pd.DataFrame({"depth": [5], "accept_length": [1.9], "lo": [1.8], "hi": [2.1]})
    accuracy = pd.DataFrame({"depth": [1, 2, 1, 2], "accuracy": [0.8, 0.6, 0.5, 0.3],
                             "wiring": ["trained", "trained", "served", "served"]})
    log = pd.DataFrame({"accept_len": [1.7, 1.8, 1.9, 1.75, 1.8, 1.85], "gen_throughput": [50, 52, 55, 51, 53, 54]})
    per_pos = stats.per_position(steps(), conditional=True, n_boot=100)
    return {
        "speed_plot": P.speed_plot(_measured_table()), "speedup_vs_depth": P.speedup_vs_depth(sweep),
        "fault_plot": P.fault_plot(hypotheses), "prediction_plot": P.prediction_plot(prediction),
        "accept_vs_depth": P.accept_vs_depth(observed, rates=[0.8, 0.1, 0.03]),
        "per_position_bars": P.per_position_bars(per_pos, standalone=[0.8] * 5),
        "gap_plot": P.gap_plot(gap, n=[100, 50, 0, 0, 0]),
        "throughput_vs_depth": P.throughput_vs_depth(predict.throughput_vs_depth(predict.CostModel(0.002, 0.02),
                                                                                   a=0.8, max_depth=6)),
        "sweep_heatmap": P.sweep_heatmap(sweep, value="speedup"), "accuracy_plot": P.accuracy_plot(accuracy),
        "log_timeline": P.log_timeline(log),
        "wiring_heatmap": P.wiring_heatmap(pd.DataFrame([[1.0, 0.2], [0.3, 0.9]], index=[0, 2], columns=[2, 12]),
                                           [0, 2], [2, 12], "t"),
    }


def test_every_figure_says_what_it_shows_and_draws_no_label_over_a_marker_or_error_bar():
    for name, fig in _every_figure().items():
        alt = style.alt_of(fig)
        assert alt and len(alt.split()) >= 12, (name, alt)
        assert P.label_overlaps(fig) == [], name
    alt = style.alt_of(P.speed_plot(_measured_table(), title="flag sets"))
    assert "steps 15: 63.9 against 120.6 tok/s, 0.53×" in alt  # the values, not only the kind of figure


def test_the_overlap_check_finds_a_label_on_a_marker():
    fig, ax = P._figure()
    ax.errorbar([1, 2], [1.0, 2.0], yerr=[[0.2, 0.2], [0.2, 0.2]], fmt="o")
    ax.annotate("on the point", (2, 2.0))
    assert any("on the point" in hit for hit in P.label_overlaps(fig))


def test_alt_text_reaches_the_rendered_html():
    """A figure with alt text displays as <img alt=...> (text/html beside its PNG), which
    nbconvert's HTML export prefers: the rendered report carries the alt text."""
    import nbformat

    from eagle3lab.report import render as report

    fig = P.accept_vs_depth(a=[0.7], max_depth=4, title="curves")
    html = style.figure_html(fig)
    assert html.startswith('<img alt="curves: the i.i.d. chain model') and "data:image/png;base64," in html
    assert style.figure_html(P._close(P._figure()[0])) is None  # no alt text: the PNG alone
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("fig")
    cell.outputs = [nbformat.v4.new_output("display_data", data={"text/html": html, "image/png": "AAAA",
                                                                  "text/plain": "<Figure>"})]
    nb.cells = [cell]
    page = report.render_html(nb, title="t")
    assert 'alt="curves: the i.i.d. chain model' in page and 'src="data:image/png;base64,AAAA"' not in page


def test_the_token_view_is_legible():
    """Every kind of token: dark text on a light background, at least WCAG's 4.5:1; the draft
    position written, not only shaded; a step's end marked."""
    from eagle3lab.viz.tokenview import TOKEN_STYLE

    for kind, (background, text, _) in TOKEN_STYLE.items():
        assert style.contrast_ratio(text, background) >= 4.5, (kind, style.contrast_ratio(text, background))
    html = P.token_html(P.tokens_from_steps([["a", " b"], [" "]], [1, 0], depth=2))
    assert "<sub" in html and ">1</sub>" in html and "border-right:2px solid" in html
    assert ">·<" in html  # a token of one space is visible


def test_ipython_displays_a_figure_with_alt_text_as_an_img_beside_its_png():
    """In a kernel (a fresh IPython shell, in a subprocess: the shell is a process-wide singleton)."""
    import subprocess
    import sys

    code = ("from IPython.core.interactiveshell import InteractiveShell\n"
            "shell = InteractiveShell.instance()\n"
            "from IPython.core.pylabtools import select_figure_formats\n"
            "select_figure_formats(shell, {'png'})  # what %matplotlib inline registers\n"
            "from eagle3lab.viz import plots\n"
            "fig = plots.accept_vs_depth(a=[0.7], max_depth=3, title='curves')\n"
            "data, _ = shell.display_formatter.format(fig)\n"
            "print(sorted(data)); print(data['text/html'][:40])\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "'image/png'" in out.stdout and "'text/html'" in out.stdout
    assert '<img alt="curves: the i.i.d. chain model' in out.stdout

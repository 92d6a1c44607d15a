"""Load as a sweep dimension: concurrency values, rows with intervals, the crossover, and the
sweep against stand-in servers (tests/test_loadtest.py's SGLang-compatible one)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import sys
import textwrap

from eagle3lab import cli
from eagle3lab.serving import loadsweep
from eagle3lab.serving import loadtest
from eagle3lab.serving import server
from eagle3lab.acceptance import stats
from eagle3lab.serving.loadtest import LoadTestResult

# Speaks vLLM's /health, /metrics (spec-decode counters, K = 3 positions, only with speculation)
# and a streamed /v1/completions (chunked, the final chunk with usage and per-request acceptance).
# A request of n tokens: one prefill token, then rounds; with speculation every round accepts 3
# then 1 drafts in turn (4 then 2 tokens), so 13 tokens = 1 + 4 rounds, accept length 3.0,
# per-position rates 1, 0.5, 0.5. A round takes --delay seconds, times (1 + --load x (requests in
# flight - 1)) with speculation: verification that stops being free as the batch grows.
FAKE_VLLM = textwrap.dedent('''
    import argparse, json, threading, time
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int); p.add_argument("--no-spec", action="store_true")
    p.add_argument("--delay", type=float, default=0.01); p.add_argument("--load", type=float, default=0.0)
    a = p.parse_args()
    K = 3
    lock = threading.Lock()
    state = {"inflight": 0, "drafts": 0, "accepted": 0, "pos": [0] * K}

    def metrics():
        if a.no_spec:
            return "# TYPE vllm:num_requests_running gauge\\nvllm:num_requests_running 0.0\\n"
        lines = []
        for name, value in (("num_drafts", state["drafts"]), ("num_draft_tokens", K * state["drafts"]),
                            ("num_accepted_tokens", state["accepted"])):
            lines += [f"# TYPE vllm:spec_decode_{name}_total counter",
                      f'vllm:spec_decode_{name}_total{{engine="0"}} {float(value)}']
        lines.append("# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter")
        lines += [f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",position="{i}"}} {float(v)}'
                  for i, v in enumerate(state["pos"])]
        return "\\n".join(lines) + "\\n"

    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        def log_message(self, *args): pass
        def reply(self, code, text, ctype="application/json"):
            data = text.encode()
            self.send_response(code); self.send_header("content-type", ctype)
            self.send_header("content-length", str(len(data))); self.end_headers(); self.wfile.write(data)
        def chunk(self, obj):
            data = (obj if isinstance(obj, str) else "data: " + json.dumps(obj) + "\\n\\n").encode()
            self.wfile.write(b"%x\\r\\n%s\\r\\n" % (len(data), data)); self.wfile.flush()
        def do_GET(self):
            if self.path == "/health": return self.reply(200, "{}")
            if self.path == "/metrics":
                with lock: return self.reply(200, metrics(), "text/plain")
            self.reply(404, "{}")
        def round(self):
            with lock: b = state["inflight"]
            time.sleep(a.delay * (1 if a.no_spec else 1 + a.load * (b - 1)))
        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            n = body["max_tokens"]
            with lock: state["inflight"] += 1
            self.send_response(200); self.send_header("content-type", "text/event-stream")
            self.send_header("transfer-encoding", "chunked"); self.end_headers()
            self.round(); done, hist, turn = 1, [0] * (K + 1), 0
            self.chunk({"choices": [{"text": "x ", "token_ids": [5], "finish_reason": None}]})
            while done < n:
                self.round()
                acc = 0 if a.no_spec else min(3 if turn % 2 == 0 else 1, n - done - 1)
                turn += 1; done += acc + 1
                if not a.no_spec:
                    hist[acc] += 1
                    with lock:
                        state["drafts"] += 1; state["accepted"] += acc
                        for i in range(acc): state["pos"][i] += 1
                self.chunk({"choices": [{"text": "x " * (acc + 1), "token_ids": [5] * (acc + 1),
                                         "finish_reason": "length" if done >= n else None}]})
            with lock: state["inflight"] -= 1
            final = {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": n}}
            if not a.no_spec:
                final["metrics"] = {"speculative_decoding": {"num_spec_steps": sum(hist),
                    "num_accepted_draft_tokens": sum(i * c for i, c in enumerate(hist)),
                    "acceptance_histogram": hist}}
            self.chunk(final); self.chunk("data: [DONE]\\n\\n")
            self.wfile.write(b"0\\r\\n\\r\\n"); self.wfile.flush()

    ThreadingHTTPServer.daemon_threads = True
    ThreadingHTTPServer(("127.0.0.1", a.port), H).serve_forever()
''')


@pytest.fixture(scope="module")
def fake_script(tmp_path_factory):
    path = tmp_path_factory.mktemp("fake") / "fake_vllm.py"
    path.write_text(FAKE_VLLM)
    return path


def start_fake(script, tmp_path, *args):
    return server.launch(command=[sys.executable, str(script), "--port", "{port}", *args],
                         log_file=tmp_path / f"fake-{'-'.join(args)}.log", timeout=30)


# --------------------------------------------------------------------------- concurrency values

def test_concurrency_values_are_whole_numbers_at_least_one_sorted_and_distinct():
    assert loadsweep.concurrencies([4, "1", 2, 2.0, "8"]) == [1, 2, 4, 8]
    for bad, why in ((0, "whole number >= 1"), (-2, "whole number >= 1"), (1.5, "whole number >= 1"),
                     ("two", "'two'"), ([], "no concurrency")):
        with pytest.raises(loadtest.LoadTestError, match=why):
            loadsweep.concurrencies(bad)


@pytest.mark.parametrize("value", ["0", "-1", "2.5", "x"])
def test_a_bad_concurrency_is_a_clear_error_with_exit_2_before_anything_runs(value, capsys):
    code = cli.main(["sweep", "--url", "http://127.0.0.1:9", "--grid", f"concurrency=1,{value}", "--baseline"])
    err = capsys.readouterr().err
    assert code == 2 and "concurrency" in err and "whole number" in err and "Traceback" not in err


# --------------------------------------------------------------------------- a row

def _result(tokens, latency, ttft, wall, concurrency):
    frame = pd.DataFrame({"request": range(len(tokens)), "ok": True, "completion_tokens": tokens,
                          "latency_s": latency, "ttft_s": ttft,
                          "spec_verify_ct": float("nan"), "spec_accepted": float("nan"),
                          "accept_length": float("nan")})
    return LoadTestResult("http://x", frame, wall, concurrency, 10, 0.0)


def test_a_row_pins_throughput_latency_and_the_paired_speed_up():
    """Two prompts of 10 tokens each, in flight together: every figure follows exactly."""
    spec = _result([10, 10], [1.0, 1.0], [0.1, 0.1], wall=1.0, concurrency=2)
    base = _result([10, 10], [2.0, 2.0], [0.2, 0.2], wall=2.0, concurrency=2)
    row = loadsweep.load_row(2, spec, None, base)
    assert row["occupancy"] == 2.0 and row["completion_tokens"] == 20
    assert row["tokens_per_s"] == 20.0 and row["tokens_per_s_ci95"] == [20.0, 20.0]
    assert row["request_tokens_per_s"] == 10.0 and row["request_tokens_per_s_ci95"] == [10.0, 10.0]
    assert row["ttft_s"] == pytest.approx(0.1) and row["itl_s"] == pytest.approx(0.9 / 9)
    assert row["baseline_tokens_per_s"] == 10.0 and row["baseline_itl_s"] == pytest.approx(1.8 / 9)
    assert row["baseline_occupancy"] == 2.0
    assert row["speedup"] == 2.0 and row["speedup_ci95"] == [2.0, 2.0]
    assert row["request_speedup"] == 2.0 and row["paired_prompts"] == 2 and row["failed"] is False
    assert row["decode_speedup"] == 2.0 and row["decode_speedup_ci95"] == [2.0, 2.0]  # 1.8 s / 0.9 s per 9 tokens


def test_total_throughput_counts_the_window_not_the_requests():
    """A window that keeps fewer requests busy than asked (one long straggler) has a lower total
    than concurrency x per-request rate: total = tokens / wall."""
    run = _result([10, 10, 10], [1.0, 1.0, 2.0], [0.1, 0.1, 0.1], wall=3.0, concurrency=2)
    row = loadsweep.load_row(2, run)
    assert row["tokens_per_s"] == 10.0 and row["request_tokens_per_s"] == 7.5
    assert row["occupancy"] == pytest.approx(4 / 3)
    lo, hi = row["tokens_per_s_ci95"]
    assert lo <= 10.0 <= hi and "speedup" not in row


# --------------------------------------------------------------------------- the crossover

def _rows(*points):
    return [{"concurrency": c, "speedup": s, "speedup_ci95": ci} for c, s, ci in points]


def test_the_crossover_is_bracketed_by_the_last_point_before_it():
    cross = loadsweep.crossover(_rows((8, 0.8, [0.7, 0.9]), (1, 1.5, [1.3, 1.7]), (2, 1.2, [1.1, 1.3]),
                                      (4, 0.9, [0.85, 0.95])))
    assert cross["status"] == "reached" and cross["concurrency"] == 4 and cross["below"]["concurrency"] == 2
    assert cross["text"] == ("speculation stops paying between concurrency 2 (total tokens/s speed-up 1.20 [1.10, 1.30]) "
                             "and 4 (total tokens/s speed-up 0.90 [0.85, 0.95])")


def test_a_point_below_one_with_a_paying_point_above_is_no_crossover():
    cross = loadsweep.crossover(_rows((1, 1.5, [1.3, 1.7]), (2, 0.9, [0.8, 0.95]), (4, 1.3, [1.1, 1.5])))
    assert cross["status"] == "not reached" and cross["below"]["concurrency"] == 4
    assert cross["text"].startswith("not reached up to concurrency 4")


def test_losing_from_the_first_point_and_an_undecided_stretch_before_the_crossover():
    cross = loadsweep.crossover(_rows((1, 0.9, [0.8, 0.95]), (2, 0.7, [0.6, 0.8])))
    assert cross["status"] == "reached" and cross["concurrency"] == 1 and cross["below"] is None
    assert cross["text"].startswith("speculation does not pay even at concurrency 1")
    cross = loadsweep.crossover(_rows((1, 1.4, [1.2, 1.6]), (2, 1.0, [0.9, 1.1]), (4, 0.8, [0.7, 0.9])))
    assert cross["concurrency"] == 4 and cross["below"]["concurrency"] == 2


def test_straddling_intervals_at_the_top_are_undecided_not_a_crossover():
    cross = loadsweep.crossover(_rows((1, 1.4, [1.2, 1.6]), (2, 1.02, [0.95, 1.1]), (4, 0.97, [0.9, 1.04])))
    assert cross["status"] == "undecided" and cross["concurrency"] is None
    assert cross["at"]["concurrency"] == 2 and cross["below"]["concurrency"] == 1
    assert "from concurrency 2" in cross["text"] and "up to 4" in cross["text"]
    top = loadsweep.crossover(_rows((4, 1.3, [1.1, 1.5]), (8, 1.06, [0.98, 1.13])))
    assert top["text"] == ("undecided: at concurrency 8 (total tokens/s speed-up 1.06 [0.98, 1.13]) the speed-up's interval "
                           "straddles 1 (it pays at 4 (total tokens/s speed-up 1.30 [1.10, 1.50])); more prompts narrow it")
    one_prompt = loadsweep.crossover(_rows((1, 0.5, None)))  # no interval: nothing decided
    assert one_prompt["status"] == "undecided" and "no interval" in one_prompt["text"]
    assert loadsweep.crossover(_rows((1, float("nan"), None)))["status"] == "no baseline"


# --------------------------------------------------------------------------- against servers

PROMPTS = ["one two three", "a b", "c d e f", "g h"] * 2


def test_the_servers_take_turns_and_the_order_rotates_per_concurrency(monkeypatch):
    seen = []

    def window(srv, prompts, level, max_new_tokens, temperature):
        seen.append((level, srv))
        return _result([10] * 2, [1.0] * 2, [0.1] * 2, wall=1.0, concurrency=level), None, None

    monkeypatch.setattr(loadsweep, "_window", window)
    rows = loadsweep.measure_levels("spec", "base", PROMPTS, [1, 2, 4])
    assert seen == [(1, "spec"), (1, "base"), (2, "base"), (2, "spec"), (4, "spec"), (4, "base")]
    assert [r["speedup"] for r in rows] == [1.0, 1.0, 1.0]


def test_a_load_sweep_reads_acceptance_from_the_counters_and_finds_the_crossover(fake_script, tmp_path):
    """A speculative stand-in whose rounds slow down with every request in flight (5 rounds a
    request) against one without speculation (13 rounds): speed-up about 13 / (5 x concurrency),
    so it pays at 1 and 2 (2.6, 1.3) and not at 4 (0.65)."""
    out = tmp_path / "load.jsonl"
    with start_fake(fake_script, tmp_path, "--delay", "0.02", "--load", "1") as spec, \
            start_fake(fake_script, tmp_path, "--no-spec", "--delay", "0.02") as base:
        frame = loadsweep.sweep({"concurrency": [4, 1, 2]}, PROMPTS, urls=[spec.url, base.url], baseline=True,
                                max_new_tokens=13, out=out, progress=False)
        assert list(frame["concurrency"]) == [1, 2, 4]
        assert (frame["url"] == spec.url).all() and (frame["baseline_url"] == base.url).all()
        assert (frame["completed"] == 8).all() and (frame["completion_tokens"] == 104).all()
        assert (frame["server_num_steps"] == 3).all() and not frame["failed"].any()
        for row in frame.to_dict("records"):
            assert row["accept_length"] == 3.0 and row["accept_length_ci95"] == [3.0, 3.0]
            assert row["per_position"] == [1.0, 0.5, 0.5] and row["verify_steps"] == 32
            # every request alike: the jackknife has zero width, so the counts' exact interval is the interval
            exact = [bound for hits in (32, 16, 16) for bound in stats.exact_binomial_interval(hits, 32)]
            assert [b for pair in row["per_position_ci95"] for b in pair] == pytest.approx(exact, abs=1e-12)
            assert row["acceptance_warnings"] == [] and row["paired_prompts"] == 8
            assert row["speedup"] == pytest.approx(row["tokens_per_s"] / row["baseline_tokens_per_s"])
            for key in ("tokens_per_s", "request_tokens_per_s", "ttft_s", "itl_s", "speedup", "decode_speedup",
                        "baseline_tokens_per_s", "baseline_itl_s"):
                lo, hi = row[f"{key}_ci95"]
                assert lo <= row[key] <= hi, key
            assert 0 < row["ttft_s"] < 12 * row["itl_s"]  # the first of 5 rounds, streamed
            assert row["occupancy"] <= row["concurrency"] + 1e-9
        (config, cross), = loadsweep.crossovers(frame)
        assert config == {} and cross["status"] == "reached"
        assert cross["concurrency"] == 4 and cross["below"]["concurrency"] == 2
        recorded = out.read_text()
        assert [json.loads(line)["concurrency"] for line in recorded.splitlines()] == [1, 2, 4]
        again = loadsweep.sweep({"concurrency": [1, 2, 4]}, PROMPTS, urls=[spec.url, base.url], baseline=True,
                                max_new_tokens=13, out=out, progress=False)
        assert out.read_text() == recorded and list(again["concurrency"]) == [1, 2, 4]  # nothing re-measured


def test_a_config_no_server_runs_is_skipped_and_a_missing_baseline_is_an_error(fake_script, tmp_path):
    with start_fake(fake_script, tmp_path, "--delay", "0.001") as spec:
        frame = loadsweep.sweep({"concurrency": [1, 2], "num_steps": [3, 5]}, PROMPTS[:2], urls=[spec.url],
                                max_new_tokens=7, progress=False)
        by = frame.set_index(["asked_num_steps", "concurrency"])
        assert not by.loc[(3, 1), "failed"] and by.loc[(3, 2), "accept_length"] == 3.0  # 1 + 3 + 1 drafts / 2
        assert by.loc[(5, 1), "skipped"] and by.loc[(5, 2), "skipped"]
        assert "speedup" not in frame  # no baseline asked: no speed-up, no crossover
        with pytest.raises(loadtest.LoadTestError, match="without speculation"):
            loadsweep.sweep({"concurrency": [1]}, PROMPTS[:2], urls=[spec.url], baseline=True, progress=False)


def test_the_cli_prints_the_table_with_intervals_and_the_crossover(fake_script, tmp_path, capsys):
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("\n".join(PROMPTS[:4]) + "\n")
    with start_fake(fake_script, tmp_path, "--delay", "0.02", "--load", "1") as spec, \
            start_fake(fake_script, tmp_path, "--no-spec", "--delay", "0.02") as base:
        code = cli.main(["sweep", "--url", spec.url, "--url", base.url, "--grid", "concurrency=1,4", "--baseline",
                         "--prompts", str(prompts), "--max-new-tokens", "13", "--plot", str(tmp_path / "load.png")])
    out = capsys.readouterr().out
    assert code == 0, out
    lines = out.splitlines()
    assert "concurrency" in lines[0] and "speed-up" in lines[0] and "TTFT s" in lines[0]
    assert lines[1].split()[:3] == ["1", "3.00", "[3.00,"] or lines[1].split()[0] == "1"
    assert "1.00 0.50 0.50" in lines[1] and "1.00 0.50 0.50" in lines[2]  # per-position rates
    assert lines[2].split()[0] == "4" and "[" in lines[2]  # figures carry their intervals
    assert "4 prompts per window" in out and "busy" in lines[0]
    assert "at concurrency 4 a window holds fewer than 2 rounds of 4 prompts" in out
    assert "crossover (speculation): speculation stops paying between concurrency 1 (total tokens/s speed-up" in out
    assert "and 4 (total tokens/s speed-up 0." in out
    # the stand-in slows with requests in flight, not with tokens per forward: the cost model,
    # anchored at 1, cannot explain concurrency 4 and says so
    assert "decode speed-up, measured vs predicted by two cost models (speculation; k = 3):" in out
    assert "(anchor)" in out and "OFF" in out
    assert (tmp_path / "load.png").read_bytes()[:4] == b"\x89PNG"


def test_the_load_plot_draws_measured_predicted_and_total():
    from eagle3lab.viz import plots

    rows = _load_rows(**{"2": [0.7, 0.9]})
    rows = [{**r, "speedup": 1.0, "speedup_ci95": [0.9, 1.1]} for r in rows]
    fig = plots.load_speedup(loadsweep.load_cost_model(rows), rows)
    ax = fig.axes[0]
    labels = ax.get_legend_handles_labels()[1]
    assert set(labels) == {"decode speed-up, measured", "predicted: verify costs its tokens",
                           "predicted: verify costs its requests",
                           "total tokens/s speed-up, measured", "no speculation"}
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2", "4", "8"]


def _load_rows(**measured_ci):
    """Baseline forward f(n) = 1 + 0.5 n (seconds); k = 3; the draft costs r = 0.2 of a target
    forward; anchor at concurrency 1 with accept length 3 (step 3.9 s, 1.3 s per token)."""
    base = {1: 1.5, 2: 2.0, 4: 3.0, 8: 5.0}
    als = {1: 3.0, 2: 2.5, 4: 2.0, 8: 2.0}
    itl = {1: 1.3, 2: 2.0, 4: 1.0, 8: 4.0}
    return [{"concurrency": c, "asked_num_steps": 3, "baseline_itl_s": base[c], "itl_s": itl[c],
             "accept_length": als[c], "accept_length_ci95": [als[c] - 0.1, als[c] + 0.1],
             "decode_speedup": base[c] / itl[c], "decode_speedup_ci95": measured_ci.get(str(c))}
            for c in (1, 2, 4, 8)]


def test_the_load_cost_models_calibrate_at_the_anchor_and_predict_the_rest():
    model = loadsweep.load_cost_model(_load_rows(**{"2": [0.7, 0.9], "4": [2.5, 3.5]}))
    assert model["status"] == "ok" and model["anchor"] == 1
    assert model["curve"]["points"] == [(1.0, 1.5), (2.0, 2.0), (4.0, 3.0), (8.0, 5.0)]
    assert model["curve"]["slope_beyond"] == pytest.approx(0.5)  # least squares of the four (a line here)
    # tokens: 3.9 = f(4) + 3 r f(1) = 3 + 4.5 r; requests: 3.9 = f(1) (1 + 3 s) = 1.5 (1 + 3 s)
    assert model["draft_share"] == pytest.approx({"tokens": 0.2, "requests": (3.9 / 1.5 - 1) / 3})
    by = {r["concurrency"]: r for r in model["rows"]}
    assert by[1]["anchor"]
    assert by[1]["predicted_tokens"] == pytest.approx(by[1]["measured"])  # matched by construction
    assert by[1]["predicted_requests"] == pytest.approx(by[1]["measured"])
    assert by[2]["predicted_tokens"] == pytest.approx(2.5 * 2.0 / (5.0 + 3 * 0.2 * 2.0))  # f(8) + k r f(2)
    assert by[2]["predicted_tokens_range"] == pytest.approx([2.4 * 2.0 / 6.2, 2.6 * 2.0 / 6.2])
    assert by[2]["predicted_requests"] == pytest.approx(2.5 * 1.5 / 3.9)  # AL(c) x the anchor's speed-up / AL
    assert by[4]["predicted_tokens"] == pytest.approx(2.0 * 3.0 / (9.0 + 3 * 0.2 * 3.0))  # f(16) = 5 + 0.5 x 8
    assert by[2]["agrees_tokens"] is True and by[2]["agrees_requests"] is False  # 0.92-1.00 vs 0.7-0.9
    assert by[4]["agrees_tokens"] is False and by[8]["agrees_tokens"] is None
    assert not by[2]["extrapolated"] and by[4]["extrapolated"]  # 16 tokens in one forward; the baseline ran 8
    assert "at 2 measured decode speed-up 1.00 [0.70, 0.90], tokens 0.81, requests 0.96: tokens model within the interval" in model["text"]
    assert "at 4 measured decode speed-up 3.00 [2.50, 3.50]" in model["text"] and "neither model" in model["text"]
    assert "the tokens model extrapolates" in model["text"]


def test_the_load_cost_model_needs_two_baseline_concurrencies_and_an_anchor():
    rows = _load_rows()
    assert loadsweep.load_cost_model(rows[:1])["status"] == "no fit"
    no_al = [{**r, "accept_length": None} for r in rows]
    assert loadsweep.load_cost_model(no_al)["status"] == "no anchor"
    assert loadsweep.load_cost_model([{**r, "failed": True} for r in rows])["status"] == "no fit"


def test_without_per_request_acceptance_the_rates_get_a_wilson_interval_from_the_counters():
    """A vLLM started without --per-request-spec-decode-metrics: counts only, steps as independent."""
    from eagle3lab.acceptance.stats import wilson_interval
    from eagle3lab.engines.vllm import metrics as vllm_metrics

    delta = vllm_metrics.Counters(drafts=40, draft_tokens=120, accepted=60, per_position=[30, 20, 10], present=True)
    run = _result([10, 10], [1.0, 1.0], [0.1, 0.1], wall=1.0, concurrency=2)
    run.requests["spec_histogram"] = None
    obs = vllm_metrics.observation(delta, run)
    got = loadsweep.acceptance_figures(run, obs)
    assert got["per_position"] == [0.75, 0.5, 0.25] and got["accept_length"] == 2.5
    assert got["per_position_ci_method"].startswith("Wilson") and got["accept_length_ci95"] is None
    lo, hi = got["per_position_ci95"][1]
    assert (lo, hi) == pytest.approx((0.3520, 0.6480), abs=1e-4)  # Wilson, 20 of 40, 95 %
    lo, hi = wilson_interval(0, 40)
    assert lo == pytest.approx(0.0, abs=1e-12) and hi == pytest.approx(0.0876, abs=1e-4)
    assert wilson_interval(40, 40)[1] == pytest.approx(1.0)


def test_on_the_lab_backend_notebook_05_shows_stored_sweeps_with_their_origin(tmp_path, monkeypatch):
    from eagle3lab import experiments
    from eagle3lab.report import prose

    rows = [{**r, "point_key": f"k{r['concurrency']}", "speedup": 1.2, "speedup_ci95": [1.1, 1.3]}
            for r in _load_rows(**{"2": [0.7, 0.9]})]
    (tmp_path / "good.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    (tmp_path / "good.json").write_text(json.dumps({"draft": "healthy", "lab": "default", "date": "2026-12-02",
                                                    "machine": "2-core CPU",
                                                    "command": "eagle3lab sweep ...", "engine": "vLLM 0.32.0"}))
    (tmp_path / "orphan.jsonl").write_text(rows and json.dumps(rows[0]) + "\n")  # no manifest: skipped
    monkeypatch.setattr(experiments.load, "stored_load_sweeps",
                        lambda directory=None, _orig=experiments.stored_load_sweeps: _orig(tmp_path))
    result = experiments.under_load(backend="lab")
    assert result["measured"] is False and "one request at a time" in result["why"]
    assert [s["name"] for s in result["stored"]] == ["good"]  # the orphan has no manifest, so no lab
    assert experiments.stored_load_sweeps(tmp_path)[1]["skipped"]
    text = prose.under_load_markdown(result)
    assert "Nothing is measured under load on the lab backend" in text
    assert ("The lab's healthy draft** (vLLM 0.32.0, measured on 2026-12-02 on 2-core CPU by `eagle3lab sweep ...` "
            "(stored in data/load/good.jsonl; not re-measured in this run)") in text
    assert "- k = 3: not reached up to concurrency 8" in text and "cost models calibrated at concurrency 1" in text
    assert "orphan" not in text and "not a GPU measurement" in text
    other = prose.under_load_markdown(experiments.under_load(lab="ci", backend="lab"))
    assert "No load sweep of the ci lab is stored in data/load/" in other
    sglang = experiments.under_load(backend="sglang")  # nothing launched: vLLM is what this measures with
    assert sglang["measured"] is False and "eagle3lab sweep --url URL --url BASELINE_URL" in sglang["why"]
    assert "Nothing is measured under load on the sglang backend" in prose.under_load_markdown(sglang)


def test_a_flat_or_falling_baseline_is_not_extrapolated_downwards():
    """A CPU whose batched decode costs what one request's does (a falling last segment from
    noise) must not predict a verify forward cheaper than the last one measured."""
    curve = loadsweep.step_time_curve([(1, 0.050), (2, 0.048), (4, 0.052), (8, 0.047)])
    assert curve["slope_beyond"] == 0.0
    assert loadsweep._step(curve, 32) == pytest.approx(0.047) and loadsweep._step(curve, 3) == pytest.approx(0.050)


def test_the_stored_default_lab_sweeps_draw_one_figure_per_draft_and_depth():
    """What notebook 05 shows on the default lab's report: the committed vLLM sweeps in data/load/,
    each with a manifest, drawn per (draft, k), the crossover decided from their intervals."""
    from eagle3lab import experiments
    from eagle3lab.report import prose

    result = experiments.under_load("default", backend="lab")
    names = sorted(s["name"] for s in result["stored"])
    assert names == ["default-vllm-healthy", "default-vllm-seed-fixed"]
    for stored in result["stored"]:
        meta = stored["provenance"]
        assert meta["lab"] == "default" and meta["command"].startswith("eagle3lab sweep --backend vllm --lab default")
        assert sorted(stored["frame"]["concurrency"].unique()) == [1, 2, 4, 8]
    figures = experiments.load_figures(result)
    assert len(figures) == 4  # two drafts x k = 3, 6
    assert [f.axes[0].get_title() for f in figures][0] == "The lab's healthy draft, k = 3, on vLLM (stored)"
    text = prose.under_load_markdown(result)
    assert text.count("(stored in data/load/") == 2 and "not re-measured in this run" in text
    if result["vllm_available"]:  # the time it takes, from the manifests (728 s + 721 s), not a guess
        assert "measures this section in this run (the stored sweeps below took 24 min where they were measured)" in text
    else:
        assert "`bash scripts/setup_vllm.sh` installs vLLM's CPU build" in text

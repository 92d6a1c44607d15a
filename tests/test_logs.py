"""eagle3lab.sources.logfile.read_log and `eagle3lab logs`: real samples, every documented variation,
bad input, and the CLI. Values asserted for samples are the numbers printed in those files."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from eagle3lab.cli import main as cli_main
from eagle3lab.sources.logfile import COLUMNS, LogReadError, read_log

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "data" / "samples" / "logs"

DECODE = ("Decode batch, #running-req: 5, #token: 1000, token usage: 0.10, accept len: 2.50, "
          "accept rate: 0.38, cuda graph: True, gen throughput (token/s): 321.50, #queue-req: 2, ")


def sample(name: str) -> pd.DataFrame:
    return read_log(SAMPLES / name)


def one(line: str) -> pd.Series:
    """The single record of a one-line log."""
    df = read_log([line])
    assert len(df) == 1, df
    return df.iloc[0]


def floats(series) -> list[float]:
    return [round(float(v), 6) for v in series]


# --------------------------------------------------------------------------- sample files


@pytest.mark.parametrize("path", sorted(SAMPLES.iterdir()), ids=lambda p: p.name)
def test_every_sample_parses_cleanly(path):
    df = read_log(path)
    assert list(df.columns) == COLUMNS
    assert len(df) >= 1
    assert df.attrs["malformed"] == []
    assert df.attrs["skipped"] + len(df) <= df.attrs["lines"]
    assert df["line"].is_monotonic_increasing
    assert df["engine"].isin(["sglang", "vllm", "llamacpp", "trtllm"]).all()
    # The raw column is the line itself.
    text = path.read_text().split("\n")
    assert all(text[n - 1] == raw for n, raw in zip(df["line"], df["raw"]))


def test_llamacpp_sample():
    df = sample("llamacpp_pr24536_spec_metrics.log")
    assert len(df) == 1  # the "statistics draft-eagle3" line repeats it and is not counted twice
    r = df.iloc[0]
    assert (r.line, r.engine, r.kind) == (6, "llamacpp", "spec")
    assert r.accept_len == 2.92 and r.draft_accept_rate == 0.64479
    assert (r.accepted, r.drafted) == (167, 259)
    assert r.per_position == (0.805, 0.632, 0.483)
    assert df.attrs["skipped"] == 8


def test_sglang_eagle3_trailing_comma_sample():
    df = sample("sglang_issue11948_eagle3_accept_rate_trailing_comma.log")
    assert df["kind"].tolist() == ["prefill"] + ["decode"] * 5
    dec = df[df.kind == "decode"]
    assert floats(dec.accept_len) == [2.17, 1.95, 1.80, 2.05, 1.80]
    assert floats(dec.accept_rate_raw) == [0.54, 0.49, 0.45, 0.51, 0.45]
    assert floats(dec.gen_throughput) == [0.39, 178.86, 165.41, 188.68, 165.59]
    assert dec.num_tokens.tolist() == [108, 186, 258, 340, 412]
    assert dec.graph.tolist() == [True] * 5
    assert dec.draft_accept_rate.isna().all()  # SGLang's rate changed meaning: kept raw only
    pre = df.iloc[0]
    assert (pre.new_token, pre.cached_token, pre.running_req, pre.tp) == (28, 0, 0, 0)
    assert pre.time == pd.Timestamp("2025-10-22 10:27:56")


def test_sglang_2024_time_only_prefix_sample():
    df = sample("sglang_issue1270_time_only_prefix_2024.log")
    assert len(df) == 10 and (df.kind == "decode").all()
    assert df.num_tokens.tolist()[:3] == [4078, 4158, 4238]
    assert df.running_req.tolist() == [2, 2, 2, 1, 1, 1, 1, 1, 1, 1]
    assert floats(df.gen_throughput)[:2] == [447.31, 405.38]
    assert df.accept_len.isna().all() and df.graph.isna().all()
    assert df.time.iloc[0] == pd.Timestamp("1900-01-01 04:40:55")  # no date printed
    assert df.time.iloc[-1] == pd.Timestamp("1900-01-01 04:40:57")


def test_sglang_largest_len_sample():
    df = sample("sglang_issue4417_nextn_mtp_largest_len.log")
    assert df.line.tolist() == [3, 4]  # line 2 is an HTTP access line
    pre, dec = df.iloc[0], df.iloc[1]
    assert (pre.kind, pre.new_token, pre.cached_token) == ("prefill", 1, 11)
    assert (dec.kind, dec.accept_len, dec.gen_throughput, dec.num_tokens) == ("decode", 1.80, 0.59, 66)
    assert math.isnan(dec.accept_rate_raw)
    assert df.attrs["skipped"] == 2


def test_sglang_npu_tp_ep_sample():
    df = sample("sglang_kernel_npu_pr608_tp_ep_npu_graph.log")
    assert df.line.tolist() == [2, 3, 5, 7]
    assert (df.tp == 0).all() and (df.ep == 0).all() and df.dp.isna().all()
    assert df.graph.tolist() == [False, True, True, True]  # "npu graph"
    assert df.input_throughput.iloc[0] == 2793.64
    dec = df[df.kind == "decode"]
    assert floats(dec.accept_len) == [3.05, 2.63, 2.83]
    assert floats(dec.accept_rate_raw) == [0.68, 0.54, 0.61]
    assert dec.queue_req.tolist() == [2, 3, 4]
    assert df.attrs["skipped"] == 7


def test_sglang_no_prefix_tag_sample():
    df = sample("sglang_pr13023_no_prefix_trailing_comma.log")
    assert len(df) == 8 and df.tp.isna().all()
    assert df.graph.tolist() == [False, False] + [True] * 6
    assert df.running_req.tolist() == [46, 36, 28, 22, 20, 15, 12, 11]
    assert floats(df.gen_throughput)[-1] == 475.19
    assert df.time.iloc[0] == pd.Timestamp("2025-11-11 04:06:27")


def test_sglang_pd_decode_sample():
    df = sample("sglang_pr30393_pd_decode_prealloc_transfer_accept_rate.log")
    assert df.line.tolist() == [2, 3, 4, 6]
    assert floats(df.accept_len) == [1.67, 1.68, 1.73, 1.72]
    assert floats(df.accept_rate_raw) == [0.13, 0.14, 0.14, 0.14]
    assert df.num_tokens.tolist() == [266624, 292928, 331712, 331904]


def test_sglang_dp_attention_sample():
    df = sample("sglang_pr6081_mtp_dp_attention.log")
    assert df.dp.tolist() == [0, 6, 5, 7, 2] and df.tp.tolist() == [0, 6, 5, 7, 2]
    assert floats(df.accept_len) == [2.90, 2.86, 2.94, 2.65, 2.58]
    assert df.num_tokens.iloc[0] == 37217


def test_sglang_warning_sample():
    df = sample("sglang_warning_num_draft_tokens_adjusted_SOURCE_STRING.txt")
    assert (df.kind == "warning").all() and (df.engine == "sglang").all()
    messages = df.message.tolist()
    assert messages[0] == ("speculative_num_draft_tokens is adjusted to speculative_num_steps + 1"
                           " when speculative_eagle_topk == 1")
    assert messages[1].endswith("for DVR chain mode.")
    assert messages[2].startswith("Overlap scheduler is disabled")
    assert df.time.iloc[2] == pd.Timestamp("2026-02-05 02:44:20")
    assert len(df) == 3  # INFO lines and the un-levelled backend notes are not warnings


def test_vllm_2026_avg_rate_last_sample():
    r = sample("vllm_aeon7_issue6_dflash_avg_draft_acceptance_rate_last.log").iloc[0]
    assert (r.engine, r.kind, r.accept_len) == ("vllm", "spec", 2.37)
    assert r.draft_accept_rate == pytest.approx(0.091)
    assert (r.accepted, r.drafted) == (89, 975)
    assert len(r.per_position) == 15 and r.per_position[:3] == (0.600, 0.385, 0.215)


def test_vllm_v1_mid_2025_sample():
    df = sample("vllm_issue19254_v0.9_specdecoding_mean_len_per_pos.log")
    spec, stats = df[df.kind == "spec"], df[df.kind == "stats"]
    assert floats(spec.accept_len) == [2.16, 2.46]
    assert floats(spec.draft_accept_rate) == [0.388, 0.487]
    assert spec.per_position.tolist() == [(0.543, 0.357, 0.264), (0.615, 0.464, 0.383)]
    assert spec.accepted.tolist() == [150, 725] and spec.drafted.tolist() == [387, 1488]
    assert floats(stats.gen_throughput) == [267.6, 826.0, 3399.1]
    assert floats(stats.input_throughput) == [11244.6, 11528.5, 7438.5]
    assert stats.running_req.tolist() == [337, 629, 610]
    assert stats.queue_req.tolist() == [633, 226, 0]
    assert (stats.dp == 0).all()  # "Engine 000:"
    assert floats(stats.token_usage) == [0.095, 0.163, 0.176]
    assert df.time.iloc[0] == pd.Timestamp("1900-06-06 14:20:34")  # vLLM prints no year


def test_vllm_v0_sample():
    r = sample("vllm_issue9539_v0_speculative_metrics_system_efficiency.log").iloc[0]
    assert (r.engine, r.kind, r.draft_accept_rate) == ("vllm", "spec", 0.642)
    assert (r.accepted, r.drafted, r.num_spec_tokens, r.emitted) == (8547, 13311, 3, 10616)
    # emitted per verify step (drafted / k) = system efficiency 0.598 x (k + 1).
    assert r.accept_len == pytest.approx(10616 * 3 / 13311)
    assert r.accept_len == pytest.approx(0.598 * 4, abs=0.002)


# --------------------------------------------------------------------------- SGLang variations


@pytest.mark.parametrize("prefix, dp, tp, ep, time", [
    ("", None, None, None, None),
    ("[12:00:01 TP0] ", None, 0, None, "1900-01-01 12:00:01"),
    ("[2025-10-20 03:02:22] ", None, None, None, "2025-10-20 03:02:22"),
    ("[2025-10-20 03:02:22 TP3] ", None, 3, None, "2025-10-20 03:02:22"),
    ("[2025-10-20 03:02:22 DP13 TP13] ", 13, 13, None, "2025-10-20 03:02:22"),
    ("[2025-10-20 03:02:22 TP0 EP0] ", None, 0, 0, "2025-10-20 03:02:22"),
    ("[DP0 TP1] ", 0, 1, None, None),
    ("2025-10-20 03:02:22 INFO 31223 [DP3 TP3 EP3 scheduler_metrics_mixin.py:222] ", 3, 3, 3,
     "2025-10-20 03:02:22"),
    ("sglang-1  | [2025-10-20 03:02:22 TP2] ", None, 2, None, "2025-10-20 03:02:22"),
    ("\x1b[36msglang-1  |\x1b[0m [2025-10-20 03:02:22 TP0] \x1b[32m", None, 0, None,
     "2025-10-20 03:02:22"),
    ("(SGLangEngine pid=42, ip=10.0.0.1) [2025-10-20 03:02:22 DP1 TP1] ", 1, 1, None,
     "2025-10-20 03:02:22"),
])
def test_sglang_prefixes(prefix, dp, tp, ep, time):
    r = one(prefix + DECODE + ("\x1b[0m" if "\x1b" in prefix else ""))
    assert (r.engine, r.kind, r.accept_len, r.accept_rate_raw) == ("sglang", "decode", 2.5, 0.38)
    assert (r.running_req, r.num_tokens, r.queue_req, r.gen_throughput) == (5, 1000, 2, 321.5)
    for value, want in ((r.dp, dp), (r.tp, tp), (r.ep, ep)):
        assert (pd.isna(value) if want is None else value == want)
    assert (pd.isna(r.time) if time is None else r.time == pd.Timestamp(time))


@pytest.mark.parametrize("wrapped, time", [
    ('{"textPayload": "[2025-10-20 03:02:22 TP2] %s", "timestamp": "2025-10-20T03:02:22.1Z"}'
     % DECODE, "2025-10-20 03:02:22"),
    ('{"log": "%s\\n", "stream": "stderr", "time": "2025-10-20T03:02:23.5Z"}' % DECODE,
     "2025-10-20 03:02:23.5"),
    ('{"jsonPayload": {"message": "%s"}, "timestamp": "2025-10-20T03:02:24Z"}' % DECODE,
     "2025-10-20 03:02:24"),
])
def test_cloud_logging_json_wrappers(wrapped, time):
    r = one(wrapped)
    assert (r.kind, r.accept_len, r.gen_throughput) == ("decode", 2.5, 321.5)
    assert r.time == pd.Timestamp(time)


def test_decode_batch_period_comma_and_iteration_tags():
    body = DECODE.split(", ", 1)[1]
    df = read_log([f"Decode batch. {body}", f"Decode batch, {body}", f"Decode batch [4711], {body}",
                   "Decode batch [first graph replay], #running-req: 3, #token: 100, "
                   "token usage: 0.01, cuda graph: True, #queue-req: 0"])
    assert len(df) == 4 and df.attrs["malformed"] == []
    assert floats(df.accept_len[:3]) == [2.5, 2.5, 2.5]
    assert df.running_req.tolist() == [5, 5, 5, 3]
    assert math.isnan(df.gen_throughput.iloc[3])  # first graph replay: no throughput fields


@pytest.mark.parametrize("ending", [", ", ",", "", "  "])
def test_trailing_separators(ending):
    r = one(f"[2025-10-20 03:02:22 TP0] {DECODE.rstrip(', ')}{ending}")
    assert r.queue_req == 2 and r.gen_throughput == 321.5


def test_reordered_and_dropped_fields():
    df = read_log(["Decode batch, #queue-req: 2, gen throughput (token/s): 99.00, accept len: 3.10,"
                   " #running-req: 4",
                   "Decode batch, accept len: 1.50"])
    assert df.attrs["malformed"] == []
    assert (df.queue_req.iloc[0], df.gen_throughput.iloc[0], df.running_req.iloc[0]) == (2, 99.0, 4)
    assert floats(df.accept_len) == [3.1, 1.5]


def test_old_and_fork_fields_are_ignored():
    df = read_log([
        "[2025-03-14 08:30:05 TP0] Decode batch. #running-req: 1, #token: 66, token usage: 0.00, "
        "accept len: 1.80, gen throughput (token/s): 0.59, largest-len: 0, #queue-req: 0,",
        "[2024-05-01 10:00:00 TP0] Prefill batch. #new-seq: 1, #new-token: 28, #cached-token: 0, "
        "cache hit rate: 45.00%, token usage: 0.00, #running-req: 0, #queue-req: 0",
        "[2025-10-20 03:02:22 TP0] Decode batch, #running-req: 5, #cache_miss: 3, #token: 1000, "
        "token usage: 0.10, cuda graph: True, gen throughput (token/s): 321.50, #queue-req: 2",
        "[2025-10-20 03:02:22 TP0] Decode batch, #running-req: 5, #future-field: 7, "
        "brand new thing: yes, gen throughput (token/s): 1.50, #queue-req: 2",
    ])
    assert df.attrs["malformed"] == []
    assert df.kind.tolist() == ["decode", "prefill", "decode", "decode"]
    assert (df.accept_len.iloc[0], df.new_token.iloc[1], df.num_tokens.iloc[2]) == (1.8, 28, 1000)
    assert df.gen_throughput.iloc[3] == 1.5


def test_pool_usage_variants_and_graph_backends():
    df = read_log([
        "Decode batch, #running-req: 1, #full token: 100, full token usage: 0.10, #swa token: 50, "
        "swa token usage: 0.05, cuda graph: True, gen throughput (token/s): 10.00, #queue-req: 0",
        "Decode batch, #running-req: 1, #full token: 200, full token usage: 0.20, mamba num: 3, "
        "mamba usage: 0.05, cpu graph: False, gen throughput (token/s): 10.00, #queue-req: 0, "
        "est. decode TFLOPS/s (per GPU): 12.3, est. read BW (GB/s per GPU): 456.7",
        "Prefill batch, #new-seq: 8, #new-token: 54400, #cached-token: 482304, token usage: 0.66, "
        "#running-req: 16, #queue-req: 2, #pending-token: 0, #bootstrap-req: 0, #inflight-req: 1,"
        " musa graph: False, input throughput (token/s): 2793.64",
    ])
    assert df.attrs["malformed"] == []
    assert df.num_tokens.tolist()[:2] == [100, 200]
    assert floats(df.token_usage) == [0.10, 0.20, 0.66]  # full, not swa/mamba usage
    assert df.graph.tolist() == [True, False, False]
    assert df.input_throughput.iloc[2] == 2793.64


def test_extreme_values():
    df = read_log([
        "Decode batch, #running-req: 1, accept len: 8.00, accept rate: 1.00, cuda graph: True",
        "Decode batch, #running-req: 1, accept len: 1.00, accept rate: 0.00, cuda graph: True",
    ])
    assert floats(df.accept_len) == [8.0, 1.0] and floats(df.accept_rate_raw) == [1.0, 0.0]


def test_cut_and_glued_lines_are_kept_and_marked():
    df = read_log([
        "[2025-10-22 10:27:57 TP0] Decode batch. #running-req: 1, #token: 108, token usaccept rate:"
        " 0.54, cuda graph: True, gen throughput (token/s): 178.86, #queue-req: 0, ",
        "[2025-10-22 10:27:58 TP0] Decode batch, #running-req: 1, #token: 10, accept len: 2.00, "
        "cuda graph: True, gen throughput (tok",
        "[2025-10-22 10:27:59 TP0] Decode batch, #running-req: 7, accept len: 2.00, [2025-10-22 "
        "10:28:00 TP0] Decode batch, #running-req: 2",
        "[2025-10-22 10:28:01 TP0] Decode batch, #running-req: 3, accept len: 2.2.1",
        "[2025-10-22 10:28:02 TP0] Decode batch, #running-req: 3, accept len: 2.40",
    ])
    assert df.line.tolist() == [1, 2, 3, 4, 5]
    assert df.attrs["malformed"] == [1, 2, 3, 4]
    first = df.iloc[0]
    assert (first.num_tokens, first.accept_rate_raw, first.gen_throughput) == (108, 0.54, 178.86)
    assert math.isnan(first.token_usage)
    assert (df.accept_len.iloc[1], df.num_tokens.iloc[1]) == (2.0, 10)
    assert df.running_req.iloc[2] == 7  # the glued second record does not overwrite the first
    assert df.accept_len.iloc[4] == 2.4


def test_clipped_first_line_and_interleaved_noise():
    df = read_log([
        "025-06-23 10:27:56 TP0] Decode batch. #running-req: 1, #token: 108, token usage: 0.00, "
        "accept len: 2.17, accept rate: 0.54, cuda graph: True, gen throughput (token/s): 0.39, "
        "#queue-req: 0, ",
        '[2025-06-23 10:27:57] INFO:     127.0.0.1:43514 - "POST /generate HTTP/1.1" 200 OK',
        '[2025-06-23 10:27:57] INFO:     127.0.0.1:43514 - "POST /v1/batches HTTP/1.1" 200 OK',
        "/usr/lib/python3/dist-packages/torch/cuda/__init__.py:61: UserWarning: pynvml is deprecated",
        "$ python -m sglang.launch_server --model x --speculative-algorithm EAGLE3",
        "Accept length: 3.21",
        "Mean TPOT (ms):                          70.14",
        "[2025-06-23 10:27:58 TP0] Decode batch. #running-req: 1, #token: 148, token usage: 0.00, "
        "accept len: 1.95, accept rate: 0.49, cuda graph: True, gen throughput (token/s): 178.86, "
        "#queue-req: 0, ",
    ])
    assert df.line.tolist() == [1, 8]
    assert df.attrs["malformed"] == [1]  # its timestamp was clipped...
    assert df.accept_len.iloc[0] == 2.17  # ...but its fields are kept
    assert df.time.iloc[0] == pd.Timestamp("2025-06-23 10:27:56")  # date borrowed from neighbours
    assert df.attrs["skipped"] == 6


def test_sglang_warnings():
    df = read_log([
        "[2026-02-05 02:44:20] WARNING server_args.py:1260: speculative_num_draft_tokens is "
        "adjusted to speculative_num_steps + 1 when speculative_eagle_topk == 1",
        "[2025-10-20 03:02:22 TP0] speculative_num_draft_tokens is adjusted to "
        "speculative_num_steps + 1 when speculative_eagle_topk == 1",
        "2025-10-20 03:02:22 WARNING 31223 [DP3 TP3 EP3 server_args.py:222] Overlap scheduler is "
        "disabled",
        "[2026-02-05 02:44:20] INFO server_args.py:1796: speculative_num_steps is set to 3",
    ])
    assert df.kind.tolist() == ["warning"] * 3 and (df.engine == "sglang").all()
    assert df.message.iloc[0] == df.message.iloc[1]
    assert df.message.iloc[0].startswith("speculative_num_draft_tokens is adjusted")
    assert df.message.iloc[2] == "Overlap scheduler is disabled"
    assert (df.dp.iloc[2], df.tp.iloc[2], df.ep.iloc[2]) == (3, 3, 3)
    assert df.time.iloc[1] == pd.Timestamp("2025-10-20 03:02:22")


# --------------------------------------------------------------------------- vLLM and others


def test_vllm_v1_early_percent_and_nan():
    df = read_log([
        "INFO 04-10 10:00:00 [metrics.py:80] SpecDecoding metrics: Draft acceptance rate: 100.0%, "
        "Accepted: 66 tokens, Drafted: 66 tokens",
        "INFO 04-10 10:00:10 [metrics.py:80] SpecDecoding metrics: Draft acceptance rate: nan%, "
        "Accepted: 0 tokens, Drafted: 0 tokens",
    ])
    assert df.attrs["malformed"] == []
    assert df.draft_accept_rate.iloc[0] == 1.0 and math.isnan(df.draft_accept_rate.iloc[1])
    assert df.accepted.tolist() == [66, 0] and df.drafted.tolist() == [66, 0]
    assert df.accept_len.isna().all()  # no k and no per-position rates: not derivable


def test_vllm_2025_09_throughput_fields_and_engine_prefix():
    df = read_log([
        "(APIServer pid=123) INFO 09-10 12:00:00 [metrics.py:96] SpecDecoding metrics: Mean "
        "acceptance length: 2.50, Accepted throughput: 10.00 tokens/s, Drafted throughput: 20.00 "
        "tokens/s, Accepted: 100 tokens, Drafted: 200 tokens, Per-position acceptance rate: "
        "0.700, 0.500, 0.300, Avg Draft acceptance rate: 50.0%",
        "(APIServer pid=123) INFO 09-10 12:00:00 [loggers.py:123] Engine 001: Avg prompt "
        "throughput: 10.0 tokens/s, Avg generation throughput: 55.5 tokens/s, Running: 3 reqs, "
        "Waiting: 1 reqs, GPU KV cache usage: 2.5%, Prefix cache hit rate: 10.0%",
        "(APIServer pid=124) INFO 09-10 12:00:00 [metrics.py:96] Engine 002: SpecDecoding "
        "metrics: Accepted: 10 tokens, Drafted: 40 tokens, Per-position acceptance rate: 0.300, "
        "0.150, 0.050, 0.000",
    ])
    assert df.attrs["malformed"] == []
    spec = df.iloc[0]
    assert (spec.accept_len, spec.draft_accept_rate, spec.per_position) == (2.5, 0.5, (0.7, 0.5, 0.3))
    stats = df.iloc[1]
    assert (stats.kind, stats.dp, stats.gen_throughput, stats.running_req) == ("stats", 1, 55.5, 3)
    assert stats.token_usage == pytest.approx(0.025)
    dp2 = df.iloc[2]
    assert dp2.dp == 2 and dp2.draft_accept_rate == 0.25
    assert dp2.accept_len == pytest.approx(1.5)  # 1 + sum of unconditional per-position rates
    bracketed = one("SpecDecoding metrics: Mean acceptance length: 2.73, Per-position acceptance "
                    "rate: [0.89, 0.76, 0.61]")
    assert bracketed.per_position == (0.89, 0.76, 0.61) and bracketed.accept_len == 2.73


def test_vllm_offline_summary():
    df = read_log([
        "-" * 50, "total_num_output_tokens: 12345", "num_drafts: 1000", "num_draft_tokens: 3000",
        "num_accepted_tokens: 1460", "mean acceptance length: 2.46", "-" * 50,
        "acceptance at token 0: 0.77", "acceptance at token 1:0.50", "acceptance at token 2: 0.19",
    ])
    assert len(df) == 1
    r = df.iloc[0]
    assert (r.engine, r.kind, r.line, r.accept_len) == ("vllm", "spec", 6, 2.46)
    assert r.per_position == (0.77, 0.5, 0.19)
    assert (r.accepted, r.drafted) == (1460, 3000)
    assert r.draft_accept_rate == pytest.approx(1460 / 3000)


def test_llamacpp_cut_per_position():
    r = read_log(["draft acceptance = 0.50000 (  10 accepted /   20 generated), mean acceptance "
                  "length =  2.00, acceptance rate per position = (0.6, 0.4"])
    assert r.attrs["malformed"] == [1]
    assert r.per_position.iloc[0] == (0.6, 0.4) and r.accept_len.iloc[0] == 2.0


def test_trtllm_ar_block():
    df = read_log(["= DECODING STATISTICS (SPECULATIVE DECODING)", "[AR] MINIMUM: 1.73",
                   "[AR] MAXIMUM: 3.21", "[AR] AVERAGE: 2.35", "[AR] P50    : 2.33",
                   "[AR] P99    : 3.10"])
    assert len(df) == 1
    assert (df.engine.iloc[0], df.kind.iloc[0], df.accept_len.iloc[0], df.line.iloc[0]) == (
        "trtllm", "spec", 2.35, 4)


def test_vllm_warnings():
    df = read_log(["WARNING 06-06 14:20:34 [config.py:123] Speculative decoding is not supported",
                   "(APIServer pid=1) WARNING 06-06 14:20:35 [config.py:9] something else"])
    assert df.engine.tolist() == ["vllm", "vllm"] and df.kind.tolist() == ["warning"] * 2
    assert df.message.tolist() == ["Speculative decoding is not supported", "something else"]


def test_engine_filter():
    text = "\n".join([DECODE, "mean acceptance length: 2.46"])
    assert read_log(text, engine="vllm").accept_len.tolist() == [2.46]
    df = read_log(text, engine="sglang")
    assert df.engine.tolist() == ["sglang"] and df.attrs["skipped"] == 1
    with pytest.raises(LogReadError):
        read_log(text, engine="tgi")


def test_many_lines_of_mixed_shapes_keep_order_and_values():
    """Exercises the template fast path: many lines, several shapes, values that vary."""
    lines = []
    for i in range(3000):
        if i % 3 == 0:
            lines.append(f"[2025-10-20 03:{i // 60 % 60:02d}:{i % 60:02d} DP{i % 4} TP{i % 4}] "
                         f"Decode batch, #running-req: {i}, accept len: {1 + i % 7 / 4:.2f}, "
                         f"cuda graph: {i % 2 == 0}, gen throughput (token/s): {i / 10:.2f}")
        elif i % 3 == 1:
            lines.append(f"[2025-10-20 03:00:00 TP0] Prefill batch, #new-seq: 1, #new-token: {i},"
                         f" #running-req: 0, input throughput (token/s): {i:.1f}")
        else:
            lines.append(f'[2025-10-20 03:00:00] INFO:     127.0.0.1:{i} - "GET /health" 200 OK')
    df = read_log(iter(lines))
    assert len(df) == 2000 and df.attrs["skipped"] == 1000 and df.attrs["malformed"] == []
    dec = df[df.kind == "decode"]
    assert dec.running_req.tolist() == list(range(0, 3000, 3))
    assert floats(dec.accept_len) == [round(1 + i % 7 / 4, 2) for i in range(0, 3000, 3)]
    assert dec.graph.tolist() == [i % 2 == 0 for i in range(0, 3000, 3)]
    assert dec.dp.tolist() == [i % 4 for i in range(0, 3000, 3)]
    assert dec.time.iloc[-1] == pd.Timestamp("2025-10-20 03:49:57")
    pre = df[df.kind == "prefill"]
    assert pre.new_token.tolist() == list(range(1, 3000, 3))
    assert df.line.tolist() == [i + 1 for i in range(3000) if i % 3 != 2]


# --------------------------------------------------------------------------- sources, bad input


def test_sources_path_text_lines_bytes_agree(tmp_path):
    text = (SAMPLES / "sglang_pr6081_mtp_dp_attention.log").read_text()
    path = tmp_path / "a.log"
    path.write_text(text)
    frames = [read_log(path), read_log(str(path)), read_log(text), read_log(text.splitlines()),
              read_log(text.encode()), read_log(text.replace("\n", "\r\n"))]
    for df in frames[1:]:
        pd.testing.assert_frame_equal(df, frames[0])
    assert frames[0].attrs["source"] == str(path)


def test_one_line_string_is_text_not_a_path():
    assert one(DECODE).accept_len == 2.5


@pytest.mark.parametrize("make", [
    lambda p: p / "missing.log",
    lambda p: str(p / "missing.log"),
    lambda p: p,
    lambda p: str(p),
])
def test_missing_path_and_directory_raise_one_line_error(tmp_path, make):
    with pytest.raises(LogReadError) as info:
        read_log(make(tmp_path))
    assert "\n" not in str(info.value)


def test_empty_file_and_text(tmp_path):
    (tmp_path / "e.log").write_bytes(b"")
    for source in (tmp_path / "e.log", ""):
        df = read_log(source)
        assert list(df.columns) == COLUMNS and len(df) == 0
        assert (df.attrs["skipped"], df.attrs["malformed"], df.attrs["lines"]) == (0, [], 0)


def test_binary_file_is_counted_not_raised(tmp_path):
    path = tmp_path / "model.bin"
    path.write_bytes(bytes(range(256)) * 4000 + b"\n\x00\xff\xfe")
    df = read_log(path)
    assert len(df) == 0 and df.attrs["skipped"] == df.attrs["lines"] > 0


def test_invalid_utf8_is_replaced(tmp_path):
    path = tmp_path / "bad.log"
    path.write_bytes(b"\xff\xfe\xfa garbage\n" + ("[2025-10-20 03:02:22 TP0] " + DECODE).encode()
                     + b"\xc3\x28\n")
    df = read_log(path)
    assert df.line.tolist() == [2] and df.accept_len.iloc[0] == 2.5


def test_utf16_log_from_a_windows_shell(tmp_path):
    path = tmp_path / "win.log"
    path.write_bytes(("[2025-10-20 03:02:22 TP0] " + DECODE + "\r\n").encode("utf-16"))
    assert read_log(path).accept_len.tolist() == [2.5]


def test_megabyte_line(tmp_path):
    path = tmp_path / "long.log"
    decode = "[2025-10-20 03:02:22 TP0] " + DECODE
    path.write_text(decode + "\n" + "Decode batch, accept len: 1.0, " + "x" * (1 << 20) + "\n"
                    + "y" * (1 << 20) + "\n" + decode + "\n")
    df = read_log(path)
    assert df.line.tolist() == [1, 2, 4] and df.attrs["lines"] == 4
    assert df.attrs["malformed"] == [2]


def test_big_file_is_read_in_blocks(tmp_path, monkeypatch):
    import eagle3lab.sources.logfile as logs

    monkeypatch.setattr(logs, "_CHUNK_BYTES", 1000)
    monkeypatch.setattr(logs, "_FIRST_BLOCK", 300)
    lines = [f"[2025-10-20 03:02:22 TP0] Decode batch, #running-req: {i}, accept len: 2.00"
             for i in range(500)]
    lines[200] = "x" * 5000  # a line spanning several blocks
    lines[300] = "ü" * 700 + "\r"  # multi-byte characters and a CR split across blocks
    path = tmp_path / "big.log"
    path.write_text("\n".join(lines))  # no final newline
    df = read_log(path)
    assert df.running_req.tolist() == [i for i in range(500) if i not in (200, 300)]
    assert df.attrs["lines"] == 500 and df.attrs["skipped"] == 2


# --------------------------------------------------------------------------- CLI


def test_cli_summary_csv_and_plot(tmp_path, capsys):
    csv, png = tmp_path / "all.csv", tmp_path / "plot.png"
    files = [str(SAMPLES / "sglang_pr6081_mtp_dp_attention.log"),
             str(SAMPLES / "vllm_issue19254_v0.9_specdecoding_mean_len_per_pos.log")]
    assert cli_main(["logs", *files, "--csv", str(csv), "--plot", str(png)]) == 0
    out = capsys.readouterr().out
    assert "5 records" in out and "2.79" in out  # mean of 2.90 2.86 2.94 2.65 2.58
    table = pd.read_csv(csv)
    assert len(table) == 10 and set(table.file) == set(files)
    assert png.stat().st_size > 10_000 and png.read_bytes()[:4] == b"\x89PNG"


def test_cli_prints_the_observation_and_its_diagnosis(capsys):
    sample = str(SAMPLES / "sglang_warning_num_draft_tokens_adjusted_SOURCE_STRING.txt")
    assert cli_main(["logs", sample, "--diagnose"]) == 0
    out = capsys.readouterr().out
    assert "the server changed the config: speculative_num_draft_tokens is adjusted" in out
    assert "diagnosis: config_adjusted" in out
    assert cli_main(["logs", str(SAMPLES / "vllm_issue19254_v0.9_specdecoding_mean_len_per_pos.log")]) == 0
    assert "per-position acceptance (conditional) 0.60 0.74 0.81" in capsys.readouterr().out


def test_cli_plot_without_timestamps(tmp_path):
    png = tmp_path / "p.png"
    assert cli_main(["logs", str(SAMPLES / "llamacpp_pr24536_spec_metrics.log"),
                     "--plot", str(png)]) == 0
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_cli_bad_paths_exit_2_and_still_report_good_ones(tmp_path, capsys):
    good = str(SAMPLES / "sglang_pr6081_mtp_dp_attention.log")
    code = cli_main(["logs", str(tmp_path / "nope.log"), str(tmp_path), good])
    captured = capsys.readouterr()
    assert code == 2
    errors = captured.err.strip().splitlines()
    assert len(errors) == 2 and all(e.startswith("eagle3lab: error: ") for e in errors)
    assert "5 records" in captured.out


def test_cli_subprocess_binary_and_missing(tmp_path):
    junk = tmp_path / "junk.bin"
    junk.write_bytes(bytes(range(256)) * 100)
    proc = subprocess.run([sys.executable, "-m", "eagle3lab", "logs", str(junk)],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0 and "0 records" in proc.stdout and proc.stderr == ""
    proc = subprocess.run([sys.executable, "-m", "eagle3lab", "logs", str(tmp_path / "x.log")],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


# --------------------------------------------------------------------------- robustness


def _sample_lines() -> list[str]:
    lines = []
    for path in sorted(SAMPLES.iterdir()):
        lines += path.read_text().splitlines()
    return lines


def test_fast_path_agrees_with_field_by_field_parsing():
    """Repeated shapes go through compiled templates; each must read what the slow path reads."""
    lines = [line for line in _sample_lines() for _ in range(3)]
    together = read_log(lines)
    alone = pd.concat([read_log([line]) for line in lines], ignore_index=True)
    keep = [c for c in COLUMNS if c not in ("line", "time")]  # time borrows from neighbours
    pd.testing.assert_frame_equal(together[keep], alone[keep], check_dtype=False,
                                  check_categorical=False)


def test_random_damage_never_raises():
    import random

    rng = random.Random(0)
    lines = _sample_lines() + ["[2025-10-20 03:02:22 TP0] " + DECODE]
    junk = "0123456789.,:[] -#%()={}\"\x1bnaTrueFalse"
    for _ in range(300):
        out = []
        for _ in range(rng.randint(1, 12)):
            line = rng.choice(lines)
            for _ in range(rng.randint(0, 3)):
                i = rng.randint(0, len(line))
                choice = rng.random()
                if choice < 0.3:
                    line = line[:i]
                elif choice < 0.6:
                    line = line[:i] + line[rng.randint(i, len(line)):]
                elif choice < 0.9:
                    line = line[:i] + rng.choice(junk) * rng.randint(1, 3) + line[i:]
                else:
                    line += rng.choice(lines)
            out.append(line)
        df = read_log(out)
        assert df.attrs["lines"] == len(out)
        assert df.attrs["skipped"] + len(df) <= len(out)
        assert df["line"].is_monotonic_increasing


def test_summarize_and_plot_for_notebooks():
    import matplotlib.pyplot as plt

    from eagle3lab.sources.logfile import plot_log, summarize

    df = sample("sglang_kernel_npu_pr608_tp_ep_npu_graph.log")
    table = summarize(df)
    dec = table[table.kind == "decode"].iloc[0]
    assert dec.records == 3 and dec.accept_len_max == 3.05 and dec.accept_len_min == 2.63
    assert dec.accept_len_median == 2.83
    assert table[table.kind == "prefill"].iloc[0].input_throughput_mean == 2793.64
    fig = plot_log(df)
    assert [ax.get_ylabel().split("\n")[0] for ax in fig.axes] == ["accept length",
                                                                    "gen throughput"]
    assert len(fig.axes[0].lines[0].get_xdata()) == 3
    plt.close(fig)


def test_sglang_accept_rate_definition_from_printed_values():
    from eagle3lab.sources.logfile import sglang_accept_rate_definition as definition

    # log-formats.md: 2.17 -> 0.54 with 3 steps (old, /(steps+1)); 3.05 -> 0.68 with 4 draft
    # tokens (new, (len-1)/(draft_tokens-1)).
    assert definition(sample("sglang_issue11948_eagle3_accept_rate_trailing_comma.log")) == {
        "definition": "old", "k": 4, "rows": 5}
    assert definition(sample("sglang_kernel_npu_pr608_tp_ep_npu_graph.log")) == {
        "definition": "new", "k": 3, "rows": 3}
    assert definition(sample("sglang_pr6081_mtp_dp_attention.log"))["definition"] == "unknown"
    made_up = read_log([f"Decode batch, accept len: {a:.2f}, accept rate: {r:.2f}"
                        for a, r in ((2.0, 0.9), (3.0, 0.1))])
    assert definition(made_up)["definition"] == "unknown"


def test_varying_prefix_numbers_share_one_template():
    """kubectl timestamps, pids, source line numbers vary per line: still one line shape."""
    from eagle3lab.sources.log_parser import _Parser

    lines = [f"2025-10-20T03:{i // 60:02d}:{i % 60:02d}.{i:09d}Z worker-{i % 3} | "
             f"[2025-10-20 03:{i // 60:02d}:{i % 60:02d} TP{i % 2}] INFO {1000 + i} "
             f"[sched.py:{i}] Decode batch, #running-req: {i}, accept len: 2.50"
             for i in range(300)]
    parser = _Parser()
    parser.feed("\n".join(lines))
    assert len(parser.templates) == 1
    df = read_log(lines)
    assert df.running_req.tolist() == list(range(300)) and df.attrs["malformed"] == []
    assert df.tp.tolist() == [i % 2 for i in range(300)]
    assert df.time.iloc[61] == pd.Timestamp("2025-10-20 03:01:01.000000061")


def test_cli_stdin_and_plot_with_no_records(tmp_path, capsys, monkeypatch):
    import io

    text = (SAMPLES / "sglang_pr6081_mtp_dp_attention.log").read_text()
    monkeypatch.setattr(sys, "stdin", io.StringIO(text))
    assert cli_main(["logs", "-"]) == 0
    assert "5 records" in capsys.readouterr().out
    junk, png = tmp_path / "junk.bin", tmp_path / "empty.png"
    junk.write_bytes(bytes(range(256)) * 10)
    assert cli_main(["logs", str(junk), "--plot", str(png)]) == 0
    assert "0 records" in capsys.readouterr().out and png.read_bytes()[:4] == b"\x89PNG"
    assert cli_main(["logs", str(junk), "--csv", str(tmp_path / "no" / "dir.csv")]) == 2
    assert capsys.readouterr().err.startswith("eagle3lab: error: cannot write")

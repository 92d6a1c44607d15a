"""Reading targets' and drafts' config.json by each family's own field names, acceptance profiles,
the fit to measured configurations and `eagle3lab cost --target-config` (issue 40 items 1, 2, 5).

Parameter counts are the code's on the shipped public configs (data/cost/targets): pinned, and
Kimi-K2.5's and DeepSeek-V3's against their published totals (docs/cost-model.md)."""

import json

import pytest

from eagle3lab.cli import main
from eagle3lab.cost import acceptprofile, archfit, costchecks, modelshape
from eagle3lab.cost.archcost import CostParams, StepModel, parse_configuration, sglang_accepts
from eagle3lab.cost.modelshape import ConfigError
from eagle3lab.errors import EagleLabError

KIMI = "data/cost/targets/kimi-k2.5.json"
TORCHSPEC = "data/cost/drafts/kimi-k2.5-eagle3-torchspec.json"


def _active(shape) -> float:
    """Parameters one token reads: the flat part and `active` experts per MoE layer (+ embedding row)."""
    return sum(shape.flat.values()) + shape.moe_layers * shape.active * shape.expert_params


@pytest.mark.parametrize("name, family, total_b, moe_layers, experts, active", [
    ("kimi-k2.5", "deepseek", 1025.23, 60, 384, 8),
    ("deepseek-v3", "deepseek", 670.10, 58, 256, 8),
    ("qwen3-30b-a3b", "qwen3_moe", 30.22, 48, 128, 8),
    ("mixtral-8x7b-v0.1", "mixtral", 46.57, 32, 8, 2),
    ("gpt-oss-20b", "gpt_oss", 20.33, 24, 32, 4),
    ("llama-3.1-8b", "llama", 7.50, 0, 0, 0),
])
def test_each_family_read_by_its_own_field_names(name, family, total_b, moe_layers, experts, active):
    t = costchecks.target(name)
    assert (t.family, t.moe_layers, t.experts, t.active) == (family, moe_layers, experts, active)
    assert round(t.total_params() / 1e9, 2) == total_b  # embedding (and a vision tower) left out


def test_published_totals_kimi_and_deepseek():
    kimi, ds = costchecks.target("kimi-k2.5"), costchecks.target("deepseek-v3")
    embed = lambda t: t.vocab * t.hidden  # noqa: E731
    # MoonshotAI/Kimi-K2.5 README: 1T total, 32B activated; DeepSeek-V3 report (arXiv 2412.19437): 671B, 37B
    assert abs((kimi.total_params() + embed(kimi)) / 1.0e12 - 1) < 0.03
    assert abs(_active(kimi) / 32e9 - 1) < 0.03
    assert abs((ds.total_params() + embed(ds)) / 671e9 - 1) < 0.005
    assert abs(_active(ds) / 37e9 - 1) < 0.03


def test_kimi_k25s_nested_text_config_and_int4_experts():
    t = costchecks.target("kimi-k2.5")
    assert t.architecture == "KimiK25ForConditionalGeneration" and t.layers == 61 and t.hidden == 7168
    assert t.bits == {"attention": 16, "dense_mlp": 16, "shared_experts": 16, "routed_experts": 4.5, "router": 16,
                      "lm_head": 16, "fc": 16}  # ignore: lm_head, self_attn, shared_experts, the dense layer's mlp
    assert t.flat["dense_mlp"] == 3 * 7168 * 18432 and t.flat["shared_experts"] == 60 * 3 * 7168 * 2048
    assert t.flat["attention"] == 61 * 101_122_048  # MLA: the H200 script's 101,122,048 a layer
    # the quantization_config only inside text_config reads the same
    cfg = modelshape.load_config(KIMI)
    del cfg["quantization_config"]
    assert modelshape.target_shape(cfg).bits == t.bits


def test_other_quantization_configs():
    ds, oss = costchecks.target("deepseek-v3"), costchecks.target("gpt-oss-20b")
    assert ds.bits["routed_experts"] == ds.bits["attention"] == 8 + 32 / 128 ** 2 and ds.bits["lm_head"] == 16
    assert oss.bits["routed_experts"] == 4.25 and oss.bits["attention"] == 16 and oss.bits["lm_head"] == 16
    cfg = modelshape.load_config("data/cost/targets/qwen3-30b-a3b.json")
    cfg["quantization_config"] = {"quant_method": "bitnet"}
    with pytest.raises(ConfigError, match="--weight-bits"):
        modelshape.target_shape(cfg)
    assert modelshape.target_shape(cfg | {"quantization_config": None}).bits["routed_experts"] == 16


def test_weight_bits_given_by_the_user():
    assert modelshape.parse_bits(["8", "experts=4.5"]) == {**{p: 8.0 for p in modelshape.PARTS}, "routed_experts": 4.5}
    t = costchecks.target("kimi-k2.5", {"routed_experts": 16.0})
    assert t.bits["routed_experts"] == 16.0 and "given by the user" in t.read_from["bits"]
    for bad in ("experts=0", "wings=4", "four"):
        with pytest.raises(ConfigError, match="--weight-bits"):
            modelshape.parse_bits([bad])


@pytest.mark.parametrize("config, message", [
    ({"architectures": ["FalconForCausalLM"], "model_type": "falcon"}, "unknown architecture 'FalconForCausalLM'"),
    ({"architectures": ["Qwen3MoeForCausalLM"], "hidden_size": 2048, "num_hidden_layers": 2,
      "num_attention_heads": 16, "vocab_size": 10}, "has no num_experts"),
    ({"architectures": ["DeepseekV3ForCausalLM"], "hidden_size": 64, "num_hidden_layers": 2,
      "num_attention_heads": 4, "vocab_size": 10}, "has no kv_lora_rank"),
])
def test_an_unreadable_architecture_is_a_one_line_error_naming_fields(config, message):
    with pytest.raises(ConfigError, match=message) as err:
        modelshape.target_shape(config)
    assert "\n" not in str(err.value)
    if "unknown" in message:
        assert "n_routed_experts" in str(err.value) and "hidden_size" in str(err.value)


def test_missing_and_garbled_files(tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    for path, message in ((tmp_path / "nope.json", "not found"), (bad, "not valid JSON"), (tmp_path, "not found")):
        with pytest.raises(ConfigError, match=message):
            modelshape.read_target(path)


def test_drafts():
    t = costchecks.target("kimi-k2.5")
    d = modelshape.read_draft(TORCHSPEC, t)
    assert d.family == "eagle3" and d.vocab == 163840 and d.flat["fc"] == 3 * 7168 * 7168
    assert d.flat["attention"] == 2 * 7168 * (64 + 2 * 64) * 128 + 64 * 128 * 7168  # EAGLE-3: 2x wide q/k/v input
    assert d.with_vocab(32000).flat["lm_head"] == 7168 * 32000
    spec = {"speculators_model_type": "eagle3", "draft_vocab_size": 32000,
            "transformer_layer_config": {"hidden_size": 7168, "num_attention_heads": 64, "num_key_value_heads": 8,
                                         "intermediate_size": 18432, "vocab_size": 163840}}
    assert modelshape.draft_shape(spec, t).vocab == 32000  # vLLM's speculators format, draft vocabulary
    mtp = modelshape.mtp_draft(costchecks.target("deepseek-v3"))
    assert mtp.moe_layers == 1 and mtp.flat["fc"] == 2 * 7168 ** 2 and mtp.flat["lm_head"] == 129280 * 7168
    with pytest.raises(ConfigError, match="no MTP layer"):
        modelshape.mtp_draft(t)


def test_sglangs_configuration_rules():
    assert sglang_accepts(5, 1, 6) is None and sglang_accepts(8, 8, 60) is None
    assert "steps + 1 = 6" in sglang_accepts(5, 1, 16)  # the incident's first launch: SGLang runs 2, not 16
    assert "at most 7 draft tokens" in sglang_accepts(2, 2, 10)  # topk + (steps - 1) topk^2 = 2 + 4 candidates
    assert parse_configuration("3/1/4") == (3, 1, 4)
    for bad in ("3-1-4", "5/1/16"):
        with pytest.raises(ConfigError):
            parse_configuration(bad)


def test_acceptance_profiles(tmp_path):
    iid = acceptprofile.from_iid(0.75, (0.7, 0.8))
    value, (lo, hi) = iid.accept_length(3)
    assert value == (1 - 0.75 ** 4) / 0.25 and lo < value < hi and iid.accept_length(3, 4, 8) is None
    at = acceptprofile.from_accept_length(1.78, 5, (1.73, 1.85), 1, 6)
    assert at.accept_length(5, 1, 6) == (1.78, (1.73, 1.85))  # where it was measured: itself
    assert round(at.rate, 2) == 0.44 and at.accept_length(1)[0] == pytest.approx(1 + at.rate)
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps({"per_position": [0.8, 0.6], "per_position_conditional": False,
                                 "per_position_ci95": [[0.7, 0.9], [0.5, 0.7]], "num_steps": 2}))
    prof = acceptprofile.from_bench(bench)
    assert prof.accept_length(2) == (pytest.approx(2.4), (pytest.approx(2.2), pytest.approx(2.6)))
    assert prof.accept_length(3) is None  # beyond the measured positions
    bench.write_text(json.dumps({"per_position": [0.8, 0.75], "per_position_conditional": True}))
    assert acceptprofile.from_bench(bench).accept_length(2)[0] == pytest.approx(1 + 0.8 + 0.6)
    bench.write_text(json.dumps({"accept_length": 2.2, "num_steps": 3, "topk": 2, "num_draft_tokens": 6}))
    assert acceptprofile.from_bench(bench).accept_length(3, 2, 6)[0] == 2.2  # a tree: its own accept length
    bench.write_text(json.dumps({"tokens_per_s": 1.0}))
    with pytest.raises(ConfigError, match="neither per_position"):
        acceptprofile.from_bench(bench)


def test_the_fit_recovers_known_unknowns_and_says_its_error():
    model = costchecks.kimi_model()
    truth = model.with_params(fixed=0.3, overhead=0.1)
    configs = [(1, 1, 2), (3, 1, 4), (5, 1, 6), (3, 3, 8)]
    base = 90.0
    data = [archfit.Measured(*c, base * 2.0 / truth.parts(*c).step_cost, 2.0) for c in configs]
    fit = archfit.fit(model, data, base)
    assert fit.model.params.fixed == pytest.approx(0.3) and fit.model.params.overhead == pytest.approx(0.1)
    assert fit.loo_summary()["max_abs_error"] == pytest.approx(0.0, abs=1e-9)
    two = archfit.fit(model, data[:2], base)  # two configurations pin the fixed share only
    assert two.names == ("fixed",) and two.dof == 1 and two.step_cost_interval(2) is not None
    with pytest.raises(ConfigError, match="at least 2"):
        archfit.fit(model, data[:1], base)
    with pytest.raises(ConfigError, match="all the same one"):
        archfit.fit(model, [data[0], data[0]], base)
    with pytest.raises(ConfigError, match="TOKENS_PER_S"):
        archfit.parse_measured("3/1/4:159")


def _cli(capsys, *argv):
    code = main(["cost", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_the_cost_command_for_the_incident(capsys):
    argv = ["--target-config", KIMI, "--draft-config", TORCHSPEC, "--draft-vocab", "32000",
            "--accept-length", "1.78:1.73-1.85", "--steps", "5", "--draft-tokens", "6", "--baseline-tps", "90"]
    code, out, _ = _cli(capsys, *argv)
    assert code == 0
    assert "5/1/6    2.69   0.28     0.00               2.98       2.98" in out
    assert "best: 1/1/2" in out and "A shorter chain is cheaper" in out and "bandwidth-bound limit" in out
    code, out, _ = _cli(capsys, *argv, "--json")
    data = json.loads(out)
    rows = {r["configuration"]: r for r in data["configurations"]}
    for field in ("steps", "topk", "draft_tokens", "verify_cost", "draft_cost", "step_cost",
                  "break_even_accept_length", "basis", "speedup", "speedup_range"):
        assert field in rows["5/1/6"], field
    assert round(rows["5/1/6"]["step_cost"], 2) == 2.98 == round(rows["5/1/6"]["break_even_accept_length"], 2)
    assert rows["5/1/6"]["basis"] == "bandwidth-bound limit" and data["best"] == "1/1/2"
    assert rows["3/3/8"]["speedup"] is None  # a tree the profile says nothing about


def test_the_cost_command_fits_and_compares(capsys):
    fig = costchecks.load_config("data/cost/public-figures.json")["qwen3_30b_a3b_specforge_339"]
    measured = ["{}/{}/{}:{}:{}".format(*r["configuration"], r["tokens_per_s"], r["accept_length"]) for r in fig["measured"]]
    code, out, _ = _cli(capsys, "--target-config", "data/cost/targets/qwen3-30b-a3b.json", "--baseline-tps", "222.47",
                        *[x for m in measured for x in ("--measured", m)], "--iid", "0.5", "--json")
    data = json.loads(out)
    assert code == 0 and data["basis"] == "fitted to 6 measured configurations"
    assert all(r["step_cost_range"] for r in data["configurations"]) and data["fit"]["leave_one_out"]["configurations"] == 6
    code, out, _ = _cli(capsys, "--target-config", KIMI, "--baseline-tps", "90", "--spec-tps", "54.8",
                        "--accept-length", "1.78", "--steps", "5")
    assert code == 0 and "measured at 5/1/6: 2.92 plain steps against the model's 3.00" in out


@pytest.mark.parametrize("argv, message", [
    (["--target-config", "missing.json"], "target config: missing.json not found"),
    (["--target-config", KIMI, "--iid", "0.5", "--accept-length", "2"], "give one acceptance profile"),
    (["--target-config", KIMI, "--accept-length", "2"], "needs --steps"),
    (["--target-config", KIMI, "--measured", "3/1/4:100:2"], "need --baseline-tps"),
    (["--target-config", KIMI, "--config", "5/1/16"], "SGLang runs steps + 1"),
    (["--target-config", KIMI, "--draft-config", "mtp"], "no MTP layer"),
    (["--target-config", KIMI, "--locality", "2"], "locality must be within [0, 1]"),
    (["--baseline-tps", "90"], "give --spec-tps, --accept-length, --steps"),
    (["--baseline-tps", "90", "--spec-tps", "54.8", "--accept-length", "1.78:1.7-1.9", "--steps", "5"],
     "takes one number here"),
])
def test_the_cost_command_refuses_bad_input_in_one_line(argv, message, capsys):
    code, _, err = _cli(capsys, *argv)
    assert code == 2 and message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_every_error_is_an_eaglelab_error():
    assert issubclass(ConfigError, EagleLabError)
    with pytest.raises(EagleLabError):
        CostParams(locality=-0.1)
    with pytest.raises(EagleLabError):
        StepModel(costchecks.target("kimi-k2.5"), costchecks.target("kimi-k2.5")).parts(5, 1, 16)


def test_a_trees_accept_length_predicts_no_chain():
    tree = acceptprofile.from_accept_length(2.52, 7, None, 4, 16)
    assert tree.accept_length(7, 4, 16) == (2.52, (2.52, 2.52)) and tree.accept_length(3) is None

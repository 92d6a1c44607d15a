"""Effective speculative config: SGLang's per-version rules, vLLM, flags, findings, CLI."""

import pytest

from eagle3lab.cli import main
from eagle3lab.engines.effective import parse_launch_flags
from eagle3lab.engines.sglang.sglang_rules import W_ADJUST, W_MAX_RUNNING, W_TOPK_PAGE, rules_for
from eagle3lab.spec import SpecConfig
from eagle3lab.errors import EagleLabError

SEED_FLAGS = ["--speculative-num-steps", "1", "--speculative-eagle-topk", "1",
              "--speculative-num-draft-tokens", "16"]


def codes(res):
    return {f.code for f in res.findings}


def test_seed_bug_two_draft_tokens_with_sglangs_warning():
    res = SpecConfig.from_cli(SEED_FLAGS).resolve(engine="sglang", version="0.5.23")
    assert res.triple == (1, 1, 2)
    assert W_ADJUST in res.warnings
    assert res.changed == {"num_draft_tokens": (16, 2)}
    assert res.differs
    finding = next(f for f in res.findings if f.code == "draft-tokens-adjusted")
    assert "16" in finding.message and "2" in finding.message and "15" in finding.message


def test_chain_that_matches_is_left_alone():
    res = SpecConfig(num_steps=5, topk=1, num_draft_tokens=6, max_running_requests=8).resolve()
    assert res.triple == (5, 1, 6)
    assert res.warnings == [] and not res.differs


@pytest.mark.parametrize("version,arch,expected", [
    ("0.5.23", "LlamaForCausalLM", (5, 4, 8)),
    ("0.5.23", "DeepseekV3ForCausalLM", (3, 1, 4)),   # Kimi-K2 is a DeepseekV3 target
    ("0.5.23", "GptOssForCausalLM", (3, 1, 4)),
    ("0.5.23", "Grok1ForCausalLM", (5, 4, 8)),
    ("0.5.23", "Qwen2ForCausalLM", (3, 1, 4)),
    ("0.5.7", "Qwen2ForCausalLM", (5, 4, 8)),          # "all other models" changed in 0.5.9
    ("0.5.9", "Qwen2ForCausalLM", (3, 1, 4)),
    ("0.4.6", "DeepseekV3ForCausalLM", (5, 4, 8)),
    ("0.4.10", "DeepseekV3ForCausalLM", (3, 1, 4)),
    ("0.4.10", "GptOssForCausalLM", (5, 4, 8)),
    ("0.5.1", "GptOssForCausalLM", (3, 1, 4)),
])
def test_automatic_choice_depends_on_arch_and_version(version, arch, expected):
    res = SpecConfig().resolve(version=version, arch=arch)
    assert res.triple == expected
    assert not res.differs and "auto-params" in codes(res)


def test_steps_without_topk_or_topk_without_steps_refused():
    assert SpecConfig(topk=4).resolve().error.startswith("AssertionError")
    assert SpecConfig(num_steps=3).resolve().error.startswith("TypeError")
    # Before 0.5.2 nothing evaluates `topk > 1` with topk unset: it passes, we flag it.
    old = SpecConfig(num_steps=3).resolve(version="0.4.10")
    assert old.error is None and "topk-unset" in codes(old)


def test_page_size_with_tree_per_version():
    spec = SpecConfig(num_steps=3, topk=4, num_draft_tokens=8, page_size=16)
    old = spec.resolve(version="0.4.6")            # topk forced to 1, then draft tokens
    assert old.triple == (3, 1, 4) and old.warnings[-2:] == [W_TOPK_PAGE, W_ADJUST]
    assert old.changed == {"topk": (4, 1), "num_draft_tokens": (8, 4)}
    assert spec.resolve(version="0.4.10").triple == (3, 4, 8)     # rule removed
    triton = SpecConfig(num_steps=3, topk=4, num_draft_tokens=8, page_size=16,
                        attention_backend="triton")
    assert "flashinfer" in triton.resolve(version="0.5.2").error
    assert triton.resolve(version="0.5.14").error is None          # triton joins the tree backends
    cpu = SpecConfig(num_steps=3, topk=4, num_draft_tokens=8, page_size=16, device="cpu")
    assert "torch_native" in cpu.resolve().error
    assert cpu.resolve().differs


def test_trtllm_mha_refuses_tree_from_0_5_1():
    spec = SpecConfig(num_steps=3, topk=4, num_draft_tokens=8, attention_backend="trtllm_mha")
    assert "trtllm_mha" in spec.resolve(version="0.5.1").error
    assert spec.resolve(version="0.4.10").error is None


def test_eagle3_absent_in_0_4_3():
    assert "EAGLE" in SpecConfig(num_steps=3, topk=1).resolve(version="0.4.3").error
    eagle = SpecConfig(algorithm="EAGLE").resolve(version="0.4.3")
    assert eagle.triple == (5, 8, 64) and eagle.warnings == []


def test_max_running_requests_warning_from_0_5_5():
    assert W_MAX_RUNNING in SpecConfig().resolve(version="0.5.5").warnings
    res = SpecConfig().resolve(version="0.5.2")
    assert res.max_running_requests == 48 and W_MAX_RUNNING not in res.warnings


def test_versions_between_and_beyond_read_ones_say_whose_rules():
    assert "used the rules of 0.5.23" in " ".join(SpecConfig().resolve(version="0.5.99").notes)
    assert "unknown version 0.5.99" in " ".join(SpecConfig().resolve(version="0.5.99").notes)
    rules, notes = rules_for("0.5.10")
    assert rules.version == "0.5.9" and "none between them changes a field" in notes[0]
    assert rules_for("0.4.4.post4")[0].topk1_adjust is False  # a post release is its own release
    rules, notes = rules_for("0.4.6.post1")
    assert rules.version == "0.4.6"
    rules, notes = rules_for("0.3.0")
    assert rules.version == "0.4.3" and "older" in notes[0]
    assert rules_for("0.5.23") == (rules_for("0.5.23")[0], [])


def test_engine_pin_and_version_parsing():
    assert SpecConfig().resolve(engine="sglang==0.4.10", arch="DeepseekV3ForCausalLM").triple == (3, 1, 4)
    with pytest.raises(EagleLabError, match="version"):
        SpecConfig().resolve(engine="sglang==banana")
    with pytest.raises(EagleLabError, match="unknown engine"):
        SpecConfig().resolve(engine="tensorrt")


def test_findings_carry_numbers():
    res = SpecConfig(num_steps=3, topk=2, num_draft_tokens=100, max_running_requests=64,
                     cuda_graph_max_bs=8).resolve()
    msgs = {f.code: f.message for f in res.findings}
    assert "1 + 3 x 2 = 7" in msgs["draft-tokens-unreachable"]
    assert "8" in msgs["cuda-graph-below-running"] and "64" in msgs["cuda-graph-below-running"]
    deep = SpecConfig(num_steps=12, topk=1, num_draft_tokens=13).resolve()
    assert "depth-untrained" in codes(deep)
    shallow = SpecConfig(num_steps=6, topk=4, num_draft_tokens=4).resolve()
    assert "depth-unverifiable" in codes(shallow)
    assert not SpecConfig(num_steps=6, topk=4, num_draft_tokens=4).resolve().differs


def test_vllm_chain_semantics():
    res = SpecConfig.from_cli(['--speculative-config',
                               '{"method": "eagle3", "num_speculative_tokens": 3}']
                              ).resolve(engine="vllm")
    assert res.triple == (3, 1, 4) and not res.differs
    tree = SpecConfig(num_steps=3, topk=4, num_draft_tokens=8).resolve(engine="vllm")
    assert tree.changed["topk"] == (4, 1) and "vllm-chain" in codes(tree)
    assert "num_speculative_tokens" in SpecConfig().resolve(engine="vllm").error


def test_from_cli_accepts_other_launch_flags():
    spec = SpecConfig.from_cli(
        "python -m sglang.launch_server --model-path /m --tp 8 --trust-remote-code "
        "--mem-fraction-static 0.8 --speculative-algorithm eagle3 "
        "--speculative-draft-model-path /d --speculative-num-steps=5 "
        "--speculative-eagle-topk 1 --cuda-graph-max-bs 8 --max-running-requests 16")
    assert (spec.algorithm, spec.num_steps, spec.topk) == ("EAGLE3", 5, 1)
    assert (spec.cuda_graph_max_bs, spec.max_running_requests) == (8, 16)
    assert (spec.model_path, spec.draft_model_path) == ("/m", "/d")


@pytest.mark.parametrize("argv,match", [
    (["--speculative-num-steps", "-2"], "at least 1"),
    (["--speculative-num-steps", "2.5"], "whole number"),
    (["--speculative-eagle-topk"], "needs a value"),
    (["--bogus-flag", "1", "--speculative-num-stepz", "2"], "--bogus-flag, --speculative-num-stepz"),
    (["--speculative"], "ambiguous"),
    (["stray"], "without a flag"),
    (["--speculative-algorithm", "MEDUSA"], "not modelled"),
])
def test_bad_flags_are_clear_errors(argv, match):
    with pytest.raises(EagleLabError, match=match):
        SpecConfig.from_cli(argv)


def test_bad_values_in_python_api():
    with pytest.raises(EagleLabError, match="whole number"):
        SpecConfig(num_steps="3")
    with pytest.raises(EagleLabError, match="at least 1"):
        SpecConfig(topk=0)


def test_architecture_names():
    with pytest.raises(EagleLabError, match="architectures"):
        SpecConfig().resolve(arch="llama")
    res = SpecConfig().resolve(arch="MyNewForCausalLM")
    assert "not named in SGLang's rules" in res.notes[0] and res.triple == (3, 1, 4)


def test_to_frame_and_summary():
    res = SpecConfig.from_cli(SEED_FLAGS).resolve()
    frame = res.to_frame()
    row = frame.set_index("setting").loc["num_draft_tokens"]
    assert (row["asked"], row["effective"], bool(row["changed"])) == (16, 2, True)
    assert "num_steps + 1" in row["why"]
    assert "changed: num_draft_tokens 16 -> 2" in res.summary()
    assert list(res.findings_frame().columns) == ["code", "severity", "message"]


def test_cli_exit_codes(capsys):
    assert main(["config", "--", *SEED_FLAGS]) == 1
    out = capsys.readouterr().out
    assert W_ADJUST in out and "DIFFERS" in out
    assert main(["config", "--", "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
                 "--speculative-num-draft-tokens", "4"]) == 0
    assert main(["config", "--", "--speculative-num-steps", "x"]) == 2
    assert "whole number" in capsys.readouterr().err
    assert main(["config", "--engine", "sglang==0.5.99", "--", "--speculative-num-steps", "2",
                 "--speculative-eagle-topk", "1"]) == 0
    assert "unknown version 0.5.99" in capsys.readouterr().out
    assert main(["config", "--json", "--", *SEED_FLAGS]) == 1
    assert '"differs": true' in capsys.readouterr().out


def test_use_sglang_without_sglang_is_a_clear_error(tmp_path, monkeypatch):
    fake = tmp_path / "sglang"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('sglang deliberately broken')\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    with pytest.raises(EagleLabError, match="sglang is not importable"):
        SpecConfig(num_steps=2, topk=1).resolve(use_sglang=True)


def test_parse_launch_flags_switches_do_not_eat_values():
    values = parse_launch_flags(["--disable-overlap-schedule", "--speculative-num-steps", "2"])
    assert values == {"disable_overlap_schedule": True, "num_steps": 2}




def test_spec_config_converts_to_and_from_every_form():
    seed = SpecConfig.from_flags(SEED_FLAGS)
    assert seed == SpecConfig(num_steps=1, topk=1, num_draft_tokens=16)
    assert seed.to_flags() == ["--speculative-algorithm", "EAGLE3", *SEED_FLAGS]
    assert SpecConfig.from_flags(seed.to_flags("lab")) == seed
    tree = SpecConfig(num_steps=5, topk=4, num_draft_tokens=8, page_size=16, attention_backend="fa3",
                      disable_overlap_schedule=True)
    assert SpecConfig.from_flags(tree.to_flags()) == tree
    assert "--device" not in tree.to_flags()  # defaults are not forced on the server
    with pytest.raises(EagleLabError, match="the lab server takes only"):
        tree.to_flags("lab")
    with pytest.raises(EagleLabError, match="no launch flags for engine"):
        seed.to_flags("trtllm")
    # server info: what the lab front end reports, and SGLang's nested form
    effective = seed.resolve().effective
    info = effective.server_info()
    assert info["speculative_num_draft_tokens"] == 2 and info["speculative_eagle_topk"] == 1
    assert SpecConfig.from_server_info(info) == SpecConfig(num_steps=1, topk=1, num_draft_tokens=2)
    nested = {"server_args": {"speculative_algorithm": "EAGLE3", "speculative_num_steps": 3,
                              "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4,
                              "cuda_graph_max_bs_decode": 8}}
    assert SpecConfig.from_server_info(nested) == SpecConfig(num_steps=3, topk=1, num_draft_tokens=4,
                                                             cuda_graph_max_bs=8)
    assert SpecConfig.from_server_info({"speculative_algorithm": None}) is None
    # the engine's parameters: only once resolved
    from eagle3lab.spec import SpecParams

    assert seed.resolve().to_engine_params() == SpecParams(1, 1, 2)
    with pytest.raises(EagleLabError, match="resolve the config first"):
        SpecConfig(num_steps=3).to_engine_params()
    with pytest.raises(EagleLabError, match="will not start"):
        SpecConfig(num_steps=3).resolve().effective  # topk missing: SGLang refuses


def test_one_latest_sglang_everywhere():
    from eagle3lab import spec as versions
    from eagle3lab.engines.sglang import sglang_capture as capture
    from eagle3lab.engines.lab import frontend

    assert versions.LATEST_SGLANG == versions.SGLANG_RELEASES[-1] == "0.5.23"
    assert capture.SGLANG_VERSIONS[-1] == frontend.SGLANG_VERSION == versions.LATEST_SGLANG
    assert SpecConfig().resolve().version == versions.LATEST_SGLANG

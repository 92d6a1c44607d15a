"""The SGLang launch argv eagle3lab builds, read back by the installed SGLang's own argument
parser (sglang.srt.server_args.ServerArgs.add_cli_args), not compared as a string."""

from __future__ import annotations

import argparse

import pytest

from eagle3lab.serving import server


@pytest.fixture(scope="module")
def sglang_parser():
    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser(prog="sglang.launch_server")
    ServerArgs.add_cli_args(parser)
    return parser


def test_the_launch_argv_parses_with_sglangs_own_parser(sglang_parser):
    argv = server.build_command("sglang", "meta-llama/Llama-3.1-8B-Instruct", "/drafts/eagle3",
                                spec={"num_steps": 5, "topk": 8, "num_draft_tokens": 32,
                                      "page_size": 16}, port=30001, extra_args=["--tp", "2"])
    assert argv[1:3] == ["-m", "sglang.launch_server"]
    args = sglang_parser.parse_args(argv[3:])
    assert args.model_path == "meta-llama/Llama-3.1-8B-Instruct"
    assert (args.host, args.port) == ("127.0.0.1", 30001)
    assert args.speculative_algorithm == "EAGLE3"
    assert args.speculative_draft_model_path == "/drafts/eagle3"
    assert (args.speculative_num_steps, args.speculative_eagle_topk,
            args.speculative_num_draft_tokens) == (5, 8, 32)
    assert args.page_size == 16 and args.tp_size == 2


def test_a_spec_config_becomes_flags_sglang_accepts(sglang_parser):
    from eagle3lab.spec import SpecConfig

    argv = server.build_command("sglang", "/m", None, SpecConfig(num_steps=3, topk=1, num_draft_tokens=4,
                                                                 draft_model_path="/d"))
    args = sglang_parser.parse_args(argv[3:])
    assert (args.speculative_num_steps, args.speculative_eagle_topk, args.speculative_num_draft_tokens,
            args.speculative_draft_model_path) == (3, 1, 4, "/d")
    assert args.device is None  # SpecConfig's default device is not forced on the server


def test_lab_faults_never_reach_sglang():
    with pytest.raises(server.ServerError, match="lab engine"):
        server.build_command("sglang", "/m", "/d", spec={"num_steps": 3, "fault": "no-ttt"})
    # none/empty is no fault
    argv = server.build_command("sglang", "/m", "/d", spec={"num_steps": 3, "fault": "none"})
    assert "--fault" not in argv


def test_launch_flags_cover_sglangs_parser_and_agree_on_which_take_a_value(sglang_parser):
    """LAUNCH_FLAGS holds every flag of 0.4.3-0.5.23 (older releases' flags too, so a user's old
    command line still parses): every flag of the installed 0.5.23 parser is in it, classed as
    SGLang classes it (a switch takes no value)."""
    from eagle3lab.engines.sglang.sglang_resolver import LAUNCH_FLAGS, SWITCH_FLAGS, VALUE_FLAGS

    actions = {flag: a for flag, a in sglang_parser._option_string_actions.items() if flag.startswith("--")}
    assert sorted(set(actions) - LAUNCH_FLAGS) == []
    switches = {flag for flag, a in actions.items() if a.nargs == 0}
    assert sorted(switches - SWITCH_FLAGS) == [] and sorted((set(actions) - switches) - VALUE_FLAGS) == []

"""The notebooks' vLLM experiments that need no running server: what the lab's switches mean on
vLLM, what vLLM runs for the seed's flag sets, and eagle3lab's own launch argv read back by the
vLLM rules."""

from __future__ import annotations

import pytest

from eagle3lab.engines.vllm import launch as vllm_launch
from eagle3lab import experiments
from eagle3lab.serving import server
from eagle3lab.engines.vllm import experiments as experiments_vllm
from eagle3lab.engines.vllm import vllm_rules
from eagle3lab.spec import SpecConfig


@pytest.fixture(scope="module")
def lab():
    from eagle3lab.lab import load_lab

    return load_lab("ci")


def test_the_wiring_switches_become_ids_and_other_faults_are_refused(lab):
    seed = lab.draft_dir("seed")
    assert experiments_vllm.config_ids(seed) == [1, 3, 4]            # nested, as the lab writes it
    assert experiments_vllm.trained_boundaries(seed) == [0, 2, 4]
    assert experiments_vllm.layer_ids_for(["wiring-seed"], seed, lab.num_layers) is None
    assert experiments_vllm.layer_ids_for(["embed-patch"], seed, lab.num_layers) == [0, 2, 4]
    assert experiments_vllm.fed_boundaries(seed, lab.num_layers) == [1, 3, 4]   # id = boundary
    with pytest.raises(experiments_vllm.VllmExperimentError, match="switches of the lab engine"):
        experiments_vllm.layer_ids_for(["quant-int4"], seed, lab.num_layers)


def test_a_notebook_point_becomes_a_vllm_launch(lab):
    draft, spec = experiments_vllm.launch_spec(
        {"num_steps": 5, "topk": 1, "num_draft_tokens": 6, "fault": ["embed-patch"], "draft": "seed"}, lab)
    assert draft == lab.draft_dir("seed")
    assert spec == {"num_steps": 5, "topk": 1, "num_draft_tokens": 6, "draft_layer_ids": [0, 2, 4]}
    assert experiments_vllm.launch_spec({"baseline": True}, lab) == (None, {})


def test_what_vllm_runs_for_the_seeds_flag_sets(lab):
    table = experiments_vllm.resolve_flag_sets(experiments.SEED_FLAG_SETS, lab.target_dir,
                                               lab.draft_dir("seed"))
    assert table["num_speculative_tokens"].tolist() == [1, 15, 5]     # k = num_steps
    assert table["num_draft_tokens"].tolist() == [2, 16, 6]
    assert table["draft max_model_len"].tolist() == [512] * 3         # cut from the draft's 1024
    assert all("draft_max_model_len: 1024 -> 512" in c[0] for c in table["silent changes"])
    tree = experiments_vllm.resolve_flag_sets({"tree": SpecConfig(num_steps=3, topk=4, num_draft_tokens=8)},
                                              lab.target_dir, lab.draft_dir("seed"))
    assert "chain" in tree.loc["tree", "refused"]


def test_eagle3labs_own_vllm_argv_is_read_by_the_vllm_rules(lab):
    """`--per-request-spec-decode-metrics` (added to every launch with a draft) used to be refused."""
    argv = vllm_launch.build_vllm_command(lab.target_dir, lab.draft_dir("healthy"), {"num_steps": 3}, gpu=False)
    assert "--per-request-spec-decode-metrics" in argv
    args = vllm_rules.parse_vllm_flags(argv[3:])
    assert args.speculative_config["num_speculative_tokens"] == 3 and args.max_model_len == 512


def test_chain_grid_and_fix_labels():
    chains, trees = experiments_vllm.chain_grid(experiments.config_grid([1, 3], [(3, 2, 6)]))
    assert chains == [(1, 1, 2), (3, 1, 4)] and trees == [(3, 2, 6)]
    assert experiments.fix_labels("vllm")[1].endswith("(the fix on vLLM, no patch)")
    assert experiments.serve_engine(None, "vllm") == ("vllm", "0.32.0")
    assert experiments.serve_engine(None, "lab")[0] == "sglang"


def test_a_failed_launch_stops_the_servers_already_started(lab, monkeypatch):
    """One launch raising (any error) must not leave the others running: all are entered in the
    stack, so leaving it stops them."""
    import contextlib

    stopped = []

    class Fake:
        def __init__(self, name):
            self.name, self.url = name, f"http://fake/{name}"

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            stopped.append(self.name)

    def launch(backend, model, draft, spec=None, **_):
        if spec and spec.get("num_steps") == 3:
            raise ValueError("boom")
        return Fake(spec.get("num_steps") if spec else "baseline")

    monkeypatch.setattr(server, "launch", launch)
    points = {"a": {"num_steps": 1, "draft": "healthy"}, "b": {"num_steps": 3, "draft": "healthy"},
              "c": {"num_steps": 5, "draft": "healthy"}}
    with pytest.raises(ValueError, match="boom"):
        with contextlib.ExitStack() as stack:
            experiments_vllm.launch_all(points, lab, stack)
    assert sorted(map(str, stopped)) == ["1", "5", "baseline"]

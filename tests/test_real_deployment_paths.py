"""The paths a user's real deployment takes (issue 15, item 8), each of which broke before."""

from __future__ import annotations

import json

import pytest

from eagle3lab import experiments
from eagle3lab.serving import loadtest
from eagle3lab.serving import server
from eagle3lab.spec import SpecConfig
from eagle3lab.paths import lab_dir


@pytest.fixture(scope="module")
def ci_lab():
    from eagle3lab.lab import load_lab

    return load_lab("ci")


def test_notebook_01_on_sglang_without_draft_dir_launches_the_labs_draft(ci_lab, monkeypatch):
    """BACKEND="sglang", DRAFT_DIR=None: the flag sets are served with the lab's seed draft (the
    draft used to be dropped on the way to the launch, so SGLang ran without one)."""
    argvs = []

    def record(backend, model_path=None, draft_path=None, spec=None, **kw):
        argvs.append(server.build_command(backend, model_path, draft_path, spec, port=30000))
        raise server.ServerStartError("recorded, not started", 1, "")

    monkeypatch.setattr(server, "launch", record)
    flags = {"as asked": SpecConfig(algorithm="EAGLE3", num_steps=3, topk=1, num_draft_tokens=4)}
    experiments.measure_flag_sets(flags, lab="ci", backend="sglang", draft="seed", num_prompts=1,
                                  max_new_tokens=8)
    speculative = [a for a in argvs if "--speculative-algorithm" in a]
    assert len(speculative) == 1 and len(argvs) == 2  # the flag set, then the baseline
    argv = speculative[0]
    assert argv[argv.index("--speculative-draft-model-path") + 1] == str(lab_dir("ci") / "drafts" / "seed")
    assert "--fault" not in argv
    baseline = [a for a in argvs if a is not argv][0]
    assert "--speculative-draft-model-path" not in baseline


LAB_LIMITS = ["--max-prompt-tokens", "512", "--max-new-tokens", "64"]  # text prompts of 600 characters


def test_readme_server_urls_sweep_over_two_running_servers(ci_lab, tmp_path):
    """The README's SERVER_URLS example: two servers with fixed settings, a notebook-05 grid with
    more points than they run. It raised (no server for most points, nor for the baseline); now
    the points the servers run are measured, the others skipped, and a rerun resumes."""
    draft = ci_lab.draft_dir("healthy")
    with server.launch("lab", ci_lab.target_dir, draft, spec={"num_steps": 3, "topk": 1, "num_draft_tokens": 4},
                       extra_args=LAB_LIMITS, timeout=180) as a, \
            server.launch("lab", ci_lab.target_dir, draft, spec={"num_steps": 5, "topk": 1, "num_draft_tokens": 6},
                          extra_args=LAB_LIMITS, timeout=180) as b:
        grid = experiments.config_grid([1, 3, 5], [(3, 2, 6)])
        out = tmp_path / "sweep.jsonl"
        frame = experiments.config_sweep(grid, lab="ci", urls=[a.url, b.url], file=out, num_prompts=2,
                                         max_new_tokens=16)
        assert sorted(zip(frame["num_steps"], frame["url"])) == [(3, a.url), (5, b.url)]
        assert not frame["failed"].any(), frame["error"].tolist()
        assert frame["accept_length"].gt(1.0).all()
        assert frame["baseline_tokens_per_s"].isna().all()  # no server runs without speculation
        assert frame["speedup"].isna().all()
        recorded = [json.loads(line) for line in out.read_text().splitlines()]
        assert len(recorded) == 2  # skipped points are not recorded: other servers may run them
        again = experiments.config_sweep(grid, lab="ci", urls=[a.url, b.url], file=out, num_prompts=2,
                                         max_new_tokens=16)
        assert len(out.read_text().splitlines()) == 2 and len(again) == 2
        # with a server that runs none of the points the sweep says so
        with pytest.raises(loadtest.LoadTestError, match="no running server runs any"):
            experiments.config_sweep([(7, 1, 8)], lab="ci", urls=[a.url], num_prompts=1, max_new_tokens=8)


@pytest.mark.parametrize("backend", ["sglang", "vllm"])
def test_bench_with_a_fault_on_a_real_engine_is_refused_before_launching(backend, monkeypatch, capsys):
    """`eagle3lab bench --backend sglang --baseline --fault X` used to pass --fault to SGLang (for
    the run and the baseline); faults are lab switches, so the command now refuses them."""
    from eagle3lab.cli import main

    def never(*a, **kw):
        raise AssertionError("a server was launched")

    monkeypatch.setattr(server, "launch", never)
    code = main(["bench", "--backend", backend, "--model-path", "/models/target", "--draft", "/models/draft",
                 "--num-steps", "3", "--baseline", "--fault", "quant-int4"])
    assert code == 2
    assert "faults are switches of the lab engine" in capsys.readouterr().err

"""The doctor claims no more than its evidence: no exact wiring fix the weights do not single out,
the target's own architecture, a draft that will not load is a check that could not run (static
findings kept), the server diagnosis says when it could not run, and no confidence is printed."""

from __future__ import annotations

import json
import shutil

import pytest

from eagle3lab.doctor import doctor


@pytest.fixture(scope="module")
def seed_report(lab_root):
    return doctor(lab_root / "drafts" / "seed", target=lab_root / "target", serve="sglang==0.5.23",
                  max_positions=1000)


def _empirical_wiring(report):
    return [f for f in report.findings if f.source == "empirical" and f.cause == "wiring"]


def test_an_unsettled_wiring_fix_names_candidates_and_the_commands(seed_report, lab_root):
    wiring = _empirical_wiring(seed_report)[0]
    inferred = seed_report.facts["inferred"]
    assert "neighbours_rejected" not in inferred
    if inferred["singled_out"]:  # the weights confirm training's set: the exact ids, said so
        assert wiring.fix.endswith("(the weights confirm training's set)")
        return
    assert "write eagle_config" not in wiring.fix and "do not single out one set" in wiring.fix
    candidates = wiring.data["candidates"]
    # the training set the config records comes first, with the ids that serve it (SGLang 0.5.23
    # captures the embedding for id -1 without the patch)
    assert candidates[0]["boundaries"] == [0, 2, 4] and candidates[0]["ids"] == [-1, 1, 3]
    assert not candidates[0]["patched"] and 1 < len(candidates) <= 3
    assert wiring.data["fed"] not in [c["boundaries"] for c in candidates]
    for c in candidates:
        command = (f"eagle3lab bench --backend sglang --model-path {lab_root / 'target'} --draft "
                   f"{lab_root / 'drafts' / 'seed'} --draft-layer-ids={','.join(map(str, c['ids']))}")
        assert command in wiring.fix


def test_no_output_shows_a_confidence(seed_report):
    text = str(seed_report)
    assert "confidence" not in text
    assert "confidence" not in seed_report.to_frame().columns
    assert all("confidence" not in f and "weight" not in f for f in json.loads(seed_report.to_json())["findings"])


def test_the_empirical_check_uses_the_targets_architecture(lab_root, tmp_path):
    """Ids [0, 2, 4]: SGLang 0.5.23 feeds [1, 3, 5] for a Llama target but [0, 2, 4] for a DeepSeek
    one (deepseek_v2.py takes ids as they are unless the first is 1). The copy of the ci target
    says DeepseekV3ForCausalLM in `architectures` (transformers still loads it by model_type)."""
    target = shutil.copytree(lab_root / "target", tmp_path / "target")
    config = json.loads((target / "config.json").read_text())
    config["architectures"] = ["DeepseekV3ForCausalLM"]
    (target / "config.json").write_text(json.dumps(config))
    draft = shutil.copytree(lab_root / "drafts" / "seed", tmp_path / "draft")
    dconfig = json.loads((draft / "config.json").read_text())
    dconfig["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = [0, 2, 4]
    dconfig["eagle3lab"]["target"] = str(target)
    (draft / "config.json").write_text(json.dumps(dconfig))
    report = doctor(draft, target=target, serve="sglang==0.5.23", max_positions=500)
    assert report.facts["fed"]["sglang==0.5.23"] == [0, 2, 4]
    assert [f.data["fed"] for f in _empirical_wiring(report)] == [[0, 2, 4]]
    assert not [f for f in report.errors if f.cause == "wiring"]


def _could_not_run(report) -> str:
    return {c.check: c.detail for c in report.checks if not c.ran}["empirical wiring"]


def test_a_sharded_draft_is_a_check_that_could_not_run(lab_root, tmp_path):
    from safetensors.torch import load_file, save_file

    draft = shutil.copytree(lab_root / "drafts" / "healthy", tmp_path / "d")
    state = load_file(str(draft / "model.safetensors"))
    names = sorted(state)
    (draft / "model.safetensors").unlink()
    save_file({k: state[k] for k in names[:3]}, str(draft / "model-00001-of-00002.safetensors"))
    save_file({k: state[k] for k in names[3:]}, str(draft / "model-00002-of-00002.safetensors"))
    static = doctor(draft, target=lab_root / "target", serve="sglang==0.5.23", empirical=False)
    report = doctor(draft, target=lab_root / "target", serve="sglang==0.5.23")
    assert "merge the shards" in _could_not_run(report)
    assert [(f.cause, f.severity, f.title) for f in report.findings] == \
        [(f.cause, f.severity, f.title) for f in static.findings]


def test_a_draft_whose_shapes_do_not_load_is_a_check_that_could_not_run(lab_root, tmp_path):
    from safetensors.torch import load_file, save_file

    draft = shutil.copytree(lab_root / "drafts" / "healthy", tmp_path / "d")
    state = load_file(str(draft / "model.safetensors"))
    name = next(k for k in state if k.startswith("midlayer.") and state[k].dim() == 2)
    state[name] = state[name][:, :-1].contiguous()
    save_file(state, str(draft / "model.safetensors"))
    report = doctor(draft, target=lab_root / "target", serve="sglang==0.5.23")
    assert _could_not_run(report).startswith("the lab cannot load this draft (RuntimeError")
    assert any(f.source == "checkpoint" for f in report.findings)


def test_a_safetensors_header_that_is_not_an_object_is_a_clear_error(lab_root, tmp_path, capsys):
    from eagle3lab.cli import main

    draft = shutil.copytree(lab_root / "drafts" / "healthy", tmp_path / "d")
    header = b"[1, 2]"
    (draft / "model.safetensors").write_bytes(len(header).to_bytes(8, "little") + header)
    assert main(["doctor", "--draft", str(draft), "--static"]) == 2
    assert "JSON but not an object (list)" in capsys.readouterr().err


def test_a_failing_server_diagnosis_says_it_could_not_run(monkeypatch):
    from eagle3lab.acceptance import diagnosis
    from eagle3lab.doctor import server_probe as served
    from eagle3lab.errors import EagleLabError

    seen = []

    def fails(obs, **kwargs):
        seen.append(kwargs["temperature"])
        raise EagleLabError("no rates")

    monkeypatch.setattr(diagnosis, "diagnose", fails)
    findings, status = served._statistics(object(), {}, ours=True)
    assert findings == [] and not status.ran and "no rates" in status.detail
    served._statistics(object(), {}, ours=False)
    assert seen == [0.0, None]  # the server's own traffic: temperature unknown, not 0

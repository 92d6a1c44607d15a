"""eagle3lab doctor: static checks on the ci lab and on hand-made checkpoints, the empirical
wiring inference on the ci lab, the CLI, and the checkpoint-level lab faults."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from eagle3lab.cli import main
from eagle3lab.doctor import DoctorInputError, doctor
from eagle3lab.doctor.empirical import MATERIAL_ACC_DROP, mcnemar_p, paired_loss_p
from eagle3lab.doctor.formats import read_draft_spec
from eagle3lab.doctor.labfaults import write_faulty_draft, write_faulty_target


def static(draft, target, serve="sglang==0.5.23"):
    return doctor(draft, target=target, serve=serve, empirical=False)


def causes(report, severity="error"):
    return sorted({f.cause for f in report.findings if f.severity == severity})


# --------------------------------------------------------------------------- static, lab drafts


@pytest.mark.parametrize("name", ["healthy", "no-ttt"])
def test_healthy_drafts_raise_no_error_on_sglang(lab_root, name):
    report = static(lab_root / "drafts" / name, lab_root / "target")
    assert report.errors == [] and report.exit_code == 0
    fed = report.facts["fed"]["sglang==0.5.23"]
    assert fed == [2, 4, 5] == report.facts["trained"]


def test_seed_draft_wiring_error_names_the_ids(lab_root):
    report = static(lab_root / "drafts" / "seed", lab_root / "target")
    assert report.exit_code == 1
    top = report.findings[0]
    assert (top.cause, top.severity, top.source) == ("wiring", "error", "checkpoint")
    assert top.data == {"fed": [2, 4, 5], "trained": [0, 2, 4]}
    assert top.fix == "write eagle_config.eagle_aux_hidden_state_layer_ids = [-1, 1, 3]"


def test_vllm_reads_sglang_ids_raw(lab_root):
    report = static(lab_root / "drafts" / "healthy", lab_root / "target", serve="vllm==0.33.0")
    assert report.facts["fed"]["vllm==0.33.0"] == [1, 3, 4]
    assert report.errors[0].fix == "write eagle_config.eagle_aux_hidden_state_layer_ids = [2, 4, 5]"


def test_no_serve_reports_each_engine_as_a_warning(lab_root):
    report = static(lab_root / "drafts" / "healthy", lab_root / "target", serve=None)
    assert report.errors == []
    titles = [f.title for f in report.findings if f.severity == "warning"]
    assert titles == ["if served by vllm==0.33.0 feeds [1, 3, 4], training used [2, 4, 5]"]


def test_frame_and_json_agree(lab_root):
    report = static(lab_root / "drafts" / "seed", lab_root / "target")
    frame = report.to_frame()
    data = json.loads(report.to_json())
    assert list(frame["cause"]) == [f["cause"] for f in data["findings"]]
    assert list(frame["rank"]) == list(range(1, len(frame) + 1))
    assert data["exit_code"] == 1
    assert frame.iloc[0]["severity"] == "error"


# --------------------------------------------------------------------------- checkpoint faults


def test_no_aux_ids_fault(lab_root, tmp_path):
    draft = write_faulty_draft(lab_root, "no-aux-ids", tmp_path / "d")
    report = static(draft, lab_root / "target")
    wiring = [f for f in report.errors if f.cause == "wiring"]
    assert wiring and wiring[0].data == {"fed": [2, 4, 5], "trained": [0, 2, 4]}
    assert any(f.title.startswith("no aux layer ids") for f in report.findings)


def test_rope_theta_fault(lab_root, tmp_path):
    draft = write_faulty_draft(lab_root, "rope-theta", tmp_path / "d")
    report = static(draft, lab_root / "target")
    assert causes(report) == ["rope"]
    assert report.errors[0].fix == "set the draft's rope_theta to 10000 (the value it was trained with)"


def test_lm_head_target_fault(lab_root, tmp_path):
    draft = write_faulty_draft(lab_root, "lm-head-target", tmp_path / "d")
    report = static(draft, lab_root / "target")
    assert causes(report) == ["lm_head"]
    assert report.errors[0].data["identical_rows"] == 1.0
    healthy = static(lab_root / "drafts" / "healthy", lab_root / "target")
    assert "lm_head" not in causes(healthy)
    assert [c for c in healthy.checks if c.check == "lm_head vs target"][0].detail == \
        "0.0% of rows identical to the target's"


def test_missing_d2t_is_an_error(lab_root, tmp_path):
    from safetensors.torch import load_file, save_file

    draft = shutil.copytree(lab_root / "drafts" / "healthy", tmp_path / "d")
    state = load_file(str(draft / "model.safetensors"))
    del state["d2t"]
    save_file(state, str(draft / "model.safetensors"))
    report = static(draft, lab_root / "target")
    assert causes(report) == ["vocab_mapping"]


def test_checkpoint_faults_change_what_is_served(lab_root):
    from eagle3lab.decoder.faults import apply_draft_faults, plan_faults
    from eagle3lab.lab.built import Lab

    lab = Lab(lab_root)
    plan = plan_faults(["no-aux-ids"], lab.num_layers)
    assert plan.draft_name == "seed"
    assert plan.boundaries(lab.load_draft("seed"), lab.num_layers) == [2, 4, 5]
    draft = lab.load_draft("healthy")
    broken = apply_draft_faults(draft, lab.target, plan_faults(["lm-head-target", "rope-theta"], lab.num_layers))
    head = lab.target.get_output_embeddings().weight[draft.target_ids]
    assert torch.equal(broken.lm_head.weight, head)
    assert not torch.equal(draft.lm_head.weight, head)
    assert broken.midlayer.self_attn.rotary.inv_freq[1] != draft.midlayer.self_attn.rotary.inv_freq[1]


# --------------------------------------------------------------------------- hand-made configs


def speculators_config(ids, hidden=64, layers=8, theta=10000.0):
    """config.json as speculators 0.9.0 writes it (Eagle3SpeculatorConfig.to_dict, speculators/
    config.py and models/eagle3/config.py; the converter builds transformer_layer_config as a
    LlamaConfig, convert/eagle/eagle3_converter.py)."""
    return {
        "architectures": ["Eagle3Speculator"], "speculators_model_type": "eagle3",
        "speculators_version": "0.9.0", "draft_vocab_size": 512, "norm_before_residual": False,
        "target_hidden_size": None, "eagle_aux_hidden_state_layer_ids": ids, "norm_before_fc": False,
        "fc_norm": False, "norm_output": False, "embed_requires_grad": False,
        "transformer_layer_config": {"model_type": "llama", "vocab_size": 1024, "hidden_size": hidden,
                                     "intermediate_size": 192, "num_hidden_layers": 1,
                                     "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 32,
                                     "max_position_embeddings": 1024, "rope_theta": theta,
                                     "tie_word_embeddings": False},
        "speculators_config": {"algorithm": "eagle3", "default_proposal_method": "greedy",
                               "proposal_methods": [{"proposal_type": "greedy", "speculative_tokens": 3}],
                               "verifier": {"name_or_path": "target", "architectures": ["LlamaForCausalLM"]}},
    }


def write_draft(path, config, tensors):
    from safetensors.torch import save_file

    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps(config))
    save_file(tensors, str(path / "model.safetensors"))
    return path


def spec_tensors(hidden=64, slots=3):
    d2t = torch.arange(512) * 1  # draft id i -> target id 2i
    t2d = torch.zeros(1024, dtype=torch.bool)
    t2d[torch.arange(512) * 2] = True
    return {"fc.weight": torch.zeros(hidden, slots * hidden, dtype=torch.float16),
            "layers.0.hidden_norm.weight": torch.ones(hidden, dtype=torch.float16),
            "lm_head.weight": torch.zeros(512, hidden, dtype=torch.float16), "d2t": d2t, "t2d": t2d}


def test_speculators_layout_is_read(tmp_path, lab_root):
    draft = write_draft(tmp_path / "d", speculators_config([2, 4, 5]), spec_tensors())
    spec = read_draft_spec(draft)
    assert (spec.layout, spec.hidden_size, spec.vocab_size, spec.draft_vocab_size, spec.slots) == \
        ("speculators", 64, 1024, 512, 3)
    assert spec.ids == {"top_level": [2, 4, 5]}
    report = doctor(draft, target=lab_root / "target", serve="vllm==0.33.0", empirical=False)
    assert report.facts["fed"]["vllm==0.33.0"] == [2, 4, 5]
    assert report.errors == []
    sglang = doctor(draft, target=lab_root / "target", serve="sglang==0.5.23", empirical=False)
    assert sglang.facts["fed"]["sglang==0.5.23"] == [2, 4, 5]  # top-level ids ignored: the default
    assert "empirical" not in {f.source for f in sglang.findings}


def test_speculators_norm_flags_exclusive(tmp_path):
    config = speculators_config([1, 4, 6])
    config["norm_before_fc"] = config["fc_norm"] = True
    draft = write_draft(tmp_path / "d", config, spec_tensors())
    report = doctor(draft, serve="vllm==0.33.0", empirical=False)
    assert [f.title for f in report.errors][0] == "norm_before_fc and fc_norm are both set"
    skipped = {c.check: c.detail for c in report.checks if not c.ran}
    assert skipped["wiring (config)"].startswith("target layer count unknown")


def test_rope_and_context_from_transformer_layer_config(tmp_path, lab_root):
    config = speculators_config([2, 4, 5], theta=500000.0)
    config["transformer_layer_config"]["max_position_embeddings"] = 512
    draft = write_draft(tmp_path / "d", config, spec_tensors())
    report = doctor(draft, target=lab_root / "target", serve="vllm==0.33.0", empirical=False)
    assert causes(report) == ["rope"]
    assert "context_length" in causes(report, "warning")


def test_bad_input_is_a_clear_error(tmp_path):
    with pytest.raises(DoctorInputError, match="not found"):
        doctor(tmp_path / "missing")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "config.json").write_text("[1, 2]")
    with pytest.raises(DoctorInputError, match="not a JSON object"):
        doctor(tmp_path / "d")


def test_cli(lab_root, capsys, tmp_path):
    code = main(["doctor", "--draft", str(lab_root / "drafts" / "seed"), "--target", str(lab_root / "target"),
                 "--serve", "sglang==0.5.23", "--static", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 1 and out["findings"][0]["cause"] == "wiring"
    code = main(["doctor", "--draft", str(lab_root / "drafts" / "healthy"), "--target",
                 str(lab_root / "target"), "--serve", "sglang==0.5.23", "--static"])
    text = capsys.readouterr().out
    assert code == 0 and "0 error(s)" in text
    assert main(["doctor", "--draft", str(tmp_path / "nope")]) == 2
    assert "eagle3lab: error: draft directory" in capsys.readouterr().err


# --------------------------------------------------------------------------- tests of significance


def test_mcnemar_exact():
    a = torch.tensor([True] * 10 + [False] * 5)
    b = torch.tensor([False] * 10 + [False] * 5)
    p, n10, n01 = mcnemar_p(a, b)
    assert (n10, n01) == (10, 0) and p == pytest.approx(2 / 2 ** 10)
    assert mcnemar_p(a, a)[0] == 1.0


def test_paired_loss_test_over_windows():
    a = torch.zeros(8 * 4)
    # only the all-same-sign flips reach the observed difference: 2 of 2**8 sign patterns
    assert paired_loss_p(a, a + 1.0, 8) == pytest.approx(2 / 2 ** 8, abs=3e-3)
    noise = torch.tensor([1.0, -1.0] * 16)
    assert paired_loss_p(a, noise, 8) == 1.0


# --------------------------------------------------------------------------- empirical, ci lab


@pytest.fixture(scope="module")
def seed_report(lab_root):
    return doctor(lab_root / "drafts" / "seed", target=lab_root / "target", serve="sglang==0.5.23",
                  max_positions=1000)


def test_empirical_names_the_embedding_slot_of_the_seed(seed_report):
    wiring = [f for f in seed_report.findings if f.source == "empirical" and f.cause == "wiring"][0]
    assert wiring.severity == "error"
    assert wiring.data["best"][0] == 0 and wiring.data["fed"] == [2, 4, 5]
    # the claim, on any CPU: what is fed costs acc@1 materially (the finding's own threshold; measured
    # 0.27 on the shipped ci lab with AVX2 kernels, 0.09 on a ci lab trained with AVX-512 kernels)
    drop = wiring.data["acc_best"] - wiring.data["acc_fed"]
    assert drop >= MATERIAL_ACC_DROP, f"acc@1 best {wiring.data['acc_best']:.3f} - fed {wiring.data['acc_fed']:.3f}"
    ran = {c.check: c for c in seed_report.checks}
    assert ran["empirical wiring"].ran


def test_empirical_vocab_map_helps(seed_report):
    vm = seed_report.facts["vocab_map"]
    assert vm["acc1_with_d2t"] > vm["acc1_without_d2t"] + 0.1


def test_empirical_says_why_it_could_not_run(lab_root):
    no_target = doctor(lab_root / "drafts" / "healthy", serve="sglang==0.5.23")
    assert {c.check: c.detail for c in no_target.checks}["empirical wiring"] == \
        "no target given (--target): nothing to run"
    small = doctor(lab_root / "drafts" / "healthy", target=lab_root / "target", serve="sglang==0.5.23",
                   memory_budget_bytes=1000)
    detail = {c.check: c.detail for c in small.checks}["empirical wiring"]
    assert "this machine offers" in detail


# --------------------------------------------------------------------------- flags and logs


def test_flags_and_log_join_the_report(lab_root):
    from eagle3lab.paths import SAMPLES_DIR

    log = SAMPLES_DIR / "logs" / "sglang_warning_num_draft_tokens_adjusted_SOURCE_STRING.txt"
    report = doctor(lab_root / "drafts" / "healthy", target=lab_root / "target", serve="sglang==0.5.23",
                    empirical=False, flags="--speculative-algorithm EAGLE3 --speculative-num-steps 1 "
                                           "--speculative-eagle-topk 1 --speculative-num-draft-tokens 16",
                    log=log)
    adjusted = [f for f in report.findings if f.cause == "config_adjusted"]
    assert {f.source for f in adjusted} == {"config", "log"}
    assert report.exit_code == 1
    assert {c.check for c in report.checks if c.ran} >= {"flags", "log"}


def test_empirical_rope_check_prefers_the_target_base(lab_root, tmp_path):
    draft = write_faulty_draft(lab_root, "rope-theta", tmp_path / "d")
    report = doctor(draft, target=lab_root / "target", serve="sglang==0.5.23", max_positions=600)
    rope = report.facts["rope"]
    # the static check names the wrong base from the configs alone; the empirical one measures both
    assert [f.source for f in report.findings if f.cause == "rope"] == ["checkpoint", "empirical"]
    # measured on the shipped ci lab: acc@1 0.646 with the target's base vs 0.630 with the draft's
    # (10 of ~600 positions; p = 0.15, so the empirical finding is not an error). Last-bit float
    # differences between CPU kernels move a position or two, not ten.
    gap = rope["acc1_target_theta"] - rope["acc1_config_theta"]
    assert gap > 0.005, f"target base {rope['acc1_target_theta']:.4f} vs config base {rope['acc1_config_theta']:.4f}"
    empirical = [f for f in report.findings if f.cause == "rope" and f.source == "empirical"][0]
    assert (empirical.severity == "error") is (rope["p"] < 0.05)


def test_embed_patch_checkpoint_is_served_as_trained(lab_root, tmp_path):
    draft = write_faulty_draft(lab_root, "embed-patch", tmp_path / "d")
    report = static(draft, lab_root / "target")
    assert report.errors == [] and report.facts["fed"]["sglang==0.5.23"] == [0, 2, 4]


def test_the_package_is_a_plain_module_and_doctor_its_function(lab_root):
    import types

    import eagle3lab.doctor.static  # noqa: F401  (a submodule import leaves the function in place)
    from eagle3lab.doctor import doctor as run

    assert type(eagle3lab.doctor) is types.ModuleType and eagle3lab.doctor.doctor is run
    report = run(lab_root / "drafts" / "healthy", lab_root / "target", "sglang==0.5.23", empirical=False)
    assert report.exit_code == 0


def test_no_serve_seed_is_an_error_for_every_engine(lab_root):
    report = static(lab_root / "drafts" / "seed", lab_root / "target", serve=None)
    wiring = [f for f in report.errors if f.cause == "wiring"]
    assert [f.title for f in wiring] == ["if served by sglang==0.5.23 feeds [2, 4, 5], training used [0, 2, 4]",
                                         "if served by vllm==0.33.0 feeds [1, 3, 4], training used [0, 2, 4]"]


# --------------------------------------------------------------------------- chat template (prompt format)

QWEN_RENDERED = ("'<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n<|im_start|>user\\n{message}"
                 "<|im_end|>\\n<|im_start|>assistant\\n'")


@pytest.fixture(scope="module")
def chat_fault(lab_root, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("chat")
    return (write_faulty_draft(lab_root, "chat-template", tmp / "draft"),
            write_faulty_target(lab_root, "chat-template", tmp / "target"))


def heldout(lab_root, n=9):
    return [json.loads(line)["text"] for line in (lab_root / "heldout.jsonl").read_text().splitlines()][:n]


def test_chat_template_fault_is_written_on_both_sides(lab_root, chat_fault):
    from eagle3lab.wiring.chat_templates import QWEN2_CHATML

    draft, target = chat_fault
    assert json.loads((draft / "config.json").read_text())["eagle3lab"]["chat_template"] == ""
    assert json.loads((target / "tokenizer_config.json").read_text())["chat_template"] == QWEN2_CHATML
    assert write_faulty_target(lab_root, "rope-theta", draft.parent / "unused") == lab_root / "target"


def test_chat_template_static_names_both_sides(lab_root, chat_fault):
    from eagle3lab.wiring.chat_templates import QWEN2_CHATML

    draft, target = chat_fault
    report = static(draft, target)
    assert report.exit_code == 0 and causes(report, "warning") == ["template"]
    found = [f for f in report.findings if f.cause == "template"][0]
    assert found.data == {"trained": "", "served": QWEN2_CHATML}
    assert found.evidence == ("training format raw text (no template) (recorded in the draft config, "
                              f"eagle3lab.chat_template); served: {QWEN_RENDERED} (the target's "
                              "tokenizer_config.json chat_template, 328 characters)")
    assert found.fix.startswith("send prompts as the draft was trained: raw text to /generate or /v1/completions")
    as_trained = static(draft, lab_root / "target")  # the lab target has no template: raw, as trained
    assert "template" not in causes(as_trained, "warning")
    assert {c.check: c.detail for c in as_trained.checks}["chat template"] == \
        "served as trained: raw text (no template)"


def test_chat_template_empirical_measures_both_formats(lab_root, chat_fault):
    """On the ci lab the served format is drafted *better*: its target answers ChatML with newlines."""
    draft, target = chat_fault
    report = doctor(draft, target=target, serve="sglang==0.5.23", prompts=heldout(lab_root), max_positions=600)
    fmt = report.facts["prompt_format"]
    assert (fmt["prompts"], fmt["positions"]) == (9, 576)  # 9 prompts x 64 positions: fixed by the data
    # measured on the shipped ci lab: acc@1 1.0 served vs 0.72 in the training format, p = 0.0025
    assert fmt["acc1_served"] - fmt["acc1_trained"] > 0.1 and fmt["p"] < 0.05, \
        f"served {fmt['acc1_served']:.4f} vs trained {fmt['acc1_trained']:.4f}, p = {fmt['p']:.3g}"
    found = [f for f in report.findings if f.cause == "template" and f.source == "empirical"]
    assert [f.severity for f in found] == ["info"]
    assert found[0].title == "your prompts as served are drafted no worse than in the training format"
    assert report.exit_code == 0


def test_chat_template_empirical_error_when_served_is_worse(lab_root, tmp_path):
    """The mirror image: a draft recorded as trained on ChatML, served raw (a target without a chat
    template): the served format is significantly worse, an error with the measured numbers."""
    from eagle3lab.wiring.chat_templates import QWEN2_CHATML

    draft = write_faulty_draft(lab_root, "chat-template", tmp_path / "d")
    config = json.loads((draft / "config.json").read_text())
    config["eagle3lab"]["chat_template"] = QWEN2_CHATML
    (draft / "config.json").write_text(json.dumps(config))
    report = doctor(draft, target=lab_root / "target", serve="sglang==0.5.23", prompts=heldout(lab_root),
                    max_positions=600)
    top = [f for f in report.errors if f.cause == "template"]
    assert [f.source for f in top] == ["empirical"]
    served, trained = top[0].data["acc1_served"], top[0].data["acc1_trained"]
    assert trained - served > 0.1 and top[0].data["p"] < 0.05, \
        f"served {served:.4f} vs trained {trained:.4f} (measured 0.72 vs 1.0 on the shipped ci lab)"
    assert top[0].fix == ("serve the prompts in the training template, or retrain the draft on data rendered "
                          "with the served template")
    assert report.exit_code == 1


@pytest.mark.parametrize("name", ["healthy", "seed", "no-ttt"])
def test_prompt_format_no_false_alarm_on_lab_drafts(lab_root, name):
    from eagle3lab.doctor.empirical import prompt_format
    from eagle3lab.doctor.formats import read_draft_spec, read_target_spec

    report = static(lab_root / "drafts" / name, lab_root / "target")
    assert "template" not in {f.cause for f in report.findings}
    facts = {}
    found, status = prompt_format(None, None, None, [2, 4, 5], read_draft_spec(lab_root / "drafts" / name),
                                  read_target_spec(lab_root / "target"), heldout(lab_root), 64, facts)
    assert found == [] and facts == {} and not status.ran
    assert status.detail == "served as trained (raw text (no template), assumed: none recorded): nothing to compare"


def test_seed_report_prompt_format_did_not_run(seed_report):
    assert "template" not in {f.cause for f in seed_report.findings}
    assert {c.check: c.detail for c in seed_report.checks}["prompt format"] == \
        "served as trained (raw text (no template), assumed: none recorded): nothing to compare"

"""wiring.check on synthetic draft checkpoints, the seed's case, bad input, the CLI, wiring_matrix."""

import json

import pytest
import torch
from safetensors.torch import save_file

from eagle3lab.cli import main
from eagle3lab.wiring.boundaries import ConventionError
from eagle3lab.errors import EagleLabError
from eagle3lab.wiring.slots import (WiringInputError, check, match_boundaries, plot_wiring_matrix, read_draft,
                              wiring_matrix)

H, DRAFT_VOCAB, VOCAB = 16, 8, 40


def make_draft(root, name, ids=None, *, top_level=None, fc_width=3 * H, weights=True, recorded=None,
               consistent=True, extra=None):
    """A draft dir: config.json (+ model.safetensors with fc.weight, d2t, t2d)."""
    path = root / name
    path.mkdir()
    config = {"architectures": ["LlamaForCausalLMEagle3"], "hidden_size": H,
              "draft_vocab_size": DRAFT_VOCAB, "vocab_size": VOCAB}
    if ids is not None:
        config["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": ids}
    if top_level is not None:
        config["eagle_aux_hidden_state_layer_ids"] = top_level
    if recorded is not None:
        config["eagle3lab"] = {"train_boundaries": recorded}
    config.update(extra or {})
    (path / "config.json").write_text(json.dumps(config))
    if weights:
        target_ids = torch.arange(DRAFT_VOCAB) * 5
        t2d = torch.zeros(VOCAB, dtype=torch.bool)
        t2d[target_ids if consistent else target_ids + 1] = True
        save_file({"fc.weight": torch.zeros(H, fc_width), "d2t": target_ids - torch.arange(DRAFT_VOCAB),
                   "t2d": t2d}, str(path / "model.safetensors"))
    return path


def make_target(root, layers=61, arch="DeepseekV3ForCausalLM", hidden=H):
    path = root / f"target-{arch}-{layers}"
    path.mkdir()
    (path / "config.json").write_text(json.dumps({"architectures": [arch], "num_hidden_layers": layers,
                                                  "hidden_size": hidden}))
    return path


# ---------------------------------------------------------------- the seed, as a test

def test_seed_report_names_every_slot(tmp_path):
    """61-layer DeepSeek-V3 target; training fed hidden_states[0, 3, 31]; config ids [2, 30, 58];
    served by an SGLang whose deepseek_v2 adds +1 (0.5.5-0.5.12)."""
    draft = make_draft(tmp_path, "seed", [2, 30, 58])
    report = check(draft, make_target(tmp_path), train=("hf-hidden-states", "5.0.0", [0, 3, 31]),
                   serve="sglang==0.5.12")
    print(report)
    frame = report.to_frame()
    assert list(frame.trained_on) == ["b0", "b3", "b31"]
    assert list(frame.fed) == ["b3", "b31", "b59"]
    assert list(frame.trained_tensor) == ["embedding", "layer 2 out", "layer 30 out"]
    assert frame.verdict[0] == "embedding missing"
    assert frame.verdict[1].startswith("slot shifted") and frame.verdict[2].startswith("slot shifted")
    assert not report.ok
    # the seed's own fix on this version: the embedding patch plus ids [-1, 2, 30]
    assert "eagle3lab patch sglang --apply" in report.fix and "[-1, 2, 30]" in report.fix


def test_seed_fix_says_which_versions_serve_it(tmp_path):
    draft = make_draft(tmp_path, "seed-fix", [-1, 2, 30])
    target = make_target(tmp_path)
    report = check(draft, target, train=[0, 3, 31], serve="sglang==0.5.12")
    print(report)
    assert set(report.to_frame().verdict) == {"would crash"}  # residual is None before layer 0
    table = report.versions.set_index("version")
    assert set(table.model_file) == {"srt/models/deepseek_v2.py"}
    assert table.loc["0.5.11-0.5.12", "verdict"] == "needs the patch"
    assert table.loc["0.5.5-0.5.10", "fed_patched"].endswith("(CUDA graphs: default)")  # CUDA graphs reset ids
    assert table.loc["0.5.13", "verdict"] == "dropped"  # -1 kept raw, never matches
    assert table.loc["0.5.17-0.5.23", "verdict"] == "crash"  # 'captured 2 of 3'
    assert table.loc["0.5.14-0.5.16", "ids_that_work"] == "[0, 3, 31]"
    assert check(draft, target, train=[0, 3, 31], serve="sglang==0.5.12", patched=True).ok
    on_llama = check(draft, make_target(tmp_path, arch="LlamaForCausalLM"), train=[0, 3, 31],
                     serve="sglang==0.5.22")
    assert on_llama.ok and set(on_llama.versions.model_file) == {"srt/models/llama.py"}


# ---------------------------------------------------------------- lab-style and other cases

def test_recorded_train_boundaries_are_read_and_said(tmp_path):
    n = 8
    healthy = make_draft(tmp_path, "healthy", [1, n // 2 - 1, n - 4], recorded=[2, n // 2, n - 3])
    report = check(healthy, n)
    assert report.ok and any("eagle3lab.train_boundaries" in note for note in report.notes)
    seed = make_draft(tmp_path, "seed", [1, n // 2 - 1, n - 4], recorded=[0, 2, n // 2])
    verdicts = list(check(seed, n).to_frame().verdict)
    assert verdicts[0] == "embedding missing" and "ok" not in verdicts


def test_default_train_is_specforge_and_matches_sglang(tmp_path):
    draft = make_draft(tmp_path, "sf", [1, 15, 28])
    report = check(draft, make_target(tmp_path, 32, "LlamaForCausalLM"))
    assert report.ok and report.train_label == "specforge==0.2.0"
    assert list(report.trained) == list(report.fed) == [2, 16, 29]


def test_vllm_reads_nested_ids_raw_one_layer_early(tmp_path):
    draft = make_draft(tmp_path, "sf", [1, 15, 28])
    report = check(draft, 32, train="specforge==0.2.0", serve="vllm==0.22.0")
    assert set(report.to_frame().verdict) == {"off by one"}
    assert "[2, 16, 29]" in report.fix
    older = check(draft, 32, train="specforge==0.2.0", serve="vllm==0.21.0")
    assert older.ok and any("default" in note for note in older.notes)  # ignored, matches by coincidence


def test_ids_ignored_and_dropped_tensors(tmp_path):
    draft = make_draft(tmp_path, "top", top_level=[3, 9, 20])
    report = check(draft, 32, train=[3, 9, 20], serve="sglang==0.5.23")
    assert set(report.to_frame().verdict) == {"ids ignored"}
    assert "eagle_config.eagle_aux_hidden_state_layer_ids" in report.fix
    last = make_draft(tmp_path, "last", [1, 15, 31])
    frame = check(last, 32, train=[2, 16, 32], serve="sglang==0.5.23").to_frame()
    assert frame.verdict[2] == "tensor dropped" and frame.fed[2] == "-"


def test_config_only_draft_and_inconsistent_vocab_map(tmp_path):
    report = check(make_draft(tmp_path, "cfg", [1, 15, 28], weights=False), 32)
    assert report.ok and report.draft.fc_shape is None
    bad = check(make_draft(tmp_path, "badmap", [1, 15, 28], consistent=False), 32)
    assert all(s["verdict"] == "ok" for s in bad.slots) and not bad.ok
    assert not bad.checks_frame().ok.all()


def test_report_renders(tmp_path):
    report = check(make_draft(tmp_path, "seed", [2, 30, 58]), make_target(tmp_path), train=[0, 3, 31],
                   serve=("sglang", "0.5.12"))
    assert list(report.to_frame().columns) == ["slot", "trained_on", "trained_tensor", "fed", "fed_tensor",
                                               "verdict", "fix"]
    html = report._repr_html_()
    assert "<table" in html and "embedding missing" in html
    assert "embedding missing" in str(report)


# ---------------------------------------------------------------- bad input

def test_bad_input_is_a_clear_error(tmp_path):
    with pytest.raises(WiringInputError, match="not found"):
        check(tmp_path / "nope", 32)
    (tmp_path / "empty").mkdir()
    with pytest.raises(WiringInputError, match="config.json not found"):
        check(tmp_path / "empty", 32)
    garbled = make_draft(tmp_path, "garbled", [1, 15, 28], weights=False)
    (garbled / "config.json").write_text('{"hidden_size": 16,')
    with pytest.raises(WiringInputError, match="not valid JSON"):
        check(garbled, 32)
    no_fc = make_draft(tmp_path, "nofc", [1, 15, 28], weights=False)
    save_file({"lm_head.weight": torch.zeros(2, 2)}, str(no_fc / "model.safetensors"))
    with pytest.raises(WiringInputError, match="no `fc.weight`"):
        check(no_fc, 32)
    with pytest.raises(WiringInputError, match="not a multiple"):
        check(make_draft(tmp_path, "width", [1, 15, 28], fc_width=3 * H + 1), 32)
    with pytest.raises(WiringInputError, match="lists 3 layer ids"):
        check(make_draft(tmp_path, "two", [1, 15, 28], fc_width=2 * H), 32)
    with pytest.raises(WiringInputError, match="target_hidden_size"):
        check(make_draft(tmp_path, "th", [1, 15, 28], extra={"target_hidden_size": 24}),
              make_target(tmp_path, 32, "LlamaForCausalLM"))
    with pytest.raises(ConventionError, match="out of range"):
        check(make_draft(tmp_path, "range", [1, 15, 40]), 32)
    with pytest.raises(ConventionError, match="nearest known: 0.5.23"):
        check(make_draft(tmp_path, "ver", [1, 15, 28]), 32, serve="sglang==0.7.1")
    with pytest.raises(WiringInputError, match="NAME==VERSION"):
        check(make_draft(tmp_path, "spec", [1, 15, 28]), 32, serve="sglang")
    broken = make_draft(tmp_path, "broken", [1, 15, 28], weights=False)
    (broken / "model.safetensors").write_bytes(b"\x00garbage")
    with pytest.raises(WiringInputError, match="safetensors"):
        read_draft(broken)
    assert issubclass(WiringInputError, EagleLabError)


# ---------------------------------------------------------------- CLI

def test_cli_exit_codes(tmp_path, capsys):
    target = make_target(tmp_path)
    seed = make_draft(tmp_path, "seed", [2, 30, 58])
    assert main(["wiring", "--draft", str(seed), "--target", str(target), "--train", "0,3,31",
                 "--serve", "sglang==0.5.12"]) == 1
    out = capsys.readouterr().out
    assert "embedding missing" in out and "NOT OK" in out
    assert main(["wiring", "--draft", str(seed), "--target", str(target),
                 "--train", "hf-hidden-states==5.0.0:3,31,59", "--serve", "sglang==0.5.12"]) == 0
    assert main(["wiring", "--draft", str(seed), "--num-layers", "61", "--arch", "DeepseekV3ForCausalLM",
                 "--train", "2,30,58", "--serve", "sglang==0.5.23"]) == 0
    assert main(["wiring", "--draft", str(tmp_path / "missing"), "--num-layers", "61"]) == 2
    assert main(["wiring", "--draft", str(seed), "--num-layers", "61", "--serve", "sglang==9.9"]) == 2
    assert main(["wiring", "--draft", str(seed), "--num-layers", "61", "--train", "a,b"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("eagle3lab: error:") == 3


# ---------------------------------------------------------------- numeric comparison

def test_wiring_matrix_finds_an_offset_without_conventions():
    from transformers import LlamaConfig, LlamaForCausalLM

    from eagle3lab.wiring.capture import capture

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=50, hidden_size=32, intermediate_size=64, num_hidden_layers=6,
                                         num_attention_heads=4, num_key_value_heads=2)).eval()
    ids = torch.randint(0, 50, (1, 12))
    full = capture(model, ids, range(7))
    served = {b: full[b + 1] for b in (0, 2, 4)}  # a server that is one layer late, labelled as 0, 2, 4
    matrix = wiring_matrix({b: full[b] for b in range(6)}, served)
    assert matrix.shape == (6, 3) and matrix.index.name == "a"
    matches = match_boundaries(matrix.T.rename_axis(index="a", columns="b"))
    assert list(matches.best_b) == [1, 3, 5] and list(matches.offset) == [1, 1, 1]
    same = wiring_matrix(full, full)
    assert all(abs(same.loc[b, b] - 1) < 1e-5 for b in full)
    with pytest.raises(WiringInputError, match="same tokens"):
        wiring_matrix(full, {0: torch.zeros(1, 3, 32)})
    ax = plot_wiring_matrix(matrix)
    assert ax.get_xlabel() == "boundary (b)" and len(ax.texts) == matrix.size
    import matplotlib.pyplot as plt
    plt.close("all")


def test_vllm_prefers_top_level_ids_and_a_disagreement_is_flagged(tmp_path):
    draft = make_draft(tmp_path, "both", [1, 15, 28], top_level=[2, 16, 29])
    vllm = check(draft, 32, train=[2, 16, 29], serve="vllm==0.22.0")
    assert all(s["verdict"] == "ok" for s in vllm.slots) and list(vllm.fed) == [2, 16, 29]
    sglang = check(draft, 32, train=[2, 16, 29], serve="sglang==0.5.23")
    assert all(s["verdict"] == "ok" for s in sglang.slots)
    assert not vllm.ok and "differ" in vllm.checks_frame().detail[0]

"""The lab end to end: tokenizer, a tiny build, loading, evaluation, the CLI."""

import json

import pandas as pd
import pytest
import torch

from eagle3lab.errors import EagleLabError
from eagle3lab.lab.corpus import heldout_snippets, load_corpus
from eagle3lab.lab.evaluation import chain_accept_lengths, evaluate_draft
from eagle3lab.lab.tokenizer import load_tokenizer, save_tokenizer, train_tokenizer

TINY = dict(max_train_chars=60_000, max_heldout_chars=20_000, vocab_size=320, hidden_size=32,
            num_layers=7, num_heads=2, num_kv_heads=1, intermediate_size=64, seq_len=32,
            target_steps=30, target_batch=8, gen_sequences=8, prompt_tokens=16, gen_tokens=16,
            corpus_sequences=8, draft_steps=8, draft_batch=4, ttt_steps=3,
            draft_intermediate_size=64, eval_windows=4, accept_prompts=3,
            accept_prompt_tokens=16, accept_new_tokens=16)


@pytest.fixture(scope="module")
def tiny_lab(tmp_path_factory):
    from eagle3lab.lab.build import build_lab

    root = tmp_path_factory.mktemp("lab") / "tiny"
    logs = []
    build_lab("ci", root, progress=False, overrides=TINY, log=logs.append)
    return root, logs


def test_corpus_split_is_by_file_and_deterministic():
    a = load_corpus(max_train_chars=50_000, max_heldout_chars=20_000)
    b = load_corpus(max_train_chars=50_000, max_heldout_chars=20_000)
    assert a.fingerprint == b.fingerprint and a.train_files == b.train_files
    assert not set(a.train_files) & set(a.heldout_files)
    snippets = heldout_snippets(a, n=5)
    assert snippets and all(s["file"] in a.heldout_files for s in snippets)


def test_named_files_corpus_and_errors(tmp_path):
    f = tmp_path / "a.txt"
    f.write_text("hello world\n" * 200)
    c = load_corpus([str(f)])
    assert c.train and c.heldout and c.source == "files"
    with pytest.raises(EagleLabError):
        load_corpus([str(tmp_path / "missing.txt")])


def test_tokenizer_round_trips_and_loads_with_autotokenizer(tmp_path):
    corpus = load_corpus(max_train_chars=80_000, max_heldout_chars=10_000)
    tok = train_tokenizer(corpus.train, 400)
    save_tokenizer(tok, tmp_path / "tok")
    loaded = load_tokenizer(tmp_path / "tok")
    assert len(loaded) == 400
    for text in [corpus.heldout[0][:2000], "def f(x):\n\treturn x  # ünïcode ✓\n\n"]:
        ids = loaded(text, add_special_tokens=False)["input_ids"]
        assert loaded.decode(ids) == text
        assert len(ids) < len(text.encode())  # BPE merges something
    assert loaded.eos_token == "<|endoftext|>" and loaded.eos_token_id is not None


def test_tiny_build_writes_loadable_artefacts_and_manifest(tiny_lab):
    from transformers import AutoTokenizer, LlamaForCausalLM

    from eagle3lab.lab import load_lab

    root, logs = tiny_lab
    manifest = json.loads((root / "manifest.json").read_text())
    assert manifest["preset"] == "ci" and manifest["config"]["num_layers"] == 7
    assert set(manifest["drafts"]) == {"healthy", "seed", "no-ttt"}
    assert manifest["drafts"]["healthy"]["train_boundaries"] == [2, 3, 4]
    assert manifest["drafts"]["seed"]["train_boundaries"] == [0, 2, 3]
    assert manifest["drafts"]["seed"]["as_served"]["wiring"] == [2, 3, 4]
    for d in manifest["drafts"].values():
        assert len(d["acc"]) == 3 and all(0 <= a <= 1 for a in d["acc"])
        # a chain of depth j accepts 1 (the target's own token) to j + 1 tokens per step
        assert all(1 <= a <= depth + 1 for depth, a in enumerate(d["accept_length"], start=1))
    assert manifest["target"]["heldout_loss"] > 0 and manifest["timings_s"]["total"] > 0
    assert manifest["corpus"]["fingerprint"]
    # plain transformers loads the target dir (weights + tokenizer)
    model = LlamaForCausalLM.from_pretrained(str(root / "target"))
    tok = AutoTokenizer.from_pretrained(str(root / "target"))
    assert model.config.num_hidden_layers == 7 and len(tok) == model.config.vocab_size
    lab = load_lab("ci", root=root)
    assert lab.num_layers == 7 and lab.draft_names == ["healthy", "no-ttt", "seed"]
    assert lab.target.dtype == torch.float32 and not lab.target.training
    draft = lab.load_draft("seed")
    assert draft.train_boundaries == [0, 2, 3] and draft.aux_layer_ids == [1, 2, 3]
    assert torch.equal(draft.embed_tokens.weight, lab.target.model.embed_tokens.weight)
    prompts = lab.heldout_prompts(2, 8)
    assert len(prompts) == 2 and all(len(p) == 8 for p in prompts)
    assert lab.heldout_texts(2) and isinstance(lab.heldout_texts(1)[0], str)
    with pytest.raises(EagleLabError):
        lab.load_draft("nope")


def test_build_is_cached(tiny_lab):
    from eagle3lab.lab.build import build_lab

    root, _ = tiny_lab
    before = (root / "manifest.json").stat().st_mtime
    logs = []
    build_lab("ci", root, progress=False, overrides=TINY, log=logs.append)
    assert (root / "manifest.json").stat().st_mtime == before
    assert any("up to date" in line for line in logs)


def test_evaluate_draft_reports_acc_per_depth(tiny_lab):
    from eagle3lab.lab import load_lab

    lab = load_lab("ci", root=tiny_lab[0])
    draft = lab.load_draft("healthy")
    df = evaluate_draft(lab, draft, lab.heldout_texts(3), depth=3, seq_len=32, max_windows=4)
    assert isinstance(df, pd.DataFrame) and list(df["depth"]) == [1, 2, 3]
    assert df["accuracy"].between(0, 1).all() and (df["positions"] > 0).all()
    served = evaluate_draft(lab.target, lab.load_draft("seed"), lab.heldout_texts(3),
                            wiring=[2, 3, 4], depth=2, tokenizer=lab.tokenizer, seq_len=32,
                            max_windows=4)
    assert served["wiring"].iloc[0] == "[2, 3, 4]" and len(served) == 2
    with pytest.raises(EagleLabError):
        evaluate_draft(lab, draft, lab.heldout_texts(1), wiring=[2, 3])


def test_chain_accept_lengths_replays_rounds():
    hit = torch.tensor([[1, 1, 0], [0, 0, 0], [1, 0, 0], [1, 1, 1], [1, 1, 1], [0, 0, 0],
                        [1, 1, 1], [0, 0, 0], [0, 0, 0], [0, 0, 0]], dtype=torch.bool)
    # root 0 accepts 2 -> next root 3 accepts 3 -> root 7 (needs 7 + 3 < 10: stop)
    assert chain_accept_lengths(hit, 0, 3) == [3, 4]
    # depth 1 from root 1: miss, hit (root 2), hit (4), hit (6), miss (8)
    assert chain_accept_lengths(hit, 1, 1) == [1, 2, 2, 2, 1]


def test_cli_build_and_show(tmp_path, capsys):
    from eagle3lab.cli import main

    assert main(["lab", "show", "--out", str(tmp_path / "none")]) == 2
    assert "no lab" in capsys.readouterr().err
    assert main(["lab"]) == 2


def test_data_tables_are_recognised():
    from eagle3lab.lab.corpus import is_data_table

    table = "TABLE = {\n" + "".join(f"    '{chr(65 + i % 26)}{i}': 0x{i:04x},\n" for i in range(400)) + "}\n"
    code = "def f(x):\n    return {'a': x, 'b': 2}\n\n" * 200
    assert is_data_table(table) and not is_data_table(code)
    assert not is_data_table(table[:1000])  # too short to call a table


def test_skip_data_tables_leaves_generated_modules_out_and_is_opt_in():
    plain = load_corpus(max_train_chars=4_000_000, max_heldout_chars=400_000)
    clean = load_corpus(max_train_chars=4_000_000, max_heldout_chars=400_000, skip_data_tables=True)
    files = set(plain.train_files + plain.heldout_files)
    kept = set(clean.train_files + clean.heldout_files)
    assert any(f.startswith("encodings/") for f in files) and "html/entities.py" in files
    assert not any(f.startswith(("encodings/", "pydoc_data/")) for f in kept)
    assert "html/entities.py" not in kept and "os.py" in kept
    assert clean.fingerprint != plain.fingerprint


def test_settings_parse_and_optional_defaults_keep_the_cache_key():
    from eagle3lab.lab.build import cache_key, parse_settings, preset_config

    assert parse_settings(["num_layers=18", "skip-data-tables=true", "teacher=soft"]) == {
        "num_layers": 18, "skip_data_tables": True, "teacher": "soft"}
    with pytest.raises(EagleLabError, match="KEY=VALUE"):
        parse_settings(["num_layers"])
    base = cache_key(preset_config("ci"))  # ci leaves both optional settings at their defaults
    assert cache_key(preset_config("ci", {"skip_data_tables": False, "plain_draft_steps": None})) == base
    assert cache_key(preset_config("ci", {"skip_data_tables": True})) != base
    assert "skip_data_tables" not in preset_config("default")  # the shipped lab predates it
    with pytest.raises(EagleLabError, match="unknown lab settings"):
        preset_config("ci", {"bogus": 1})


def test_cli_what_if_build_needs_its_own_folder(tmp_path, capsys):
    from eagle3lab.cli import main

    assert main(["lab", "build", "--set", "num_layers=18"]) == 2
    assert "--out" in capsys.readouterr().err
    assert main(["lab", "build", "--set", "bogus=1", "--out", str(tmp_path / "x")]) == 2
    assert "unknown lab settings" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
    assert main(["lab", "bench", "--lab-dir", str(tmp_path / "none")]) == 2
    assert "missing" in capsys.readouterr().err


# --------------------------------------------------------------------------- what a lab depends on


@pytest.mark.parametrize("preset", ["ci", "default"])
def test_shipped_labs_record_their_weights_and_cpu_kernels(preset):
    """The shipped manifests name each weights file's digest (checked against the files: a fact of
    the repository, on any CPU) and the CPU kernels they were built with."""
    from eagle3lab.lab.build import WEIGHT_FILES, weights_digest
    from eagle3lab.paths import DATA_DIR

    root = DATA_DIR / "lab" / preset
    manifest = json.loads((root / "manifest.json").read_text())
    assert manifest["weights"] == weights_digest(root) and set(manifest["weights"]) == set(WEIGHT_FILES)
    assert manifest["environment"]["cpu_capability"] in {"AVX512", "AVX2", "DEFAULT", "not recorded"}


def test_a_fresh_build_records_the_cpu_kernels_it_ran(tiny_lab):
    from eagle3lab.lab.build import cpu_capability, weights_digest

    root, _ = tiny_lab
    manifest = json.loads((root / "manifest.json").read_text())
    assert manifest["environment"]["cpu_capability"] == cpu_capability() != "unknown"
    assert manifest["weights"] == weights_digest(root)


def test_a_rebuild_names_a_different_cpu_instead_of_failing():
    from eagle3lab.lab.build import rebuild_note

    old = {"cache_key": "k", "weights": {"a": "1", "b": "2"}, "environment": {"cpu_capability": "AVX512"}}
    same = {"cache_key": "k", "weights": {"a": "1", "b": "2"}, "environment": {"cpu_capability": "AVX2"}}
    other = {"cache_key": "k", "weights": {"a": "1", "b": "3"}, "environment": {"cpu_capability": "AVX2"}}
    assert rebuild_note(old, same) == "byte-identical to the lab it replaces (CPU capability AVX2)"
    note = rebuild_note(old, other)
    assert note.startswith("built on a different CPU: this build ran with AVX2 kernels, the one it "
                           "replaces with AVX512; weights differ from the lab it replaces (1 of 2 files)")
    assert note.endswith("so its measured figures differ from that lab's (compare them by their intervals)")
    unrecorded = dict(old, environment={"cpu_capability": "not recorded"})
    assert "most likely built on a different CPU" in rebuild_note(unrecorded, other)
    again = dict(old, environment={"cpu_capability": "AVX2", "torch": "2.13.0"})
    assert "same CPU capability AVX2, but torch 2.13.0 -> None" in rebuild_note(again, other)
    assert rebuild_note(None, other) is None                       # nothing replaced
    assert rebuild_note(dict(old, cache_key="x"), other) is None   # another recipe: of course it differs
    assert "recorded no weights digest" in rebuild_note({"cache_key": "k"}, other)


def test_a_forced_rebuild_of_the_same_recipe_says_how_it_compares(tiny_lab, tmp_path):
    """Rebuilt on this CPU: byte-identical (the build is deterministic on one machine). With the
    manifest saying another CPU built it, the log says "built on a different CPU" and the lab is
    replaced, not refused."""
    import shutil

    from eagle3lab.lab.build import build_lab, cpu_capability

    root = tmp_path / "tiny"
    shutil.copytree(tiny_lab[0], root)
    manifest = json.loads((root / "manifest.json").read_text())
    other_cpu = "AVX2" if cpu_capability() == "AVX512" else "AVX512"   # whatever this CPU is not
    manifest["environment"]["cpu_capability"] = other_cpu
    manifest["weights"]["target/model.safetensors"] = "0" * 16
    (root / "manifest.json").write_text(json.dumps(manifest))
    logs = []
    build_lab("ci", root, force=True, progress=False, overrides=TINY, log=logs.append)
    said = [line for line in logs if "built on a different CPU" in line]
    assert len(said) == 1 and "(1 of 4 files)" in said[0], logs[-3:]
    rebuilt = json.loads((root / "manifest.json").read_text())
    assert rebuilt["weights"] == json.loads((tiny_lab[0] / "manifest.json").read_text())["weights"]
    assert rebuilt["rebuild"] in said[0]

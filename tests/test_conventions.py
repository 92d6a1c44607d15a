"""Capture conventions: the rules per engine/version/family, checked against real SGLang source."""

import ast
import importlib.util
from pathlib import Path
from types import SimpleNamespace

import pytest

from eagle3lab.wiring.boundaries import Boundaries, CaptureError, ConventionError, default_boundaries
from eagle3lab.wiring.conventions import ids_for, serve_boundaries, serve_table, train_boundaries
from eagle3lab.errors import EagleLabError

LLAMA, DSV3, QWEN2, QWEN3, GPTOSS = ("LlamaForCausalLM", "DeepseekV3ForCausalLM", "Qwen2ForCausalLM",
                                     "Qwen3ForCausalLM", "GptOssForCausalLM")


# ---------------------------------------------------------------- the installed SGLang's own setter

def _installed_setter(file: str, cls: str):
    """set_eagle3_layers_to_capture from the installed sglang (0.5.23) source, as a function."""
    spec = importlib.util.find_spec("sglang")
    path = Path(list(spec.submodule_search_locations)[0]) / "srt" / "models" / f"{file}.py"
    tree = ast.parse(path.read_text())
    klass = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
    fn = next(n for n in klass.body if isinstance(n, ast.FunctionDef) and n.name == "set_eagle3_layers_to_capture")
    namespace = {"Optional": __import__("typing").Optional, "List": list}
    exec(compile(ast.Module([fn], []), str(path), "exec"), namespace)
    return namespace["set_eagle3_layers_to_capture"]


def _run_setter(file, cls, ids, n):
    me = SimpleNamespace(pp_group=SimpleNamespace(is_last_rank=True), config=SimpleNamespace(num_hidden_layers=n),
                         model=SimpleNamespace(layers_to_capture=[]))
    _installed_setter(file, cls)(me, ids)
    return me.model.layers_to_capture


@pytest.mark.parametrize("file,cls,arch", [("llama", "LlamaForCausalLM", LLAMA), ("qwen2", "Qwen2ForCausalLM", QWEN2),
                                           ("qwen3", "Qwen3ForCausalLM", QWEN3),
                                           ("deepseek_v2", "DeepseekV2ForCausalLM", DSV3),
                                           ("gpt_oss", "GptOssForCausalLM", GPTOSS)])
@pytest.mark.parametrize("ids", [None, [1, 15, 28], [2, 16, 29], [1, 16, 32], [3, 9, 20], [5, 20, 31]])
def test_rule_matches_installed_sglang_0_5_23_setter(file, cls, arch, ids):
    n = 32
    captured = sorted(set(_run_setter(file, cls, ids, n)))
    try:
        got = serve_boundaries("sglang", "0.5.23", arch, ids, n)
    except CaptureError as exc:  # only when the setter asks for something the forward never captures
        assert any(not 0 <= b <= (n if file == "gpt_oss" else n - 1) for b in captured)
        assert exc.kind == ("crash" if file == "deepseek_v2" else "dropped")
        return
    assert list(got) == captured


# ---------------------------------------------------------------- SGLang rules by version

def test_default_when_no_ids_everywhere():
    for engine, version, arch in [("sglang", "0.4.6", LLAMA), ("sglang", "0.5.23", DSV3), ("sglang", "0.5.5", QWEN3),
                                  ("vllm", "0.9.0", LLAMA), ("vllm", "0.33.0", QWEN2)]:
        assert serve_boundaries(engine, version, arch, None, 61) == [2, 30, 58] == default_boundaries(61)


def test_llama_plus_one_from_0_4_9_and_ids_ignored_before():
    assert serve_boundaries("sglang", "0.5.23", LLAMA, [1, 15, 28], 32) == [2, 16, 29]
    assert serve_boundaries("sglang", "0.4.9", LLAMA, [3, 9, 20], 32, cuda_graph=False) == [4, 10, 21]
    old = serve_boundaries("sglang", "0.4.6", LLAMA, [3, 9, 20], 32)
    assert old == [2, 16, 29] and old.ids_ignored and "ignores" in old.warnings[0]


def test_llama_embedding_crashes_until_0_5_22():
    with pytest.raises(CaptureError, match="TypeError") as exc:
        serve_boundaries("sglang", "0.5.21", LLAMA, [-1, 2, 15], 32)
    assert exc.value.kind == "crash" and isinstance(exc.value, EagleLabError)
    assert serve_boundaries("sglang", "0.5.22", LLAMA, [-1, 2, 15], 32) == [0, 3, 16]
    assert serve_boundaries("sglang", "0.5.21", LLAMA, [-1, 2, 15], 32, patched=True) == [0, 3, 16]


def test_qwen2_setter_only_from_0_5_2_and_embedding_guarded():
    with pytest.raises(CaptureError, match="no set_eagle3_layers_to_capture before 0.5.2"):
        serve_boundaries("sglang", "0.5.1", QWEN2, [1, 15, 28], 32)
    assert serve_boundaries("sglang", "0.5.2", QWEN2, [-1, 15, 28], 32, cuda_graph=False) == [0, 16, 29]
    assert serve_boundaries("sglang", "0.4.9", QWEN3, [-1, 15, 28], 32, cuda_graph=False) == [0, 16, 29]


def test_deepseek_rule_changes_at_0_5_13():
    seed_ids = [2, 30, 58]
    assert serve_boundaries("sglang", "0.5.12", DSV3, seed_ids, 61) == [3, 31, 59]
    assert serve_boundaries("sglang", "0.5.13", DSV3, seed_ids, 61) == [2, 30, 58]
    assert serve_boundaries("sglang", "0.5.23", DSV3, [1, 29, 57], 61) == [2, 30, 58]
    assert serve_boundaries("sglang", "0.5.23", "KimiK25ForConditionalGeneration", seed_ids, 61) == seed_ids
    with pytest.raises(CaptureError, match="no set_eagle3_layers_to_capture before 0.5.4.post2"):
        serve_boundaries("sglang", "0.5.4", DSV3, seed_ids, 61)


def test_deepseek_embedding_minus_one_never_matches_from_0_5_13():
    with pytest.raises(CaptureError) as exc:
        serve_boundaries("sglang", "0.5.14", DSV3, [-1, 2, 30], 61)
    assert exc.value.kind == "dropped" and exc.value.fed == [2, 30]
    with pytest.raises(CaptureError, match="captured 2 of 3") as exc:
        serve_boundaries("sglang", "0.5.17", DSV3, [-1, 2, 30], 61)
    assert exc.value.kind == "crash"
    assert serve_boundaries("sglang", "0.5.14", DSV3, [0, 3, 31], 61) == [0, 3, 31]
    # patched: -1 is the embedding, the rest keep the version's rule (raw, since 2 != 1)
    assert serve_boundaries("sglang", "0.5.23", DSV3, [-1, 2, 30], 61, patched=True) == [0, 2, 30]
    assert serve_boundaries("sglang", "0.5.12", DSV3, [-1, 2, 30], 61, patched=True) == [0, 3, 31]


def test_gpt_oss_raw_when_max_is_n_from_0_5_17():
    assert serve_boundaries("sglang", "0.5.23", GPTOSS, [24, 30, 36], 36) == [24, 30, 36]
    with pytest.raises(CaptureError) as exc:
        serve_boundaries("sglang", "0.5.16", GPTOSS, [24, 30, 36], 36)
    assert exc.value.kind == "dropped" and exc.value.fed == [25, 31]
    assert serve_boundaries("sglang", "0.5.23", GPTOSS, [1, 17, 33], 36) == [2, 18, 34]


def test_last_layer_output_is_dropped_by_llama_and_crashes_qwen_moe():
    with pytest.raises(CaptureError) as exc:
        serve_boundaries("sglang", "0.5.23", LLAMA, [1, 15, 31], 32)
    assert exc.value.kind == "dropped" and "fc" in str(exc.value)
    with pytest.raises(CaptureError, match="IndexError"):
        serve_boundaries("sglang", "0.5.23", "Qwen3MoeForCausalLM", [1, 15, 31], 32)


def test_repeated_ids_are_captured_once():
    with pytest.raises(CaptureError, match="once") as exc:
        serve_boundaries("sglang", "0.5.23", LLAMA, [3, 3, 20], 32)
    assert exc.value.fed == [4, 21]


def test_order_is_ascending_whatever_the_config_order():
    assert serve_boundaries("sglang", "0.5.23", LLAMA, [20, 3, 10], 32) == [4, 11, 21]
    assert serve_boundaries("vllm", "0.33.0", LLAMA, [20, 3, 10], 32) == [3, 10, 20]


def test_cuda_graph_override_0_4_9_to_0_5_10():
    ids = [3, 9, 20]
    graphs = serve_boundaries("sglang", "0.5.10", LLAMA, ids, 32)
    assert graphs == [2, 16, 29] and graphs.ids_ignored and "CUDA graphs" in graphs.warnings[0]
    assert serve_boundaries("sglang", "0.5.10", LLAMA, ids, 32, cuda_graph=False) == [4, 10, 21]
    assert serve_boundaries("sglang", "0.5.11", LLAMA, ids, 32) == [4, 10, 21]
    # SpecForge-default ids land on the default, so the override changes nothing
    assert not serve_boundaries("sglang", "0.5.4", LLAMA, [1, 15, 28], 32).warnings


def test_sglang_ignores_top_level_ids():
    got = serve_boundaries("sglang", "0.5.23", LLAMA, [3, 9, 20], 32, key="top_level")
    assert got == [2, 16, 29] and got.ids_ignored


# ---------------------------------------------------------------- vLLM

def test_vllm_key_lookup_by_version_and_no_offset():
    assert serve_boundaries("vllm", "0.20.0", LLAMA, [3, 9, 20], 32, key="top_level") == [3, 9, 20]
    nested = serve_boundaries("vllm", "0.20.0", LLAMA, [3, 9, 20], 32)
    assert nested == [2, 16, 29] and nested.ids_ignored
    assert serve_boundaries("vllm", "0.22.0", LLAMA, [3, 9, 20], 32) == [3, 9, 20]
    assert serve_boundaries("vllm", "0.11.0", LLAMA, [3, 9, 20], 32, key="top_level").ids_ignored


def test_vllm_embedding_and_last_layer():
    with pytest.raises(CaptureError, match="TypeError"):
        serve_boundaries("vllm", "0.17.0", LLAMA, [0, 9, 20], 32, key="top_level")
    assert serve_boundaries("vllm", "0.18.0", LLAMA, [0, 9, 32], 32, key="top_level") == [0, 9, 32]
    with pytest.raises(CaptureError, match="TypeError"):
        serve_boundaries("vllm", "0.33.0", DSV3, [0, 9, 20], 32)
    with pytest.raises(CaptureError) as exc:
        serve_boundaries("vllm", "0.22.0", DSV3, [2, 9, 32], 32)
    assert exc.value.kind == "dropped"
    assert serve_boundaries("vllm", "0.26.0", DSV3, [2, 9, 32], 32) == [2, 9, 32]


# ---------------------------------------------------------------- training

def test_specforge_0_2_0_follows_sglang_0_5_14():
    assert train_boundaries("specforge", "0.2.0", None, 32) == [2, 16, 29]
    assert train_boundaries("specforge", "0.2.0", [2, 30, 58], 61, arch=DSV3) == [2, 30, 58]  # raw in 0.5.14
    assert train_boundaries("specforge", "0.2.0", [2, 30, 58], 61, arch=LLAMA) == [3, 31, 59]
    with pytest.raises(CaptureError, match="non-negative"):
        train_boundaries("specforge", "0.2.0", [-1, 2, 30], 61)
    with pytest.raises(ConventionError, match="no HF target backend"):
        train_boundaries("specforge-hf", "0.2.0", None, 32)


def test_specforge_hf_history():
    assert train_boundaries("specforge", "0.1.0", None, 32) == [2, 16, 29]
    ignored = train_boundaries("specforge", "0.1.0", [3, 9, 20], 32)
    assert ignored == [2, 16, 29] and ignored.ids_ignored
    buggy = train_boundaries("specforge-hf", "2025-09-15", None, 32)
    assert buggy == [2, 17, 29] and "mid" in buggy.warnings[0]
    assert train_boundaries("specforge-hf", "2025-11-01", None, 32) == [2, 16, 29]
    post = train_boundaries("specforge-hf", "2025-11-10", [1, 15, 31], 32)
    assert post == [2, 16, 32] and post.post_norm == (2,)
    hooks = train_boundaries("specforge-hf", "2026-01-10", [20, 3, 10], 32)
    assert hooks == [21, 4, 11] and not hooks.post_norm  # config order, pre-norm
    with pytest.raises(CaptureError, match="out of bounds"):
        train_boundaries("specforge-hf", "2026-01-10", [-1, 3, 10], 32)
    assert train_boundaries("specforge-hf", "2025-11-10", [-1, 3, 10], 32) == [0, 4, 11]  # hidden_states[0]


def test_eagle_and_hf_hidden_states():
    assert train_boundaries("eagle", "main", None, 61) == [2, 30, 58]
    assert train_boundaries("hf-hidden-states", "5.0.0", [0, 3, 31], 61) == [0, 3, 31]
    last = train_boundaries("hf-hidden-states", "4.57.6", [2, 16, -1], 32)
    assert last == [2, 16, 32] and last.post_norm == (2,) and "AFTER the final norm" in last.warnings[0]


# ---------------------------------------------------------------- inverse and tables

@pytest.mark.parametrize("engine,version,arch,want", [
    ("sglang", "0.5.23", LLAMA, [0, 3, 31]), ("sglang", "0.5.14", DSV3, [0, 3, 31]),
    ("sglang", "0.5.12", DSV3, [2, 30, 58]), ("sglang", "0.5.23", GPTOSS, [24, 30, 36]),
    ("vllm", "0.33.0", LLAMA, [0, 16, 32]), ("vllm", "0.22.0", QWEN2, [2, 16, 29])])
def test_ids_for_round_trips(engine, version, arch, want):
    n = 61 if arch == DSV3 else (36 if arch == GPTOSS else 32)
    ids = ids_for(want, engine, version, arch, n)
    assert serve_boundaries(engine, version, arch, ids, n) == want


def test_ids_for_refuses_what_cannot_be_fed():
    with pytest.raises(CaptureError):
        ids_for([0, 3, 31], "sglang", "0.5.12", DSV3, 61)  # embedding crashes unpatched
    assert ids_for([0, 3, 31], "sglang", "0.5.12", DSV3, 61, patched=True) == [-1, 2, 30]
    with pytest.raises(CaptureError, match="ascending"):
        ids_for([31, 0, 3], "sglang", "0.5.23", LLAMA, 61)


def test_serve_table_for_the_seed_fix():
    table = serve_table([-1, 2, 30], LLAMA, 61, want=[0, 3, 31])
    verdict = dict(zip(table.version, table.verdict))
    assert verdict["0.5.22-0.5.23"] == "ok" and verdict["0.5.11-0.5.21"] == "needs the patch"
    assert set(table.model_file) == {"srt/models/llama.py"}


# ---------------------------------------------------------------- bad input

def test_bad_input_is_a_clear_error():
    with pytest.raises(ConventionError, match="nearest known: 0.5.23"):
        serve_boundaries("sglang", "0.6.0", LLAMA, None, 32)
    with pytest.raises(ConventionError, match="nearest known: 0.4.4"):
        serve_boundaries("sglang", "0.3.0", LLAMA, None, 32)
    with pytest.raises(ConventionError, match="not a version"):
        serve_boundaries("sglang", "latest", LLAMA, None, 32)
    with pytest.raises(ConventionError, match="out of range"):
        serve_boundaries("sglang", "0.5.23", LLAMA, [1, 15, 40], 32)
    with pytest.raises(ConventionError, match="known: sglang, vllm"):
        serve_boundaries("tgi", "1.0", LLAMA, None, 32)
    with pytest.raises(ConventionError, match="architecture"):
        serve_boundaries("sglang", "0.5.23", "MambaForCausalLM", None, 32)
    with pytest.raises(ConventionError, match="unknown trainer"):
        train_boundaries("axolotl", "1.0", None, 32)
    with pytest.raises(ConventionError, match="out of range"):
        train_boundaries("hf-hidden-states", "5.0.0", [0, 3, 70], 61)
    assert issubclass(ConventionError, EagleLabError) and issubclass(CaptureError, EagleLabError)


def test_boundaries_behave_as_a_list():
    b = serve_boundaries("sglang", "0.5.23", LLAMA, None, 32)
    assert isinstance(b, Boundaries) and isinstance(b, list) and b == [2, 16, 29] and b.warnings == []
    assert "0.5.23" in b.source


def test_kimi_k25_setter_from_0_5_10():
    with pytest.raises(CaptureError, match="before 0.5.10"):
        serve_boundaries("sglang", "0.5.9", "KimiK25ForConditionalGeneration", [1, 29, 57], 61)
    assert serve_boundaries("sglang", "0.5.11", "KimiK25ForConditionalGeneration", [1, 29, 57], 61) == [2, 30, 58]


def test_default_repeats_a_boundary_below_eight_layers():
    """[2, N//2, N-3] with N = 6 is [2, 3, 3]: both engines capture 3 once, the fc gets 2H, not 3H."""
    for engine, version in [("sglang", "0.5.23"), ("vllm", "0.33.0")]:
        with pytest.raises(CaptureError) as exc:
            serve_boundaries(engine, version, LLAMA, None, 6)
        assert exc.value.kind == "dropped" and exc.value.fed == [2, 3]
    assert serve_boundaries("sglang", "0.5.23", LLAMA, None, 8) == [2, 4, 5]

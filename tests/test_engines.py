"""The engine registry: one record per engine, looked up by name, pins parsed once."""

import re
from pathlib import Path

import pytest

from eagle3lab import engines
from eagle3lab.serving import server
from eagle3lab.errors import EagleLabError
from eagle3lab.spec import LATEST, SpecConfig, chain, split_engine


def test_registry_names_and_lookup():
    assert set(engines.names()) == {"lab", "sglang", "vllm"}
    assert engines.get("vLLM==0.32.0").name == "vllm"
    assert engines.lookup("trtllm") is None and engines.lookup(None) is None
    with pytest.raises(EagleLabError, match="unknown engine 'trtllm'"):
        engines.get("trtllm")
    assert engines.resolving() == ("sglang", "vllm")


def test_every_engine_fills_the_record():
    for name in engines.names():
        eng = engines.get(name)
        assert eng.observes_acceptance_via in ("meta_info", "/metrics", "step records")
        assert eng.api in ("generate", "openai")
        assert eng.log_grammar in ("sglang", "vllm")
        argv = eng.launch_argv("/m", "/d", {"num_steps": 3}, "127.0.0.1", 1234, (), python="py", gpu=True) \
            if eng.own_tmpdir is None else None
        if argv is not None:
            assert "1234" in argv and "/m" in argv


def test_pins_resolve_to_each_engines_default():
    assert split_engine("SGLang==0.5.9") == ("sglang", "0.5.9")
    assert split_engine("vllm", "0.32.0") == ("vllm", "0.32.0")
    with pytest.raises(EagleLabError, match="two versions"):
        split_engine("sglang==0.5.9", "0.5.2")
    assert engines.pinned("sglang") == (engines.get("sglang"), LATEST["sglang"])
    assert engines.pinned("vllm")[1] == "main"
    with pytest.raises(EagleLabError, match="not a version"):
        engines.pinned("sglang==latest")
    with pytest.raises(EagleLabError, match="no versions"):
        engines.pinned("lab==1")


def test_server_asks_the_registry_for_argv():
    spec = {"num_steps": 3, "topk": 1, "num_draft_tokens": 4, "fault": "no-ttt"}
    assert server.build_command("lab", "/m", "/d", spec) == engines.get("lab").launch_argv("/m", "/d", spec)
    with pytest.raises(EagleLabError, match="switches of the lab engine"):
        server.build_command("sglang", "/m", "/d", spec)
    with pytest.raises(EagleLabError, match="unknown backend"):
        server.build_command("trtllm", "/m", "/d", spec)


def test_the_chain_rule_is_what_both_engines_run():
    k = 4
    assert chain(k) == (4, 1, 5)
    assert SpecConfig(num_steps=k).resolve("vllm").triple == chain(k)
    assert SpecConfig(num_steps=k, topk=1, num_draft_tokens=16).resolve("sglang").triple == chain(k)


def test_engine_facts_replace_name_tests():
    sglang, vllm, lab = (engines.get(n) for n in ("sglang", "vllm", "lab"))
    assert sglang.patch_options == (False, True) and vllm.patch_options == (False,)
    assert vllm.reads_top_level_ids and not sglang.reads_top_level_ids
    assert lab.takes_faults and lab.serves_one_request_at_a_time and not lab.resolves_configs
    assert vllm.drafts_chains_only and vllm.needs_draft_length
    assert sglang.rules_by_version and not vllm.rules_by_version
    assert vllm.pinned == LATEST["vllm"] and sglang.pinned is None and vllm.separate_python
    assert lab.runs_on_cpu and vllm.runs_on_cpu and not sglang.runs_on_cpu
    assert sglang.capture_versions[-1] == LATEST["sglang"] and not lab.capture_versions


def test_known_defects_cover_the_engines_that_have_them():
    from eagle3lab import known_defects

    assert known_defects.ENGINES == tuple(n for n in engines.names() if engines.get(n).has_known_defects)
    assert set(known_defects.ENGINES) == {"sglang", "vllm"}


# An engine's name compared with a string: `x == "vllm"`, `"lab" != x`, `x in ("sglang", "vllm")`.
# Outside eagle3lab/engines/ such a test is a fact about one engine that belongs in its `Engine`
# record (engines/base.py) or its folder (issue #23).
NAME_TEST = re.compile(r"""['"](vllm|sglang|lab)['"] *(==|!=)|(==|!=) *['"](vllm|sglang|lab)['"]"""
                       r"""|in \((['"](vllm|sglang|lab)['"], *)+""")


def _name_tests(root: Path) -> list[str]:
    package = root / "eagle3lab"
    hits = []
    for path in sorted(package.rglob("*.py")):
        if (package / "engines") in path.parents:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if NAME_TEST.search(line):
                hits.append(f"{path.relative_to(root)}:{number}: {line.strip()}")
    return hits


def test_the_scan_finds_a_name_test(tmp_path):
    (tmp_path / "eagle3lab" / "engines").mkdir(parents=True)
    (tmp_path / "eagle3lab" / "a.py").write_text('if backend == "vllm":\n    pass\nif x in ("lab", "sglang"):\n')
    (tmp_path / "eagle3lab" / "engines" / "b.py").write_text('if name == "sglang":\n    pass\n')
    assert _name_tests(tmp_path) == ['eagle3lab/a.py:1: if backend == "vllm":',
                                     'eagle3lab/a.py:3: if x in ("lab", "sglang"):']


def test_no_engine_name_tests_outside_engines():
    hits = _name_tests(Path(__file__).resolve().parent.parent)
    assert not hits, f"{len(hits)} engine-name tests outside eagle3lab/engines/ (ask engines.get(name)):\n" \
        + "\n".join(hits)

"""The incident record (data/incident/): every figure quoted word for word from the story, and no
incident figure typed into the library or the notebooks (they read the record)."""

import hashlib
import re
from pathlib import Path

from eagle3lab.report import incident

ROOT = Path(__file__).resolve().parent.parent


def test_every_quote_is_in_the_story_and_the_copy_is_the_one_recorded():
    rec = incident.load()
    assert rec.missing_quotes() == []
    path = incident.INCIDENT_DIR / "seed.txt"
    raw = __import__("json").loads((incident.INCIDENT_DIR / "incident.json").read_text())
    assert hashlib.sha256(path.read_bytes()).hexdigest() == raw["source"]["sha256"]


def test_each_figure_names_a_measure_a_configuration_and_a_timeline_step():
    rec = incident.load()
    steps = {t["step"] for t in rec.timeline}
    for f in rec.figures.values():
        assert f.measure in rec.measures, f.id
        assert f.config is None or f.config in rec.configs, f.id
        assert f.step in steps, f.id
        # the value the record carries is the one the quote states
        for v in f.values:
            shown = f"{v * 100:.1f}" if f.unit == "share" and v < 1 and f.measure.endswith("accuracy") else \
                f"{v:.2f}" if f.unit == "share" else f"{v:,}" if isinstance(v, int) else f"{v:g}"
            assert shown in f.quote, (f.id, shown)


def test_the_figures_the_post_mortem_needs_are_there():
    rec = incident.load()
    assert rec.figure("baseline_tps").value == 90
    assert rec.figure("after_fix_accept_length").values == (1.73, 1.77, 1.85)
    assert incident.config_label(rec.config("after_fix")) == "5/1/6"
    assert rec.spec("first").num_draft_tokens == 16 and rec.spec("none") is None
    assert round(rec.speedup("after_fix_tps"), 4) == round(54.8 / 90, 4)
    assert rec.figure("after_fix_accept_rate").text() == "0.29–0.30"
    assert rec.figure("validation_accuracy").text() == "74.7 %"


def test_a_missing_record_is_a_clear_error(tmp_path):
    import pytest

    from eagle3lab.errors import EagleLabError

    with pytest.raises(EagleLabError, match="cannot read the incident record"):
        incident.load(str(tmp_path))


# Figures only the story reports: typed anywhere in code or notebooks, they would drift from the record.
_INCIDENT_NUMBERS = ("56.8", "46.7", "54.8", "74.7", "76.9", "1.73", "1.77", "1.85", "90 tok/s")
_VERSION = re.compile(r"\d+\.\d+\.\d+")  # 0.29.0 is a vLLM version, not the incident's accept rate


def test_no_incident_figure_is_typed_into_the_library_or_the_notebooks():
    found = []
    files = list((ROOT / "eagle3lab").rglob("*.py")) + list((ROOT / "notebooks" / "src").glob("*.py"))
    for path in files:
        for i, line in enumerate(path.read_text().splitlines(), 1):
            code = _VERSION.sub("", line.split("#", 1)[0])
            if "trtllm-bench" in code:  # TensorRT-LLM's log format, quoted as its docs print it
                continue
            for number in _INCIDENT_NUMBERS:
                if re.search(rf"(?<![\d.]){re.escape(number)}(?![\d])", code):
                    found.append(f"{path.relative_to(ROOT)}:{i}: {number}")
    assert not found, "incident figures typed in code (read them from eagle3lab.report.incident):\n" + "\n".join(found)


def test_what_the_write_up_never_states_is_checked_against_it():
    rec = incident.load()
    ids = [u["id"] for u in rec.unstated]
    assert ids == ["sglang_version", "gpu", "tensor_parallel", "output_length", "prompts", "concurrency", "ttt",
                   "cuda_graphs"]
    assert all(u["absent"] and u["what"] and u["why"] for u in rec.unstated)
    assert rec.stated_after_all() == []
    # the check can fail: a story that names its GPU and version
    told = incident.Incident(rec.figures, rec.configs, rec.timeline, rec.model, rec.measures,
                             rec.text + " Served on 8 H200 GPUs with SGLang 0.5.9.", rec.unstated)
    assert told.stated_after_all() == ["sglang_version", "gpu"]

"""The post-mortem on the real-model lab (`eagle3lab report`'s default lab, smollm2): what the
notebooks call on it, without rendering it (a render is `make report`, ~10 minutes).

The figures below come from the shipped lab's manifest (pinned: the code reads them) or from a
decode in this test (the claim asserted, margins in the messages).
"""

from __future__ import annotations

import pytest
import torch

from eagle3lab import experiments
from eagle3lab.report import prose
from eagle3lab.report.postmortem import page, tables


@pytest.fixture(scope="module")
def lab():
    from eagle3lab.lab import load_lab

    torch.set_num_threads(1)
    return load_lab("smollm2", build=False)


def test_report_and_notebooks_default_to_the_real_lab():
    import argparse
    import re
    from pathlib import Path

    from eagle3lab.commands import report

    parser = argparse.ArgumentParser()
    report.add_arguments(parser)
    assert parser.parse_args([]).lab == "smollm2"
    root = Path(__file__).resolve().parents[1]
    assert re.search(r"^LAB \?= smollm2$", (root / "Makefile").read_text(), re.M)
    for src in sorted((root / "notebooks" / "src").glob("0*.py")):
        assert re.search(r'^LAB = "smollm2"', src.read_text(), re.M), src.name


def test_hypotheses_and_sweep_lab_per_lab():
    assert experiments.lab_faults("smollm2") == ["wiring-seed", "no-ttt", "no-template", "quant-int4",
                                                 "no-d2t", "normed-last"]
    assert "domain-shift" in experiments.lab_faults("ci") and "no-template" not in experiments.lab_faults("ci")
    assert experiments.sweep_lab("smollm2") == "default" and experiments.sweep_lab("ci") == "ci"
    assert experiments.preset_budget("smollm2") == {"num_prompts": 4, "max_new_tokens": 32, "eval_texts": 4,
                                                    "repeats": 1}


def test_no_template_fault_serves_the_raw_trained_draft(lab):
    from eagle3lab.decoder import make_lab_engine
    from eagle3lab.errors import EagleLabError
    from eagle3lab.lab import load_lab

    engine, plan = make_lab_engine(lab, ["no-template"])
    assert plan.draft_name == "no-template" and list(engine.boundaries) == [2, 15, 27]
    prompt = lab.heldout_prompts(1)[0]
    plain = engine.generate_plain(prompt, 8).output_ids
    from eagle3lab.spec import SpecConfig

    params = SpecConfig(num_steps=5, topk=1, num_draft_tokens=6).resolve(engine="sglang").to_engine_params()
    assert engine.generate(prompt, 8, spec=params).output_ids == plain  # lossless with the wrong draft too
    with pytest.raises(EagleLabError, match="no-template"):
        make_lab_engine(load_lab("ci"), ["no-template"])  # the toy labs have no such draft


def test_training_slice_from_the_manifest(lab):
    sl = lab.training_slice()
    acc = lab.manifest["acceptance"]
    assert sl["trained_emb_low_mid"]["accept_length"] == acc["seed (as trained)"]["5/1/6"]["accept_length"]
    assert sl["trained_low_mid_high"]["accept_length"] == acc["healthy"]["5/1/6"]["accept_length"]
    lo, hi = sl["gap"]["ratio_ci95"]
    assert lo <= sl["gap"]["ratio"] <= hi
    assert sl == lab.training_slice()  # seeded bootstrap: the same interval every time
    text = tables.training_slice_text({"training_slice": sl})
    assert "over 96 held-out chat prompts" in text and f"{sl['gap']['ratio']:.2f}" in text
    # measured when the lab was built, not in this run: both pages say so
    assert "not re-measured in this run" in text
    assert "On the lab, measured when it was built (96 held-out prompts" in tables.training_slice_short({"training_slice": sl})


def test_repetition_beside_the_toy(lab):
    toy = experiments.toy_repetition("smollm2")
    held = experiments.heldout_repetition("smollm2")
    assert experiments.toy_repetition("ci") is None and experiments.heldout_repetition("ci") is None
    assert held["share"] == lab.manifest["repetition"]["chat"]["share"]
    assert toy["lab"] == "default" and toy["requests"] == experiments.BUDGETS["default"]["num_prompts"]
    # the claim the page makes: the toy's greedy text repeats far more than the chat model's
    assert toy["share"] > held["share"] + 0.2, (toy["share"], held["share"])


def test_training_curve_sentence_and_caveat(lab):
    curves = {n: lab.training_curve(n) for n in ("healthy", "no-ttt")}
    text = prose.training_curve_sentence(curves, experiments.ACCEPT_GOAL)
    last = curves["healthy"][-1]
    assert f"{last['accept_length']:.2f}" in text and "not reached" in text and "still rising" in text
    ev = {"training_curve": {"curves": curves, "goal": experiments.ACCEPT_GOAL},
          "acceptance": {"repetition": {"share": 0.33, "window": 4},
                         "toy_repetition": {"share": 0.7}}}
    from eagle3lab.report.render import lab_facts, lab_sentence

    caveat = page.lab_caveat(lab_facts("smollm2"))
    assert caveat == "SmolLM2-135M-Instruct, a pretrained dense chat model, on a CPU"
    limits = page.lab_limits(ev, lab_facts("smollm2"))  # the details page's "About this run"
    assert "33 %" in limits and "70 % for the toy lab" in limits and "short of the 2.5" in limits
    assert "SmolLM2-135M-Instruct (134.5 M parameters, 30 layers" in lab_sentence("smollm2")


def test_by_kind_table(lab):
    table = experiments.by_kind_table("smollm2")
    assert list(table.columns) == ["chat", "code", "long", "maths"]
    assert table.loc["healthy", "maths"] == lab.manifest["acceptance_by_kind"]["healthy"]["maths"]


def test_notebook_01_defines_the_lab_it_runs_on(lab):
    """A cold reader found notebook 01's Terms calling the SmolLM2 lab "a tiny Llama target trained on
    Python source": the glossary was defined before the parameters named the lab."""
    import json
    from pathlib import Path

    from eagle3lab.report import glossary, labwords

    cells = json.loads((Path(__file__).resolve().parents[1] / "notebooks" / "01_config_bug.ipynb").read_text())["cells"]
    code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    params = next(i for i, c in enumerate(cells) if "parameters" in c.get("metadata", {}).get("tags", []))
    defines = next(i for i, c in enumerate(cells) if "glossary.define(" in "".join(c["source"]))
    assert params < defines and "labwords.use(LAB)" in "".join(cells[defines]["source"]), code[:2]
    kept_term, kept_words = glossary.TERMS["the lab"], dict(labwords._ACTIVE)
    try:
        labwords.use(lab)
        assert "SmolLM2-135M-Instruct, a pretrained 135 M-parameter" in glossary.definition("the lab")
        labwords._define_the_lab(None)  # a toy lab's words
        assert "a tiny Llama target trained on Python source" in glossary.definition("the lab")
        assert "eagle3lab's own engine behind an SGLang-compatible API" in glossary.definition("the lab")
    finally:
        glossary.TERMS["the lab"] = kept_term
        labwords._ACTIVE.clear()
        labwords._ACTIVE.update(kept_words)

"""The report's measurement store (eagle3lab.serving.measurements): keys, reuse, damaged lines, appends
from several processes at once."""

from __future__ import annotations

import json
import multiprocessing

import pytest

from eagle3lab.serving import measurements
from eagle3lab.serving.measurements import Store, key_id


def test_equal_keys_give_one_id_whatever_their_order():
    a = {"kind": "spec", "spec": [5, 1, 6], "lab": "x", "prompts": "p"}
    b = {"prompts": "p", "lab": "x", "spec": [5, 1, 6], "kind": "spec"}
    assert key_id(a) == key_id(b)
    assert key_id(a) != key_id({**a, "spec": [5, 1, 7]})
    assert key_id(a) != key_id({**a, "kind": "baseline"})


def test_a_record_is_found_by_its_key_and_survives_a_new_store_object(tmp_path):
    path = tmp_path / "m.jsonl"
    key = {"kind": "baseline", "lab": "x"}
    assert Store(path).get(key) is None
    Store(path).put(key, {"prompts": [{"prompt": 0, "tokens": 3, "seconds": 0.5}]})
    again = Store(path).get(key)
    assert again["key"] == key and again["prompts"][0]["tokens"] == 3
    assert Store(path).get({**key, "lab": "y"}) is None


def test_damaged_lines_are_skipped_and_counted_and_the_next_append_is_whole(tmp_path):
    path = tmp_path / "m.jsonl"
    store = Store(path)
    store.put({"n": 1}, {"v": 1})
    with open(path, "a") as f:  # a line that is not JSON, one that is JSON but no record, and a
        f.write("not json\n[1, 2]\n")  # line a killed kernel left half-written (no newline)
        f.write('{"id": "abc", "key": {"n": 2}, "v": ')
    store.put({"n": 3}, {"v": 3})
    records = store.records()
    assert [r["v"] for r in records] == [1, 3]
    assert store.skipped == 3
    assert store.get({"n": 3})["v"] == 3


def _append_many(path, worker, count):
    store = Store(path)
    for i in range(count):
        store.put({"worker": worker, "i": i}, {"rows": list(range(200))})


def test_concurrent_appends_lose_nothing(tmp_path):
    path = tmp_path / "m.jsonl"
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_append_many, args=(path, w, 25)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    store = Store(path)
    records = store.records()
    assert store.skipped == 0
    assert sorted((r["key"]["worker"], r["key"]["i"]) for r in records) == \
        [(w, i) for w in range(4) for i in range(25)]


def test_the_store_is_off_unless_given_or_named_by_the_environment(tmp_path, monkeypatch):
    monkeypatch.delenv(measurements.ENV, raising=False)
    assert measurements.active() is None
    monkeypatch.setenv(measurements.ENV, str(tmp_path / "env.jsonl"))
    assert measurements.active().path == tmp_path / "env.jsonl"
    assert measurements.active(tmp_path / "given.jsonl").path == tmp_path / "given.jsonl"


# --------------------------------------------------------------------------- on the ci lab

@pytest.fixture(scope="module")
def ci_lab():
    from eagle3lab.lab import load_lab

    return load_lab("ci", progress=False)


def test_the_fault_and_the_wiring_that_feed_the_same_boundaries_share_a_key(ci_lab):
    """03 serves the seed with its trained boundaries, 04 and 05 with the embed-patch fault: one
    configuration, so one key (labels and fault names are not part of it)."""
    from eagle3lab.decoder import make_lab_engine
    from eagle3lab.decoder.faults import FaultPlan, build_engine
    from eagle3lab.decoder.speculate import SpecParams

    prompts = ci_lab.heldout_prompts(2, 48)
    spec = SpecParams.of((5, 1, 6))
    patched, plan = make_lab_engine(ci_lab, ["embed-patch"])
    trained = list(ci_lab.load_draft("seed").train_boundaries)
    wired_plan = FaultPlan(draft_name="seed", layer_ids=[b - 1 for b in trained])
    wired = build_engine(ci_lab.target, ci_lab.load_draft("seed"), wired_plan)
    assert list(patched.boundaries) == list(wired.boundaries) == trained
    keys = [measurements.spec_key(ci_lab, p, e.boundaries, spec, prompts, 32, 0.0)
            for p, e in ((plan, patched), (wired_plan, wired))]
    assert key_id(keys[0]) == key_id(keys[1])
    healthy, hplan = make_lab_engine(ci_lab, [])
    other = measurements.spec_key(ci_lab, hplan, healthy.boundaries, spec, prompts, 32, 0.0)
    assert key_id(other) != key_id(keys[0])
    # plain decoding does not depend on the draft: one baseline for both
    assert key_id(measurements.baseline_key(ci_lab, hplan, prompts, 32, 0.0)) == \
        key_id(measurements.baseline_key(ci_lab, plan, prompts, 32, 0.0))
    quant = make_lab_engine(ci_lab, ["quant-int4"])[1]
    assert key_id(measurements.baseline_key(ci_lab, quant, prompts, 32, 0.0)) != \
        key_id(measurements.baseline_key(ci_lab, plan, prompts, 32, 0.0))


def test_a_configuration_is_measured_once_and_the_baseline_reused(ci_lab, tmp_path, monkeypatch):
    calls = []
    measure = measurements._measure

    def counting(*args, **kwargs):
        calls.append((kwargs["base"], kwargs["spec_run"]))
        return measure(*args, **kwargs)

    monkeypatch.setattr(measurements, "_measure", counting)
    store = Store(tmp_path / "m.jsonl")
    prompts = ci_lab.heldout_prompts(2, 48)
    first = measurements.lab_bench(ci_lab, (3, 1, 4), ["embed-patch"], prompts=prompts, max_new_tokens=16,
                                   store=store)
    again = measurements.lab_bench(ci_lab, (3, 1, 4), ["embed-patch"], prompts=prompts, max_new_tokens=16,
                                   store=store)
    other = measurements.lab_bench(ci_lab, (2, 1, 3), [], prompts=prompts, max_new_tokens=16, store=store)
    assert calls == [(True, True), (True, True)]  # each config with its own paired baseline, once
    assert first.summary() == again.summary()
    assert first.requests.equals(again.requests) and first.steps.equals(again.steps)
    assert first.lossless is True and other.lossless is True
    assert len(store.records()) == 4
    monkeypatch.setattr(measurements, "REUSE_BASELINE", True)
    calls.clear()
    shared = Store(tmp_path / "shared.jsonl")
    one = measurements.lab_bench(ci_lab, (3, 1, 4), ["embed-patch"], prompts=prompts, max_new_tokens=16,
                                 store=shared)
    two = measurements.lab_bench(ci_lab, (2, 1, 3), [], prompts=prompts, max_new_tokens=16, store=shared)
    assert calls == [(True, True), (False, True)]  # the second config measured alone
    assert list(two.requests["base_s"]) == list(one.requests["base_s"])  # the same baseline rows
    assert len(first.requests) == 2 and first.summary()["prompts"] == 2


def test_without_a_store_nothing_is_written(ci_lab, tmp_path, monkeypatch):
    monkeypatch.delenv(measurements.ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    result = measurements.lab_bench(ci_lab, (2, 1, 3), [], n_prompts=1, max_new_tokens=8)
    assert len(result.requests) == 1 and list(tmp_path.iterdir()) == []
    assert json.dumps(result.summary(), default=str)

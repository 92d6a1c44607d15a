"""`make test` runs on two workers (tests/conftest.py): a module's fixtures, and the costly session
fixtures that several modules share, must each be built once, so each such group runs on one worker."""

from __future__ import annotations

import conftest


def test_every_test_using_a_shared_fixture_is_in_its_group(request):
    groups = conftest.worker_groups()
    wrong = [(item.nodeid, fixture, groups.get(item.path.name))
             for item in request.session.items
             for fixture in conftest.SHARED_SESSION_FIXTURES
             if fixture in item.fixturenames and groups.get(item.path.name) != fixture]
    assert not wrong, wrong  # such a test would build the fixture again on the other worker


def test_groups_by_module_and_shared_fixture():
    groups = conftest.worker_groups()
    assert groups["test_notebooks.py"] == groups["test_browser.py"] == "ci_report"
    assert groups["test_vllm_serving.py"] == groups["test_doctor_server.py"] == "vllm_healthy"
    assert groups["test_layers.py"] == "test_layers.py"
    assert set(conftest.LONGEST_FIRST) <= set(groups.values())  # a renamed file would silently lose its place


def test_the_scheduler_splits_node_ids_into_those_groups():
    assert conftest._module("tests/test_browser.py::test_x[a::b]") == "test_browser.py"
    assert conftest._module("test_layers.py::test_no_import_cycle") == "test_layers.py"

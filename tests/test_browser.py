"""A real browser: JupyterLab runs notebook 04 in headless Chromium, a slider of the
acceptance-versus-depth widget is moved and the plot must change; then the rendered HTML
report is opened in the same browser and every image must load.

Debian's chromium (/usr/bin/chromium; scripts/test.sh installs it) driven by Playwright.
The screenshot lands in artifacts/ (gitignored) as the test's artifact.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

from eagle3lab.report import render as report

pytestmark = [pytest.mark.browser, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = REPO / "artifacts"
NOTEBOOK = "04_accept_length_analysis.ipynb"
TOKEN = "eagle3lab-browser-test"
RUN_ALL_TIMEOUT_S = 420


def _free_port() -> int:
    """Below the ephemeral range, as servers' ports are (eagle3lab.serving.server.free_port)."""
    from eagle3lab.serving.server import free_port

    return free_port()


def _processes_mentioning(text: str) -> list[int]:
    """PIDs whose command line mentions `text` (kernels carry their runtime dir's path)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="ignore")
            except OSError:
                continue
            if text in cmdline:
                pids.append(int(entry.name))
    return pids


def _wait_http(url: str, timeout: float, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"jupyter lab exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"jupyter lab did not answer {url} in {timeout} s:\n{log.read_text()[-3000:]}")


@pytest.fixture(scope="module")
def lab_server(tmp_path_factory):
    """JupyterLab on 127.0.0.1 with its own config/runtime/workspace dirs, serving a copy of
    notebook 04 parameterised for the ci lab (the repo's notebook is never written)."""
    from eagle3lab.lab import load_lab

    load_lab("ci", build=True, progress=False)  # build it here, not against the browser's clock
    root = tmp_path_factory.mktemp("jlab")
    work, home = root / "work", root / "home"
    work.mkdir()
    home.mkdir()
    nb = report.inject_parameters(report.read_notebook(REPO / "notebooks" / NOTEBOOK), {"LAB": "ci"})
    nbformat.write(nb, work / NOTEBOOK)
    runtime = root / "runtime"
    # Render every cell (JupyterLab 4 only renders the cells in view by default).
    tracker = home / "settings" / "@jupyterlab" / "notebook-extension" / "tracker.jupyterlab-settings"
    tracker.parent.mkdir(parents=True)
    tracker.write_text(json.dumps({"windowingMode": "none"}))
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(runtime), "JUPYTER_CONFIG_DIR": str(home / "config"),
           "JUPYTERLAB_SETTINGS_DIR": str(home / "settings"),
           "JUPYTERLAB_WORKSPACES_DIR": str(home / "workspaces"),
           "IPYTHONDIR": str(home / "ipython"), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    port = _free_port()
    log = root / "jupyter.log"
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1",
           f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
           f"--IdentityProvider.token={TOKEN}", f"--ServerApp.root_dir={work}",
           "--LabApp.expose_app_in_browser=True", "--LabApp.news_url=None",
           "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
           "--LabApp.extension_manager=readonly", "--ServerApp.allow_root=True"]
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=work,
                                start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_http(f"{url}/api/status?token={TOKEN}", 90, proc, log)
        yield {"url": url, "work": work, "runtime": runtime}
    finally:
        try:  # the server shuts its kernels down first
            req = urllib.request.Request(f"{url}/api/shutdown?token={TOKEN}", method="POST")
            urllib.request.urlopen(req, timeout=10)
        except OSError:
            pass
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=10)
        leftovers = _processes_mentioning(str(runtime))
        for pid in leftovers:
            os.kill(pid, signal.SIGKILL)
        assert not leftovers, f"kernel processes outlived jupyter lab: {leftovers}"


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    assert Path(report.CHROMIUM).exists(), "chromium missing: apt-get install chromium"
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=report.CHROMIUM, args=report.CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


NOTEBOOK_JSON = "() => { const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;" \
                " return w && w.context ? w.context.model.toJSON() : null; }"
KERNEL_STATUS = "() => { const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;" \
                " const k = w && w.sessionContext && w.sessionContext.session &&" \
                " w.sessionContext.session.kernel; return k ? k.status : null; }"


def _wait_for(page, predicate, timeout_s: float, what: str, poll_s: float = 1.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        page.wait_for_timeout(int(poll_s * 1000))
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")


def _all_cells_ran(page):
    nb = page.evaluate(NOTEBOOK_JSON)
    if not nb or page.evaluate(KERNEL_STATUS) != "idle":
        return None
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    errors = [o for c in code for o in c.get("outputs", []) if o.get("output_type") == "error"]
    if errors:
        raise AssertionError(f"a cell failed in JupyterLab: {errors[0].get('ename')}: {errors[0].get('evalue')}")
    return nb if all(c.get("execution_count") for c in code) else None


def _depth_in(summary_text: str) -> int | None:
    found = re.search(r"at depth (\d+)", summary_text)
    return int(found.group(1)) if found else None


def _slider(page, description: str):
    """The ipywidgets slider whose description label reads exactly `description`."""
    label = page.locator(".widget-label", has_text=re.compile(rf"^\s*{re.escape(description)}\s*$"))
    return page.locator(".widget-slider").filter(has=label).first


def test_widget_slider_changes_the_plot_and_report_images_load(lab_server, browser, ci_report):
    ARTIFACTS.mkdir(exist_ok=True)
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(60_000)
    page.goto(f"{lab_server['url']}/lab/tree/{NOTEBOOK}?token={TOKEN}")
    _wait_for(page, lambda: page.evaluate(KERNEL_STATUS) == "idle", 120, "the kernel to start")
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
    nb = _wait_for(page, lambda: _all_cells_ran(page), RUN_ALL_TIMEOUT_S, "all cells to run", poll_s=2)
    assert any("application/vnd.jupyter.widget-view+json" in o.get("data", {})
               for c in nb["cells"] for o in c.get("outputs", [])), "no widget was displayed"

    page.wait_for_timeout(1000)
    assert page.get_by_text("Click to show javascript error.").count() == 0, "a widget failed to render"
    depth = _slider(page, "depth")
    try:
        depth.scroll_into_view_if_needed(timeout=30_000)
    except Exception:
        page.screenshot(path=str(ARTIFACTS / "browser_04_failure.png"), full_page=True)
        raise
    image = page.locator(".widget-image").first
    summary = depth.locator("xpath=ancestor::div[contains(@class,'widget-vbox')][1]").locator(".widget-html").first
    before_src, before_text = image.get_attribute("src"), summary.inner_text()
    assert before_src and before_text, "the widget shows no plot or no summary"
    handle = depth.locator(".noUi-handle").first
    handle.focus()
    for _ in range(2):
        handle.press("ArrowRight")
    _wait_for(page, lambda: image.get_attribute("src") != before_src, 30, "the plot to be redrawn", 0.25)
    # the summary names the depth: wait for both key presses to be redrawn (each one redraws)
    before_depth = _depth_in(before_text)
    assert before_depth is not None, f"the summary names no depth: {before_text!r}"
    _wait_for(page, lambda: _depth_in(summary.inner_text()) == before_depth + 2, 30,
              "the summary to show the depth two steps up", 0.25)
    after_text = summary.inner_text()
    assert after_text != before_text, "the summary did not change with the depth slider"
    assert image.get_attribute("src") != before_src, "the plot did not change with the depth slider"
    image.scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "browser_04_widget.png"))

    # The rendered report (the session's, rendered once: conftest.ci_report), in the same browser.
    run = next(r for r in ci_report.runs if r.name.startswith("04"))
    assert run.ok, run.error
    page.goto(run.html_path.resolve().as_uri(), wait_until="load")
    sizes = page.evaluate("() => Array.from(document.images).map(i => [i.complete, i.naturalWidth])")
    assert len(sizes) >= 3, f"expected the report's plots, found {len(sizes)} images"
    assert all(done and width > 0 for done, width in sizes), sizes
    page.screenshot(path=str(ARTIFACTS / "browser_report.png"))
    page.close()


def test_rendered_report_explorer_moves_without_a_kernel(browser, ci_report):
    """The shared page, opened as a file (no kernel, no network): moving the explorer's cost slider
    redraws the speed-up curve and the best depth follows the cost (cheaper drafts: deeper)."""
    ARTIFACTS.mkdir(exist_ok=True)
    page = browser.new_page(viewport={"width": 1200, "height": 1000})
    page.route("http*://**", lambda route: route.abort())  # the page must need nothing from outside
    for html in (next(r for r in ci_report.runs if r.name.startswith("04")).html_path,):
        page.goto(Path(html).resolve().as_uri(), wait_until="load")
        explorer = page.locator(".eagle3lab-explorer").first
        explorer.scroll_into_view_if_needed()
        role = lambda r: explorer.locator(f'[data-role="{r}"]')  # noqa: E731
        cost = role("cost")
        reading = lambda: (role("best-depth").inner_text(), role("speedup").inner_text(),  # noqa: E731
                           role("speedup-curve").get_attribute("d"), role("cost-value").inner_text())
        cost.focus()
        cost.press("Home")
        cheap = reading()
        cost.press("End")
        dear = reading()
        assert cheap[3] == "0.000" and float(dear[3]) > 0.1, (cheap, dear)
        assert cheap[2] != dear[2], "the speed-up curve did not change with the cost slider"
        assert int(cheap[0]) >= int(dear[0]), (cheap, dear)
        depth = role("depth")
        depth.focus()
        depth.press("End")
        assert role("depth-value").inner_text() == depth.get_attribute("max")
        page.screenshot(path=str(ARTIFACTS / "browser_report_explorer.png"))
    page.close()


INDEX_WORDS = 900  # a ceiling against growth, not a reading time: visible on load, 899 words on this ci render and 897 on SmolLM2 (2026-12-07, last: the ids' caption with its subject and the wiring row's "whose code", cold reads 151-153; "none work" in the ids table, cold read 145; the bytes model first in why it was slower, each public-draft configuration with its own range, the ids' caption in sentences, "neither" named, the code reading of the CUDA-graph reset said as what the code ignores, cold reads 139-147; paid for by the lab's page unnamed in the header, the runbook's line in the box (each item links its section), a shorter slice row, item 2 and item 5; cold reads 139-153 put one careful read at 8-15 minutes, 12 in most, with or without the ids table, and at 8-12 on a 550-word trial without the quotes and full commands issue 41 asks for (148-150); 2026-12-06: the CUDA-graph reset named a code reading, read 133; item 5's probe line with --draft-accuracy, the wiring row in two sentences, the ids' caption with the layers' reading, the 121's range, cold reads 123-134; paid for by the lab named alone in the header and the slice's lab effect in words; before: 892 on ci and 898 on SmolLM2; why it was slower in a line under what happened, cold reads 106-108; the wiring as one action and the wiring among the accept length's suspects, reads 108-116; paid for by a shorter ids caption, the unstated list without articles and the first cause's row without the step cost's restatement; earlier: the ids by release under the bottom line, captioned with the draft they are for, cold reads 88, 90-92, 102; the wiring's action first, then whether the patch took (unknown: the setter the write-up read gives its layers with CUDA graphs on or off), reads 93-105; 943 before the bottom line; the lab's training-slice clause varies by a few words with the CPU); cold reads 90-105 put one careful read at 8-10 to 12-15 minutes, and the time to know what to do first at 3-8 in most (issue 41 asks for 10 for the read): docs/report-method.md


def test_the_index_stays_within_its_word_budget_and_shows_no_code(browser, ci_report):
    """The index's visible text as Chromium renders it, counted as `wc -w` counts (whitespace-
    separated words; tables included, figures excluded): at most INDEX_WORDS, and no code cell."""
    page = browser.new_page(viewport={"width": 1200, "height": 1000})
    page.route("http*://**", lambda route: route.abort())
    page.goto(ci_report.index_path.resolve().as_uri(), wait_until="load")
    words = len(page.evaluate("() => document.body.innerText").split())
    code_cells = page.locator(".jp-CodeCell").count()
    tables = page.locator("table").count()  # the ids by release and the causes; the timeline is a list
    link = page.locator('a[href^="runbook.html#Item-1"]')  # the box's first item, linking to its runbook section
    link.click()  # the box's look-up tables on the runbook, open and rendered (not Markdown text)
    page.wait_for_load_state("load")
    rows = [page.locator("table").nth(i).locator("tr").count() for i in range(page.locator("table").count())]
    heads = page.locator("h2").all_inner_texts()
    page.goto((ci_report.out_dir / "details.html").resolve().as_uri(), wait_until="load")  # its figures
    images = page.evaluate("() => Array.from(document.images).map(i => [i.complete, i.naturalWidth, i.alt])")
    page.close()
    assert 300 < words <= INDEX_WORDS, f"the index has {words} words (at most {INDEX_WORDS})"
    assert tables == 2 and len(rows) == 2 and all(n > 3 for n in rows), (tables, rows)
    assert [h.strip("¶ ") for h in heads[1:7]] == [f"Item {i}:" + h.split(":", 1)[1].rstrip("¶ ")
                                                     for i, h in enumerate(heads[1:7], 1)], heads
    assert code_cells == 0, f"the index shows {code_cells} code cells"
    assert images and all(done and width > 0 and alt for done, width, alt in images), images

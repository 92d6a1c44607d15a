"""Execute the notebooks and render the post-mortem: one HTML page per notebook plus index.html,
details.html and runbook.html.

The notebooks are the product; this module is the press that prints them. Each notebook has a
cell tagged ``parameters`` (the papermill convention); `inject_parameters` rewrites the values
of that cell's assignments, `execute_notebook` runs it top to bottom with nbclient, and
`build_report` writes the executed notebooks, a page per notebook and one combined page whose
plots are embedded as base64 PNGs, so the HTML can be mailed or attached to an issue as is.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import json
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from eagle3lab import engines
from eagle3lab.serving import measurements
from eagle3lab.errors import EagleLabError
from eagle3lab.paths import REPO_DIR, write_probe_script
from eagle3lab.spec import LATEST_SGLANG

NOTEBOOKS_DIR = REPO_DIR / "notebooks"
PARAMETERS_TAG = "parameters"
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
WIDGET_NOTE = ("<p><em>Live widget: it needs a kernel (open the notebook in JupyterLab). Where an "
               "in-page explorer follows it, that one works on this page as is.</em></p>")
_NOTEBOOK_NAME = re.compile(r"^\d\d_[A-Za-z0-9_]+\.ipynb$")
# Scripts fetched from a CDN (require.js, MathJax, the widget manager): the rendered report is
# self-contained and readable offline, so they are dropped.
_REMOTE_SCRIPT = re.compile(r"<script[^>]*\bsrc=\"https?://[^\"]*\"[^>]*>\s*</script>", re.I)


class NotebookError(EagleLabError):
    """A notebook could not be found, parameterised or parsed."""


@dataclass
class CellError:
    """The first failing cell of a notebook run, named so a reader can find it."""

    notebook: str
    cell_index: int          # 0-based index in the notebook's cell list
    execution_count: int | None
    ename: str
    evalue: str
    source: str = ""

    def __str__(self) -> str:
        first_line = next((ln for ln in self.source.splitlines() if ln.strip()), "")
        where = f"cell {self.cell_index}" + (f" [{self.execution_count}]" if self.execution_count else "")
        return f"{self.notebook}: {where} `{first_line[:60]}` raised {self.ename}: {self.evalue}".rstrip()


@dataclass
class NotebookRun:
    """What one execution produced: the executed notebook, its duration and any error."""

    name: str
    path: Path
    notebook: Any
    seconds: float
    error: CellError | None = None
    parameters: dict = field(default_factory=dict)
    ipynb_path: Path | None = None
    html_path: Path | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass
class Report:
    """The result of `build_report`: the runs and where the pages were written."""

    runs: list[NotebookRun]
    out_dir: Path
    index_path: Path

    @property
    def ok(self) -> bool:
        return all(run.ok for run in self.runs)

    @property
    def errors(self) -> list[CellError]:
        return [run.error for run in self.runs if run.error]

    def summary(self):
        """One row per notebook: status, seconds, the error if any (a DataFrame)."""
        import pandas as pd

        return pd.DataFrame([{"notebook": r.name, "status": "ok" if r.ok else "error",
                              "seconds": round(r.seconds, 1), "error": str(r.error or ""),
                              "html": r.html_path.name if r.html_path else ""} for r in self.runs])


# --------------------------------------------------------------------------- notebooks on disk

def list_notebooks(directory: Path | str = NOTEBOOKS_DIR, only: Iterable[str] | None = None) -> list[Path]:
    """The ordered notebooks ``NN_name.ipynb``; `only` selects by number ("01") or name."""
    directory = Path(directory)
    paths = sorted(p for p in directory.glob("*.ipynb") if _NOTEBOOK_NAME.match(p.name))
    if not paths:
        raise NotebookError(f"no notebooks (NN_name.ipynb) in {directory}")
    if not only:
        return paths
    wanted = [w.strip() for w in only if w.strip()]
    chosen, unknown = [], []
    for w in wanted:
        hits = [p for p in paths if p.stem == w or p.name == w or p.stem.split("_", 1)[0] == w.zfill(2)]
        if hits:
            chosen += [h for h in hits if h not in chosen]
        else:
            unknown.append(w)
    if unknown:
        raise NotebookError(f"no notebook matches {', '.join(unknown)} "
                            f"(have: {', '.join(p.stem for p in paths)})")
    return sorted(chosen)


def read_notebook(path: Path | str):
    """Load a notebook with nbformat, as a user-facing error when it is not one."""
    import nbformat

    path = Path(path)
    try:
        return nbformat.read(path, as_version=4)
    except FileNotFoundError:
        raise NotebookError(f"notebook not found: {path}") from None
    except Exception as exc:  # nbformat raises several unrelated types for a damaged file
        raise NotebookError(f"cannot read notebook {path}: {exc}") from None


# --------------------------------------------------------------------------- parameters

def parameters_cell_index(nb) -> int:
    """Index of the cell tagged ``parameters``; a NotebookError when there is none."""
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and PARAMETERS_TAG in cell.get("metadata", {}).get("tags", []):
            return i
    raise NotebookError("the notebook has no cell tagged 'parameters'")


def _assignments(source: str) -> dict[str, ast.expr]:
    """Top-level ``NAME = literal`` assignments of a parameters cell, by name."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise NotebookError(f"the parameters cell is not valid Python: {exc}") from None
    found = {}
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if len(targets) == 1 and isinstance(targets[0], ast.Name) and node.value is not None:
                found[targets[0].id] = node.value
    return found


def read_parameters(nb) -> dict[str, Any]:
    """The parameters cell's values (literals only; anything else as its source text)."""
    source = nb.cells[parameters_cell_index(nb)].source
    values = {}
    for name, node in _assignments(source).items():
        try:
            values[name] = ast.literal_eval(node)
        except ValueError:
            values[name] = ast.get_source_segment(source, node)
    return values


def inject_parameters(nb, parameters: dict[str, Any] | None = None):
    """A copy of `nb` whose parameters cell assigns the given values (comments kept).

    Papermill adds a second cell; here the tagged cell itself is rewritten, so a reader of the
    executed notebook sees the values it ran with in the one place they are documented.
    """
    nb = copy.deepcopy(nb)
    if not parameters:
        return nb
    cell = nb.cells[parameters_cell_index(nb)]
    nodes = _assignments(cell.source)
    unknown = sorted(set(parameters) - set(nodes))
    if unknown:
        raise NotebookError(f"unknown parameter(s) {', '.join(unknown)}; "
                            f"this notebook takes {', '.join(nodes) or 'none'}")
    lines = cell.source.splitlines(keepends=True)
    # Replace from the bottom up so earlier offsets stay valid.
    for name in sorted(parameters, key=lambda n: (nodes[n].lineno, nodes[n].col_offset), reverse=True):
        node, value = nodes[name], parameters[name]
        text = repr(value)
        try:
            ast.literal_eval(text)
        except (ValueError, SyntaxError):
            raise NotebookError(f"parameter {name}={value!r} is not a Python literal") from None
        start = _offset(lines, node.lineno, node.col_offset)
        end = _offset(lines, node.end_lineno, node.end_col_offset)
        source = "".join(lines)
        lines = (source[:start] + text + source[end:]).splitlines(keepends=True)
    cell.source = "".join(lines)
    cell.metadata.setdefault("tags", [])
    if "injected-parameters" not in cell.metadata["tags"]:
        cell.metadata["tags"].append("injected-parameters")
    return nb


def _offset(lines: list[str], lineno: int, col: int) -> int:
    """Character offset of (1-based line, utf-8 byte column) in the joined lines."""
    line = lines[lineno - 1]
    return sum(len(ln) for ln in lines[:lineno - 1]) + len(line.encode()[:col].decode(errors="ignore"))


def parse_parameter(text: str) -> tuple[str, Any]:
    """``NAME=VALUE`` from the command line; VALUE as a Python literal, else as a string."""
    name, sep, raw = text.partition("=")
    if not sep or not name.strip().isidentifier():
        raise NotebookError(f"expected NAME=VALUE, got {text!r}")
    try:
        value = ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        value = raw
    return name.strip(), value


# --------------------------------------------------------------------------- execution

def find_errors(nb, name: str = "notebook") -> list[CellError]:
    """Every error output in an executed notebook (what CI fails on)."""
    errors = []
    for i, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
            if out.get("output_type") == "error":
                errors.append(CellError(name, i, cell.get("execution_count"), out.get("ename", "Error"),
                                        out.get("evalue", ""), cell.source))
    return errors


def execute_notebook(path: Path | str, parameters: dict[str, Any] | None = None, *,
                     timeout: int = 1200, progress: bool = True, cwd: Path | str | None = None,
                     kernel_name: str = "python3") -> NotebookRun:
    """Run a notebook top to bottom in a fresh kernel; the run carries the first error, if any.

    Execution stops at the first failing cell (nbclient's default), and the notebook returned
    keeps every output up to and including that cell's traceback.
    """
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    path = Path(path)
    nb = inject_parameters(read_notebook(path), parameters)
    name = path.stem
    code_cells = sum(1 for c in nb.cells if c.cell_type == "code")
    bar = _progress_bar(name, code_cells) if progress else None
    current = {"index": 0}

    def on_cell_start(cell, cell_index, **_):
        current["index"] = cell_index

    def on_cell_executed(cell, cell_index, **_):
        if bar is not None:
            bar.update(1)

    # The kernel's own log level: its warning that local TCP is unencrypted is noise here.
    client = NotebookClient(nb, timeout=timeout, kernel_name=kernel_name, allow_errors=False,
                            extra_arguments=["--IPKernelApp.log_level=ERROR"],
                            record_timing=True, resources={"metadata": {"path": str(cwd or path.parent)}},
                            on_cell_start=on_cell_start, on_cell_executed=on_cell_executed)
    error = None
    start = time.perf_counter()
    try:
        client.execute()
    except CellExecutionError as exc:
        error = _cell_error(client.nb, name, current["index"], exc.ename, exc.evalue)
    except CellTimeoutError:
        error = _cell_error(client.nb, name, current["index"], "CellTimeoutError",
                            f"the cell ran longer than {timeout} s (--timeout)")
    except DeadKernelError as exc:
        error = _cell_error(client.nb, name, current["index"], "DeadKernelError", str(exc))
    finally:
        if bar is not None:
            bar.close()
    seconds = time.perf_counter() - start
    if error is None:
        found = find_errors(client.nb, name)
        error = found[0] if found else None
    return NotebookRun(name, path, client.nb, seconds, error, dict(parameters or {}))


def _cell_error(nb, name: str, index: int, ename: str, evalue: str) -> CellError:
    cell = nb.cells[index] if index < len(nb.cells) else {"source": "", "execution_count": None}
    return CellError(name, index, cell.get("execution_count"), ename, (evalue or "").strip(),
                     cell.get("source", ""))


def _progress_bar(name: str, total: int):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=f"{name:<28}", unit="cell", file=sys.stderr, leave=True,
                dynamic_ncols=True)


# --------------------------------------------------------------------------- rendering

def _static_copy(nb):
    """A copy fit for a static page: widget views replaced by a note, widget state dropped."""
    import nbformat

    from eagle3lab.report import evidence

    nb = copy.deepcopy(nb)
    nb.metadata.pop("widgets", None)
    evidence.strip(nb)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        outputs = []
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if WIDGET_MIME not in data:
                outputs.append(out)
            elif not _is_progress_bar(data.get("text/plain", "")):
                outputs.append(nbformat.v4.new_output("display_data", data={"text/html": WIDGET_NOTE}))
        cell.outputs = outputs
    return nb


def _is_progress_bar(text) -> bool:
    """A tqdm notebook bar's plain-text fallback ("  0%|          | 0/74 [...]")."""
    text = "".join(text) if isinstance(text, list) else str(text)
    return bool(re.search(r"\d+%\|", text))


def render_html(nb, title: str | None = None, *, exclude_input: bool = False) -> str:
    """One self-contained HTML page (plots inline as base64 PNG, no remote scripts)."""
    from nbconvert import HTMLExporter

    nb = _static_copy(nb)
    if title:
        nb.metadata["title"] = title
    exporter = HTMLExporter(template_name="lab", embed_images=True, exclude_input=exclude_input,
                            exclude_input_prompt=exclude_input, exclude_output_prompt=exclude_input)
    html, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": title or "notebook"}})
    html = _REMOTE_SCRIPT.sub("", html)
    return html.replace("</head>", _WIDE_OUTPUTS_CSS + "</head>", 1)


# Wide tables scroll inside their cell instead of being clipped at the page edge.
_WIDE_OUTPUTS_CSS = ("<style>.jp-OutputArea-output table{display:block;overflow-x:auto;max-width:100%;}"
                     ".jp-OutputArea-output{overflow-x:auto;}</style>\n")

_LOCAL_PATH = re.compile(r"(?<![\w.:/])(/tmp/|/work/|/root/|/home/|/var/folders/|[A-Z]:\\Users\\)[^\s\"'<>)]*")


def local_paths(html: str) -> list[str]:
    """Local filesystem paths in a rendered page's visible text (a shared report must not carry
    them: they mean nothing to its reader and leak the author's machine)."""
    text = re.sub(r"<(script|style)[^>]*>.*?</\1>", " ", html, flags=re.S | re.I)
    text = re.sub(r'src="data:[^"]*"', " ", text)
    text = re.sub(r"<[^>]+>", " ", text)
    return sorted(set(m.group(0) for m in _LOCAL_PATH.finditer(_html_unescape(text))))


def _html_unescape(text: str) -> str:
    import html

    return html.unescape(text)


def broken_links(html: str, folder=None) -> list[str]:
    """Links in a page that would break: in-page anchors with no matching id, and relative links
    to files that are not in `folder` (the report folder the page sits in; none when not given)."""
    ids = set(re.findall(r'\b(?:id|name)="([^"]+)"', html))
    bad = []
    for href in re.findall(r'\bhref="([^"]*)"', html):
        if href.startswith("#"):
            import urllib.parse

            target = urllib.parse.unquote(href[1:])
            if target and target not in ids and href[1:] not in ids:
                bad.append(href)
        elif not re.match(r"^(https?:|mailto:|data:)", href):
            name, _, frag = href.partition("#")
            page = Path(folder) / name if folder is not None and "/" not in name else None
            if page is None or not page.is_file():
                bad.append(href)
            elif frag and f'id="{frag}"' not in page.read_text(encoding="utf-8", errors="replace"):
                bad.append(href)  # another page of the report, at an anchor it lacks
    return bad




def headlines(nb) -> list[str]:
    """The Markdown outputs a notebook marked as headlines, in order."""
    found = []
    for cell in nb.cells:
        for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
            if out.get("metadata", {}).get(_headline_key()) and "text/markdown" in out.get("data", {}):
                text = out["data"]["text/markdown"]
                found.append("".join(text) if isinstance(text, list) else text)
    return found


# How to rerun each notebook on one's own deployment: the parameters each command sets (every
# name is a parameter of that notebook; tests/test_report.py checks it).
RERUN: dict[str, list[tuple[str, str]]] = {
    # launching SGLang or vLLM per flag set instead (-p BACKEND=sglang|vllm): docs/usage.md "Pointing it at your own deployment"
    "01": [("a running SGLang server", "-p SERVER_URL=http://HOST:30000")],
    "02": [("your checkpoints", "-p TARGET_DIR=/models/target -p DRAFT_DIR=/models/eagle3-draft "
                                f"-p \"SERVE=('sglang', '{LATEST_SGLANG}')\"")],
    "03": [("your SGLang tree and patched server",
            "-p SGLANG_DIR=/path/to/site-packages/sglang -p SERVER_URL=http://HOST:30000")],
    "04": [("your server's log", "-p LOG_FILE=/path/to/server.log")],
    # every notebook on vLLM with the lab's checkpoints: `eagle3lab report --backend vllm`
    "05": [("your servers for the configuration sweep (the hypotheses stay on the lab)",
            "-p \"SERVER_URLS=['http://HOST:30000']\"")],
}


def lab_facts(lab: str) -> dict:
    """What the lab is, from its manifest: sizes, corpus, where it was built (empty if unknown)."""
    import os

    from eagle3lab.paths import lab_dir

    path = lab_dir(lab) / "manifest.json"
    try:
        m = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    cfg, target, corpus = m.get("config", {}), m.get("target", {}), m.get("corpus", {})
    return {"parameters": target.get("parameters"), "layers": target.get("num_layers", cfg.get("num_layers")),
            "hidden": target.get("hidden_size", cfg.get("hidden_size")), "vocab": cfg.get("vocab_size"),
            "train_tokens": corpus.get("train_tokens"), "python": corpus.get("python"),
            "drafts": sorted(m.get("drafts", {})), "built_cpus": m.get("environment", {}).get("cpus"),
            "cpus": os.cpu_count(), "name": target.get("name"),
            "dtype": (target.get("provenance") or {}).get("dtype"),
            "package": (target.get("provenance") or {}).get("package"),
            "draft_tokens": ((m.get("training") or {}).get("chat") or {}).get("training_tokens")}


def served_by(backend: str = "lab") -> str:
    """Who decoded: the lab engine (the one behind the lab server) or an engine eagle3lab installs
    itself (vLLM's CPU build)."""
    eng = engines.lookup(backend)
    if eng is not None and eng.pinned:
        return f"{eng.title} {eng.pinned} ({eng.build}) serving the lab's checkpoints"
    return "eagle3lab's own engine, behind an SGLang-compatible API"


def lab_sentence(lab: str, backend: str = "lab") -> str:
    """The lab in one sentence: what it is, where it ran, what decoded it."""
    f = lab_facts(lab)
    if not f.get("parameters"):
        return f"the {lab} lab (its manifest could not be read), decoded by {served_by(backend)}"
    if f.get("name"):  # the real-model lab: a pretrained model, drafts trained here
        tokens = f" on {f['draft_tokens']:,} tokens of its own chat responses" if f.get("draft_tokens") else ""
        return (f"the {lab} lab: {f['name']} ({f['parameters'] / 1e6:.1f} M parameters, {f['layers']} layers, a "
                f"pretrained dense chat model from the {f['package']} wheel, in {f['dtype']}), not the incident's "
                f"sparse MoE, and EAGLE-3 drafts trained here{tokens}, on this machine's CPU ({f['cpus']} cores, "
                f"no GPU), decoded by {served_by(backend)}")
    return (f"the {lab} lab: a {f['parameters'] / 1e6:.1f} M-parameter Llama target ({f['layers']} layers, "
            f"hidden size {f['hidden']}) trained on {f['train_tokens']:,} tokens of Python source, and EAGLE-3 "
            f"drafts trained on it, on this machine's CPU ({f['cpus']} cores, no GPU), decoded by "
            f"{served_by(backend)}")


def about_markdown(lab: str, runs: list[NotebookRun], backend: str = "lab", store_text: str = "") -> str:
    """The index's last section: the lab, what carries over to a GPU deployment and what does not,
    every notebook's status, and the commands that rerun the notebooks on one's own deployment."""
    rows = ["| notebook | status | time |", "|---|---|---|"]
    for run in runs:
        status = "ok" if run.ok else f"**error** in cell {run.error.cell_index}: {run.error.ename}"
        rows.append(f"| [{run.name}]({run.name}.html) | {status} | {run.seconds:.0f} s |")
    names = {r.name[:2] for r in runs} if runs else set(RERUN)
    cmds = "\n".join(f"- `eagle3lab report --only {nb} {args}`"
                      for nb, items in RERUN.items() if nb in names for _, args in items)
    return (f"Lab figures come from {lab_sentence(lab, backend)}.{store_text} What carries over to a real "
            "deployment is the mechanism; not the size of an effect on a large model, nor tokens/s or step costs."
            "\n\n"
            + "\n".join(rows) + "\n\n**Rerun a notebook on your own deployment:**\n\n" + cmds)


def terms_details(text: str) -> str:
    """The index's glossary, folded: a reader opens it to look a term up; it is not part of the
    page's reading (each term's definition as in `glossary`, `<dfn>`-tagged)."""
    import mistune

    from eagle3lab.report import glossary

    used = [term for term in glossary.TERMS if glossary.uses(text, term)]
    if not used:
        return ""
    items = "\n".join(f'<dt><dfn title="{term}"></dfn><b>{term}</b></dt><dd>{mistune.html(glossary.definition(term)).strip()}</dd>'
                      for term in used)
    return ("<details><summary>Definitions</summary>\n"
            f"<dl>\n{items}\n</dl>\n</details>")


def postmortem_notebooks(runs: list[NotebookRun], lab: str, backend: str = "lab", when: str = "",
                         store_text: str = "") -> dict:
    """The post-mortem (eagle3lab.report.postmortem) from the incident record and what the notebooks
    recorded, as Markdown-only notebooks (no code): {"index": its first page, "details": the
    evidence in detail, "runbook": what to do next}. The evidence is collected once for all three."""
    from eagle3lab.report import evidence, labwords, postmortem

    labwords.use(lab)
    ev = evidence.collect(run.notebook for run in runs)
    info = {"what": f"the {lab} lab, decoded by {served_by(backend)}", "by": served_by(backend), "backend": backend,
            "when": when,
            "runs_ok": {run.name: run.ok for run in runs}, "lab": lab_facts(lab),
            "about": about_markdown(lab, runs, backend, store_text)}
    return {"index": _markdown_notebook(postmortem.index_markdown(ev, info), runs),
            postmortem.DETAILS: _markdown_notebook(postmortem.details_markdown(ev, info), runs),
            postmortem.RUNBOOK: _markdown_notebook(postmortem.runbook_markdown(ev, info), runs)}


def _markdown_notebook(text: str, runs: list[NotebookRun]):
    """One page of the post-mortem as a notebook of Markdown cells, its terms folded at the end and
    any notebook that stopped with an error named at the top."""
    import nbformat

    text += "\n\n## Terms\n\n" + terms_details(text)
    errors = [f"> **{run.name} stopped with an error:** `{run.error}`" for run in runs if run.error]
    cells = [nbformat.v4.new_markdown_cell(part) for part in text.split("\n\n## ")]
    for cell in cells[1:]:
        cell.source = "## " + cell.source
    if errors:
        cells.insert(1, nbformat.v4.new_markdown_cell("\n\n".join(errors)))
    merged = nbformat.v4.new_notebook(cells=cells)
    if runs:
        merged.metadata = copy.deepcopy(runs[0].notebook.metadata)
        merged.metadata.pop("widgets", None)
    return merged


def write_postmortem(out_dir: Path, runs: list[NotebookRun], lab: str, backend: str, store_text: str) -> Path:
    """index.html (the post-mortem, read in ten minutes), details.html (its evidence in full) and
    runbook.html (what to do next, item by item)."""
    from eagle3lab.report.postmortem.page import PAGE_TITLES

    pages = postmortem_notebooks(runs, lab, backend, time.strftime("%Y-%m-%d %H:%M %Z"), store_text)
    for page, nb in pages.items():
        html = render_html(nb, title=PAGE_TITLES[page], exclude_input=True)
        (out_dir / f"{page}.html").write_text(html, encoding="utf-8")
    return out_dir / "index.html"


# --------------------------------------------------------------------------- the whole report

def build_report(out: Path | str = "reports", lab: str = "default", only: Iterable[str] | None = None, *,
                 timeout: int = 1200, parameters: dict[str, Any] | None = None,
                 notebooks_dir: Path | str = NOTEBOOKS_DIR, progress: bool = True,
                 log: Callable[[str], None] | None = None) -> Report:
    """Execute the notebooks with ``LAB=lab`` (plus `parameters`) and write the post-mortem.

    Writes ``<out>/<name>.ipynb`` (executed), ``<out>/<name>.html`` and ``<out>/index.html``
    (every notebook on one page, code hidden) and ``<out>/summary.json``. Every notebook runs
    even when an earlier one fails, so the report shows everything that could be computed.
    Every kernel measures into and reads from one store, ``<out>/measurements.jsonl``
    (`eagle3lab.serving.measurements`): a configuration two notebooks show is measured once.
    """
    import nbformat

    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    paths = list_notebooks(notebooks_dir, only)
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    store = fresh_store(out_dir)
    params = {"LAB": lab, **(parameters or {})}
    declared = {p: read_parameters(read_notebook(p)) for p in paths}
    for name in parameters or {}:
        if not any(name in d for d in declared.values()):
            raise NotebookError(f"no notebook takes the parameter {name}")
    runs = []
    for i, path in enumerate(paths, 1):
        log(f"[{i}/{len(paths)}] {path.stem}")
        accepted = _accepted_parameters(path, declared[path], params)
        with _environment(measurements.ENV, str(store.path)):  # the kernel inherits it
            run = execute_notebook(path, accepted, timeout=timeout, progress=progress)
        run.ipynb_path = out_dir / f"{run.name}.ipynb"
        nbformat.write(run.notebook, run.ipynb_path)
        run.html_path = out_dir / f"{run.name}.html"
        run.html_path.write_text(render_html(run.notebook, title=run.name), encoding="utf-8")
        log(f"      {'ok' if run.ok else 'ERROR'} in {run.seconds:.1f} s"
            + (f" -- {run.error}" if run.error else ""))
        runs.append(run)
    backend = str(params.get("BACKEND", "lab"))
    stored = store.records()
    index = write_postmortem(out_dir, runs, lab, backend, store_sentence(stored))
    report = Report(runs, out_dir, index)
    write_probe_script(out_dir)  # the index's next measurement, runnable without eagle3lab
    (out_dir / "summary.json").write_text(json.dumps(
        {"lab": lab, "backend": backend, "ok": report.ok, "notebooks": report.summary().to_dict("records"),
         "measurements": {"file": store.path.name, "records": len(stored), "unreadable_lines": store.skipped}},
        indent=1))
    return report


STORE_FILE = "measurements.jsonl"


def fresh_store(out_dir: Path):
    """The report's measurement store, emptied: every figure of a report is measured in its run,
    never carried over from an earlier report written to the same folder."""
    path = (Path(out_dir) / STORE_FILE).resolve()
    path.unlink(missing_ok=True)
    return measurements.Store(path)


@contextlib.contextmanager
def _environment(name: str, value: str):
    """`name` set to `value` while the block runs (the notebook kernels inherit it)."""
    import os

    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


def store_sentence(records: list[dict]) -> str:
    """What the store says about the run: how many lab measurements, on how many prompts each."""
    spec = [r for r in records if r.get("key", {}).get("kind") == "spec"]
    if not spec:
        return ""
    sizes = sorted({int(r["key"].get("num_prompts", 0)) for r in spec})
    return (f" Each lab configuration was measured once ({len(spec)} configurations, "
            f"{' or '.join(map(str, sizes))} prompts each, each with its own no-speculation baseline "
            "decoded interleaved with it) and every notebook reads the same measurement.")


def _accepted_parameters(path: Path, declared: dict, params: dict[str, Any]) -> dict[str, Any]:
    """The subset of `params` this notebook declares (LAB must be declared by all)."""
    if "LAB" not in declared:
        raise NotebookError(f"{path.name}: the parameters cell does not declare LAB")
    return {k: v for k, v in params.items() if k in declared}


# --------------------------------------------------------------------------- screenshots

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-quic",
                 "--no-first-run", "--disable-component-update", "--disable-sync"]


def screenshot(html_path: Path | str, png_path: Path | str, *, width: int = 1100, height: int = 1400,
               full_page: bool = False, executable: str = CHROMIUM) -> Path:
    """A PNG of a rendered page in headless Chromium (Playwright driving the system browser)."""
    from playwright.sync_api import sync_playwright

    html_path, png_path = Path(html_path).resolve(), Path(png_path)
    if not Path(executable).exists():
        raise EagleLabError(f"no Chromium at {executable} (Debian: apt-get install chromium)")
    png_path.parent.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.goto(html_path.as_uri(), wait_until="load")
            page.screenshot(path=str(png_path), full_page=full_page)
        finally:
            browser.close()
    return png_path


def _headline_key() -> str:
    """The metadata key prose.headline sets (prose owns it; report reads it)."""
    from eagle3lab.report.prose import HEADLINE_KEY

    return HEADLINE_KEY

"""The import graph of eagle3lab has no cycle and no upward edge (eagle3lab.layers.LAYERS)."""

import ast
from pathlib import Path

from eagle3lab.layers import LAYERS, layer_of

ROOT = Path(__file__).resolve().parent.parent / "eagle3lab"


def _modules() -> dict:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _edges(modules: dict) -> dict:
    """module -> the eagle3lab modules it imports anywhere in its file (function-local too)."""
    edges = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    head = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(head + ([base] if base else []))
                names = [base] + [f"{base}.{a.name}" for a in node.names]
            targets |= {t for t in names if t in modules and t != name
                        and not name.startswith(t + ".")}  # a package's __init__ runs first anyway
        edges[name] = targets
    return edges


def _cycles(edges: dict) -> list:
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in edges:
        if v not in index:
            visit(v)
    return found


def test_every_module_has_a_layer():
    for name in _modules():
        layer_of(name)


def test_no_import_cycle():
    cycles = _cycles(_edges(_modules()))
    assert not cycles, "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_no_upward_import():
    upward = [f"{a} ({LAYERS[layer_of(a)][0]}) -> {b} ({LAYERS[layer_of(b)][0]})"
              for a, targets in sorted(_edges(_modules()).items()) for b in sorted(targets)
              if layer_of(b) > layer_of(a)]
    assert not upward, "upward imports:\n" + "\n".join(upward)


def test_the_checks_can_fail():
    assert _cycles({"a": {"b"}, "b": {"a"}}) == [["a", "b"]]
    assert layer_of("eagle3lab.cli") > layer_of("eagle3lab.spec")


MAX_LINES = 700  # a module longer than this holds more than one concern: split it


def test_no_module_is_longer_than_the_limit():
    long = {str(p.relative_to(ROOT.parent)): n for p in ROOT.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines: {long}"


MAX_ROOT_MODULES = 8  # the entry points and what every layer shares; the rest lives in packages


def _duplicate_names(paths) -> dict:
    seen: dict[str, list[str]] = {}
    for p in paths:
        if p.name != "__init__.py":
            seen.setdefault(p.name, []).append(str(p))
    return {name: where for name, where in seen.items() if len(where) > 1}


def test_no_file_name_twice():
    dupes = _duplicate_names(p.relative_to(ROOT.parent) for p in ROOT.rglob("*.py"))
    assert not dupes, f"file names used twice under eagle3lab/: {dupes}"
    assert _duplicate_names([Path("a/x.py"), Path("b/x.py"), Path("b/__init__.py"),
                             Path("c/__init__.py")]) == {"x.py": ["a/x.py", "b/x.py"]}


def test_the_root_holds_only_shared_modules():
    root = sorted(p.name for p in ROOT.glob("*.py"))
    assert len(root) <= MAX_ROOT_MODULES, f"{len(root)} modules at eagle3lab/'s root: {root}"


def test_every_package_says_what_belongs_in_it():
    import ast as _ast

    silent = [str(p.parent.relative_to(ROOT.parent)) for p in ROOT.rglob("__init__.py")
              if not (_ast.get_docstring(_ast.parse(p.read_text())) or "").strip()]
    assert not silent, f"packages without a docstring: {silent}"

"""The 10 longest functions (lines from def to last line) under a package: `python scripts/longest_functions.py eagle3lab`."""
import ast, sys
from pathlib import Path
root = Path(sys.argv[1])
rows = []
for path in sorted(root.rglob("*.py")):
    tree = ast.parse(path.read_text())
    stack = [(tree, "")]
    while stack:
        node, prefix = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                rows.append((child.end_lineno - child.lineno + 1, f"{path.relative_to(root.parent)}:{prefix}{child.name}"))
                stack.append((child, prefix + child.name + "."))
            elif isinstance(child, ast.ClassDef):
                stack.append((child, prefix + child.name + "."))
for n, name in sorted(rows, reverse=True)[:10]:
    print(f"{n:4d}  {name}")

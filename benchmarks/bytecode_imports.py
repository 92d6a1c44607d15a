"""How long does a process take to import eagle3lab's modules with and without their .pyc files?

This machine, like the CI one, sets PYTHONDONTWRITEBYTECODE=1: pip compiles what it installs, but
the editable eagle3lab is never written as bytecode, so every process that imports it (notebook
kernels, CLI subprocesses, lab servers: hundreds in `make test`) compiles its modules again.
scripts/setup.sh therefore runs `python -m compileall eagle3lab` (Python still reads .pyc files
under PYTHONDONTWRITEBYTECODE; it only does not write them).

Two copies of the package go to a temporary folder, one compiled; each round imports every module of
each copy in a fresh interpreter (its dependencies imported first, outside the timing), the copies
alternating round by round. Prints each round and the ratio of the medians (compiled / source).

    .venv/bin/python benchmarks/bytecode_imports.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import compileall
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "eagle3lab"

CHILD = """
import importlib, pkgutil, sys, time
import torch, pandas, matplotlib.pyplot, seaborn, transformers  # dependencies: not timed
began = time.perf_counter()
import eagle3lab
assert eagle3lab.__file__.startswith(sys.argv[1]), eagle3lab.__file__
names = [m.name for m in pkgutil.walk_packages(eagle3lab.__path__, "eagle3lab.") if "__main__" not in m.name]
imported = 0
for name in names:
    try:
        importlib.import_module(name)
        imported += 1
    except BaseException:  # a module that needs what this machine lacks (a GPU, vLLM's venv)
        pass
print(time.perf_counter() - began, imported)
"""


def one_import(copy: Path) -> tuple[float, int]:
    """(seconds to import the copy's modules, modules imported) in a fresh interpreter."""
    env = {**os.environ, "PYTHONPATH": str(copy.parent), "PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", CHILD, str(copy)], env=env, capture_output=True, text=True,
                         cwd=copy.parent.parent)
    if out.returncode != 0:
        raise SystemExit(f"the import of {copy} failed:\n{out.stderr[-2000:]}")
    seconds, imported = out.stdout.split()[-2:]
    return float(seconds), int(imported)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="eagle3lab-bytecode-") as tmp:
        copies = {}
        for label in ("source only", "compiled"):
            copy = Path(tmp) / label.replace(" ", "-") / "eagle3lab"
            shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
            (copy.parent / "data").symlink_to(PACKAGE.parent / "data")  # the package reads the repo's data/
            copies[label] = copy
        compileall.compile_dir(copies["compiled"], quiet=1)
        times = {label: [] for label in copies}
        for i in range(args.rounds):
            for label, copy in (copies.items() if i % 2 == 0 else reversed(copies.items())):
                seconds, imported = one_import(copy)
                times[label].append(seconds)
                print(f"round {i + 1}: {label:>11}: {seconds:.3f} s ({imported} modules)")
        med = {label: statistics.median(v) for label, v in times.items()}
        print(f"median: source only {med['source only']:.3f} s, compiled {med['compiled']:.3f} s per process; "
              f"ratio {med['compiled'] / med['source only']:.2f}x, "
              f"{med['source only'] - med['compiled']:.2f} s saved per process that imports them all")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

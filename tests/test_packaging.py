"""Packaging: pyproject.toml and environment.yml list the same packages; the CLI is wired."""

import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _name(req: str) -> str:
    return re.split(r"[<>=!~\[; ]", req.strip(), maxsplit=1)[0].lower()


def _pyproject_packages() -> dict[str, str]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = data["dependencies"] + data["optional-dependencies"]["test"]
    return {_name(r): r.replace(" ", "") for r in reqs}


def _environment_packages() -> dict[str, str]:
    text = (ROOT / "environment.yml").read_text()
    pip_block = text.split("- pip:", 1)[1]
    reqs = [m.group(1) for m in re.finditer(r"^\s+-\s+([^#\s][^#\n]*)$", pip_block, re.M)]
    return {_name(r): r.strip().replace(" ", "") for r in reqs if not r.startswith("-e")}


def test_environment_yml_matches_pyproject():
    assert _environment_packages() == _pyproject_packages()


def test_console_script_runs():
    out = subprocess.run([sys.executable, "-m", "eagle3lab", "--help"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "usage: eagle3lab" in out.stdout


def test_readme_has_exactly_two_setup_commands():
    readme = (ROOT / "README.md").read_text()
    block = readme.split("## Set up", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"^```(?:bash|sh)?\n(.*?)```", block, re.M | re.S)
    lines = [l for c in commands for l in c.strip().splitlines() if l.strip()]
    assert lines == ["make report", "make test"]
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in ci


def test_the_installed_sglang_is_the_newest_release_read():
    """The default SGLang version is named once (eagle3lab.spec.LATEST_SGLANG); the installer's
    pin is the one copy outside Python, and must say the same."""
    import re

    from eagle3lab.spec import LATEST_SGLANG

    setup = (Path(__file__).resolve().parent.parent / "scripts" / "setup.sh").read_text()
    pins = re.findall(r"sglang==([\w.]+)", setup)
    assert pins == [LATEST_SGLANG], f"setup.sh pins {pins}, eagle3lab.spec.LATEST_SGLANG is {LATEST_SGLANG}"


def test_the_readme_layout_names_every_package_in_one_line_each():
    readme = (ROOT / "README.md").read_text()
    tree = readme.split("## Layout", 1)[1].split("```", 2)[1].strip("\n").splitlines()
    packages = sorted(p.parent.name for p in (ROOT / "eagle3lab").glob("*/__init__.py"))
    named = sorted(line.split()[0].rstrip("/") for line in tree[1:])
    assert len(tree) <= 15, f"the layout takes {len(tree)} lines (at most 15)"
    assert named == packages, f"README layout {named} vs packages {packages}"
    assert len(readme.encode()) < 15_000, f"README is {len(readme.encode())} bytes (under 15 KB)"

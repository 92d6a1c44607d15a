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

"""Where eagle3lab keeps things: the repo's data/ folder, the lab, caches."""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
REPO_DIR = PACKAGE_DIR.parent
DATA_DIR = REPO_DIR / "data"
SAMPLES_DIR = DATA_DIR / "samples"


def lab_dir(preset: str = "default") -> Path:
    """Folder of a built lab preset; EAGLE3LAB_LAB_DIR overrides the root."""
    root = os.environ.get("EAGLE3LAB_LAB_DIR")
    return Path(root) / preset if root else DATA_DIR / "lab" / preset


def cache_dir(*parts: str) -> Path:
    """A per-user cache folder (wheel downloads and the like), created on demand."""
    root = Path(os.environ.get("EAGLE3LAB_CACHE", Path.home() / ".cache" / "eagle3lab"))
    path = root.joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path

"""`load_lab(preset)`: a toy lab (`ci`, `default`, built on demand) or the real-model lab (`smollm2`,
shipped built). One entry point, so every notebook, experiment and command reads either the same way."""

from __future__ import annotations


def load_lab(preset: str = "ci", build: bool = True, root=None, progress: bool = True):
    """The lab of `preset` (in `root`, else eagle3lab.paths.lab_dir(preset)): a `Lab` for the toy
    presets (built first when missing or stale and `build`), a `RealLab` for "smollm2" (never
    built here: hours of CPU; `eagle3lab lab build --preset smollm2`)."""
    from eagle3lab.lab.real_lab import PRESET, load_real_lab

    if preset == PRESET:
        return load_real_lab(preset, root)
    from eagle3lab.lab.built import load_toy_lab

    return load_toy_lab(preset, build=build, root=root, progress=progress)

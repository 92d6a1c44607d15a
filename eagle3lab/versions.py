"""The engine versions eagle3lab knows, in one place: every SGLang release from 0.4.0 on
(PyPI, 2026-11), which of them had their source read for which rules, and the newest one, the
default everywhere a version is not given (`LATEST_SGLANG`). See docs/sources.md."""

from __future__ import annotations

SGLANG_RELEASES = tuple((
    "0.4.0 0.4.1 0.4.2 0.4.3 0.4.4 0.4.4.post1 0.4.4.post3 0.4.5 0.4.6 0.4.7 0.4.8 0.4.9 0.4.10 "
    "0.5.0rc0 0.5.0rc1 0.5.0rc2 0.5.1 0.5.2 0.5.3 0.5.4 0.5.5 0.5.6 0.5.7 0.5.8 0.5.9 0.5.10 "
    "0.5.11 0.5.12 0.5.13 0.5.14 0.5.15 0.5.16 0.5.17 0.5.18 0.5.19 0.5.20 0.5.21 0.5.22 "
    "0.5.23").split())
LATEST_SGLANG = SGLANG_RELEASES[-1]

# Capture rules (eagle3lab.conventions): every release from the first EAGLE-3 capable one,
# 0.4.4, read; the 0.5.0 release candidates before rc2 were skipped.
SGLANG_CAPTURE_READ = tuple(v for v in SGLANG_RELEASES[SGLANG_RELEASES.index("0.4.4"):]
                            if v not in ("0.5.0rc0", "0.5.0rc1"))

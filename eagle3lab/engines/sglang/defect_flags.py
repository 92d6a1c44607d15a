"""What SGLang's flags and per-version defaults mean for the known-defect registry's settings
(`known_defects.settings_from_flags` asks `engines.get("sglang").defect_flags`).

Why here: the registry must not test engine names; these are SGLang's own rules, read in its
wheels (docs/sources.md section 8, docs/known-defects.md).
"""

from __future__ import annotations


def _v(text: str):
    from packaging.version import Version

    return Version(text)


def defect_flags(values: dict, version: str) -> dict:
    """spec_v2: SGLANG_ENABLE_SPEC_V2's default is off up to 0.5.10.post1 and on from 0.5.11; from
    0.5.14 spec v2 is the only path (sglang 0.5.10 srt/environ.py:442, 0.5.11 :459, 0.5.14
    arg_groups/speculative_hook.py:69-74). rejection_sampling: 0.5.22+ also turn it on for
    EAGLE/EAGLE3 under --speculative-use-block-verification (0.5.22 speculative_hook.py:171-180)."""
    out = {"spec_v2": _v(version) >= _v("0.5.11")}
    if "--speculative-use-block-verification" in values and _v(version) >= _v("0.5.22"):
        out["rejection_sampling"] = True
    return out

"""SGLang rule readings, release by release: what engines/sglang/rules.py (the topk-1
adjustment, the automatic (steps, topk, draft tokens) per architecture) and
engines/sglang/capture.py (the +1 on aux ids, its `layer_ids[0] == 1` condition) encode, read
in every SGLang wheel by `scripts/read_releases.py` (docs/sources.md, "Read in releases").

Why: those tables were read in a dozen versions and borrowed for the rest; reading every release
shows where a borrowed rule would be wrong (tests/test_known_defects_table.py compares them).
"""

from __future__ import annotations

import ast
import re

from eagle3lab.engines.sglang.sglang_rules import (E_TRTLLM, W_ADJUST, W_CPU_OVERLAP, W_MAX_RUNNING, W_MTP_PATH,
                                            W_OVERLAP_0_4, W_OVERLAP_0_5_3, W_OVERLAP_0_5_5, W_OVERLAP_0_5_7, W_SYNC_V2,
                                            W_TOPK_PAGE)
from eagle3lab.known_defects.probes import spec_v2_default, verify_gate

_ARG_FILES = (r"^srt/server_args\.py$", r"^srt/arg_groups/speculative_hook\.py$")
# model files whose setter maps draft ids to captured layers (engines/sglang/capture.SGLANG_FILES)
CAPTURE_FILES = ("llama", "qwen2", "qwen3", "qwen2_moe", "qwen3_moe", "deepseek_v2", "gpt_oss")


_JOIN = re.compile(r"""(["'])\s*\n\s*f?(["'])""")


def _arg_text(src) -> str:
    """The argument-handling source with adjacent string literals joined ("a "\n "b" -> "a b"),
    so a warning split over lines is found whole."""
    text = "\n".join(src.text(n) or "" for pat in _ARG_FILES for n in src.names(pat))
    return _JOIN.sub("", text)


def _has(text: str):
    """A reader: the argument-handling source contains `text` (a warning SGLang prints)."""
    return lambda src: text in _arg_text(src)


topk1_adjust = _has(W_ADJUST)


def eagle3_accepted(src) -> bool:
    return '"EAGLE3"' in _arg_text(src)


def static_defaults(src) -> list | None:
    """(steps, topk, draft tokens) when they are fixed field defaults, None when chosen at run time."""
    text = _arg_text(src)
    found = [re.search(rf"speculative_{k}: int = (\d+)", text) for k in ("num_steps", "eagle_topk", "num_draft_tokens")]
    return [int(m.group(1)) for m in found] if all(found) else None


def overlap_warning(src) -> str | None:
    """Which of the overlap-scheduler warnings rules.py names the source prints."""
    text = _arg_text(src)
    for name, w in (("W_OVERLAP_0_5_7", W_OVERLAP_0_5_7), ("W_OVERLAP_0_5_5", W_OVERLAP_0_5_5),
                    ("W_OVERLAP_0_5_3", W_OVERLAP_0_5_3), ("W_OVERLAP_0_4", W_OVERLAP_0_4)):
        if w.split(". ")[0] in text:
            return name
    return None


def mtp_archs(src) -> dict | None:
    """The architectures whose MTP draft path SGLang fills in (the `if model_arch in [...]` around
    the MTP-path warning) and those exempt from the warning (`model_arch not in [...]` inside it)."""
    for pat in _ARG_FILES:
        for name in src.names(pat):
            tree = ast.parse(src.text(name) or "")
            for node in ast.walk(tree):
                if _arch_test(node, (ast.In, ast.Eq)) and _mentions(node, W_MTP_PATH):
                    exempt = [n for n in ast.walk(node) if _arch_test(n, (ast.NotIn,)) and _mentions(n, W_MTP_PATH)]
                    return {"fill": sorted(_strings(node.test)), "exempt": sorted(_strings(exempt[0].test)) if exempt else []}
    return None


def _arch_test(node, ops) -> bool:
    return (isinstance(node, ast.If) and isinstance(node.test, ast.Compare) and isinstance(node.test.left, ast.Name)
            and node.test.left.id == "model_arch" and isinstance(node.test.ops[0], ops))


def _mentions(node, text: str) -> bool:
    return any(isinstance(n, ast.Constant) and n.value == text for n in ast.walk(node))


def _strings(test) -> list[str]:
    return [n.value for c in test.comparators for n in ast.walk(c) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def page_topk(src) -> str | None:
    """How topk > 1 with page_size > 1 is handled: "reset_topk" (topk silently set to 1, with a
    warning), "error" (refused unless the backend implements it), None (neither)."""
    text = _arg_text(src)
    if W_TOPK_PAGE in text:
        return "reset_topk"
    return "error" if "speculative_eagle_topk > 1 with page_size > 1" in text else None


def auto_choose(src) -> dict | None:
    """`(_)auto_choose_speculative_params`: {"(s, k, d)": [architectures...]} plus "other" (the
    else branch) and "standalone"; None when the release has no such function."""
    for pat in _ARG_FILES:
        for name in src.names(pat):
            text = src.text(name) or ""
            for node in ast.walk(ast.parse(text)):
                if isinstance(node, ast.FunctionDef) and node.name.endswith("auto_choose_speculative_params"):
                    return _branches(node)
    return None


def _branches(fn: ast.FunctionDef) -> dict:
    out: dict = {}
    for stmt in fn.body:
        if isinstance(stmt, ast.If):
            _walk_if(stmt, out)
    return {k: sorted(v) if k.startswith("(") else v for k, v in out.items()}


def _walk_if(node: ast.If, out: dict) -> None:
    ret = _returned(node.body)
    test = node.test
    if isinstance(test, ast.Compare) and isinstance(test.left, ast.Attribute) and ret:
        out["standalone"] = list(ret)  # `speculative_algorithm == "STANDALONE"`
    elif isinstance(test, ast.Compare) and ret:
        names = [e.value for c in test.comparators for e in getattr(c, "elts", [c])
                 if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        out.setdefault(str(tuple(ret)), []).extend(names)
    if len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If):
        _walk_if(node.orelse[0], out)
    elif node.orelse and _returned(node.orelse):
        out["other"] = list(_returned(node.orelse))


def _returned(body) -> tuple | None:
    for stmt in body:
        if isinstance(stmt, ast.Return) and isinstance(stmt.value, ast.Tuple):
            return tuple(e.value for e in stmt.value.elts if isinstance(e, ast.Constant))
    return None


def aux_id_map(file: str):
    """A reader: how srt/models/<file>.py's top-level model maps draft ids in
    set_eagle3_layers_to_capture: "none" (no setter), "no_ids" (takes none), "plus_one",
    "plus_one_if_first_is_one", "raw_if_max_is_n", "raw"; None when the file does not exist."""

    def read(src):
        text = src.text(f"srt/models/{file}.py")
        if text is None:
            return None
        setters = [(cls.name, fn) for cls in ast.walk(ast.parse(text)) if isinstance(cls, ast.ClassDef)
                   for fn in cls.body if isinstance(fn, ast.FunctionDef) and fn.name == "set_eagle3_layers_to_capture"]
        top = [fn for name, fn in setters if name.endswith("ForCausalLM")] or [fn for _, fn in setters]
        if not top:
            return "none"
        fn = top[0]
        if len(fn.args.args) < 2:
            return "no_ids"
        body = ast.get_source_segment(text, fn) or ""
        if "[0] == 1" in body:
            return "plus_one_if_first_is_one"
        if "== num_layers" in body and "max(" in body:
            return "raw_if_max_is_n"
        return "plus_one" if "+ 1" in body else "raw"

    return read


RULES = {
    "eagle3_accepted": (eagle3_accepted, "EAGLE3 is an accepted --speculative-algorithm"),
    "static_defaults": (static_defaults, "fixed (steps, topk, draft tokens) field defaults"),
    "topk1_adjust": (topk1_adjust, "the topk-1 warning: num_draft_tokens set to num_steps + 1"),
    "page_topk": (page_topk, "topk > 1 with page_size > 1: reset to 1, refused, or neither"),
    "mtp_archs": (mtp_archs, "architectures whose MTP draft path is filled in, and those exempt from its warning"),
    "trtllm_topk_error": (_has(E_TRTLLM), "trtllm_mha refuses topk > 1"),
    "cpu_overlap_warning": (_has(W_CPU_OVERLAP), "device cpu turns the overlap schedule off, with a warning"),
    "sync_v2_warning": (_has(W_SYNC_V2.split(". ")[0]), "the non-overlap spec v2 warning"),
    "max_running_warning": (_has(W_MAX_RUNNING), "the warning that max running requests is reset to 48"),
    "overlap_warning": (overlap_warning, "which overlap-scheduler warning is printed"),
    "auto_choose": (auto_choose, "automatic (steps, topk, draft tokens) per architecture"),
    "spec_v2_default": (spec_v2_default, "how spec v2 runs for EAGLE-3: SGLANG_ENABLE_SPEC_V2's default, \"beta_flag\" (--enable-beta-spec, EAGLE only), \"only\""),
    "rocm_gate_with_rejection_sampling": (
        lambda src: verify_gate("rocm", rejection_sampling=True)(src),
        "the HIP verify gate with --speculative-use-rejection-sampling: affected = still greedy"),
    **{f"aux_ids:{f}": (aux_id_map(f), f"srt/models/{f}.py set_eagle3_layers_to_capture id map")
       for f in CAPTURE_FILES},
}


# --------------------------------------------------------------------------- the tables, compared


def expected(name: str, version: str):
    """What eagle3lab's tables say `name` reads in SGLang `version` (None: the table says nothing)."""
    from eagle3lab.engines.sglang import sglang_capture as capture
    from eagle3lab.engines.sglang.sglang_rules import _auto_choice, rules_for
    from eagle3lab.known_defects.row import parse_version
    from eagle3lab.engines.sglang.defect_flags import defect_flags

    v = parse_version(version)
    rules = rules_for(version)[0]
    if name == "topk1_adjust":
        return rules.static_defaults is None and rules.topk1_adjust
    if name == "eagle3_accepted":
        return rules.eagle3
    if name == "static_defaults":
        return list(rules.static_defaults) if rules.static_defaults else None
    if name == "page_topk":
        return rules.page_topk
    if name == "mtp_archs":
        return {"fill": sorted(rules.mtp_archs), "exempt": sorted(rules.mtp_warning_exempt)} if rules.mtp_archs else None
    if name == "trtllm_topk_error":
        return rules.trtllm_topk_error
    if name == "cpu_overlap_warning":
        return rules.cpu_overlap
    if name == "sync_v2_warning":
        return rules.sync_v2_warning
    if name == "max_running_warning":
        return rules.max_running_warning
    if name == "overlap_warning":
        names = {W_OVERLAP_0_4: "W_OVERLAP_0_4", W_OVERLAP_0_5_3: "W_OVERLAP_0_5_3", W_OVERLAP_0_5_5: "W_OVERLAP_0_5_5",
                 W_OVERLAP_0_5_7: "W_OVERLAP_0_5_7"}
        return names.get(rules.overlap_warning)
    if name == "spec_v2_default":
        return defect_flags({}, version)["spec_v2"]
    if name.startswith("aux_ids:"):
        file = name.split(":", 1)[1]
        if v < parse_version(capture.SGLANG_SETTER_SINCE[file]):
            return "none"
        if v < parse_version(capture.SGLANG_READS_IDS_SINCE):
            return "no_ids"
        return capture.sglang_capture_rule(file, v).id_map
    if name == "auto_choose":
        return None if rules.static_defaults is not None else (lambda arch: _auto_choice(rules, "EAGLE3", arch))
    return None


_COMPARED = ("eagle3_accepted", "static_defaults", "topk1_adjust", "page_topk", "max_running_warning",
             "overlap_warning", "spec_v2_default", "mtp_archs", "trtllm_topk_error", "cpu_overlap_warning",
             "sync_v2_warning") + tuple(f"aux_ids:{f}" for f in CAPTURE_FILES)


def mismatches(reading: dict) -> list[str]:
    """Where a release's reading differs from what the tables say for that version (releases
    with speculative decoding only: fixed defaults or an automatic choice)."""
    out, rules = [], reading.get("rules", {})
    spec = {v for name in ("static_defaults", "auto_choose") for value, lo, hi in rules.get(name, {}).get("values", [])
            if value is not None for v in _versions(reading, lo, hi)}
    for name, rule in rules.items():
        for value, lo, hi in rule["values"]:
            for version in (v for v in _versions(reading, lo, hi) if v in spec):
                want = expected(name, version)
                if name == "spec_v2_default":
                    value = value in (True, "only")
                if name == "auto_choose":
                    bad = _auto_mismatch(value, want)
                    if bad:
                        out.append(f"auto_choose {version}: {bad}")
                elif name in _COMPARED and (("none" if value is None and name.startswith("aux") else value) != want):
                    out.append(f"{name} {version}: read {value!r}, the table says {want!r}")
    return out


def _auto_mismatch(value, choice) -> str:
    if value is None or choice is None:
        return "" if (value is None) == (choice is None) else f"read {value!r}, the table says {choice!r}"
    archs = [a for k, names in value.items() if k.startswith("(") for a in names] + ["SomeOtherForCausalLM"]
    for arch in archs:
        read = next((tuple(eval(k)) for k, names in value.items() if k.startswith("(") and arch in names),
                    tuple(value.get("other", ())))
        if tuple(choice(arch)) != read:
            return f"{arch}: read {read}, the table says {tuple(choice(arch))}"
    return ""


def _versions(reading: dict, lo: str, hi: str) -> list[str]:
    from eagle3lab.known_defects.row import parse_version

    return sorted((v for v in reading["packages"] if parse_version(lo) <= parse_version(v) <= parse_version(hi)),
                  key=parse_version)

"""Which target hidden states feed which EAGLE-3 draft slot, per engine, version and model family,
and per trainer.

A draft's `fc` sees `cat([h_b1, h_b2, h_b3])` of residual-stream boundaries (`eagle3lab.wiring.boundaries`).
Training and serving each turn the draft config's `eagle_aux_hidden_state_layer_ids` into
boundaries with their own rule; when the two rules disagree nothing crashes, acceptance just
collapses. Serving: `serve_boundaries(engine, ...)` asks the engine's own rule
(`engines.get(engine).capture`, in `eagle3lab/engines/<name>/capture.py`); `ids_for` and
`serve_table` search and tabulate it. Training: `train_boundaries`, the trainers' rules, read in
their source (SOURCES below; docs/sources.md section 2).

SOURCES: every trainer rule below, where it was read.

| Rule | Source (file, versions) |
|---|---|
| SpecForge 0.2.0: ids = override > eagle_config ids > [1, N//2-1, N-4]; 3 non-negative ids | specforge 0.2.0 wheel algorithms/model_providers.py:193-206 |
| SpecForge 0.2.0 captures through SGLang (pinned sglang==0.5.14) | specforge 0.2.0 METADATA `Requires-Dist: sglang==0.5.14` |
| SpecForge HF backend history (hidden_states[id+1], #198 default bug, #346 hooks) | SpecForge git 3234e24a, 94d67101, bdbea66b, ba6159cc, 94de9f8a |
| SpecForge HF hooks: output of layers[id], config order, ids must be in 0..N-1, exactly 3 captured | sgl-project/SpecForge specforge/modeling/target/eagle3_target_model.py @00c4bba3 (read_file) |
| Original EAGLE-3: inputs of layers 2, N//2, N-3 | SafeAILab/EAGLE cb7e084 eagle/traineagle3/modeling_llama_kv.py:1139 |
| transformers `output_hidden_states`: [0] embedding, [k<N] boundary k, [N] post-norm | transformers 4.46.3 modeling_llama.py:928-968, 4.56.2-5.0.0 utils/generic.py, 5.8.1-5.24.0 utils/output_capturing.py |
"""

from __future__ import annotations

import re
from itertools import product

from eagle3lab import engines
from eagle3lab.wiring.boundaries import (KEYS, Boundaries, CaptureError, ConventionError, as_version, check_version,
                                  default_boundaries, validate_ids)
from eagle3lab.engines.sglang import sglang_capture

TRANSFORMERS_VERSIONS = ("4.46.3", "4.51.3", "4.53.0", "4.56.2", "4.57.6", "5.0.0", "5.8.1", "5.24.0")
SPECFORGE_VERSIONS = ("0.1.0", "0.2.0")
SPECFORGE_DATES = ("2025-07-22", "2026-08-08")  # git history read: v0.1.0 .. HEAD a6b6b023


def _capturing() -> tuple[str, ...]:
    """Engines with a capture rule read per version (the lab engine follows SGLang's)."""
    return tuple(n for n in engines.names() if engines.get(n).capture_versions)


def serve_boundaries(engine: str, version: str, arch: str, layer_ids, num_layers: int,
                     key: str = "eagle_config", *, cuda_graph: bool = True,
                     patched: bool = False) -> Boundaries:
    """Boundaries `engine` feeds the draft, in concatenation order (ascending layer order).

    `key` says where the draft config holds the ids: "eagle_config" (nested) or "top_level".
    `cuda_graph`: SGLang 0.4.9-0.5.10 decode/verify graphs use the default set (returned, with a
    warning naming what eager prefill feeds). `patched`: SGLang with eagle3lab's embedding-capture
    patch (`eagle3lab patch sglang --apply`): id -1 feeds the embedding, other ids keep the rule.
    """
    if key not in KEYS:
        raise ConventionError(f"key must be 'eagle_config' or 'top_level', got {key!r}")
    ids = validate_ids(layer_ids, num_layers)
    eng = engines.lookup(str(engine).lower())
    if eng is None or not eng.capture_versions:
        raise ConventionError(f"unknown serving engine {engine!r}; known: {', '.join(_capturing())}")
    return eng.capture(version, arch, ids, num_layers, key, cuda_graph, patched)


def ids_for(boundaries, engine: str, version: str, arch: str, num_layers: int,
            key: str = "eagle_config", *, cuda_graph: bool = True, patched: bool = False) -> list[int]:
    """The ids to write in the draft config so that `engine` feeds exactly `boundaries`.

    Raises CaptureError when no ids do (the engine cannot capture one of them, or the order
    differs from the ascending order the engines concatenate in).
    """
    want = [int(b) for b in boundaries]
    if want != sorted(want):
        raise CaptureError(f"{engine} concatenates in ascending layer order; training order {want} "
                           "cannot be served without reordering the fc's input columns", "crash")
    options = [sorted({b - 1, b} | ({-1} if b == 0 else set())) for b in want]
    for ids in product(*options):
        if any(not -1 <= i <= num_layers for i in ids):
            continue
        try:
            got = serve_boundaries(engine, version, arch, list(ids), num_layers, key,
                                   cuda_graph=cuda_graph, patched=patched)
        except CaptureError:
            continue
        if list(got) == want and not got.ids_ignored:
            return list(ids)
    raise CaptureError(f"no layer ids make {engine} {version} ({arch}, key {key}) feed {want}"
                       + (" even with the embedding patch" if patched else ""), "crash")




def serve_table(layer_ids, arch: str, num_layers: int, want=None, engine: str = "sglang",
                key: str = "eagle_config", cuda_graph: bool = True):
    """Per version range: the model file, what `layer_ids` feed stock and patched, and a verdict.

    `want` (the training boundaries) turns the rows into verdicts: "ok", "ok with the patch",
    "wrong boundaries", "crash", "dropped", and the ids that would work for that version.
    """
    import pandas as pd

    eng = engines.get(engine)
    rows = []
    for version in eng.capture_versions:
        stock = _try_serve(engine, version, arch, layer_ids, num_layers, key, cuda_graph, False)
        patched = (_try_serve(engine, version, arch, layer_ids, num_layers, key, cuda_graph, True)
                   if True in eng.patch_options else stock)
        rows.append({"version": version, "model_file": eng.model_file(arch),
                     "fed": stock, "fed_patched": patched,
                     "verdict": _table_verdict(stock, patched, want),
                     "ids_that_work": _ids_text(want, engine, version, arch, num_layers, key, cuda_graph)})
    table = pd.DataFrame(rows)
    return _collapse_versions(table)


def _try_serve(engine, version, arch, ids, n, key, cuda_graph, patched) -> str:
    try:
        got = serve_boundaries(engine, version, arch, ids, n, key, cuda_graph=cuda_graph, patched=patched)
    except CaptureError as exc:
        return f"{exc.kind} ({exc.short})"
    if got.ids_ignored and any("CUDA graphs" in w for w in got.warnings):
        return f"{list(got)} (CUDA graphs: default)"
    return str(list(got)) + (" (ids ignored)" if got.ids_ignored else "")


def _table_verdict(stock: str, patched: str, want) -> str:
    if want is None:
        return stock.split(" ")[0] if stock.startswith(("crash", "dropped")) else "serves"
    target = str([int(b) for b in want])
    if stock == target:
        return "ok"
    if patched == target:
        return "needs the patch"
    return stock.split(" ")[0] if stock.startswith(("crash", "dropped")) else "wrong boundaries"



def _ids_text(want, engine, version, arch, n, key, cuda_graph) -> str:
    if want is None:
        return ""
    keys = [key] + [k for k in KEYS if k != key]
    for patched, k in product(engines.get(engine).patch_options, keys):
        try:
            ids = ids_for(want, engine, version, arch, n, k, cuda_graph=cuda_graph, patched=patched)
        except (CaptureError, ConventionError):
            continue
        return f"{ids}" + (f" in {k}" if k != key else "") + (" + patch" if patched else "")
    return "none"


def _collapse_versions(table):
    """Merge consecutive versions with identical rows into 'first-last' ranges."""
    cols = [c for c in table.columns if c != "version"]
    keep, start = [], 0
    for i in range(1, len(table) + 1):
        if i == len(table) or tuple(table.iloc[i][cols]) != tuple(table.iloc[start][cols]):
            first, last = table.iloc[start]["version"], table.iloc[i - 1]["version"]
            row = table.iloc[start].to_dict()
            row["version"] = first if first == last else f"{first}-{last}"
            keep.append(row)
            start = i
    import pandas as pd

    return pd.DataFrame(keep, columns=table.columns)


# --------------------------------------------------------------------------- training

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def train_boundaries(trainer: str, version: str, layer_ids, num_layers: int, *,
                     arch: str = "LlamaForCausalLM", sglang_version: str | None = None) -> Boundaries:
    """Boundaries a trainer fed the draft, in the order it concatenated them.

    trainer: "specforge" (backend by version: 0.2.0 is SGLang-only; 0.1.0 and dated git snapshots
    before the 2026-06/07 refactor use HF online), "specforge-hf", "specforge-sglang" (version a
    release or a git date YYYY-MM-DD), "eagle" (SafeAILab EAGLE-3), "hf-hidden-states" (layer_ids
    are indices into transformers' output_hidden_states; version = transformers version).
    `arch`, `sglang_version`: for SGLang-backed capture (default: the SGLang that SpecForge pins).
    """
    ids = validate_ids(layer_ids, num_layers) if trainer != "hf-hidden-states" else layer_ids
    trainer = trainer.lower()
    if trainer == "eagle":
        return _eagle(ids, num_layers)
    if trainer == "hf-hidden-states":
        return _hf_hidden_states(version, layer_ids, num_layers)
    if trainer in ("specforge", "specforge-hf", "specforge-sglang"):
        return _specforge(trainer, version, ids, num_layers, arch, sglang_version)
    raise ConventionError(f"unknown trainer {trainer!r}; known: specforge, specforge-hf, "
                          "specforge-sglang, eagle, hf-hidden-states")


def _eagle(ids, n) -> Boundaries:
    warnings = []
    if ids is not None:
        warnings.append("the original EAGLE-3 code hard-codes its layers and ignores config ids")
    return Boundaries(default_boundaries(n), warnings,
                      "SafeAILab/EAGLE cb7e084 eagle/traineagle3/modeling_llama_kv.py:1139 "
                      "(inputs of layers 2, N//2, N-3)", ids_ignored=ids is not None)


def _hf_hidden_states(version, layer_ids, n) -> Boundaries:
    check_version("transformers", version, TRANSFORMERS_VERSIONS)
    if layer_ids is None:
        raise ConventionError("hf-hidden-states needs the indices used into output_hidden_states")
    try:
        idx = [int(i) for i in layer_ids]
    except (TypeError, ValueError):
        raise ConventionError(f"indices must be integers, got {layer_ids!r}") from None
    bad = [i for i in idx if not -(n + 1) <= i <= n]
    if bad:
        raise ConventionError(f"indices {bad} are out of range: output_hidden_states of a {n}-layer "
                              f"model has {n + 1} entries")
    out = [i if i >= 0 else i + n + 1 for i in idx]
    post = tuple(slot for slot, b in enumerate(out) if b == n)
    warnings = [f"hidden_states[{n}] (slot {s}) is the LAST entry of output_hidden_states, which "
                "transformers returns AFTER the final norm: no engine feeds that tensor (engines "
                f"that capture boundary {n} feed it pre-norm)" for s in post]
    return Boundaries(out, warnings, f"transformers {version} output_hidden_states: index = boundary, "
                      "[N] post-norm (capture_outputs / check_model_inputs)", post_norm=post)


def _specforge(trainer, version, ids, n, arch, sglang_version) -> Boundaries:
    date, release = _specforge_when(version)
    # "specforge" alone: the backend of its date (SGLang-only from the 2026-06/07 refactor)
    through_sglang = trainer == "specforge-sglang" or (trainer == "specforge" and date >= "2026-07-01")
    if through_sglang:
        return _specforge_sglang(version, ids, n, arch, sglang_version, date)
    if date >= "2026-07-01":
        raise ConventionError(f"specforge {version} has no HF target backend (removed in the 2026-06/07 "
                              "runtime refactor, 94a49c17/7d1fbf08; 0.2.0 schema: target_backend sglang)")
    return _specforge_hf(version, ids, n, date)


def _specforge_when(version) -> tuple[str, str | None]:
    """A SpecForge version as a date: releases map to their tag date."""
    if _DATE.match(str(version)):
        if not SPECFORGE_DATES[0] <= version <= SPECFORGE_DATES[1]:
            raise ConventionError(f"specforge snapshot {version} is outside the git history read "
                                  f"({SPECFORGE_DATES[0]}..{SPECFORGE_DATES[1]})")
        return version, None
    v = check_version("specforge", version, SPECFORGE_VERSIONS)
    return ("2026-08-08", "0.2.0") if v >= as_version("0.2.0") else ("2025-07-22", "0.1.0")


def _specforge_hf(version, ids, n, date) -> Boundaries:
    src = f"SpecForge {version} HF backend"
    default = [1, n // 2 - 1, n - 4]
    warnings = []
    if date < "2025-09-01":  # v0.1.0 specforge/core/eagle3.py: hard-coded, hidden_states[id + 1]
        if ids is not None:
            warnings.append("SpecForge before #198 (2025-09-01) ignores the config ids; "
                            f"it trains on hidden_states{[i + 1 for i in default]}")
        return Boundaries([i + 1 for i in default], warnings, src + " (v0.1.0 core/eagle3.py)",
                          ids_ignored=ids is not None)
    if ids is None:
        if date < "2025-10-20":  # 94d67101 (#198) default bug, fixed bdbea66b (#240)
            default = [1, n // 2, n - 4]
            warnings.append(f"SpecForge #198-#240 (2025-09-01..2025-10-20) default ids {default} put the "
                            f"mid slot at boundary {n // 2 + 1}, one later than SGLang's default {n // 2}")
        ids = default
    out = [i + 1 for i in ids]
    if date < "2025-12-03":  # hidden_states[id + 1] indexing (#198, #278)
        if max(out) > n:
            raise CaptureError(f"SpecForge {version} indexes hidden_states[{max(out)}] of a {n}-layer model "
                               f"(entries 0..{n}): IndexError", "crash", short="IndexError")
        post = tuple(s for s, b in enumerate(out) if b == n)
        warnings += [f"slot {s}: hidden_states[{n}] is post-norm in transformers" for s in post]
        return Boundaries(out, warnings, src + " (hidden_states[id + 1])", post_norm=post)
    # 94de9f8a (#346): forward hook on layers[id] -> output of layer id, pre-norm, config order.
    # SpecForge 00c4bba3 eagle3_target_model.py HFEagle3TargetModel.generate_eagle3_data:
    # `if 0 <= idx < len(layers)` else ValueError; `len(captured_states) != 3` -> RuntimeError.
    if any(not 0 <= i < n for i in ids) or len(set(ids)) != 3 or len(ids) != 3:
        raise CaptureError(f"SpecForge {version} HF hooks reject ids {ids}: it needs three distinct ids in "
                           f"0..{n - 1} (ValueError 'out of bounds' / RuntimeError 'Expected to capture 3')",
                           "crash", short="trainer rejects the ids")
    return Boundaries([i + 1 for i in ids], warnings, src + " (forward hooks on layers[id], #346; config order)")


def _specforge_sglang(version, ids, n, arch, sglang_version, date) -> Boundaries:
    warnings = []
    if sglang_version is None:
        sglang_version = "0.5.14"  # specforge 0.2.0 METADATA: Requires-Dist: sglang==0.5.14
        if date < "2026-07-01":
            warnings.append("assumed SGLang 0.5.14 for the capture; pass sglang_version=")
    if date >= "2026-07-01":  # 0.2.0 algorithms/model_providers.py:193-206
        if ids is None:
            ids = [1, n // 2 - 1, n - 4]
        if len(ids) != 3 or any(i < 0 for i in ids):
            raise CaptureError(f"specforge {version} rejects layer ids {ids}: it needs three "
                               "non-negative ids (algorithms/model_providers.py:206 ValueError)", "crash")
    got = sglang_capture.serve(sglang_version, arch, validate_ids(ids, n), n, "eagle_config", False, False)
    return Boundaries(got, warnings + got.warnings,
                      f"SpecForge {version} SGLang backend -> {got.source}", ids_ignored=got.ids_ignored)

"""The wiring fix: the embedding-capture patch on a copy of SGLang, what the incident's ids feed per
SGLang version (its DeepSeek-V3-style target, from the incident record), and the lab served with
other boundaries."""

from __future__ import annotations

from eagle3lab.report import incident
from eagle3lab.spec import LATEST_SGLANG
from eagle3lab.experiments.shared import bench_prompts
from eagle3lab.experiments.measure import _bench_row

_MODEL = incident.load().model
# The incident's target and ids: the ids its draft config carried, the ids its fix wrote, and the
# boundaries its training fed ([embedding, layer 3's input, layer 31's input]).
SEED_ARCH, SEED_LAYERS = _MODEL["architecture"], _MODEL["target_layers"]
SEED_CONFIG_IDS, SEED_FIX_IDS = _MODEL["config_ids_before_fix"], _MODEL["config_ids_after_fix"]
SEED_TRAINED = _MODEL["trained_boundaries"]
SEED_SERVED = _MODEL["served_boundaries_before_fix"]  # what the story says the server fed


def sglang_source_copy(sglang_dir=None, dest=None):
    """Copy the files the embedding patch reads from an sglang package (default: the installed
    one) into ``dest/sglang``, so notebooks can patch and diff without touching it.

    Without ``dest`` the copy goes to a fresh temporary folder that is removed when the
    interpreter (the notebook's kernel) exits: a notebook uses the copy across cells, so no
    ``with`` block can hold it, and a copy per run must not pile up in the temp dir."""
    import atexit
    import shutil
    import tempfile
    from pathlib import Path

    from eagle3lab.wiring import patching

    source = patching.find_sglang_dir(sglang_dir)
    if dest is None:
        dest = tempfile.mkdtemp(prefix="eagle3lab-sglang-")
        atexit.register(shutil.rmtree, dest, ignore_errors=True)
    root = Path(dest) / "sglang"
    for name in patching.WHEEL_FILES:
        rel = name.split("/", 1)[1]
        if (source / rel).is_file():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source / rel, root / rel)
    return root


def capture_before_after(sglang_dir, lab_layers: int, seed_layers: int = 61):
    """The boundaries SGLang's setter selects for the seed's fixed ids, before and after the
    patch, for the lab's Llama target and the seed's DeepSeek-V3-style target.

    A boundary of -1 in the result is an id that matches no layer: that tensor is never captured.
    """
    import shutil
    import tempfile
    from pathlib import Path

    import pandas as pd

    from eagle3lab.wiring import patching
    from eagle3lab.decoder.faults import seed_fix_ids

    cases = [("llama", "lab target (Llama)", lab_layers, seed_fix_ids(lab_layers)),
             ("deepseek_v2", "the incident's target (DeepSeek-V3 style)", seed_layers, SEED_FIX_IDS)]
    rows = []
    with tempfile.TemporaryDirectory(prefix="eagle3lab-sglang-patched-") as tmp:
        patched = Path(tmp) / "sglang"
        shutil.copytree(sglang_dir, patched)
        patching.apply(patched)
        for model, target, layers, ids in cases:
            row = {"model file": patching.TARGET_FILES[model], "target": target, "layers": layers,
                   "draft ids": ids}
            for label, tree in (("before patch", sglang_dir), ("after patch", patched)):
                try:
                    row[label] = patching.layers_to_capture(tree, model, ids, layers)
                except patching.PatchError as exc:
                    row[label] = f"n/a ({exc})"
            rows.append(row)
    return pd.DataFrame(rows)






def _fed(version: str, ids, patched: bool, arch: str = SEED_ARCH, layers: int = SEED_LAYERS,
         cuda_graph: bool = True):
    """Boundaries SGLang `version` feeds for `ids` (eagle3lab.wiring.conventions), or a short failure."""
    from eagle3lab.wiring import conventions

    try:
        return list(conventions.serve_boundaries("sglang", version, arch, ids, layers, patched=patched,
                                                 cuda_graph=cuda_graph))
    except (conventions.ConventionError, conventions.CaptureError) as exc:
        return getattr(exc, "short", None) or str(exc).split(":")[0]


IDS_SEP = "; "  # between the alternatives of one release's working ids (the report reads the first)
NO_PATCH = " (no patch)"  # after ids that need no embedding-capture patch (the report's recommended fix)


def _working_ids(version: str, trained, arch: str = SEED_ARCH, layers: int = SEED_LAYERS,
                 cuda_graph: bool = True) -> list[str]:
    """Draft ids that make SGLang `version` feed exactly `trained` (boundary 0 first)."""
    rest = list(trained[1:])
    candidates = [([0, *[b - 1 for b in rest]], False), ([0, *rest], False),
                  ([-1, *[b - 1 for b in rest]], True), ([-1, *rest], True)]
    out = []
    for ids, patched in candidates:
        if _fed(version, ids, patched, arch, layers, cuda_graph) == list(trained):
            out.append(f"{ids}" + (" with the patch" if patched else NO_PATCH))
    return out or ["none"]


def serving_releases(arch: str = SEED_ARCH) -> list[str]:
    """The SGLang releases the table reads for `arch`: the first with its EAGLE-3 capture setter
    (0.5.4.post2 for deepseek_v2, whose id rule the release-by-release reading finds equal to
    0.5.5's: docs/sources.md section 8), then every minor release from 0.5.5 on."""
    from eagle3lab import engines
    from eagle3lab.engines.sglang.sglang_capture import SGLANG_FILES, SGLANG_SETTER_SINCE
    from eagle3lab.spec import parse_version

    first = SGLANG_SETTER_SINCE.get(SGLANG_FILES.get(arch, ""))
    later = [v for v in engines.get("sglang").capture_versions if parse_version(v) >= (0, 5, 5)]
    return ([first] if first and parse_version(first) < (0, 5, 5) else []) + later


def seed_ids_by_version(versions=None, trained=SEED_TRAINED, config_ids=SEED_CONFIG_IDS,
                        fix_ids=SEED_FIX_IDS, cuda_graph: bool = True):
    """Per SGLang version (consecutive versions with the same outcome grouped): what the seed's
    config ids and its fixed ids feed on its DeepSeek-V3-style target, whether the fix feeds the
    boundaries training used, and which ids would (rules: eagle3lab.wiring.conventions, read in each
    version's srt/models/deepseek_v2.py); `cuda_graph` False: served with `--disable-cuda-graph`."""
    import pandas as pd

    versions = list(versions or serving_releases(arch=SEED_ARCH))
    rows = []
    for v in versions:
        fix = _fed(v, fix_ids, True, cuda_graph=cuda_graph)
        row = {f"config ids {config_ids} feed": _fed(v, config_ids, False, cuda_graph=cuda_graph),
               f"fix {fix_ids} (patched) feeds": fix,
               f"fix = trained {list(trained)}": fix == list(trained),
               "ids that feed the trained boundaries": IDS_SEP.join(_working_ids(v, trained, cuda_graph=cuda_graph))}
        key = tuple(str(x) for x in row.values())
        if rows and rows[-1][1] == key:
            rows[-1][0].append(v)
        else:
            rows.append(([v], key, row))
    out = [{"SGLang": vs[0] if len(vs) == 1 else f"{vs[0]} – {vs[-1]}", **row} for vs, _, row in rows]
    return pd.DataFrame(out).set_index("SGLang")


def lab_analog(trained_lab, trained=SEED_TRAINED, fed=None):
    """The lab's boundaries shifted slot by slot as `fed` is shifted from `trained` on the seed."""
    fed = fed if fed is not None else _fed(LATEST_SGLANG, SEED_FIX_IDS, True)
    return [b + (f - t) for b, f, t in zip(trained_lab, fed, trained)]


def measure_wirings(wirings: dict, lab: str, spec=(5, 1, 6), draft: str = "seed", num_prompts: int = 4,
                    max_new_tokens: int = 64, **_):
    """The lab draft `draft` served with each labelled set of boundaries (label -> boundaries),
    same prompts, speculation interleaved with plain decoding: one row per wiring."""
    import pandas as pd

    from eagle3lab.serving import measurements
    from eagle3lab.decoder.faults import FaultPlan, build_engine
    from eagle3lab.lab import load_lab

    lab_obj = load_lab(lab, progress=False)
    draft_model = lab_obj.load_draft(draft)
    rows = []
    for label, boundaries in wirings.items():
        plan = FaultPlan(draft_name=draft, layer_ids=[b - 1 for b in boundaries])
        engine = build_engine(lab_obj.target, draft_model, plan)
        result = measurements.lab_bench(lab_obj, spec, engine=engine, plan=plan,
                                        prompts=bench_prompts(lab_obj, num_prompts),
                                        max_new_tokens=max_new_tokens)
        rows.append({**_bench_row(result, wiring=label), "boundaries": list(engine.boundaries),
                     "draft": draft})
    return pd.DataFrame(rows).set_index("wiring")


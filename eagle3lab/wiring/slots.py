"""Does the server feed the draft the tensors it was trained on? Slot by slot, with the fix.

`check(draft_dir, target, train, serve)` reads a draft checkpoint (config.json + safetensors),
turns the training and serving conventions (`eagle3lab.wiring.conventions`) into boundaries and
compares them per fc slot. `wiring_matrix(a, b)` compares two captures numerically, so an
offset shows up even when no convention is known.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from eagle3lab import engines
from eagle3lab.wiring.boundaries import Boundaries, CaptureError, ConventionError, describe_boundary
from eagle3lab.wiring.conventions import ids_for, serve_boundaries, serve_table, train_boundaries
from eagle3lab.errors import EagleLabError
from eagle3lab.paths import read_json_object
from eagle3lab.spec import LATEST_SGLANG, split_engine

PATCH_COMMAND = "eagle3lab patch sglang --apply"
OK = "ok"


class WiringInputError(EagleLabError):
    """The draft checkpoint or target cannot be read, or its shapes contradict each other."""


# --------------------------------------------------------------------------- reading


@dataclass
class DraftInfo:
    """What a draft directory says about its wiring."""

    path: Path
    config: dict
    hidden_size: int
    target_hidden_size: int | None
    draft_vocab_size: int | None
    vocab_size: int | None
    layer_ids: list[int] | None
    ids_key: str  # "eagle_config" or "top_level": where `layer_ids` came from
    recorded_train: list[int] | None  # config eagle3lab.train_boundaries
    fc_shape: tuple[int, int] | None
    weights_file: Path | None
    checks: list[dict] = field(default_factory=list)
    ids_by_key: dict = field(default_factory=dict)  # both places, when both are set

    def ids_for_engine(self, engine: str) -> tuple[list[int] | None, str]:
        """The ids an engine looks at first: vLLM the top-level key, SGLang the nested one."""
        if engines.reads_top_level_ids(engine) and "top_level" in self.ids_by_key:
            return self.ids_by_key["top_level"], "top_level"
        return self.layer_ids, self.ids_key


def _read_json(path: Path, what: str) -> dict:
    return read_json_object(path, what, WiringInputError)


def _int_key(config: dict, key: str, path: Path, required: bool = True) -> int | None:
    value = config.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise WiringInputError(f"{path}: `{key}` must be a positive integer, got {value!r}")
    return value


def _layer_ids(config: dict, path: Path) -> tuple[list[int] | None, str, list[dict], dict]:
    """The aux ids and where they are: nested eagle_config (SGLang) or top level (vLLM)."""
    notes = []
    eagle = config.get("eagle_config")
    if eagle is not None and not isinstance(eagle, dict):
        raise WiringInputError(f"{path}: `eagle_config` must be an object, got {type(eagle).__name__}")
    nested = (eagle or {}).get("eagle_aux_hidden_state_layer_ids")
    top = config.get("eagle_aux_hidden_state_layer_ids")
    for name, ids in (("eagle_config.eagle_aux_hidden_state_layer_ids", nested),
                      ("eagle_aux_hidden_state_layer_ids", top)):
        if ids is not None and (not isinstance(ids, list) or not ids
                                or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids)):
            raise WiringInputError(f"{path}: `{name}` must be a non-empty list of integers, got {ids!r}")
    if nested is not None and top is not None and nested != top:
        notes.append({"check": "layer ids", "ok": False,
                      "detail": f"eagle_config ids {nested} and top-level ids {top} differ: SGLang reads "
                                "the nested ones, vLLM the top-level ones first"})
    both = {k: v for k, v in (("eagle_config", nested), ("top_level", top)) if v is not None}
    if nested is not None:
        return nested, "eagle_config", notes, both
    if top is not None:
        return top, "top_level", notes, both
    return None, "eagle_config", notes, both


def _weights_file(path: Path) -> Path | None:
    files = sorted(path.glob("*.safetensors"))
    if not files:
        return None
    preferred = [f for f in files if f.name == "model.safetensors"]
    return preferred[0] if preferred else files[0]


def _tensor_names(files: list[Path]) -> dict[str, Path]:
    from safetensors import safe_open

    names = {}
    for f in files:
        try:
            with safe_open(str(f), framework="pt") as handle:
                names.update({k: f for k in handle.keys()})
        except Exception as exc:  # safetensors raises its own error types for garbled headers
            raise WiringInputError(f"{f} is not a readable safetensors file ({exc})") from None
    return names


def _load(name: str, file: Path):
    from safetensors import safe_open

    with safe_open(str(file), framework="pt") as handle:
        return handle.get_tensor(name)


def _shape(name: str, file: Path) -> tuple[int, ...]:
    from safetensors import safe_open

    with safe_open(str(file), framework="pt") as handle:
        return tuple(handle.get_slice(name).get_shape())


def read_draft(draft_dir) -> DraftInfo:
    """Read config.json and the safetensors shapes of an EAGLE-3 draft checkpoint directory."""
    path = Path(draft_dir)
    if not path.is_dir():
        raise WiringInputError(f"draft directory {path} not found")
    config = _read_json(path / "config.json", "draft config")
    hidden = _int_key(config, "hidden_size", path)
    target_hidden = _int_key(config, "target_hidden_size", path, required=False)
    draft_vocab = _int_key(config, "draft_vocab_size", path, required=False)
    vocab = _int_key(config, "vocab_size", path, required=False)
    ids, key, checks, both = _layer_ids(config, path)
    lab = config.get("eagle3lab") or {}
    recorded = lab.get("train_boundaries") if isinstance(lab, dict) else None
    if recorded is not None and (not isinstance(recorded, list) or not all(isinstance(b, int) for b in recorded)):
        raise WiringInputError(f"{path}: `eagle3lab.train_boundaries` must be a list of integers")
    info = DraftInfo(path, config, hidden, target_hidden, draft_vocab, vocab, ids, key, recorded,
                     None, _weights_file(path), checks, both)
    if info.weights_file is None:
        info.checks.append({"check": "weights", "ok": True,
                            "detail": "no *.safetensors: fc width and d2t/t2d not checked"})
        return info
    names = _tensor_names(sorted(path.glob("*.safetensors")))
    fc = next((n for n in ("fc.weight", "model.fc.weight") if n in names), None)
    if fc is None:
        raise WiringInputError(f"{path}: no `fc.weight` in {', '.join(sorted({f.name for f in names.values()}))} "
                               "(an EAGLE-3 draft projects its aux hidden states with fc)")
    shape = _shape(fc, names[fc])
    if len(shape) != 2:
        raise WiringInputError(f"{path}: fc.weight has shape {shape}, expected [hidden, k * target_hidden]")
    info.fc_shape = (int(shape[0]), int(shape[1]))
    if info.fc_shape[0] != hidden:
        raise WiringInputError(f"{path}: fc.weight has {shape[0]} output rows but hidden_size is {hidden}")
    info.checks += _vocab_checks(info, names)
    return info


def _vocab_checks(info: DraftInfo, names: dict[str, Path]) -> list[dict]:
    """d2t/t2d present and consistent: t2d marks exactly the target ids draft ids map to."""
    import torch

    d2t_name = next((n for n in ("d2t", "model.d2t") if n in names), None)
    t2d_name = next((n for n in ("t2d", "model.t2d") if n in names), None)
    dv, v = info.draft_vocab_size, info.vocab_size
    if d2t_name is None or t2d_name is None:
        needed = dv is not None and v is not None and dv < v
        missing = [n for n, got in (("d2t", d2t_name), ("t2d", t2d_name)) if got is None]
        return [{"check": "vocab map", "ok": not needed,
                 "detail": f"{'/'.join(missing)} missing" + (f": draft_vocab_size {dv} < vocab_size {v} "
                                                             "needs them" if needed else "")}]
    d2t, t2d = _load(d2t_name, names[d2t_name]), _load(t2d_name, names[t2d_name])
    problems = []
    if dv is not None and tuple(d2t.shape) != (dv,):
        problems.append(f"d2t shape {tuple(d2t.shape)} != (draft_vocab_size={dv},)")
    if v is not None and tuple(t2d.shape) != (v,):
        problems.append(f"t2d shape {tuple(t2d.shape)} != (vocab_size={v},)")
    if not problems and d2t.dim() == 1 and t2d.dim() == 1:
        target_ids = torch.arange(d2t.numel()) + d2t.long()
        if target_ids.min() < 0 or target_ids.max() >= t2d.numel():
            problems.append("d2t maps draft ids outside the target vocab")
        elif not bool(t2d.bool()[target_ids].all()) or int(t2d.bool().sum()) != d2t.numel():
            problems.append(f"t2d marks {int(t2d.bool().sum())} target ids but d2t maps "
                            f"{d2t.numel()} draft ids to a different set")
    return [{"check": "vocab map", "ok": not problems,
             "detail": "; ".join(problems) or f"d2t/t2d consistent ({d2t.numel()} draft ids)"}]


def read_target(target, arch: str | None = None) -> tuple[int, int | None, str]:
    """(num_layers, hidden_size or None, architecture) from a target dir or a layer count."""
    if isinstance(target, int) and not isinstance(target, bool):
        if target < 4:
            raise WiringInputError(f"a target needs at least 4 layers, got {target}")
        return target, None, arch or "LlamaForCausalLM"
    if target is None:
        raise WiringInputError("give the target: its directory (config.json) or its number of layers")
    path = Path(target)
    config = _read_json(path / "config.json" if path.is_dir() else path, "target config")
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
    layers = _int_key(text, "num_hidden_layers", path)
    hidden = _int_key(text, "hidden_size", path, required=False)
    archs = config.get("architectures") or []
    return layers, hidden, arch or (archs[0] if archs else "LlamaForCausalLM")


def _parse_spec(spec, what: str) -> tuple[str, str]:
    """'sglang==0.5.23' or ('sglang', '0.5.23') -> ('sglang', '0.5.23')."""
    if isinstance(spec, str):
        name, version = split_engine(spec, default="")
        if "==" not in spec or not name or not version:
            raise WiringInputError(f"{what} must look like NAME==VERSION (e.g. sglang==0.5.23), got {spec!r}")
        return name, version
    if isinstance(spec, (tuple, list)) and len(spec) == 2 and all(isinstance(s, str) for s in spec):
        return spec[0].lower(), spec[1]
    raise WiringInputError(f"{what} must be 'NAME==VERSION' or (name, version), got {spec!r}")


# --------------------------------------------------------------------------- the report


@dataclass
class WiringReport:
    """Slot-by-slot comparison of trained and served boundaries, with the fix."""

    draft: DraftInfo
    num_layers: int
    arch: str
    train_label: str
    serve_label: str
    trained: Boundaries
    fed: Boundaries | None
    serve_error: CaptureError | None
    slots: list[dict]
    fix: str
    notes: list[str]
    versions: object = None  # DataFrame: this config's ids across versions of the serving engine

    @property
    def ok(self) -> bool:
        return all(s["verdict"] == OK for s in self.slots) and all(c["ok"] for c in self.draft.checks)

    def to_frame(self):
        """One row per fc slot: trained_on, fed, verdict, fix."""
        import pandas as pd

        return pd.DataFrame(self.slots, columns=["slot", "trained_on", "trained_tensor", "fed",
                                                 "fed_tensor", "verdict", "fix"])

    def checks_frame(self):
        import pandas as pd

        return pd.DataFrame(self.draft.checks, columns=["check", "ok", "detail"])

    def _header(self) -> list[str]:
        ids = self.draft.layer_ids
        where = ("eagle_config" if self.draft.ids_key == "eagle_config" else "top-level") if ids else "none"
        return [f"draft:  {self.draft.path}  (ids {ids} in {where}; fc {self.draft.fc_shape or 'not checked'})",
                f"target: {self.arch}, {self.num_layers} layers",
                f"train:  {self.train_label} -> {list(self.trained)}",
                f"serve:  {self.serve_label} -> "
                + (str(list(self.fed)) if self.fed is not None else f"{self.serve_error.kind}")]

    def __str__(self) -> str:
        import pandas as pd

        lines = self._header()
        with pd.option_context("display.width", 200, "display.max_colwidth", 80):
            lines += ["", self.to_frame().drop(columns=["fix"]).to_string(index=False)]
        lines += ["", f"verdict: {'OK' if self.ok else 'NOT OK'}", f"fix: {self.fix}"]
        lines += [f"check {c['check']}: {'ok' if c['ok'] else 'NOT OK'} - {c['detail']}" for c in self.draft.checks]
        lines += [f"note: {n}" for n in self.notes]
        if self.versions is not None:
            with pd.option_context("display.width", 200, "display.max_colwidth", 40):
                lines += ["", f"these ids across {self.serve_label.split('==')[0]} versions "
                          f"(wanted {list(self.trained)}):", self.versions.to_string(index=False)]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        from html import escape

        def colour(v):
            return f"background-color: {'#d4edda' if v == OK else '#f8d7da'}"

        styled = self.to_frame().style.map(colour, subset=["verdict"]).hide(axis="index")
        parts = ["<div>", "<pre>" + escape("\n".join(self._header())) + "</pre>", styled.to_html(),
                 f"<p><b>{'OK' if self.ok else 'NOT OK'}</b> &mdash; fix: {escape(self.fix)}</p>"]
        parts += [f"<p>check {escape(c['check'])}: {'ok' if c['ok'] else '<b>NOT OK</b>'} - "
                  f"{escape(c['detail'])}</p>" for c in self.draft.checks]
        parts += [f"<p>note: {escape(n)}</p>" for n in self.notes]
        if self.versions is not None:
            parts += ["<p>these ids across versions:</p>", self.versions.to_html(index=False)]
        return "\n".join(parts + ["</div>"])


def _slot_verdict(i: int, trained: Boundaries, fed: Boundaries | None, error: CaptureError | None,
                  n: int) -> str:
    if error is not None and error.kind == "crash":
        return "would crash"
    fed_list = list(fed) if fed is not None else error.fed
    if error is not None and i >= len(fed_list):
        return "tensor dropped"
    t, f = trained[i], fed_list[i]
    if i in trained.post_norm:
        return "post-norm trained" if f == n else "wrong layer (trained post-norm)"
    if t == f:  # with a dropped tensor the fc still gets the wrong width
        return OK if error is None else "ok but fc width wrong"
    if fed is not None and fed.ids_ignored:
        return "ids ignored"
    if t == 0:
        return "embedding missing"
    if abs(t - f) == 1:
        return "off by one"
    if t in fed_list:
        return f"slot shifted (b{t} fed in slot {fed_list.index(t)})"
    return "wrong layer"


def _fix(trained: Boundaries, engine: str, version: str, arch: str, n: int, key: str, cuda_graph: bool) -> str:
    """The ids to write for this engine version (stock first, then with the patch), or why none do."""
    if trained.post_norm:
        return (f"no ids can: slot(s) {list(trained.post_norm)} were trained on transformers' post-norm "
                f"hidden_states[{n}], which no engine feeds; retrain capturing pre-norm (hooks)")
    want = list(trained)
    if want != sorted(want):
        order = sorted(range(len(want)), key=want.__getitem__)
        return (f"{engine} feeds ascending boundaries {sorted(want)}: permute fc.weight's input blocks to "
                f"slot order {order}, then write ids for {sorted(want)}")
    keys = [key] + [k for k in ("eagle_config", "top_level") if k != key]
    for patched in engines.patch_options(engine):
        for k in keys:
            try:
                ids = ids_for(want, engine, version, arch, n, k, cuda_graph=cuda_graph, patched=patched)
            except (CaptureError, ConventionError):
                continue
            where = ("eagle_config.eagle_aux_hidden_state_layer_ids" if k == "eagle_config"
                     else "top-level eagle_aux_hidden_state_layer_ids")
            text = f"write {where} = {ids}"
            return (f"apply the embedding-capture patch (`{PATCH_COMMAND}`), then {text}" if patched
                    else text)
    return (f"no ids make {engine} {version} feed {want} for {arch}, even patched; "
            "see the versions table for one that can")


def _train(train, info: DraftInfo, n: int, arch: str) -> tuple[Boundaries, str, list[str]]:
    notes = []
    if train is None:
        if info.recorded_train is not None:
            notes.append(f"training boundaries read from config eagle3lab.train_boundaries = {info.recorded_train}")
            train = list(info.recorded_train)
        else:
            train = ("specforge", "0.2.0")
    elif info.recorded_train is not None:
        notes.append(f"config records eagle3lab.train_boundaries = {info.recorded_train}; using the "
                     f"given train={train!r} instead")
    if isinstance(train, (list, tuple)) and train and all(isinstance(b, int) and not isinstance(b, bool)
                                                          for b in train):
        bad = [b for b in train if not 0 <= b <= n]
        if bad:
            raise WiringInputError(f"training boundaries {bad} are out of range for {n} layers (0..{n})")
        return Boundaries(train, source="explicit boundaries"), f"boundaries {list(train)}", notes
    if isinstance(train, tuple) and len(train) == 3:
        name, version, ids = train
        label = f"{name}=={version} ids {list(ids)}"
    else:
        (name, version), ids = _parse_spec(train, "train"), info.layer_ids
        label = f"{name}=={version}"
    got = train_boundaries(name, version, ids, n, arch=arch)
    notes += [f"train: {w}" for w in got.warnings]
    return got, label, notes


def check(draft_dir, target=None, train=None, serve=("sglang", LATEST_SGLANG), *, arch: str | None = None,
          cuda_graph: bool = True, patched: bool = False) -> WiringReport:
    """Compare, slot by slot, what training fed the draft with what the server will feed it.

    target: the target's directory (config.json) or its number of layers (then `arch`, default
    LlamaForCausalLM). train: None (config `eagle3lab.train_boundaries` when recorded, else
    specforge==0.2.0), 'NAME==VERSION' / (name, version) applied to the config's ids,
    (name, version, ids), or an explicit list of boundaries. serve: 'ENGINE==VERSION' or a tuple.
    `patched`: the server runs with eagle3lab's embedding-capture patch applied.
    """
    n, target_hidden, arch = read_target(target, arch)
    engine, version = _parse_spec(serve, "serve")  # both said before the draft's tensors load
    info = read_draft(draft_dir)
    h_in = _target_hidden(info, target_hidden)
    slots_n = _slot_count(info, h_in)
    trained, train_label, notes = _train(train, info, n, arch)
    if len(trained) != slots_n:
        raise WiringInputError(f"training fed {len(trained)} tensors {list(trained)} but the draft's fc "
                               f"takes {slots_n} (fc.weight {info.fc_shape}, target hidden {h_in})")
    layer_ids, key = info.ids_for_engine(engine)
    fed, error = None, None
    try:
        fed = serve_boundaries(engine, version, arch, layer_ids, n, key,
                               cuda_graph=cuda_graph, patched=patched)
        notes += [f"serve: {w}" for w in fed.warnings]
    except CaptureError as exc:
        error = exc
        notes.append(f"serve: {exc}")
    if layer_ids is None:
        notes.append("the draft config has no layer ids: engines feed the default [2, N//2, N-3]")
    slots = []
    fed_list = list(fed) if fed is not None else error.fed
    for i in range(slots_n):
        f = fed_list[i] if i < len(fed_list) and (error is None or error.kind != "crash") else None
        slots.append({"slot": i, "trained_on": f"b{trained[i]}",
                      "trained_tensor": describe_boundary(trained[i], n, i in trained.post_norm),
                      "fed": f"b{f}" if f is not None else "-", "fed_tensor": describe_boundary(f, n),
                      "verdict": _slot_verdict(i, trained, fed, error, n)})
    all_ok = all(s["verdict"] == OK for s in slots)
    fix = "none needed" if all_ok else _fix(trained, engine, version, arch, n, key, cuda_graph)
    for s in slots:
        s["fix"] = "" if s["verdict"] == OK else fix
    versions = None
    if layer_ids is not None and getattr(engines.lookup(engine), "latest", None) is not None:  # versioned
        versions = serve_table(layer_ids, arch, n, want=list(trained) if not trained.post_norm else None,
                               engine=engine, key=key, cuda_graph=cuda_graph)
    label = f"{engine}=={version}" + (" (patched)" if patched else "")
    return WiringReport(info, n, arch, train_label, label, trained, fed, error, slots, fix, notes, versions)


def _target_hidden(info: DraftInfo, target_hidden: int | None) -> int:
    """The width of one aux tensor: the target's hidden size (draft's target_hidden_size, else hidden)."""
    if target_hidden and info.target_hidden_size and target_hidden != info.target_hidden_size:
        raise WiringInputError(f"the target's hidden_size is {target_hidden} but the draft config says "
                               f"target_hidden_size {info.target_hidden_size}")
    return target_hidden or info.target_hidden_size or info.hidden_size


def _slot_count(info: DraftInfo, h_in: int) -> int:
    """Slots = fc input width / target hidden; must agree with the number of config ids."""
    ids_n = len(info.layer_ids) if info.layer_ids else None
    if info.fc_shape is None:
        return ids_n or 3
    width = info.fc_shape[1]
    if width % h_in:
        raise WiringInputError(f"fc.weight takes {width} inputs, not a multiple of the target hidden "
                               f"size {h_in}: the widths do not match")
    k = width // h_in
    if ids_n is not None and k != ids_n:
        raise WiringInputError(f"fc.weight takes {k} x {h_in} inputs but the config lists {ids_n} layer "
                               f"ids {info.layer_ids}: SGLang sizes fc by the ids and would fail to load it")
    return k


# --------------------------------------------------------------------------- numeric


def wiring_matrix(captures_a: dict, captures_b: dict):
    """Cosine similarity (mean over tokens) between every boundary of capture a and of capture b.

    Rows: boundaries of a; columns: boundaries of b. Both captures must be of the same input.
    An offset between two conventions shows as the high values sitting off the diagonal.
    """
    import pandas as pd
    import torch

    if not captures_a or not captures_b:
        raise WiringInputError("wiring_matrix needs two non-empty captures")
    shapes = {tuple(t.shape[:-1]) for t in list(captures_a.values()) + list(captures_b.values())}
    if len(shapes) != 1:
        raise WiringInputError(f"captures must be of the same tokens; got leading shapes {sorted(shapes)}")
    rows = {}
    for a, ta in captures_a.items():
        fa = ta.reshape(-1, ta.shape[-1]).float()
        rows[a] = {}
        for b, tb in captures_b.items():
            fb = tb.reshape(-1, tb.shape[-1]).float()
            if fa.shape[-1] != fb.shape[-1]:
                rows[a][b] = math.nan
                continue
            rows[a][b] = float(torch.nn.functional.cosine_similarity(fa, fb, dim=-1).mean())
    frame = pd.DataFrame.from_dict(rows, orient="index")
    frame.index.name, frame.columns.name = "a", "b"
    return frame.sort_index().sort_index(axis=1)


def match_boundaries(matrix):
    """For each boundary of a, the boundary of b it matches best, and the offset b - a."""
    import pandas as pd

    best = matrix.idxmax(axis=1)
    return pd.DataFrame({"a": matrix.index, "best_b": best.values,
                         "cosine": [matrix.loc[a, b] for a, b in best.items()],
                         "offset": [int(b) - int(a) for a, b in best.items()]})


def plot_wiring_matrix(matrix, ax=None, title: str = "cosine similarity between boundaries"):
    """Heatmap of a wiring_matrix: a bright diagonal means same wiring, an off-diagonal one an offset."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    from eagle3lab.viz.style import apply_style

    apply_style()
    if ax is None:
        _, ax = plt.subplots(figsize=(1.0 + 0.6 * matrix.shape[1], 0.8 + 0.5 * matrix.shape[0]))
    sns.heatmap(matrix, ax=ax, vmin=-1, vmax=1, cmap="vlag", annot=matrix.shape[0] * matrix.shape[1] <= 150,
                fmt=".2f", cbar_kws={"label": "mean cosine"})
    ax.set_xlabel(f"boundary ({matrix.columns.name or 'b'})")
    ax.set_ylabel(f"boundary ({matrix.index.name or 'a'})")
    ax.set_title(title)
    return ax

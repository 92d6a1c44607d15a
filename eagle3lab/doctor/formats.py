"""Read a draft or target checkpoint without loading it: config.json and safetensors headers.

Two draft layouts are read:

* SGLang / SpecForge (`LlamaForCausalLMEagle3`, the lab's drafts): a flat Llama config with
  `draft_vocab_size`, `target_hidden_size` and the aux ids nested in
  `eagle_config.eagle_aux_hidden_state_layer_ids` (SGLang reads them there; vLLM >= 0.22 too).
  Tensors `fc.weight`, `midlayer.*`, `norm.weight`, `lm_head.weight`, `d2t`, `t2d`.
* speculators (vllm-project/speculators 0.9.0, `Eagle3SpeculatorConfig` in
  speculators/models/eagle3/config.py, serialised by `SpeculatorModelConfig.to_dict` in
  speculators/config.py): `speculators_model_type: "eagle3"`, the decoder layer's Llama config
  in `transformer_layer_config` (its `vocab_size` is the *target's*), top-level
  `draft_vocab_size`, `target_hidden_size`, `eagle_aux_hidden_state_layer_ids`,
  `norm_before_fc` / `fc_norm` (mutually exclusive), `norm_output`, `norm_before_residual`, and
  `speculators_config.verifier` (name_or_path, architectures). Its converter
  (convert/eagle/eagle3_converter.py) renames `midlayer.*` to `layers.0.*` and writes
  `max_position_embeddings = max(draft, target)`.

A safetensors file starts with an 8-byte little-endian header length and a JSON header
{name: {dtype, shape, data_offsets}}; reading only that costs nothing for a 1 T-parameter model.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from pathlib import Path

from eagle3lab import engines
from eagle3lab.errors import EagleLabError
from eagle3lab.paths import read_json_object

DTYPE_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1,
               "U8": 1, "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1}


class DoctorInputError(EagleLabError):
    """A checkpoint directory the doctor cannot read."""


@dataclass
class TensorInfo:
    name: str
    dtype: str
    shape: tuple[int, ...]
    file: Path
    start: int  # absolute byte offset of the data in the file
    end: int

    @property
    def nbytes(self) -> int:
        return self.end - self.start


def read_json(path: Path, what: str) -> dict:
    return read_json_object(path, what, DoctorInputError)


def safetensors_header(file: Path) -> dict[str, TensorInfo]:
    """{name: TensorInfo} from one safetensors file's header (no tensor data read)."""
    with open(file, "rb") as fh:
        head = fh.read(8)
        if len(head) != 8:
            raise DoctorInputError(f"{file} is not a safetensors file (shorter than 8 bytes)")
        (n,) = struct.unpack("<Q", head)
        if n > 100_000_000:
            raise DoctorInputError(f"{file} is not a safetensors file (header length {n})")
        try:
            header = json.loads(fh.read(n))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise DoctorInputError(f"{file} has a garbled safetensors header ({exc})") from None
    if not isinstance(header, dict):
        raise DoctorInputError(f"{file} has a safetensors header that is JSON but not an object "
                               f"({type(header).__name__}): not a safetensors file")
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        try:
            a, b = meta["data_offsets"]
            out[name] = TensorInfo(name, str(meta["dtype"]), tuple(int(d) for d in meta["shape"]), file,
                                   8 + n + int(a), 8 + n + int(b))
        except (TypeError, KeyError, ValueError):
            raise DoctorInputError(f"{file}: safetensors header entry {name!r} is not "
                                   "{dtype, shape, data_offsets}") from None
    return out


def tensors(directory: Path) -> dict[str, TensorInfo]:
    """Every tensor of every *.safetensors file in a directory (shards included)."""
    out = {}
    for file in sorted(Path(directory).glob("*.safetensors")):
        out.update(safetensors_header(file))
    return out


def load_tensor(info: TensorInfo):
    """One tensor as torch (only what is asked for is read)."""
    from safetensors import safe_open

    with safe_open(str(info.file), framework="pt") as handle:
        return handle.get_tensor(info.name)


def first(names: dict, *candidates: str):
    return next((names[c] for c in candidates if c in names), None)


@dataclass
class DraftSpec:
    """What a draft checkpoint says, whatever its layout."""

    path: Path
    layout: str  # "sglang" or "speculators"
    config: dict
    arch_config: dict  # the decoder layer's Llama-style config
    ids: dict = field(default_factory=dict)  # where -> ids: "eagle_config", "top_level"
    tensors: dict = field(default_factory=dict)
    norms: dict = field(default_factory=dict)  # norm_before_fc, fc_norm, norm_output, ...
    provenance: dict = field(default_factory=dict)  # train_boundaries, trainer, chat_template, verifier

    def get(self, key, default=None):
        return self.arch_config.get(key, self.config.get(key, default))

    @property
    def hidden_size(self) -> int | None:
        return self.get("hidden_size")

    @property
    def target_hidden_size(self) -> int | None:
        return self.config.get("target_hidden_size") or self.hidden_size

    @property
    def vocab_size(self) -> int | None:
        return self.get("vocab_size")

    @property
    def draft_vocab_size(self) -> int | None:
        return self.config.get("draft_vocab_size")

    @property
    def rope(self) -> dict:
        return rope_settings(self.arch_config if self.layout == "speculators" else self.config)

    def layer_ids(self, engine: str | None = None) -> tuple[list[int] | None, str]:
        """The ids an engine reads: vLLM the top-level key first, SGLang only the nested one."""
        if engines.reads_top_level_ids(engine) and "top_level" in self.ids:
            return self.ids["top_level"], "top_level"
        if "eagle_config" in self.ids:
            return self.ids["eagle_config"], "eagle_config"
        if "top_level" in self.ids:
            return self.ids["top_level"], "top_level"
        return None, "eagle_config"

    @property
    def fc(self) -> TensorInfo | None:
        return first(self.tensors, "fc.weight", "model.fc.weight")

    @property
    def slots(self) -> int | None:
        """fc input width / target hidden = how many target tensors the draft reads."""
        fc, h = self.fc, self.target_hidden_size
        if fc is None or not h or len(fc.shape) != 2 or fc.shape[1] % h:
            return None
        return fc.shape[1] // h


def rope_settings(config: dict) -> dict:
    """rope_theta, rope_scaling and max_position_embeddings, whichever way the config spells them
    (transformers 5 nests theta in `rope_parameters`)."""
    params = config.get("rope_parameters") if isinstance(config.get("rope_parameters"), dict) else {}
    theta = config.get("rope_theta", params.get("rope_theta"))
    scaling = config.get("rope_scaling")
    if scaling is None and params and params.get("rope_type", "default") != "default":
        scaling = {k: v for k, v in params.items() if k != "rope_theta"}
    return {"rope_theta": None if theta is None else float(theta), "rope_scaling": scaling,
            "max_position_embeddings": config.get("max_position_embeddings")}


def _int_list(value, where: Path, key: str):
    if value is None:
        return None
    if (not isinstance(value, list) or not value
            or not all(isinstance(i, int) and not isinstance(i, bool) for i in value)):
        raise DoctorInputError(f"{where}: `{key}` must be a non-empty list of integers, got {value!r}")
    return list(value)


def read_draft_spec(draft_dir) -> DraftSpec:
    path = Path(draft_dir)
    if not path.is_dir():
        raise DoctorInputError(f"draft directory {path} not found")
    config = read_json(path / "config.json", "draft config")
    spec_layout = config.get("speculators_model_type") is not None
    if spec_layout and config.get("speculators_model_type") != "eagle3":
        raise DoctorInputError(f"{path}: speculators_model_type is {config['speculators_model_type']!r}; "
                               "the doctor reads EAGLE-3 drafts ('eagle3')")
    arch_config = config.get("transformer_layer_config") if spec_layout else config
    if not isinstance(arch_config, dict):
        raise DoctorInputError(f"{path}: `transformer_layer_config` must be an object")
    eagle = config.get("eagle_config")
    if eagle is not None and not isinstance(eagle, dict):
        raise DoctorInputError(f"{path}: `eagle_config` must be an object, got {type(eagle).__name__}")
    ids = {}
    nested = _int_list((eagle or {}).get("eagle_aux_hidden_state_layer_ids"), path,
                       "eagle_config.eagle_aux_hidden_state_layer_ids")
    top = _int_list(config.get("eagle_aux_hidden_state_layer_ids"), path, "eagle_aux_hidden_state_layer_ids")
    if nested is not None:
        ids["eagle_config"] = nested
    if top is not None:
        ids["top_level"] = top
    lab = config.get("eagle3lab") if isinstance(config.get("eagle3lab"), dict) else {}
    verifier = ((config.get("speculators_config") or {}).get("verifier") or {}) if spec_layout else {}
    provenance = {"train_boundaries": lab.get("train_boundaries"), "trainer": lab.get("trainer"),
                  "chat_template": lab.get("chat_template", config.get("chat_template")),
                  "ttt_steps": lab.get("ttt_steps"), "verifier": verifier.get("name_or_path"),
                  "verifier_architectures": verifier.get("architectures"),
                  "target_rope_theta": lab.get("target_rope_theta")}
    norms = {k: bool(config.get(k, (eagle or {}).get(k, False)))
             for k in ("norm_before_fc", "fc_norm", "norm_output", "norm_before_residual")}
    try:
        names = tensors(path)
    except (OSError, KeyError, ValueError) as exc:
        raise DoctorInputError(f"{path}: cannot read safetensors headers ({exc})") from None
    return DraftSpec(path, "speculators" if spec_layout else "sglang", config, arch_config, ids, names,
                     norms, provenance)


@dataclass
class TargetSpec:
    path: Path
    config: dict
    text_config: dict
    tensors: dict
    tokenizer_config: dict

    @property
    def num_layers(self) -> int:
        n = self.text_config.get("num_hidden_layers")
        if not isinstance(n, int) or n < 1:
            raise DoctorInputError(f"{self.path}: `num_hidden_layers` must be a positive integer, got {n!r}")
        return n

    @property
    def arch(self) -> str:
        archs = self.config.get("architectures") or ["LlamaForCausalLM"]
        return archs[0]

    @property
    def rope(self) -> dict:
        return rope_settings(self.text_config)

    @property
    def parameter_bytes(self) -> int:
        return sum(t.nbytes for t in self.tensors.values())

    @property
    def lm_head(self) -> TensorInfo | None:
        """The target's output embedding (the input embedding when tied)."""
        head = first(self.tensors, "lm_head.weight", "language_model.lm_head.weight")
        if head is None and self.text_config.get("tie_word_embeddings", self.config.get("tie_word_embeddings")):
            head = self.embed
        return head

    @property
    def embed(self) -> TensorInfo | None:
        return first(self.tensors, "model.embed_tokens.weight", "embed_tokens.weight",
                     "model.language_model.embed_tokens.weight")


def read_target_spec(target_dir) -> TargetSpec:
    path = Path(target_dir)
    if not path.is_dir():
        raise DoctorInputError(f"target directory {path} not found")
    config = read_json(path / "config.json", "target config")
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
    tok_path = path / "tokenizer_config.json"
    tok = read_json(tok_path, "target tokenizer config") if tok_path.is_file() else {}
    try:
        names = tensors(path)
    except (OSError, KeyError, ValueError) as exc:
        raise DoctorInputError(f"{path}: cannot read safetensors headers ({exc})") from None
    return TargetSpec(path, config, text, names, tok)

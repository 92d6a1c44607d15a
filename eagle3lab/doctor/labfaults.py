"""The checkpoint a lab fault would leave on disk, so the doctor can be run on it.

`decoder/faults.py` applies the faults at serve time; the doctor reads checkpoints. For the
checkpoint-level faults (lm-head-target, rope-theta, no-aux-ids, chat-template)
`write_faulty_draft` writes the draft directory a converter or a careless edit would have
produced, and `write_faulty_target` the target directory served with it: the lab's own, or for
chat-template a copy whose tokenizer_config.json carries the chat template the server renders
(the draft then records its training format: `eagle3lab.chat_template` = "" for raw text).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from eagle3lab.errors import EagleLabError

CHECKPOINT_FAULTS = {"lm-head-target": "healthy", "rope-theta": "healthy", "no-aux-ids": "seed",
                     "embed-patch": "seed",  # embed-patch: the seed's draft with its fixed ids (no fault)
                     "chat-template": "healthy"}
TARGET_FAULTS = ("chat-template",)  # faults that also change the served target directory


def write_faulty_draft(lab_root, fault: str, out_dir) -> Path:
    """Copy the lab draft the fault starts from into `out_dir`, with the fault written in."""
    from eagle3lab.decoder.faults import WRONG_ROPE_THETA, seed_fix_ids

    if fault not in CHECKPOINT_FAULTS:
        raise EagleLabError(f"no checkpoint form for fault {fault!r}; known: {', '.join(CHECKPOINT_FAULTS)}")
    lab_root, out = Path(lab_root), Path(out_dir)
    src = lab_root / "drafts" / CHECKPOINT_FAULTS[fault]
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(src, out)
    config = json.loads((out / "config.json").read_text())
    lab = config.setdefault("eagle3lab", {})
    lab["target"] = str((lab_root / "target").resolve())
    if fault == "rope-theta":
        config["rope_theta"] = WRONG_ROPE_THETA
    elif fault == "no-aux-ids":
        config.get("eagle_config", {}).pop("eagle_aux_hidden_state_layer_ids", None)
    elif fault == "embed-patch":
        n = config["target_num_hidden_layers"]
        config["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = seed_fix_ids(n)
    elif fault == "lm-head-target":
        _overwrite_lm_head(out, lab_root / "target")
    elif fault == "chat-template":
        from eagle3lab.wiring.chat_templates import RAW

        lab["chat_template"] = RAW  # the lab trains on raw text: recorded, so the doctor can compare
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    return out


def write_faulty_target(lab_root, fault: str, out_dir) -> Path:
    """The target directory the fault serves: the lab's own, or (chat-template) a copy of it
    whose tokenizer_config.json has the chat template the fault serves prompts in."""
    from eagle3lab.decoder.faults import FAULTS

    lab_root = Path(lab_root)
    if fault not in TARGET_FAULTS:
        return lab_root / "target"
    out = Path(out_dir)
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(lab_root / "target", out)
    path = out / "tokenizer_config.json"
    config = json.loads(path.read_text())
    config["chat_template"] = FAULTS[fault].plan["chat_template"]
    path.write_text(json.dumps(config, indent=2) + "\n")
    return out


def _overwrite_lm_head(draft_dir: Path, target_dir: Path) -> None:
    import torch
    from safetensors.torch import load_file, save_file

    from eagle3lab.decoder.draft import load_target_embedding

    path = draft_dir / "model.safetensors"
    state = load_file(str(path))
    head = load_target_embedding(target_dir)  # the lab target ties lm_head to its embedding
    ids = torch.arange(state["d2t"].numel()) + state["d2t"].long()
    state["lm_head.weight"] = head[ids].to(state["lm_head.weight"].dtype).contiguous()
    save_file(state, str(path), metadata={"format": "pt"})

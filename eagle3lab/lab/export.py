"""Export a lab draft as a folder SGLang's `--speculative-draft-model-path` loads.

The lab already stores drafts in SGLang's `LlamaForCausalLMEagle3` layout; exporting
copies one, optionally rewriting `eagle_config.eagle_aux_hidden_state_layer_ids` (the
seed's fix writes [-1, 1, N//2-1] so SGLang's +1 rule captures [0, 2, N//2]) and
optionally embedding the target's `embed_tokens` (SGLang replaces it with the target's
anyway; other loaders may want it).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from eagle3lab.errors import EagleLabError
from eagle3lab.decoder.draft import CHECKPOINT_FILE, Eagle3Draft


def export_draft(draft: Eagle3Draft, out, *, aux_layer_ids: list[int] | None = None,
                 include_embed: bool = False, dtype=torch.bfloat16) -> Path:
    """Write `draft` to `out` (config.json + model.safetensors); returns the folder."""
    from safetensors.torch import save_file

    out = Path(out)
    if aux_layer_ids is not None:
        if len(aux_layer_ids) * draft.config["hidden_size"] != draft.fc.in_features:
            raise EagleLabError(f"{len(aux_layer_ids)} layer ids, but the draft's fc reads "
                                f"{draft.fc.in_features // draft.config['hidden_size']} states")
    out.mkdir(parents=True, exist_ok=True)
    config = json.loads(json.dumps(dict(draft.config)))
    if aux_layer_ids is not None:
        config.setdefault("eagle_config", {})["eagle_aux_hidden_state_layer_ids"] = \
            list(aux_layer_ids)
    config["torch_dtype"] = str(dtype).replace("torch.", "")
    config.get("eagle3lab", {}).pop("target", None)  # a relative path that no longer holds
    state = draft.checkpoint_state(dtype)
    if include_embed:
        state["embed_tokens.weight"] = draft.embed_tokens.weight.detach().to(dtype).contiguous()
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    save_file(state, str(out / CHECKPOINT_FILE), metadata={"format": "pt"})
    return out

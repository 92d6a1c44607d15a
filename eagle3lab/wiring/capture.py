"""Capture residual-stream boundaries from a transformers causal LM with forward hooks.

Boundary b of an N-layer target: b = 0 is the input of layer 0 (the embedding output), b = k the
output of layer k-1 (the input of layer k), b = N the last layer's output *before* the final
norm. `output_hidden_states` cannot give that last one: transformers (4.46-5.24) returns
`norm(b=N)` as its last entry (docs/sources.md section 2). Hooks give both,
and let the forward stop after the deepest boundary asked for.
"""

from __future__ import annotations

from eagle3lab.errors import EagleLabError


class CaptureInputError(EagleLabError):
    """The model or the boundaries asked for cannot be captured."""


class _StopForward(Exception):
    """Raised by the last hook needed, so the layers above it never run."""


def decoder_parts(model):
    """(layers, final_norm) of a transformers causal LM: model.model.layers / model.model.norm."""
    base = model.get_decoder() if hasattr(model, "get_decoder") else getattr(model, "model", model)
    layers = getattr(base, "layers", None)
    norm = getattr(base, "norm", None)
    if layers is None or not len(layers):
        raise CaptureInputError(f"{type(model).__name__} has no decoder `layers` to hook "
                                "(expected a transformers causal LM such as LlamaForCausalLM)")
    return base, layers, norm


def _as_input_ids(input_ids, device):
    import torch

    ids = torch.as_tensor(input_ids, dtype=torch.long, device=device)
    if ids.dim() == 1:
        ids = ids.unsqueeze(0)
    if ids.dim() != 2 or ids.shape[1] == 0:
        raise CaptureInputError(f"input_ids must be [T] or [B, T] token ids, got shape {tuple(ids.shape)}")
    return ids


def _first_tensor(value):
    return value[0] if isinstance(value, (tuple, list)) else value


def capture(model, input_ids, boundaries, pre_norm: bool = True, attention_mask=None) -> dict:
    """{b: hidden [B, T, H]} for each boundary b in `boundaries`, from one forward of `model`.

    The last boundary (b = N) is the last layer's output before the final norm, unless
    `pre_norm=False`, which gives the normed tensor (what `output_hidden_states[N]` holds).
    """
    import torch

    base, layers, norm = decoder_parts(model)
    n = len(layers)
    wanted = sorted({int(b) for b in boundaries})
    if not wanted:
        raise CaptureInputError("no boundaries to capture")
    bad = [b for b in wanted if not 0 <= b <= n]
    if bad:
        raise CaptureInputError(f"boundaries {bad} are out of range for a {n}-layer model (0..{n})")
    if not pre_norm and n in wanted and norm is None:
        raise CaptureInputError("pre_norm=False needs the model's final `norm` module")
    device = next(model.parameters()).device
    ids = _as_input_ids(input_ids, device)
    out: dict[int, torch.Tensor] = {}
    deepest = wanted[-1]
    handles = []

    def keep(b, tensor):
        out[b] = tensor.detach()
        if b == deepest:
            raise _StopForward

    if 0 in wanted:  # input of layer 0, so scaled embeddings (Gemma) are captured as the layer sees them
        def pre_hook(module, args, kwargs):
            keep(0, args[0] if args else kwargs["hidden_states"])
        handles.append(layers[0].register_forward_pre_hook(pre_hook, with_kwargs=True))
    for b in wanted:
        if b == 0:
            continue
        if b == n and not pre_norm:
            handles.append(norm.register_forward_hook(lambda m, a, o, b=b: keep(b, _first_tensor(o))))
        else:
            handles.append(layers[b - 1].register_forward_hook(lambda m, a, o, b=b: keep(b, _first_tensor(o))))
    try:
        with torch.no_grad():
            base(input_ids=ids, attention_mask=attention_mask, use_cache=False)
    except _StopForward:
        pass
    finally:
        for handle in handles:
            handle.remove()
    return {b: out[b] for b in sorted(out)}


def capture_list(model, input_ids, boundaries, pre_norm: bool = True):
    """The captured tensors in the order of `boundaries` (repeats allowed): what a draft's fc gets."""
    got = capture(model, input_ids, boundaries, pre_norm=pre_norm)
    return [got[int(b)] for b in boundaries]


def aux_hidden(model, input_ids, boundaries, pre_norm: bool = True):
    """cat([h_b for b in boundaries], -1): [B, T, len(boundaries) * H], the draft fc's input."""
    import torch

    return torch.cat(capture_list(model, input_ids, boundaries, pre_norm=pre_norm), dim=-1)

"""capture(): forward hooks on tiny random transformers models agree with output_hidden_states."""

import pytest
import torch

from eagle3lab.wiring.capture import CaptureInputError, aux_hidden, capture, capture_list
from eagle3lab.errors import EagleLabError

N_LAYERS = 5


def _tiny(family: str):
    torch.manual_seed(0)
    common = dict(vocab_size=97, hidden_size=32, intermediate_size=64, num_hidden_layers=N_LAYERS,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    if family == "llama":
        from transformers import LlamaConfig, LlamaForCausalLM
        model = LlamaForCausalLM(LlamaConfig(**common))
    else:
        from transformers import Qwen2Config, Qwen2ForCausalLM
        model = Qwen2ForCausalLM(Qwen2Config(**common))
    return model.eval()


@pytest.fixture(scope="module", params=["llama", "qwen2"])
def model(request):
    return _tiny(request.param)


@pytest.fixture(scope="module")
def ids():
    return torch.randint(0, 97, (2, 7), generator=torch.Generator().manual_seed(1))


@pytest.fixture(scope="module")
def reference(model, ids):
    with torch.no_grad():
        return model(input_ids=ids, output_hidden_states=True).hidden_states


def test_boundaries_below_n_equal_output_hidden_states(model, ids, reference):
    got = capture(model, ids, range(N_LAYERS))
    assert sorted(got) == list(range(N_LAYERS))
    for b, tensor in got.items():
        assert tensor.shape == (2, 7, 32)
        torch.testing.assert_close(tensor, reference[b])


def test_last_boundary_is_pre_norm_unless_asked(model, ids, reference):
    pre = capture(model, ids, [N_LAYERS])[N_LAYERS]
    post = capture(model, ids, [N_LAYERS], pre_norm=False)[N_LAYERS]
    torch.testing.assert_close(post, reference[N_LAYERS])  # transformers' last entry is post-norm
    assert not torch.allclose(pre, post, atol=1e-3)
    with torch.no_grad():
        torch.testing.assert_close(model.model.norm(pre), post)


def test_capture_stops_after_the_deepest_boundary(model, ids, reference):
    ran = []
    handle = model.model.layers[N_LAYERS - 1].register_forward_hook(lambda *a: ran.append(1))
    try:
        got = capture(model, ids, [0, 2])
    finally:
        handle.remove()
    assert ran == [] and sorted(got) == [0, 2]
    torch.testing.assert_close(got[2], reference[2])


def test_single_sequence_and_list_order(model, reference, ids):
    one = capture(model, ids[0].tolist(), [1])[1]
    torch.testing.assert_close(one, reference[1][:1])
    tensors = capture_list(model, ids, [3, 0, 3])
    torch.testing.assert_close(tensors[0], tensors[2])
    torch.testing.assert_close(tensors[1], reference[0])
    cat = aux_hidden(model, ids, [0, 2, 4])
    assert cat.shape == (2, 7, 3 * 32)
    torch.testing.assert_close(cat[..., 32:64], reference[2])


def test_hooks_are_removed(model, ids):
    def hook_counts():  # transformers installs hooks of its own; ours must all be gone
        return [(len(m._forward_hooks), len(m._forward_pre_hooks)) for m in model.modules()]

    before = hook_counts()
    capture(model, ids, [0, 1, N_LAYERS], pre_norm=False)
    assert hook_counts() == before


def test_bad_input(model, ids):
    with pytest.raises(CaptureInputError, match="out of range"):
        capture(model, ids, [0, N_LAYERS + 1])
    with pytest.raises(CaptureInputError, match="no boundaries"):
        capture(model, ids, [])
    with pytest.raises(CaptureInputError, match="token ids"):
        capture(model, torch.zeros(1, 2, 3, dtype=torch.long), [1])
    with pytest.raises(CaptureInputError, match="decoder `layers`"):
        capture(torch.nn.Linear(2, 2), ids, [1])
    assert issubclass(CaptureInputError, EagleLabError)

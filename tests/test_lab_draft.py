"""The EAGLE-3 draft: SGLang's checkpoint layout, cache, save/load."""

import importlib.util
import json
import types
import warnings

import pytest
import torch
from transformers import LlamaConfig

from eagle3lab.errors import EagleLabError
from eagle3lab.decoder.draft import Eagle3Draft, KVCache, sglang_param_names

H, NH, NKV, I, V, VD, N = 64, 4, 2, 160, 512, 256, 8
HD = H // NH


def make_draft(seed=0):
    torch.manual_seed(seed)
    tc = LlamaConfig(vocab_size=V, hidden_size=H, intermediate_size=96, num_hidden_layers=N,
                     num_attention_heads=NH, num_key_value_heads=NKV,
                     max_position_embeddings=256)
    vocab = torch.randperm(V)[:VD].sort().values
    draft = Eagle3Draft.for_target(tc, aux_layer_ids=[1, N // 2 - 1, N - 4],
                                   train_boundaries=[2, N // 2, N - 3], draft_vocab_ids=vocab,
                                   ttt_steps=3, intermediate_size=I,
                                   embed_weight=torch.randn(V, H))
    with torch.no_grad():
        for p in draft.parameters():
            if p.requires_grad:
                p.normal_(0, 0.1)
    return draft.eval(), vocab


def sglang_eagle3_class():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from sglang.srt.models.llama_eagle3 import LlamaForCausalLMEagle3
    return LlamaForCausalLMEagle3


def sglang_params():
    """params_dict of sglang 0.5.23 LlamaForCausalLMEagle3 at TP=1 for our sizes:
    LlamaModel.fc (hidden_size_in * num_aux, bias False), layers.0 = the EAGLE-3
    LlamaDecoderLayer (QKVParallelLinear over 2*hidden, LlamaMLP's merged gate_up_proj,
    input_layernorm/post_attention_layernorm from the base layer, hidden_norm),
    model.norm, and lm_head = ParallelLMHead(draft_vocab_size, hidden)."""
    shapes = {
        "model.embed_tokens.weight": (V, H),
        "model.fc.weight": (H, 3 * H),
        "model.layers.0.self_attn.qkv_proj.weight": ((NH + 2 * NKV) * HD, 2 * H),
        "model.layers.0.self_attn.o_proj.weight": (H, NH * HD),
        "model.layers.0.mlp.gate_up_proj.weight": (2 * I, H),
        "model.layers.0.mlp.down_proj.weight": (H, I),
        "model.layers.0.input_layernorm.weight": (H,),
        "model.layers.0.post_attention_layernorm.weight": (H,),
        "model.layers.0.hidden_norm.weight": (H,),
        "model.norm.weight": (H,),
        "lm_head.weight": (VD, H),
    }
    params, filled = {}, {}
    qkv_offsets = {"q": (0, NH * HD), "k": (NH * HD, NKV * HD), "v": ((NH + NKV) * HD, NKV * HD)}
    for name, shape in shapes.items():
        p = torch.nn.Parameter(torch.full(shape, float("nan")), requires_grad=False)
        filled[name] = torch.zeros(shape, dtype=torch.bool)

        def loader(param, w, shard=None, name=name):
            if shard is None:
                target = param.data
                mask = filled[name]
            else:
                start, size = qkv_offsets[shard] if isinstance(shard, str) else (shard * I, I)
                target = param.data[start:start + size]
                mask = filled[name][start:start + size]
            assert target.shape == w.shape, (name, shard, target.shape, w.shape)
            target.copy_(w)
            mask.fill_(True)

        p.weight_loader = loader
        params[name] = p
    return params, filled


def test_checkpoint_names_and_shapes_load_into_sglang_llama_eagle3():
    draft, vocab = make_draft()
    state = draft.checkpoint_state(torch.float32)
    params, filled = sglang_params()
    standin = types.SimpleNamespace(named_parameters=lambda: list(params.items()),
                                    hot_token_id=None)
    # The real loader from the installed sglang wheel, run on our tensors.
    sglang_eagle3_class().load_weights(standin, list(state.items()))
    for name, mask in filled.items():
        if name == "model.embed_tokens.weight":
            assert not mask.any()  # not in the checkpoint: SGLang shares the target's
        else:
            assert mask.all(), f"{name} not (fully) loaded from our checkpoint"
    qkv = params["model.layers.0.self_attn.qkv_proj.weight"]
    expect = torch.cat([state[f"midlayer.self_attn.{x}_proj.weight"] for x in "qkv"])
    assert torch.equal(qkv, expect)
    assert torch.equal(params["model.fc.weight"], state["fc.weight"])
    assert torch.equal(params["lm_head.weight"], state["lm_head.weight"])
    # d2t becomes SGLang's hot_token_id (draft id -> target id)
    assert torch.equal(standin.hot_token_id, vocab)
    assert torch.equal(draft.draft_to_target(torch.arange(VD)), vocab)
    assert sglang_param_names(state)["midlayer.mlp.up_proj.weight"] == \
        "model.layers.0.mlp.gate_up_proj.weight"


def test_sglang_source_still_has_the_layout_we_mirror():
    src = open(importlib.util.find_spec("sglang.srt.models.llama_eagle3").origin).read()
    assert '"midlayer": "layers.0"' in src
    assert "hidden_size = 2 * self.hidden_size if self.is_input_layer" in src
    assert "self.hidden_size_in * self.num_aux_hidden_states" in src
    assert "hidden_states = torch.cat([embeds, hidden_states], dim=-1)" in src


def test_config_json_is_what_sglang_reads(tmp_path):
    draft, _ = make_draft()
    draft.save_pretrained(tmp_path / "d")
    cfg = json.loads((tmp_path / "d" / "config.json").read_text())
    assert cfg["architectures"] == ["LlamaForCausalLMEagle3"]
    assert cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [1, N // 2 - 1, N - 4]
    assert cfg["draft_vocab_size"] == VD and cfg["vocab_size"] == V
    assert cfg["num_hidden_layers"] == 1 and cfg["tie_word_embeddings"] is False
    assert cfg["eagle3lab"]["train_boundaries"] == [2, N // 2, N - 3]
    # transformers reads it as a LlamaConfig, as SGLang does
    lc = LlamaConfig.from_dict(cfg)
    assert lc.draft_vocab_size == VD and lc.hidden_size == H


def test_save_load_round_trip_float16_storage(tmp_path):
    draft, _ = make_draft()
    draft.save_pretrained(tmp_path / "d")
    from safetensors.torch import load_file

    stored = load_file(str(tmp_path / "d" / "model.safetensors"))
    assert "embed_tokens.weight" not in stored
    assert stored["fc.weight"].dtype == torch.float16
    loaded = Eagle3Draft.from_pretrained(tmp_path / "d", embed_weight=draft.embed_tokens.weight)
    assert loaded.fc.weight.dtype == torch.float32
    assert loaded.train_boundaries == [2, N // 2, N - 3] and loaded.ttt_steps == 3
    assert loaded.aux_layer_ids == [1, N // 2 - 1, N - 4]
    ids, aux, pos = torch.randint(0, V, (1, 7)), torch.randn(1, 7, 3 * H), torch.arange(7)
    with torch.no_grad():
        a = draft(ids, aux, pos)[1]
        b = loaded(ids, aux, pos)[1]
    assert torch.allclose(a, b, atol=5e-2) and (a.argmax(-1) == b.argmax(-1)).float().mean() > 0.8
    with pytest.raises(EagleLabError):
        Eagle3Draft.from_pretrained(tmp_path / "d")  # no embedding anywhere
    with pytest.raises(EagleLabError):
        Eagle3Draft.from_pretrained(tmp_path / "missing")


@torch.no_grad()
def test_cached_steps_equal_one_full_pass():
    draft, _ = make_draft()
    ids, aux, pos = torch.randint(0, V, (2, 12)), torch.randn(2, 12, 3 * H), torch.arange(12)
    h_full, l_full = draft(ids, aux, pos)
    cache = KVCache()
    h1, l1 = draft(ids[:, :5], aux[:, :5], pos[:5], cache=cache)
    assert cache.length == 5
    h2, l2 = draft(ids[:, 5:], aux[:, 5:], pos[5:], cache=cache)
    assert cache.length == 12
    assert torch.allclose(torch.cat([l1, l2], 1), l_full, atol=1e-5)
    assert torch.allclose(torch.cat([h1, h2], 1), h_full, atol=1e-5)
    # truncate drops rejected positions; re-running them gives the same result
    cache.truncate(9)
    _, l3 = draft(ids[:, 9:], aux[:, 9:], pos[9:], cache=cache)
    assert cache.length == 12 and torch.allclose(l3, l_full[:, 9:], atol=1e-5)


@torch.no_grad()
def test_step_feeds_back_its_own_hidden_and_respects_masks():
    draft, _ = make_draft()
    ids, aux, pos = torch.randint(0, V, (1, 6)), torch.randn(1, 6, 3 * H), torch.arange(6)
    cache = KVCache()
    hidden, logits = draft(ids, aux, pos, cache=cache)
    assert hidden.shape == (1, 6, H) and logits.shape == (1, 6, VD)
    # a second step from the last hidden, with an explicit mask that hides position 0
    mask = torch.ones(1, 1, 1, 7, dtype=torch.bool)
    h_a, l_a = draft.step(ids[:, -1:], hidden[:, -1:], torch.tensor([6]), cache.clone(), mask)
    h_b, _ = draft.step(ids[:, -1:], hidden[:, -1:], torch.tensor([6]), cache.clone())
    assert torch.allclose(h_a, h_b, atol=1e-6)  # all-True mask == causal here
    mask[..., 0] = False
    h_c, _ = draft.step(ids[:, -1:], hidden[:, -1:], torch.tensor([6]), cache.clone(), mask)
    assert not torch.allclose(h_a, h_c)


def test_export_rewrites_ids_and_can_carry_the_embedding(tmp_path):
    from eagle3lab.lab.export import export_draft

    draft, _ = make_draft()
    out = export_draft(draft, tmp_path / "x", aux_layer_ids=[-1, 1, N // 2 - 1],
                       include_embed=True)
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [-1, 1, N // 2 - 1]
    again = Eagle3Draft.from_pretrained(out)  # the embedding travels in the checkpoint
    assert again.aux_layer_ids == [-1, 1, N // 2 - 1]
    assert torch.allclose(again.embed_tokens.weight, draft.embed_tokens.weight, atol=1e-2)
    with pytest.raises(EagleLabError):
        export_draft(draft, tmp_path / "y", aux_layer_ids=[1, 2])

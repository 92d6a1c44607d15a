"""Training-time test: the unroll sees what decoding sees, and it learns."""

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from eagle3lab.decoder.draft import Eagle3Draft, KVCache, init_weights
from eagle3lab.lab.target import capture
from eagle3lab.lab.training import (DraftJob, concat_aux, train_drafts, ttt_mask, ttt_unroll,
                                    weighted_loss)

V, H, N = 96, 32, 7


def tiny_target():
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=V, hidden_size=H, intermediate_size=64, num_hidden_layers=N,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=128,
                      tie_word_embeddings=True)
    return LlamaForCausalLM(cfg).eval()


def tiny_draft(target, k=3, boundaries=(2, 3, 4)):
    torch.manual_seed(1)
    d = Eagle3Draft.for_target(target.config, aux_layer_ids=[b - 1 for b in boundaries],
                               train_boundaries=list(boundaries),
                               draft_vocab_ids=torch.arange(0, V, 2), ttt_steps=k,
                               intermediate_size=64,
                               embed_weight=target.model.embed_tokens.weight)
    init_weights(d, std=0.1)
    return d


def test_ttt_mask_is_causal_then_diagonal():
    m = ttt_mask(4, 2)[0, 0]
    assert m.shape == (4, 12)
    assert torch.equal(m[:, :4], torch.ones(4, 4, dtype=torch.bool).tril())
    assert torch.equal(m[:, 4:8], torch.eye(4, dtype=torch.bool))
    assert torch.equal(m[:, 8:], torch.eye(4, dtype=torch.bool))


def _unroll_inputs(k: int, batch: int, length: int):
    """A tiny target and draft, tokens, the target's logits and the fc input over [2, 3, 4]."""
    target = tiny_target()
    draft = tiny_draft(target, k=k)
    x = torch.randint(0, V, (batch, length))
    logits, states = capture(target, x, [2, 3, 4])
    return target, draft, x, logits, concat_aux(states, [2, 3, 4])


def test_unroll_shapes_losses_and_gradients():
    target, draft, x, logits, aux = _unroll_inputs(k=3, batch=2, length=10)
    out = ttt_unroll(draft, aux, x, logits, 3)
    assert [d["depth"] for d in out] == [1, 2, 3]
    assert [int(d["count"]) for d in out] == [18, 16, 14]  # each depth loses one root per row
    assert all(d["logits"].shape == (2, 9, V // 2) for d in out)
    assert all(torch.isfinite(d["loss"]) and d["loss"] > 0 for d in out)
    assert all(0 <= int(d["hits"]) <= int(d["count"]) for d in out)
    weighted_loss(out).backward()
    assert draft.fc.weight.grad.abs().sum() > 0
    assert draft.midlayer.self_attn.q_proj.weight.grad.abs().sum() > 0
    assert draft.embed_tokens.weight.grad is None  # the target's embedding stays frozen


@torch.no_grad()
def test_unroll_matches_step_by_step_decoding():
    """Depth j at root t == a decode-time chain: cache the prefix, then feed hidden back."""
    target, draft, x, logits, aux = _unroll_inputs(k=4, batch=1, length=14)
    out = ttt_unroll(draft, aux, x, logits, 4)
    for t in (0, 5, 8):
        cache = KVCache()
        h, lg = draft(x[:, 1:t + 2], aux[:, :t + 1], torch.arange(t + 1), cache=cache)
        assert torch.allclose(lg[:, -1], out[0]["logits"][:, t], atol=1e-4)
        h = h[:, -1:]
        for j in range(1, 4):
            h, lg = draft.step(x[:, t + 1 + j:t + 2 + j], h, torch.tensor([t + j]), cache=cache)
            assert torch.allclose(lg[:, -1], out[j]["logits"][:, t], atol=1e-4), (t, j)


def test_training_lowers_the_draft_loss():
    target = tiny_target()
    with torch.no_grad():  # a confident teacher, so the loss has room to fall
        target.model.embed_tokens.weight.mul_(100)
    seqs = torch.randint(0, V, (4, 16))
    jobs = [DraftJob("ttt", tiny_draft(target, k=3), [2, 3, 4], 3),
            DraftJob("tf", tiny_draft(target, k=1), [0, 2, 3], 1)]
    hist = train_drafts(target, jobs, seqs, steps=25, batch=4, lr=1e-2, seed=0, progress=False)
    for name, rows in hist.items():
        first = sum(r["loss"] for r in rows[:3]) / 3
        last = sum(r["loss"] for r in rows[-3:]) / 3
        assert last < 0.8 * first, (name, first, last)


def test_a_job_with_its_own_step_count_trains_that_long():
    target = tiny_target()
    seqs = torch.randint(0, V, (4, 16))
    short, long = tiny_draft(target, k=2), tiny_draft(target, k=1)
    frozen = {k: v.clone() for k, v in short.state_dict().items()}
    jobs = [DraftJob("short", short, [2, 3, 4], 2), DraftJob("long", long, [0, 2, 3], 1, steps=6)]
    hist = train_drafts(target, jobs, seqs, steps=3, batch=2, lr=1e-2, seed=0, progress=False)
    assert len(hist["long"]) == 6 and [r["step"] for r in hist["long"]] == list(range(6))
    assert len(hist["short"]) == 3  # no steps of its own: the call's
    assert any(not torch.equal(frozen[k], v) for k, v in short.state_dict().items())


def test_argmax_teacher_scores_the_target_top_token():
    target, draft, x, logits, aux = _unroll_inputs(k=2, batch=1, length=8)
    hard = ttt_unroll(draft, aux, x, logits, 2, teacher="argmax")
    # the same as soft distillation against an (almost) one-hot teacher
    sharp = ttt_unroll(draft, aux, x, logits * 1e4, 2, teacher="soft")
    for h, s in zip(hard, sharp):
        assert torch.allclose(h["loss"], s["loss"], atol=1e-3)
    with pytest.raises(ValueError):
        ttt_unroll(draft, aux, x, logits, 2, teacher="nope")

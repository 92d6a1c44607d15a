"""The lab engine on small random-init models: forward pass, acceptance math, losslessness."""

from __future__ import annotations

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from eagle3lab.decoder.faults import FaultError, normalize_faults, plan_faults
from eagle3lab.decoder.forward import DraftModel, TargetModel, fake_quantize_
from eagle3lab.decoder.speculate import (DraftTree, SamplingParams, SpecEngine,
                                        accept_path, target_probs)
from eagle3lab.decoder.draft import Eagle3Draft, KVCache

# Our forward does the same float32 maths as transformers in a different op order.
LOGIT_ATOL = 1e-4


def tiny_pair(vocab=96, hidden=64, layers=6, seed=0, draft_scale=0.3, draft_vocab_step=2):
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=2 * hidden,
                      num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                      max_position_embeddings=512)
    target = LlamaForCausalLM(cfg).eval()
    ids = [0, layers // 2 - 1, layers - 2]  # distinct for any depth >= 4
    draft = Eagle3Draft.for_target(cfg, aux_layer_ids=ids, train_boundaries=[i + 1 for i in ids],
                                   draft_vocab_ids=torch.arange(0, vocab, draft_vocab_step),
                                   embed_weight=target.model.embed_tokens.weight.detach()).eval()
    with torch.no_grad():
        for p in draft.parameters():
            if p.dim() > 1 and p is not draft.embed_tokens.weight:
                p.normal_(0, draft_scale)
    return target, draft


@pytest.fixture(scope="module")
def pair():
    return tiny_pair()


def test_target_logits_match_transformers(pair):
    target, _ = pair
    lean = TargetModel(target, 256)
    ids = torch.randint(0, 96, (40,))
    with torch.no_grad():
        ref = target(ids[None], output_hidden_states=True)
    logits, aux = lean.forward(ids, 0, capture=(0, 2, 3))
    assert torch.allclose(logits, ref.logits[0], atol=LOGIT_ATOL)
    # boundary b == hidden_states[b] for b < N (the shared convention)
    H = target.config.hidden_size
    for j, b in enumerate((0, 2, 3)):
        assert torch.allclose(aux[:, j * H:(j + 1) * H], ref.hidden_states[b][0], atol=LOGIT_ATOL)
    # incremental decoding through the KV cache gives the same logits
    lean.forward(ids[:30], 0)
    part, _ = lean.forward(ids[30:36], 30)
    assert torch.allclose(part, ref.logits[0, 30:36], atol=LOGIT_ATOL)


def test_tree_mask_equals_separate_branches(pair):
    """Two branches verified in one pass see only their own ancestors."""
    target, _ = pair
    lean = TargetModel(target, 256)
    prefix = torch.randint(0, 96, (12,))
    a, b = [5, 6, 7], [8, 9]
    # tree: root r, branch a (depths 1..3) and branch b (depths 1..2)
    root = 3
    tree = DraftTree([root] + a + b, [-1, 0, 1, 2, 0, 4], [0, 1, 2, 3, 1, 2], [None] * 6)
    lean.forward(prefix, 0)
    logits, _ = lean.forward(torch.tensor(tree.tokens), 12, position_ids=12 + torch.tensor(tree.depths),
                             tree_mask=tree.attention_mask())
    with torch.no_grad():
        ref_a = target(torch.cat([prefix, torch.tensor([root] + a)])[None]).logits[0, 12:]
        ref_b = target(torch.cat([prefix, torch.tensor([root] + b)])[None]).logits[0, 12:]
    assert torch.allclose(logits[:4], ref_a, atol=LOGIT_ATOL)
    assert torch.allclose(logits[[0, 4, 5]], ref_b, atol=LOGIT_ATOL)


def test_lean_draft_matches_eagle3draft(pair):
    target, draft = pair
    lean = DraftModel(draft, 128)
    ids, aux = torch.randint(0, 96, (9,)), torch.randn(9, 3 * 64)
    with torch.no_grad():
        cache = KVCache()
        h1, l1 = draft(ids[None, :7], aux[None, :7], torch.arange(7), cache=cache)
        h2, l2 = draft.step(ids[None, 7:9], h1[:, -2:], torch.arange(7, 9), cache=cache)
    hh1, ll1 = lean.step(ids[:7], lean.project(aux[:7]), 0)
    hh2, ll2 = lean.step(ids[7:9], hh1[-2:], 7)
    assert torch.allclose(hh1, h1[0], atol=1e-5) and torch.allclose(ll1, l1[0], atol=1e-5)
    assert torch.allclose(ll2, l2[0], atol=1e-5)
    assert lean.target_ids.tolist() == draft.target_ids.tolist()


@pytest.mark.parametrize("spec", [(3, 1, 4), (1, 1, 2), (5, 1, 6), (3, 2, 6), (4, 3, 10)])
def test_greedy_speculative_equals_plain_random_models(pair, spec):
    target, draft = pair
    engine = SpecEngine(target, draft, max_seq_len=256)
    for seed in range(4):
        prompt = torch.randint(0, 96, (8 + seed,), generator=torch.Generator().manual_seed(seed)).tolist()
        plain = engine.generate_plain(prompt, 30)
        spec_out = engine.generate(prompt, 30, spec)
        assert spec_out.output_ids == plain.output_ids
        assert len(spec_out.output_ids) == 30
        # the verify steps account for every token after the prefill one (the last step may be cut)
        emitted = 1 + sum(s.accept_len for s in spec_out.steps)
        assert 30 <= emitted < 30 + spec_out.steps[-1].accept_len


def greedy_tree(tokens, parents):
    depths = []
    for p in parents:
        depths.append(0 if p < 0 else depths[p] + 1)
    return DraftTree(tokens, parents, depths, [None] * len(tokens))


def one_hot_logits(rows, vocab=10):
    out = torch.full((len(rows), vocab), -10.0)
    for i, t in enumerate(rows):
        out[i, t] = 10.0
    return out


def test_accept_path_greedy_walks_the_matching_branch():
    # root(0) -> 1:[tok 4] -> 3:[tok 6];  root -> 2:[tok 5] -> 4:[tok 7]
    tree = greedy_tree([9, 4, 5, 6, 7], [-1, 0, 0, 1, 2])
    # target wants 5 after the root, 7 after 5, then 2
    logits = one_hot_logits([5, 0, 7, 0, 2])
    path, extra, kind = accept_path(tree, logits, SamplingParams(), None)
    assert path == [0, 2, 4] and extra == 2 and kind == "bonus"
    # the target wants 3 after the root: nothing accepted, 3 replaces
    path, extra, kind = accept_path(tree, one_hot_logits([3, 0, 0, 0, 0]), SamplingParams(), None)
    assert path == [0] and extra == 3 and kind == "replacement"


def chi_square_pvalue(counts: torch.Tensor, probs: torch.Tensor) -> float:
    """Pearson chi-square goodness of fit (cells with expected < 5 pooled). A count where the
    probability is exactly 0 (a token outside the nucleus) is impossible under `probs`: p = 0,
    never a cell silently dropped."""
    if counts[probs == 0].sum() > 0:
        return 0.0
    n = counts.sum()
    expected = probs * n
    big = expected >= 5
    obs = torch.cat([counts[big].double(), counts[~big].sum().double()[None]])
    exp = torch.cat([expected[big].double(), expected[~big].sum().double()[None]])
    keep = exp > 0
    stat = ((obs[keep] - exp[keep]) ** 2 / exp[keep]).sum()
    dof = int(keep.sum()) - 1
    return float(torch.special.gammaincc(torch.tensor(dof / 2, dtype=torch.float64), stat / 2))


def target_distributions(target, prompt, vocab, sp):
    """Exact distributions of the generated tokens under the target sampled with `sp`
    (temperature, top-p): the marginals of the 2nd and 3rd, their joint [V, V], and the joint of
    the first three [V, V, V] (zero exactly where a token lies outside its context's nucleus)."""
    with torch.no_grad():
        p1 = target_probs(target(torch.tensor([prompt])).logits[0, -1], sp)
        p2_given = target_probs(target(torch.tensor([prompt + [t] for t in range(vocab)])).logits[:, -1], sp)
        seqs = torch.tensor([prompt + [a, b] for a in range(vocab) for b in range(vocab)])
        p3_given = target_probs(target(seqs).logits[:, -1], sp).reshape(vocab, vocab, vocab)
    first_two = p1[:, None] * p2_given  # P(token 1 = a, token 2 = b)
    triple = first_two[:, :, None] * p3_given  # P(token 1 = a, token 2 = b, token 3 = c)
    joint = triple.sum(0)  # P(token 2 = b, token 3 = c)
    return {"p2": joint.sum(1), "p3": joint.sum(0), "joint": joint, "first_two": first_two, "triple": triple}


def sample_tokens(engine, prompt, spec, sp, draws=1500):
    """Counts of the first three generated tokens [V, V, V] (the 2nd and 3rd drawn by verify),
    and the drafts accepted by the first verify step."""
    vocab = engine.target.vocab_size
    triples = torch.zeros(vocab, vocab, vocab)
    accepted = 0
    for i in range(draws):
        sp.seed = 1000 + i
        g = engine.generate(prompt, 3, spec, sp)
        triples[g.output_ids[0], g.output_ids[1], g.output_ids[2]] += 1
        accepted += g.steps[0].accepted
    return triples, accepted


def outside_support(triples, dist) -> int:
    """Draws where the target's probability is exactly 0: a token outside its nucleus."""
    return int(triples[dist["triple"] == 0].sum())


def pvalues(triples, dist) -> list[float]:
    """Chi-square p of the 2nd token, the 3rd, the joint of the 2nd and 3rd, and the joint of the
    1st and 2nd (a per-token test would miss a correlation between steps; the 1st-2nd joint is
    zero exactly where the 2nd token lies outside its context's nucleus). The joint of all three
    has too few draws per cell for a chi-square; the zero-count check uses it."""
    pairs = triples.sum(0)
    return [chi_square_pvalue(pairs.sum(1), dist["p2"]), chi_square_pvalue(pairs.sum(0), dist["p3"]),
            chi_square_pvalue(pairs.reshape(-1), dist["joint"].reshape(-1)),
            chi_square_pvalue(triples.sum(2).reshape(-1), dist["first_two"].reshape(-1))]


LOSSLESS_CASES = [  # spec, greedy_draft, temperature, top_p, draft vocabulary step
    ((3, 1, 4), False, 1.0, 1.0, 1),
    ((3, 1, 4), True, 1.0, 1.0, 1),
    ((2, 2, 5), False, 1.0, 1.0, 1),
    ((3, 1, 4), False, 0.7, 1.0, 2),  # colder; draft vocabulary half the target's (d2t scatter of q)
    ((2, 2, 5), False, 1.3, 0.8, 2),  # hotter, top-p, tree, small draft vocabulary
]


@pytest.mark.parametrize("spec,greedy_draft,temperature,top_p,step", LOSSLESS_CASES)
def test_sampling_is_lossless(spec, greedy_draft, temperature, top_p, step):
    """The 2nd and 3rd generated tokens (drawn by verify) follow the target's distributions:
    each marginal and their joint (a per-token test would miss a correlation between steps)."""
    vocab = 8
    target, draft = tiny_pair(vocab=vocab, hidden=32, layers=4, seed=1, draft_scale=0.5,
                              draft_vocab_step=step)
    sp = SamplingParams(temperature=temperature, top_p=top_p)
    engine = SpecEngine(target, draft, max_seq_len=64, greedy_draft=greedy_draft)
    if step > 1:
        assert engine.draft.target_ids.tolist() == list(range(0, vocab, step))  # the d2t map is used
    prompt = [1, 2, 3]
    dist = target_distributions(target, prompt, vocab, sp)
    triples, accepted = sample_tokens(engine, prompt, spec, sp)
    draws = int(triples.sum())
    assert accepted > draws * 0.1  # the test exercises acceptance, not just replacement
    assert outside_support(triples, dist) == 0  # nothing emitted where the target has p = 0
    assert min(pvalues(triples, dist)) > 1e-3, pvalues(triples, dist)


TOP_P = 0.6  # on the test pair's 8 tokens this zeroes a few tokens at every context


def top_p_sampled_draft_case(draws=1500):
    """A chain whose draft samples from q = softmax(logits / T) over the whole vocabulary while
    the target samples from its top-p nucleus: q has mass where p is 0. Returns the counts, the
    drafts accepted, the target's exact distributions and how many first drafts fell outside the
    target's nucleus."""
    vocab = 8
    target, draft = tiny_pair(vocab=vocab, hidden=32, layers=4, seed=1, draft_scale=0.5, draft_vocab_step=1)
    sp = SamplingParams(temperature=1.0, top_p=TOP_P)
    engine = SpecEngine(target, draft, max_seq_len=64)
    prompt = [1, 2, 3]
    dist = target_distributions(target, prompt, vocab, sp)
    with torch.no_grad():
        p2_given = target_probs(target(torch.tensor([prompt + [t] for t in range(vocab)])).logits[:, -1], sp)
    drafted_outside = []
    chain = engine._draft_chain

    def recording(hidden, logits, root_pos, root_tok, spec, sp_, gen):
        tree = chain(hidden, logits, root_pos, root_tok, spec, sp_, gen)
        if root_pos == len(prompt):  # the first verify step: root = token 1, draft 1 = token 2
            drafted_outside.append(float(p2_given[root_tok, tree.tokens[1]]) == 0.0)
        return tree

    engine._draft_chain = recording
    triples, accepted = sample_tokens(engine, prompt, (3, 1, 4), sp, draws=draws)
    return triples, accepted, dist, sum(drafted_outside)


def test_top_p_with_a_sampled_draft_is_lossless():
    """The draft proposes tokens the target's nucleus excludes; verification must reject every one
    (p(x) = 0) and resample from max(p - q, 0), so nothing outside the nucleus is ever emitted."""
    triples, accepted, dist, outside = top_p_sampled_draft_case()
    draws = int(triples.sum())
    assert (dist["triple"] == 0).any(), "top-p must zero some tokens for this test to mean anything"
    assert outside > draws * 0.05, f"only {outside} of {draws} first drafts fell outside the nucleus"
    assert accepted > draws * 0.1
    assert outside_support(triples, dist) == 0
    assert min(pvalues(triples, dist)) > 1e-3, pvalues(triples, dist)


@pytest.mark.parametrize("temperature,step", [(1.0, 1), (0.7, 2)])
def test_a_wrong_residual_fails_the_lossless_test(monkeypatch, temperature, step):
    """Negative control: resampling from p itself after a rejection (instead of max(p - q, 0))
    over-weights the tokens the draft proposes; the same test must catch it, at T = 1 with the
    full draft vocabulary and colder with half of it (q scattered through d2t)."""
    from eagle3lab.decoder import speculate

    vocab = 8
    target, draft = tiny_pair(vocab=vocab, hidden=32, layers=4, seed=1, draft_scale=0.5, draft_vocab_step=step)
    sp = SamplingParams(temperature=temperature)
    engine = SpecEngine(target, draft, max_seq_len=64)
    monkeypatch.setattr(speculate, "residual", lambda p, q, x: p)
    dist = target_distributions(target, [1, 2, 3], vocab, sp)
    triples, _ = sample_tokens(engine, [1, 2, 3], (3, 1, 4), sp)
    assert min(pvalues(triples, dist)) < 1e-6, pvalues(triples, dist)


def test_a_wrong_top_p_verification_fails_the_lossless_test(monkeypatch):
    """Negative control for the top-p case: verifying against the untruncated p (top-p dropped in
    verification) accepts drafts outside the nucleus. The zero-count check catches it even
    though the chi-square cells of those tokens have expected count 0."""
    from eagle3lab.decoder import speculate

    real = speculate.target_probs
    monkeypatch.setattr(speculate, "target_probs",
                        lambda logits, sp: real(logits, SamplingParams(temperature=sp.temperature, top_k=sp.top_k)))
    triples, _, dist, _ = top_p_sampled_draft_case()
    assert outside_support(triples, dist) > 0
    assert min(pvalues(triples, dist)) == 0.0


def test_a_wrong_residual_with_top_p_fails_the_lossless_test(monkeypatch):
    """Negative control: with top-p and a sampled draft, a residual of p alone (not max(p - q, 0))
    keeps every emitted token inside the nucleus but over-weights the drafted ones."""
    from eagle3lab.decoder import speculate

    monkeypatch.setattr(speculate, "residual", lambda p, q, x: p)
    triples, _, dist, _ = top_p_sampled_draft_case()
    assert outside_support(triples, dist) == 0
    assert min(pvalues(triples, dist)) < 1e-6, pvalues(triples, dist)


def test_chi_square_detects_a_wrong_distribution():
    probs = torch.tensor([0.5, 0.3, 0.2])
    counts = torch.tensor([400.0, 400.0, 200.0])
    assert chi_square_pvalue(counts, probs) < 1e-6
    # one draw where the probability is 0 is impossible, however well the rest fits
    assert chi_square_pvalue(torch.tensor([500.0, 300.0, 200.0, 1.0]), torch.tensor([0.5, 0.3, 0.2, 0.0])) == 0.0
    assert chi_square_pvalue(torch.tensor([500.0, 300.0, 200.0, 0.0]), torch.tensor([0.5, 0.3, 0.2, 0.0])) > 0.9


def test_target_probs_top_k_top_p():
    logits = torch.tensor([3.0, 2.0, 1.0, 0.0])
    p = target_probs(logits, SamplingParams(temperature=1.0, top_k=2))
    assert p[2] == 0 and p[3] == 0 and torch.isclose(p.sum(), torch.tensor(1.0))
    p = target_probs(logits, SamplingParams(temperature=1.0, top_p=0.5))
    assert p[0] == 1.0


def test_quantization_is_groupwise_and_bounded(pair):
    target, _ = pair
    lean = TargetModel(target, 64)
    before = {k: v.clone() for k, v in lean.linear_weights().items()}
    fake_quantize_(lean, 4, group_size=32)
    for name, w in lean.linear_weights().items():
        w0 = before[name]
        groups = w.reshape(w.shape[0], -1, 32)
        assert all(len(torch.unique(g)) <= 16 for g in groups[:4, 0])  # 4-bit: <= 16 levels per group
        step = w0.reshape(w0.shape[0], -1, 32).abs().amax(-1, keepdim=True) / 7
        assert ((groups - w0.reshape(groups.shape)).abs() <= step / 2 + 1e-6).all()
    fake_quantize_(TargetModel(target, 64), 8)


def test_fault_table_is_the_one_list():
    from pathlib import Path

    from eagle3lab.acceptance.diagnosis import CAUSES
    from eagle3lab.decoder.faults import EXCLUSIVE, FAULTS, NON_DRAFT_FAULTS

    assert NON_DRAFT_FAULTS == ("quant-int8", "quant-int4", "domain-shift", "long-context", "chat-template")
    assert ("embed-patch", "no-embed-patch") in EXCLUSIVE and ("quant-int4", "quant-int8") in EXCLUSIVE
    for fault in FAULTS.values():
        assert fault.causes and set(fault.causes) <= set(CAUSES), fault.name
        assert set(fault.excludes) <= set(FAULTS), fault.name
        for other in fault.excludes:  # exclusion is symmetric whichever row names it
            with pytest.raises(FaultError, match="contradict"):
                normalize_faults([fault.name, other])
    readme = (Path(__file__).resolve().parents[1] / "docs" / "usage.md").read_text()  # the CLI reference
    listed = readme.split("Lab faults (`--fault`, combinable):")[1].split("\n\n")[0]
    assert sorted(n.strip("`") for n in listed.replace("\n", " ").rstrip(".").split(", ")
                  for n in [n.strip()]) == sorted(FAULTS)


def test_served_boundaries_follow_sglang_capture_rule():
    from eagle3lab.wiring.conventions import serve_boundaries

    seed = type("D", (), {"aux_layer_ids": [1, 11, 20]})()
    assert plan_faults(["wiring-seed"], 24).boundaries(seed, 24) == [2, 12, 21]
    assert plan_faults(["embed-patch"], 24).boundaries(seed, 24) == [0, 2, 12]
    assert plan_faults([], 24).boundaries(type("D", (), {"aux_layer_ids": []})(), 24) == [2, 12, 21]
    assert serve_boundaries("sglang", "0.5.23", "LlamaForCausalLM", [-1, 1, 11], 24) == [0, 2, 12]


def test_fault_names_and_plans():
    assert normalize_faults("wiring-seed,quant-int4") == ("wiring-seed", "quant-int4")
    with pytest.raises(FaultError):
        normalize_faults(["no-such-fault"])
    with pytest.raises(FaultError):
        normalize_faults(["quant-int8", "quant-int4"])
    plan = plan_faults(["embed-patch", "normed-last", "no-d2t", "domain-shift"], 8)
    assert plan.draft_name == "seed" and plan.layer_ids == [-1, 1, 3]
    assert plan.normed_last and not plan.use_d2t and plan.prompt_kinds == ["domain-shift"]
    assert plan_faults(["wiring-seed"], 8).draft_name == "seed"
    assert plan_faults(["no-ttt"], 8).draft_name == "no-ttt"
    assert plan_faults([], 8).draft_name == "healthy"


def test_engine_rejects_a_capture_the_fc_cannot_read(pair):
    target, draft = pair
    with pytest.raises(ValueError, match="fc reads"):
        SpecEngine(target, draft, boundaries=[1, 2])


def test_stop_token_ends_generation(pair):
    target, draft = pair
    engine = SpecEngine(target, draft, max_seq_len=256)
    prompt = [1, 2, 3, 4]
    plain = engine.generate_plain(prompt, 20)
    stop = plain.output_ids[5]
    first = plain.output_ids.index(stop)
    out = engine.generate(prompt, 20, (3, 1, 4), stop_ids={stop})
    assert out.output_ids == plain.output_ids[:first + 1] and out.finish_reason == "stop"


def test_chatml_template_is_the_one_sglang_quotes():
    """QWEN2_CHATML is the Jinja text the installed sglang (0.5.23) quotes in lang/chat_template.py
    for Qwen2, and renders to that file's `qwen` ChatTemplate (read from its source, not imported:
    importing sglang costs seconds)."""
    import ast
    import importlib.util
    from pathlib import Path

    from eagle3lab.wiring.chat_templates import QWEN2_CHATML, describe

    root = Path(list(importlib.util.find_spec("sglang").submodule_search_locations)[0])
    text = (root / "lang" / "chat_template.py").read_text()
    quoted = text.split("# The chat template is: ", 1)[1].splitlines()[0][1:-1]
    assert quoted.encode().decode("unicode_escape") == QWEN2_CHATML
    qwen = next({k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg != "style"}
                for node in ast.walk(ast.parse(text))
                if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "ChatTemplate"
                and any(k.arg == "name" and ast.literal_eval(k.value) == "qwen" for k in node.keywords))
    roles = qwen["role_prefix_and_suffix"]
    rendered = (roles["system"][0] + qwen["default_system_prompt"] + roles["system"][1]
                + roles["user"][0] + "{message}" + roles["user"][1] + roles["assistant"][0])
    assert describe(QWEN2_CHATML) == repr(rendered)

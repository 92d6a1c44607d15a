"""EAGLE-3 speculative decoding at batch size 1, the way SGLang does it, with per-step stats.

Meaning of the knobs (sglang 0.5.23 `srt/speculative/eagle_worker_v2.py`, `spec_utils.py`
`select_top_k_tokens`, `eagle_utils.py` `organize_draft_results`):

* `num_steps` draft forwards per round (the first one is the "draft extend" over the tokens
  the last verify accepted; each later one feeds the previous step's hidden state back in);
* `topk` == 1: a chain of `num_steps` drafted tokens, `num_draft_tokens` = num_steps + 1
  (the verified root token included);
* `topk` > 1: a tree. Step 0 keeps the draft's top-k tokens; every later step expands each of
  the k frontier nodes by its top-k children, scores a child by the product of draft
  probabilities along its path, and keeps the k best of the k*k as the next frontier. Of all
  candidates, the best `num_draft_tokens - 1` by score are verified in ONE target pass with a
  tree attention mask (each node sees the prefix and its ancestors).

Acceptance (what the target keeps of a verified tree), in plain sight in `accept_path`:

* greedy: walk from the root, at each node take the target's argmax; if a child carries that
  token, accept it and move on, otherwise stop. The target's argmax at the last accepted node
  is the extra token (a "bonus" if the whole chain was accepted, a "replacement" otherwise).
* sampling (temperature > 0), lossless: at a node with target distribution p, try each child
  token x with draft probability q(x): accept with probability min(1, p(x) / q(x)); on
  rejection continue with the residual p <- normalize(max(p - q, 0)). A top-k (deterministic)
  draft has q one-hot, so the test is u < p(x) and the residual zeroes x: SGLang's
  `tree_speculative_sampling_target_only`. With no child accepted the token is drawn from the
  residual. Either way the emitted token is distributed exactly as p.

Per verify step we record drafted and accepted counts (`StepRecord`), so accept length
(accepted drafts + 1) and per-position acceptance come straight out of a `Generation`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from eagle3lab.decoder.forward import DraftModel, TargetModel
from eagle3lab.engines.lab.lab_capture import served_by_lab
from eagle3lab.spec import SpecParams


# --------------------------------------------------------------------------------------
# Configuration and results
# --------------------------------------------------------------------------------------
@dataclass
class SamplingParams:
    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int | None = None

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0.0 or self.top_k == 1


@dataclass
class StepRecord:
    """One verify step: `accepted` drafts (0..drafted) plus one target token."""

    step: int
    drafted: int
    accepted: int
    accepted_depths: list[int]
    draft_s: float
    verify_s: float

    @property
    def accept_len(self) -> int:
        return self.accepted + 1


@dataclass
class Generation:
    """Output of one request, with provenance of every generated token."""

    prompt_ids: list[int]
    output_ids: list[int] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)  # prefill | draft | bonus | replacement | target
    depths: list[int] = field(default_factory=list)  # draft position (1-based) of accepted drafts, else 0
    # the served target's log-probability of each output token (what SGLang's return_logprob and
    # vLLM's logprobs=0 report): an exact fingerprint of the served target, even where its
    # greedy choices equal the reference target's
    logprobs: list[float] = field(default_factory=list)
    steps: list[StepRecord] = field(default_factory=list)
    prefill_s: float = 0.0
    decode_s: float = 0.0
    finish_reason: str = "length"

    @property
    def num_verify(self) -> int:
        return len(self.steps)

    @property
    def accept_length(self) -> float:
        """Mean tokens per verify step, bonus included (SGLang's `accept len`)."""
        from eagle3lab.acceptance.stats import accept_length_of_counts

        return accept_length_of_counts(sum(s.accept_len for s in self.steps), len(self.steps))

    @property
    def tokens_per_s(self) -> float:
        total = self.prefill_s + self.decode_s
        return len(self.output_ids) / total if total > 0 else float("nan")


# --------------------------------------------------------------------------------------
# Sampling helpers
# --------------------------------------------------------------------------------------
def target_probs(logits: torch.Tensor, sp: SamplingParams) -> torch.Tensor:
    """Distribution the target samples from: temperature, then top-k, then top-p."""
    logits = logits.float() / sp.temperature
    if sp.top_k and sp.top_k > 0:
        kth = torch.topk(logits, min(sp.top_k, logits.shape[-1]), dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    if sp.top_p < 1.0:
        sorted_p, idx = probs.sort(dim=-1, descending=True)
        drop = sorted_p.cumsum(-1) - sorted_p > sp.top_p
        sorted_p = sorted_p.masked_fill(drop, 0.0)
        probs = torch.zeros_like(probs).scatter_(-1, idx, sorted_p)
        probs = probs / probs.sum(-1, keepdim=True)
    return probs


def sample(probs: torch.Tensor, gen: torch.Generator) -> int:
    return int(torch.multinomial(probs, 1, generator=gen))


# --------------------------------------------------------------------------------------
# The draft tree
# --------------------------------------------------------------------------------------
@dataclass
class DraftTree:
    """Node 0 is the root (last committed token); nodes 1.. are drafts in depth order."""

    tokens: list[int]
    parents: list[int]  # parent node of each node (-1 for the root)
    depths: list[int]
    q: list[torch.Tensor | None]  # draft distribution (target vocab) that proposed the node; None = deterministic

    def children(self) -> list[list[int]]:
        kids: list[list[int]] = [[] for _ in self.tokens]
        for node, parent in enumerate(self.parents):
            if parent >= 0:
                kids[parent].append(node)
        return kids

    def is_chain(self) -> bool:
        return all(p == i - 1 for i, p in enumerate(self.parents))

    def attention_mask(self) -> torch.Tensor:
        """bool [D, D]: node i sees node j iff j is i or an ancestor of i."""
        D = len(self.tokens)
        mask = torch.zeros(D, D, dtype=torch.bool)
        for i in range(D):
            j = i
            while j >= 0:
                mask[i, j] = True
                j = self.parents[j]
        return mask


# --------------------------------------------------------------------------------------
# The engine
# --------------------------------------------------------------------------------------
class SpecEngine:
    """Target + optional EAGLE-3 draft, batch size 1.

    target: a transformers LlamaForCausalLM or a `TargetModel`.
    draft: an `Eagle3Draft` (or `DraftModel`), or None for plain decoding only.
    boundaries: target boundaries fed to the draft's fc (default: what SGLang feeds a llama
        target for the draft's config ids, `engines.lab.capture.served_by_lab`).
    normed_last / use_d2t / greedy_draft: fault switches (see eagle3lab.decoder.faults).
    prompt_template: (prefix ids, suffix ids) put around every prompt (the chat-template fault).
    """

    def __init__(self, target, draft=None, *, boundaries: list[int] | None = None,
                 max_seq_len: int = 2048, normed_last: bool = False, use_d2t: bool = True,
                 greedy_draft: bool = False, threads: int | None = 1,
                 prompt_template: tuple[list[int], list[int]] = ((), ())):
        self.target = target if isinstance(target, TargetModel) else TargetModel(target, max_seq_len)
        self.max_seq_len = self.target.max_seq_len
        self.draft = None
        if draft is not None:
            self.draft = draft if isinstance(draft, DraftModel) else DraftModel(
                draft, self.max_seq_len, use_d2t=use_d2t)
        n = self.target.num_layers
        if boundaries is None and draft is not None:
            src = draft.source if isinstance(draft, DraftModel) else draft
            boundaries = served_by_lab(list(src.aux_layer_ids) or None, n)
        self.boundaries = tuple(sorted(set(boundaries or ())))  # capture is by layer membership
        if any(b < 0 or b > n for b in self.boundaries):
            raise ValueError(f"boundaries {list(self.boundaries)} outside 0..{n}")
        if self.draft is not None:
            width = len(self.boundaries) * self.target.hidden_size
            if width != self.draft.fc.shape[1]:
                raise ValueError(f"the draft's fc reads {self.draft.fc.shape[1]} features but capturing "
                                 f"boundaries {list(self.boundaries)} gives {width}")
        self.normed_last = normed_last
        self.greedy_draft = greedy_draft
        self.threads = threads
        self.prompt_template = (list(prompt_template[0]), list(prompt_template[1]))

    def served_prompt(self, prompt_ids) -> list[int]:
        """The ids the engine feeds for a prompt: inside the chat template's prefix and suffix
        when one is served (the chat-template fault), else the prompt itself."""
        prefix, suffix = self.prompt_template
        return prefix + list(prompt_ids) + suffix

    # -- plain decoding -------------------------------------------------------------------
    def generate_plain(self, prompt_ids, max_new_tokens: int, sampling: SamplingParams | None = None,
                       stop_ids=(), on_step=None, on_prefill=None) -> Generation:
        """Autoregressive decoding with the same target forward (the baseline)."""
        with _threads(self.threads):
            return self._generate_plain(self.served_prompt(prompt_ids), max_new_tokens, sampling, stop_ids,
                                        on_step, on_prefill)

    def generate(self, prompt_ids, max_new_tokens: int, spec=None, sampling: SamplingParams | None = None,
                 stop_ids=(), on_step=None, on_prefill=None) -> Generation:
        """Speculative decoding; output distribution equals `generate_plain`'s (see _generate)."""
        with _threads(self.threads):
            return self._generate(self.served_prompt(prompt_ids), max_new_tokens, spec, sampling, stop_ids,
                                  on_step, on_prefill)

    @torch.inference_mode()
    def _generate_plain(self, prompt_ids, max_new_tokens: int, sampling: SamplingParams | None = None,
                       stop_ids=(), on_step=None, on_prefill=None) -> Generation:
        """Autoregressive decoding with the same target forward (the baseline)."""
        sp = sampling or SamplingParams()
        gen = _generator(sp)
        out = Generation(list(prompt_ids))
        self._check_length(len(prompt_ids), max_new_tokens)
        t0 = time.perf_counter()
        logits, _ = self.target.forward(torch.tensor(prompt_ids), 0, logits_for=slice(-1, None))
        tok = self._pick(logits[-1], sp, gen)
        t1 = time.perf_counter()
        out.prefill_s = t1 - t0
        self._emit(out, [tok], ["prefill"], [0], stop_ids, _logprobs(logits[-1:], [tok]))
        if on_prefill is not None:
            on_prefill(out)
        pos = len(prompt_ids)
        while len(out.output_ids) < max_new_tokens and out.finish_reason == "length":
            logits, _ = self.target.forward(torch.tensor([tok]), pos)
            tok = self._pick(logits[-1], sp, gen)
            pos += 1
            self._emit(out, [tok], ["target"], [0], stop_ids, _logprobs(logits[-1:], [tok]))
            if on_step is not None:
                on_step(out, None)
        out.decode_s = time.perf_counter() - t1
        _trim(out, max_new_tokens)
        return out

    # -- speculative decoding ---------------------------------------------------------------
    @torch.inference_mode()
    def _generate(self, prompt_ids, max_new_tokens: int, spec=None,
                 sampling: SamplingParams | None = None, stop_ids=(), on_step=None, on_prefill=None) -> Generation:
        """Speculative decoding; output distribution equals `generate_plain`'s.

        on_step(generation, step_record) is called after every verify step (the server's
        metrics); stop_ids end the generation after the first stop token.
        """
        if self.draft is None:
            return self._generate_plain(prompt_ids, max_new_tokens, sampling, stop_ids, on_step, on_prefill)
        spec = SpecParams.of(spec)
        sp = sampling or SamplingParams()
        gen = _generator(sp)
        out = Generation(list(prompt_ids))
        self._check_length(len(prompt_ids), max_new_tokens + max(spec.drafts_per_round, spec.num_steps * spec.topk) + 1)
        t0 = time.perf_counter()
        # Prefill: target over the prompt, first token, then the draft extend over the prompt.
        prompt = torch.tensor(prompt_ids)
        logits, aux = self.target.forward(prompt, 0, capture=self.boundaries,
                                          normed_last=self.normed_last, logits_for=slice(-1, None))
        tok = self._pick(logits[-1], sp, gen)
        out.prefill_s = time.perf_counter() - t0
        self._emit(out, [tok], ["prefill"], [0], stop_ids, _logprobs(logits[-1:], [tok]))
        if on_prefill is not None:
            on_prefill(out)
        # Draft entry t pairs the target feature of token t with token t+1 (SGLang's extend).
        ext_ids = torch.cat([prompt[1:], torch.tensor([tok])])
        ext_aux = aux
        root_pos = len(prompt_ids)  # cache slot / position of the root token
        step = 0
        t1 = time.perf_counter()
        while len(out.output_ids) < max_new_tokens and out.finish_reason == "length":
            td = time.perf_counter()
            tree = self._draft(ext_ids, ext_aux, root_pos, tok, spec, sp, gen)
            tv = time.perf_counter()
            logits, aux = self._verify(tree, root_pos)
            path, extra, extra_kind = accept_path(tree, logits, sp, gen)
            self._commit(tree, path, root_pos)
            te = time.perf_counter()
            new = [tree.tokens[n] for n in path[1:]] + [extra]
            kinds = ["draft"] * (len(path) - 1) + [extra_kind]
            depths = [tree.depths[n] for n in path[1:]] + [0]
            out.steps.append(StepRecord(step, len(tree.tokens) - 1, len(path) - 1,
                                        depths[:-1], tv - td, te - tv))
            # token i of `new` is predicted at node path[i] (the extra one at the last accepted node)
            self._emit(out, new, kinds, depths, stop_ids, _logprobs(logits[path], new))
            if on_step is not None:
                on_step(out, out.steps[-1])
            ext_ids = torch.tensor(new)
            ext_aux = aux[path]
            root_pos += len(path)
            tok = extra
            step += 1
        out.decode_s = time.perf_counter() - t1
        _trim(out, max_new_tokens)
        return out

    # -- pieces -------------------------------------------------------------------------------
    def _draft(self, ext_ids, ext_aux, root_pos, root_tok, spec: SpecParams, sp, gen) -> DraftTree:
        """Draft extend over the newly accepted tokens, then the chain or tree of drafts."""
        d = self.draft
        ext_start = root_pos - ext_ids.shape[0]  # draft entry of token t+1 sits at slot t
        hidden, logits = d.step(ext_ids, d.project(ext_aux), ext_start)
        hidden, logits = hidden[-1:], logits[-1]
        if spec.is_chain:
            return self._draft_chain(hidden, logits, root_pos, root_tok, spec, sp, gen)
        return self._draft_tree(hidden, logits, root_pos, root_tok, spec)

    def _draft_chain(self, hidden, logits, root_pos, root_tok, spec, sp, gen) -> DraftTree:
        d = self.draft
        tree = DraftTree([root_tok], [-1], [0], [None])
        sample_draft = not sp.greedy and not self.greedy_draft
        for i in range(spec.drafts_per_round):
            if i > 0:
                hidden, lg = d.step(torch.tensor([tree.tokens[-1]]), hidden, root_pos + i - 1)
                logits = lg[-1]
            if sample_draft:
                q_draft = torch.softmax(logits.float() / sp.temperature, dim=-1)
                q = torch.zeros(d.vocab_size).index_add_(0, d.target_ids, q_draft)
                token = sample(q, gen)
            else:
                q, token = None, int(d.target_ids[int(logits.argmax())])
            tree.tokens.append(token)
            tree.parents.append(i)
            tree.depths.append(i + 1)
            tree.q.append(q)
        return tree

    def _draft_tree(self, hidden, logits, root_pos, root_tok, spec) -> DraftTree:
        """SGLang's top-k tree: k frontier nodes per depth, best D-1 of all candidates."""
        d, k = self.draft, spec.topk
        C = root_pos  # draft slots 0..C-1 hold committed entries
        probs = torch.softmax(logits.float(), dim=-1)
        top_p, top_i = probs.topk(k)
        # candidates: (score, draft id, parent candidate index or -1, depth)
        cand_score = list(top_p.tolist())
        cand_tok = list(top_i.tolist())
        cand_parent = [-1] * k
        cand_depth = [1] * k
        frontier = list(range(k))  # candidate indices of the current frontier
        frontier_hidden = hidden.expand(k, -1)
        slot_of: dict[int, int] = {}  # candidate index -> draft cache slot
        for i in range(1, spec.num_steps):
            start = C + (i - 1) * k
            ids = d.target_ids[torch.tensor([cand_tok[c] for c in frontier])]
            mask = torch.zeros(k, start + k, dtype=torch.bool)
            mask[:, :C] = True
            for row, c in enumerate(frontier):
                slot_of[c] = start + row
                a = c
                while a >= 0:
                    if a in slot_of:
                        mask[row, slot_of[a]] = True
                    a = cand_parent[a]
            pos = torch.full((k,), root_pos + i - 1, dtype=torch.long)
            h_out, lg = d.step(ids, frontier_hidden, start, position_ids=pos, attn_mask=mask)
            p = torch.softmax(lg.float(), dim=-1)
            cp, ci = p.topk(k, dim=-1)  # [k, k]
            scores = torch.tensor([cand_score[c] for c in frontier])[:, None] * cp
            base = len(cand_score)
            for row, c in enumerate(frontier):
                for j in range(k):
                    cand_score.append(float(scores[row, j]))
                    cand_tok.append(int(ci[row, j]))
                    cand_parent.append(c)
                    cand_depth.append(i + 1)
            best = scores.flatten().topk(k).indices
            frontier = [base + int(b) for b in best]
            frontier_hidden = h_out[best // k]
        n_keep = min(spec.num_draft_tokens - 1, len(cand_score))
        keep = sorted(torch.tensor(cand_score).topk(n_keep).indices.tolist())
        node_of = {-1: 0}
        tree = DraftTree([root_tok], [-1], [0], [None])
        for c in keep:
            if cand_parent[c] not in node_of:
                continue  # parent lost a tie; SGLang would keep an orphan, we drop it
            node_of[c] = len(tree.tokens)
            tree.tokens.append(int(d.target_ids[cand_tok[c]]))
            tree.parents.append(node_of[cand_parent[c]])
            tree.depths.append(cand_depth[c])
            tree.q.append(None)
        return tree

    def _verify(self, tree: DraftTree, root_pos: int):
        """One target pass over root + drafts; a tree gets its ancestor mask."""
        ids = torch.tensor(tree.tokens)
        if tree.is_chain():
            return self.target.forward(ids, root_pos, capture=self.boundaries, normed_last=self.normed_last)
        pos = root_pos + torch.tensor(tree.depths)
        return self.target.forward(ids, root_pos, position_ids=pos, tree_mask=tree.attention_mask(),
                                   capture=self.boundaries, normed_last=self.normed_last)

    def _commit(self, tree: DraftTree, path: list[int], root_pos: int) -> None:
        """Keep the KV of the accepted path at consecutive slots (free for a chain)."""
        if path != list(range(len(path))):
            self.target.compact_cache(root_pos, torch.tensor(path))

    def _pick(self, logits: torch.Tensor, sp: SamplingParams, gen) -> int:
        if sp.greedy:
            return int(logits.argmax())
        return sample(target_probs(logits, sp), gen)

    def _emit(self, out: Generation, tokens, kinds, depths, stop_ids, logprobs) -> None:
        for t, kind, dep, lp in zip(tokens, kinds, depths, logprobs):
            out.output_ids.append(int(t))
            out.kinds.append(kind)
            out.depths.append(dep)
            out.logprobs.append(lp)
            if t in stop_ids:
                out.finish_reason = "stop"
                return

    def _check_length(self, prompt_len: int, new: int) -> None:
        if prompt_len < 1:
            raise ValueError("empty prompt")
        if prompt_len + new + 1 > self.max_seq_len:
            raise ValueError(f"prompt of {prompt_len} tokens + {new} new exceeds the engine's "
                             f"{self.max_seq_len}-token cache")


def residual(p: torch.Tensor, q: torch.Tensor | None, x: int) -> torch.Tensor:
    """What to sample from after rejecting draft x drawn from q: max(p - q, 0), unnormalized
    (a deterministic draft, q None, is one-hot on x: p without x). This is what makes
    speculative sampling lossless (Leviathan et al. 2023, Theorem 1)."""
    if q is None:
        p = p.clone()
        p[x] = 0.0
        return p
    return (p - q).clamp_min(0.0)


def accept_path(tree: DraftTree, logits: torch.Tensor, sp: SamplingParams,
                gen: torch.Generator | None) -> tuple[list[int], int, str]:
    """Walk the verified tree: return (accepted node path from the root, extra token, its kind).

    The extra token's kind is "bonus" when the walk reached a leaf (every draft on the way was
    accepted) and "replacement" when it stopped at a rejected draft.
    """
    children = tree.children()
    preds = logits.argmax(-1).tolist() if sp.greedy else None  # target's greedy token per node
    node, path = 0, [0]
    while True:
        kids = children[node]
        if sp.greedy:
            want = preds[node]
            nxt = next((c for c in kids if tree.tokens[c] == want), None)
            if nxt is None:
                return path, want, "replacement" if kids else "bonus"
        else:
            p = target_probs(logits[node], sp)
            nxt = None
            for c in kids:
                x, q = tree.tokens[c], tree.q[c]
                q_x = 1.0 if q is None else float(q[x])
                if float(torch.rand((), generator=gen)) * q_x < float(p[x]):  # u < p(x)/q(x)
                    nxt = c
                    break
                p = residual(p, q, x)
                total = p.sum()
                if total <= 0:  # p == q exactly: any residual is fine, never reached in practice
                    p = target_probs(logits[node], sp)
                else:
                    p = p / total
            if nxt is None:
                return path, sample(p, gen), "replacement" if kids else "bonus"
        path.append(nxt)
        node = nxt


class _threads:
    """Run with n torch threads, then restore: lab-sized matmuls are fastest on one thread
    (measured 10x faster than two on a busy 2-core machine, where OpenMP threads spin)."""

    def __init__(self, n: int | None):
        self.n = n

    def __enter__(self):
        self.before = torch.get_num_threads()
        if self.n and self.n != self.before:
            torch.set_num_threads(self.n)

    def __exit__(self, *exc):
        if self.n and self.n != self.before:
            torch.set_num_threads(self.before)


def _generator(sp: SamplingParams) -> torch.Generator:
    gen = torch.Generator()
    gen.manual_seed(sp.seed if sp.seed is not None else int(torch.randint(0, 2**62, ()).item()))
    return gen


def _logprobs(logits: torch.Tensor, tokens) -> list[float]:
    """log softmax(logits[i])[tokens[i]]: the served log-probability of each emitted token."""
    lp = logits.float().log_softmax(-1)
    return [float(lp[i, int(t)]) for i, t in enumerate(tokens)]


def _trim(out: Generation, max_new_tokens: int) -> None:
    for name in ("output_ids", "kinds", "depths", "logprobs"):
        setattr(out, name, getattr(out, name)[:max_new_tokens])

"""Ask the weights: which target boundaries was this draft trained on?

The target runs once over a few prompts and every boundary b = 0..N is captured (b = N pre-norm,
plus its normed form "N*", which is what transformers' `output_hidden_states[N]` holds). The
draft's fc is linear, so fc(cat(h_a, h_b, h_c)) = W_0 h_a + W_1 h_b + W_2 h_c: each slot's
projection of each boundary is computed once, and a candidate set costs one draft step (acc@1
against the target's top token, over every position). The search is coordinate-wise (one slot at
a time over every boundary, from the sets the config implies and the default) followed by every
+-1 neighbour of the best set; not all (N+2)^3 triples.

The best set is compared with the runner-up by an exact McNemar test over positions (paired hit /
miss); positions of one window are not independent, so p is optimistic. Where a slot's
neighbours are not significantly worse the report says so. Even where none is, the set is not
exact: deeper neighbours carry more information, so a draft's loss is not lowest at the set it
was trained on (measured on three labs, docs/doctor.md); the embedding slot and a wrong set's
effect on acc@1 are what the inference gets right. So a wiring fix names exact ids only when the
weights confirm the set the config says training used; otherwise it says what they support and
prints candidate sets with the `eagle3lab bench --draft-layer-ids` command that settles them.
What an engine feeds is computed for the target's architecture, as in the static check.
The same machinery scores the vocabulary map (acc@1 with and without d2t), the rope base (the
draft's configured rope_theta against the target's) and a prompt format (templated vs raw).
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

from eagle3lab import engines
from eagle3lab.wiring.boundaries import default_boundaries
from eagle3lab.doctor.formats import DraftSpec, TargetSpec
from eagle3lab.doctor.ranking import CheckStatus
from eagle3lab.acceptance.diagnosis.findings import Finding
from eagle3lab.spec import split_engine

NORMED = "N*"
ALPHA = 0.05


def mcnemar_p(a, b) -> tuple[float, int, int]:
    """Two-sided exact McNemar p of paired bool vectors a, b (a better when n10 > n01)."""
    n10 = int((a & ~b).sum())
    n01 = int((~a & b).sum())
    n = n10 + n01
    if n == 0:
        return 1.0, n10, n01
    k = min(n10, n01)
    if n > 2000:  # normal approximation with continuity correction
        z = (abs(n10 - n01) - 1) / math.sqrt(n)
        return min(1.0, math.erfc(max(z, 0) / math.sqrt(2))), n10, n01
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n
    return min(1.0, 2 * tail), n10, n01


def _label(b, n) -> str:
    return NORMED if b == n + 1 else f"b{b}"


def _set_label(s, n) -> str:
    return "[" + ", ".join(_label(b, n) for b in s) + "]"


class Scorer:
    """acc@1 and loss of a draft for any set of boundaries, from one capture of the target."""

    def __init__(self, target, draft, windows, vocab_ids=None, boundaries=None):
        import torch

        from eagle3lab.wiring.capture import capture, decoder_parts

        self.draft = draft
        _, layers, norm = decoder_parts(target)
        self.n = len(layers)
        x = torch.tensor(windows)
        with torch.no_grad():
            states = capture(target, x, range(self.n + 1))
            states[self.n + 1] = norm(states[self.n])
            logits = target.lm_head(states[self.n + 1])
        h = states[0].shape[-1]
        w = draft.fc.weight.detach()
        self.slots = w.shape[1] // h
        t = x.shape[1]
        self.m = t - 1
        with torch.no_grad():
            keep = states if boundaries is None else set(boundaries)  # only these sets will be scored
            self.proj = {(s, b): states[b][:, :self.m] @ w[:, s * h:(s + 1) * h].T
                         for s in range(self.slots) for b in states if b in keep}
        self.ids = x[:, 1:]
        self.positions = torch.arange(self.m)[None].expand(x.shape[0], -1)
        self.teacher = logits[:, 1:]  # row t predicts token t+2 for root t
        self.label_full = self.teacher.argmax(-1)
        self.vocab_ids = draft.target_ids if vocab_ids is None else vocab_ids
        self.cache = {}
        self._label_cache = {}

    @property
    def positions_scored(self) -> int:
        return int(self.ids.numel())

    def _labels(self, vocab_ids, rows):
        key = (id(vocab_ids), rows)
        if key not in self._label_cache:
            self._label_cache[key] = self.teacher[:rows][..., vocab_ids].argmax(-1)
        return self._label_cache[key]

    def score(self, boundaries, vocab_ids=None, key=None, rows=None):
        """(acc@1, mean loss, hit vector, loss vector) of the draft fed `boundaries` in slot order,
        over the first `rows` windows (all by default). Loss: cross-entropy against the target's
        top token within the draft vocabulary (the argmax-teacher training loss)."""
        import torch
        import torch.nn.functional as F

        rows = rows or self.ids.shape[0]
        cache_key = (tuple(boundaries), key, rows)
        if cache_key in self.cache:
            return self.cache[cache_key]
        vocab_ids = self.vocab_ids if vocab_ids is None else vocab_ids
        with torch.no_grad():
            hidden = sum(self.proj[(s, b)][:rows] for s, b in enumerate(boundaries))
            _, logits = self.draft.step(self.ids[:rows], hidden, self.positions[:rows])
            hits = (vocab_ids[logits.argmax(-1)] == self.label_full[:rows]).flatten()
            losses = F.cross_entropy(logits.flatten(0, 1), self._labels(vocab_ids, rows).flatten(),
                                     reduction="none")
        out = (float(hits.float().mean()), float(losses.mean()), hits, losses)
        self.cache[cache_key] = out
        return out

    def scored(self, rows=None) -> dict:
        """{boundaries: mean loss} of every plain set scored over `rows` windows."""
        rows = rows or self.ids.shape[0]
        return {k[0]: v[1] for k, v in self.cache.items() if k[1] is None and k[2] == rows}


def search(scorer: Scorer, starts: list[list[int]], max_passes: int = 3, screen_positions: int = 500) -> dict:
    """Coordinate search on a screening subset of the windows: from the best start, each slot over
    every boundary once, then each slot over its +-2 neighbours until nothing improves, then every
    +-1 neighbour of the best set jointly. The five best screened sets are rescored on all windows."""
    from itertools import product

    n, k = scorer.n, scorer.slots
    rows = max(1, min(scorer.ids.shape[0], screen_positions // scorer.m))
    starts = [list(s) for s in starts if len(s) == k and all(0 <= b <= n + 1 for b in s)]
    loss = lambda s, r=rows: scorer.score(s, rows=r)[1]  # noqa: E731
    best = min(starts, key=loss) if starts else default_boundaries(n)[:k]

    def sweep(best, options):
        changed = False
        for slot in range(k):
            for b in options(best[slot]):
                trial = best[:slot] + [b] + best[slot + 1:]
                if 0 <= b <= n + 1 and loss(trial) < loss(best) - 1e-12:
                    best, changed = trial, True
        return best, changed

    best, _ = sweep(best, lambda b: range(n + 2))  # 0..N pre-norm, N+1 = normed N
    for _ in range(max_passes):
        best, changed = sweep(best, lambda b: range(b - 2, b + 3))
        if not changed:
            break
    for delta in product((-1, 0, 1), repeat=k):
        trial = [b + d for b, d in zip(best, delta)]
        if all(0 <= b <= n + 1 for b in trial):
            loss(trial)
    screened = sorted(scorer.scored(rows).items(), key=lambda kv: kv[1])[:5]
    best = min((list(s) for s, _ in screened), key=lambda s: loss(s, None))
    return {"best": best, "screen_rows": rows}


def paired_loss_p(a, b, windows: int, n_perm: int = 2000) -> float:
    """Two-sided p that per-position losses a and b (window-major, `windows` equal windows) have
    the same mean: a sign-flip permutation test over per-window mean differences. Positions of one
    window are not independent; windows are, so the test is over windows."""
    import torch

    d = (b - a).double().view(windows, -1).mean(dim=1)
    observed = abs(float(d.mean()))
    if observed == 0:
        return 1.0
    gen = torch.Generator().manual_seed(0)
    signs = torch.randint(0, 2, (n_perm, windows), generator=gen).double() * 2 - 1
    null = (signs * d).mean(dim=1).abs()
    return float(((null >= observed - 1e-15).sum() + 1) / (n_perm + 1))


def slot_uncertainty(scorer: Scorer, best: list[int], reach: int = 2) -> list[dict]:
    """Per slot: the boundaries near it (+-reach, the embedding, the last pre- and post-norm) that,
    swapped in alone, do not have a significantly higher loss than the best over all positions."""
    _, _, _, losses = scorer.score(best)
    n = scorer.n
    rows = []
    for slot in range(scorer.slots):
        tied = []
        near = set(range(best[slot] - reach, best[slot] + reach + 1)) | {0, n, n + 1}
        for b in sorted(near):
            if b == best[slot] or not 0 <= b <= n + 1:
                continue
            trial = best[:slot] + [b] + best[slot + 1:]
            _, loss, _, other = scorer.score(trial)
            p = paired_loss_p(losses, other, scorer.ids.shape[0])
            if p >= ALPHA:
                tied.append((b, loss, p))
        rows.append({"slot": slot, "best": best[slot], "tied": tied})
    return rows


# --------------------------------------------------------------------------- inputs


def _available_bytes() -> int:
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except ImportError:
        import os

        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def _read_prompts(prompts) -> list[str]:
    """--prompts as a list of texts (`doctor.prompts.read_prompts`: a file is read once, with
    the lines it could not use counted)."""
    from eagle3lab.doctor.prompts import read_prompts

    return read_prompts(prompts) or []


GENERIC_PROMPTS = ("def ", "The ", "import ", "# ", "In ", "class ", "1, 2, 3, ", "Hello")


def _texts(target_dir: Path, tokenizer, target, prompts, seq_len: int, n_prompts: int = 24):
    """Token sequences to score on, in the draft's training distribution: the target's greedy
    continuations (EAGLE-3 drafts learn the target's own predictions) of the user's prompts, else
    of the lab's held-out passages (next to a lab target), else of short generic prompts."""
    import torch

    from eagle3lab.lab.target import greedy_continue

    user = _read_prompts(prompts)
    heldout = target_dir.parent / "heldout.jsonl"
    if user:
        source = f"{getattr(user, 'source', 'your prompts')}, continued greedily by the target"
    elif heldout.is_file():
        user = [json.loads(line)["text"] for line in heldout.read_text().splitlines() if line.strip()]
        source = f"held-out passages ({heldout.name}), continued greedily by the target"
    else:
        user = list(GENERIC_PROMPTS)
        source = "the target's greedy continuations of short generic prompts (pass --prompts for your traffic)"
    prompt_len = seq_len // 4
    ids = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in user]
    long = [i[:prompt_len] for i in ids if len(i) >= prompt_len][:n_prompts]
    docs = []
    if long:
        for i in range(0, len(long), 8):
            docs += greedy_continue(target, torch.tensor(long[i:i + 8]), seq_len - prompt_len).tolist()
    else:
        for i in ids[:n_prompts]:
            docs.append(greedy_continue(target, torch.tensor([i or [0]]), seq_len - len(i or [0]))[0].tolist())
    return docs, source


def _windows(docs: list[list[int]], seq_len: int, max_positions: int) -> list[list[int]]:
    limit = max(1, max_positions // (seq_len - 1))
    wins = [d[:seq_len] for d in docs if len(d) >= seq_len]
    return wins[:limit]


def _load_target(tspec: TargetSpec):
    import warnings

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = AutoModelForCausalLM.from_pretrained(str(tspec.path), dtype=torch.float32).eval()
        tok = AutoTokenizer.from_pretrained(str(tspec.path))
    return model, tok


def _load_draft(spec: DraftSpec, target):
    """(draft, None), or (None, why the lab cannot load it): a draft that will not load is a check
    that could not run, never an exception that loses the static findings."""
    from eagle3lab.decoder.draft import CHECKPOINT_FILE, Eagle3Draft

    files = sorted(p.name for p in spec.path.glob("*.safetensors"))
    if CHECKPOINT_FILE not in files:
        what = f"{len(files)} safetensors files ({', '.join(files[:3])}{', ...' if len(files) > 3 else ''})" \
            if files else "no safetensors file"
        return None, (f"the lab loads a draft from one {CHECKPOINT_FILE}; {spec.path} has {what}: "
                      "merge the shards to run the empirical checks")
    try:
        draft = Eagle3Draft.from_pretrained(spec.path, embed_weight=target.get_input_embeddings().weight.detach())
    except Exception as exc:  # a user's checkpoint can fail in torch, safetensors or our own checks
        return None, (f"the lab cannot load this draft ({type(exc).__name__}: "
                      f"{str(exc).splitlines()[0][:200] if str(exc) else 'no message'})")
    return draft, None


# --------------------------------------------------------------------------- the checks


def empirical_checks(spec: DraftSpec, tspec: TargetSpec | None, serve, *, prompts=None, max_positions=2000,
                     memory_budget_bytes=None, static=()) -> tuple[list[Finding], list[CheckStatus], dict]:
    name = "empirical wiring"
    if tspec is None:
        return [], [CheckStatus(name, False, "no target given (--target): nothing to run")], {}
    if spec.layout == "speculators":  # the other layout (doctor.formats reads two)
        return [], [CheckStatus(name, False, f"{spec.layout} layout: the lab loads SGLang-layout drafts only; "
                                "run on the SGLang/SpecForge export")], {}
    need = 2 * tspec.parameter_bytes + 2 ** 28  # float32 copy of a (b)f16 checkpoint, plus activations
    budget = memory_budget_bytes or _available_bytes() // 2
    if need > budget:
        return [], [CheckStatus(name, False, f"target needs ~{need / 2**30:.1f} GiB as float32, "
                                f"this machine offers {budget / 2**30:.1f} GiB: run the doctor where the target fits")], {}
    t0 = time.perf_counter()
    try:
        target, tokenizer = _load_target(tspec)
    except Exception as exc:  # transformers raises many types for an unloadable model
        return [], [CheckStatus(name, False, f"transformers cannot load the target ({type(exc).__name__}: {exc})")], {}
    draft, why = _load_draft(spec, target)
    if draft is None:
        return [], [CheckStatus(name, False, why)], {}
    seq_len = min(128, int(spec.get("max_position_embeddings") or 128))
    docs, text_source = _texts(tspec.path, tokenizer, target, prompts, seq_len,
                               n_prompts=max(1, max_positions // (seq_len - 1)))
    windows = _windows(docs, seq_len, max_positions)
    if not windows:
        return [], [CheckStatus(name, False, f"no text of {seq_len} tokens to score on ({text_source})")], {}
    try:
        scorer = Scorer(target, draft, windows)
        scorer.score(default_boundaries(scorer.n)[:scorer.slots])
    except (RuntimeError, ValueError, IndexError) as exc:  # shapes the draft and target do not share
        return [], [CheckStatus(name, False, f"the draft does not run on this target's hidden states "
                                f"({type(exc).__name__}: {str(exc).splitlines()[0][:200]})")], {}
    n = scorer.n
    facts = {"empirical_positions": scorer.positions_scored, "empirical_text": text_source}
    findings = []
    fed = _fed_sets(spec, n, serve, tspec.arch)
    found = _infer_wiring(scorer, fed, spec, n, serve, facts, tspec.arch, tspec)
    findings += found
    findings += _vocab_map(scorer, found[0].data["best"] if found else None, spec, facts)
    findings += _rope(scorer, found[0].data["best"] if found else None, tspec, draft, facts)
    facts["empirical_wiring_seconds"] = round(time.perf_counter() - t0, 2)
    checks = [CheckStatus(name, True, f"{scorer.positions_scored} positions of {text_source}; "
                          f"{facts['candidates_scored']} candidate sets", facts["empirical_wiring_seconds"])]
    f, c = prompt_format(target, tokenizer, draft, found[0].data["best"] if found else None, spec, tspec,
                         prompts, seq_len, facts,
                         n_prompts=max(2, min(FORMAT_PROMPTS, max_positions // FORMAT_NEW_TOKENS)))
    return findings + f, checks + [c], facts


def _fed_sets(spec, n, serve, arch) -> dict:
    """Engine label -> the boundaries it feeds for the target's architecture (the static check's
    rule, recomputed here)."""
    from eagle3lab.wiring.boundaries import CaptureError, ConventionError
    from eagle3lab.wiring.conventions import serve_boundaries
    from eagle3lab.doctor.static import parse_serve

    out = {}
    for engine, version in parse_serve(serve):
        ids, key = spec.layer_ids(engine)
        try:
            out[f"{engine}=={version}"] = list(serve_boundaries(engine, version, arch, ids, n, key))
        except (CaptureError, ConventionError):
            continue
    return out


MATERIAL_ACC_DROP = 0.05  # an acc@1 loss this large (absolute) is a fault worth fixing
CANDIDATES = 3  # candidate sets printed to settle by serving
# What the inference got right on the lab's 9 drafts (docs/doctor.md, "How exact the inference
# is"): whether a slot reads the embedding, every time; the other slots only within 5 layers.
EXACTNESS_NOTE = ("on the lab's 9 drafts the lowest-loss set named the embedding slot right every time but "
                  "missed the other trained boundaries by up to 5 layers, docs/doctor.md")


def _infer_wiring(scorer: Scorer, fed: dict, spec: DraftSpec, n: int, serve, facts, arch: str,
                  tspec: TargetSpec) -> list[Finding]:
    from eagle3lab.doctor.static import trained_boundaries

    trained, _, recorded = trained_boundaries(spec, n, arch)
    trained_how = "recorded" if recorded else "assumed by the trainer's convention"
    starts = list(fed.values()) + [default_boundaries(n), [0, 2, n // 2]] + ([list(trained)] if trained else [])
    best = search(scorer, starts)["best"]
    for _ in range(4):  # the scan around the best may find a set of lower loss: move there
        uncertainty = slot_uncertainty(scorer, best)
        lowest = min(scorer.scored().items(), key=lambda kv: kv[1])[0]
        if list(lowest) == best:
            break
        best = list(lowest)
    acc, loss, hits, losses = scorer.score(best)
    ranked = sorted((l, s) for s, l in scorer.scored().items() if list(s) != best)
    runner = list(ranked[0][1]) if ranked else None
    facts["candidates_scored"] = len({k[0] for k in scorer.cache if k[1] is None})
    ties = [u for u in uncertainty if u["tied"]]
    # Singled out only when the weights confirm the set the config says training used and no
    # single-slot neighbour ties: statistics alone never made the lowest-loss set exact on the lab.
    singled_out = not ties and trained is not None and list(best) == sorted(trained)
    facts["inferred"] = {"best": _set_label(best, n), "acc1": round(acc, 4), "loss": round(loss, 4),
                         "singled_out": singled_out,
                         "tied": {u["slot"]: [_label(b, n) for b, _, _ in u["tied"]] for u in ties}}
    evidence = [f"lowest loss {_set_label(best, n)}: loss {loss:.3f}, acc@1 {acc:.3f} over "
                f"{scorer.positions_scored} positions ({facts['candidates_scored']} sets scored)"]
    if runner is not None:
        r_acc, r_loss, _, r_losses = scorer.score(runner)
        p = paired_loss_p(losses, r_losses, scorer.ids.shape[0])
        facts["inferred"].update(runner_up=_set_label(runner, n), runner_up_loss=round(r_loss, 4), p=p)
        evidence.append(f"next {_set_label(runner, n)}: loss {r_loss:.3f} (+{r_loss - loss:.3f}, paired "
                        f"sign-flip test over {scorer.ids.shape[0]} windows p = {p:.2g}), acc@1 {r_acc:.3f}")
    for u in ties:
        evidence.append(f"slot {u['slot']}: {_label(u['best'], n)} indistinguishable from "
                        + ", ".join(f"{_label(b, n)} (p={p:.2g})" for b, _, p in u["tied"]))
    out = []
    for label, boundaries in fed.items():
        f_acc, f_loss, f_hits, f_losses = scorer.score(boundaries)
        p_acc, _, _ = mcnemar_p(hits, f_hits)
        drop = acc - f_acc
        line = (f"{label} feeds {list(boundaries)}: loss {f_loss:.3f}, acc@1 {f_acc:.3f} "
                f"({-drop:+.3f} vs the lowest-loss set, McNemar p = {p_acc:.2g})")
        engine, version = split_engine(label)
        if drop < MATERIAL_ACC_DROP or p_acc >= ALPHA:
            out.append(Finding("wiring", "info", f"{label} feeds {list(boundaries)}: the draft's weights agree "
                               f"(within {MATERIAL_ACC_DROP:.2f} acc@1 of the best set found)",
                               "; ".join(evidence + [line]), "none needed", 0.8, "empirical", "empirical wiring",
                               data={"best": best, "fed": list(boundaries)}))
            continue
        key = spec.layer_ids(engine)[1]
        candidates = wiring_candidates(scorer, best, trained, trained_how, engine, version, arch, n, key,
                                       exclude=[list(boundaries)])
        fix = (_exact_fix(best, engine, version, arch, n, key) if singled_out
               else candidates_fix(best, uncertainty, n, candidates, engine, tspec.path, spec.path))
        given = serve is not None
        out.append(Finding(
            "wiring", "error" if given else "warning",
            f"{'' if given else 'if served by '}{label} feeds {list(boundaries)}; the draft's weights score "
            f"best near {_set_label(best, n)}", "; ".join(evidence + [line]), fix, 0.9 if not ties else 0.8,
            "empirical", "empirical wiring",
            data={"best": best, "fed": list(boundaries), "acc_best": acc, "acc_fed": f_acc,
                  "singled_out": singled_out, "candidates": candidates}))
    if not out:
        note = " (nearby boundaries are not told apart)" if ties else ""
        out.append(Finding("wiring", "info", f"the draft's weights score best near {_set_label(best, n)}{note}",
                           "; ".join(evidence), "", 0.8, "empirical", "empirical wiring", data={"best": best}))
    return sorted(out, key=lambda f: f.rank_key)


def _servable_ids(boundaries, engine, version, arch, n, key) -> tuple[list[int] | None, bool]:
    """(ids that make the engine feed `boundaries`, whether SGLang's embedding patch is needed);
    (None, False) when no ids do."""
    from eagle3lab.wiring.boundaries import CaptureError, ConventionError
    from eagle3lab.wiring.conventions import ids_for

    for patched in engines.patch_options(engine):
        try:
            return ids_for(list(boundaries), engine, version, arch, n, key, patched=patched), patched
        except (CaptureError, ConventionError):
            continue
    return None, False


def wiring_candidates(scorer: Scorer, best, trained, trained_how, engine, version, arch, n, key,
                      exclude=(), limit: int = CANDIDATES) -> list[dict]:
    """Boundary sets worth serving to settle the wiring, most plausible first: the set the config
    says training used (recorded, or its trainer's convention), then the servable sets of lowest
    loss (ascending, distinct, no post-norm state). Each with the ids that serve it."""
    sets = [(sorted(trained), f"training's set, {trained_how}")] if trained else []
    for s, _ in sorted(scorer.scored().items(), key=lambda kv: kv[1]):
        s = list(s)
        if s == sorted(s) and len(set(s)) == len(s) and all(b <= n for b in s):
            sets.append((s, "lowest loss" if s == list(best) else "low loss"))
    out, seen = [], [list(e) for e in exclude]
    for boundaries, why in sets:
        if boundaries in seen:
            continue
        seen.append(boundaries)
        ids, patched = _servable_ids(boundaries, engine, version, arch, n, key)
        if ids is None:
            continue
        acc1, loss = scorer.score(boundaries)[:2]
        out.append({"boundaries": boundaries, "ids": ids, "patched": patched, "why": why,
                    "loss": round(loss, 4), "acc1": round(acc1, 4)})
        if len(out) == limit:
            break
    return out


def bench_command(engine: str, target, draft, ids) -> str:
    """The command that serves the draft with other ids (a temporary copy of its config)."""
    import shlex

    return (f"eagle3lab bench --backend {engine} --model-path {shlex.quote(str(target))} "
            f"--draft {shlex.quote(str(draft))} --draft-layer-ids={','.join(map(str, ids))}")


def candidates_fix(best, uncertainty, n, candidates, engine, target, draft) -> str:
    """The fix when the weights do not single out one set: what they do say (which slot reads the
    embedding; the neighbourhood, with the ties), and the commands that settle the rest."""
    embed = [u["slot"] for u in uncertainty if u["best"] == 0 and not u["tied"]]
    slots = []
    for u in uncertainty:
        if u["slot"] in embed:
            continue
        tied = [_label(b, n) for b, _, _ in u["tied"]]
        slots.append(f"slot {u['slot']} near {_label(u['best'], n)}"
                     + (f" (not told apart from {', '.join(tied)})" if tied else ""))
    known = (f"slot {embed[0]} reads the embedding (b0)" if embed
             else "no slot reads the embedding" if all(u["best"] != 0 and all(b != 0 for b, _, _ in u["tied"])
                                                      for u in uncertainty)
             else "whether a slot reads the embedding is not settled")
    text = (f"the weights do not single out one set: {EXACTNESS_NOTE}. They say: {known}; "
            + "; ".join(slots) + ".")
    if not candidates:
        return text + (" No ascending set of pre-norm boundaries near it can be served: retrain on boundaries "
                       f"{engine} can feed")
    text += " Serve each candidate and keep the one with the highest accept length:"
    for c in candidates:
        patch = " (after `eagle3lab patch sglang --apply`: id -1 is the embedding)" if c["patched"] else ""
        text += (f"\n     {c['boundaries']} ({c['why']}; loss {c['loss']:.3f}){patch}: "
                 + bench_command(engine, target, draft, c["ids"]))
    return text


def _exact_fix(best, engine, version, arch, n, key) -> str:
    from eagle3lab.doctor.static import _fix_text

    if best != sorted(best) or any(b > n for b in best):
        return ("the best set is out of ascending order or uses the post-norm last state: no ids serve it; "
                "retrain on boundaries the engine can feed")
    return _fix_text(sorted(best), engine, version, arch, n, key) + " (the weights confirm training's set)"


def _vocab_map(scorer: Scorer, best, spec: DraftSpec, facts) -> list[Finding]:
    import torch

    if best is None:
        return []
    with_map, _, h1, _ = scorer.score(best)
    identity = torch.arange(scorer.vocab_ids.numel())
    without, _, h0, _ = scorer.score(best, vocab_ids=identity, key="identity")
    p, _, _ = mcnemar_p(h1, h0)
    facts["vocab_map"] = {"acc1_with_d2t": round(with_map, 4), "acc1_without_d2t": round(without, 4), "p": p}
    text = (f"acc@1 {with_map:.3f} reading draft ids through d2t vs {without:.3f} reading them as target ids "
            f"(p = {p:.2g})")
    if without > with_map and p < ALPHA:
        return [Finding("vocab_mapping", "error", "the draft's d2t map makes it worse than no map", text,
                        "re-export d2t from the training run's vocab mapping", 0.9, "empirical", "vocab map")]
    if torch.equal(scorer.vocab_ids, identity):
        return [Finding("vocab_mapping", "info", "no vocabulary map in use (identity)", text, "", 0.6,
                        "empirical", "vocab map")]
    return [Finding("vocab_mapping", "info", "the vocabulary map helps: serve it (an engine that drops d2t "
                    "loses the difference)", text, "make sure the engine loads d2t", 0.8, "empirical", "vocab map")]


def _rope(scorer: Scorer, best, tspec: TargetSpec, draft, facts) -> list[Finding]:
    from eagle3lab.decoder.draft import RotaryEmbedding

    theirs = tspec.rope["rope_theta"]
    attn = draft.midlayer.self_attn
    mine = float(draft.config.get("rope_theta", 10000.0))
    if best is None or theirs is None or theirs == mine:
        return []
    as_config, _, h_cfg, _ = scorer.score(best)
    saved = attn.rotary
    attn.rotary = RotaryEmbedding(attn.head_dim, theirs)
    try:
        as_target, _, h_tgt, _ = scorer.score(best, key=f"rope {theirs}")
    finally:
        attn.rotary = saved
    p, _, _ = mcnemar_p(h_tgt, h_cfg)
    facts["rope"] = {"acc1_config_theta": round(as_config, 4), "acc1_target_theta": round(as_target, 4), "p": p}
    text = (f"acc@1 {as_config:.3f} with the draft's rope_theta {mine:g} vs {as_target:.3f} with the target's "
            f"{theirs:g} (p = {p:.2g})")
    if as_target > as_config and p < ALPHA:
        return [Finding("rope", "error", f"the draft predicts better with rope_theta {theirs:g} than with its "
                        f"configured {mine:g}", text, f"set the draft's rope_theta to {theirs:g}", 0.9,
                        "empirical", "rope")]
    return [Finding("rope", "info", "the draft's configured rope_theta is not worse than the target's", text,
                    "", 0.6, "empirical", "rope")]


# --------------------------------------------------------------------------- prompt format

FORMAT_PROMPTS = 24  # user prompts scored per format (at most)
FORMAT_NEW_TOKENS = 64  # greedy continuation scored per prompt


def prompt_format(target, tokenizer, draft, best, spec: DraftSpec, tspec: TargetSpec, prompts, seq_len: int,
                  facts, n_prompts: int = FORMAT_PROMPTS) -> tuple[list[Finding], CheckStatus]:
    """acc@1 of the draft on the user's prompts as served (rendered with the target's chat template)
    vs as trained (the draft's recorded training template, raw text when none is recorded), each
    continued greedily by the target and scored on the continuation only (where an engine drafts).
    Prompts are paired, so the test is a sign-flip test over per-prompt acc@1 differences."""
    from eagle3lab.wiring.chat_templates import TemplateError, describe, template_text

    name = "prompt format"
    try:
        served = template_text(tspec.tokenizer_config.get("chat_template")) or ""
        recorded = spec.provenance.get("chat_template")
        trained = template_text(recorded) or ""
    except TemplateError as exc:
        return [], CheckStatus(name, False, str(exc))
    how = "recorded" if recorded is not None else "assumed: none recorded"
    if best is None:
        return [], CheckStatus(name, False, "no boundaries to feed the draft (the wiring inference found none)")
    if served.strip() == trained.strip():
        return [], CheckStatus(name, False, f"served as trained ({describe(served)}, {how}): nothing to compare")
    if not prompts:
        return [], CheckStatus(name, False, "give --prompts (your prompts as sent) to compare the target's chat "
                               "template with the draft's training format")
    try:
        acc, hits = {}, {}
        for label, template in (("trained", trained), ("served", served)):
            acc[label], hits[label] = _format_acc(target, tokenizer, draft, best, template, prompts, seq_len,
                                                  n_prompts)
    except TemplateError as exc:
        return [], CheckStatus(name, False, str(exc))
    if hits["served"] is None:
        return [], CheckStatus(name, False, "fewer than 2 prompts of 4 tokens or more in --prompts")
    rows = hits["served"].shape[0]
    p = paired_loss_p(hits["trained"].flatten(), hits["served"].flatten(), rows)
    facts["prompt_format"] = {"acc1_served": round(acc["served"], 4), "acc1_trained": round(acc["trained"], 4),
                              "p": p, "prompts": rows, "positions": int(hits["served"].numel()),
                              "served": describe(served), "trained": describe(trained), "trained_how": how}
    text = (f"acc@1 {acc['served']:.3f} on your prompts as served (target's chat template {describe(served)}) vs "
            f"{acc['trained']:.3f} as trained ({describe(trained)}, {how}); {rows} prompts x "
            f"{hits['served'].shape[1]} continuation tokens, paired sign-flip test over prompts p = {p:.2g}")
    status = CheckStatus(name, True, f"{rows} prompts in two formats")
    drop = acc["trained"] - acc["served"]
    if drop >= MATERIAL_ACC_DROP and p < ALPHA:
        fix = ("serve the prompts in the training format (raw: send text to /generate or /v1/completions, "
               "not through the chat template)" if not trained else "serve the prompts in the training template")
        return [Finding("template", "error", "your prompts as served (the target's chat template) are drafted worse "
                        "than in the draft's training format", text,
                        fix + ", or retrain the draft on data rendered with the served template", 0.85,
                        "empirical", name, data=dict(facts["prompt_format"]))], status
    title = ("your prompts as served are drafted no worse than in the training format" if drop <= 0 else
             f"the served chat template costs no material acc@1 (less than {MATERIAL_ACC_DROP:.2f}, or p >= {ALPHA})")
    return [Finding("template", "info", title, text, "", 0.6, "empirical", name,
                    data=dict(facts["prompt_format"]))], status


def _format_acc(target, tokenizer, draft, best, template, prompts, seq_len, n_prompts):
    """(acc@1, hits [prompts, tokens]) of the draft fed `best` on the target's greedy continuations
    of the prompts in one format; only continuation positions count."""
    import torch

    from eagle3lab.wiring.chat_templates import template_parts, wrap
    from eagle3lab.lab.target import greedy_continue

    ids = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in _read_prompts(prompts)]
    ids = [i for i in ids if len(i) >= 4]
    if len(ids) < 2:
        return None, None
    prompt_len = min(seq_len // 4, min(len(i) for i in ids[:n_prompts]))
    parts = template_parts(tokenizer, template)
    seqs = torch.tensor([wrap(i[:prompt_len], parts) for i in ids[:n_prompts]])
    with torch.no_grad():
        docs = torch.cat([greedy_continue(target, seqs[i:i + 8], FORMAT_NEW_TOKENS)
                          for i in range(0, len(seqs), 8)])
    scorer = Scorer(target, draft, docs.tolist(), boundaries=best)
    hits = scorer.score(best)[2].view(len(docs), -1)[:, seqs.shape[1] - 1:].float()
    return float(hits.mean()), hits

"""`diagnose()`: rank likely causes of a low accept length from observed statistics.

The rules live in `rules.py` as tables (the rate rules) and small functions (the config
adjustment, the draft's own rollout, the exact replay tests, context length); this module
gathers the evidence each reads and merges the findings: one per cause, by weight (an order,
not probabilities).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from eagle3lab.acceptance.diagnosis.cause_rules import (REASONS, THRESHOLDS, RateEvidence, context_boost, finding,
                                       fmt, walk)
from eagle3lab.acceptance.diagnosis.findings import Finding
from eagle3lab.acceptance.predict import as_accuracy
from eagle3lab.acceptance.stats import (StatsError, acceptance_by_context, accept_length,
                             accept_length_from_rates, accepted_counts, conditional_rates,
                             per_position as _per_position_table, sign_test, unconditional_rates)


def _as_rates(per_position_) -> np.ndarray | None:
    if per_position_ is None:
        return None
    if isinstance(per_position_, pd.DataFrame):
        return per_position_["rate"].to_numpy(float)
    return np.asarray(per_position_, dtype=float)


def acceptance_signature(rates, standalone_acc=None) -> dict:
    """The numbers the diagnosis rules read: position-1 rate, tail/first ratio, served/standalone.

    keep1 = c_1 / acc@1; keep = mean over known positions of c_i / acc@i (standalone acc
    beyond the evaluated depth is taken as flat, the way a single acc@1 is usually read);
    tail_drop = tail / c_1, tail = acceptance at positions 2..k pooled by how often each is
    reached (sum r_i / sum r_{i-1}, i >= 2), so rarely reached positions do not swing it.
    """
    rates = np.nan_to_num(np.asarray(rates, dtype=float))
    acc = as_accuracy(standalone_acc)
    c1 = float(rates[0])
    # pooled acceptance beyond position 1: each position weighted by how often it is reached
    reached = unconditional_rates(np.concatenate([[1.0], rates]))  # r_0 = 1, r_1, ..., r_k
    tail = float(reached[2:].sum() / reached[1:-1].sum()) if len(rates) > 1 and reached[1] > 0 else c1
    sig = {"c1": c1, "tail": tail, "tail_drop": tail / c1 if c1 > 0 else 1.0,
           "accept_len_model": accept_length_from_rates(rates),
           "keep1": None, "keep": None, "keep_spread": None}
    if acc is not None and len(acc):
        full = np.concatenate([acc, np.full(max(len(rates) - len(acc), 0), acc[-1])])[:len(rates)]
        ratio = rates / np.maximum(full, 1e-9)
        sig.update(keep1=float(ratio[0]), keep=float(np.mean(ratio)),
                   keep_spread=float(np.std(ratio)), acc1=float(acc[0]),
                   accept_len_standalone=accept_length_from_rates(full))
    return sig


def diagnose(observation=None, *, per_position=None, accept_len: float | None = None,
             standalone_acc=None,
             requested_draft_tokens: int | None = None,
             effective_draft_tokens: int | None = None,
             context_lengths=None, steps: pd.DataFrame | None = None,
             standalone_acc_served=None, temperature: float | None = None,
             depth: int | None = None, draft_max_context: int | None = None,
             replay: dict | None = None) -> list[Finding]:
    """Rank likely causes of a low accept length from observed statistics (by the rules' weights:
    an order, not probabilities).

    observation: an `eagle3lab.sources.Observation` (a log, meta_info or the lab engine read
    back); it supplies whatever of the arguments below it carries (per-position rates, made
    conditional if the source's are not; accept length; requested and effective draft tokens,
    the effective ones read from the source, e.g. SGLang's adjustment warning in a log; the
    lab's per-step frame). Numbers given explicitly win over the observation's.
    per_position: served conditional per-position rates (sequence or per_position()'s frame).
    standalone_acc: the draft's own acc@1..m as its training evaluation reports it (a scalar,
    a sequence or evaluate_draft's DataFrame). standalone_acc_served: the same measured on the
    served prompts with the full-precision target (separates a prompt shift from a serve-side
    change such as a quantized target). context_lengths: per-step context lengths aligned with
    ``steps`` (or a ``context_length`` column in steps). temperature: the sampling temperature.
    draft_max_context: the longest sequence the draft was trained on (its training seq_len).
    Served rates are compared with standalone_acc when given (else standalone_acc_served).
    replay: the served text re-scored offline (`eagle3lab.lab.evaluation.served_text_replay`):
    {"reference_accepted": per step of ``steps``, what the draft served as it was trained would
    have accepted (NaN where unknown); "tokens_checked"; "mismatch_margins": logit margins of the
    served tokens that are not the full-precision target's argmax}. At temperature 0 it replaces
    the rate-shape rules by exact tests: is the served target the reference one, and does each
    step accept what the draft itself would have accepted? standalone_acc evaluated at the served
    depth (acc@1..k) also says whether the draft itself can draft k deep.
    """
    adjusted_evidence = None
    if observation is not None:
        given = _from_observation(observation)
        per_position = per_position if per_position is not None else given["per_position"]
        accept_len = accept_len if accept_len is not None else given["accept_len"]
        requested_draft_tokens = requested_draft_tokens or given["requested"]
        effective_draft_tokens = effective_draft_tokens or given["effective"]
        steps = steps if steps is not None else given["steps"]
        adjusted_evidence = given["adjusted"]
    if steps is not None:
        per_position = per_position if per_position is not None else _per_position_table(
            steps, depth, conditional=True)
        accept_len = accept_len if accept_len is not None else accept_length(steps)
    rates = _as_rates(per_position)
    findings: list[Finding] = []
    beyond = _context_effect(steps, context_lengths, draft_max_context)
    findings += _config_findings(requested_draft_tokens, effective_draft_tokens, adjusted_evidence)
    findings += _rollout_findings(standalone_acc, depth or (len(rates) if rates is not None else None))
    if rates is not None and len(rates):
        depth = depth or len(rates)
        if accept_len is None:
            accept_len = accept_length_from_rates(rates)
        exact = replay is not None and steps is not None and not (temperature or 0) > 0
        if exact:
            findings += _diagnose_replay(np.nan_to_num(rates), accept_len, steps, replay, depth,
                                         standalone_acc, standalone_acc_served, beyond,
                                         draft_max_context)
        else:
            findings += _diagnose_rates(np.nan_to_num(rates), accept_len, standalone_acc,
                                        standalone_acc_served, temperature, depth, beyond,
                                        draft_max_context)
    findings += _diagnose_context(steps, context_lengths)
    findings = _merge(findings)
    concrete = [f for f in findings if f.cause != "healthy" and f.weight >= 0.6]
    for f in findings:  # "healthy" means no evidence of a problem: yield to concrete evidence
        if f.cause == "healthy" and concrete:
            f.weight = min(f.weight, 0.5)
    findings.sort(key=lambda f: -f.weight)
    if not findings:
        findings.append(finding("healthy", 0.3, ["Not enough statistics to point at a cause."]))
    return findings


def _config_findings(requested: int | None, effective: int | None, adjusted: str | None) -> list[Finding]:
    """config_adjusted: fewer draft tokens run than were asked, or the server says it changed
    the config (its adjustment warning) when the numbers are not known."""
    if requested and effective and effective < requested:
        return [finding("config_adjusted", 0.95, [
            f"{effective} draft tokens are verified per step although {requested} were requested "
            f"(SGLang sets num_draft_tokens = num_steps + 1 when topk = 1), so accept length cannot "
            f"exceed {effective}."], "config")]
    if adjusted:
        return [finding("config_adjusted", 0.9, [
            f"The server says it changed the requested config: \"{adjusted}\"."], "config")]
    return []


def _from_observation(obs) -> dict:
    """What diagnose() reads from an Observation: conditional rates, accept length, the draft
    tokens asked and run, the per-step frame (lab) and the engine's adjustment warning."""
    rates = obs.per_position
    if rates is not None and obs.conditional is False:
        rates = conditional_rates(rates["rate"].to_numpy(float))
    adjusted = next((w for w in obs.warnings if "adjusted to speculative_num_steps + 1" in w), None)
    steps = obs.step_records
    accept = obs.accept_length
    return {"per_position": rates, "accept_len": None if accept is None or accept != accept else accept,
            "requested": obs.requested.get("num_draft_tokens"),
            "effective": obs.effective.get("num_draft_tokens"), "steps": steps,
            "adjusted": adjusted}


def _merge(findings: list[Finding]) -> list[Finding]:
    """One finding per cause (the highest weight), highest first."""
    best: dict[str, Finding] = {}
    for f in findings:
        if f.cause not in best or f.weight > best[f.cause].weight:
            best[f.cause] = f
    return sorted(best.values(), key=lambda f: -f.weight)


def _context_effect(steps, context_lengths, draft_max_context) -> dict | None:
    """Steps beyond the draft's training length: their share, and accept length within/beyond."""
    if not draft_max_context:
        return None
    if context_lengths is not None:
        ctx = np.asarray(context_lengths, dtype=float)
    elif steps is not None and "context_length" in steps:
        ctx = steps["context_length"].to_numpy(float)
    else:
        return None
    if not len(ctx):
        return None
    out = {"share": float(np.mean(ctx > draft_max_context)), "within": None, "beyond": None}
    if steps is not None and len(steps) == len(ctx):
        acc = accepted_counts(steps)
        inside, outside = acc[ctx <= draft_max_context], acc[ctx > draft_max_context]
        if len(inside) >= 20 and len(outside) >= 20:
            # Welch's t of within minus beyond: a difference of a few steps is noise, not evidence
            se = np.sqrt(inside.var(ddof=1) / len(inside) + outside.var(ddof=1) / len(outside))
            t = float((inside.mean() - outside.mean()) / se) if se > 0 else 0.0
            out.update(within=accept_length(inside), beyond=accept_length(outside), t=t)
    return out


def rate_evidence(rates, accept_len, standalone_acc, standalone_acc_served, temperature,
                  depth, beyond=None, draft_max_context=None) -> RateEvidence:
    """What the rate rules read, computed once from the served rates and the draft's evaluations.

    Reference for "how much does serving keep": the draft's own evaluation on the served text
    (same text, the draft's training wiring, full-precision target) when given at T = 0, else its
    training evaluation. Served position-1 acceptance is measured where chains start -- right
    after a rejection, at harder tokens -- so it can run below a teacher-forced acc@1 on the same
    text (measured on the lab: 0.6-1.2x for a healthy draft); hence "healthy" >= 0.8.
    """
    acc_train = as_accuracy(standalone_acc)
    acc_served = as_accuracy(standalone_acc_served)
    sampling = temperature is not None and temperature > 0
    # sampled text is harder for a greedy evaluation by construction: no prompt-shift test on it
    shift_test = acc_served is not None and acc_train is not None and not sampling
    reference = acc_served if (acc_served is not None and not sampling) or acc_train is None \
        else acc_train
    sig = acceptance_signature(rates, reference)
    ref_name = "the draft's own acc@1 on the served text" if reference is acc_served else \
        "its standalone acc@1"
    ctx_note = ""
    if beyond:
        ctx_note = (f" {beyond['share']:.0%} of verify steps run beyond the draft's training length "
                    f"of {draft_max_context} tokens")
        ctx_note += (f" (accept length {beyond['within']:.2f} within, {beyond['beyond']:.2f} beyond)."
                     if beyond["within"] is not None else ".")
    return RateEvidence(
        rates=rates, c1=sig["c1"], tail=sig["tail"], tail_drop=sig["tail_drop"], keep1=sig["keep1"],
        keep=sig["keep"], acc1=sig.get("acc1"), acc_train=acc_train, acc_served=acc_served,
        temperature=temperature, sampling=sampling, shift_test=shift_test,
        trained_deep=acc_train is not None and len(acc_train) > 1,
        reference_is_served=reference is acc_served, beyond=beyond,
        head=(f"Served conditional acceptance by position is {fmt(rates)} (accept length "
              f"{accept_len:.2f} at depth {depth})."),
        ref=f" against {ref_name} of {sig['acc1']:.1%}" if sig["keep1"] is not None else "",
        ctx_note=ctx_note, accept_len=accept_len)


def _diagnose_rates(*args) -> list[Finding]:
    """The rate rules (`rules.RATE_RULES`) on the served rates."""
    return walk(rate_evidence(*args))


def _rollout_findings(standalone_acc, depth: int | None) -> list[Finding]:
    """multi_step from the draft's own evaluation at the served depth: a draft whose rollout
    acc@2..k falls well below its acc@1 on its own evaluation data cannot draft k deep, however it
    is served (no training-time test, too few TTT steps, KV or position bugs in its rollout)."""
    acc = as_accuracy(standalone_acc)
    if acc is None or len(acc) < 2 or acc[0] <= 0:
        return []
    ratio = float(np.mean(acc[1:]) / acc[0])
    if ratio >= THRESHOLDS["rollout_decay"]:
        return []
    note = ""
    if depth is not None and depth < len(acc):
        note = (f" Served {depth} deep it costs little yet; it will cost at the depth it was "
                f"evaluated at ({len(acc)}).")
    return [finding("multi_step", 0.85, [
        f"The draft's own evaluation at depth {len(acc)} gives acc@1..{len(acc)} {fmt(acc)}: "
        f"acc@2..{len(acc)} average {ratio:.0%} of acc@1, so it loses its way once it drafts on its "
        f"own hidden states (trained without training-time test, or too few TTT steps).{note}"], "rollout")]


def _diagnose_replay(rates, accept_len, steps, replay, depth, standalone_acc,
                     standalone_acc_served, beyond, draft_max_context) -> list[Finding]:
    """Exact serve-side tests at temperature 0 from the served text re-scored offline.

    1. Target: served tokens that are not the reference target's argmax beyond a numerical tie
       mean the served target computes something else (a quantized or changed target).
    2. Drafting: with the reference target, greedy decoding emits exactly the text the replay
       re-scores, so each served step should accept what the draft, fed the states it was trained
       on, accepts at the same root. Steps accepting less (sign test) mean the serving side feeds
       it something else: other boundaries or a normed state (wiring), or wrong ids (vocab).
    """
    T = THRESHOLDS
    c1 = float(rates[0])
    served = accepted_counts(steps).astype(float)
    reference = np.asarray(replay.get("reference_accepted", []), dtype=float)
    if len(reference) != len(served):
        raise StatsError(f"replay has {len(reference)} steps, the served data {len(served)}")
    known = ~np.isnan(reference)
    served_k, ref_k = served[known], reference[known]
    worse, better = int((served_k < ref_k).sum()), int((served_k > ref_k).sum())
    p = sign_test(worse, better)
    checked = int(replay.get("tokens_checked") or 0)
    margins = [m for m in replay.get("mismatch_margins") or [] if m > T["tie_margin"]]
    head = (f"Served conditional acceptance by position is {fmt(rates)} (accept length "
            f"{accept_len:.2f} at depth {depth}); re-scored offline, the draft as trained accepts "
            f"{accept_length(ref_k):.2f} per step on the same text and roots "
            f"({known.sum()} steps compared).")
    out: list[Finding] = []

    def add(cause, conf, *sentences):
        out.append(finding(cause, conf, [head, *sentences], "replay"))

    deltas = np.asarray(replay.get("logprob_deltas") or [], dtype=float)
    off = int((deltas > T["logprob_tol"]).sum())
    logprobs_differ = len(deltas) > 0 and off > T["logprob_share"] * len(deltas)
    target_differs = bool(margins) or logprobs_differ
    if margins:
        add("quantization", 0.75, f"{len(margins)} of {checked} served tokens are not the "
            f"full-precision target's greedy choice (logit margins up to {max(margins):.3f}, beyond "
            "a numerical tie): the served target computes something else.", REASONS["quantization"])
    elif logprobs_differ:
        add("quantization", 0.75, f"Every served token is the full-precision target's greedy choice, "
            f"but {off} of {len(deltas)} served log-probabilities differ from the full-precision "
            f"target's by more than {T['logprob_tol']:g} (median {np.median(deltas):.2g}, up to "
            f"{deltas.max():.2g}): the served target computes something else.", REASONS["quantization"])
    sign = (f"{worse} served steps accept fewer drafts than the replay, {better} more "
            f"(sign test p = {p:.2g}).")
    if c1 < T["zero"]:
        add("vocab_mapping", 0.85 if not target_differs else 0.8, f"Position 1 accepts {c1:.1%}. "
            + sign + " Acceptance this close to zero means draft ids almost never equal the target's "
            "choice, as when draft-vocabulary ids are read as target ids (missing d2t).")
        add("wiring", 0.55, sign + " A draft fed hidden states from other boundaries still guesses "
            "some frequent tokens: a small nonzero rate.")
    elif not target_differs and p < T["replay_p"]:
        add("wiring", 0.8, sign + " The server feeds the draft other inputs than it was trained on.",
            REASONS["wiring"])
        add("vocab_mapping", 0.45, sign + " A partly wrong vocabulary mapping would also do this.")
    elif not target_differs and worse + better >= max(T["replay_differ_min"],
                                                       T["replay_differ_share"] * len(served_k)):
        # With the reference target the replay *is* the served decoding: a correct serve differs
        # from it on no step. Steps that differ either way (past the draft's training length a
        # changed input can also accept more) mean the draft is fed something else.
        differ = (f"{worse + better} of {len(served_k)} served steps accept a different number of "
                  f"drafts than the replay ({worse} fewer, {better} more); a correct serve with the "
                  "reference target differs on none.")
        add("wiring", 0.7, differ + " The server feeds the draft other inputs than it was trained on.",
            REASONS["wiring"])
        add("vocab_mapping", 0.4, differ + " A partly wrong vocabulary mapping would also do this.")
    if context_boost(beyond) > 0:
        split = (f" (accept length {beyond['within']:.2f} within, {beyond['beyond']:.2f} beyond)"
                 if beyond["within"] is not None else "")
        add("context_length", 0.6 + context_boost(beyond),
            f"{beyond['share']:.0%} of verify steps run beyond the draft's training length of "
            f"{draft_max_context} tokens{split}.", REASONS["context_length"])
    acc_train, acc_served = as_accuracy(standalone_acc), as_accuracy(standalone_acc_served)
    if acc_train is not None and acc_served is not None \
            and acc_served[0] < T["prompt_shift"] * acc_train[0]:
        add("distribution_shift", 0.7, f"On the served text the draft's own acc@1 is "
            f"{acc_served[0]:.1%}, against {acc_train[0]:.1%} on its evaluation data.",
            REASONS["distribution_shift"])
    if not out:
        add("healthy", 0.9, f"The served target reproduces the reference target's greedy choice at "
            f"every token ({checked} checked) and the served draft accepts what it accepts as "
            f"trained: {sign}")
    return out


def _diagnose_context(steps, context_lengths) -> list[Finding]:
    if context_lengths is None and (steps is None or "context_length" not in steps):
        return []
    if steps is None:
        raise StatsError("context_lengths needs the per-step data (steps=) it belongs to")
    data = steps if context_lengths is None else steps.assign(context_length=np.asarray(context_lengths))
    if data["context_length"].nunique() < 4 or len(data) < 40:
        return []
    table = acceptance_by_context(data, bins=4)
    first, last = table["accept_length"].iloc[0], table["accept_length"].iloc[-1]
    ranks_ctx = pd.Series(data["context_length"].to_numpy()).rank()
    ranks_acc = pd.Series(accepted_counts(data)).rank()
    rho = float(ranks_ctx.corr(ranks_acc))  # Spearman without scipy
    decay = (first - last) / max(first - 1, 1e-9)
    if decay > 0.3 and rho < -0.1:
        conf = min(0.9, 0.5 + decay * 0.5)
        return [finding("context_length", conf, [
            f"Accept length falls from {first:.2f} at context ~{table['context'].iloc[0]:.0f} tokens "
            f"to {last:.2f} at ~{table['context'].iloc[-1]:.0f} (Spearman rho {rho:.2f}): the draft "
            "degrades past the context lengths it was trained on."], "context")]
    return []

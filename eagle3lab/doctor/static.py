"""Checks that read only configs and safetensors headers (plus a few small tensors).

Each check returns findings; a check that cannot run says why (a `CheckStatus`). The capture
rules (which boundaries an engine feeds for given ids) come from `eagle3lab.wiring.conventions`.
"""

from __future__ import annotations

from eagle3lab import engines
from eagle3lab.wiring.boundaries import CaptureError, ConventionError, default_boundaries
from eagle3lab.wiring.conventions import ids_for, serve_boundaries, train_boundaries
from eagle3lab.doctor.formats import DraftSpec, TargetSpec, first, load_tensor
from eagle3lab.doctor.ranking import CheckStatus
from eagle3lab.acceptance.diagnosis.findings import Finding
from eagle3lab.spec import split_engine

COMPARE_LIMIT_BYTES = 2 << 30  # hash/compare lm_head rows only when both tensors fit in this


def parse_serve(serve) -> list[tuple[str, str]]:
    """'sglang==0.5.23' -> [('sglang', '0.5.23')]; None -> every engine with a capture rule per
    version, at the newest version whose capture source was read (`Engine.capture_versions`)."""
    from eagle3lab.doctor.formats import DoctorInputError

    newest = {n: engines.get(n).capture_versions[-1] for n in engines.names() if engines.get(n).capture_versions}
    if serve is None:
        return list(newest.items())
    name, version = split_engine(str(serve))
    if name not in newest:
        raise DoctorInputError(f"--serve must name {' or '.join(newest)} (ENGINE==VERSION), got {serve!r}")
    return [(name, version or newest[name])]


def num_layers(draft: DraftSpec, target: TargetSpec | None) -> int | None:
    if target is not None:
        return target.num_layers
    n = draft.config.get("target_num_hidden_layers")
    return n if isinstance(n, int) and n >= 4 else None


def arch_of(draft: DraftSpec, target: TargetSpec | None) -> str:
    if target is not None:
        return target.arch
    archs = draft.provenance.get("verifier_architectures") or ["LlamaForCausalLM"]
    return archs[0]


# --------------------------------------------------------------------------- trained boundaries


def trained_boundaries(draft: DraftSpec, n: int, arch: str) -> tuple[list[int] | None, str, bool]:
    """(boundaries, how we know, recorded?). Recorded provenance wins; else the layout's trainer
    convention: SpecForge 0.2.0 (SGLang +1 on the nested ids) for the SGLang layout, boundary = id
    for the speculators layout (vLLM's reading, which its converter targets)."""
    recorded = draft.provenance.get("train_boundaries")
    if isinstance(recorded, list) and recorded:
        return [int(b) for b in recorded], "recorded in the draft config (eagle3lab.train_boundaries)", True
    if draft.layout == "speculators":
        ids = draft.ids.get("top_level")
        if ids is None:
            return None, "no ids recorded", False
        return sorted(ids), "speculators layout: ids are boundaries (vLLM's reading)", False
    ids = draft.ids.get("eagle_config") or draft.ids.get("top_level")
    try:
        got = train_boundaries("specforge", "0.2.0", ids, n, arch=arch)
    except (CaptureError, ConventionError) as exc:
        return None, f"specforge 0.2.0 convention does not apply ({exc})", False
    how = ("assumed SpecForge 0.2.0 (SGLang +1 on the config ids)" if ids is not None
           else "assumed SpecForge 0.2.0's default ids [1, N//2-1, N-4] (+1)")
    return sorted(got), how, False


def check_wiring(draft: DraftSpec, target: TargetSpec | None, serve) -> tuple[list[Finding], list[CheckStatus], dict]:
    findings, facts = [], {"layout": draft.layout, "ids": draft.ids, "norms": draft.norms,
                           "serve_given": serve is not None}
    slots = draft.slots
    for where, ids in draft.ids.items():
        if slots is not None and len(ids) != slots:
            findings.append(Finding(
                "wiring", "error", f"{len(ids)} aux ids but the draft's fc reads {slots} tensors",
                f"{where} ids {ids}; fc.weight {draft.fc.shape} with target hidden {draft.target_hidden_size}",
                "write one id per fc slot", check="aux ids"))
    if len(draft.ids) == 2 and draft.ids["eagle_config"] != draft.ids["top_level"]:
        findings.append(Finding(
            "wiring", "warning", "the nested and top-level aux ids differ",
            f"eagle_config {draft.ids['eagle_config']} vs top-level {draft.ids['top_level']}: SGLang reads "
            "only the nested ids, vLLM the top-level ones first", "keep one list, in both places", check="aux ids"))
    if draft.norms.get("norm_before_fc") and draft.norms.get("fc_norm"):
        findings.append(Finding("config", "error", "norm_before_fc and fc_norm are both set",
                                "speculators 0.9.0 Eagle3SpeculatorConfig rejects the pair (mutually exclusive)",
                                "keep the one the draft was trained with", check="norm flags"))
    n = num_layers(draft, target)
    if n is None:
        return findings, [CheckStatus("wiring (config)", False, "target layer count unknown: give --target "
                                      "(or a draft config with target_num_hidden_layers)")], facts
    arch = arch_of(draft, target)
    facts.update(num_layers=n, arch=arch)
    trained, how, recorded = trained_boundaries(draft, n, arch)
    facts.update(trained=trained, trained_how=how, trained_recorded=recorded)
    if not draft.ids:
        findings.append(Finding(
            "wiring", "warning" if not recorded else "info", "no aux layer ids in the config: the engine guesses",
            f"no eagle_aux_hidden_state_layer_ids (nested or top-level); SGLang, vLLM and speculators' "
            f"converter then feed the default {default_boundaries(n)} for {n} layers", "", 0.9, check="aux ids"))
    per_engine = [_engine_wiring(draft, engine, version, arch, n, trained, how, recorded, facts)
                  for engine, version in parse_serve(serve)]
    if serve is None and recorded and all(f and f[0].severity == "warning" for f in per_engine):
        for f in per_engine:  # no engine serves the recorded training set: an error whichever runs it
            f[0].severity = "error"
    findings += [f for group in per_engine for f in group]
    return findings, [CheckStatus("wiring (config)", True, how)], facts


def _engine_wiring(draft, engine, version, arch, n, trained, how, recorded, facts) -> list[Finding]:
    ids, key = draft.layer_ids(engine)
    label = f"{engine}=={version}"
    try:
        fed = serve_boundaries(engine, version, arch, ids, n, key)
    except CaptureError as exc:
        facts.setdefault("fed", {})[label] = f"{exc.kind}: {exc.short}"
        severity = "error" if facts.get("serve_given") else "warning"
        return [Finding("wiring", severity, f"{label} cannot feed this draft ({exc.short})", str(exc),
                        _fix_text(trained, engine, version, arch, n, key), 0.95, check="aux ids")]
    except ConventionError as exc:
        facts.setdefault("fed", {})[label] = f"unknown: {exc}"
        return [Finding("wiring", "info", f"no capture rule recorded for {label}", str(exc), "",
                        0.5, check="aux ids")]
    facts.setdefault("fed", {})[label] = list(fed)
    notes = "; ".join(fed.warnings)
    if trained is None or list(fed) == list(trained):
        if trained is None:
            return []
        return [Finding("wiring", "info", f"{label} feeds {list(fed)}, the boundaries training used",
                        f"ids {ids} ({key}) -> {list(fed)}; training: {list(trained)} ({how})"
                        + (f"; {notes}" if notes else ""), "none needed", 0.9 if recorded else 0.6,
                        check="aux ids")]
    severity = "error" if recorded and facts.get("serve_given") else "warning"
    prefix = "" if facts.get("serve_given") else "if served by "
    return [Finding(
        "wiring", severity, f"{prefix}{label} feeds {list(fed)}, training used {list(trained)}",
        f"ids {ids if ids is not None else 'none'} ({key}) -> {list(fed)}; training: {list(trained)} ({how})"
        + (f"; {notes}" if notes else ""), _fix_text(trained, engine, version, arch, n, key),
        0.95 if recorded else 0.6, check="aux ids", data={"fed": list(fed), "trained": list(trained)})]


def _fix_text(trained, engine, version, arch, n, key) -> str:
    if trained is None:
        return "record which boundaries training captured, then write the ids that engine needs"
    keys = [key] + [k for k in ("eagle_config", "top_level") if k != key]
    for patched in engines.patch_options(engine):
        for k in keys:
            try:
                ids = ids_for(sorted(trained), engine, version, arch, n, k, patched=patched)
            except (CaptureError, ConventionError):
                continue
            where = ("eagle_config.eagle_aux_hidden_state_layer_ids" if k == "eagle_config"
                     else "top-level eagle_aux_hidden_state_layer_ids")
            text = f"write {where} = {ids}"
            return (f"apply the embedding-capture patch (`eagle3lab patch sglang --apply`), then {text}"
                    if patched else text)
    return (f"no ids make {engine} {version} feed {sorted(trained)} for {arch}, even patched "
            "(see `eagle3lab wiring` for the versions that can)")


# --------------------------------------------------------------------------- vocabulary


def check_vocab(draft: DraftSpec, target: TargetSpec | None) -> tuple[list[Finding], list[CheckStatus]]:
    import torch

    out = []
    dv, v = draft.draft_vocab_size, draft.vocab_size
    if target is not None:
        tv = target.text_config.get("vocab_size")
        if v is not None and tv is not None and v != tv:
            out.append(Finding("vocab_size", "error", f"draft vocab_size {v} != target vocab_size {tv}",
                               "the draft's vocabulary map and embedding index the target's vocabulary",
                               "use a draft trained for this target's tokenizer", check="sizes"))
        th = target.text_config.get("hidden_size")
        if th and draft.target_hidden_size and th != draft.target_hidden_size:
            out.append(Finding("hidden_size", "error", f"draft expects target hidden {draft.target_hidden_size}, "
                               f"target has {th}", f"fc.weight {draft.fc.shape if draft.fc else '?'}",
                               "use a draft trained for this target", check="sizes"))
    head = first(draft.tensors, "lm_head.weight", "model.lm_head.weight")
    if head is not None and dv is not None and head.shape[0] != dv:
        out.append(Finding("vocab_mapping", "error", f"lm_head has {head.shape[0]} rows, draft_vocab_size is {dv}",
                           f"lm_head.weight {head.shape}", "set draft_vocab_size to the lm_head's rows, or "
                           "export the draft's own lm_head", check="vocab map"))
    d2t = first(draft.tensors, "d2t", "model.d2t")
    t2d = first(draft.tensors, "t2d", "model.t2d")
    if d2t is None or t2d is None:
        missing = [nm for nm, t in (("d2t", d2t), ("t2d", t2d)) if t is None]
        if dv is not None and v is not None and dv < v and d2t is None:
            out.append(Finding("vocab_mapping", "error", "d2t missing for a reduced draft vocabulary",
                               f"draft_vocab_size {dv} < vocab_size {v} and no d2t: draft id i is read as "
                               "target id i", "export d2t (and t2d) from the training run's vocab mapping",
                               0.95, check="vocab map"))
        elif missing and dv is not None and v is not None and dv < v:
            out.append(Finding("vocab_mapping", "info", f"{'/'.join(missing)} not in the checkpoint",
                               "SGLang's loader reads only d2t (t2d is skipped)", "", 0.5, check="vocab map"))
        return out, [CheckStatus("vocab map", True, "/".join(missing) + " missing")]
    d, t = load_tensor(d2t), load_tensor(t2d)
    problems = []
    if dv is not None and tuple(d.shape) != (dv,):
        problems.append(f"d2t shape {tuple(d.shape)} != (draft_vocab_size={dv},)")
    if v is not None and tuple(t.shape) != (v,):
        problems.append(f"t2d shape {tuple(t.shape)} != (vocab_size={v},)")
    if not problems and d.dim() == 1 and t.dim() == 1:
        ids = torch.arange(d.numel()) + d.long()
        if ids.min() < 0 or ids.max() >= t.numel():
            problems.append("d2t maps draft ids outside the target vocabulary")
        elif not bool(t.bool()[ids].all()) or int(t.bool().sum()) != d.numel():
            problems.append(f"t2d marks {int(t.bool().sum())} target ids but d2t maps {d.numel()} draft ids "
                            "to a different set")
        elif int(d.abs().sum()) == 0 and dv is not None and v is not None and dv < v:
            problems.append("d2t is all zeros: the identity map, i.e. no mapping")
    if problems:
        out.append(Finding("vocab_mapping", "error", "d2t/t2d inconsistent", "; ".join(problems),
                           "re-export d2t/t2d from the training run's vocab mapping", 0.95, check="vocab map"))
    return out, [CheckStatus("vocab map", True, "; ".join(problems) or f"d2t/t2d consistent ({d.numel()} ids)")]


# --------------------------------------------------------------------------- lm_head / embeddings


def check_heads(draft: DraftSpec, target: TargetSpec | None) -> tuple[list[Finding], list[CheckStatus]]:
    out = []
    head = first(draft.tensors, "lm_head.weight", "model.lm_head.weight")
    embed = first(draft.tensors, "embed_tokens.weight", "model.embed_tokens.weight")
    if head is None:
        out.append(Finding("lm_head", "error", "the draft has no lm_head.weight",
                           f"tensors: {', '.join(sorted(draft.tensors)[:8])}...", "export the draft's trained lm_head",
                           check="lm_head"))
    if embed is None:
        out.append(Finding("embedding", "info", "no embed_tokens in the draft: it uses the target's",
                           "SGLang shares the target's embedding with an EAGLE-3 draft (set_embed, sglang 0.5.23 "
                           "speculative/eagle_worker_v2.py)", "", 0.8, check="embed_tokens"))
    if head is None or target is None:
        why = "no target given: compared shapes only" if target is None else "no draft lm_head"
        if head is not None and draft.vocab_size and draft.draft_vocab_size and \
                head.shape[0] == draft.vocab_size != draft.draft_vocab_size:
            out.append(Finding("lm_head", "error", "the draft's lm_head has the target's full vocabulary",
                               f"lm_head {head.shape} but draft_vocab_size {draft.draft_vocab_size}",
                               "export the draft's own lm_head", 0.8, check="lm_head"))
        return out, [CheckStatus("lm_head vs target", False, why)]
    theirs = target.lm_head
    if theirs is None:
        return out, [CheckStatus("lm_head vs target", False, "the target has no lm_head/embed_tokens tensor")]
    if head.nbytes + theirs.nbytes > COMPARE_LIMIT_BYTES:
        return out, [CheckStatus("lm_head vs target", False,
                                 f"tensors of {(head.nbytes + theirs.nbytes) / 2**30:.1f} GiB: compared shapes only")]
    share = _identical_rows(draft, head, theirs)
    if share is None:
        return out, [CheckStatus("lm_head vs target", False, "hidden sizes differ: no row comparison")]
    if share >= 0.99:
        out.append(Finding(
            "lm_head", "error", "the draft's lm_head is the target's",
            f"{share:.1%} of the draft's {head.shape[0]} lm_head rows equal the target's rows for the same "
            "tokens (a converter or a merge overwrote the trained head)",
            "restore the draft's trained lm_head.weight from the training checkpoint", 0.95, check="lm_head",
            data={"identical_rows": share}))
    return out, [CheckStatus("lm_head vs target", True, f"{share:.1%} of rows identical to the target's")]


def _identical_rows(draft: DraftSpec, head, theirs) -> float | None:
    """Share of draft lm_head rows equal (after rounding to the draft's dtype) to the target's
    lm_head rows of the same tokens (d2t gives each draft row's target id)."""
    import torch

    mine, full = load_tensor(head).float(), load_tensor(theirs)
    if mine.shape[-1] != full.shape[-1]:
        return None
    d2t = first(draft.tensors, "d2t", "model.d2t")
    ids = torch.arange(mine.shape[0])
    if d2t is not None and load_tensor(d2t).numel() == mine.shape[0]:
        ids = ids + load_tensor(d2t).long()
    if int(ids.max()) >= full.shape[0]:
        return None
    rows = full[ids].to(load_tensor(head).dtype).float()
    return float((rows == mine).all(dim=-1).float().mean())


# --------------------------------------------------------------------------- rope, lengths, templates


def check_rope(draft: DraftSpec, target: TargetSpec | None) -> tuple[list[Finding], list[CheckStatus]]:
    if target is None:
        return [], [CheckStatus("rope vs target", False, "no target given")]
    out = []
    mine, theirs = draft.rope, target.rope
    recorded = draft.provenance.get("target_rope_theta")
    if mine["rope_theta"] is not None and theirs["rope_theta"] is not None and mine["rope_theta"] != theirs["rope_theta"]:
        out.append(Finding(
            "rope", "error", f"draft rope_theta {mine['rope_theta']:g} != target rope_theta {theirs['rope_theta']:g}",
            "EAGLE-3 drafts are trained with the target's positions and RoPE base; a converter that drops or "
            "misreads rope settings writes another base (10000 is the Llama default)"
            + (f"; the training run recorded {recorded:g}" if recorded else ""),
            f"set the draft's rope_theta to {theirs['rope_theta']:g} (the value it was trained with)",
            0.85, check="rope"))
    if (mine["rope_scaling"] or None) != (theirs["rope_scaling"] or None):
        out.append(Finding("rope", "warning", "draft and target rope_scaling differ",
                           f"draft {mine['rope_scaling']} vs target {theirs['rope_scaling']}",
                           "use the rope_scaling the draft was trained with (usually the target's)", 0.6,
                           check="rope"))
    dm, tm = mine["max_position_embeddings"], theirs["max_position_embeddings"]
    if isinstance(dm, int) and isinstance(tm, int) and dm < tm:
        out.append(Finding("context_length", "warning", f"draft max_position_embeddings {dm} < target's {tm}",
                           "requests longer than the draft's window are drafted out of its range",
                           f"cap --context-length at {dm} or use a draft trained on longer sequences", 0.6,
                           check="rope"))
    return out, [CheckStatus("rope vs target", True, f"draft {mine}, target {theirs}")]


def check_template(draft: DraftSpec, target: TargetSpec | None) -> tuple[list[Finding], list[CheckStatus]]:
    """The draft's recorded training format (`eagle3lab.chat_template`, "" = raw text) against
    the chat template the target's tokenizer_config.json makes the server render (none = raw)."""
    from eagle3lab.wiring.chat_templates import TemplateError, describe, template_text

    recorded = draft.provenance.get("chat_template")
    if recorded is None:
        return [], [CheckStatus("chat template", False, "the draft records no training template "
                                "(eagle3lab.chat_template; \"\" records raw text)")]
    if target is None:
        return [], [CheckStatus("chat template", False, "no target given")]
    try:
        trained = template_text(recorded) or ""
        served = template_text(target.tokenizer_config.get("chat_template")) or ""
    except TemplateError as exc:
        return [], [CheckStatus("chat template", False, str(exc))]
    if trained.strip() == served.strip():
        return [], [CheckStatus("chat template", True, f"served as trained: {describe(served)}")]
    where = "the target's tokenizer_config.json chat_template"
    evidence = (f"training format {describe(trained)} (recorded in the draft config, eagle3lab.chat_template); "
                f"served: {describe(served) if served else 'no chat_template in ' + where + ', prompts go as sent'}"
                + (f" ({where}, {len(served)} characters)" if served else ""))
    fix = ("send prompts as the draft was trained: raw text to /generate or /v1/completions, not through the "
           "chat template" if not trained else "render prompts with the draft's training template")
    return [Finding("template", "warning",
                    "the server renders prompts in another format than the draft was trained on", evidence,
                    fix + "; or retrain the draft on data rendered with the served template (run the doctor "
                    "with --prompts to measure what it costs)", 0.7, check="chat template",
                    data={"trained": trained, "served": served})], \
        [CheckStatus("chat template", True, "templates differ")]


def check_dtype(draft: DraftSpec, target: TargetSpec | None) -> list[Finding]:
    dtypes = sorted({t.dtype for t in draft.tensors.values() if t.dtype not in ("I64", "I32", "BOOL", "U8")})
    text = f"draft tensors {', '.join(dtypes) or 'none'}"
    if target is not None:
        tt = sorted({t.dtype for t in target.tensors.values() if t.dtype not in ("I64", "I32", "BOOL", "U8")})
        text += f"; target tensors {', '.join(tt) or 'none'}"
    return [Finding("dtype", "info", "weights' dtypes", text, "", 1.0, check="dtype")]


def static_checks(draft: DraftSpec, target: TargetSpec | None, serve) -> tuple[list[Finding], list[CheckStatus], dict]:
    findings, checks, facts = check_wiring(draft, target, serve)
    for fn in (check_vocab, check_heads, check_rope, check_template):
        f, c = fn(draft, target)
        findings += f
        checks += c
    findings += check_dtype(draft, target)
    return findings, checks, facts

"""The step-cost model against figures nobody here chose, the incident's configuration advice, and
the numbers an explorer draws.

Why in one place: docs/cost-model.md's validation table, tests/test_cost_model.py and the
post-mortem read the same rows, so a figure cannot drift between them. Every input is data with
its provenance: the public configs under data/cost/targets and data/cost/drafts, the H200
measurements data/cost/h200-verify-cost.json and h200-int4-moe.json (measured by the project),
the public figures data/cost/public-figures.json, the incident's figures through
`eagle3lab.report.incident` (a foundation-layer reader of data/incident/incident.json).
Statistics layer: imports the cost modules, `paths`, `report.incident`.
"""

from __future__ import annotations

import math
from dataclasses import replace
from functools import lru_cache

import numpy as np

from eagle3lab.cost import acceptprofile, archfit
from eagle3lab.cost.archcost import CHAINS, CostParams, StepModel, expected_union, expert_share, verify_ratio
from eagle3lab.cost.configadvice import configuration_row
from eagle3lab.cost.modelshape import ModelShape, load_config, mtp_draft, read_draft, read_target, default_draft
from eagle3lab.cost.stepcost import StepCost
from eagle3lab.paths import DATA_DIR

COST_DIR = DATA_DIR / "cost"
TARGETS = ("llama-3.1-8b", "qwen3-30b-a3b", "mixtral-8x7b-v0.1", "gpt-oss-20b", "deepseek-v3", "kimi-k2.5")
KIMI_DRAFT = "kimi-k2.5-eagle3-torchspec"
DRAFT_VOCABS = (32000, 163840)  # a 32k draft vocabulary (SpecForge's usual) .. Kimi's full one
INCIDENT_CONFIGS = ((1, 1, 2), (2, 1, 3), (3, 1, 4), (5, 1, 6))
H200_SHAPES = {"kimi_k2": "kimi-k2.5", "qwen3_30b_a3b": "qwen3-30b-a3b"}


# --------------------------------------------------------------------------- data

def target(name: str, bits: dict | None = None) -> ModelShape:
    """A shipped public target config (data/cost/targets/NAME.json)."""
    return read_target(COST_DIR / "targets" / f"{name}.json", bits)


def target_default_draft(name: str, vocab: int = 32000) -> ModelShape:
    """The assumed EAGLE-3 draft for a shipped target (`modelshape.default_draft`)."""
    return default_draft(target(name), vocab, load_config(COST_DIR / "targets" / f"{name}.json"))


@lru_cache(maxsize=4)
def measured(name: str) -> dict:
    """A measurement file of data/cost (with its provenance key)."""
    return load_config(COST_DIR / name, "measurement")


def kimi_model(vocab: int = 32000, params: CostParams | None = None) -> StepModel:
    """Kimi-K2.5 (its config: routed experts INT4) with the public TorchSpec Kimi-K2.5 EAGLE-3
    draft shape at a draft vocabulary of `vocab`."""
    t = target("kimi-k2.5")
    draft = read_draft(COST_DIR / "drafts" / f"{KIMI_DRAFT}.json", t).with_vocab(vocab)
    return StepModel(t, draft, params or CostParams())


def one_layer(shape: ModelShape, bits: float = 16.0) -> ModelShape:
    """One MoE layer of a target, at `bits` everywhere: the layer the H200 script timed."""
    per = {"attention": shape.flat["attention"] / shape.layers, "dense_mlp": 0.0,
           "shared_experts": shape.flat["shared_experts"] / max(1, shape.moe_layers),
           "router": shape.flat["router"] / max(1, shape.moe_layers), "lm_head": 0.0}
    return replace(shape, name=f"one {shape.name} MoE layer", layers=1, moe_layers=1, flat=per,
                   bits={p: bits for p in shape.bits}, kv_bytes_per_token=0.0)


# --------------------------------------------------------------------------- the H200 table

def h200_verify_rows() -> list[dict]:
    """Each shape's verify ratio R(n) from its public config alone (bf16, weights only, independent
    routing) against the H200's measured time at n / time at n = 1 (data/cost/h200-verify-cost.json)."""
    data = measured("h200-verify-cost.json")
    rows = []
    for key, name in H200_SHAPES.items():
        layer = one_layer(target(name))
        model = StepModel(layer, layer)
        ms = data[key]["ms"]
        for n in ms:
            rows.append(_ratio_row(f"{name} MoE layer (bf16)", int(n), model.verify_ratio(int(n)),
                                   ms[n] / ms["1"], expected_union(layer.experts, layer.active, int(n)),
                                   data[key]["distinct"][n]))
    dense = StepModel(target("llama-3.1-8b"), target_default_draft("llama-3.1-8b"))
    for n, v in data["dense"]["ms"].items():
        rows.append(_ratio_row("llama-3.1-8b layers (bf16, dense)", int(n), dense.verify_ratio(int(n)),
                               v / data["dense"]["ms"]["1"], 0.0, 0.0))
    return rows


def _ratio_row(shape: str, n: int, model: float, meas: float, union: float, union_meas: float) -> dict:
    return {"shape": shape, "n": n, "model": model, "measured": meas, "error": model / meas - 1,
            "experts_model": union, "experts_measured": union_meas}


def int4_rows() -> tuple[list[dict], dict]:
    """The Kimi-shaped layer with INT4 routed experts (tinygemm, group 128: 4.25 bits) against the
    bytes bound, and the expert-kernel efficiency fitted to the measured ratios (least squares over
    n, each n also predicted from the others)."""
    data = measured("h200-int4-moe.json")
    layer = one_layer(target("kimi-k2.5")).with_bits({"routed_experts": 4.25})
    ns = [int(n) for n in data["ratio"] if int(n) > 1]
    meas = {n: data["ratio"][str(n)] for n in ns}
    eff = _fit_efficiency(layer, ns, meas)
    rows = []
    for n in ns:
        loo = _fit_efficiency(layer, [m for m in ns if m != n], meas)
        bound = StepModel(layer, layer).verify_ratio(n)
        rows.append({"n": n, "bound": bound, "measured": meas[n], "bound_error": bound / meas[n] - 1,
                     "fitted": _ratio(layer, n, eff), "left_out": _ratio(layer, n, loo)})
    return rows, {"expert_efficiency": eff, "dense_part_ms": data["dense_part_ms"]["1"], "ms_n1": data["ms"]["1"]}


def _ratio(layer: ModelShape, n: int, eff: float) -> float:
    return StepModel(layer, layer, CostParams(expert_efficiency=eff)).verify_ratio(n)


def _fit_efficiency(layer: ModelShape, ns, meas: dict) -> float:
    """The expert efficiency minimising the squared error of R(n) (golden-section on [0.05, 2])."""
    loss = lambda e: sum((_ratio(layer, n, e) - meas[n]) ** 2 for n in ns)  # noqa: E731
    lo, hi, g = 0.05, 2.0, (math.sqrt(5) - 1) / 2
    for _ in range(80):
        a, b = hi - g * (hi - lo), lo + g * (hi - lo)
        lo, hi = (lo, b) if loss(a) < loss(b) else (a, hi)
    return (lo + hi) / 2


# --------------------------------------------------------------------------- public anchors

def fixed_share_fitting(model: StepModel, config, cost: float) -> float:
    """The fixed share of a plain step (no per-step overhead) that makes `config` cost `cost`:
    what a bandwidth-bound model needs to meet a measured step."""
    base, coef = archfit.design_row(model, *config)
    return (cost - base) / coef


def public_rows() -> list[dict]:
    """The incident, the Qwen3-30B-A3B and the DeepSeek-V3 figures against the model's bound, and
    the fixed share of a plain step that would make the model meet each."""
    pub = load_config(COST_DIR / "public-figures.json", "public figures")
    return [_incident_row(), _qwen_row(pub["qwen3_30b_a3b_specforge_339"]),
            *_deepseek_rows(pub["deepseek_v3_mtp_pr_3582"]), *_deepseek_rows(pub["deepseek_v32_nvfp4_pr_20809"])]


def incident_cost() -> StepCost:
    """The incident's 5/1/6 step as it reported it: C = L x B / S."""
    import eagle3lab.report.incident as incident

    rec = incident.load()
    cfg = rec.config("after_fix")
    return StepCost(rec.figure("baseline_tps").mid, rec.figure("after_fix_tps").mid,
                    rec.figure("after_fix_accept_length").mid, cfg["num_steps"], cfg["topk"], cfg["num_draft_tokens"])


def _incident_row() -> dict:
    c = incident_cost()
    config = (c.steps, c.topk, c.draft_tokens)
    bound = {v: kimi_model(v).parts(*config).step_cost for v in DRAFT_VOCABS}
    return {"case": "incident: Kimi-K2.5 (INT4 routed experts)", "configuration": "5/1/6",
            "model": bound[32000], "model_range": [bound[32000], bound[163840]], "measured": c.cost,
            "measured_range": [c.cost, c.cost], "fixed_share_fitting": fixed_share_fitting(kimi_model(), config, c.cost),
            "source": (f"incident, as reported (data/incident/incident.json): L {c.accept_length:.2f} x "
                       f"{c.baseline_tps:g} / {c.spec_tps:g} tok/s"),
            "draft": "TorchSpec Kimi-K2.5 EAGLE-3 shape, 32k draft vocabulary (range: its full 163,840)"}


def _qwen_row(pub: dict) -> dict:
    m = StepModel(target("qwen3-30b-a3b"), target_default_draft("qwen3-30b-a3b"))
    got = next(x for x in pub["measured"] if x["configuration"] == [3, 1, 4])
    c = StepCost(pub["baseline_tokens_per_s"], got["tokens_per_s"], got["accept_length"], 3, 1, 4).cost
    return {"case": "Qwen3-30B-A3B (bf16)", "configuration": "3/1/4", "model": m.parts(3, 1, 4).step_cost,
            "model_range": None, "measured": c, "measured_range": [c, c],
            "fixed_share_fitting": fixed_share_fitting(m, (3, 1, 4), c), "source": pub["source"],
            "draft": "assumed: one EAGLE-3 layer of the target's width, 32k draft vocabulary"}


def _deepseek_rows(pub: dict) -> list[dict]:
    bits = {"routed_experts": pub["routed_expert_bits"]} if pub.get("routed_expert_bits") else None
    t = target("deepseek-v3", bits)
    m = StepModel(t, mtp_draft(t))
    config = tuple(pub["configuration"])
    lengths = pub.get("accept_length_range") or [pub["accept_length"]] * 2
    costs = [length / pub["speedup"] for length in lengths]
    label = "DeepSeek-V3 MTP (FP8)" if not bits else "DeepSeek-V3.2-NVFP4 MTP (V3 shape, experts 4.5 bits)"
    return [{"case": label, "configuration": "/".join(map(str, config)), "model": m.parts(*config).step_cost,
             "model_range": None, "measured": float(np.mean(costs)), "measured_range": costs,
             "fixed_share_fitting": fixed_share_fitting(m, config, float(np.mean(costs))),
             "fixed_share_range": sorted(fixed_share_fitting(m, config, c) for c in costs),
             "source": pub["source"], "draft": "the target's own MTP layer"}]


def qwen_fit() -> archfit.ArchFit:
    """The model fitted to the six Qwen3-30B-A3B configurations of SpecForge #339 (leave-one-out)."""
    pub = load_config(COST_DIR / "public-figures.json", "public figures")["qwen3_30b_a3b_specforge_339"]
    data = [archfit.Measured(*r["configuration"], r["tokens_per_s"], r["accept_length"]) for r in pub["measured"]]
    m = StepModel(target("qwen3-30b-a3b"), target_default_draft("qwen3-30b-a3b"))
    return archfit.fit(m, data, pub["baseline_tokens_per_s"])


def validation_table() -> dict:
    """Every check of docs/cost-model.md's validation table, as rows."""
    int4, eff = int4_rows()
    return {"h200": h200_verify_rows(), "int4": int4, "int4_fit": eff, "public": public_rows(),
            "qwen_fit": qwen_fit().as_dict()}


# --------------------------------------------------------------------------- incident advice

def public_kimi_drafts() -> list[str]:
    """The public Kimi-K2.5 EAGLE-3 drafts whose model cards the advice quotes, in file order."""
    pub = load_config(COST_DIR / "public-figures.json", "public figures")["kimi_k25_drafts"]
    return list(dict.fromkeys(a["draft"] for a in pub["accept_lengths"]))


def incident_profiles() -> dict:
    """The two acceptance profiles of the advice: the incident's own (its logged accept lengths at
    its fixed configuration, as reported) and the public Kimi-K2.5 drafts' (their model cards)."""
    import eagle3lab.report.incident as incident

    rec = incident.load()
    fig = rec.figure("after_fix_accept_length")
    cfg = rec.config("after_fix")
    own = acceptprofile.from_accept_length(fig.mid, cfg["num_steps"], (fig.low, fig.high), cfg["topk"],
                                           cfg["num_draft_tokens"])
    pub = load_config(COST_DIR / "public-figures.json", "public figures")["kimi_k25_drafts"]
    values = [a["accept_length"] for a in pub["accept_lengths"]]
    lo, hi = min(values), max(values)
    public = acceptprofile.from_accept_length((lo + hi) / 2, 3, (lo, hi), 1, 4)
    label = incident.config_label(cfg)
    return {"incident": (own, f"incident, as reported: accept length {fig.text()} at {label}"),
            "public Kimi-K2.5 drafts": (public, f"public model cards: accept length {lo:.2f}–{hi:.2f} at 3/1/4 "
                                                "(lightseekorg/kimi-k2.5-eagle3, -mla)")}


def incident_floors() -> dict:
    """The least each configuration the incident ran can cost on its hardware, from its own
    launches: a step emits at least one token (L >= 1), so C = L x B / S >= B / S. SGLang ran the
    first launch's 1/1/16 as 1/1/2 (topk 1: steps + 1 draft tokens)."""
    import eagle3lab.report.incident as incident

    rec = incident.load()
    base = rec.figure("baseline_tps").mid
    out = {}
    for cfg_name, fig in (("first", "first_tps"), ("steps15", "steps15_tps"), ("after_fix", "after_fix_tps")):
        cfg = rec.config(cfg_name)
        steps, topk = cfg["num_steps"], cfg["topk"]
        tokens = steps + 1 if topk == 1 else cfg["num_draft_tokens"]
        out[f"{steps}/{topk}/{tokens}"] = {"step_cost_at_least": base / rec.figure(fig).mid,
                                           "tokens_per_s": rec.figure(fig).mid, "launch": cfg_name}
    return out


def incident_long_chain() -> dict:
    """The bytes model against the incident's longest launch (15/1/16, wiring still off): the step
    cost it predicts, the accept length the logged tok/s would then need (C x S / B), and the one
    the incident's own acceptance gives there (its i.i.d. rate carried to depth 15). A needed length
    far above the incident's says the model overstates long chains (a fixed cost per step, which it
    leaves out, flattens them) or that launch accepted far more."""
    import eagle3lab.report.incident as incident

    rec = incident.load()
    cfg = rec.config("steps15")
    config = (cfg["num_steps"], cfg["topk"], cfg["num_steps"] + 1 if cfg["topk"] == 1 else cfg["num_draft_tokens"])
    base, tps = rec.figure("baseline_tps").mid, rec.figure("steps15_tps").mid
    cost = kimi_model(DRAFT_VOCABS[0]).parts(*config).step_cost
    own, _ = incident_profiles()["incident"]
    length, (lo, hi) = own.accept_length(*config)
    return {"configuration": "/".join(map(str, config)), "tokens_per_s": tps, "baseline_tokens_per_s": base,
            "step_cost": cost, "accept_length_needed": cost * tps / base,
            "incident_accept_length": length, "incident_accept_length_range": [lo, hi]}


def incident_advice(configurations=INCIDENT_CONFIGS) -> list[dict]:
    """Predicted tok/s at each configuration for the incident's own acceptance and for the public
    Kimi-K2.5 drafts', on the incident's no-speculation baseline, in the bandwidth-bound limit: the
    step cost with a 32k draft vocabulary, its range up to the full 163,840; each accept length's
    range from its source. Where the incident ran a configuration, its own launch bounds the step
    cost from below (`incident_floors`) and so the tok/s from above (`tokens_per_s_at_most`): at
    1/1/2 that floor (baseline / first launch's tok/s) is above the bound's, i.e. its server spends
    time beyond bytes. The incident's measured tok/s at its fixed configuration is on its row."""
    import eagle3lab.report.incident as incident

    rec = incident.load()
    base = rec.figure("baseline_tps").mid
    models = {v: kimi_model(v) for v in DRAFT_VOCABS}
    floors = incident_floors()
    rows = []
    for name, (profile, source) in incident_profiles().items():
        for config in configurations:
            row = _advice_row(name, source, profile, config, models, base, rec)
            floor = floors.get(row["configuration"])
            if floor and floor["launch"] != "after_fix":
                row["step_cost_at_least"] = floor["step_cost_at_least"]
                row["tokens_per_s_at_most"] = base * row["accept_length_range"][1] / floor["step_cost_at_least"]
                row["floor_source"] = (f"incident, as reported: {floor['tokens_per_s']:g} tok/s at {row['configuration']} "
                                       f"({floor['launch']} launch), accept length >= 1")
            rows.append(row)
    return rows


def _advice_row(name, source, profile, config, models, base, rec) -> dict:
    low = configuration_row(models[32000], config, profile, baseline_tps=base)
    high = models[163840].parts(*config).step_cost
    length, (l_lo, l_hi) = low["accept_length"], low["accept_length_range"]
    c, c_hi = low["step_cost"], high
    row = {"profile": name, "source": source, "configuration": low["configuration"], "accept_length": length,
           "accept_length_range": [l_lo, l_hi], "step_cost": c, "step_cost_range": [c, c_hi],
           "speedup": length / c, "speedup_range": [l_lo / c_hi, l_hi / c],
           "tokens_per_s": base * length / c, "tokens_per_s_range": [base * l_lo / c_hi, base * l_hi / c],
           "basis": low["basis"], "baseline_tokens_per_s": base}
    if name == "incident" and config == (5, 1, 6):
        row["measured_tokens_per_s"] = rec.figure("after_fix_tps").mid
    return row


# --------------------------------------------------------------------------- explorer

EXPLORER_FORMULA = ("verify(n) = (1 - x) + x * U(n) / k,  U(n) = E * (1 - (1 - k/E)^(1 + locality * (n - 1))); "
                    "x = routed experts' share of a decode step's bytes (0 for a dense target)")


def explorer_targets(ns=range(1, 17), locality: float = 1.0) -> list[dict]:
    """For each shipped target: experts E, active k, the experts' byte share x, the draft step's
    and its fc's (assumed EAGLE-3 draft, 32k vocabulary) in plain steps, and verify(n) for n in
    `ns` by `EXPLORER_FORMULA`; what an in-page explorer's target choice draws
    (`cost.moecurve.MoeCurve`: fc + draft x k + verify(k + 1) is `StepModel.parts(k).step_cost`)."""
    out = []
    for name in TARGETS:
        m = StepModel(target(name), target_default_draft(name), CostParams(locality=locality))
        x, t = expert_share(m), m.target
        out.append({"target": name, "experts": t.experts, "active": t.active, "expert_share": x,
                    "draft_step": m.draft_ratio(), "draft_fc": m.fc_ratio, "bits": t.bits,
                    "verify": [verify_ratio(n, t.experts, t.active, x, locality) for n in ns], "n": list(ns)})
    return out


def chain_costs(model: StepModel) -> list[dict]:
    """The chains 1..7 with their parts, for a notebook table or plot."""
    return [model.parts(*c).as_dict() for c in CHAINS]

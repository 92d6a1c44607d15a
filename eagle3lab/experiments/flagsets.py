"""The incident's three launch configurations, resolved by SGLang's rules (and by SGLang's own
resolver when it is installed): what each flag set asks for and what the server runs."""

from __future__ import annotations

from eagle3lab.report import incident
from eagle3lab.spec import LATEST_SGLANG, SpecConfig


def flag_set_label(cfg: SpecConfig) -> str:
    """A flag set named by its numbers only (`steps 1, topk 1, 16 draft tokens`): a label that
    reads as the incident's would pass a lab figure off as the incident's."""
    return f"steps {cfg.num_steps}, topk {cfg.topk}, {cfg.num_draft_tokens} draft tokens"


def incident_flag_sets() -> dict[str, SpecConfig]:
    """The incident's launch configurations in the order it tried them (incident record)."""
    rec = incident.load()
    specs = [rec.spec(name) for name in ("first", "steps15", "after_fix")]
    return {flag_set_label(s): s for s in specs}


SEED_FLAG_SETS: dict[str, SpecConfig] = incident_flag_sets()


def resolve_flag_sets(flag_sets: dict, version: str = LATEST_SGLANG, arch: str = "LlamaForCausalLM",
                      use_sglang: bool = False):
    """One row per labelled SpecConfig: what was asked, what SGLang runs, its warnings and our
    findings."""
    import pandas as pd

    from eagle3lab.engines import effective as config

    asked_all = list(flag_sets.values())
    version = version or LATEST_SGLANG
    if use_sglang:  # one subprocess for all flag sets: importing SGLang takes a while
        resolved = config.resolve_with_sglang(asked_all, version=version, arch=arch)
    else:
        resolved = [a.resolve(engine="sglang", version=version, arch=arch) for a in asked_all]
    rows = []
    for label, asked, res in zip(flag_sets, asked_all, resolved):
        rows.append({"flag set": label,
                     "asked steps/topk/draft": (asked.num_steps, asked.topk, asked.num_draft_tokens),
                     "num_steps": res.num_steps, "topk": res.topk,
                     "num_draft_tokens": res.num_draft_tokens, "changed": res.differs,
                     "warnings": list(res.warnings),
                     "findings": [f.code for f in res.findings], "source": res.source})
    return pd.DataFrame(rows).set_index("flag set")


def compare_resolutions(ours, sglang):
    """Side by side: eagle3lab's rules and SGLang's resolver, with an `agree` column."""
    import pandas as pd

    cols = ["num_steps", "topk", "num_draft_tokens"]
    out = pd.DataFrame({"eagle3lab": [tuple(r) for r in ours[cols].itertuples(index=False)],
                        "sglang": [tuple(r) for r in sglang[cols].itertuples(index=False)],
                        "same warnings": [sorted(a) == sorted(b) for a, b in
                                          zip(ours["warnings"], sglang["warnings"])]},
                       index=ours.index)
    out["agree"] = (out["eagle3lab"] == out["sglang"]) & out["same warnings"]
    return out


def warnings_table(resolved):
    """Each distinct engine warning once, with the flag sets that trigger it."""
    import pandas as pd

    seen: dict[str, list[str]] = {}
    for label, row in resolved.iterrows():
        for warning in row["warnings"]:
            seen.setdefault(warning, []).append(label)
    return pd.DataFrame({"SGLang warns": list(seen), "for": ["; ".join(v) for v in seen.values()]})


"""How much does the seed's wiring mismatch cost on this lab, and why?

    .venv/bin/python benchmarks/wiring_sensitivity.py --preset default
    .venv/bin/python benchmarks/wiring_sensitivity.py --lab-dir /tmp/lab-deep

Decodes held-out prompts with the seed draft wired five ways (as trained, as SGLang serves
it, with its hidden-state input zeroed: what the draft predicts from token embeddings and
its own context alone, and with only slot 0 or only the later slots miswired) and the
healthy draft for scale, then prints how alike the trained and
served boundaries are (cosine and norm ratio per slot). When the served boundaries point the
same way as the trained ones, the mismatch costs little acceptance: the draft's linear read
of the residual stream still works one boundary later.
"""

from __future__ import annotations

import argparse
import json
import sys
from statistics import fmean as mean

import torch

from eagle3lab.commands.lab_bench import prompt_count


def boundary_similarity(lab, fc: torch.Tensor, trained: list[int], served: list[int],
                        prompts) -> list[dict]:
    """Per draft slot: mean cosine and norm ratio of served vs trained boundary states, and
    the size of the slot's share of the fc output (W_slot @ state) under either wiring: a
    served share far above the trained fc output swamps what the draft learned to read."""
    H = fc.shape[1] // len(trained)
    acc = {key: [[] for _ in trained] for key in ("cosine", "norm_ratio", "fc_trained", "fc_served")}
    fc_out = {"trained": [], "served": []}
    with torch.inference_mode():
        for p in prompts:
            hs = lab.target(torch.tensor([p]), output_hidden_states=True).hidden_states
            for name, wiring in (("trained", trained), ("served", served)):
                feats = torch.cat([hs[b][0] for b in wiring], dim=-1)
                fc_out[name].append((feats @ fc.T).norm(dim=-1).mean().item())
            for i, (a, b) in enumerate(zip(trained, served)):
                ta, tb, w = hs[a][0], hs[b][0], fc[:, i * H:(i + 1) * H]
                acc["cosine"][i].append(torch.nn.functional.cosine_similarity(ta, tb, dim=-1).mean().item())
                acc["norm_ratio"][i].append((tb.norm(dim=-1) / ta.norm(dim=-1)).mean().item())
                acc["fc_trained"][i].append((ta @ w.T).norm(dim=-1).mean().item())
                acc["fc_served"][i].append((tb @ w.T).norm(dim=-1).mean().item())
    rows = [{"slot": i, "trained": a, "served": b, **{k: mean(v[i]) for k, v in acc.items()}}
            for i, (a, b) in enumerate(zip(trained, served))]
    return rows, {k: mean(v) for k, v in fc_out.items()}


def wire_slots(engine, slots: list[int]) -> None:
    """Feed draft slot i the target boundary slots[i] (repeats allowed, unlike a real
    capture list): capture every boundary named once, then pick each slot's columns."""
    captured = sorted(set(slots))
    H = engine.target.hidden_size
    cols = torch.cat([torch.arange(captured.index(b) * H, (captured.index(b) + 1) * H) for b in slots])
    fc = engine.draft.fc
    engine.boundaries = tuple(captured)
    engine.draft.project = lambda aux: aux[:, cols] @ fc.T


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", default="default")
    p.add_argument("--lab-dir", default=None, help="a built lab folder instead of the preset's")
    p.add_argument("--prompts", type=prompt_count, default=8, help="a number or 'all' held-out prompts")
    p.add_argument("--max-new-tokens", type=int, default=128)
    p.add_argument("--spec", default="7/1/8", help="steps/topk/draft tokens")
    args = p.parse_args(argv)

    from eagle3lab.decoder import run_bench
    from eagle3lab.decoder.faults import build_engine, plan_faults
    from eagle3lab.lab import load_lab

    torch.set_num_threads(1)
    lab = load_lab(args.preset, build=args.lab_dir is None, root=args.lab_dir)  # a folder is never built
    spec = tuple(int(x) for x in args.spec.split("/"))
    prompts = lab.heldout_prompts(args.prompts, 64)
    n = lab.num_layers
    seed = lab.load_draft("seed")
    rows = []

    def measure(label, faults, draft=None, zero_hidden=False, slots=None):
        plan = plan_faults(faults, n)
        engine = build_engine(lab.target, draft if draft is not None else lab.load_draft(plan.draft_name),
                              plan, max_seq_len=1024)
        if zero_hidden:  # the fc output replaced by zeros: no target features reach the draft
            size = engine.draft.hidden_size
            engine.draft.project = lambda aux: torch.zeros(aux.shape[0], size, dtype=aux.dtype)
        if slots is not None:
            wire_slots(engine, slots)
        r = run_bench(lab, spec, list(faults), prompts=prompts, engine=engine,
                      max_new_tokens=args.max_new_tokens, progress=False)
        s = r.summary()
        fed = list(slots) if slots is not None else list(engine.boundaries)  # boundary per slot
        row = {"run": label, "boundaries": fed, "accept_length": s["accept_length"],
               "per_position": s["per_position_unconditional"], "speedup": s["speedup"], "lossless": s["lossless"]}
        rows.append(row)
        print(f"{label:28s} boundaries {str(row['boundaries']):14s} L={row['accept_length']:.2f}  "
              f"per position {' '.join(f'{x:.2f}' for x in row['per_position'])}  "
              f"speed-up {row['speedup']:.2f}x  lossless {row['lossless']}", flush=True)

    print(f"lab {lab.root}: {n} layers; spec {args.spec}; {len(prompts)} prompts x "
          f"{args.max_new_tokens} new tokens")
    measure("healthy", [])
    measure("seed as trained (embed-patch)", ["embed-patch"], draft=seed)
    measure("seed as served (wiring-seed)", ["wiring-seed"], draft=seed)
    measure("seed, hidden input zeroed", ["wiring-seed"], draft=seed, zero_hidden=True)
    trained = list(seed.train_boundaries)
    served = plan_faults(["wiring-seed"], n).boundaries(seed, n)
    # Which part of the mismatch costs what: one part miswired, the rest as trained.
    measure("seed, slot 0 miswired only", ["wiring-seed"], draft=seed,
            slots=[served[0]] + trained[1:])
    measure("seed, slots 1+ miswired only", ["wiring-seed"], draft=seed,
            slots=trained[:1] + served[1:])
    fc = seed.state_dict()["fc.weight"].float()
    sim, fc_out = boundary_similarity(lab, fc, trained, served, prompts)
    for r in sim:
        print(f"slot {r['slot']}: trained b{r['trained']} served b{r['served']}: "
              f"cosine {r['cosine']:.3f}, norm ratio {r['norm_ratio']:.2f}, "
              f"|fc share| {r['fc_trained']:.1f} trained -> {r['fc_served']:.1f} served")
    print(f"|fc output|: {fc_out['trained']:.1f} as trained, {fc_out['served']:.1f} as served")
    print(json.dumps({"runs": rows, "slots": sim, "fc_output": fc_out}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Acceptance by prompt on the lab, measured in the run: the fall with prompt length (the lab's
long-context prompts served to drafts trained on short sequences) and the gap between categories
(the lab's domain-shift prompts against held-out code), from the lab engine's step records or
from the lab server's per-request histograms, plus what notebooks 04 and 05 show of them.

Prompt kinds (the lab's `long-context` and `domain-shift` faults' prompts,
`decoder.labbench.bench_prompts` / `decoder.faults.domain_shift_texts`):
* code, short: held-out passages' opening windows of SHORT_TOKENS tokens;
* code, long: windows of LONG_TRAIN_MULTIPLE x the drafts' training length (config.json
  `eagle3lab.train_seq_len`), cut to what the context leaves;
* numbers: the domain-shift fault's comma-separated numbers, cut to SHORT_TOKENS tokens.
The negative control (`control_prompts`): code windows of one length, split into two
categories at random; neither a length fall nor a category gap is there to find.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from eagle3lab.acceptance import byprompt

SHORT_TOKENS = 32
LONG_TRAIN_MULTIPLE = 6  # long prompts: this many times the drafts' training length
PROMPTS_PER_KIND = 16
NEW_TOKENS = 48
LAB_SPEC = (3, 1, 4)  # num_steps, topk, num_draft_tokens: a chain, so per-position rates exist


def _stream(lab) -> list[int]:
    """The held-out passages as one token stream (none of it trained on)."""
    out: list[int] = []
    for text in lab.heldout_texts():
        out += lab.tokenizer.encode(text)
    return out


def _windows(stream: list[int], n: int, length: int) -> list[list[int]]:
    stride = max(1, (len(stream) - length) // n)
    return [stream[i * stride: i * stride + length] for i in range(n)]


def train_seq_len(lab, draft: str = "healthy") -> int | None:
    """The draft's training length as its config.json records it (None when it does not)."""
    config = json.loads((lab.draft_dir(draft) / "config.json").read_text())
    return byprompt.training_length(config)[0]


def lab_prompts(lab, n: int = PROMPTS_PER_KIND, max_prompt_tokens: int = 560, draft: str = "healthy"):
    """(PromptSet of texts, token ids per prompt): short code, long code and numbers prompts."""
    from eagle3lab.decoder.faults import domain_shift_texts

    stream, tok = _stream(lab), lab.tokenizer
    trained = train_seq_len(lab, draft) or SHORT_TOKENS
    long_tokens = min(LONG_TRAIN_MULTIPLE * trained, max_prompt_tokens)
    numbers = [t for i, t in enumerate(domain_shift_texts(3 * n + 3, seed=1)) if i % 3 == 2][:n]
    ids = (_windows(stream, n, SHORT_TOKENS) + _windows(stream, n, long_tokens)
           + [tok.encode(t)[:SHORT_TOKENS] for t in numbers])
    cats = ["code"] * (2 * n) + ["numbers"] * n
    return byprompt.PromptSet([tok.decode(i) for i in ids], cats, source="the lab's prompts"), ids


def control_prompts(lab, n: int = 2 * PROMPTS_PER_KIND):
    """(PromptSet, ids): code windows of one length, every other one in category "a", the rest
    in "b". Over 300 random 16/16 splits of the ci lab's 32 windows, 0.3 % showed a category
    gap (intervals separate by chance), as 95 % intervals that do not overlap should."""
    ids = _windows(_stream(lab), n, SHORT_TOKENS)
    cats = ["a" if i % 2 == 0 else "b" for i in range(n)]
    return byprompt.PromptSet([lab.tokenizer.decode(i) for i in ids], cats,
                              source="the negative control's prompts"), ids


def write_prompts(pset: byprompt.PromptSet, path) -> Path:
    """The prompts as JSON lines with text and category (what `--prompts` reads)."""
    path = Path(path)
    path.write_text("".join(json.dumps({"category": c, "text": t}) + "\n"
                            for t, c in zip(pset.texts, pset.categories)))
    return path


def measure_engine(lab, pset, ids, draft: str = "healthy", spec=LAB_SPEC,
                   max_new_tokens: int = NEW_TOKENS) -> byprompt.ByPrompt:
    """The breakdown from the lab engine's step records (the prompts' token ids, greedy)."""
    from eagle3lab.decoder.labbench import make_lab_engine
    from eagle3lab.decoder.speculate import SamplingParams, SpecParams

    engine, _ = make_lab_engine(lab, draft=lab.load_draft(draft))
    params, greedy = SpecParams.of(spec), SamplingParams(temperature=0.0)
    steps, requests = [], []
    for r, prompt in enumerate(ids):
        gen = engine.generate(prompt, max_new_tokens, params, greedy)
        steps += [{"request": r, "accepted": s.accepted} for s in gen.steps]
        requests.append({"request": r, "prompt_tokens": len(prompt), "category": pset.categories[r]})
    return byprompt.by_prompt(pd.DataFrame(steps), pd.DataFrame(requests), params.num_steps,
                              "the lab engine's step records")


def measure_server(server, pset, ids, k: int, max_new_tokens: int = NEW_TOKENS) -> byprompt.ByPrompt:
    """The breakdown from a running server's per-request histograms (token ids sent)."""
    from eagle3lab.serving import loadtest

    result = loadtest.run(server, ids, max_new_tokens=max_new_tokens, temperature=0.0, progress=False)
    found = byprompt.from_load_test(result, pset, k, "the lab server's per-request histograms")
    if found is None:
        from eagle3lab.errors import EagleLabError

        raise EagleLabError(f"no per-request histogram from {getattr(server, 'url', server)}")
    return found


def measure_lab_server(lab, pset, ids, draft: str = "healthy", spec=LAB_SPEC,
                       max_new_tokens: int = NEW_TOKENS) -> byprompt.ByPrompt:
    """Launch the lab server (the draft, a chain), measure, stop it."""
    from eagle3lab.serving import server
    from eagle3lab.spec import SpecConfig

    k, topk, n = spec
    with server.launch("lab", lab.target_dir, lab.draft_dir(draft),
                       spec=SpecConfig(num_steps=k, topk=topk, num_draft_tokens=n),
                       extra_args=("--max-new-tokens", str(max_new_tokens))) as srv:
        return measure_server(srv, pset, ids, k, max_new_tokens)


def observe_url(server_url: str, prompts, max_new_tokens: int = 64, requested=None):
    """A running SGLang (or lab) server's Observation from one window of `prompts`: accept
    length and per-position rates from each request's histogram, no log file needed (what
    `experiments.serve_and_log` should use with SERVER_URL; None without speculation)."""
    from eagle3lab.serving import loadtest
    from eagle3lab.serving import server

    srv = server.connect(server_url)
    result, obs = loadtest.measure(srv, prompts, max_new_tokens=max_new_tokens, progress=False)
    return obs if obs is not None or srv.api == "openai" else None


# --------------------------------------------------------------------------- notebooks

def hypothesis_rows(found: byprompt.ByPrompt, draft_config: dict) -> pd.DataFrame:
    """Notebook 05's rows: 'acceptance falls with context' and 'acceptance differs by domain',
    each with what was measured and whether the intervals separate."""
    rows = []
    fall = byprompt.length_fall(found)
    t = found.by_length
    if t is not None and len(t) >= 2:
        a, b = t.iloc[0], t.iloc[-1]
        rows.append({"hypothesis": "acceptance falls with prompt length (context_length)",
                     "measured": f"{a['accept_length']:.2f} [{a['lo']:.2f}, {a['hi']:.2f}] at {a['length']} vs "
                                 f"{b['accept_length']:.2f} [{b['lo']:.2f}, {b['hi']:.2f}] at {b['length']}",
                     "intervals separate": fall is not None,
                     "draft": byprompt.draft_lengths_line(draft_config), "source": found.source})
    gap = byprompt.category_gap(found)
    c = found.by_category
    if c is not None and len(c) >= 2:
        lo, hi = c.sort_values("accept_length").iloc[0], c.sort_values("accept_length").iloc[-1]
        rows.append({"hypothesis": "acceptance differs by category (distribution_shift)",
                     "measured": f"{lo['category']} {lo['accept_length']:.2f} [{lo['lo']:.2f}, {lo['hi']:.2f}] vs "
                                 f"{hi['category']} {hi['accept_length']:.2f} [{hi['lo']:.2f}, {hi['hi']:.2f}]",
                     "intervals separate": gap is not None, "draft": "", "source": found.source})
    return pd.DataFrame(rows)


def plot_by_prompt(found: byprompt.ByPrompt, title: str | None = None):
    """Accept length against prompt length (buckets at their median length) and by category,
    each with its 95 % interval over requests."""
    from eagle3lab.viz.plots import _close, _figure
    from eagle3lab.viz.style import COLORS

    panels = 2 if found.by_category is not None else 1
    fig, axes = _figure(1, panels, figsize=(5 * panels, 3.6), squeeze=False)
    t = found.by_length
    ax = axes[0][0]
    ax.errorbar(t["prompt_tokens"], t["accept_length"],
                yerr=[t["accept_length"] - t["lo"], t["hi"] - t["accept_length"]],
                fmt="o-", capsize=4, color=COLORS["observed"])
    ax.set_xlabel("prompt tokens (bucket median)")
    ax.set_ylabel("accept length (1 + accepted drafts per step)")
    ax.set_title("by prompt length")
    if found.by_category is not None:
        c = found.by_category
        ax = axes[0][1]
        ax.bar(c["category"], c["accept_length"], yerr=[c["accept_length"] - c["lo"], c["hi"] - c["accept_length"]],
               capsize=4, color=COLORS["model"])
        ax.set_title("by category (matched prompt lengths)")
    fig.suptitle(title or f"Acceptance by prompt: {found.source}, {found.n_requests} requests, 95 % intervals")
    fig.tight_layout()
    return _close(fig)


def run_by_prompt(lab_name: str = "ci", server_url: str | None = None, via: str = "server",
                  draft: str = "healthy") -> tuple[byprompt.ByPrompt, dict]:
    """(breakdown, draft config) of the lab's prompts: through the lab server (via="server", what
    a user's SGLang gives), the lab engine's step records (via="engine"), or a running server at
    `server_url` (the same prompts as text)."""
    from eagle3lab.lab import load_lab

    lab = load_lab(lab_name)
    pset, ids = lab_prompts(lab, draft=draft)
    config = json.loads((lab.draft_dir(draft) / "config.json").read_text())
    if server_url:
        from eagle3lab.serving import server

        from eagle3lab.spec import SpecConfig

        srv = server.connect(server_url)
        running = SpecConfig.from_server_info(srv.server_info() or {})
        return measure_server(srv, pset, pset.texts, running.num_steps if running else None), config
    if via == "engine":
        return measure_engine(lab, pset, ids, draft=draft), config
    return measure_lab_server(lab, pset, ids, draft=draft), config


def markdown(found: byprompt.ByPrompt, draft_config: dict) -> str:
    """What the breakdown shows, in words built from its values."""
    rows = hypothesis_rows(found, draft_config)
    lines = [f"Measured in this run ({found.source}, {found.n_requests} requests, 95 % intervals over requests):"]
    for row in rows.to_dict("records"):
        verdict = "the intervals separate" if row["intervals separate"] else "the intervals overlap: no claim"
        lines.append(f"- {row['hypothesis']}: {row['measured']}; {verdict}"
                     + (f" ({row['draft']})" if row["draft"] else "") + ".")
    return "\n".join(lines + [f"- note: {n}" for n in found.notes])

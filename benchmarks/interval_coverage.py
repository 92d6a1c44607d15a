"""Do the report's 95 % intervals over prompts cover the truth 95 % of the time with 2-24 prompts?

    .venv/bin/python benchmarks/interval_coverage.py                 # 1000 trials per cell
    .venv/bin/python benchmarks/interval_coverage.py --trials 400 --sizes 2 6

Simulates per-prompt measurements from a few generative models (a paired speed-up with lognormal
prompt effects, the same with heavy-tailed slow-downs of single runs, tokens/s over prompts of
very different lengths, an accept length from per-request step counts, a per-position rate from
per-request counts), draws n prompts, and
counts how often each method's interval holds the model's true value (the ratio of expected sums,
from 2 million draws). Methods: the percentile bootstrap the report used until issue #24 (copied
below as the reference), Hesterberg's expanded percentile bootstrap, and `eagle3lab.acceptance.stats` as it
is (the leave-one-prompt-out jackknife with Student-t quantiles). Each coverage carries its
Monte-Carlo 95 % Wilson interval; "width" is the median over trials of the interval's width over
the old method's.
"""

from __future__ import annotations

import argparse
import functools
import math
import time

import numpy as np
import pandas as pd

from eagle3lab.acceptance import stats

K = 5  # draft depth of the accept-length model


# --------------------------------------------------------------------------- the methods

def percentile_bootstrap(columns: np.ndarray, estimate, level: float = 0.95, n_boot: int = 2000,
                         seed: int = 0):
    """The report's intervals until issue #24 (stats.ratio_ci / rate_ci / accept_length_ci):
    resample n prompts with replacement, take the 2.5 % and 97.5 % quantiles of the estimate."""
    picks = np.random.default_rng(seed).integers(0, len(columns), size=(n_boot, len(columns)))
    alpha = (1 - level) / 2
    return tuple(np.quantile(estimate(columns[picks].sum(axis=1)), [alpha, 1 - alpha]))


def expanded_bootstrap(columns: np.ndarray, estimate, level: float = 0.95, n_boot: int = 2000,
                       seed: int = 0):
    """Hesterberg's expanded percentile: the same resamples, quantiles taken further out,
    at Phi(sqrt(n / (n - 1)) t_{alpha, n-1}), to undo the bootstrap's narrowness at small n."""
    n = len(columns)
    picks = np.random.default_rng(seed).integers(0, n, size=(n_boot, n))
    t = stats.t_quantile((1 - level) / 2, n - 1) * math.sqrt(n / (n - 1))
    alpha = 0.5 * (1 + math.erf(t / math.sqrt(2)))
    return tuple(np.quantile(estimate(columns[picks].sum(axis=1)), [alpha, 1 - alpha]))


def speedup(s):
    return (s[..., 0] / s[..., 1]) / (s[..., 2] / s[..., 3])


def rate(s):
    return s[..., 0] / s[..., 1]


def accept_len(s):
    return 1.0 + s[..., 0] / s[..., 1]


def current_speedup(c):
    return stats.ratio_ci(c[:, 0], c[:, 1], c[:, 2], c[:, 3])


def current_rate(c):
    return stats.rate_ci(c[:, 0], c[:, 1], digits=4)


def current_accept_length(c):
    """stats.accept_length_ci on per-step rows rebuilt from the per-request sums."""
    acc, steps = c[:, 0].astype(int), c[:, 1].astype(int)
    rows = [(r, a) for r in range(len(c)) for a in _spread(acc[r], steps[r])]
    frame = pd.DataFrame(rows, columns=["request", "accepted"]).assign(drafted=K)
    return stats.accept_length_ci(frame)


def _spread(total: int, steps: int) -> list[int]:
    """`steps` per-step counts (each <= K) adding up to `total` (the interval only sees sums)."""
    base, extra = divmod(total, steps)
    return [base + (i < extra) for i in range(steps)]


# --------------------------------------------------------------------------- generative models

def paired_lognormal(rng, n):
    """Prompts of 32-128 tokens; a prompt's plain rate and its speed-up vary lognormally
    (sd 0.25 and 0.2 on the log scale), each run has its own 10 % timing noise."""
    tokens = rng.integers(32, 129, n).astype(float)
    base_rate = 60 * np.exp(rng.normal(0, 0.25, n))
    gain = 1.3 * np.exp(rng.normal(0, 0.2, n))
    base_s = tokens / base_rate * np.exp(rng.normal(0, 0.1, n))
    spec_s = tokens / (base_rate * gain) * np.exp(rng.normal(0, 0.1, n))
    return np.column_stack([tokens, spec_s, tokens, base_s])


def paired_heavy_tailed(rng, n):
    """As paired_lognormal, and one run in six is slowed by a Pareto(1.5) factor (another
    process on a shared 2-core CPU), in either arm independently."""
    cols = paired_lognormal(rng, n)
    for j in (1, 3):
        hit = rng.random(n) < 1 / 6
        cols[:, j] *= np.where(hit, 1 + rng.pareto(1.5, n), 1.0)
    return cols


def rate_varying_lengths(rng, n):
    """tokens/s over prompts whose lengths span 4-256 tokens (geometric: stops at EOS), with
    a fixed 0.05 s prefill and a lognormal per-prompt rate (sd 0.3)."""
    tokens = np.minimum(rng.geometric(1 / 60, n), 256).astype(float) + 3
    seconds = 0.05 + tokens / (50 * np.exp(rng.normal(0, 0.3, n)))
    return np.column_stack([tokens, seconds])


def accept_length_counts(rng, n):
    """Per request: 5-40 verify steps; a prompt's per-position acceptance p ~ Beta(2, 2); each
    step accepts the run of drafts before the first rejection, at most K."""
    steps = rng.integers(5, 41, n)
    p = rng.beta(2, 2, n)
    accepted = np.array([np.minimum(rng.geometric(1 - p[i], steps[i]) - 1, K).sum() for i in range(n)])
    return np.column_stack([accepted, steps]).astype(float)


def position_counts(rng, n):
    """Per request: 5-40 verify steps; the first draft is accepted with the prompt's p ~ Beta(2, 2):
    the position-1 rate (P(at least 1 accepted), vLLM's count) pooled over requests."""
    steps = rng.integers(5, 41, n)
    return np.column_stack([rng.binomial(steps, rng.beta(2, 2, n)), steps]).astype(float)


def current_position_rate(c):
    """stats.per_position's position-1 interval on per-step rows rebuilt from the counts."""
    hits, steps = c[:, 0].astype(int), c[:, 1].astype(int)
    rows = [(r, int(i < hits[r])) for r in range(len(c)) for i in range(steps[r])]
    table = stats.per_position(pd.DataFrame(rows, columns=["request", "accepted"]), k=1, conditional=False)
    return float(table["lo"].iloc[0]), float(table["hi"].iloc[0])


MODELS = {
    "speed-up, lognormal prompts": (paired_lognormal, speedup, current_speedup),
    "speed-up, heavy-tailed runs": (paired_heavy_tailed, speedup, current_speedup),
    "tokens/s, varying lengths": (rate_varying_lengths, rate, current_rate),
    "accept length, K=5": (accept_length_counts, accept_len, current_accept_length),
    "position-1 rate": (position_counts, rate, current_position_rate),
}


@functools.lru_cache(maxsize=None)
def truth(model, draws: int = 2_000_000, seed: int = 12345) -> float:
    """The model's value: the estimand at expected sums (estimate of a huge sample)."""
    sample, estimate, _ = MODELS[model]
    if model.startswith(("accept length", "position")):
        draws = 200_000  # drawn request by request
    return float(estimate(sample(np.random.default_rng(seed), draws).sum(axis=0)))


# --------------------------------------------------------------------------- coverage

def coverage(model: str, n: int, trials: int, seed: int = 0) -> dict:
    """Hits and median width ratio (vs the old percentile bootstrap) of each method."""
    sample, estimate, current = MODELS[model]
    value = truth(model)
    rng = np.random.default_rng([seed, n])
    methods = {"old": lambda c: percentile_bootstrap(c, estimate),
               "expanded": lambda c: expanded_bootstrap(c, estimate), "new": current}
    hits = dict.fromkeys(methods, 0)
    widths = {name: [] for name in methods}
    for _ in range(trials):
        cols = sample(rng, n)
        for name, method in methods.items():
            lo, hi = method(cols)
            hits[name] += lo <= value <= hi
            widths[name].append(hi - lo)
    old = np.asarray(widths["old"])
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = {name: float(np.median(np.asarray(w) / old)) for name, w in widths.items()}
    return {"hits": hits, "width": ratio}


def _cell(hits: int, trials: int) -> str:
    lo, hi = stats.wilson_interval(hits, trials)
    return f"{100 * hits / trials:4.1f} ({100 * lo:.0f}-{100 * hi:.0f})"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1000, help="simulated samples per model and n")
    parser.add_argument("--sizes", type=int, nargs="+", default=[2, 3, 4, 6, 12, 24], help="prompts per sample")
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    args = parser.parse_args(argv)
    start = time.perf_counter()
    print(f"coverage of nominal 95 % intervals, % of {args.trials} simulated samples "
          "(Monte-Carlo 95 % Wilson interval); width: median width over the old method's\n")
    print("| model | n | old: percentile bootstrap | expanded percentile | new: jackknife-t | "
          "width expanded/old | width new/old |")
    print("|---|---|---|---|---|---|---|")
    for model in args.models:
        for n in args.sizes:
            got = coverage(model, n, args.trials)
            h, w = got["hits"], got["width"]
            print(f"| {model} | {n} | {_cell(h['old'], args.trials)} | {_cell(h['expanded'], args.trials)} | "
                  f"{_cell(h['new'], args.trials)} | {w['expanded']:.2f} | {w['new']:.2f} |", flush=True)
    print(f"\n{time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

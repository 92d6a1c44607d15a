#!/usr/bin/env python3
"""eagle3_probe.py: how much of an EAGLE-3 draft a running server keeps, position by position.

    python3 eagle3_probe.py --url URL --prompts FILE [--num-prompts N] [--max-new-tokens M]
                            [--baseline-tps B] [--draft-accuracy A] [--json]

Python 3.8+, standard library only. Against SGLang (or eagle3lab's lab server, which speaks its HTTP API) or
vLLM's OpenAI server it
1. says what runs: version and speculative settings as the server resolved them (SGLang's /server_info or
   /get_server_info; vLLM's /version, /metrics, /server_info in dev mode);
2. sends the first N prompts of FILE one at a time, greedy, FILE read as `eagle3lab bench --prompts` reads it;
3. reads acceptance: SGLang's meta_info per reply (completion_tokens / spec_verify_ct; the histogram of steps by
   drafts accepted, `spec_accept_histogram` in 0.5.9-0.5.20, `spec_correct_drafts_histogram` from 0.5.12), rates
   P(accept i | 1..i-1 accepted); vLLM's /metrics counters over the run, rates P(at least i accepted);
4. prints the accept length and per-position rates with 95 % intervals over requests (eagle3lab's jackknife-t
   widened to the exact binomial interval), positions 2.. pooled; given A (the draft's validation accuracy), the
   profile they fit; given B (the same server's tokens/s without speculation, measured the same way), the step
   cost C = L x B / S in no-speculation steps, also the break-even accept length.
--json prints one JSON line, `accept_length`, `accept_length_ci95`, `per_position` and `per_position_ci95` as
`eagle3lab bench --url ... --json` names them. Exit codes: 0 measured; 1 requests failed (what completed is
reported); 2 bad arguments or prompts file; 3 no readable server; 4 no speculative decoding (its tokens/s is B).
"""

from __future__ import annotations

import argparse, functools, json, math, os, re, socket, sys, time  # noqa: E401 - the standard library only
import urllib.error, urllib.parse, urllib.request  # noqa: E401
from collections import Counter
from http.client import HTTPException

VERSION = "1"
HEALTH_TIMEOUT_S, INFO_TIMEOUT_S, REQUEST_TIMEOUT_S, SETTLE_S = 10.0, 10.0, 600.0, 5.0
# SGLang's per-request histogram in meta_info by release, (first, last read, fields): srt/managers/tokenizer_manager.py
HISTOGRAM_RELEASES = (((0, 0, 0), (0, 5, 8), ()),
                      ((0, 5, 9), (0, 5, 11), ("spec_accept_histogram",)),
                      ((0, 5, 12), (0, 5, 20), ("spec_correct_drafts_histogram", "spec_accept_histogram")),
                      ((0, 5, 21), (0, 5, 23), ("spec_correct_drafts_histogram",)))
HISTOGRAM_FIELDS = ("spec_correct_drafts_histogram", "spec_accept_histogram")  # either, newest first
VLLM_PREFIX = "vllm:spec_decode_"
VLLM_COUNTERS = {"num_drafts": "drafts", "num_draft_tokens": "draft_tokens", "num_accepted_tokens": "accepted"}
VLLM_PER_POSITION = "num_accepted_tokens_per_pos"
VLLM_HISTOGRAM = "metrics.speculative_decoding.acceptance_histogram"
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_NO_SERVER, EXIT_NO_SPECULATION = 0, 1, 2, 3, 4
NETWORK_ERRORS = (OSError, ValueError, HTTPException)  # refused, reset, timed out, cut short, garbled
# The post-mortem's table of profiles: eagle3lab's diagnosis thresholds (acceptance.diagnosis.cause_rules,
# set on its lab; tests/test_probe_script.py checks the copy), position 1 over A, positions 2.. over position 1.
PROFILE_THRESHOLDS = {"dead": 0.4, "collapse": 0.3, "sag": 0.7, "first_ok": 0.75, "healthy": 0.8}
PROFILES = {"wiring": "wrong inputs (recheck the ids)", "multi_step": "no TTT (retrain with TTT)",
            "healthy": "a healthy draft (chain lengths decide)", "quantization": "none of those (check a quantized "
            "target, then prompts unlike the training data, then the ids)"}

class ProbeError(Exception):
    """A one-line reason to stop; args: (message, exit code)."""
    code = property(lambda self: self.args[1] if len(self.args) > 1 else EXIT_NO_SERVER)

# --------------------------------------------------------------------------- the prompts file
def read_text_file(path, what="--prompts"):
    """The text of a file (UTF-8, a BOM allowed), or a ProbeError saying why not."""
    why = ("is a folder, not a file" if os.path.isdir(path) else "not found" if not os.path.exists(path)
           else "is not a regular file" if not os.path.isfile(path) else None)
    if why:
        raise ProbeError(f"{what}: {path} {why}", EXIT_USAGE)
    try:
        with open(path, "rb") as fh:
            data = fh.read()
        text = data.decode("utf-8-sig")
    except OSError as exc:
        raise ProbeError(f"{what}: cannot read {path} ({exc.strerror or exc})", EXIT_USAGE) from None
    except UnicodeDecodeError as exc:
        raise ProbeError(f"{what}: {path} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset "
                         f"{exc.start}); save it as UTF-8", EXIT_USAGE) from None
    if "\x00" in text:
        raise ProbeError(f"{what}: {path} holds NUL bytes (offset {text.index(chr(0))}): not a text file", EXIT_USAGE)
    return text

def text_of(record):
    """A JSON record's prompt: text, prompt, or a chat's contents joined by newlines."""
    for key in ("text", "prompt"):
        if isinstance(record.get(key), str) and record[key].strip():
            return record[key]
    messages = record.get("messages")
    if isinstance(messages, list) and messages:
        parts = [m.get("content") for m in messages if isinstance(m, dict)]
        if parts and all(isinstance(p, str) for p in parts) and "".join(parts).strip():
            return "\n".join(parts)
    return None

def parse_prompts(lines):
    """(texts, lines left out by reason) of a prompts file's non-empty lines."""
    records, skipped = [], Counter()
    for line in lines:
        try:
            rec = json.loads(line) if line.lstrip().startswith("{") else {"text": line.replace("\\n", "\n")}
        except ValueError:
            skipped["not valid JSON"] += 1
            continue
        records.append(rec if isinstance(rec, dict) else {})
    categorised = any("category" in r for r in records)
    texts = []
    for rec in records:
        value = rec.get("category")
        why = ("no text" if text_of(rec) is None else None if not categorised else "no category" if value is None
               else f"unknown category {value!r} (not a name)" if not isinstance(value, str) or not value.strip()
               else None)
        skipped.update([why] if why else [])
        texts += [] if why else [text_of(rec)]
    return texts, skipped

def load_prompts(path, num_prompts, say=print):
    """The first num_prompts prompts of the file, and a note on the lines left out (or None)."""
    lines = [line for line in read_text_file(path).splitlines() if line.strip()]
    if not lines:
        raise ProbeError(f"no prompts in {path} (every line is empty)", EXIT_USAGE)
    if len(lines) > num_prompts:
        say(f"prompts: the first {num_prompts} of {len(lines)} in {path} (--num-prompts {num_prompts})")
    texts, skipped = parse_prompts(lines)
    name, n = os.path.basename(path), sum(skipped.values())
    note = f"{n} line(s) of {name} left out ({counted(skipped)})" if n else None
    if not texts:
        raise ProbeError(f"no usable prompt in {name}" + (f" ({note})" if note else ""), EXIT_USAGE)
    return texts[:num_prompts], note

def counted(reasons):
    return "; ".join(f"{why}: {count}" for why, count in reasons.most_common())

# --------------------------------------------------------------------------- HTTP
def check_url(url):
    """http(s)://HOST[:PORT][/PATH] (HOST:PORT gets http://), or a ProbeError at once."""
    text = str(url).strip()
    why = "it is empty" if not text else "it holds spaces" if any(c.isspace() for c in text) else None
    full = text if "://" in text else f"http://{text}"
    if why is None:
        try:
            parts = urllib.parse.urlsplit(full)
            parts.port  # noqa: B018 - a port that is no number in range raises ValueError
            why = (f"scheme {parts.scheme!r} (use http:// or https://)" if parts.scheme not in ("http", "https")
                   else None if parts.hostname else "no host")
        except ValueError as exc:
            why = str(exc)
    if why:
        raise ProbeError(f"{text!r} is not a valid server URL ({why}); expected http://HOST:PORT", EXIT_USAGE)
    return full.rstrip("/")

def http(url, body=None, timeout=INFO_TIMEOUT_S):
    """(status, text) of a GET, or of a POST of `body` as JSON; a network failure raises NETWORK_ERRORS."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"} if data else {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode("utf-8", "replace")

def get_json(url):
    """The JSON of a GET that answers 200, else None (never raises)."""
    try:
        status, text = http(url)
        return json.loads(text) if status == 200 else None
    except NETWORK_ERRORS:
        return None

def why_unreachable(exc):
    reason = getattr(exc, "reason", exc)
    return ("nothing answers there (connection refused)" if isinstance(reason, ConnectionRefusedError)
            else "no answer in time" if isinstance(reason, (socket.timeout, TimeoutError))
            else f"cannot reach it ({type(reason).__name__}: {reason})")

# --------------------------------------------------------------------------- who answers
def identify(url):
    """What the server says it runs: engine, version, speculative settings and their source."""
    try:
        status, _ = http(f"{url}/health", timeout=HEALTH_TIMEOUT_S)
    except NETWORK_ERRORS as exc:
        raise ProbeError(f"{url}: {why_unreachable(exc)}") from None
    if status != 200:
        raise ProbeError(f"{url}/health answered HTTP {status}: not a healthy SGLang or vLLM server")
    for path in ("/server_info", "/get_server_info"):  # SGLang: both from 0.5.6, the second only before
        info = get_json(url + path)
        if isinstance(info, dict) and info and "vllm_config" not in info:
            return sglang_server(url, info, path)
    models = get_json(f"{url}/v1/models")
    if not isinstance(models, dict) or not isinstance(models.get("data"), list):
        raise ProbeError(f"{url}: answers /health but neither /server_info (SGLang) nor /v1/models (vLLM)")
    return vllm_server(url)

def sglang_server(url, info, path):
    """Settings from SGLang's server info: top level (ServerArgs), else under server_args."""
    nested = info.get("server_args") if isinstance(info.get("server_args"), dict) else {}
    field = lambda key: info.get(key, nested.get(key))  # noqa: E731
    algorithm, said = field("speculative_algorithm"), "speculative_algorithm" in {**nested, **info}
    depth = str(algorithm or "").upper() in ("EAGLE3", "EAGLE", "NEXTN", "STANDALONE")  # eagle3lab reads none else
    return {"url": url, "api": "generate", "engine": "eagle3lab" if info.get("engine") == "eagle3lab" else "sglang",
            "version": str(info.get("version") or "") or None, "settings_from": path, "algorithm": algorithm,
            **{key: whole(field(name)) if depth else None for key, name in (
                ("num_steps", "speculative_num_steps"), ("topk", "speculative_eagle_topk"),
                ("num_draft_tokens", "speculative_num_draft_tokens"))},
            "draft_model_path": field("speculative_draft_model_path"), "launch_command": info.get("launch_command"),
            "warnings": [str(w) for w in info.get("speculative_warnings") or []],
            "speculative": bool(algorithm) if said else None}  # None: the replies will say

def vllm_server(url):
    """Settings from /metrics (a per-position series per draft token) and, in dev mode, /server_info."""
    version, dev, counters = get_json(f"{url}/version"), get_json(f"{url}/server_info?config_format=json"), scrape(url)
    config = dev.get("vllm_config") if isinstance(dev, dict) and isinstance(dev.get("vllm_config"), dict) else {}
    spec = config.get("speculative_config") if isinstance(config.get("speculative_config"), dict) else {}
    k = len(counters["per_position"])
    return {"url": url, "api": "openai", "engine": "vllm", "settings_from": "/metrics",
            "version": str(version["version"]) if isinstance(version, dict) and version.get("version") else None,
            "warnings": [], "speculative": counters["present"],
            "algorithm": spec.get("method") or ("method not reported (dev mode off)" if counters["present"] else None),
            "num_steps": k or None, "topk": 1 if k else None, "num_draft_tokens": k + 1 if k else None,
            "draft_model_path": spec.get("model")}

def whole(value):
    return None if number(value) is None or isinstance(value, bool) else int(number(value))

def histogram_fields_of(version):
    """In words: the histogram field(s) an SGLang version returns."""
    m = re.match(r"v?(\d+)(?:\.(\d+))?(?:\.(\d+))?", str(version or "").strip())
    if m is None:
        return f"(version {version!r}: which histogram it returns cannot be said)"
    v = tuple(int(g or 0) for g in m.groups())
    for first, last, fields in HISTOGRAM_RELEASES:
        if first <= v <= last:
            return " and ".join(f"meta_info[{f!r}]" for f in fields) or \
                "no per-request histogram (the first release with one is 0.5.9)"
    return "(a release after 0.5.23, the last read: `spec_correct_drafts_histogram` there)"

# --------------------------------------------------------------------------- vLLM's /metrics
SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)")
LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"')

def parse_metrics(text):
    """vLLM's spec-decode counters in Prometheus text, summed over engines (data-parallel
    ranks); `present` when the server has them (it registers them only with speculation)."""
    out, per_pos = {"drafts": 0.0, "draft_tokens": 0.0, "accepted": 0.0, "present": False}, {}
    for line in text.splitlines():
        m = SAMPLE.match(line) if line.startswith(VLLM_PREFIX) else None
        if m is None or not m.group(1).endswith("_total"):
            continue  # comments, other metrics, *_created (when a series was made)
        name, labels = m.group(1)[len(VLLM_PREFIX):-len("_total")], dict(LABEL.findall(m.group(2) or ""))
        try:
            value = float(m.group(3))
        except ValueError:
            raise ProbeError(f"/metrics: not Prometheus text ({line[:80]!r})") from None
        if name in VLLM_COUNTERS:
            out[VLLM_COUNTERS[name]] += value
            out["present"] = True
        elif name == VLLM_PER_POSITION and labels.get("position", "").isdigit():
            per_pos[int(labels["position"])] = per_pos.get(int(labels["position"]), 0.0) + value
    if sorted(per_pos) != list(range(len(per_pos))):
        raise ProbeError(f"/metrics: per-position series are not 0..k-1: {sorted(per_pos)}")
    return {**out, "per_position": [per_pos[i] for i in range(len(per_pos))]}

def scrape(url):
    try:
        status, text = http(f"{url}/metrics")
    except NETWORK_ERRORS as exc:
        raise ProbeError(f"{url}/metrics: {why_unreachable(exc)}") from None
    if status != 200:
        raise ProbeError(f"{url}/metrics answered HTTP {status}")
    return parse_metrics(text)

def settled(url, before, done):
    """/metrics after the run: vLLM counts a request's last step just after it answers."""
    expected = before["drafts"] + sum(number(r.get("verify_ct")) or 0.0 for r in done)
    deadline = time.monotonic() + SETTLE_S
    while True:
        after = scrape(url)
        if after["drafts"] >= expected or time.monotonic() > deadline:
            return after
        time.sleep(0.05)

# --------------------------------------------------------------------------- the requests
def request_once(srv, prompt, max_new_tokens):
    """One greedy request: a row with ok, completion_tokens, verify_ct and the histogram."""
    generate = srv["api"] == "generate"
    body = {"text": prompt, "stream": False, "sampling_params": {"max_new_tokens": max_new_tokens,
                                                                   "temperature": 0.0}} \
        if generate else {"prompt": prompt, "max_tokens": max_new_tokens, "temperature": 0.0}
    status, text = http(srv["url"] + ("/generate" if generate else "/v1/completions"), body, REQUEST_TIMEOUT_S)
    if status != 200:
        return {"ok": False, "error": f"HTTP {status}: {' '.join(text.split())[:120]}"}
    try:
        reply = json.loads(text)
    except ValueError:
        reply = None
    if not isinstance(reply, dict):
        return {"ok": False, "error": "the reply is not a JSON object"}
    part = lambda d, key: d.get(key) if isinstance(d.get(key), dict) else {}  # noqa: E731
    if generate:
        meta = part(reply, "meta_info")
        field = next((f for f in HISTOGRAM_FIELDS if meta.get(f) is not None), None)
        return {"ok": True, "completion_tokens": meta.get("completion_tokens"), "verify_ct": meta.get("spec_verify_ct"),
                "histogram": meta.get(field) if field else None, "field": field}
    spec = part(part(reply, "metrics"), "speculative_decoding")
    return {"ok": True, "completion_tokens": part(reply, "usage").get("completion_tokens"),
            "verify_ct": spec.get("num_spec_steps"), "histogram": spec.get("acceptance_histogram"),
            "field": VLLM_HISTOGRAM if spec else None}

def send_all(srv, prompts, max_new_tokens, progress=None):
    """(rows, wall seconds) of every prompt, one at a time; a server that stops answering ends the run."""
    rows, t0 = [], time.perf_counter()
    for i, prompt in enumerate(prompts):
        try:
            rows.append(request_once(srv, prompt, max_new_tokens))
        except NETWORK_ERRORS as exc:
            rows.append({"ok": False, "error": f"the server stopped answering: {why_unreachable(exc)}"})
            rows += [{"ok": False, "error": "not sent (the server stopped answering)"}] * (len(prompts) - i - 1)
            break
        if progress:
            progress(i + 1, len(prompts))
    return rows, time.perf_counter() - t0

# --------------------------------------------------------------------------- statistics
# The arithmetic of eagle3lab.acceptance.stats (jackknife_interval, exact_binomial_interval,
# share_interval, per_position) in plain Python.

def ratio(a, b):
    return a / b if b else (math.nan if a == 0 else math.inf)

def number(value):
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None

@functools.lru_cache(maxsize=256)
def t_quantile(p, df):
    """The p-quantile of Student's t, df >= 1 (exact CDF, A&S 26.7.3-4, by bisection)."""
    if p < 0.5:
        return -t_quantile(1 - p, df)
    target, lo, hi = 2 * p - 1, 0.0, 1.0
    while t_central(hi, df) < target:
        hi *= 2
    for _ in range(80):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if t_central(mid, df) < target else (lo, mid)
    return (lo + hi) / 2

def t_central(t, df):
    """P(|T| < t) for T ~ Student t with integer df: a finite sum in cos(theta)."""
    theta = math.atan(t / math.sqrt(df))
    c2, terms, term, even = math.cos(theta) ** 2, [], 1.0, df % 2 == 0
    for j in range(1, df // 2 if even else (df - 1) // 2):
        term *= ((2 * j - 1) / (2 * j) if even else 2 * j / (2 * j + 1)) * c2
        terms.append(term)
    if even:
        return math.sin(theta) * (1 + sum(terms))
    return 2 / math.pi * (theta + (0.0 if df == 1 else math.sin(theta) * math.cos(theta) * (1 + sum(terms))))

def jackknife(rows, estimate, level=0.95, floor=0.0):
    """(lo, hi) of estimate(column sums) over rows (requests): a leave-one-out jackknife of
    log(estimate - floor) with Student-t at n - 1 df; None under two rows or a non-finite value."""
    n = len(rows)
    if n < 2:
        return None
    total = [sum(col) for col in zip(*rows)]
    point, loo = estimate(total), [estimate([t - x for t, x in zip(total, row)]) for row in rows]
    if not (math.isfinite(point) and all(math.isfinite(v) for v in loo)):
        return None
    log_scale = point > floor and all(v > floor for v in loo)
    values = [math.log(v - floor) for v in loo] if log_scale else loo
    mean = sum(values) / n
    spread = math.sqrt((n - 1) / n * sum((v - mean) ** 2 for v in values))
    if not max(values) - min(values) > 0:
        return point, point
    half = t_quantile(1 - (1 - level) / 2, n - 1) * spread
    if log_scale:
        return floor + (point - floor) * math.exp(-half), floor + (point - floor) * math.exp(half)
    least = floor if point >= floor and all(v >= floor for v in loo) else -math.inf
    return max(least, point - half), point + half

def binomial_tail(hits, n, p, upper):
    """P(X >= hits) (upper) or P(X <= hits), X ~ Bin(n, p), summed in log space."""
    if p <= 0.0 or p >= 1.0:
        return float((hits == 0 if p <= 0.0 else True) if upper else (True if p <= 0.0 else hits >= n))
    lf = lambda m: math.lgamma(m + 1)  # noqa: E731 - log(m!)
    logs = [lf(n) - lf(k) - lf(n - k) + k * math.log(p) + (n - k) * math.log1p(-p)
            for k in (range(hits, n + 1) if upper else range(0, hits + 1))]
    top = max(logs)
    return math.exp(top) * sum(math.exp(v - top) for v in logs)

def exact_interval(hits, n, level=0.95):
    """The Clopper-Pearson interval of hits / n (bisection on the binomial tails)."""
    def solve(upper):
        lo, hi = 0.0, 1.0
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if (binomial_tail(hits, n, mid, upper) < (1 - level) / 2) == upper else (lo, mid)
        return (lo + hi) / 2
    return 0.0 if hits == 0 else solve(True), 1.0 if hits == n else solve(False)

def share_interval(hits, n, by_request=None, level=0.95):
    """The exact interval of hits / n, widened by the jackknife over requests ([hits, n] each)."""
    lo, hi = exact_interval(hits, n, level)
    wider = jackknife(by_request, lambda s: ratio(s[0], s[1]), level) if by_request else None
    return (lo, hi) if wider is None else (min(lo, wider[0]), max(hi, min(1.0, wider[1])))

def reached(hist):
    """reached[i]: steps that accepted i drafts or more."""
    return [sum(hist[i:]) for i in range(len(hist))]

def column_sums(hists, depth):
    return [sum(col) for col in zip(*[list(h) + [0] * (depth + 1 - len(h)) for h in hists])]

def per_position(hists, k, conditional):
    """Rows (rate, lo, hi, n at risk) of positions 1..k from per-request histograms (steps by drafts accepted)."""
    total, by_request, rows = reached(column_sums(hists, k)), [reached(column_sums([h], k)) for h in hists], []
    for i in range(k):
        at_risk, lo, hi = total[i] if conditional else total[0], math.nan, math.nan
        if at_risk > 0:
            counts = [[r[i + 1], r[i] if conditional else r[0]] for r in by_request] if len(hists) > 1 else None
            lo, hi = share_interval(total[i + 1], at_risk, counts)
        rows.append({"rate": total[i + 1] / at_risk if at_risk else math.nan, "lo": lo, "hi": hi, "n": int(at_risk)})
    return rows

def clipped(ci, low, high):
    return None if ci is None else (ci[0] if low is None else min(max(ci[0], low), ci[1]),
                                    ci[1] if high is None else max(min(ci[1], high), ci[0]))

def rounded_out(ci, digits=4):
    scale = 10 ** digits
    return None if ci is None else [round(math.floor(ci[0] * scale + 1e-9) / scale, digits),
                                    round(math.ceil(ci[1] * scale - 1e-9) / scale, digits)]

def check_histogram(value, max_accepted, verify_ct):
    """(counts, None) for a usable histogram, else (None, why): eagle3lab's checks."""
    if value is None:
        return None, "no histogram"
    if not isinstance(value, list) or not value:
        return None, "histogram not a non-empty list"
    if not all(isinstance(v, int) and not isinstance(v, bool) or isinstance(v, float) and v.is_integer()
               for v in value):
        return None, "histogram has a count that is not a whole number"
    counts = [int(v) for v in value]
    why = ("histogram has a negative count" if min(counts) < 0
           else f"histogram longer than {max_accepted} drafts allow"
           if max_accepted is not None and len(counts) > max_accepted + 1
           else "histogram counts no verify step" if sum(counts) == 0
           else "histogram does not sum to spec_verify_ct"
           if number(verify_ct) is not None and sum(counts) != int(number(verify_ct)) else None)
    return (None, why) if why else (counts, None)

# --------------------------------------------------------------------------- acceptance
def sglang_acceptance(srv, done):
    """Accept length (completion_tokens / spec_verify_ct, pooled) and conditional rates from the histograms."""
    pairs = [(number(r.get("completion_tokens")), number(r.get("verify_ct"))) for r in done]
    both = [(t, v) for t, v in pairs if t is not None and v is not None]
    out = {"verify_steps": int(sum(v for _, v in pairs if v is not None)), "warnings": list(srv["warnings"]),
           "accept_length": None, "accept_length_ci95": None}
    if not sum(v for _, v in both):
        out["warnings"].append("no reply carries spec_verify_ct > 0: no accept length")
        return out
    out["accept_length"] = sum(t for t, _ in both) / sum(v for _, v in both)
    usable = [(t, v) for t, v in both if v > 0]
    out["accept_length_ci95"] = rounded_out(clipped(jackknife(usable, lambda s: ratio(s[0], s[1]), floor=1.0),
                                                    1.0, None))
    k, topk = srv.get("num_steps"), srv.get("topk")
    hists, skipped = [], Counter()
    for r in done:
        counts, why = check_histogram(r.get("histogram"), k, r.get("verify_ct"))
        skipped.update([why] if why else [])
        hists += [counts] if counts else []
    fields = sorted({r["field"] for r in done if r.get("field")})
    out["histogram_field"] = fields[0] if len(fields) == 1 else (fields or None)
    if skipped and (hists or set(skipped) != {"no histogram"}):
        out["warnings"].append(f"{sum(skipped.values())} of {len(done)} requests left out of the per-position "
                               f"rates ({counted(skipped)})")
    if not hists:
        return out
    depth = int(k) if k else max(n for h in hists for n, c in enumerate(h) if c)
    flat = column_sums(hists, depth)
    out["accepted_distribution"] = [round(c / sum(flat), 4) for c in flat]
    if topk is not None and int(topk) > 1:
        out["warnings"].append(f"topk {topk}: a tree, so the histogram gives accepted path lengths, not per-position "
                               "acceptance: verify steps by drafts accepted, " + " ".join(
                                   f"{n}: {v:.2f}" for n, v in enumerate(out["accepted_distribution"])))
        return out
    return {**out, "table": per_position(hists, depth, conditional=True), "conditional": True,
            "requests_with_histogram": len(hists),
            "per_position_source": f"each request's acceptance histogram (meta_info `{out['histogram_field']}`)"}

def vllm_acceptance(before, after, done):
    """Rates from the counters' difference over the run; intervals from the replies' histograms."""
    delta = {key: after[key] - before[key] for key in ("drafts", "draft_tokens", "accepted")}
    if len(after["per_position"]) != len(before["per_position"]):
        raise ProbeError("the number of draft positions in /metrics changed during the run: another server answered")
    pos = [a - b for a, b in zip(after["per_position"], before["per_position"])]
    if min(list(delta.values()) + pos) < 0:
        raise ProbeError("a /metrics counter went down during the run: the server restarted")
    k, drafts = len(pos), delta["drafts"]
    out = {"verify_steps": int(drafts), "warnings": [], "accept_length": None, "accept_length_ci95": None}
    if drafts <= 0:
        return {**out, "warnings": ["no drafts counted in /metrics during the run"]}
    hists = [[int(c) for c in r["histogram"]] for r in done
             if isinstance(r.get("histogram"), list) and sum(r["histogram"]) > 0]
    table = per_position(hists, k, conditional=False) if hists else [{"lo": math.nan, "hi": math.nan}] * k
    out.update(accept_length=1.0 + delta["accepted"] / drafts, conditional=False, requests_with_histogram=len(hists),
               histogram_field=VLLM_HISTOGRAM if hists else None, per_position_source="vLLM's /metrics counters",
               table=[{"rate": pos[i] / drafts, "lo": table[i]["lo"], "hi": table[i]["hi"], "n": int(drafts)}
                      for i in range(k)])
    if not hists:
        out["warnings"].append("no per-request acceptance (start vLLM with --per-request-spec-decode-metrics"
                               " summary): no interval")
        return out
    steps = [[sum(n * c for n, c in enumerate(h)), sum(h)] for h in hists]
    ci = clipped(jackknife(steps, lambda s: 1.0 + ratio(s[0], s[1]), floor=1.0), 1.0, float(k + 1))
    out["accept_length_ci95"] = None if ci is None else [round(ci[0], 4), round(ci[1], 4)]
    flat = column_sums(hists, k)
    if (sum(flat), sum(n * c for n, c in enumerate(flat)), reached(flat)[1:]) != (drafts, delta["accepted"], pos):
        out["warnings"].append("per-request acceptance does not add up to the /metrics window "
                               "(other traffic reached the server during the run)")
    return out

# --------------------------------------------------------------------------- the run
def probe(args, say):
    url = check_url(args.url)
    prompts, note = load_prompts(args.prompts, args.num_prompts, say)  # a bad file costs no wait
    srv = identify(url)
    if len(prompts) < args.num_prompts:  # said once the server answers: bad input stays one line
        say(f"prompts: only {len(prompts)} usable in {args.prompts}, fewer than --num-prompts {args.num_prompts}; "
            "the intervals are as wide as that many prompts make them")
    before = scrape(url) if srv["api"] == "openai" and srv["speculative"] else None
    progress = None if args.json else lambda i, n: print(f"\rsent {i}/{n}", end="\n" if i == n else "", file=sys.stderr)
    rows, wall = send_all(srv, prompts, args.max_new_tokens, progress)
    done = [r for r in rows if r["ok"]]
    tokens = sum(number(r.get("completion_tokens")) or 0 for r in done)
    result = {"probe": VERSION, "url": url, **{k: v for k, v in srv.items() if k not in ("url", "warnings")},
              "prompts": len(prompts), "prompts_file": args.prompts, "prompts_note": note,
              "max_new_tokens": args.max_new_tokens, "temperature": 0.0, "completed": len(done),
              "failed": len(done) < len(rows), "errors": dict(Counter(r["error"] for r in rows if not r["ok"])),
              "wall_s": wall, "new_tokens": int(tokens), "tokens_per_s": tokens / wall if done and wall > 0 else None}
    if srv["api"] == "generate":
        result["histogram_field_expected"] = histogram_fields_of(srv["version"])
    if result["speculative"] is None:  # SGLang's info did not say: the replies do
        result["speculative"] = any(number(r.get("verify_ct")) for r in done)
    acc = {}
    if result["speculative"] and done:
        acc = vllm_acceptance(before, settled(url, before, done), done) if srv["api"] == "openai" \
            else sglang_acceptance(srv, done)
    table, conditional = acc.pop("table", None), acc.pop("conditional", None)
    result.update({"accept_length": None, "accept_length_ci95": None, **acc}, per_position=None,
                  per_position_ci95=None, per_position_n=None, per_position_conditional=conditional,
                  pooled_after_position_1=None)
    if table is not None:
        result.update(per_position=[round(r["rate"], 4) for r in table], per_position_n=[r["n"] for r in table],
                      per_position_ci95=[[round(r["lo"], 4), round(r["hi"], 4)] for r in table])
        later = [(r["rate"] * r["n"], r["n"]) for r in table[1:] if r["n"]] if conditional and table[0]["rate"] else []
        result["pooled_after_position_1"] = (round(sum(a for a, _ in later) / sum(n for _, n in later), 4)
                                             if later else None)
    result["profile"] = None if table is None or args.draft_accuracy is None else {
        "case": profile_case([r["rate"] if r["rate"] == r["rate"] else 0.0 for r in table], conditional,
                             args.draft_accuracy),
        "draft_accuracy": args.draft_accuracy}
    if args.baseline_tps is not None:
        result.update(step_cost(result, args.baseline_tps))
    return result, table  # the table unrounded: printed as eagle3lab prints it

def profile_case(rates, conditional, accuracy):
    """PROFILES' key the rates fit (eagle3lab's known_box.profile_case), from conditional or unconditional rates."""
    T, u = PROFILE_THRESHOLDS, [1.0]  # u_i: P(at least i accepted)
    for r in rates:
        u.append(u[-1] * r if conditional else r)
    tail = sum(u[2:]) / sum(u[1:-1]) if len(rates) > 1 and u[1] > 0 else u[1]
    keep1, drop = u[1] / accuracy, tail / u[1] if u[1] > 0 else 1.0
    if keep1 < T["dead"] or (drop < T["collapse"] and keep1 < T["first_ok"]):
        return "wiring"
    return "multi_step" if drop < T["sag"] else "healthy" if keep1 >= T["healthy"] else "quantization"

def step_cost(result, baseline):
    """C = L x B / S: one speculative step in no-speculation steps; speculation pays above L = C."""
    L, S, k = result.get("accept_length"), result.get("tokens_per_s"), result.get("num_steps")
    if not L or not S:
        return {"baseline_tokens_per_s": baseline,
                "step_cost": {"note": "not computed: " + ("no accept length" if not L else "no tokens/s")}}
    return {"baseline_tokens_per_s": baseline, "speedup": S / baseline, "step_cost": {
        "kind": "total", "step_cost": L * baseline / S, "break_even_accept_length": L * baseline / S,
        "reachable": None if not k else L * baseline / S <= k + 1,
        "assumptions": "B measured like S: the same server and prompts without speculation, one request at "
                       "a time, the same --max-new-tokens, wall-clock tokens/s (this script prints it against "
                       "that server); one step costs the same whatever share of the draft is kept."}}

# --------------------------------------------------------------------------- printing
def fmt(value, spec=".3f"):
    return "-" if value is None or (isinstance(value, float) and not math.isfinite(value)) else format(value, spec)

def report_lines(r, table=None):
    """The result as text: the server, what was sent, the accept length, the positions, the cost."""
    sg = r["api"] == "generate"  # SGLang's /generate (and the lab server's); else vLLM's OpenAI API
    who = {"sglang": f"SGLang {r['version'] or '(version not reported)'}",
           "eagle3lab": f"eagle3lab's engine behind an SGLang-compatible API (SGLang {r['version']}'s rules)",
           "vllm": f"vLLM {r['version'] or '(version not reported: /version)'}"}[r["engine"]]
    lines = [f"{'server':>14}  {r['url']}: {who}"]
    if r["speculative"]:
        lines.append(f"{'settings':>14}  {r['algorithm']}, num_steps {r['num_steps']}, topk {r['topk']}, "
                     f"num_draft_tokens {r['num_draft_tokens']} (as the server runs them, from {r['settings_from']}"
                     + ("" if sg else ": one per-position series per draft token") + ")")
        lines += [f"{name:>14}  {r[key]}" for name, key in (("asked", "launch_command"), ("draft", "draft_model_path"))
                  if r.get(key)]
    if sg:
        lines.append(f"{'histogram':>14}  this release returns {r['histogram_field_expected']}; the replies "
                     + (f"carried {r['histogram_field']!r}" if r.get("histogram_field") else "carried none"))
    lines.append(f"{'sent':>14}  {r['prompts']} prompts of {r['prompts_file']}, at most {r['max_new_tokens']} new "
                 f"tokens, temperature 0, one at a time: {r['completed']} completed in {r['wall_s']:.1f} s, "
                 f"{r['new_tokens']} new tokens, {fmt(r['tokens_per_s'], '.1f')} tok/s")
    lines += [" " * 16 + note for note in [r["prompts_note"]] + [f"{c} request(s) failed: {e}"
                                                                 for e, c in r["errors"].items()] if note]
    if not r["completed"] or not r["speculative"]:
        return lines + ["no request completed: nothing to read" if not r["completed"] else "the server runs without "
                        "speculative decoding: no acceptance to read; its tokens/s above is the B of --baseline-tps"]
    L, ci = r.get("accept_length"), r.get("accept_length_ci95")
    how = "completion_tokens / spec_verify_ct, pooled" if sg else "1 + accepted / drafts in /metrics over the run"
    lines.append(f"{'accept length':>14}  {fmt(L)}" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")
                 + f" tokens per verify step, bonus token included ({how}; {r.get('verify_steps', 0)} verify "
                 "steps" + ("; 95 % interval over requests)" if ci else ")"))
    if r["per_position"] is not None:
        kind = ("conditional P(accept i | 1..i-1 accepted)" if r["per_position_conditional"]
                else "unconditional P(at least i accepted)")
        lines.append(f"per-position acceptance, {kind}, from {r['per_position_source']}; 95 % intervals over "
                     f"{r['requests_with_histogram']} requests:")
        for i, row in enumerate(table):
            span = "" if row["lo"] != row["lo"] else f" [{row['lo']:.2f}, {row['hi']:.2f}]"
            lines.append(f"  position {i + 1}: {fmt(row['rate'])}{span}  (n = {row['n']})")
        if r.get("pooled_after_position_1") is not None:  # the post-mortem's table of profiles reads it
            lines.append(f"  positions 2-{len(table)} pooled: {fmt(r['pooled_after_position_1'])}, accepted / reached "
                         f"({r['pooled_after_position_1'] / table[0]['rate']:.0%} of position 1)")
        if r.get("profile"):  # the post-mortem's table of profiles, the first row that fits
            case, acc = r["profile"]["case"], r["profile"]["draft_accuracy"]
            lines.append(f"  profile: {PROFILES[case]}; position 1 at {table[0]['rate'] / acc:.2f} x A = {acc:g}")
    elif sg and not r.get("accepted_distribution"):
        lines.append("per-position acceptance: none (no usable per-request histogram: see `histogram` above): the "
                     "mean accept length only")
    return lines + [f"{'warning':>14}  {w}" for w in r.get("warnings", [])] + cost_lines(r)

def cost_lines(r):
    cost = r.get("step_cost")
    if not cost or "note" in cost:
        return [f"{'step cost':>14}  {cost['note']}"] if cost else []
    return [f"{'step cost':>14}  one speculative step costs {cost['step_cost']:.2f} no-speculation steps: "
            f"C = L x B / S = {r['accept_length']:.3f} x {r['baseline_tokens_per_s']:g} / {r['tokens_per_s']:.1f}",
            f"{'break-even':>14}  accept length {cost['break_even_accept_length']:.2f}: above it this configuration "
            f"beats no speculation (here {r['speedup']:.2f}x)" + ("" if cost["reachable"] is not False else f"; "
            f"above num_steps + 1 = {r['num_steps'] + 1}: it cannot pay at this depth, whatever the draft"),
            f"{'':>14}  {cost['assumptions']}"]

def json_safe(value):
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return None if isinstance(value, float) and not math.isfinite(value) else value

def positive(kind, most=math.inf):
    """An argparse type: a finite number > 0 (a whole one for int), at most `most`; else argparse's one-line error."""
    def parse(text):
        value = number(text) if kind is float else int(text) if text.strip().lstrip("+").isdigit() else None
        if value is None or not 0 < value <= most:
            what = f"a {'whole ' if kind is int else ''}number > 0" + (f", <= {most:g}" if most < math.inf else "")
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
        return value
    return parse

def parser():
    p = argparse.ArgumentParser(prog="eagle3_probe.py", description=__doc__.split("\n\n")[0],
                                epilog="exit codes: " + " ".join(__doc__.split("Exit codes: ")[1].split()))
    p.add_argument("--url", required=True, help="the server, http://HOST:PORT")
    p.add_argument("--prompts", required=True, help="text file, one prompt per line, or JSON lines with text "
                   "(or prompt, or messages) and an optional category")
    p.add_argument("--num-prompts", type=positive(int), default=8, help="prompts to send (default 8)")
    p.add_argument("--max-new-tokens", type=positive(int), default=64, help="per request (default 64)")
    p.add_argument("--baseline-tps", type=positive(float), metavar="B",
                   help="tokens/s of the same server without speculation: gives the step cost and break-even")
    p.add_argument("--draft-accuracy", type=positive(float, most=1.0), metavar="A", help="the draft's validation "
                   "accuracy, 0-1: names the profile the per-position rates fit")
    p.add_argument("--json", action="store_true", help="print the result as one JSON line")
    return p

def exit_code(result):
    if not result["completed"] or (result["speculative"] and (result["failed"] or result["accept_length"] is None)):
        return EXIT_FAILED
    return EXIT_OK if result["speculative"] else EXIT_NO_SPECULATION

def main(argv=None):
    args = parser().parse_args(argv)
    say = lambda message: print(message, file=sys.stderr)  # noqa: E731 - stdout holds the result only
    try:
        result, table = probe(args, say)
    except ProbeError as exc:
        say(f"eagle3_probe: {exc.args[0]}")
        return exc.code
    except KeyboardInterrupt:
        say("eagle3_probe: interrupted")
        return 130
    print(json.dumps(json_safe(result), allow_nan=False) if args.json else "\n".join(report_lines(result, table)))
    return exit_code(result)

if __name__ == "__main__":
    sys.exit(main())

"""`eagle3lab bench`: benchmark a running server (--url) or one launched for the occasion."""

from __future__ import annotations

from eagle3lab.commands.common import non_negative_float, positive_float, positive_int

HELP = ("benchmark a server: tokens/s, time to first token, latency, accept length, per-position "
        "acceptance and acceptance by prompt length and category")


def add_server_arguments(parser) -> None:
    """Where to benchmark: a running server, or a backend to launch (shared with sweep)."""
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--url", action="append", default=None,
                       help="a running server (repeat for several in `sweep`)")
    where.add_argument("--backend", choices=["lab", "sglang", "vllm"], help="launch this backend")
    parser.add_argument("--model-path", help="target model (default for lab and vllm: the lab's target)")
    parser.add_argument("--draft", help="draft folder, or a lab draft name (healthy, seed, no-ttt)")
    parser.add_argument("--lab", default="ci", help="lab preset for defaults and prompts (default ci)")
    parser.add_argument("--prompts", help="text file, one prompt per line, or JSON lines with text (or "
                        "messages) and an optional category "
                        "(default: the lab's held-out passages, cut to --prompt-tokens tokens)")
    parser.add_argument("--num-prompts", type=positive_int, default=8,
                        help="prompts to send (default 8; a longer --prompts file is cut to them, and says so)")
    parser.add_argument("--prompt-tokens", type=positive_int, default=64, help="lab prompt length in tokens")
    parser.add_argument("--max-new-tokens", type=positive_int, default=64)
    parser.add_argument("--concurrency", type=positive_int, default=1)
    parser.add_argument("--temperature", type=non_negative_float, default=0.0)
    parser.add_argument("--timeout", type=positive_float, default=None,
                        help=f"seconds to wait for /health (default {LAUNCH_TIMEOUT_S:.0f} for a launched "
                             f"server, {URL_TIMEOUT_S:.0f} for --url)")
    parser.add_argument("--log-file", help="server log (launched backends)")
    parser.add_argument("--vllm-python", metavar="PATH",
                        help="the python that has vLLM (default: $EAGLE3LAB_VLLM_PYTHON, else the "
                             "repo's .venv-vllm from scripts/setup_vllm.sh, else this python)")
    parser.add_argument("--draft-layer-ids", metavar="I,J,K",
                        help="serve the draft with these aux hidden-state layer ids (a temporary "
                             "copy of its config; the checkpoint is not touched)")


URL_TIMEOUT_S, LAUNCH_TIMEOUT_S = 30.0, 600.0  # /health waits: a running server, one starting


def health_timeout(args, launched: bool) -> float:
    """--timeout, else the default wait for a launched server (start-up) or a running one."""
    if args.timeout is not None:
        return args.timeout
    return LAUNCH_TIMEOUT_S if launched else URL_TIMEOUT_S


def check_urls(args, one: bool = False) -> None:
    """Every --url is a server URL (refused at once otherwise); `bench` measures one."""
    from eagle3lab.errors import EagleLabError
    from eagle3lab.serving.server import check_url

    for url in args.url or []:
        check_url(url)
    if one and args.url and len(args.url) > 1:
        raise EagleLabError(f"bench measures one server: {len(args.url)} --url given (several: `eagle3lab sweep`)")


def launch_kwargs(args) -> dict:
    """What `server.launch` takes from the shared server arguments besides the spec."""
    from eagle3lab import engines

    eng = engines.lookup(getattr(args, "backend", None))
    return {"vllm_python": args.vllm_python} if eng is not None and eng.separate_python else {}


def check_faults(args, faults) -> None:
    """Faults are switches of the lab engine: refuse them for a real engine before launching."""
    from eagle3lab.errors import EagleLabError
    from eagle3lab import engines

    if faults and (args.url or not engines.get(args.backend).takes_faults):
        where = "a running server" if args.url else f"--backend {args.backend}"
        raise EagleLabError(f"--fault {','.join(faults)}: faults are switches of the lab engine, "
                            f"{where} cannot apply them (use --backend lab)")
    if faults:
        from eagle3lab.decoder.faults import normalize_faults

        normalize_faults(faults)  # unknown or contradictory: said before a server loads for seconds


def add_arguments(parser) -> None:
    add_server_arguments(parser)
    parser.add_argument("--num-steps", type=int)
    parser.add_argument("--topk", type=int)
    parser.add_argument("--num-draft-tokens", type=int)
    parser.add_argument("--fault", action="append", help="lab fault(s) to switch on")
    parser.add_argument("--baseline", action="store_true",
                        help="also run without speculation (launched backends) and print the speed-up")
    parser.add_argument("--requests", action="store_true", help="print the per-request table")
    parser.add_argument("--json", action="store_true", help="print the summary as one JSON line")


def load_prompts(args) -> list:
    from pathlib import Path

    from eagle3lab.errors import EagleLabError

    if args.prompts:
        from eagle3lab.paths import read_text_file

        prompts = [line for line in read_text_file(Path(args.prompts), "--prompts").splitlines() if line.strip()]
        _say_cut(args, len(prompts))
    else:
        from eagle3lab.lab import load_lab

        prompts = load_lab(args.lab, build=False).heldout_prompts(args.num_prompts, args.prompt_tokens)
    if not prompts:
        raise EagleLabError(f"no prompts in {args.prompts} (every line is empty)" if args.prompts else "no prompts")
    return prompts[: args.num_prompts]


def _say_cut(args, available: int) -> None:
    """A prompts file longer than --num-prompts is cut, a shorter one sends fewer: say so (stderr:
    --json stays one line)."""
    import sys

    if available > args.num_prompts:
        print(f"prompts: the first {args.num_prompts} of {available} in {args.prompts} "
              f"(--num-prompts {args.num_prompts})", file=sys.stderr)
    elif 0 < available < args.num_prompts:
        print(f"prompts: only {available} in {args.prompts}, fewer than --num-prompts {args.num_prompts}; "
              "the intervals are as wide as that many prompts make them", file=sys.stderr)


def launch_target(args) -> tuple:
    """(model_path, draft_path) for a launched backend; lab defaults from the lab preset."""
    model, draft = args.model_path, args.draft
    from eagle3lab import engines

    runs_here = getattr(engines.lookup(args.backend), "runs_on_cpu", False)  # the lab's checkpoints by default
    if runs_here and (model is None or (draft and "/" not in draft)):
        from eagle3lab.lab import load_lab

        lab = load_lab(args.lab, build=False)
        model = model or str(lab.target_dir)
        if draft and "/" not in draft:
            draft = str(lab.draft_dir(draft))
    if model is None:
        from eagle3lab.errors import EagleLabError

        raise EagleLabError("--model-path is required with --backend sglang")
    if getattr(engines.lookup(args.backend), "in_process", False):
        _check_lab_paths(model, draft)
    return model, draft


def _check_lab_paths(model, draft) -> None:
    """The lab server reads local folders only: a missing one is said before it loads for seconds."""
    from pathlib import Path

    from eagle3lab.engines.lab.frontend import names_lab_preset
    from eagle3lab.errors import EagleLabError

    if not (names_lab_preset(model) or Path(model).is_dir()):
        raise EagleLabError(f"--model-path {model}: no such folder (the lab server serves a local target)")
    if draft is not None and not Path(draft).is_dir():
        raise EagleLabError(f"--draft {draft}: no such folder, and not a draft of the lab")


def lossless(run, baseline) -> dict:
    """Greedy outputs of the speculative run against the baseline's, request by request: token
    ids where the server returns them (vLLM), else text."""
    if run.temperature > 0:
        return {"lossless": None, "lossless_check": "not checked at temperature > 0"}
    a, b = run.requests.set_index("request"), baseline.requests.set_index("request")
    both = a.index[a["ok"]].intersection(b.index[b["ok"]])
    column = "output_ids" if a.loc[both, "output_ids"].notna().all() and b.loc[both, "output_ids"].notna().all() \
        else "text"
    same = [list(a.at[i, column]) == list(b.at[i, column]) if column == "output_ids"
            else a.at[i, column] == b.at[i, column] for i in both]
    return {"lossless": bool(len(same) and all(same)),
            "lossless_check": f"greedy {'token ids' if column == 'output_ids' else 'texts'} identical "
                              f"in {sum(same)} of {len(same)} requests"}


def summarize(results: dict, obs) -> dict:
    """The summary `--json` prints: the load test's figures, the observation's (accept length
    with its interval, per-position rates), and the comparison with the baseline."""
    from eagle3lab.serving import loadtest

    run = results["run"]
    summary = run.summary()
    if obs is not None:
        s = obs.summary()
        summary.update(engine=obs.engine, num_steps=s["effective_num_steps"], topk=s["effective_topk"],
                       num_draft_tokens=s["effective_num_draft_tokens"], prompts=len(run.requests),
                       verify_steps=obs.n_steps, new_tokens=summary["completion_tokens"],
                       accept_rate=(obs.accept_length - 1) / s["effective_num_steps"],
                       accept_length=obs.accept_length,
                       accept_length_ci95=None if obs.accept_length_ci95 is None else list(obs.accept_length_ci95),
                       per_position=s["per_position"], per_position_conditional=obs.conditional,
                       warnings=list(obs.warnings))
    if "baseline" in results:
        summary["baseline_tokens_per_s"] = results["baseline"].tokens_per_s
        summary["speedup"] = loadtest.speedup(run, results["baseline"])
        summary.update(lossless(run, results["baseline"]))
        summary["failed"] = bool(run.failed or results["baseline"].failed)
        summary["step_cost"] = step_cost(summary)
    return summary


def step_cost(summary: dict) -> dict:
    """The cost arithmetic (`eagle3lab cost`, eagle3lab.cost.stepcost) on this bench's own figures: one
    speculative step in no-speculation steps, its break-even accept length, the i.i.d. rate its
    accept length corresponds to; or why it cannot be computed (`note`)."""
    from eagle3lab.errors import EagleLabError
    from eagle3lab.cost.stepcost import StepCost

    try:
        cost = StepCost(summary.get("baseline_tokens_per_s"), summary.get("tokens_per_s"),
                        summary.get("accept_length"), _int(summary.get("num_steps")),
                        _int(summary.get("topk")) or 1, _int(summary.get("num_draft_tokens")), "total")
    except EagleLabError as exc:
        return {"note": f"not computed: {exc}"}
    out = cost.as_dict()
    out = {k: out[k] for k in ("kind", "step_cost", "break_even_accept_length", "iid_rate",
                               "break_even_iid_rate", "assumptions")}
    if (summary.get("concurrency") or 1) > 1:
        out["assumptions"] += (f" Here {summary['concurrency']} requests ran at once: the step cost is that "
                               "batch's, and holds for that concurrency only.")
    return out


def _int(value):
    try:
        return None if value is None or value != value else int(value)
    except (TypeError, ValueError):
        return None


def cost_lines(summary: dict) -> list[str]:
    """The step cost as text under the bench's figures (with --baseline)."""
    cost = summary.get("step_cost")
    if not cost:
        return []
    if "note" in cost:
        return [f"{'step cost':>22}: {cost['note']}"]
    be = cost["break_even_iid_rate"]
    return [f"{'step cost':>22}: one speculative step costs {cost['step_cost']:.2f} no-speculation steps "
            f"(accept length x baseline tok/s / speculative tok/s)",
            f"{'break-even':>22}: accept length {cost['break_even_accept_length']:.2f}"
            + (f" (i.i.d. rate {be:.2f})" if be is not None else " (above depth + 1: cannot pay at this depth)"),
            f"{'i.i.d. rate':>22}: {cost['iid_rate']:.2f} gives this accept length at this depth",
            f"{'':>22}  {cost['assumptions']} What another accept length would give: eagle3lab cost --what-if L"]


def run(args) -> int:
    from eagle3lab import engines
    from eagle3lab.serving import loadtest
    from eagle3lab.serving import server

    faults = [f for item in (args.fault or []) for f in item.split(",") if f.strip() and f.strip() != "none"]
    check_faults(args, faults)
    check_urls(args, one=True)
    target = None if args.url else launch_target(args)  # its folders checked before prompts load
    prompts = load_prompts(args) if args.prompts else None  # a user's file: read before any wait
    running = server.connect(args.url[0], timeout=health_timeout(args, False)) if args.url else None
    prompts = prompts or load_prompts(args)  # the lab's passages (a tokenizer load) once it answers
    prompts, prompt_set = categorised_prompts(args, prompts)
    spec = {"num_steps": args.num_steps, "topk": args.topk, "num_draft_tokens": args.num_draft_tokens,
            "fault": ",".join(faults) if faults else None}
    if args.draft_layer_ids:
        spec["draft_layer_ids"] = args.draft_layer_ids
    kwargs = dict(max_new_tokens=args.max_new_tokens, concurrency=args.concurrency,
                  temperature=args.temperature)
    results, obs = {}, None
    if args.url:
        results["run"], obs = loadtest.measure(running, prompts, **kwargs)
    else:
        model, draft = target
        with server.launch(args.backend, model, draft, spec=spec, log_file=args.log_file,
                           timeout=health_timeout(args, True), **launch_kwargs(args)) as srv:
            print(f"launched {srv!r}; log {srv.log_file}")
            results["run"], obs = loadtest.measure(srv, prompts, **kwargs)
        if args.baseline:
            # no speculation; the lab keeps the faults that act on the target itself
            base = {"fault": spec["fault"]} if engines.get(args.backend).takes_faults else None
            with server.launch(args.backend, model, None, spec=base, timeout=health_timeout(args, True),
                               **launch_kwargs(args)) as srv:
                results["baseline"], _ = loadtest.measure(srv, prompts, **kwargs)
    if args.requests:
        print(results["run"].requests.drop(columns=["text", "output_ids", "spec_histogram"]).to_string(index=False))
    summary = summarize(results, obs)
    breakdown = acceptance_by_prompt(results["run"], obs, prompt_set)
    if args.json:
        from eagle3lab.commands.common import dumps

        print(dumps({**summary, **acceptance_json(obs, breakdown)}))  # NaN (a figure not measured) as null
    else:
        for key, value in summary.items():
            if key != "step_cost":
                print(f"{key:>22}: {value:.3f}" if isinstance(value, float) else f"{key:>22}: {value}")
        print("\n".join(cost_lines(summary)))
        print_acceptance(obs, breakdown)
    return 1 if summary["failed"] else 0


def categorised_prompts(args, prompts: list):
    """(prompts to send, PromptSet or None): a prompts file's texts and categories
    (`byprompt.read_prompts`: JSON lines with text/messages and category, or plain lines)."""
    if not args.prompts:
        return prompts, None
    from eagle3lab.acceptance import byprompt

    pset = byprompt.read_prompts(args.prompts)
    if args.num_prompts:
        pset = byprompt.PromptSet(pset.texts[: args.num_prompts], pset.categories[: args.num_prompts],
                                  pset.skipped, pset.source)
    return pset.texts, pset


def acceptance_by_prompt(run, obs, prompt_set):
    """The breakdown by prompt length and category from the run's per-request histograms
    (SGLang, the lab server, vLLM with per-request metrics); None when no request has one."""
    from eagle3lab.acceptance import byprompt

    k = None if obs is None else obs.effective.get("num_steps")
    source = "per-request histograms" if obs is None else f"per-request histograms, {obs.engine}"
    return byprompt.from_load_test(run, prompt_set, k, source)


def per_position_lines(obs) -> list[str]:
    """Per-position acceptance with its 95 % intervals, the convention and the source named."""
    if obs is None:
        return []
    if obs.per_position is None:
        return [f"per-position acceptance: none ({w})" for w in obs.warnings if "histogram" in w][:1]
    kind = "conditional P(accept i | 1..i-1 accepted)" if obs.conditional else "unconditional P(at least i accepted)"
    origin = {"meta_info": "each request's acceptance histogram (meta_info)",
              "vllm-metrics": "vLLM's /metrics counters"}.get(obs.source, obs.source)
    lines = [f"per-position acceptance, {kind}, from {origin}; 95 % intervals over {obs.n_requests} requests:"]
    for row in obs.per_position.itertuples():
        ci = "" if row.lo != row.lo else f" [{row.lo:.2f}, {row.hi:.2f}]"
        lines.append(f"  position {row.position}: {row.rate:.3f}{ci}  (n = {row.n})")
    return lines


def print_acceptance(obs, breakdown) -> None:
    for line in per_position_lines(obs):
        print(line)
    if obs is not None and obs.per_position is None and obs.distribution is not None:
        print("accepted drafts per verify step (a tree: accepted path lengths, not per-position acceptance): "
              + " ".join(f"{r.accepted}: {r.share:.2f}" for r in obs.distribution.itertuples()))
    if breakdown is not None:
        print(breakdown.text())


def acceptance_json(obs, breakdown) -> dict:
    """What --json adds: the per-position intervals, the distribution and the breakdown."""
    out = {}
    if obs is not None and obs.per_position is not None:
        out["per_position_ci95"] = [[round(float(a), 4), round(float(b), 4)]
                                    for a, b in zip(obs.per_position["lo"], obs.per_position["hi"])]
    if obs is not None and obs.distribution is not None:
        out["accepted_distribution"] = [round(float(v), 4) for v in obs.distribution["share"]]
    if breakdown is not None:
        out["by_prompt"] = breakdown.summary()
    return out

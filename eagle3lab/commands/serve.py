"""`eagle3lab serve`: the lab engine behind SGLang's HTTP API (flags as `sglang.launch_server`)."""

from __future__ import annotations

from eagle3lab.spec import LAB_FIELDS, SPEC_KEYS, SPEC_NAMES, add_flag_arguments

HELP = "serve a lab target (+ EAGLE-3 draft) over SGLang's HTTP API, with fault switches"
# The lab server's speculative fields (spec.LAB_FIELDS), in the order SGLang 0.5.23 lists them.
SERVE_FIELDS = tuple(sorted(LAB_FIELDS, key=("algorithm", "draft_model_path", "num_steps", "topk",
                                             "num_draft_tokens").index))


def add_arguments(parser) -> None:
    g = parser.add_argument_group("SGLang launch flags")
    g.add_argument("--model-path", required=True,
                   help="target dir, a lab dir, or 'lab' / 'lab:ci' (the built lab preset)")
    add_flag_arguments(g, SERVE_FIELDS, help={"algorithm": "EAGLE3 (or EAGLE)"})  # spec.SPEC_NAMES
    g.add_argument("--host", default="127.0.0.1")
    g.add_argument("--port", type=int, default=30000, help="0 picks a free port")
    g.add_argument("--decode-log-interval", type=int, default=40)
    g.add_argument("--log-level", default="info")
    parser.add_argument("--fault", action="append", default=[], metavar="NAME",
                        help="fault switch (repeatable, or comma separated); see `eagle3lab lab bench --help`")
    parser.add_argument("--max-prompt-tokens", type=int, default=None,
                        help="longest prompt accepted (default: what the context leaves, at most 1024)")
    parser.add_argument("--max-new-tokens", type=int, default=256, help="largest max_new_tokens accepted")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch CPU threads (1 is fastest for lab-sized models on a shared CPU)")
    parser.add_argument("--backend", choices=["lab", "vllm"], default="lab",
                        help="lab: the lab engine (default); vllm: launch vLLM with the same settings "
                             "(eagle3lab.serving.server.launch) and keep it until Ctrl-C")
    parser.add_argument("--vllm-python", metavar="PATH", help="the python that has vLLM (--backend vllm)")
    parser.add_argument("--draft-layer-ids", metavar="I,J,K",
                        help="--backend vllm: serve the draft with these aux layer ids (temporary config)")


def run_vllm(args) -> int:
    """vLLM in the foreground: launched, watched and stopped (whole group) by eagle3lab."""
    import signal
    import threading

    from eagle3lab.serving import server
    from eagle3lab.errors import EagleLabError

    if args.fault:
        raise EagleLabError("--fault: faults are switches of the lab engine; vLLM serves checkpoints as they are")
    spec = {"num_steps": args.speculative_num_steps, "topk": args.speculative_eagle_topk,
            "num_draft_tokens": args.speculative_num_draft_tokens, "draft_layer_ids": args.draft_layer_ids}
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    with server.launch("vllm", args.model_path, args.speculative_draft_model_path,
                       spec={k: v for k, v in spec.items() if v is not None}, host=args.host,
                       port=args.port or None, vllm_python=args.vllm_python) as srv:
        print(f"eagle3lab serve: vLLM ready on {srv.url} (log {srv.log_file})", flush=True)
        while not stop.wait(0.5) and srv.alive:
            pass
        code = srv.returncode
    return 0 if code is None or stop.is_set() else 1


def run(args) -> int:
    import signal
    import sys
    import threading

    from eagle3lab import engines

    if engines.get(getattr(args, "backend", "lab")).api == "openai":  # vLLM: its own server
        return run_vllm(args)
    from eagle3lab.errors import EagleLabError
    from eagle3lab.spec import SpecConfig

    for name in (*(SPEC_NAMES[k][1] for k in SPEC_KEYS),
                 "max_prompt_tokens", "max_new_tokens", "decode_log_interval", "threads"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise EagleLabError(f"--{name.replace('_', '-')} must be at least 1, got {value}")
    if not 0 <= args.port <= 65535:
        raise EagleLabError(f"--port {args.port} is not a port number")
    _check_before_loading(args)
    import torch

    from eagle3lab.engines.lab import frontend as srv

    torch.set_num_threads(args.threads)
    srv.setup_logging(sys.stdout)
    spec = SpecConfig.from_args(args, SERVE_FIELDS)  # the launcher's SpecConfig, parsed back once
    state = srv.load_state(
        args.model_path, args.speculative_draft_model_path, spec=spec, faults=args.fault,
        max_prompt_tokens=args.max_prompt_tokens, max_new_tokens=args.max_new_tokens,
        decode_log_interval=args.decode_log_interval, launch_command=_launch_command(args))
    info = state.server_info
    srv.logger.info(f"speculative: algorithm={info['speculative_algorithm']}, "
                    f"num_steps={info['speculative_num_steps']}, topk={info['speculative_eagle_topk']}, "
                    f"num_draft_tokens={info['speculative_num_draft_tokens']}, "
                    f"boundaries={info['aux_hidden_state_boundaries']}, faults={info['faults'] or 'none'}")
    httpd = srv.make_server(state, args.host, args.port)
    stop = threading.Event()

    def _stop(signum, frame):
        stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True)
    thread.start()
    srv.logger.info(f"Uvicorn running on {httpd.url} (Press CTRL+C to quit)")
    srv.logger.info("The server is fired up and ready to roll!")
    print(f"eagle3lab serve: ready on {httpd.url}", flush=True)
    while not stop.wait(0.5):
        pass
    srv.logger.info("shutting down")
    httpd.shutdown()
    httpd.server_close()
    return 0


def _check_before_loading(args) -> None:
    """What would fail after the target loads (seconds), said before: faults, the folders, a
    config SGLang refuses (the newest SGLang's rules on a Llama target, as load_state resolves),
    a port in use."""
    from pathlib import Path

    from eagle3lab.decoder.faults import normalize_faults
    from eagle3lab.errors import EagleLabError
    from eagle3lab.serving.server import port_in_use
    from eagle3lab.spec import LATEST_SGLANG, SpecConfig

    normalize_faults(args.fault)
    from eagle3lab.engines.lab.frontend import names_lab_preset, resolve_model_path

    if not names_lab_preset(args.model_path):  # a lab preset is built if need be: not here
        resolve_model_path(str(args.model_path))
    draft = args.speculative_draft_model_path
    if draft is not None and not Path(draft).is_dir():
        raise EagleLabError(f"--speculative-draft-model-path {draft}: no such folder")
    spec = SpecConfig.from_args(args, SERVE_FIELDS)
    if spec is not None:
        res = spec.resolve(engine="sglang", version=LATEST_SGLANG, arch="LlamaForCausalLM")
        if res.error:
            raise EagleLabError(f"SGLang {LATEST_SGLANG} refuses this configuration: {res.error}")
    if args.port and port_in_use(args.port, args.host):
        raise EagleLabError(f"--port {args.port} on {args.host} is already in use (another server?); "
                            "pick another, or 0 for a free one")


def _launch_command(args) -> str:
    """The SGLang flags this server was given, as SGLang 0.5.23 reports them (launch_command)."""
    import shlex

    argv = ["--model-path", str(args.model_path)]
    for name in SERVE_FIELDS:
        flag, key = SPEC_NAMES[name]
        if getattr(args, key) is not None:
            argv += [flag, str(getattr(args, key))]
    for fault in args.fault:
        argv += ["--fault", fault]
    return shlex.join(argv)

"""A config is resolved once and carried as one object (docs/spec-forms.md): its string forms are
made only at process edges (argv, HTTP JSON, the store) and parsed back into the same object."""

from __future__ import annotations

import argparse
import contextlib
import io
import threading

from eagle3lab import spec as spec_mod
from eagle3lab.spec import LAB_FIELDS, SPEC_NAMES, SpecConfig, add_flag_arguments


def _serve_parser():
    from eagle3lab.commands import serve

    parser = argparse.ArgumentParser()
    serve.add_arguments(parser)
    return parser


def _serve_args(argv: list[str]):
    """The lab server's parse of the argv a launcher built (`python -m eagle3lab serve ...`)."""
    return _serve_parser().parse_args(argv[argv.index("serve") + 1:])


def test_every_named_field_is_a_flag_that_parses_back():
    """A field of SPEC_NAMES is a flag of a parser built from the table and comes back equal:
    a field added to the table appears in the launch flags and in the parser at once."""
    full = SpecConfig(num_steps=4, topk=2, num_draft_tokens=7, page_size=16, attention_backend="fa3",
                      cuda_graph_max_bs=8, max_running_requests=4, device="cpu",
                      disable_overlap_schedule=True, draft_model_path="/d")
    parser = argparse.ArgumentParser()
    add_flag_arguments(parser, tuple(SPEC_NAMES))
    assert {a.option_strings[0] for a in parser._actions[1:]} == {flag for flag, _ in SPEC_NAMES.values()}
    args = parser.parse_args(full.to_flags("sglang"))
    assert SpecConfig.from_args(args, tuple(SPEC_NAMES)) == full


def test_the_lab_servers_argv_round_trips_to_the_same_object():
    from eagle3lab.serving import server
    from eagle3lab.commands.serve import SERVE_FIELDS

    asked = SpecConfig(num_steps=5, topk=1, num_draft_tokens=6, draft_model_path="/lab/drafts/seed")
    argv = server.build_command("lab", "/lab/target", None, asked)
    assert set(SERVE_FIELDS) == set(LAB_FIELDS)
    assert SpecConfig.from_args(_serve_args(argv), SERVE_FIELDS) == asked
    # no algorithm, no speculation
    plain = server.build_command("lab", "/lab/target", None, None)
    assert SpecConfig.from_args(_serve_args(plain), SERVE_FIELDS) is None


def test_server_info_round_trips_to_the_same_object():
    ran = SpecConfig(num_steps=1, topk=1, num_draft_tokens=2, draft_model_path="/d")
    assert SpecConfig.from_server_info(ran.server_info()) == ran
    assert SpecConfig.from_server_info({"speculative_algorithm": None}) is None


@contextlib.contextmanager
def _in_process_lab_server(backend, model_path, draft_path, spec=None, extra_args=(), **_):
    """`server.launch("lab", ...)` without a subprocess: the same argv, parsed by the lab server's
    parser, served over HTTP from a thread, so resolving can be counted here."""
    from eagle3lab.serving import server
    from eagle3lab.commands.serve import SERVE_FIELDS
    from eagle3lab.engines.lab import frontend
    from eagle3lab.sources.logfile import observe_log

    args = _serve_args(server.build_command(backend, model_path, draft_path, spec, extra_args=extra_args))
    log = io.StringIO()
    frontend.setup_logging(log)
    state = frontend.load_state(args.model_path, args.speculative_draft_model_path,
                                spec=SpecConfig.from_args(args, SERVE_FIELDS), faults=args.fault,
                                max_prompt_tokens=args.max_prompt_tokens, max_new_tokens=args.max_new_tokens,
                                decode_log_interval=args.decode_log_interval)
    httpd = frontend.make_server(state, "127.0.0.1", 0)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    srv = server.Server(httpd.url)
    srv.observation = lambda requested=None: observe_log(log.getvalue(), requested=requested)
    try:
        yield srv
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_notebook_04_config_is_resolved_once_from_ints_to_the_row(monkeypatch, tmp_path):
    """Notebook 04's call, STEPS/TOPK/DRAFT_TOKENS to the row it shows: one resolve (the lab
    server's), and the row, the store key and the server's answer all carry what it resolved."""
    from eagle3lab import experiments
    from eagle3lab.serving import measurements
    from eagle3lab.serving import server

    resolve, calls = spec_mod._RESOLVER[0], []

    def counted(*a, **k):
        calls.append(a[0])
        return resolve(*a, **k)

    monkeypatch.setattr(spec_mod, "_RESOLVER", [counted, spec_mod._RESOLVER[1]])
    monkeypatch.setattr(server, "launch", _in_process_lab_server)
    monkeypatch.setenv(measurements.ENV, str(tmp_path / "store.jsonl"))
    STEPS, TOPK, DRAFT_TOKENS = 1, 1, 16  # the seed's first flag set: SGLang verifies 2, not 16
    asked = SpecConfig(num_steps=STEPS, topk=TOPK, num_draft_tokens=DRAFT_TOKENS)
    run = experiments.serve_and_log(None, lab="ci", draft="healthy", spec=asked, num_prompts=1,
                                    max_new_tokens=8, eval_texts=1)
    assert len(calls) == 1 and calls[0].num_draft_tokens == DRAFT_TOKENS
    ran = asked.resolve(engine="sglang", version=spec_mod.LATEST_SGLANG).triple
    assert ran == (1, 1, 2)
    row = run.observation.summary()
    assert tuple(row[f"effective_{k}"] for k in spec_mod.SPEC_KEYS) == ran
    assert tuple(row[f"requested_{k}"] for k in spec_mod.SPEC_KEYS) == (STEPS, TOPK, DRAFT_TOKENS)
    answered = SpecConfig.from_server_info(run.server_info)  # the HTTP edge, parsed back once
    assert tuple(getattr(answered, k) for k in spec_mod.SPEC_KEYS) == ran
    keys = [r["key"] for r in measurements.active().records() if r["key"]["kind"] == "spec"]
    assert [tuple(k["spec"]) for k in keys] == [ran]
    assert run.effective_draft_tokens == 2 and run.num_steps == 1

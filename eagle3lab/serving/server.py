"""Start, watch and stop an SGLang, vLLM (or lab) server as one reliable call.

The seed's investigator restarted servers by hand, over and over. ``launch`` does it the same
way on the lab (``python -m eagle3lab serve``, which speaks SGLang's HTTP API) and on a GPU
machine (``python -m sglang.launch_server``), and vLLM (``python -m
vllm.entrypoints.openai.api_server`` from the vLLM python `find_vllm_python` picks; its CPU build
on a machine without a GPU): the server runs in its own process group with its
output in a log file, ``launch`` returns once ``/health`` answers, and ``stop()`` (also on
exceptions, Ctrl-C and interpreter exit) takes the whole group down and waits until the port is
free again; a watchdog (``eagle3lab/serving/watchdog.py``) does it when this process dies without
unwinding (SIGKILL included). Logs not named go to the cache's ``server-logs`` folder, which keeps
the newest ``SERVER_LOGS_KEPT`` (docs/bad-input.md). ``connect(url)`` drives a server started
elsewhere (a GPU box, a cluster), after ``check_url`` refuses a URL that cannot be one.

    with launch("lab", lab.target_dir, lab.draft_dir("healthy"), spec={"num_steps": 3}) as srv:
        result = loadtest.run(srv.url, prompts, max_new_tokens=64)
        srv.logs()      # eagle3lab.logs.read_log DataFrame
"""

from __future__ import annotations

import atexit
import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from eagle3lab import engines
from eagle3lab.engines.argv import DEFAULT_HOST, has_gpu, spec_dict
from eagle3lab.errors import ServerError

LOG_TAIL_LINES = 30


class PortInUseError(ServerError):
    """The requested port is already bound by another process."""


class ServerStartError(ServerError):
    """The server process exited before it became healthy."""

    def __init__(self, message: str, returncode: int | None, log_tail: str):
        super().__init__(message)
        self.returncode = returncode
        self.log_tail = log_tail


class ServerTimeoutError(ServerError):
    """The server never answered /health within the timeout."""

    def __init__(self, message: str, log_tail: str):
        super().__init__(message)
        self.log_tail = log_tail


# --------------------------------------------------------------------------- command lines

def build_command(backend: str, model_path, draft_path=None, spec=None, host: str = DEFAULT_HOST,
                  port: int = 30000, extra_args=(), **opts) -> list[str]:
    """The server's argv, as the engine builds it (`eagle3lab.engines.get(backend).launch_argv`)."""
    if backend not in engines.names():
        raise ServerError(f"unknown backend {backend!r}: use {', '.join(map(repr, engines.names()))}")
    return engines.get(backend).launch_argv(model_path, draft_path, spec, host, port, extra_args, **opts)


def temporary_draft(draft_path, layer_ids) -> Path:
    """A draft folder that reads other aux hidden-state layer ids, without touching the user's:
    a temporary folder with a copy of config.json (ids set top level and in ``eagle_config``,
    where vLLM and SGLang read them) and symlinks to every other file. The caller removes it."""
    import json
    import shutil
    import tempfile

    src = Path(draft_path)
    config_file = src / "config.json"
    if not config_file.is_file():
        raise ServerError(f"draft {src} has no config.json")
    ids = [int(i) for i in (layer_ids.split(",") if isinstance(layer_ids, str) else layer_ids)]
    config = json.loads(config_file.read_text())
    config["eagle_aux_hidden_state_layer_ids"] = ids
    lab_meta = config.get("eagle3lab")
    if isinstance(lab_meta, dict) and lab_meta.get("target") and not Path(lab_meta["target"]).is_absolute():
        lab_meta["target"] = str((src / lab_meta["target"]).resolve())  # the lab's relative link
    config.setdefault("eagle_config", {})["eagle_aux_hidden_state_layer_ids"] = ids
    out = Path(tempfile.mkdtemp(prefix=f"eagle3lab-draft-{src.name}-"))
    try:
        for item in src.iterdir():
            if item.name != "config.json":
                (out / item.name).symlink_to(item.resolve())
        (out / "config.json").write_text(json.dumps(config, indent=2))
    except OSError:
        shutil.rmtree(out, ignore_errors=True)
        raise
    return out


# --------------------------------------------------------------------------- ports

EPHEMERAL_RANGE_FILE = "/proc/sys/net/ipv4/ip_local_port_range"
LINUX_EPHEMERAL = (32768, 60999)  # Linux's default, where the file cannot be read
SERVER_PORT_SPAN = 20000  # free_port draws from this many ports just below the ephemeral range
PORT_DRAWS = 64
LAUNCH_TRIES = 3  # launches on a port free_port drew, when the server reports the port taken


def ephemeral_range() -> tuple[int, int]:
    """The ports the OS hands to anyone who binds port 0 or connects out (Linux's file, else its default)."""
    try:
        low, high = (int(x) for x in Path(EPHEMERAL_RANGE_FILE).read_text().split())
        return low, high
    except (OSError, ValueError):
        return LINUX_EPHEMERAL


def free_port(host: str = DEFAULT_HOST) -> int:
    """A port nobody listens on right now, drawn below the OS's ephemeral range.

    Why not port 0: a server binds its port seconds after it is chosen (vLLM after ~15 s of
    imports), and meanwhile the OS may hand that same ephemeral port to any outgoing connection
    or to another server's internal sockets (CI lost a vLLM launch to "Address already in use"
    this way). A port below the range is only taken by someone who asks for it by number.
    """
    import random

    low, _ = ephemeral_range()
    first = max(1024, low - SERVER_PORT_SPAN)
    for _ in range(PORT_DRAWS if low - first >= 100 else 0):
        port = random.randrange(first, low)
        if not port_in_use(port, host):
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:  # no room below the range
        s.bind((host, 0))
        return s.getsockname()[1]


def port_in_use(port: int, host: str = DEFAULT_HOST) -> bool:
    """True when binding the port fails, i.e. something holds it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


# --------------------------------------------------------------------------- logs

def tail(path, n: int = LOG_TAIL_LINES) -> str:
    """The last n lines of a log file ('' if there is none)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 64 * 1024))
            lines = fh.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return ""
    return "\n".join(lines[-n:])


SERVER_LOGS_KEPT = 50  # launch logs kept in the cache's server-logs folder: the newest, by time written


def _default_log_file(backend: str, port: int) -> Path:
    from eagle3lab.paths import cache_dir

    folder = cache_dir("server-logs")
    prune_logs(folder, SERVER_LOGS_KEPT - 1)  # room for this one
    return folder / f"{backend}-{port}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"


def prune_logs(folder, keep: int = SERVER_LOGS_KEPT) -> list[Path]:
    """Remove all but the `keep` newest ``*.log`` files of the server-log folder (each launch
    without a log_file writes one there); returns the removed paths."""
    def written(path: Path) -> float:
        try:
            return path.stat().st_mtime
        except OSError:  # removed meanwhile by another launch
            return 0.0

    logs = sorted(Path(folder).glob("*.log"), key=written, reverse=True)
    removed = logs[max(keep, 0):]
    for path in removed:
        try:
            path.unlink()
        except OSError:
            pass
    return removed


# --------------------------------------------------------------------------- servers

class Server:
    """A server reachable at ``url``; a launched one (``ServerHandle``) also owns the process."""

    def __init__(self, url: str, log_file=None, api: str | None = None):
        self.url = url.rstrip("/")
        self.log_file = Path(log_file) if log_file else None
        self._api = api

    @property
    def api(self) -> str:
        """How to ask it for text: "generate" (SGLang's /generate, the lab) or "openai"
        (/v1/completions, vLLM). Found out once for a server started elsewhere: SGLang and the
        lab answer /get_server_info, vLLM does not (its /server_info, in VLLM_SERVER_DEV_MODE only,
        holds a `vllm_config`)."""
        if self._api is None:
            info = self.server_info()
            self._api = "generate" if info and "vllm_config" not in info else "openai"
        return self._api

    def healthy(self, timeout: float = 2.0) -> bool:
        import requests

        try:
            return requests.get(f"{self.url}/health", timeout=timeout).status_code == 200
        except requests.RequestException:
            return False

    def server_info(self, timeout: float = 5.0) -> dict:
        """SGLang's ``/get_server_info`` (server args incl. speculative settings); {} if absent."""
        import requests

        for path in ("/get_server_info", "/server_info"):
            try:
                resp = requests.get(f"{self.url}{path}", timeout=timeout)
            except requests.RequestException:
                return {}
            if resp.status_code == 200:
                try:
                    return resp.json()
                except ValueError:
                    return {}
        return {}

    @property
    def log_path(self) -> Path | None:
        return self.log_file

    def logs(self, engine: str = "auto"):
        """The server log as ``eagle3lab.sources.logfile.read_log``'s DataFrame."""
        from eagle3lab.sources.logfile import read_log

        return read_log(self._log_file(), engine=engine)

    def observation(self, requested=None):
        """The server log as an `Observation` (effective config as the log states it)."""
        from eagle3lab.sources.logfile import observe_log

        return observe_log(self._log_file(), requested=requested)

    def _log_file(self):
        if self.log_file is None:
            raise ServerError(f"no log file known for {self.url}; pass log_file= to connect()")
        return self.log_file

    def log_tail(self, n: int = LOG_TAIL_LINES) -> str:
        return tail(self.log_file, n) if self.log_file else ""

    def stop(self) -> None:
        """A server started elsewhere is not ours to stop."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def __repr__(self):
        return f"{type(self).__name__}({self.url!r})"


_LIVE: "set[ServerHandle]" = set()  # strong refs: a dropped handle is still stopped at exit


@atexit.register
def _stop_all_at_exit() -> None:
    for handle in list(_LIVE):
        handle.stop()


def _remove_all(paths) -> None:
    """Remove a launch's temporary folders (a draft copy, vLLM's temp dir); gone ones are fine."""
    import shutil

    for path in paths:
        shutil.rmtree(path, ignore_errors=True)


def _stat_fields(pid) -> list[str] | None:
    """/proc/PID/stat after the command name (state, ppid, pgrp, ...); None once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rfind(")") + 2:].split()


def process_alive(pid: int) -> bool:
    """The process exists and is not a zombie (read from /proc)."""
    fields = _stat_fields(pid)
    return fields is not None and fields[0] != "Z"


def group_pids(pgid: int) -> list[int]:
    """The live (non-zombie) processes of a process group, read from /proc: a vLLM server's
    API server, EngineCore and Worker, so callers can check each one is gone after stop."""
    pids = []
    for entry in Path("/proc").iterdir():
        fields = _stat_fields(entry.name) if entry.name.isdigit() else None
        if fields and int(fields[2]) == pgid and fields[0] != "Z":
            pids.append(int(entry.name))
    return pids


def _group_alive(pgid: int) -> bool:
    """True while any non-zombie process remains in the process group."""
    if not Path("/proc").is_dir():
        try:
            os.killpg(pgid, 0)
            return True
        except (ProcessLookupError, PermissionError):
            return False
    return bool(group_pids(pgid))


class ServerHandle(Server):
    """A server process this Python started: its own process group, a log file, a url."""

    def __init__(self, process: subprocess.Popen, url: str, log_file: Path, command: list[str],
                 backend: str, port: int, host: str, cleanup=(), watcher: subprocess.Popen | None = None):
        super().__init__(url, log_file, api=engines.get(backend).api if backend in engines.names() else None)
        self.cleanup = list(cleanup)  # temporary folders (a draft with other layer ids)
        self.process = process
        self.watcher = watcher  # eagle3lab.serving.watchdog: stops the group if this process dies first
        self.command = command
        self.backend = backend
        self.port = port
        self.host = host
        self._stopped = False
        self._stopping = False  # stop() was called (maybe from another thread, during start-up)
        self._lock = threading.Lock()
        _LIVE.add(self)

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    @property
    def returncode(self) -> int | None:
        return self.process.poll()

    def kill(self) -> None:
        """Kill the server abruptly (SIGKILL to its group), as a crash would; no clean-up wait."""
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM the process group, SIGKILL what is left after ``grace`` s, free the port,
        remove the launch's temporary folders. Safe from another thread while ``launch`` waits
        for health (``launch`` then raises ServerStartError) and at any point of start-up."""
        self._stopping = True
        with self._lock:
            if self._stopped:
                return
            _end_watcher(self.watcher)
            pgid = self.process.pid
            for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
                try:
                    os.killpg(pgid, sig)
                except ProcessLookupError:
                    break
                if self._wait_group_gone(pgid, wait):
                    break
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            self._wait_port_free(10.0)
            _remove_all(self.cleanup)
            self._stopped = True
            _LIVE.discard(self)

    def _wait_group_gone(self, pgid: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.process.poll()  # reap the leader so it does not linger as a zombie
            if not _group_alive(pgid):
                return True
            time.sleep(0.05)
        return False

    def _wait_port_free(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while port_in_use(self.port, self.host) and time.monotonic() < deadline:
            time.sleep(0.05)

    def __repr__(self):
        state = "running" if self.alive else f"exited {self.returncode}"
        return f"ServerHandle({self.backend}, {self.url}, pid {self.pid}, {state})"


def launch(backend: str = "lab", model_path=None, draft_path=None, spec=None, port: int | None = None,
           extra_args=(), log_file=None, timeout: float = 600.0, host: str = DEFAULT_HOST,
           command=None, env: dict | None = None, vllm_python=None, gpu: bool | None = None) -> ServerHandle:
    """Start a server and return once ``/health`` answers 200.

    backend: "sglang" (``python -m sglang.launch_server``), "vllm" (``build_vllm_command``: the
    python ``find_vllm_python(vllm_python)`` picks; CPU settings when ``gpu`` is False or, with
    None, when no GPU is found) or "lab" (``python -m eagle3lab serve``, SGLang's flags plus
    ``--fault``). spec: dict or ``eagle3lab.spec.SpecConfig`` (see ``spec_to_args``); a
    ``draft_layer_ids`` key serves the draft with those aux layer ids (``temporary_draft``,
    removed at stop); a vLLM server also gets its own TMPDIR (``server_tempdir``), removed at
    stop, because vLLM leaves files there. port=None picks a free one (``free_port``) and draws
    again, up to ``LAUNCH_TRIES`` launches, when the server exits saying it was taken. ``command``
    replaces the whole argv (a list; ``{host}``/``{port}`` are filled in) or rewrites the built
    one (a callable argv -> argv, e.g. to wrap it in ``srun``/``docker exec``). Raises
    ``PortInUseError``, ``ServerStartError`` (exit code + log tail) or ``ServerTimeoutError``
    (log tail); the process group is gone whenever it raises.
    """
    args = dict(backend=backend, model_path=model_path, draft_path=draft_path, spec=spec, extra_args=extra_args,
                log_file=log_file, timeout=timeout, host=host, command=command, env=env, vllm_python=vllm_python,
                gpu=gpu)
    if port is not None:
        if port_in_use(port, host):
            raise PortInUseError(f"port {port} on {host} is already in use (another server?); "
                                 f"stop it, pick another port, or pass port=None for a free one")
        return _launch_on(port, **args)
    for attempt in range(1, LAUNCH_TRIES + 1):
        try:
            return _launch_on(free_port(host), **args)
        except ServerStartError as error:  # someone bound the drawn port first: draw another
            if attempt == LAUNCH_TRIES or not lost_its_port(error):
                raise


def lost_its_port(error: ServerStartError) -> bool:
    """True when the server exited because its port was taken between choosing and binding."""
    text = error.log_tail.lower()
    return "already in use" in text or "errno 98" in text  # vLLM, SGLang (uvicorn), the lab's serve


def _launch_on(port, *, backend, model_path, draft_path, spec, extra_args, log_file, timeout, host, command,
               env, vllm_python, gpu) -> ServerHandle:
    """``launch`` on one port: build the argv, start the group and its watchdog, wait for /health."""
    spec, layer_ids = _launch_spec(spec)
    cleanup = []
    if layer_ids is not None and draft_path is None:
        raise ServerError("draft_layer_ids without a draft (draft_path)")
    extra_env = {}
    try:
        if layer_ids is not None:
            draft_path = temporary_draft(draft_path, layer_ids)
            cleanup.append(draft_path)
        if command is None or callable(command):
            engine = engines.get(backend) if backend in engines.names() else None
            if engine is not None and engine.own_tmpdir is not None:  # vLLM: its python, GPU/CPU
                gpu = has_gpu() if gpu is None else gpu
                argv = build_command(backend, model_path, draft_path, spec, host, port, extra_args,
                                     python=engine.python(vllm_python), gpu=gpu)
                extra_env = engine.launch_env(gpu)
                tmp = engine.own_tmpdir(env or {})
                if tmp is not None:
                    cleanup.append(tmp)
                    extra_env["TMPDIR"] = str(tmp)
            else:
                argv = build_command(backend, model_path, draft_path, spec, host, port, extra_args)
            argv = [str(a) for a in command(argv)] if command else argv
        else:
            argv = [str(a).format(host=host, port=port) for a in command]
        log_path = Path(log_file) if log_file else _default_log_file(backend, port)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "ab") as log:
            log.write(f"# eagle3lab launch: {shlex.join(argv)}\n".encode())
            log.flush()
            process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       start_new_session=True, env={**os.environ, **extra_env, **(env or {})})
        watcher = _start_watcher(process, cleanup)
    except BaseException:
        _remove_all(cleanup)  # nothing started: the temporary folders go now
        raise
    label = backend if command is None or callable(command) else "custom"
    handle = ServerHandle(process, f"http://{host}:{port}", log_path, argv, label, port, host, cleanup,
                          watcher=watcher)
    try:
        _wait_healthy(handle, timeout)
    except BaseException:
        handle.stop(grace=3.0)
        raise
    return handle


WATCHDOG_GRACE_S = 5.0  # SIGTERM to SIGKILL, when the launcher died (eagle3lab.serving.watchdog)


def _start_watcher(process: subprocess.Popen, cleanup) -> subprocess.Popen:
    """The server's watchdog (eagle3lab/serving/watchdog.py, run as a script in a session of its own):
    it stops the server's group when this process dies without stopping it (SIGKILL included).
    If it cannot start, the server is killed: a server nothing would stop is not left running."""
    script = Path(__file__).with_name("watchdog.py")
    try:
        return subprocess.Popen([sys.executable, "-I", "-S", str(script), str(os.getpid()), str(process.pid),
                                 str(WATCHDOG_GRACE_S), *map(str, cleanup)],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True, close_fds=True)
    except BaseException:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()
        raise


def _end_watcher(watcher: subprocess.Popen | None) -> None:
    """Stop a server's watchdog (it exits on SIGTERM without touching the server) and reap it."""
    if watcher is None or watcher.poll() is not None:
        return
    watcher.terminate()
    try:
        watcher.wait(timeout=5)
    except subprocess.TimeoutExpired:
        watcher.kill()
        watcher.wait()


def _launch_spec(spec) -> tuple:
    """(spec, draft_layer_ids): a SpecConfig goes to the engine's argv as it is (its string form
    is made once, there); a dict may carry `draft_layer_ids`, a launch option, not a flag."""
    if spec is None or isinstance(spec, dict):
        spec = spec_dict(spec)
        return spec, spec.pop("draft_layer_ids", None)
    return spec, None


def _wait_healthy(handle: ServerHandle, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    delay = 0.05
    while True:
        code = handle.process.poll()
        if handle._stopping:
            log_tail = handle.log_tail()
            raise ServerStartError(
                f"{handle.backend} server was stopped (stop() called) before it became healthy "
                f"(log {handle.log_file})", code, log_tail)
        if code is not None:
            log_tail = handle.log_tail()
            raise ServerStartError(
                f"{handle.backend} server exited with code {code} before becoming healthy "
                f"(log {handle.log_file}); last lines:\n{log_tail}", code, log_tail)
        if handle.healthy(timeout=1.0):
            return
        if time.monotonic() > deadline:
            log_tail = handle.log_tail()
            raise ServerTimeoutError(
                f"{handle.backend} server not healthy at {handle.url}/health after {timeout:.0f} s "
                f"(log {handle.log_file}); last lines:\n{log_tail}", log_tail)
        time.sleep(delay)
        delay = min(delay * 1.5, 0.2)


def check_url(url) -> str:
    """A server URL as ``http(s)://HOST[:PORT][/PATH]`` (``HOST:PORT`` gets ``http://``), or a
    one-line ServerError at once: a mistyped scheme, spaces, no host or a bad port would
    otherwise cost the whole /health wait before saying "no healthy server"."""
    import re
    from urllib.parse import urlsplit

    text = str(url).strip()
    why = None
    if not text or any(c.isspace() for c in text):
        why = "it holds spaces" if text else "it is empty"
    elif "://" not in text and re.match(r"[A-Za-z][A-Za-z0-9+.-]*:/", text):
        why = "a scheme needs '://'"
    full = text if "://" in text else f"http://{text}"
    if why is None:
        try:
            parts = urlsplit(full)
            parts.port  # noqa: B018 - raises ValueError for a port that is not a number in range
        except ValueError as exc:
            why = str(exc)
        else:
            if parts.scheme not in ("http", "https"):
                why = f"scheme {parts.scheme!r} (use http:// or https://)"
            elif not parts.hostname:
                why = "no host"
    if why:
        raise ServerError(f"{text!r} is not a valid server URL ({why}); expected http://HOST:PORT")
    return full.rstrip("/")


def connect(url: str, log_file=None, timeout: float = 30.0) -> Server:
    """A server started elsewhere; waits up to ``timeout`` s for ``/health`` (a URL that cannot
    be one is refused at once, `check_url`)."""
    server = Server(check_url(url), log_file)
    deadline = time.monotonic() + timeout
    while not server.healthy(timeout=min(2.0, max(deadline - time.monotonic(), 0.1))):
        if time.monotonic() > deadline:
            raise ServerTimeoutError(f"no healthy server at {server.url}/health after {timeout:g} s",
                                     server.log_tail())
        time.sleep(min(0.25, max(deadline - time.monotonic(), 0.0)))
    return server

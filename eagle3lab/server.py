"""Start, watch and stop an SGLang (or lab) server as one reliable call.

The seed's investigator restarted servers by hand, over and over. ``launch`` does it the same
way on the lab (``python -m eagle3lab serve``, which speaks SGLang's HTTP API) and on a GPU
machine (``python -m sglang.launch_server``): the server runs in its own process group with its
output in a log file, ``launch`` returns once ``/health`` answers, and ``stop()`` (also on
exceptions, Ctrl-C and interpreter exit) takes the whole group down and waits until the port is
free again. ``connect(url)`` drives a server started elsewhere (a GPU box, a cluster).

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

from eagle3lab.errors import EagleLabError

DEFAULT_HOST = "127.0.0.1"
LOG_TAIL_LINES = 30

# Spec keys (ours, SGLang's and eagle3lab.config's names) -> SGLang launch flag.
class ServerError(EagleLabError):
    """A server could not be started, reached or stopped."""


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

def spec_dict(spec) -> dict:
    """A spec as a plain dict: a dict as is; a ``SpecConfig`` without the fields left at their
    defaults (so ``device="cuda"`` is not forced on anyone)."""
    if spec is None:
        return {}
    if isinstance(spec, dict):
        return dict(spec)
    return spec.given()


def spec_to_args(spec, backend: str = "sglang") -> list[str]:
    """Launch flags for a spec: a ``SpecConfig``, or a dict of its fields plus the lab
    server's ``fault``/``faults`` (``--fault``) and any other ``key`` (``--key-with-dashes``).

    The speculative flags come from ``SpecConfig.to_flags`` (one name table, config.SPEC_NAMES);
    None/False are skipped, True is a bare flag. ``model_path`` is left to ``build_command``.
    """
    from eagle3lab.config import SPEC_NAMES, SpecConfig

    items = spec_dict(spec)
    fields = {k: items.pop(k) for k in list(items) if k in SPEC_NAMES and k != "model_path"}
    items.pop("model_path", None)
    fields = {k: v for k, v in fields.items() if v is not None}
    args = SpecConfig(**fields).to_flags(backend) if fields else []
    for key, value in items.items():
        if value is None or value is False:
            continue
        if key in ("fault", "faults"):
            values = value.split(",") if isinstance(value, str) else list(value)
            args += [a for v in values if str(v).strip() and str(v).strip().lower() != "none"
                     for a in ("--fault", str(v).strip())]
            continue
        flag = "--" + key.replace("_", "-")
        if value is True:
            args.append(flag)
        elif isinstance(value, (list, tuple)):
            args += [flag, *map(str, value)]
        else:
            args += [flag, str(value)]
    return args


def build_command(backend: str, model_path, draft_path=None, spec=None, host: str = DEFAULT_HOST,
                  port: int = 30000, extra_args=()) -> list[str]:
    """The server's argv: SGLang's own launcher, or the lab server taking the same flags."""
    if backend == "sglang":
        head = [sys.executable, "-m", "sglang.launch_server"]
    elif backend == "lab":
        head = [sys.executable, "-m", "eagle3lab", "serve"]
    else:
        raise ServerError(f"unknown backend {backend!r}: use 'sglang' or 'lab'")
    model_path = model_path if model_path is not None else spec_dict(spec).get("model_path")
    if model_path is None:
        raise ServerError("model_path is required (the target model directory or hub id)")
    args = ["--model-path", str(model_path), "--host", host, "--port", str(port)]
    spec_args = spec_to_args(spec, backend)
    if draft_path is not None and "--speculative-draft-model-path" not in spec_args:
        args += ["--speculative-draft-model-path", str(draft_path)]
    if ("--speculative-draft-model-path" in args + spec_args
            and "--speculative-algorithm" not in spec_args):
        args += ["--speculative-algorithm", "EAGLE3"]
    return head + args + spec_args + [str(a) for a in extra_args]


# --------------------------------------------------------------------------- ports

def free_port(host: str = DEFAULT_HOST) -> int:
    """A port nobody listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
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


def _default_log_file(backend: str, port: int) -> Path:
    from eagle3lab.paths import cache_dir

    return cache_dir("server-logs") / f"{backend}-{port}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"


# --------------------------------------------------------------------------- servers

class Server:
    """A server reachable at ``url``; a launched one (``ServerHandle``) also owns the process."""

    def __init__(self, url: str, log_file=None):
        self.url = url.rstrip("/")
        self.log_file = Path(log_file) if log_file else None

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


def _group_alive(pgid: int) -> bool:
    """True while any non-zombie process remains in the process group."""
    proc = Path("/proc")
    if not proc.is_dir():
        try:
            os.killpg(pgid, 0)
            return True
        except (ProcessLookupError, PermissionError):
            return False
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()  # state, ppid, pgrp, ...
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


class ServerHandle(Server):
    """A server process this Python started: its own process group, a log file, a url."""

    def __init__(self, process: subprocess.Popen, url: str, log_file: Path, command: list[str],
                 backend: str, port: int, host: str):
        super().__init__(url, log_file)
        self.process = process
        self.command = command
        self.backend = backend
        self.port = port
        self.host = host
        self._stopped = False
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
        """SIGTERM the process group, SIGKILL what is left after ``grace`` s, free the port."""
        with self._lock:
            if self._stopped:
                return
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
           command=None, env: dict | None = None) -> ServerHandle:
    """Start a server and return once ``/health`` answers 200.

    backend: "sglang" (``python -m sglang.launch_server``) or "lab" (``python -m eagle3lab
    serve``, same flags plus ``--fault``). spec: dict or ``eagle3lab.config.SpecConfig``
    (see ``spec_to_args``). port=None picks a free one. ``command`` replaces the whole argv
    (a list; ``{host}``/``{port}`` are filled in) or rewrites the built one (a callable
    argv -> argv, e.g. to wrap it in ``srun``/``docker exec``). Raises
    ``PortInUseError``, ``ServerStartError`` (exit code + log tail) or ``ServerTimeoutError``
    (log tail); the process group is gone whenever it raises.
    """
    if port is None:
        port = free_port(host)
    elif port_in_use(port, host):
        raise PortInUseError(f"port {port} on {host} is already in use (another server?); "
                             f"stop it, pick another port, or pass port=None for a free one")
    if command is None or callable(command):
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
                                   start_new_session=True, env={**os.environ, **(env or {})})
    label = backend if command is None or callable(command) else "custom"
    handle = ServerHandle(process, f"http://{host}:{port}", log_path, argv, label, port, host)
    try:
        _wait_healthy(handle, timeout)
    except BaseException:
        handle.stop(grace=3.0)
        raise
    return handle


def _wait_healthy(handle: ServerHandle, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    delay = 0.05
    while True:
        code = handle.process.poll()
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


def connect(url: str, log_file=None, timeout: float = 30.0) -> Server:
    """A server started elsewhere; waits up to ``timeout`` s for ``/health``."""
    server = Server(url if "://" in url else f"http://{url}", log_file)
    deadline = time.monotonic() + timeout
    while not server.healthy(timeout=2.0):
        if time.monotonic() > deadline:
            raise ServerTimeoutError(f"no healthy server at {server.url}/health after {timeout:.0f} s",
                                     server.log_tail())
        time.sleep(0.25)
    return server

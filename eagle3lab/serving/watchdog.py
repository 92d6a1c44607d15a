"""A launched server must not outlive the process that launched it, however that process dies.

`eagle3lab.serving.server.launch` starts each server in its own process group (so `stop()` takes the
whole group: vLLM's API server, EngineCore and worker), which also means nothing stops the group
when the launcher is killed with SIGKILL or crashes without unwinding. This watcher is started
beside each server, in a session of its own, and runs as a script (`python -I -S watchdog.py
LAUNCHER_PID PGID GRACE [FOLDER ...]`: standard library only, no eagle3lab import, ~20 ms). While
its parent is the launcher it only watches; once the parent changes (the launcher died and the
watcher was re-parented) it sends SIGTERM to the server's group, SIGKILL after GRACE seconds,
and removes the launch's temporary folders.

Why not `prctl(PR_SET_PDEATHSIG)`: on Linux it fires when the *thread* that forked the child
exits, and eagle3lab launches servers from worker threads (`loadsweep._run_launched` starts a
server and its baseline in a thread pool that ends at once), so the server would be killed while
its launcher lives. `os.getppid()` is the launching *process*, whatever thread forked.

`stop()` ends the watcher first (SIGTERM: it exits without touching the server) and then stops
the group itself; a watcher whose server group is gone exits by itself.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import time

POLL_S = 0.2


def group_alive(pgid: int) -> bool:
    """A process of the group is alive and not a zombie (/proc; else whether it can be signalled)."""
    if os.path.isdir("/proc"):
        for entry in os.listdir("/proc"):
            if entry.isdigit() and _live_member(entry, pgid):
                return True
        return False
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _live_member(pid: str, pgid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            stat = fh.read()
    except OSError:
        return False
    fields = stat[stat.rfind(")") + 2:].split()  # state, ppid, pgrp, ...
    return len(fields) > 2 and fields[2] == str(pgid) and fields[0] != "Z"


def stop_group(pgid: int, grace: float) -> None:
    """SIGTERM the group, then SIGKILL whatever is left after `grace` seconds."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not group_alive(pgid):
                return
            time.sleep(0.05)


def watch(launcher: int, pgid: int, grace: float, cleanup=()) -> int:
    """Wait while the launcher is this process's parent and the group lives; when the launcher
    is gone, stop the group and remove `cleanup`."""
    while os.getppid() == launcher:
        if not group_alive(pgid):
            return 0
        time.sleep(POLL_S)
    stop_group(pgid, grace)
    for path in cleanup:
        shutil.rmtree(path, ignore_errors=True)
    return 0


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # stop(): the launcher stops the group
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C is the launcher's to handle
    launcher, pgid, grace = int(argv[1]), int(argv[2]), float(argv[3])
    return watch(launcher, pgid, grace, argv[4:])


if __name__ == "__main__":
    sys.exit(main(sys.argv))

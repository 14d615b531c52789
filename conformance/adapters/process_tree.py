"""Stopping every process an implementation started, whatever it did to hide.

Two nets, used by the stdio and the command transports alike:

- **the process group**: each program or invocation is started in a session
  of its own (``start_new_session``), so its pid is its group id and one
  ``killpg`` reaches it and every child that stayed in its group, also
  after the program itself has exited;
- **the run token**: the kit puts ``NAME=<token>`` in the environment of what
  it starts; a child inherits it, also one that leaves the group
  (``setsid``, a daemon, a detached background worker). On Linux every
  process whose environment (``/proc/PID/environ``) still holds the token is
  killed. A process that clears its environment before ``exec`` escapes
  this net; elsewhere than Linux there is no ``/proc`` and only the group is
  reached.

Everything here is bounded: no wait longer than the caller asks for.
"""

from __future__ import annotations

import os
import signal
import time
import uuid

__all__ = ["new_token", "kill_group", "marked_pids", "kill_marked_processes", "stop_marked"]


def new_token() -> str:
    """A fresh, unguessable run token."""
    return uuid.uuid4().hex


def kill_group(pid: int, sig: int = signal.SIGKILL) -> bool:
    """Signal the process group led by ``pid`` (the program and what stayed in
    its group); if there is no such group, the process alone. True if a
    signal was sent."""
    try:
        os.killpg(pid, sig)
        return True
    except (ProcessLookupError, PermissionError, OSError):
        try:
            os.kill(pid, sig)
            return True
        except (ProcessLookupError, PermissionError, OSError):
            return False


def marked_pids(env_name: str, token: str) -> list[int]:
    """Pids of the processes whose environment holds ``env_name=token``
    (Linux; [] where /proc is missing). The kit's own process is never one."""
    needle = f"{env_name}={token}".encode()
    found: list[int] = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    me = os.getpid()
    for entry in entries:
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                environ = handle.read()
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if needle in environ.split(b"\0"):
            found.append(int(entry))
    return found


def kill_marked_processes(env_name: str, token: str) -> list[int]:
    """SIGKILL every process marked with the token; return their pids."""
    killed = []
    for pid in marked_pids(env_name, token):
        try:
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        except OSError:
            pass
    return killed


def stop_marked(env_name: str, token: str, *, rounds: int = 5, pause_s: float = 0.05) -> list[int]:
    """Kill marked processes until a scan finds none left (a worker may be
    forking while the first scan runs), at most ``rounds`` scans."""
    killed: list[int] = []
    for _ in range(max(1, rounds)):
        now = kill_marked_processes(env_name, token)
        if not now:
            break
        killed += now
        time.sleep(pause_s)
    return killed

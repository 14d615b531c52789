"""The command transport: a real command-line tool becomes an :class:`Adapter`.

Each spec operation is one invocation of the tool, built from the argv
template the config file gives it (``conformance/command_config.py``,
docs/command-adapter.md) and run without a shell, in its own process group,
with a timeout. What the kit sees as the call's result is what the tool did::

    {"exit_code": 3,
     "stdout": {...the JSON document it printed...} or null,
     "stderr": "its stderr (the last 4 KiB)"}

plus, only when stdout is not one JSON document, ``stdout_text`` (the raw
text, cut to 4 KiB) and ``stdout_error`` (why it is not JSON), so the spec's
result schema can say what went wrong.

Nothing an invocation does is raised to the kit: a timeout, a missing
executable, a crash by signal become error responses with a stable kind
(:data:`ERROR_KINDS`) and a message quoting the command line and the end of
its stderr.

Time belongs to the kit: ``reset(now_ms)`` and ``set_clock(now_ms)`` write
the virtual clock (integer milliseconds) to ``{clock_file}``, which the
config hands to the tool (usually through an environment variable);
``{now_ms}`` is also available as a placeholder. ``reset`` gives the tool a
fresh ``{state_dir}`` and first ends every process the previous run left
behind: each invocation carries a run token in its environment
(``CONFORMANCE_COMMAND_RUN``), and on Linux every process still holding the
old token (a detached background worker, say) is killed.
"""

from __future__ import annotations

import atexit
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import InputRefused
from .adapter import Adapter, error_response, result_response
from .command_config import (
    CommandConfig,
    CommandConfigError,
    TemplateError,
    expand_argv,
    expand_text,
    load_command_config,
)
from .command_trust import CommandTrust, check_carriable
from .process_tree import kill_group, new_token, stop_marked

__all__ = [
    "CommandAdapter",
    "command_factory",
    "ERROR_KINDS",
    "RUN_TOKEN_ENV",
    "OUTPUT_TAIL_CHARS",
    "kill_marked_processes",
    "observe",
]

RUN_TOKEN_ENV = "CONFORMANCE_COMMAND_RUN"
OUTPUT_TAIL_CHARS = 4096
_HELD_WAIT_S = 1.0  # after killing a timed-out command, for its pipes to close

ERROR_KINDS = {
    "command_timeout": "the invocation did not finish (or did not close its stdout/stderr) in time; it was killed",
    "command_not_found": "the executable does not exist",
    "command_not_executable": "the executable exists but cannot be run (permissions)",
    "command_failed_to_start": "the operating system refused to start the invocation",
    "command_killed": "the invocation was ended by a signal (a crash, or killed)",
    "argument_missing": "the argv template needs a value the call does not provide",
    "unknown_operation": "the config has no command for this operation",
}

_ROOTS: set[str] = set()
_ROOTS_LOCK = threading.Lock()
_TOKENS: set[str] = set()


def kill_marked_processes(token: str) -> list[int]:
    """Kill every process whose environment carries this run token; return their pids.
    Linux only (reads /proc); elsewhere returns [] (use the config's `reset` command)."""
    return stop_marked(RUN_TOKEN_ENV, token)


@atexit.register
def _cleanup_at_exit() -> None:
    for token in list(_TOKENS):
        kill_marked_processes(token)
    with _ROOTS_LOCK:
        roots = list(_ROOTS)
    for root in roots:
        shutil.rmtree(root, ignore_errors=True)


def _kill_group(proc: subprocess.Popen) -> None:
    kill_group(proc.pid)  # the invocation and anything it started in its group


def _tail(data: bytes) -> str:
    text = data.decode("utf-8", errors="replace")
    return text if len(text) <= OUTPUT_TAIL_CHARS else "..." + text[-OUTPUT_TAIL_CHARS:]


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return " (its stderr is empty)"
    last = lines[-1] if len(lines[-1]) <= 200 else lines[-1][:200] + "..."
    return f"; its stderr ends with {last!r}"


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def observe(exit_code: int, stdout: bytes, stderr: bytes) -> dict:
    """The result the kit sees for one finished invocation."""
    out: dict[str, Any] = {"exit_code": exit_code, "stdout": None, "stderr": _tail(stderr)}
    text = stdout.decode("utf-8", errors="replace")
    try:
        out["stdout"] = json.loads(text)
    except ValueError as exc:
        shown = text.strip()
        shown = shown if len(shown) <= 200 else shown[:200] + "..."
        out["stdout_text"] = text if len(text) <= OUTPUT_TAIL_CHARS else text[:OUTPUT_TAIL_CHARS] + "..."
        out["stdout_error"] = (
            f"stdout is not one JSON document ({exc}); it was "
            + (f"{shown!r}" if shown else "empty")
            + f" (exit code {exit_code})"
        )
    return out


class CommandAdapter(Adapter):
    """Runs a command-line tool, one invocation per call, as the config says.

    ``options`` come from ``--adapter-opt KEY=VALUE``: ``profile`` replaces
    the config's profile; any other key replaces a config var (unknown keys
    are refused). ``extra_env`` is added to every invocation's environment.
    """

    def __init__(self, config: str | Path | CommandConfig, *, extra_env: dict | None = None, **options: Any):
        self.config = config if isinstance(config, CommandConfig) else load_command_config(config)
        self.profile = self.config.profile
        self.vars = dict(self.config.vars)
        for key, value in options.items():
            if key == "profile":
                self.profile = None if value in (None, "", "none", "null") else str(value)
            elif key in self.vars:
                self.vars[key] = value
            else:
                known = ", ".join(["profile", *self.vars]) or "profile"
                raise CommandConfigError(f"adapter option {key!r} is not a var of {self.config.path} (known: {known})")
        self.extra_env = {str(k): str(v) for k, v in (extra_env or {}).items()}
        self.root = tempfile.mkdtemp(prefix="conformance-cli-")
        with _ROOTS_LOCK:
            _ROOTS.add(self.root)
        self.runs = 0
        self.token: str | None = None
        self.run_dir = Path(self.root) / "run-0"  # no run yet: _start_run makes run-1
        self.now_ms = 0
        self._clock_lock = threading.Lock()
        self._live: set[subprocess.Popen] = set()  # invocations running now (concurrent calls too)
        self._live_lock = threading.Lock()
        self._closed = False
        self._trust = CommandTrust()
        self._start_run(0)

    def __repr__(self) -> str:
        return f"CommandAdapter({str(self.config.path)!r})"

    # -- values for templates ----------------------------------------------------
    def _builtins(self) -> dict:
        run = self.run_dir
        return {
            "python": sys.executable or "python3",
            "config_dir": str(self.config.directory),
            "cache_dir": str(Path(self.root) / "cache"),
            "run_dir": str(run),
            "state_dir": str(run / "state"),
            "clock_file": str(run / "clock"),
            "now_ms": self.now_ms,
            "profile": self.profile or "",
        }

    def _base_values(self) -> dict:
        values = self._builtins()
        for name, value in self.vars.items():
            if isinstance(value, list):
                values[name] = [expand_text(v, self._builtins()) for v in value]
            else:
                values[name] = expand_text(str(value), self._builtins())
        return values

    def _environment(self, values: dict, extra: dict) -> dict:
        env = dict(os.environ) if self.config.inherit_env else {"PATH": os.environ.get("PATH", os.defpath)}
        for name, value in {**self.config.env, **extra}.items():
            env[name] = expand_text(value, values)
        env.update(self.extra_env)
        env[RUN_TOKEN_ENV] = self.token or ""
        return env

    # -- runs ----------------------------------------------------------------------
    def _start_run(self, now_ms: int) -> None:
        """End the previous run's processes, forget its files, make a fresh state."""
        if self.token is not None:
            kill_marked_processes(self.token)
            _TOKENS.discard(self.token)
        shutil.rmtree(self.run_dir, ignore_errors=True)
        self.runs += 1
        self._trust.clear()  # commands printed in the previous run are not this run's
        self.token = new_token()
        _TOKENS.add(self.token)
        self.run_dir = Path(self.root) / f"run-{self.runs}"
        (self.run_dir / "state").mkdir(parents=True)
        self._write_clock(now_ms)

    def _write_clock(self, now_ms: int) -> None:
        with self._clock_lock:
            self.now_ms = int(now_ms)
            clock = self.run_dir / "clock"
            temp = clock.with_name(f".clock.{os.getpid()}.tmp")
            temp.write_text(f"{self.now_ms}\n", encoding="ascii")
            os.replace(temp, clock)  # readers see the old or the new time, never half a number

    # -- the Adapter protocol ----------------------------------------------------------
    def describe(self) -> dict:
        return {
            "name": self.config.name,
            "version": self.config.version,
            "profile": self.profile,
            "parameters": dict(self.config.parameters),
            "capabilities": {"concurrent": False, **self.config.capabilities},
        }

    def reset(self, now_ms: int) -> None:
        self._start_run(now_ms)
        if self.config.reset_argv:
            values = self._base_values()
            try:
                argv = expand_argv(self.config.reset_argv, values)
            except TemplateError as exc:
                raise CommandConfigError(f"{self.config.path}: reset.argv: {exc}") from None
            response = self._invoke("reset", argv, values, {}, self.config.reset_timeout_s)
            if "error" in response:
                raise CommandConfigError(f"the reset command failed: {response['error']['message']}")
            if response["result"]["exit_code"] != 0:
                raise CommandConfigError(
                    f"the reset command `{shlex.join(argv)}` exited with status "
                    f"{response['result']['exit_code']}"
                    f"{_last_line(response['result']['stderr'])}"
                )

    def set_clock(self, now_ms: int) -> list[dict]:
        self._write_clock(now_ms)
        return []

    def call(self, operation: str, args: dict) -> dict:
        op = self.config.operations.get(operation)
        if op is None:
            return error_response(
                "unknown_operation",
                f"the command adapter config {self.config.path} has no "
                f"command for operation {operation!r} (it has: "
                f"{', '.join(self.config.operations)})",
            )
        base = self._base_values()
        values = {**(args or {}), **base}  # an argument never replaces a var or built-in of the config
        try:
            argv = expand_argv(op["argv"], values)
            op_env = {name: expand_text(value, values) for name, value in op["env"].items()}
        except TemplateError as exc:
            if (args or {}).get(exc.name) is not None:  # given, but unusable (e.g. unbalanced quotes)
                raise InputRefused(f"{operation}: {exc}; nothing was run") from None
            return error_response("argument_missing", f"{operation}: {exc} (config {self.config.path})")
        # Refused before anything starts (InputRefused, docs/trust-model.md): a
        # program named by the call's arguments that the tool did not print
        # (and no allowed prefix covers), or a value no command line can carry.
        trusted = self._trust.check(operation, op["argv"], args, base, argv, op["allowed_prefixes"], self.config.path)
        check_carriable(operation, argv, args, op_env)
        self._trust.note_arguments(args, skip=set(trusted))
        response = self._invoke(operation, argv, values, op["env"], op["timeout_s"])
        if "result" in response:
            self._trust.note_output(response["result"].get("stdout"))
        return response

    def close(self) -> None:
        """Stop everything this adapter started and remove its directories.
        Concurrent calls still under way (e.g. when a signal ends the run)
        start nothing new from here on; their invocations are killed."""
        with self._live_lock:
            self._closed = True
            running = list(self._live)
        for proc in running:
            _kill_group(proc)
        if self.token is not None:
            kill_marked_processes(self.token)
            _TOKENS.discard(self.token)
            self.token = None
        shutil.rmtree(self.root, ignore_errors=True)
        if not os.path.exists(self.root):  # else the exit handler tries again
            with _ROOTS_LOCK:
                _ROOTS.discard(self.root)

    # -- one invocation ----------------------------------------------------------------
    def _invoke(self, operation: str, argv: list[str], values: dict, op_env: dict, timeout_s: float) -> dict:
        line = shlex.join(argv)
        try:
            cwd = expand_text(self.config.cwd, values)
            env = self._environment(values, op_env)
        except TemplateError as exc:
            return error_response("argument_missing", f"{operation}: {exc} (config {self.config.path})")
        with self._live_lock:  # close() waits for a start under way, and nothing starts after it
            started = self._start_invocation(argv, line, cwd, env)
        if isinstance(started, dict):
            return started
        try:
            return self._finish(line, started, timeout_s)
        finally:
            with self._live_lock:
                self._live.discard(started)

    def _start_invocation(self, argv: list[str], line: str, cwd: str, env: dict) -> subprocess.Popen | dict:
        """The running invocation, or the error response saying why it did not start."""
        if self._closed:
            return error_response(
                "command_failed_to_start", f"`{line}` was not started: the adapter is closed (the run is ending)"
            )
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=cwd,
                env=env,
                close_fds=True,
                start_new_session=True,
            )
        except FileNotFoundError as exc:
            missing = exc.filename if exc.filename not in (None, argv[0]) else argv[0]
            if exc.filename == cwd or not Path(cwd).is_dir():
                return error_response(
                    "command_failed_to_start", f"`{line}` could not start: its working directory {cwd} does not exist"
                )
            return error_response(
                "command_not_found",
                f"`{line}` could not start: {missing!r} was not found "
                f"(is it installed and on PATH, or is the path right?)",
            )
        except PermissionError:
            return error_response(
                "command_not_executable",
                f"`{line}` could not start: {argv[0]!r} is not executable (check its permissions)",
            )
        except OSError as exc:
            return error_response("command_failed_to_start", f"`{line}` could not start: {exc.strerror or exc}")
        self._live.add(proc)
        return proc

    def _finish(self, line: str, proc: subprocess.Popen, timeout_s: float) -> dict:
        try:
            stdout, stderr = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            exited = proc.poll()
            _kill_group(proc)
            stdout, stderr = self._drain(proc)
            if exited is not None:
                why = (
                    f"exited with status {exited} but its stdout/stderr stayed open for {timeout_s:g}s: a "
                    f"process it started still holds them (start background workers with their stdio "
                    f"redirected, e.g. to /dev/null)"
                )
            else:
                why = f"did not finish within {timeout_s:g}s and was killed"
            return error_response("command_timeout", f"`{line}` {why}{_last_line(_tail(stderr))}")
        except BaseException:  # the kit's own timeout or an interrupt: leave nothing running
            _kill_group(proc)
            self._drain(proc)
            raise
        if proc.returncode < 0:
            return error_response(
                "command_killed", f"`{line}` was killed by {_signal_name(-proc.returncode)}{_last_line(_tail(stderr))}"
            )
        return result_response(observe(proc.returncode, stdout, stderr))

    @staticmethod
    def _drain(proc: subprocess.Popen) -> tuple[bytes, bytes]:
        try:
            out, err = proc.communicate(timeout=_HELD_WAIT_S)
            return out or b"", err or b""
        except (subprocess.TimeoutExpired, ValueError, OSError):
            for stream in (proc.stdout, proc.stderr):
                try:
                    if stream is not None:
                        stream.close()
                except OSError:
                    pass
            try:
                proc.wait(timeout=_HELD_WAIT_S)
            except subprocess.TimeoutExpired:
                pass
            return b"", b""


def command_factory(
    config_path: str | Path, options: dict | None = None, *, extra_env: dict | None = None
) -> Callable[[], CommandAdapter]:
    """A factory of fresh :class:`CommandAdapter` s for one config file. The
    config and the options are checked now (CommandConfigError says what is
    wrong), so a bad file fails before anything runs."""
    config = load_command_config(config_path)
    options = dict(options or {})
    CommandAdapter(config, extra_env=extra_env, **options).close()  # refuses unknown options now

    def build() -> CommandAdapter:
        return CommandAdapter(config, extra_env=extra_env, **options)

    return build

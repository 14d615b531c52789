"""The stdio transport: any program speaking protocol v1 (JSON lines on its
stdin/stdout, docs/adapter-protocol.md) becomes an :class:`Adapter`.

A thin layer over the in-process protocol: ``describe`` is the hello
handshake, ``reset``/``set_clock``/``call``/``close`` are the reset, clock,
call and bye messages. The kit's session keeps doing what it does for Python
adapters (timeouts, restarts after a timeout, concurrent groups); this module
adds what a subprocess needs:

- a reader thread routes response lines to waiting callers by ``id``, so
  concurrent calls work when the program declares ``concurrent: true``
  (otherwise one request at a time, under a lock);
- stderr goes to a bounded ring buffer (its tail is quoted when the program
  dies);
- a crash or EOF fails the pending request with the exit status and the
  stderr tail; the next ``reset()`` starts the program again (with a fresh
  handshake), so the next case runs;
- a line that is not a valid answer (not JSON, unknown id, a second answer)
  fails the pending request(s) with a :class:`ProtocolError` quoting it; a
  broken connection is restarted by the next ``reset()`` too;
- ``close()`` says bye when the program is healthy, then terminates and kills
  its process group, with bounded waits: it never blocks. Workers the
  program detached from its group (a new session, a daemon) carry the run
  token :data:`RUN_TOKEN_ENV` in their environment and are killed too
  (``process_tree``), so nothing the program started outlives it.
"""

from __future__ import annotations

import atexit
import copy
import itertools
import os
import shlex
import signal
import subprocess
import threading
from collections.abc import Callable
from contextlib import nullcontext
from typing import IO, Any

from ..errors import AdapterLoadError, ConformanceError
from .adapter import Adapter
from .process_tree import kill_group, new_token, stop_marked
from .stdio_protocol import (
    MAX_LINE_BYTES,
    PROTOCOL_VERSION,
    ProtocolError,
    Response,
    ResponseReader,
    bye_request,
    call_request,
    clock_request,
    encode,
    hello_request,
    major_version,
    quote_line,
    reset_request,
)

__all__ = [
    "StdioAdapter",
    "ProgramExited",
    "RequestRefused",
    "stdio_factory",
    "split_command",
    "STDERR_TAIL_BYTES",
    "RUN_TOKEN_ENV",
]

# Set in the environment of every program the kit starts (a fresh value per
# start): what still carries it when the program is stopped is killed.
RUN_TOKEN_ENV = "CONFORMANCE_STDIO_RUN"

STDERR_TAIL_BYTES = 4096
_BYE_WAIT_S = 1.0  # for the answer to bye, then again for a clean exit
_TERM_WAIT_S = 0.5  # after SIGTERM, before SIGKILL
_EXIT_WAIT_S = 2.0  # after stdout closed, for the exit status

_LIVE: dict[subprocess.Popen, str] = {}  # running programs -> their run tokens
_LIVE_LOCK = threading.Lock()


class ProgramExited(ConformanceError):
    """The program exited (or closed its stdout) while the kit needed it."""


class RequestRefused(ConformanceError):
    """The program answered reset, clock or bye with an error."""


def split_command(command: str | list[str] | tuple[str, ...]) -> list[str]:
    """``"node my adapter.js"`` -> argv, split like a POSIX shell would
    (quotes respected); no shell runs it."""
    if isinstance(command, (list, tuple)):
        argv = [str(part) for part in command]
    else:
        try:
            argv = shlex.split(str(command))
        except ValueError as exc:
            raise AdapterLoadError(f"cannot split adapter command {command!r}: {exc}") from None
    if not argv:
        raise AdapterLoadError(
            "the adapter command is empty; give the program to run, e.g. --adapter-cmd \"node my-adapter.js\""
        )
    return argv


def _signal_and_wait(proc: subprocess.Popen, sig: int) -> None:
    """If the program still runs, signal its process group and wait a bounded time."""
    if proc.poll() is None:
        _kill_group(proc, sig)
        try:
            proc.wait(timeout=_TERM_WAIT_S)
        except subprocess.TimeoutExpired:
            pass


def _kill_group_members(proc: subprocess.Popen) -> None:
    """SIGKILL what is left of the program's process group once the program
    itself has exited (its pid is the group id; start_new_session)."""
    if proc.poll() is None:
        return
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError):
        pass  # the group is empty: nothing left behind


def _kill_group(proc: subprocess.Popen, sig: int) -> None:
    if proc.poll() is None:
        kill_group(proc.pid, sig)  # the program and anything it started in its group


@atexit.register
def _kill_leftovers() -> None:
    # A program still running when the kit exits (e.g. a close() cut short by
    # an interrupt) must not outlive it.
    with _LIVE_LOCK:
        procs = list(_LIVE.items())
    for proc, token in procs:
        _kill_group(proc, signal.SIGKILL)
        stop_marked(RUN_TOKEN_ENV, token)


def _describe_status(returncode: int | None) -> str:
    if returncode is None:
        return "closed its stdout but is still running"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"was killed by {name}"
    return f"exited with status {returncode}"


class _Waiter:
    __slots__ = ("event", "response", "error", "type")

    def __init__(self, type_: str) -> None:
        self.event = threading.Event()
        self.response: Response | None = None
        self.error: BaseException | None = None
        self.type = type_


def _pipes(proc: subprocess.Popen) -> tuple[IO[bytes], IO[bytes], IO[bytes]]:
    """A program's stdin, stdout and stderr (it was started with all three piped)."""
    if proc.stdin is None or proc.stdout is None or proc.stderr is None:
        raise AdapterLoadError("the adapter program was started without its three pipes")
    return proc.stdin, proc.stdout, proc.stderr


class _Connection:
    """One running program: its pipes, reader threads and pending requests."""

    def __init__(self, argv: list[str], label: str, cwd: str | None, env: dict | None) -> None:
        self.label = label
        self.token = new_token()
        env = dict(os.environ if env is None else env)
        env[RUN_TOKEN_ENV] = self.token
        try:
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=cwd,
                env=env,
                close_fds=True,
                start_new_session=True,
            )
        except OSError as exc:
            raise AdapterLoadError(
                f"cannot start the adapter program {label!r}: {exc.strerror or exc} ({argv[0]})"
            ) from None
        with _LIVE_LOCK:
            _LIVE[self.proc] = self.token
        self.stdin, self.stdout, self.stderr = _pipes(self.proc)
        self.reader = ResponseReader()
        self.lock = threading.Lock()  # waiters, failure
        self.write_lock = threading.Lock()  # whole lines only
        self.waiters: dict[int, _Waiter] = {}
        self.ids = itertools.count(1)
        self.failure: BaseException | None = None  # why this connection is unusable
        self.failure_reported = False
        self.stale = False  # a request was abandoned (timeout): do not say bye
        self.closing = False
        self._stderr = bytearray()
        self._stderr_lock = threading.Lock()
        self._stderr_done = threading.Event()
        self._stdout_thread = threading.Thread(target=self._read_stdout, daemon=True, name="stdio-adapter-stdout")
        threading.Thread(target=self._read_stderr, daemon=True, name="stdio-adapter-stderr").start()
        self._stdout_thread.start()

    # -- stderr ring buffer ------------------------------------------------------
    def _read_stderr(self) -> None:
        fd = self.stderr.fileno()
        try:
            while True:
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                with self._stderr_lock:
                    self._stderr += chunk
                    if len(self._stderr) > STDERR_TAIL_BYTES:
                        del self._stderr[:-STDERR_TAIL_BYTES]
        except (OSError, ValueError):
            pass
        finally:
            self._stderr_done.set()

    def stderr_tail(self) -> str:
        with self._stderr_lock:
            data = bytes(self._stderr)
        return data.decode("utf-8", "replace").strip()

    # -- stdout: responses ---------------------------------------------------------
    def _read_stdout(self) -> None:
        stream = self.stdout
        limit = MAX_LINE_BYTES + 2
        try:
            while True:
                try:
                    line = stream.readline(limit)
                except (OSError, ValueError):
                    break
                if not line:
                    break
                if len(line) >= limit and not line.endswith(b"\n"):
                    head = quote_line(line[:200])
                    while line and not line.endswith(b"\n"):  # skip the rest of the line
                        try:
                            line = stream.readline(limit)
                        except (OSError, ValueError):
                            line = b""
                    self._protocol_failure(
                        ProtocolError(
                            f"the program printed a line longer than {MAX_LINE_BYTES} bytes "
                            f"(the limit), starting {head}"
                        )
                    )
                    continue
                if self.failure is not None:
                    continue  # broken: drain stdout so the program never blocks on it
                try:
                    response = self.reader.read(line)
                except ProtocolError as exc:
                    self._protocol_failure(exc)
                    continue
                except Exception as exc:
                    self._protocol_failure(
                        ProtocolError(f"the program printed an unreadable line ({type(exc).__name__}: {exc})", line)
                    )
                    continue
                if response is None:
                    continue  # a late answer to an abandoned request
                with self.lock:
                    waiter = self.waiters.pop(response.id, None)
                if waiter is not None:
                    waiter.response = response
                    waiter.event.set()
        finally:
            self._on_eof()

    def _protocol_failure(self, exc: ProtocolError) -> None:
        with self.lock:
            if exc.id is not None and exc.id in self.waiters:
                # An answer to a known request that breaks its schema: only
                # that request fails; the stream is still in step.
                waiter = self.waiters.pop(exc.id)
                waiter.error = exc
                waiter.event.set()
                return
        self._fail_all(exc, report_first=False)

    def _fail_all(self, error: BaseException, *, report_first: bool) -> None:
        """The stream is broken: remember the first cause and fail every pending
        request, with that first cause or with ``error`` itself."""
        with self.lock:
            if self.failure is None:
                self.failure = error
            waiters, self.waiters = list(self.waiters.values()), {}
            if waiters:
                self.failure_reported = True
            failure = self.failure if report_first else error
        for waiter in waiters:
            waiter.error = copy.copy(failure)
            waiter.event.set()

    def _on_eof(self) -> None:
        if self.closing:
            error: BaseException = ProgramExited("the kit closed the connection to the program")
        else:
            try:
                self.proc.wait(timeout=_EXIT_WAIT_S)
            except subprocess.TimeoutExpired:
                pass
            self._stderr_done.wait(0.5)
            error = ProgramExited(self.exit_text())
        self._fail_all(error, report_first=True)

    def exit_text(self) -> str:
        """One line with the exit status and stderr's last line (reports
        often show only a message's first line), then the stderr tail."""
        text = f"the program {_describe_status(self.proc.poll())}"
        tail = self.stderr_tail()
        if not tail:
            return text + " (it wrote nothing to stderr)"
        last = tail.splitlines()[-1].strip()
        if len(last) > 200:
            last = last[:200] + "..."
        return (
            f"{text}; its stderr ends with {last!r}\n"
            f"--- the tail of its stderr (at most {STDERR_TAIL_BYTES} bytes) ---\n{tail}"
        )

    # -- requests ------------------------------------------------------------------
    def take_unreported_failure(self) -> BaseException | None:
        with self.lock:
            if self.failure is not None and not self.failure_reported:
                self.failure_reported = True
                return copy.copy(self.failure)
        return None

    def usable(self) -> bool:
        return self.failure is None and not self.stale and not self.closing and self.proc.poll() is None

    def request(self, build: Callable[[int], dict], type_: str) -> Response:
        waiter = _Waiter(type_)
        with self.lock:
            if self.failure is not None:
                self.failure_reported = True
                raise copy.copy(self.failure) if not self.closing else ProgramExited("the connection is closed")
            id = next(self.ids)
        data = encode(build(id))  # before registering: a kit-side encoding error leaves no trace
        with self.lock:
            self.waiters[id] = waiter
            self.reader.sent(id, type_)
        try:
            try:
                with self.write_lock:
                    self.stdin.write(data)
                    self.stdin.flush()
            except (BrokenPipeError, ConnectionResetError, ValueError, OSError):
                # It is gone (or closed its stdin): wait for stdout to close,
                # which fails this waiter with the exit status.
                if not waiter.event.wait(_EXIT_WAIT_S + 1.0):
                    raise ProgramExited(f"the program stopped reading its stdin; {self.exit_text()}") from None
            waiter.event.wait()
            if waiter.error is not None:
                raise waiter.error
            assert waiter.response is not None
            return waiter.response
        finally:
            if not waiter.event.is_set():  # the caller gave up (a timeout): never answerable again
                with self.lock:
                    self.waiters.pop(id, None)
                self.reader.abandon(id)
                self.stale = True

    # -- shutdown ------------------------------------------------------------------
    def shutdown(self, polite: bool) -> None:
        """Say bye if healthy, then make sure the process is gone. Bounded."""
        proc = self.proc
        try:
            polite = polite and self.usable() and not self.reader.pending()
            self.closing = True
            if polite:
                self._say_bye()
            _signal_and_wait(proc, signal.SIGTERM)
        finally:
            self.closing = True
            _signal_and_wait(proc, signal.SIGKILL)
            # The program may be gone while children it started (same process
            # group) still run and hold its stdout open: stop them too, and
            # the workers it detached from its group (they carry its token).
            _kill_group_members(proc)
            stop_marked(RUN_TOKEN_ENV, self.token)
            self._stdout_thread.join(_TERM_WAIT_S)
            self._stderr_done.wait(_TERM_WAIT_S)
            # A stream whose reader is still blocked (a worker that left the
            # process group keeps the pipe open) is left to that daemon
            # thread: closing it would wait for the reader's lock forever.
            streams = [self.stdin]
            streams += [] if self._stdout_thread.is_alive() else [self.stdout]
            streams += [self.stderr] if self._stderr_done.is_set() else []
            for stream in streams:
                try:
                    stream.close()
                except Exception:
                    pass
            with _LIVE_LOCK:
                if proc.poll() is not None:
                    _LIVE.pop(proc, None)
            with self.lock:
                waiters, self.waiters = list(self.waiters.values()), {}
            for waiter in waiters:  # threads abandoned by a timeout wake up and leave
                waiter.error = ProgramExited("the kit closed the connection to the program")
                waiter.event.set()

    def _say_bye(self) -> None:
        waiter = _Waiter("bye")
        with self.lock:
            id = next(self.ids)
            self.waiters[id] = waiter
            self.reader.sent(id, "bye")
        if not self.write_lock.acquire(timeout=_BYE_WAIT_S):
            return
        try:
            self.stdin.write(encode(bye_request(id)))
            self.stdin.flush()
            self.stdin.close()
        except (OSError, ValueError):
            return
        finally:
            self.write_lock.release()
        if waiter.event.wait(_BYE_WAIT_S):
            try:
                self.proc.wait(timeout=_BYE_WAIT_S)
            except subprocess.TimeoutExpired:
                pass


class StdioAdapter(Adapter):
    """An implementation running as a separate program, speaking protocol v1
    on its stdin/stdout. ``command`` is split like a shell would split it;
    ``spec_id``/``spec_version`` are what the kit checks (the handshake
    refuses a program that names another spec or another major version)."""

    def __init__(
        self,
        command: str | list[str],
        spec_id: str,
        spec_version: str,
        *,
        cwd: str | None = None,
        env: dict | None = None,
    ) -> None:
        self.argv = split_command(command)
        self.label = command if isinstance(command, str) else shlex.join(self.argv)
        self.spec_id, self.spec_version = str(spec_id), str(spec_version)
        self._cwd, self._env = cwd, env
        self._identity: dict | None = None
        self._concurrent = False
        self._serial = threading.Lock()
        self._conn: _Connection | None = None
        self._conn_identity: dict | None = None
        self._conn = self._start()

    def __repr__(self) -> str:
        return f"StdioAdapter({self.label!r})"

    # -- connection management -----------------------------------------------------
    def _start(self) -> _Connection:
        conn = _Connection(self.argv, self.label, self._cwd, self._env)
        self._conn_identity = None
        return conn

    def _connection(self) -> _Connection:
        """The current connection, handshaken."""
        conn = self._conn
        if conn is None:
            raise ProgramExited("the adapter is closed")
        if self._conn_identity is None:
            self._conn_identity = self._handshake(conn)
            if self._identity is None:
                self._identity = self._conn_identity
                self._concurrent = bool((self._identity.get("capabilities") or {}).get("concurrent"))
        return conn

    def _restart(self) -> None:
        old, self._conn = self._conn, None
        if old is not None:
            old.shutdown(polite=False)
        self._conn = self._start()

    def _handshake(self, conn: _Connection) -> dict:
        expected = (
            f"protocol {PROTOCOL_VERSION} and spec {self.spec_id} {major_version(self.spec_version)}.x "
            f"(the kit runs {self.spec_id} {self.spec_version})"
        )
        try:
            response = conn.request(lambda id: hello_request(id, self.spec_id, self.spec_version), "hello")
        except ProtocolError as exc:
            conn.shutdown(polite=False)
            raise AdapterLoadError(f"handshake failed: {exc}") from None
        except ProgramExited as exc:
            conn.shutdown(polite=False)
            raise AdapterLoadError(f"handshake failed: {exc}") from None
        message = response.message
        problem, hint = None, ""
        if "error" in message:
            err = message["error"]
            problem = f"the program refused the hello: {err.get('kind')}: {err.get('message')}"
        elif message.get("protocol") != PROTOCOL_VERSION:
            problem = (
                f"the program speaks protocol {_show(message.get('protocol'))}, "
                f"the kit speaks protocol {PROTOCOL_VERSION}"
            )
        if problem is None:
            specs = message["specs"]
            same_id = [s for s in specs if s["id"] == self.spec_id]
            fitting = [s for s in same_id if major_version(s["version"]) == major_version(self.spec_version)]
            if not fitting:
                said = ", ".join(f"{s['id']} {s['version']}" for s in specs)
                problem = f"the program implements {said}"
                hint = self._changelog_hint([str(s["version"]) for s in same_id])
            else:
                entry = fitting[0]
                impl = message["implementation"]
                return {
                    "name": impl["name"],
                    "version": impl["version"],
                    "profile": entry.get("profile"),
                    "parameters": dict(entry.get("parameters") or {}),
                    "capabilities": dict(message.get("capabilities") or {}),
                }
        conn.shutdown(polite=False)
        raise AdapterLoadError(
            f"handshake refused: {problem}; expected {expected}.{hint} "
            f"The program's hello answer: {quote_line(encode(message))}"
        )

    def _changelog_hint(self, declared: list[str]) -> str:
        """For a program of another major version of the spec (``declared``): the
        versions, and where what changed between them (and what to re-check) is written."""
        if not declared:
            return ""
        return (
            f" The program declares {self.spec_id} {', '.join(declared)} and the kit runs {self.spec_version}: "
            f"what changed between those versions, and what an implementation must re-check, is in the "
            f"spec's changelog (`conformance specs --changelog {self.spec_id}`)."
        )

    def _send(self, build: Callable[[int], dict], type_: str) -> Response:
        conn = self._connection()
        lock = nullcontext() if self._concurrent else self._serial
        with lock:
            return conn.request(build, type_)

    @staticmethod
    def _refused(type_: str, response: Response) -> None:
        err = response.message.get("error")
        if err is not None:
            raise RequestRefused(f"the program answered {type_} with error {err['kind']}: {err['message']}")

    # -- the Adapter protocol --------------------------------------------------------
    def describe(self) -> dict:
        self._connection()
        assert self._identity is not None  # the handshake of _connection() keeps the first identity
        return copy.deepcopy(self._identity)

    def reset(self, now_ms: int) -> None:
        conn = self._conn
        if conn is not None:
            pending = conn.take_unreported_failure()  # e.g. a second answer after the last call
            if pending is not None:
                raise pending
        if conn is None or not conn.usable():
            self._restart()
        response = self._send(lambda id: reset_request(id, now_ms), "reset")
        self._refused("reset", response)

    def set_clock(self, now_ms: int) -> list[dict]:
        response = self._send(lambda id: clock_request(id, now_ms), "clock")
        self._refused("clock", response)
        return list(response.message.get("effects") or [])

    def call(self, operation: str, args: dict) -> dict:
        response = self._send(lambda id: call_request(id, operation, args), "call")
        message = response.message
        out = {"result": message["result"]} if "result" in message else {"error": message["error"]}
        out["effects"] = list(message.get("effects") or [])
        return out

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.shutdown(polite=True)

    @property
    def stderr_tail(self) -> str:
        return self._conn.stderr_tail() if self._conn else ""

    @property
    def pid(self) -> int | None:
        return self._conn.proc.pid if self._conn else None


def _show(value: Any) -> str:
    return "(none)" if value is None else repr(value) if not isinstance(value, int) else str(value)


def _spec_ident(spec: Any) -> tuple[str, str]:
    if isinstance(spec, dict):
        return str(spec["id"]), str(spec["version"])
    if isinstance(spec, (tuple, list)):
        return str(spec[0]), str(spec[1])
    return str(spec.id), str(spec.version)


def stdio_factory(
    command: str | list[str], spec: Any, *, cwd: str | None = None, env: dict | None = None
) -> Callable[[], StdioAdapter]:
    """A factory of fresh :class:`StdioAdapter` s running ``command`` for
    ``spec`` (a Spec, a {"id", "version"} mapping or an (id, version) pair).
    The command is checked now; each call starts the program."""
    split_command(command)
    spec_id, spec_version = _spec_ident(spec)

    def build() -> StdioAdapter:
        return StdioAdapter(command, spec_id, spec_version, cwd=cwd, env=env)

    return build

"""``conformance run --workers N``: one run as N worker processes.

Each worker runs part I of N of the run (engine/shards.py says what a part
is) into a temporary report directory, as ``conformance run ... --shard I/N``
would, except that the workers share the scenario matrix by claiming
scenarios in a directory of that temporary one (engine/runner.py:
``_claim_order``) rather than by a fixed split; when they have finished,
their reports are merged into one report in the run's report directory, with
the counterexample files of every worker, and the console shows the usual
summary. So ``--workers N`` gives what N CI shards merged by ``conformance
merge-reports`` give, on one machine.

A worker receives the run's ``RunConfig`` as an object, not as command-line
text: a forked worker has it in memory, a worker started as a new
interpreter unpickles it (with the function to run it) from a file of the
temporary directory (``python -m conformance.workers FILE``). Unpickling
runs code, so that file is accepted only as the kit wrote it: a regular file
of a ``conformance-workers-*`` directory made by ``mkdtemp`` (owned by this
user, mode 0700), signed with a random key the parent hands to its workers
in their environment only (``WORKER_KEY_ENV``, HMAC-SHA256). Any other file
-- one a user received and was told to run -- is refused before it is read
as a pickle.

Progress: each worker prints plain progress lines, which are read here and
summed into the run's own progress display. A SIGINT or SIGTERM to this
process is passed to every worker (each runs in a session of its own, so a
terminal's Ctrl-C reaches them once, through here); each writes its report of
what finished, and the merged report says ``interrupted``.
"""

from __future__ import annotations

import atexit
import dataclasses
import hashlib
import hmac
import os
import pickle
import re
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import IO, Any

from .engine.runner import RunConfig

__all__ = [
    "available_cores",
    "parse_workers",
    "fork_workers",
    "worker_command",
    "Begun",
    "start_workers",
    "run_in_workers",
    "load_worker_file",
    "WorkerFileRefused",
    "WORKER_KEY_ENV",
]

WorkerEntry = Callable[[RunConfig], None]  # runs a worker's part of the run; ends with SystemExit

STOP_GRACE_S = 60.0  # seconds a signalled worker gets to close its implementation and write its report

_SCENARIO = re.compile(r"^scenario (\S+): (\w+)(?: \((.*)\))?$")
_EXAMPLES = re.compile(r"examples (\d+)/(\d+)")
_PHASE = re.compile(r"^progress: \[([^\]]+)\]")
_FAILURES = re.compile(r"failures (\d+)")
_EXPLORING = ("exploration", "exploring")  # a worker's phases before its exploration failed


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity where the system says)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def parse_workers(value: str | None) -> int:
    """``--workers`` (or ``CONFORMANCE_WORKERS`` when not given; default
    ``auto``): a whole number >= 1, or ``auto`` for the cores available.
    ValueError says what is wrong."""
    text = value if value is not None else os.environ.get("CONFORMANCE_WORKERS", "auto")
    where = "--workers" if value is not None else "CONFORMANCE_WORKERS"
    if str(text).strip().lower() == "auto":
        return available_cores()
    try:
        number = int(str(text).strip())
    except ValueError:
        raise ValueError(
            f"{where} {text!r}: give a whole number of worker processes (1 or more) or 'auto' "
            f"(the cores available: {available_cores()})"
        ) from None
    if number < 1:
        raise ValueError(f"{where} {text!r}: at least 1 worker process (1 runs everything in this process)")
    return number


def fork_workers() -> bool:
    """Whether workers are forked from this process (Linux, unless
    ``CONFORMANCE_WORKER_START=spawn``) rather than started as new
    interpreters. A forked worker has the kit already imported: it starts in
    milliseconds where a new interpreter takes half a second. Elsewhere
    (macOS, where forking a process that has loaded system frameworks is
    unsafe, and Windows, which cannot fork) workers are new interpreters."""
    how = os.environ.get("CONFORMANCE_WORKER_START", "").strip().lower()
    if how not in ("", "fork", "spawn"):
        raise ValueError(f"CONFORMANCE_WORKER_START {how!r}: say 'fork' or 'spawn' (or leave it unset)")
    return how != "spawn" and sys.platform.startswith("linux") and hasattr(os, "fork")


class _Forked:
    """A worker forked from this process, with the part of ``subprocess.Popen``
    that ``_Worker`` uses (``pid``, ``stderr``, ``returncode``, ``poll``,
    ``wait``, ``send_signal``)."""

    def __init__(self, pid: int, stderr: IO[str]):
        self.pid, self.stderr = pid, stderr
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere: its report says how it ended
                self.returncode = -1
                return self.returncode
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        started = time.monotonic()
        while (code := self.poll()) is None:
            if timeout is not None and time.monotonic() - started > timeout:
                raise subprocess.TimeoutExpired(f"worker {self.pid}", timeout)
            time.sleep(0.01)
        return code

    def send_signal(self, signum: int) -> None:
        os.kill(self.pid, signum)


def _fork(run: Callable[[], None], console: Path, env: dict[str, str]) -> _Forked:
    """Fork a worker calling ``run()`` (its part of the run, which ends with
    SystemExit): its own session, stdin from /dev/null, stdout to
    ``console``, stderr to a pipe read here."""
    read_fd, write_fd = os.pipe()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()  # nothing buffered here may be written twice
        except (OSError, ValueError):
            pass
    try:
        pid = os.fork()
    except OSError:
        os.close(read_fd)
        os.close(write_fd)
        raise
    if pid:
        os.close(write_fd)
        return _Forked(pid, os.fdopen(read_fd, "r", encoding="utf-8", errors="replace"))
    code = 2
    try:  # the worker: it never returns from here
        os.close(read_fd)
        atexit._clear()  # this process's exit handlers (temporary directories...) are the parent's, not the worker's
        os.setsid()  # a terminal's Ctrl-C reaches it once, through the parent
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        stdin = os.open(os.devnull, os.O_RDONLY)
        stdout = os.open(console, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        for fd, target in ((stdin, 0), (stdout, 1), (write_fd, 2)):
            os.dup2(fd, target)
            os.close(fd)
        # fresh stream objects: a thread of the parent may have held the old ones' locks when it forked
        sys.stdin = open(0, encoding="utf-8", closefd=False)
        sys.stdout = open(1, "w", encoding="utf-8", errors="replace", closefd=False)
        sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", buffering=1, closefd=False)
        os.environ.update(env)
        try:
            run()
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        try:
            traceback.print_exc()
        except BaseException:
            pass
    finally:
        try:
            atexit._run_exitfuncs()  # the worker's own: adapter programs stopped, its temporary files removed
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def worker_command(config_file: Path) -> list[str]:
    """How a worker that is not forked starts: this interpreter running this
    module on the file ``_write_worker_file`` wrote (``-P``: the working
    directory does not shadow installed packages; the Python adapter loader
    still finds the user's modules there)."""
    return [sys.executable, "-P", "-m", "conformance.workers", str(config_file)]


WORKER_KEY_ENV = "CONFORMANCE_WORKER_KEY"  # the key a worker file is signed with, for the workers only
_WORKER_MAGIC = b"conformance-worker-file 1 "
_WORKER_DIR_PREFIX = "conformance-workers-"
_WORKER_FILE_LIMIT = 64 * 1024 * 1024


class WorkerFileRefused(Exception):
    """A file ``python -m conformance.workers`` will not unpickle."""


def _signature(key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, hashlib.sha256).hexdigest().encode("ascii")


def _write_worker_file(path: Path, entry: WorkerEntry, config: RunConfig, key: bytes) -> None:
    """What a new interpreter needs to run a worker: the function and its config,
    signed with ``key``, in the private directory mkdtemp made (created new:
    O_EXCL | O_NOFOLLOW, mode 0600)."""
    data = pickle.dumps((entry, config))
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    with os.fdopen(os.open(path, flags, 0o600), "wb") as handle:
        handle.write(_WORKER_MAGIC + _signature(key, data) + b"\n" + data)


def _private_file_problem(path: str) -> str | None:
    """Why ``path`` is not a worker file the kit wrote in a directory of its own."""
    try:
        info, parent = os.lstat(path), os.lstat(os.path.dirname(os.path.abspath(path)))
    except OSError as exc:
        return f"cannot examine it ({exc.strerror or exc})"
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        return "it is not a private regular file of this user (mode 0600)"
    name = os.path.basename(os.path.dirname(os.path.abspath(path)))
    if not (stat.S_ISDIR(parent.st_mode) and name.startswith(_WORKER_DIR_PREFIX)):
        return f"it is not in a {_WORKER_DIR_PREFIX}* directory the kit made"
    if parent.st_uid != os.getuid() or parent.st_mode & 0o077:
        return "its directory is not private to this user (mode 0700)"
    return None


def load_worker_file(path: str) -> tuple[WorkerEntry, RunConfig]:
    """The (entry, config) the parent wrote, or WorkerFileRefused before
    anything is unpickled: see the module's doc."""
    from .reporting import read_regular

    try:
        key = bytes.fromhex(os.environ.pop(WORKER_KEY_ENV, ""))  # not handed on to the implementation
    except ValueError:
        key = b""
    if len(key) < 16:
        raise WorkerFileRefused(f"no {WORKER_KEY_ENV}: only `conformance run --workers N` starts workers")
    problem = _private_file_problem(path)
    if problem:
        raise WorkerFileRefused(problem)
    try:
        raw = read_regular(path, _WORKER_FILE_LIMIT)
    except OSError as exc:
        raise WorkerFileRefused(f"cannot read it ({exc.strerror or exc})") from None
    head, _, data = raw.partition(b"\n")
    if not head.startswith(_WORKER_MAGIC) or not hmac.compare_digest(head[len(_WORKER_MAGIC) :], _signature(key, data)):
        raise WorkerFileRefused("it is not signed by the run that started this worker")
    return pickle.loads(data)  # signed by the parent with a key only its workers have


def _run_worker_file(path: str) -> None:
    try:
        entry, config = load_worker_file(path)
    except WorkerFileRefused as exc:
        sys.stderr.write(
            f"error: {path}: refused: {exc}. `python -m conformance.workers` runs only the files "
            f"`conformance run --workers N` writes for its own workers; nothing was unpickled\n"
        )
        sys.exit(2)
    entry(config)


class _Worker:
    def __init__(self, index: int, count: int, tmp: Path, config: RunConfig):
        name = f"shard-{index}-of-{count}"
        self.index, self.count = index, count
        self.dir, self.log, self.console = tmp / name, tmp / f"{name}.log", tmp / f"{name}.stdout.log"
        self.config_file = tmp / f"{name}.config.pickle"
        self.config = dataclasses.replace(
            config, shard=(index, count), report_dir=str(self.dir), scenario_claims=str(tmp / "claims")
        )
        self.examples = 0
        self.phase = ""  # its progress line's phase: scenarios, exploration, shrinking, reducing, ...
        self.failures = 0  # its progress line's failures: its scenarios' and its exploration's
        self.scenario_failures = 0  # of those, its scenarios' (each has a line of its own)
        self.scenarios: deque[tuple[str, str, str | None]] = deque()  # (id, verdict, note) not yet shown
        self.tail: deque[str] = deque(maxlen=20)  # its last other lines, for a worker that failed to report
        self.proc: subprocess.Popen[str] | _Forked | None = None
        self.reader: threading.Thread | None = None

    def start(self, entry: WorkerEntry) -> None:
        env = {"CONFORMANCE_PROGRESS_INTERVAL": "0.5", "CONFORMANCE_WORKERS": "1"}
        if fork_workers():
            try:
                self.proc = _fork(lambda: entry(self.config), self.console, env)
                return
            except OSError:  # no fork now (out of processes or memory): a new interpreter may still start
                pass
        key = secrets.token_bytes(32)
        _write_worker_file(self.config_file, entry, self.config, key)
        with open(self.console, "w", encoding="utf-8") as out:  # its console summary (the merged one is shown)
            self.proc = subprocess.Popen(
                worker_command(self.config_file),
                stdout=out,
                stderr=subprocess.PIPE,
                stdin=subprocess.DEVNULL,
                text=True,
                errors="replace",
                env={**os.environ, **env, WORKER_KEY_ENV: key.hex()},
                start_new_session=True,
            )

    def read(self) -> None:
        """Start reading its stderr (after every worker has started: a
        forked worker must not inherit this thread)."""
        self.reader = threading.Thread(target=self._read, name=f"conformance-worker-{self.index}", daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        with open(self.log, "w", encoding="utf-8") as log:
            for line in self.proc.stderr:
                line = line.rstrip("\n")
                scenario = _SCENARIO.match(line)
                if scenario:
                    scenario_id, verdict, note = scenario.groups()
                    self.scenarios.append((scenario_id, verdict, note))
                    self.scenario_failures += verdict in ("fail", "error")
                    continue
                if line.startswith("progress: "):
                    self._note_progress(line)
                    continue
                self.tail.append(line)
                log.write(line + "\n")

    def _note_progress(self, line: str) -> None:
        """What one of its progress lines says: examples, phase, failures."""
        examples, phase, failures = _EXAMPLES.search(line), _PHASE.match(line), _FAILURES.search(line)
        if examples:
            self.examples = int(examples.group(1))
        if phase:
            self.phase = phase.group(1)
        if failures:
            self.failures = int(failures.group(1))

    @property
    def stateful_failures(self) -> int:
        """The failures its exploration has found so far."""
        return max(0, self.failures - self.scenario_failures)

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, signum: int) -> None:
        if self.proc is not None and self.running():
            try:
                self.proc.send_signal(signum)
            except ProcessLookupError:
                pass

    def kill(self) -> None:
        """The worker's whole session (its implementation's programs too)."""
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            pass


@dataclass
class _Shown:
    """What the progress display has been told of the workers' exploration."""

    examples_total: int
    stateful: bool = False
    phase: tuple[str, int] = ("", 0)  # the exploration's phase and failures, as last shown


def _show(workers: list[_Worker], progress: Any, shown: _Shown) -> None:
    for worker in workers:
        while worker.scenarios:
            scenario_id, verdict, note = worker.scenarios.popleft()
            progress.scenario_done(
                SimpleNamespace(verdict=verdict, note=note, scenario=SimpleNamespace(id=scenario_id))
            )
    examples = sum(w.examples for w in workers)
    if examples and not shown.stateful and shown.examples_total:
        shown.stateful = True
        progress.stateful_started(shown.examples_total)
    if shown.stateful:
        progress.stateful_example(examples)
        phase = _stateful_phase(workers)
        if phase != shown.phase and phase[0]:
            shown.phase = phase
            progress.stateful_phase(*phase)


def _stateful_phase(workers: list[_Worker]) -> tuple[str, int]:
    """The exploration's phase over all workers, and its failures so far:
    once one worker's exploration has failed, what the failing ones do
    (shrinking, reducing, looking for more), so that examples past the
    profile's count do not read as an exploration that will not end."""
    failures = sum(w.stateful_failures for w in workers)
    phases = [w.phase for w in workers if w.phase not in ("", "scenarios", *_EXPLORING)]
    if phases:
        return ", ".join(dict.fromkeys(phases)), failures
    return ("exploring" if any(w.phase in _EXPLORING for w in workers) else ""), failures


@dataclass
class Begun:
    """The workers of one run, started (``start_workers``)."""

    config: RunConfig  # the run's, before it is split into parts
    count: int
    tmp: Path  # their report directories, logs and the scenario claims
    workers: list[_Worker]
    cleared: dict = field(default_factory=lambda: {"problems": []})  # problems clearing the earlier reports
    started: float = field(default_factory=time.perf_counter)


def start_workers(config: RunConfig, count: int, entry: WorkerEntry) -> Begun:
    """Start ``count`` workers, each running its part of the run ``config``
    describes by calling ``entry`` (the kit's own: ``conformance.cli.run:run_worker``)
    with the part's config; call before any thread of this process starts (a
    forked worker must not inherit one): before the progress display."""
    from .engine.runner import clear_report_files

    cleared: dict = {"problems": []}
    clear_report_files(cleared, str(config.report_dir))  # never an earlier verdict, whatever happens next
    tmp = Path(tempfile.mkdtemp(prefix="conformance-workers-"))
    (tmp / "claims").mkdir()
    workers = [_Worker(index, count, tmp, config) for index in range(1, count + 1)]
    begun = Begun(config, count, tmp, workers, cleared)
    try:
        for worker in workers:
            worker.start(entry)
        for worker in workers:
            worker.read()
    except BaseException:
        for worker in workers:
            worker.kill()
        raise
    return begun


def run_in_workers(begun: Begun, progress: Any, *, scenarios_total: int, examples_total: int, spec: Any = None) -> dict:
    """Wait for the workers ``start_workers`` started, showing their progress,
    and return the merged report, written to the run's report directory."""
    from .engine.interrupts import deferred, pending

    shown = _Shown(examples_total)
    progress.start(scenarios_total, examples_total > 0)
    with deferred():  # once the workers have ended, a signal is kept: it must not stop the reports
        interrupt = _wait_for(begun.workers, progress, shown)
        _show(begun.workers, progress, shown)
        report, missing = _merged_report(begun, spec, interrupt or pending())
        report["duration_s"] = round(time.perf_counter() - begun.started, 3)
        _write_report_files(report, str(begun.config.report_dir))
    if not missing and not os.environ.get("CONFORMANCE_DEBUG"):  # else kept: the problems name the logs
        shutil.rmtree(begun.tmp, ignore_errors=True)
    return report


def _write_report_files(report: dict, report_dir: str) -> None:
    from .engine.runner import write_report_files

    write_report_files(report, report_dir)


def _wait_for(workers: list[_Worker], progress: Any, shown: _Shown) -> KeyboardInterrupt | None:
    """Until every worker has ended, showing their progress; an interrupt is
    passed on to each (returned, once they have ended or their grace is over)."""
    from .engine.interrupts import Interrupted, acknowledge, checkpoint, deferred

    interrupt: KeyboardInterrupt | None = None
    try:
        try:
            with deferred(False):  # while the workers run, a signal stops them
                shown_at = 0.0
                while any(w.running() for w in workers):
                    if time.monotonic() - shown_at >= 0.2:
                        _show(workers, progress, shown)
                        shown_at = time.monotonic()
                    time.sleep(0.02)  # the merge starts as soon as the last worker ends
                    checkpoint()
        except KeyboardInterrupt as exc:
            acknowledge()
            interrupt = exc
            signum = exc.signum if isinstance(exc, Interrupted) else signal.SIGINT
            for worker in workers:
                worker.signal(signum)
            deadline = time.monotonic() + STOP_GRACE_S
            while any(w.running() for w in workers) and time.monotonic() < deadline:
                time.sleep(0.1)
    finally:
        for worker in workers:
            if worker.running():
                worker.kill()
            if worker.reader is not None:
                worker.reader.join(5)
    return interrupt


def _merged_report(begun: Begun, spec: Any, interrupt: KeyboardInterrupt | None) -> tuple[dict, list[_Worker]]:
    """The workers' reports merged into one, and the workers that wrote none
    (each a problem of the report)."""
    from .engine.runner import mark_interrupted
    from .engine.shards import ShardError, load_shard_report

    loaded, missing = [], []
    for worker in begun.workers:
        try:
            loaded.append(load_shard_report(str(worker.dir)))
        except ShardError:
            missing.append(worker)
    report = _merge(begun, loaded, spec)
    report["problems"] = begun.cleared["problems"] + report["problems"]
    for worker in missing:
        report["problems"].append(_no_report_problem(worker, interrupt))
    if missing and interrupt is None:
        report["verdict"], report["exit_code"] = "error", 2
    if interrupt is not None and report["verdict"] != "interrupted":
        finished = sum(1 for r, _ in loaded if r.get("verdict") != "interrupted")
        mark_interrupted(report, interrupt, f"{finished} of {begun.count} workers had finished")
    return report, missing


def _merge(begun: Begun, loaded: list, spec: Any) -> dict:
    from .engine.runner import new_report
    from .engine.shards import ShardError, merge_reports

    if not loaded:
        return new_report(RunConfig(spec_path=begun.config.spec_path))
    try:
        return merge_reports(loaded, str(begun.config.report_dir), spec=spec, allow_missing=True)
    except ShardError as exc:
        report = new_report(RunConfig(spec_path=begun.config.spec_path))
        report["problems"].append(
            {"kind": "internal-error", "where": None, "message": f"the workers' reports could not be merged: {exc}"}
        )
        return report


def _no_report_problem(worker: _Worker, interrupt: KeyboardInterrupt | None) -> dict:
    said = "; ".join(line for line in worker.tail if line.strip())[-600:] or "nothing"
    where = f"worker {worker.index}/{worker.count}"
    return {
        "kind": "internal-error" if interrupt is None else "interrupted",
        "where": where,
        "message": f"{where} wrote no report (exit code "
        f"{worker.proc.returncode if worker.proc else None}); it said: {said}. Its log: {worker.log}",
    }


if __name__ == "__main__":  # a worker started as a new interpreter (worker_command)
    _run_worker_file(sys.argv[1])

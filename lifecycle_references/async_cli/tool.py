"""``async-cli``: a small command-line tool with one async command.

::

    async-cli build --schema
    async-cli build --target NAME --work-ms N --outcome complete|failed [--timeout-ms N]
    async-cli job status JOB_ID
    async-cli job cancel JOB_ID

``build`` records a job and starts a detached worker process (its own
session, so it outlives the invocation) that carries the job to its end;
it answers at once with a job descriptor. What a build does is a test
target: it works ``--work-ms`` milliseconds and then ends as ``--outcome``
says, unless it runs past its ``timeout_ms`` first (then it failed, timed
out). Every answer is one JSON envelope on stdout:
``{"ok", "data", "error", "warnings", "meta": {"duration_ms"}}``.

Exit codes of ``job status``: 0 complete, 3 running, 4 failed (also timed
out, unless the profile gives it 7), 4 cancelled, 5 not found; 2 for a usage
error, 1 for a broken state directory. ``ok`` says whether the command did
what was asked (default), or, in the ``strict-envelope`` profile, whether the
exit code is 0. ``job cancel`` cancels a running job (exit 0); a job that
already ended stays as it is (exit 0, with a warning); an unknown job exits 5.

Environment: ``ASYNC_CLI_STATE_DIR`` (the jobs; default ``.async-cli``),
``ASYNC_CLI_CLOCK_FILE`` (a file holding the current time in ms; default the
wall clock), ``ASYNC_CLI_PROFILE`` (``timeout-exit-code``,
``strict-envelope`` or empty), ``ASYNC_CLI_PROG`` (how to invoke this tool,
for status_command/cancel_command; default: the way it was invoked now).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

from .store import JobStore, StateError, VirtualClock

__all__ = ["AsyncCli", "UsageError", "quote", "EXIT_USAGE", "EXIT_STATE", "POLL_INTERVAL_MS", "DEFAULT_TIMEOUT_MS"]

EXIT_OK, EXIT_STATE, EXIT_USAGE = 0, 1, 2
EXIT_RUNNING, EXIT_FAILED, EXIT_NOT_FOUND, EXIT_TIMED_OUT_OWN = 3, 4, 5, 7
EXIT_CANCELLED = 4
POLL_INTERVAL_MS = 5000
DEFAULT_TIMEOUT_MS = 600000
PROFILES = ("", "timeout-exit-code", "strict-envelope")
TERMINAL = ("complete", "failed", "cancelled")
WORKER_POLL_S = 0.2
WORKER_MAX_LIFETIME_S = 900.0
_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+=:,./-_")


class UsageError(Exception):
    pass


def quote(word: str) -> str:
    """A word as a POSIX shell reads it back (like shlex.quote, without importing re)."""
    if word and all(c in _SAFE for c in word):
        return word
    return "'" + word.replace("'", "'\"'\"'") + "'"


def _positive_int(value: str, flag: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise UsageError(f"{flag} needs a whole number of milliseconds, not {value!r}") from None
    if number < 1:
        raise UsageError(f"{flag} must be at least 1, not {number}")
    return number


class AsyncCli:
    """One invocation of the tool. Subclasses (the mutants) override one method."""

    def __init__(self, environ: dict | None = None) -> None:
        env = os.environ if environ is None else environ
        self.env = env
        self.store = JobStore(env.get("ASYNC_CLI_STATE_DIR") or ".async-cli")
        self.clock = VirtualClock(env.get("ASYNC_CLI_CLOCK_FILE"))
        self.profile = env.get("ASYNC_CLI_PROFILE", "")
        if self.profile not in PROFILES:
            raise UsageError(
                f"ASYNC_CLI_PROFILE must be one of {', '.join(p or '(empty)' for p in PROFILES)}, not {self.profile!r}"
            )
        self.started = time.monotonic()

    # -- entry point ----------------------------------------------------------------
    def run(self, argv: list[str]) -> int:
        try:
            code, envelope = self.dispatch(argv)
        except UsageError as exc:
            code, envelope = EXIT_USAGE, self.envelope(False, None, self.error("USAGE", str(exc)))
        except StateError as exc:
            code, envelope = EXIT_STATE, self.envelope(False, None, self.error("STATE", str(exc)))
        if envelope is not None:
            self.stamp(envelope)
            sys.stdout.write(json.dumps(envelope) + "\n")
            sys.stdout.flush()
        return code

    def dispatch(self, argv: list[str]) -> tuple[int, dict | None]:
        if argv[:1] == ["build"]:
            if argv[1:] == ["--schema"]:
                return EXIT_OK, self.schema()
            return self.build(self.build_options(argv[1:]))
        if argv[:1] == ["job"] and len(argv) == 3 and argv[1] == "status":
            return self.status(argv[2])
        if argv[:1] == ["job"] and len(argv) == 3 and argv[1] == "cancel":
            return self.cancel(argv[2])
        raise UsageError(
            "usage: build --schema | build --target NAME --work-ms N --outcome complete|failed "
            "[--timeout-ms N] | job status JOB_ID | job cancel JOB_ID"
        )

    @staticmethod
    def build_options(args: list[str]) -> dict:
        if len(args) % 2:
            raise UsageError(f"every build option takes a value; got {' '.join(args)!r}")
        given = dict(zip(args[::2], args[1::2]))
        unknown = sorted(set(given) - {"--target", "--work-ms", "--outcome", "--timeout-ms"})
        if unknown:
            raise UsageError(f"unknown build option(s): {', '.join(unknown)}")
        for flag in ("--target", "--work-ms", "--outcome"):
            if flag not in given:
                raise UsageError(f"build needs {flag}")
        if not given["--target"]:
            raise UsageError("--target must not be empty")
        if given["--outcome"] not in ("complete", "failed"):
            raise UsageError(f"--outcome must be complete or failed, not {given['--outcome']!r}")
        return {
            "target": given["--target"],
            "work_ms": _positive_int(given["--work-ms"], "--work-ms"),
            "outcome": given["--outcome"],
            "timeout_ms": _positive_int(given["--timeout-ms"], "--timeout-ms")
            if "--timeout-ms" in given
            else DEFAULT_TIMEOUT_MS,
        }

    # -- the envelope -----------------------------------------------------------------
    def duration_ms(self) -> int:
        return int((time.monotonic() - self.started) * 1000)

    def envelope(self, ok: bool, data, error, warnings: list | None = None) -> dict:
        return {"ok": ok, "data": data, "error": error, "warnings": list(warnings or []), "meta": {}}

    def stamp(self, envelope: dict) -> None:
        """Fill in meta.duration_ms just before the envelope is printed."""
        if "meta" in envelope:
            envelope["meta"]["duration_ms"] = self.duration_ms()

    @staticmethod
    def error(code: str, message: str) -> dict:
        return {"code": code, "message": message}

    # -- commands ---------------------------------------------------------------------------
    def schema(self) -> dict:
        string, integer = {"type": "string"}, {"type": "integer"}
        return {
            "async": True,
            "parameters": {
                "target": {"type": "string", "required": True, "description": "Build target name"},
                "work-ms": {"type": "integer", "required": True, "description": "How long the build works (ms)"},
                "outcome": {
                    "type": "string",
                    "required": True,
                    "enum": ["complete", "failed"],
                    "description": "How the build ends if it does not time out",
                },
                "timeout-ms": {
                    "type": "integer",
                    "required": False,
                    "description": f"When the job counts as failed (default {DEFAULT_TIMEOUT_MS})",
                },
            },
            "job_descriptor_schema": {
                "type": "object",
                "required": [
                    "job_id",
                    "status",
                    "terminal",
                    "status_command",
                    "cancel_command",
                    "poll_interval_ms",
                    "timeout_ms",
                ],
                "properties": {
                    "job_id": string,
                    "status": {"type": "string", "enum": ["running", *TERMINAL]},
                    "terminal": {"type": "boolean"},
                    "status_command": string,
                    "cancel_command": string,
                    "poll_interval_ms": integer,
                    "timeout_ms": integer,
                },
            },
            "exit_codes": {
                "0": {
                    "name": "SUCCESS",
                    "description": "Job accepted and started",
                    "retryable": False,
                    "side_effects": "partial",
                },
                "2": {"name": "USAGE", "description": "Bad arguments", "retryable": False, "side_effects": "none"},
            },
        }

    def build(self, options: dict) -> tuple[int, dict]:
        now = self.clock.now()
        with self.store.transaction() as state:
            job = self.new_job(state, options, now)
            state["jobs"][job["job_id"]] = job
        self.spawn_worker(job["job_id"])
        return EXIT_OK, self.envelope(True, self.descriptor(job), None)

    def new_job(self, state: dict, options: dict, now: int) -> dict:
        number = state["next"]
        state["next"] = number + 1
        ends_in = min(options["work_ms"], options["timeout_ms"])
        return {
            "job_id": f"build-{number:04x}",
            "target": options["target"],
            "work_ms": options["work_ms"],
            "outcome": options["outcome"],
            "timeout_ms": options["timeout_ms"],
            "started_at": now,
            "ends_at": now + ends_in,
            "status": "running",
            "timed_out": False,
            "finished_at": None,
            "worker_pid": None,
            "worker_sid": None,
        }

    def status(self, job_id: str) -> tuple[int, dict]:
        job = self.current(job_id)
        if job is None:
            return self.not_found(job_id)
        code = self.status_exit_code(job)
        ok = self.ok_for(code)
        error = None if ok else self.error(self.status_error_code(job), self.status_message(job))
        return code, self.envelope(ok, self.descriptor(job), error)

    def cancel(self, job_id: str) -> tuple[int, dict]:
        now = self.clock.now()
        warnings = []
        with self.store.transaction() as state:
            job = state["jobs"].get(job_id)
            if job is None:
                return self.not_found(job_id)
            self.settle(job, now)
            if job["status"] == "running":
                self.mark_cancelled(job, now)
            else:
                warnings += self.cancel_warnings(job_id, job)
        if not warnings:
            self.stop_worker(job)
        return EXIT_OK, self.envelope(True, self.descriptor(job), None, warnings)

    def cancel_warnings(self, job_id: str, job: dict) -> list[str]:
        """What a cancel of a job that is no longer running says: it did nothing."""
        return [f"job {job_id} already ended ({job['status']}); nothing to cancel"]

    def not_found(self, job_id: str) -> tuple[int, dict]:
        return EXIT_NOT_FOUND, self.envelope(False, None, self.error("JOB_NOT_FOUND", f"no job with id {job_id!r}"))

    # -- jobs ------------------------------------------------------------------------------
    def current(self, job_id: str) -> dict | None:
        """The job as it stands now on the clock. A job whose end has come is
        settled here and then (under the lock), so the answer never depends on
        how fast the worker was."""
        now = self.clock.now()
        job = self.store.read()["jobs"].get(job_id)
        if job is None or job["status"] != "running" or now < job["ends_at"]:
            return job
        with self.store.transaction() as state:
            job = state["jobs"].get(job_id)
            if job is not None:
                self.settle(job, now)
        return job

    def settle(self, job: dict, now: int) -> bool:
        """Bring a running job to its end if the clock has reached it."""
        if job["status"] != "running" or now < job["ends_at"]:
            return False
        job["status"], job["timed_out"] = self.final_status(job)
        job["finished_at"] = job["ends_at"]
        return True

    def final_status(self, job: dict) -> tuple[str, bool]:
        if job["work_ms"] > job["timeout_ms"]:
            return "failed", True  # still working when its timeout came: failed
        return job["outcome"], False

    def mark_cancelled(self, job: dict, now: int) -> None:
        job["status"], job["finished_at"] = "cancelled", now

    def status_exit_code(self, job: dict) -> int:
        status = job["status"]
        if status == "running":
            return EXIT_RUNNING
        if status == "complete":
            return EXIT_OK
        if status == "cancelled":
            return EXIT_CANCELLED
        if job.get("timed_out") and self.profile == "timeout-exit-code":
            return EXIT_TIMED_OUT_OWN
        return EXIT_FAILED

    def ok_for(self, exit_code: int) -> bool:
        return exit_code == EXIT_OK if self.profile == "strict-envelope" else True

    @staticmethod
    def status_error_code(job: dict) -> str:
        if job["status"] == "failed" and job.get("timed_out"):
            return "JOB_TIMED_OUT"
        return "JOB_" + job["status"].upper()

    @staticmethod
    def status_message(job: dict) -> str:
        if job["status"] == "running":
            return f"job {job['job_id']} is still running"
        return f"job {job['job_id']} ended {job['status']}" + (" (timed out)" if job.get("timed_out") else "")

    def program(self) -> str:
        given = self.env.get("ASYNC_CLI_PROG")
        if given:
            return given
        flags = ["-S"] if sys.flags.no_site else []
        return " ".join(quote(w) for w in [sys.executable or "python3", *flags, "-m", "lifecycle_references.async_cli"])

    def descriptor(self, job: dict) -> dict:
        prog, job_id = self.program(), quote(job["job_id"])
        return {
            "job_id": job["job_id"],
            "status": job["status"],
            "terminal": job["status"] in TERMINAL,
            "status_command": f"{prog} job status {job_id}",
            "cancel_command": f"{prog} job cancel {job_id}",
            "poll_interval_ms": POLL_INTERVAL_MS,
            "timeout_ms": job["timeout_ms"],
        }

    # -- the background worker --------------------------------------------------------------
    def spawn_worker(self, job_id: str) -> None:
        """Start the job's worker: a grandchild in its own session, with its
        stdio on /dev/null, so it outlives this invocation and holds none of
        its pipes."""
        sys.stdout.flush()
        pid = os.fork()
        if pid:
            os.waitpid(pid, 0)  # the intermediate child exits at once
            return
        try:
            os.setsid()
            if os.fork():
                os._exit(0)
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            os.close(null)
            self.work(job_id)
        except BaseException:
            pass
        os._exit(0)

    def work(self, job_id: str) -> None:
        """The worker: note its pid, then wait on the clock until the job ends (or is gone)."""
        with self.store.transaction() as state:
            job = state["jobs"].get(job_id)
            if job is None or job["status"] != "running":
                return
            job["worker_pid"], job["worker_sid"] = os.getpid(), os.getsid(0)
        deadline = time.monotonic() + WORKER_MAX_LIFETIME_S
        while time.monotonic() < deadline and self.store.exists():
            job = self.store.read()["jobs"].get(job_id)
            if job is None or job["status"] != "running":
                return
            now = self.clock.now()
            if now >= job["ends_at"]:
                with self.store.transaction() as state:
                    job = state["jobs"].get(job_id)
                    if job is not None:
                        self.settle(job, now)
                return
            time.sleep(WORKER_POLL_S)

    @staticmethod
    def stop_worker(job: dict) -> None:
        pid = job.get("worker_pid")
        if not pid:
            return
        try:
            if os.getsid(pid) == job.get("worker_sid"):  # still in the worker's session: not a reused pid
                os.kill(pid, signal.SIGTERM)
        except OSError:
            pass

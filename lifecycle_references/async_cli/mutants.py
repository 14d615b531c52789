"""Faulty variants of the reference async CLI, to check that the kit catches bugs.

Each mutant is one realistic bug: a subclass of :class:`AsyncCli` overriding
the single method involved. The tool runs one when ``ASYNC_CLI_MUTANT``
names it (``lifecycle_references.async_cli.wiring`` sets it for the kit).
"""
from __future__ import annotations

import time

from .tool import EXIT_OK, EXIT_RUNNING, AsyncCli

__all__ = ["MUTANT_CLASSES", "MUTANT_TABLE"]


class _RunningExitsZero(AsyncCli):
    def status_exit_code(self, job: dict) -> int:
        code = super().status_exit_code(job)
        return EXIT_OK if code == EXIT_RUNNING else code  # "the command worked"


class _CancelledNotTerminal(AsyncCli):
    def descriptor(self, job: dict) -> dict:
        data = super().descriptor(job)
        data["terminal"] = job["status"] in ("complete", "failed")  # forgot cancelled
        return data


class _NoDurationMeta(AsyncCli):
    def stamp(self, envelope: dict) -> None:
        pass  # the timing was never wired in: meta stays {}


class _TimeoutNotFailed(AsyncCli):
    def new_job(self, state: dict, options: dict, now: int) -> dict:
        job = super().new_job(state, options, now)
        job["ends_at"] = now + options["work_ms"]  # the timeout is only displayed
        return job

    def final_status(self, job: dict) -> tuple[str, bool]:
        return job["outcome"], False


class _OkFollowsExitCode(AsyncCli):
    def ok_for(self, exit_code: int) -> bool:
        return exit_code == EXIT_OK  # the general rule, in a tool declaring the job-status one


class _StatusCommandNotInstalled(AsyncCli):
    def program(self) -> str:
        return "async-cli"  # assumes an entry point that was never installed


class _CancelFinishedChangesIt(AsyncCli):
    def cancel(self, job_id: str) -> tuple[int, dict]:
        now = self.clock.now()
        with self.store.transaction() as state:
            job = state["jobs"].get(job_id)
            if job is None:
                return self.not_found(job_id)
            self.settle(job, now)
            self.mark_cancelled(job, now)  # whatever its status was
        return EXIT_OK, self.envelope(True, self.descriptor(job), None)


class _NotFoundExitsOne(AsyncCli):
    def not_found(self, job_id: str) -> tuple[int, dict]:
        _, envelope = super().not_found(job_id)
        return 1, envelope


class _UnlockedState(AsyncCli):
    def build(self, options: dict) -> tuple[int, dict]:
        now = self.clock.now()
        state = self.store.read()  # read-modify-write without the lock
        job = self.new_job(state, options, now)
        time.sleep(0.05)  # the work between read and write (validation, logging)
        state["jobs"][job["job_id"]] = job
        self.store.write(state)
        self.spawn_worker(job["job_id"])
        return EXIT_OK, self.envelope(True, self.descriptor(job), None)


class _StatusTrustsWorker(AsyncCli):
    def current(self, job_id: str) -> dict | None:
        return self.store.read()["jobs"].get(job_id)  # whatever the worker has written so far


MUTANT_TABLE: list[tuple[str, str]] = [
    ("running_exits_zero", "job status exits 0 for a job that is still running."),
    ("cancelled_not_terminal", "The descriptor of a cancelled job says terminal: false."),
    ("no_duration_meta", "The response envelope's meta has no duration_ms."),
    ("timeout_not_failed", "A job past its timeout_ms keeps working and ends as planned instead of failing."),
    ("ok_follows_exit_code", "ok is false whenever the exit code is not 0, though the tool declares the job-status rule."),
    ("status_command_not_installed", "status_command and cancel_command name an `async-cli` program that is not installed."),
    ("cancel_finished_changes_it", "job cancel marks a job that already completed or failed as cancelled."),
    ("not_found_exits_one", "job status and job cancel exit 1 instead of 5 for an unknown job."),
    ("unlocked_state", "build reads and rewrites the state file without the lock, so concurrent builds lose jobs."),
    ("status_trusts_worker", "job status reports what the background worker last wrote, without settling a job whose end has come."),
]

MUTANT_CLASSES: dict[str, type[AsyncCli]] = {
    "running_exits_zero": _RunningExitsZero,
    "cancelled_not_terminal": _CancelledNotTerminal,
    "no_duration_meta": _NoDurationMeta,
    "timeout_not_failed": _TimeoutNotFailed,
    "ok_follows_exit_code": _OkFollowsExitCode,
    "status_command_not_installed": _StatusCommandNotInstalled,
    "cancel_finished_changes_it": _CancelFinishedChangesIt,
    "not_found_exits_one": _NotFoundExitsOne,
    "unlocked_state": _UnlockedState,
    "status_trusts_worker": _StatusTrustsWorker,
}

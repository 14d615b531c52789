"""Faulty variants of the reference async CLI, to check that the kit catches bugs.

Each mutant is one realistic bug: a subclass of :class:`AsyncCli` overriding
the single method involved. The tool runs one when ``ASYNC_CLI_MUTANT``
names it (``lifecycle_references.async_cli.wiring`` sets it for the kit).
"""

from __future__ import annotations

import time

from .tool import EXIT_OK, EXIT_RUNNING, POLL_INTERVAL_MS, AsyncCli

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


class _WorkAtTimeoutTimesOut(AsyncCli):
    def final_status(self, job: dict) -> tuple[str, bool]:
        if job["work_ms"] >= job["timeout_ms"]:  # >= for >: work done exactly at the timeout "timed out"
            return "failed", True
        return job["outcome"], False


class _TimeoutOneMsLate(AsyncCli):
    def new_job(self, state: dict, options: dict, now: int) -> dict:
        job = super().new_job(state, options, now)
        if options["work_ms"] > options["timeout_ms"]:
            job["ends_at"] = now + options["timeout_ms"] + 1  # killed once it has run *more than* timeout_ms
        return job


class _LateLookTimesOut(AsyncCli):
    def settle(self, job: dict, now: int) -> bool:
        if job["status"] != "running" or now < job["ends_at"]:
            return False
        if now - job["started_at"] > job["timeout_ms"]:  # judged when it is looked at, not when its work ended
            job["status"], job["timed_out"] = "failed", True
        else:
            job["status"], job["timed_out"] = self.final_status(job)
        job["finished_at"] = job["ends_at"]
        return True


class _PollIntervalBacksOff(AsyncCli):
    def descriptor(self, job: dict) -> dict:
        data = super().descriptor(job)
        if self.clock.now() - job["started_at"] >= POLL_INTERVAL_MS:
            data["poll_interval_ms"] = 2 * POLL_INTERVAL_MS  # backs off once a job has run a full interval
        return data


class _TerminalPollIntervalZero(AsyncCli):
    def descriptor(self, job: dict) -> dict:
        data = super().descriptor(job)
        if data["terminal"]:
            data["poll_interval_ms"] = 0  # "stop polling"
        return data


class _RecancelNoWarning(AsyncCli):
    def cancel_warnings(self, job_id: str, job: dict) -> list[str]:
        if job["status"] == "cancelled":
            return []  # already cancelled: "it is cancelled, as asked"
        return super().cancel_warnings(job_id, job)


class _CancelCheckThenAct(AsyncCli):
    def cancel(self, job_id: str) -> tuple[int, dict]:
        now = self.clock.now()
        job = self.store.read()["jobs"].get(job_id)  # checked outside the lock
        if job is None:
            return self.not_found(job_id)
        self.settle(job, now)
        if job["status"] != "running":
            warning = f"job {job_id} already ended ({job['status']}); nothing to cancel"
            return EXIT_OK, self.envelope(True, self.descriptor(job), None, [warning])
        self.stop_worker(job)
        time.sleep(0.05)  # waiting for the worker to exit
        with self.store.transaction() as state:
            job = state["jobs"][job_id]
            self.mark_cancelled(job, now)
        return EXIT_OK, self.envelope(True, self.descriptor(job), None)


class _NextIdCrashes(AsyncCli):
    def current(self, job_id: str) -> dict | None:
        now = self.clock.now()
        state = self.store.read()
        head, _, digits = job_id.rpartition("-")
        if (
            head != "build"
            or not digits
            or any(c not in "0123456789abcdef" for c in digits)
            or int(digits, 16) > state["next"]
        ):  # > for >=: the id the next build will get passes
            return None
        job = state["jobs"][job_id]  # issued, the range check says
        if job["status"] != "running" or now < job["ends_at"]:
            return job
        return super().current(job_id)


class _AbbreviatedIds(AsyncCli):
    def expand(self, job_id: str) -> str:
        """An id, or the one issued id it abbreviates (as git and docker resolve them)."""
        jobs = self.store.read()["jobs"]
        if job_id in jobs:
            return job_id
        hits = [issued for issued in jobs if issued.startswith(job_id)]
        return hits[0] if len(hits) == 1 else job_id

    def status(self, job_id: str) -> tuple[int, dict]:
        return super().status(self.expand(job_id))

    def cancel(self, job_id: str) -> tuple[int, dict]:
        return super().cancel(self.expand(job_id))


class _IdNumberAlias(AsyncCli):
    def current(self, job_id: str) -> dict | None:
        digits = job_id.rpartition("-")[2]  # "the number is what counts": build-1, 1 and build-00001 are build-0001
        try:
            job_id = f"build-{int(digits, 16):04x}"
        except ValueError:
            return None
        return super().current(job_id)


MUTANT_TABLE: list[tuple[str, str]] = [
    ("running_exits_zero", "job status exits 0 for a job that is still running."),
    ("cancelled_not_terminal", "The descriptor of a cancelled job says terminal: false."),
    ("no_duration_meta", "The response envelope's meta has no duration_ms."),
    ("timeout_not_failed", "A job past its timeout_ms keeps working and ends as planned instead of failing."),
    (
        "ok_follows_exit_code",
        "ok is false whenever the exit code is not 0, though the tool declares the job-status rule.",
    ),
    (
        "status_command_not_installed",
        "status_command and cancel_command name an `async-cli` program that is not installed.",
    ),
    ("cancel_finished_changes_it", "job cancel marks a job that already completed or failed as cancelled."),
    ("not_found_exits_one", "job status and job cancel exit 1 instead of 5 for an unknown job."),
    ("unlocked_state", "build reads and rewrites the state file without the lock, so concurrent builds lose jobs."),
    (
        "status_trusts_worker",
        "job status reports what the background worker last wrote, without settling a job whose end has come.",
    ),
    (
        "work_at_timeout_times_out",
        "A job whose work ends exactly at its timeout_ms fails as timed out instead of completing.",
    ),
    ("timeout_one_ms_late", "A job still working at its timeout_ms fails 1 ms after it instead of at it."),
    (
        "late_look_times_out",
        "A job first looked at after its timeout_ms has passed fails as timed out, though its work ended in time.",
    ),
    (
        "poll_interval_backs_off",
        "The descriptor of a job started a full poll interval ago recommends twice the poll_interval_ms.",
    ),
    ("terminal_poll_interval_zero", "The descriptor of a terminal job recommends poll_interval_ms 0."),
    (
        "recancel_no_warning",
        "job cancel of an already cancelled job answers without a warning, as if it had cancelled it.",
    ),
    (
        "cancel_check_then_act",
        "job cancel checks that the job is running outside the lock, so two cancels at once both say they cancelled it.",
    ),
    (
        "next_id_crashes",
        "job status of the id the next build will get passes an off-by-one range check and crashes (exit 1, no JSON).",
    ),
    (
        "abbreviated_ids",
        "job status and job cancel take an id never issued that abbreviates one issued job's id as that job.",
    ),
    ("id_number_alias", "job status reads only an id's number, so build-1, 1 and build-00001 all find build-0001."),
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
    "work_at_timeout_times_out": _WorkAtTimeoutTimesOut,
    "timeout_one_ms_late": _TimeoutOneMsLate,
    "late_look_times_out": _LateLookTimesOut,
    "poll_interval_backs_off": _PollIntervalBacksOff,
    "terminal_poll_interval_zero": _TerminalPollIntervalZero,
    "recancel_no_warning": _RecancelNoWarning,
    "cancel_check_then_act": _CancelCheckThenAct,
    "next_id_crashes": _NextIdCrashes,
    "abbreviated_ids": _AbbreviatedIds,
    "id_number_alias": _IdNumberAlias,
}

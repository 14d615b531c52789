"""A hand-written Hypothesis state machine for the thread-jobs lifecycle: the peer.

This is what a team would write instead of using the kit: a
``RuleBasedStateMachine`` with its own small, plain-Python model of the
lifecycle (written from spec/thread-jobs.yaml and docs/, sharing no code with
the kit's ``statemachines`` model or with the reference runtime), calling the
implementation directly through the adapter protocol (``reset``,
``set_clock``, ``call(operation, args)``).

What it checks:

* every call's answer (result or error kind and message) and its effects
  (cancellation requests, turn requests, injected messages, spilled payloads,
  whose files are read back) against the model;
* after every step, the whole visible state: ``list_jobs`` with every status
  for each thread, and ``inspect_job`` (the full record) for every job the
  step changed, compared with the model;
* invariants on what the implementation showed: no job injected twice since
  the last restart, no thread keeping more terminal jobs than the limit.

Rules: start (explicit, generated and duplicate ids; the tool-call ids come
from a small pool so conflicts happen), complete synchronously, terminal
outcome (payloads around the spill limits), progress, LLM error, cancel,
begin turn, turn boundary, list, inspect (other threads too), retry, restart,
clock moves, a "fill a thread" rule (start n jobs, finish them in a drawn
order with ties in completion time, so retention is reached within one
example), and three races run on a small thread pool: concurrent turn
boundaries of one thread, concurrent starts, and a synchronous result racing
a background start of the same tool call.

``benchmarks/run.py`` measures it against the kit (``peer_steps_per_s``,
``peer_ratio``, time to first failure per mutant); tests/test_peer_machine.py
checks that it passes the reference and fails mutants.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, Phase, Verbosity
from hypothesis import seed as hypothesis_seed
from hypothesis import settings as Settings
from hypothesis import strategies as st
from hypothesis.errors import Flaky
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    get_state_machine_test,
    initialize,
    invariant,
    multiple,
    rule,
)

__all__ = ["COVERS", "PeerMismatch", "PeerOutcome", "JobsModel", "Limits", "build_peer_machine", "run_peer"]

THREADS = ("t1", "t2")
TOOL_CALLS = ("c1", "c2", "c3", "c4", "c5", "c6")
TOOLS = ("search", "build")
EXPLICIT_IDS = ("k1", "k2", "k3")
GHOST_ID = "ghost"  # never started: the rules taking a job id try unknown ids through it
OUTCOMES = ("completed", "failed", "cancelled", "timed_out")
STATUSES = ("running", "pending_cancel", "completed", "failed", "cancelled", "timed_out")
ACTIVE = frozenset({"running", "pending_cancel"})
TERMINAL = frozenset(OUTCOMES)
# The shipped thread-jobs mutants (lifecycle_references.thread_jobs.mutants)
# this machine is built to catch: every one of them. Which it catches in a
# given run depends on the seed and budget; benchmarks/run.py reports it.
COVERS = (
    "evict_at_limit",
    "evicts_running",
    "evict_by_start_time",
    "unstable_tie_order",
    "double_inject_race",
    "list_cross_thread",
    "inspect_cross_thread",
    "spill_off_by_one",
    "cancel_finished_job",
    "progress_injects",
    "restart_keeps_jobs",
    "no_idle_wakeup",
    "duplicate_id_accepted",
    "injection_newest_first",
    "second_start_allowed",
    "late_report_reopens",
    "lost_update_starts",
)
PUBLIC_FIELDS = (
    "job_id",
    "thread_id",
    "tool_call_id",
    "tool_name",
    "status",
    "started_at",
    "completed_at",
    "cancel_requested_at",
    "terminal_payload",
    "terminal_payload_file",
    "terminal_message_emitted",
    "terminal_message_emitted_at",
)


class PeerMismatch(AssertionError):
    """The implementation's answer or state differs from the peer's model."""


@dataclass(frozen=True)
class Limits:
    """The thread-jobs parameters at their spec defaults (what the reference runs with)."""

    retention_limit: int = 20
    max_lines: int = 1000
    max_bytes: int = 25600
    spill_file_name: str = "job-{job_id}-terminal.json"
    spill_message: str = "Terminal payload exceeded output limits. See temp file: {path}"
    msg_tool_call_resolved: str = "Tool invocation already resolved"
    msg_job_exists: str = "Background job already exists for tool_call_id"
    msg_duplicate_job_id: str = "Duplicate job-id"
    msg_job_not_found: str = "Job not found"
    msg_not_found_in_thread: str = "Job not found in this thread: {job_id}"
    msg_retry_not_supported: str = "Manual retry is not supported for background jobs"


# ------------------------------------------------------------------- the model
class JobsModel:
    """The lifecycle in plain Python: jobs in a dict, two tables, two counters."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.reset()

    def reset(self) -> None:
        self.jobs: dict[str, dict] = {}
        self.sync_calls: set[str] = set()
        self.busy: set[str] = set()
        self.start_seq = 0
        self.completion_seq = 0

    # queries
    def by_tool_call(self, tool_call_id: str) -> dict | None:
        for job in self.jobs.values():
            if job["tool_call_id"] == tool_call_id:
                return job
        return None

    def in_thread(self, thread_id: str, job_id: str) -> dict | None:
        job = self.jobs.get(job_id)
        return job if job is not None and job["thread_id"] == thread_id else None

    def listed(self, thread_id: str, statuses=ACTIVE) -> list[dict]:
        jobs = sorted(
            (j for j in self.jobs.values() if j["thread_id"] == thread_id and j["status"] in statuses),
            key=lambda j: (j["started_at"], j["_start"]),
        )
        return [
            {
                "job_id": j["job_id"],
                "tool_call_id": j["tool_call_id"],
                "tool_name": j["tool_name"],
                "status": j["status"],
            }
            for j in jobs
        ]

    def pending_injections(self, thread_id: str) -> list[dict]:
        return sorted(
            (
                j
                for j in self.jobs.values()
                if j["thread_id"] == thread_id and j["status"] in TERMINAL and not j["terminal_message_emitted"]
            ),
            key=lambda j: (j["completed_at"], j["_completion"]),
        )

    def fits_inline(self, payload: str) -> bool:
        return (
            payload.count("\n") + 1 <= self.limits.max_lines and len(payload.encode("utf-8")) <= self.limits.max_bytes
        )

    @staticmethod
    def record(job: dict) -> dict:
        return {name: job[name] for name in PUBLIC_FIELDS}

    def injected_text(self, job: dict) -> str:
        if job["terminal_payload_file"] is not None:
            return self.limits.spill_message.format(path=job["terminal_payload_file"])
        return job["terminal_payload"]

    # changes
    def start(self, job_id: str, thread_id: str, tool_call_id: str, tool_name: str, now: int) -> dict:
        self.start_seq += 1
        job = {
            "job_id": job_id,
            "thread_id": thread_id,
            "tool_call_id": tool_call_id,
            "tool_name": tool_name,
            "status": "running",
            "started_at": now,
            "completed_at": None,
            "cancel_requested_at": None,
            "terminal_payload": None,
            "terminal_payload_file": None,
            "terminal_message_emitted": False,
            "terminal_message_emitted_at": None,
            "_start": self.start_seq,
            "_completion": 0,
        }
        self.jobs[job_id] = job
        return job

    def finish(self, job: dict, outcome: str, payload: str, now: int) -> None:
        self.completion_seq += 1
        job.update(status=outcome, completed_at=now, _completion=self.completion_seq, terminal_payload=payload)

    def evict(self, thread_id: str) -> list[str]:
        """Retention: keep the newest ``retention_limit`` terminal jobs of the thread."""
        finished = sorted(
            (j for j in self.jobs.values() if j["thread_id"] == thread_id and j["status"] in TERMINAL),
            key=lambda j: (j["completed_at"], j["_completion"]),
        )
        victims = finished[: max(0, len(finished) - self.limits.retention_limit)]
        for job in victims:
            del self.jobs[job["job_id"]]
        return [job["job_id"] for job in victims]


# ---------------------------------------------------------------- strategies
def payloads(limits: Limits):
    """Small texts, and texts right at and past both spill limits."""
    edges = [
        "x" * (limits.max_bytes - 1),
        "x" * limits.max_bytes,
        "x" * (limits.max_bytes + 1),
        "\n" * (limits.max_lines - 1),
        "\n" * limits.max_lines,  # max_lines and max_lines + 1 lines
        "é" * (limits.max_bytes // 2 + 1),  # few characters, too many bytes
    ]
    return st.one_of(st.text(alphabet="ab \n", max_size=12), st.sampled_from(edges))


# ------------------------------------------------------------------ outcome
@dataclass
class PeerStats:
    examples: int = 0
    steps: int = 0
    calls: int = 0
    first_failure_at: float | None = None
    first_failure: str | None = None


@dataclass
class PeerOutcome:
    verdict: str  # "pass" or "fail"
    examples: int
    steps: int
    calls: int
    seconds: float
    failure: str | None = None
    first_failure_s: float | None = None  # seconds from the start to the first mismatch seen
    stats: PeerStats = field(default_factory=PeerStats, repr=False)


# ------------------------------------------------------------------ machine
def build_peer_machine(
    adapter, stats: PeerStats, pool: ThreadPoolExecutor, limits: Limits = Limits(), started: float | None = None
):
    """The peer's RuleBasedStateMachine class, driving ``adapter``."""
    began = time.perf_counter() if started is None else started

    def fail(message: str):
        if stats.first_failure_at is None:
            stats.first_failure_at = time.perf_counter() - began
            stats.first_failure = message
        raise PeerMismatch(message)

    def call(operation: str, args: dict) -> dict:
        stats.calls += 1
        try:
            response = adapter.call(operation, args)
        except Exception as exc:  # the implementation crashed: a failure like any other
            fail(f"{operation} {args}: the implementation raised {type(exc).__name__}: {exc}")
        return _shape(operation, response)

    def _shape(operation: str, response) -> dict:
        if (
            not isinstance(response, dict)
            or ("result" in response) == ("error" in response)
            or not isinstance(response.get("effects", []), list)
        ):
            fail(f"{operation}: malformed answer {response!r}")
        return response

    def concurrently(calls: list[tuple[str, dict]]) -> list[dict]:
        barrier = threading.Barrier(len(calls))

        def run(operation, args):
            try:
                barrier.wait(timeout=5.0)
            except threading.BrokenBarrierError:
                pass
            return adapter.call(operation, args)

        futures = [pool.submit(run, operation, args) for operation, args in calls]
        stats.calls += len(calls)
        responses = []
        for (operation, args), future in zip(calls, futures):
            try:
                responses.append(_shape(operation, future.result(timeout=30.0)))
            except PeerMismatch:
                raise
            except Exception as exc:
                fail(f"concurrent {operation} {args}: the implementation raised {type(exc).__name__}: {exc}")
        return responses

    # tool calls: mostly a small pool (so starts and synchronous results conflict), else None: a new one
    tool_calls = st.sampled_from((*TOOL_CALLS, None))
    # half of the job-taking draws go to a non-terminal job of the model, if any
    live_job = st.one_of(st.none(), st.integers(0, 63))

    # the thread a job is cancelled or inspected in: mostly its own (None), else any
    job_thread = st.sampled_from((None, None, *THREADS))

    class ThreadJobsPeer(RuleBasedStateMachine):
        jobs = Bundle("jobs")

        def __init__(self):
            super().__init__()
            adapter.reset(0)
            stats.examples += 1
            self.model = JobsModel(limits)
            self.now = 0
            self.batches = 0
            self.dirty: set[str] = set()  # jobs whose record the last step changed
            self.injected: set[str] = set()  # injected since the last restart

        # ---------------------------------------------------------- checks
        def expect_result(self, what: str, response: dict, result) -> None:
            if "error" in response:
                fail(f"{what}: expected {result!r}, got error {response['error']!r}")
            if response["result"] != result:
                fail(f"{what}: expected result {result!r}, got {response['result']!r}")

        def expect_error(self, what: str, response: dict, kind: str, message: str) -> None:
            if "error" not in response:
                fail(f"{what}: expected error {kind}, got result {response['result']!r}")
            if response["error"] != {"kind": kind, "message": message}:
                fail(f"{what}: expected error {kind} {message!r}, got {response['error']!r}")
            self.expect_effects(what, response, [])

        def expect_effects(self, what: str, response: dict, expected: list[dict]) -> None:
            observed = response.get("effects", [])
            if observed != expected:
                fail(f"{what}: expected effects {expected!r}, got {observed!r}")

        def check_injections(
            self, what: str, thread_id: str, injected: list[str], effects: list[dict], jobs: list[dict]
        ) -> None:
            """``injected`` and its ``message_injected`` effects, one per job, in order."""
            if len(effects) != len(jobs) or injected != [job["job_id"] for job in jobs]:
                fail(
                    f"{what}: expected to inject {[j['job_id'] for j in jobs]}, injected {injected}, "
                    f"effects {effects!r}"
                )
            for effect, job in zip(effects, jobs):
                text = effect.get("text")
                if (
                    {k: v for k, v in effect.items() if k != "text"}
                    != {
                        "effect": "message_injected",
                        "thread_id": thread_id,
                        "job_id": job["job_id"],
                        "role": "assistant",
                    }
                    or not isinstance(text, str)
                    or self.model.injected_text(job) not in text
                ):
                    fail(f"{what}: wrong injection of {job['job_id']}: {effect!r}")
                if job["job_id"] in self.injected:
                    fail(f"{what}: {job['job_id']} injected a second time")
                self.injected.add(job["job_id"])

        def fresh(self, prefix: str) -> str:
            self.batches += 1
            return f"{prefix}-{self.batches}"

        def pick(self, job_id: str, live: int | None) -> str:
            """The drawn id from the bundle (any id ever seen: terminal, evicted,
            never started), or, for ``live``, a job the model holds that is not
            terminal yet (the rules that break live there)."""
            if live is None:
                return job_id
            active = [k for k, j in self.model.jobs.items() if j["status"] in ACTIVE]
            return active[live % len(active)] if active else job_id

        def thread_of(self, job_id: str, thread: str | None) -> str:
            """``thread``, or for None the job's own thread (a thread of the pool
            for a job the model does not hold)."""
            if thread is not None:
                return thread
            job = self.model.jobs.get(job_id)
            return job["thread_id"] if job is not None else THREADS[0]

        def job_result(self, job: dict) -> dict:
            return {"job_id": job["job_id"], "status": job["status"]}

        def not_found_in_thread(self, job_id: str) -> str:
            return limits.msg_not_found_in_thread.format(job_id=job_id)

        # ----------------------------------------------------------- rules
        @initialize(target=jobs)
        def ghost(self):
            return GHOST_ID

        @rule(
            target=jobs,
            thread=st.sampled_from(THREADS),
            tool_call=tool_calls,
            tool=st.sampled_from(TOOLS),
            job_id=st.one_of(st.none(), st.sampled_from(EXPLICIT_IDS), jobs),
        )
        def start_job(self, thread, tool_call, tool, job_id):
            stats.steps += 1
            args = {"thread_id": thread, "tool_call_id": tool_call or self.fresh("tc"), "tool_name": tool}
            if job_id is not None:
                args["job_id"] = job_id
            return self._start(args) or multiple()

        def _start(self, args: dict, response: dict | None = None) -> str | None:
            what = f"start_job {args}"
            if response is None:
                response = call("start_job", args)
            m = self.model
            if args["tool_call_id"] in m.sync_calls:
                return self.expect_error(what, response, "tool_call_resolved", limits.msg_tool_call_resolved)
            if m.by_tool_call(args["tool_call_id"]) is not None:
                return self.expect_error(what, response, "job_exists_for_tool_call", limits.msg_job_exists)
            if args.get("job_id") in m.jobs:
                return self.expect_error(what, response, "duplicate_job_id", limits.msg_duplicate_job_id)
            if "error" in response:
                fail(f"{what}: expected a job, got error {response['error']!r}")
            job_id = args.get("job_id") or response["result"].get("job_id")
            if not isinstance(job_id, str) or not job_id or job_id in m.jobs:
                fail(f"{what}: generated job id {job_id!r} is not a new non-empty string")
            self.expect_result(what, response, {"mode": "background", "job_id": job_id, "status": "running"})
            self.expect_effects(what, response, [])
            m.start(job_id, args["thread_id"], args["tool_call_id"], args["tool_name"], self.now)
            self.dirty.add(job_id)
            return job_id

        @rule(
            thread=st.sampled_from(THREADS),
            tool_call=tool_calls,
            tool=st.sampled_from(TOOLS),
            result=st.text(max_size=8),
        )
        def complete_sync(self, thread, tool_call, tool, result):
            stats.steps += 1
            args = {
                "thread_id": thread,
                "tool_call_id": tool_call or self.fresh("tc"),
                "tool_name": tool,
                "result": result,
            }
            self._complete_sync(args, call("complete_sync", args))

        def _complete_sync(self, args: dict, response: dict) -> None:
            what = f"complete_sync {args}"
            m = self.model
            if args["tool_call_id"] in m.sync_calls or m.by_tool_call(args["tool_call_id"]) is not None:
                return self.expect_error(what, response, "tool_call_resolved", limits.msg_tool_call_resolved)
            self.expect_result(what, response, {"mode": "synchronous", "result": args["result"]})
            self.expect_effects(what, response, [])
            m.sync_calls.add(args["tool_call_id"])

        @rule(job_id=jobs, live=live_job, outcome=st.sampled_from(OUTCOMES), payload=payloads(limits))
        def observe_outcome(self, job_id, live, outcome, payload):
            stats.steps += 1
            self._outcome(self.pick(job_id, live), outcome, payload)

        def _outcome(self, job_id: str, outcome: str, payload: str) -> None:
            args = {"job_id": job_id, "outcome": outcome, "payload": payload}
            what = f"observe_outcome {job_id} {outcome} ({len(payload)} chars)"
            response = call("observe_outcome", args)
            m = self.model
            job = m.jobs.get(job_id)
            if job is None:
                return self.expect_error(what, response, "job_not_found", limits.msg_job_not_found)
            if job["status"] in TERMINAL:  # a late report changes nothing
                self.expect_result(what, response, self.job_result(job))
                return self.expect_effects(what, response, [])
            m.finish(job, outcome, payload, self.now)
            self.dirty.add(job_id)
            self.expect_result(what, response, self.job_result(job))
            effects = list(response.get("effects", []))
            if not m.fits_inline(payload):
                spilled = effects.pop(0) if effects else None
                name = limits.spill_file_name.format(job_id=job_id, tool_name=job["tool_name"])
                path = spilled.get("path") if isinstance(spilled, dict) else None
                if (
                    spilled is None
                    or set(spilled) != {"effect", "job_id", "path"}
                    or spilled["effect"] != "payload_spilled"
                    or spilled["job_id"] != job_id
                    or not isinstance(path, str)
                    or not path.endswith(name)
                ):
                    fail(f"{what}: expected payload_spilled to a file named {name}, got {spilled!r}")
                try:
                    content = Path(path).read_text(encoding="utf-8")
                except OSError as exc:
                    fail(f"{what}: the spilled payload's file cannot be read: {exc}")
                if content != payload:
                    fail(f"{what}: the spill file holds {len(content)} chars, not the payload's {len(payload)}")
                job.update(terminal_payload_file=path, terminal_payload=None)
            expected = (
                []
                if job["thread_id"] in m.busy
                else [{"effect": "turn_requested", "thread_id": job["thread_id"], "reason": "background-job-terminal"}]
            )
            if effects != expected:
                fail(f"{what}: expected effects {expected!r} after the spill, got {effects!r}")
            for evicted in m.evict(job["thread_id"]):
                self.dirty.discard(evicted)

        @rule(job_id=jobs, live=live_job, note=st.text(max_size=6))
        def observe_progress(self, job_id, live, note):
            stats.steps += 1
            self._progress(self.pick(job_id, live), note)

        def _progress(self, job_id: str, note: str) -> None:
            response = call("observe_progress", {"job_id": job_id, "note": note})
            self._status_only(f"observe_progress {job_id}", job_id, response)

        @rule(job_id=jobs)
        def observe_llm_error(self, job_id):
            stats.steps += 1
            response = call("observe_llm_error", {"job_id": job_id})
            self._status_only(f"observe_llm_error {job_id}", job_id, response)

        def _status_only(self, what: str, job_id: str, response: dict) -> None:
            job = self.model.jobs.get(job_id)
            if job is None:
                return self.expect_error(what, response, "job_not_found", limits.msg_job_not_found)
            self.expect_result(what, response, self.job_result(job))
            self.expect_effects(what, response, [])

        @rule(thread=job_thread, job_id=jobs, live=live_job, by=st.sampled_from(("user", "agent")))
        def cancel_job(self, thread, job_id, live, by):
            stats.steps += 1
            job_id = self.pick(job_id, live)
            self._cancel(self.thread_of(job_id, thread), job_id, by)

        def _cancel(self, thread: str, job_id: str, by: str) -> None:
            what = f"cancel_job {thread} {job_id}"
            response = call("cancel_job", {"thread_id": thread, "job_id": job_id, "requested_by": by})
            job = self.model.in_thread(thread, job_id)
            if job is None:
                return self.expect_error(what, response, "not_found_in_thread", self.not_found_in_thread(job_id))
            effects = []
            if job["status"] == "running":
                job.update(status="pending_cancel", cancel_requested_at=self.now)
                self.dirty.add(job_id)
                effects = [{"effect": "cancellation_requested", "job_id": job_id, "requested_by": by}]
            self.expect_result(what, response, self.job_result(job))
            self.expect_effects(what, response, effects)

        @rule(thread=st.sampled_from(THREADS))
        def begin_turn(self, thread):
            stats.steps += 1
            response = call("begin_turn", {"thread_id": thread})
            self.expect_result(f"begin_turn {thread}", response, {})
            self.expect_effects(f"begin_turn {thread}", response, [])
            self.model.busy.add(thread)

        @rule(thread=st.sampled_from(THREADS))
        def turn_boundary(self, thread):
            stats.steps += 1
            self._boundary(thread)

        def _boundary(self, thread: str) -> None:
            what = f"turn_boundary {thread}"
            response = call("turn_boundary", {"thread_id": thread})
            if "error" in response:
                fail(f"{what}: got error {response['error']!r}")
            pending = self.model.pending_injections(thread)
            self.check_injections(
                what, thread, (response["result"] or {}).get("injected"), response.get("effects", []), pending
            )
            self._mark_injected(thread, pending)

        def _mark_injected(self, thread: str, jobs: list[dict]) -> None:
            self.model.busy.discard(thread)
            for job in jobs:
                job.update(terminal_message_emitted=True, terminal_message_emitted_at=self.now)
                self.dirty.add(job["job_id"])

        @rule(
            thread=st.sampled_from(THREADS),
            statuses=st.one_of(st.none(), st.lists(st.sampled_from(STATUSES), unique=True, max_size=3)),
        )
        def list_jobs(self, thread, statuses):
            stats.steps += 1
            args = {"thread_id": thread} if statuses is None else {"thread_id": thread, "statuses": statuses}
            response = call("list_jobs", args)
            wanted = ACTIVE if statuses is None else frozenset(statuses)
            self.expect_result(f"list_jobs {args}", response, {"jobs": self.model.listed(thread, wanted)})
            self.expect_effects(f"list_jobs {args}", response, [])

        @rule(thread=job_thread, job_id=jobs)
        def inspect_job(self, thread, job_id):
            stats.steps += 1
            self._inspect(self.thread_of(job_id, thread), job_id)

        def _inspect(self, thread: str, job_id: str) -> None:
            what = f"inspect_job {thread} {job_id}"
            response = call("inspect_job", {"thread_id": thread, "job_id": job_id})
            job = self.model.in_thread(thread, job_id)
            if job is None:
                return self.expect_error(what, response, "not_found_in_thread", self.not_found_in_thread(job_id))
            self.expect_result(what, response, {"job": self.model.record(job)})
            self.expect_effects(what, response, [])

        @rule(thread=st.sampled_from(THREADS), job_id=jobs)
        def retry_job(self, thread, job_id):
            stats.steps += 1
            response = call("retry_job", {"thread_id": thread, "job_id": job_id})
            self.expect_error(f"retry_job {job_id}", response, "retry_not_supported", limits.msg_retry_not_supported)

        @rule()
        def restart(self):
            stats.steps += 1
            response = call("restart", {})
            self.expect_result("restart", response, {})
            self.expect_effects("restart", response, [])
            self.model.reset()
            self.dirty.clear()
            self.injected.clear()

        @rule(ms=st.sampled_from((0, 1, 7)))
        def advance_clock(self, ms):
            stats.steps += 1
            self.now += ms
            effects = adapter.set_clock(self.now)
            if effects:
                fail(f"set_clock({self.now}): no timers in this lifecycle, got effects {effects!r}")

        @rule(target=jobs, thread=st.sampled_from(THREADS), data=st.data())
        def fill_thread(self, thread, data):
            """Start n jobs in one thread, then finish them in a drawn order, some
            in the same millisecond: enough to reach the retention limit."""
            stats.steps += 1
            self.batches += 1
            n = data.draw(st.integers(1, limits.retention_limit + 3), label="n")
            started = []
            for i in range(n):
                job_id = self._start(
                    {"thread_id": thread, "tool_call_id": f"fill-{self.batches}-{i}", "tool_name": TOOLS[i % 2]}
                )
                if job_id is not None:
                    started.append(job_id)
            for job_id in data.draw(st.permutations(started), label="order"):
                self._outcome(job_id, data.draw(st.sampled_from(OUTCOMES), label="outcome"), f"out-{job_id}")
                if data.draw(st.booleans(), label="tick"):
                    self.now += 1
                    adapter.set_clock(self.now)
            return multiple(*started)

        @rule(thread=st.sampled_from(THREADS))
        def racing_boundaries(self, thread):
            """Three turn boundaries of one thread at once: each pending job injected exactly once."""
            stats.steps += 1
            pending = self.model.pending_injections(thread)
            responses = concurrently([("turn_boundary", {"thread_id": thread})] * 3)
            seen: list[str] = []
            for response in responses:
                if "error" in response:
                    fail(f"racing turn_boundary {thread}: got error {response['error']!r}")
                injected = (response["result"] or {}).get("injected")
                if not isinstance(injected, list):
                    fail(f"racing turn_boundary {thread}: injected {injected!r}")
                mine = [job for job in pending if job["job_id"] in injected]
                self.check_injections(
                    f"racing turn_boundary {thread}", thread, injected, response.get("effects", []), mine
                )
                seen += injected
            if sorted(seen) != sorted(job["job_id"] for job in pending):
                fail(
                    f"racing turn_boundary {thread}: expected {[j['job_id'] for j in pending]} injected once "
                    f"in all, got {seen}"
                )
            self._mark_injected(thread, pending)

        @rule(target=jobs, threads=st.lists(st.sampled_from(THREADS), min_size=2, max_size=4))
        def concurrent_starts(self, threads):
            """Starts of new tool calls at once: every one succeeds and every job is listed."""
            stats.steps += 1
            self.batches += 1
            calls = [
                ("start_job", {"thread_id": thread, "tool_call_id": f"race-{self.batches}-{i}", "tool_name": "search"})
                for i, thread in enumerate(threads)
            ]
            responses = concurrently(calls)
            new: list[dict] = []
            for (_, args), response in zip(calls, responses):
                what = f"concurrent start_job {args}"
                if "error" in response:
                    fail(f"{what}: expected a job, got error {response['error']!r}")
                job_id = response["result"].get("job_id")
                if (
                    not isinstance(job_id, str)
                    or not job_id
                    or job_id in self.model.jobs
                    or job_id in [a["job_id"] for a in new]
                ):
                    fail(f"{what}: generated job id {job_id!r} is not new")
                self.expect_result(what, response, {"mode": "background", "job_id": job_id, "status": "running"})
                self.expect_effects(what, response, [])
                new.append({**args, "job_id": job_id})
            # They started in the same millisecond; which went first is the
            # implementation's choice. Take the order it lists them in.
            for thread in sorted(set(threads)):
                mine = {a["job_id"]: a for a in new if a["thread_id"] == thread}
                listed = call("list_jobs", {"thread_id": thread, "statuses": list(STATUSES)})
                order = [
                    j.get("job_id") for j in (listed.get("result") or {}).get("jobs", []) if j.get("job_id") in mine
                ]
                if sorted(order) != sorted(mine):
                    fail(f"concurrent starts in {thread}: started {sorted(mine)}, listed {order}")
                for job_id in order:
                    a = mine[job_id]
                    self.model.start(job_id, thread, a["tool_call_id"], a["tool_name"], self.now)
                    self.dirty.add(job_id)
            return multiple(*(a["job_id"] for a in new))

        @rule(target=jobs, thread=st.sampled_from(THREADS))
        def sync_races_start(self, thread):
            """A synchronous result and a background start of the same new tool call: exactly one wins."""
            stats.steps += 1
            self.batches += 1
            tool_call = f"sync-race-{self.batches}"
            sync_args = {"thread_id": thread, "tool_call_id": tool_call, "tool_name": "build", "result": "r"}
            start_args = {"thread_id": thread, "tool_call_id": tool_call, "tool_name": "build"}
            sync, start = concurrently([("complete_sync", sync_args), ("start_job", start_args)])
            if ("error" in sync) == ("error" in start):
                fail(
                    f"sync_races_start {tool_call}: exactly one of complete_sync and start_job must succeed; "
                    f"got {sync!r} and {start!r}"
                )
            if "error" in start:  # the synchronous result came first
                self._complete_sync(sync_args, sync)
                self._start(start_args, start)
                return multiple()
            job_id = self._start(start_args, start)
            self._complete_sync(sync_args, sync)
            return job_id

        # ------------------------------------------------------ invariants
        @invariant()
        def visible_state_matches(self):
            """The whole visible state after every step: every thread's list with
            every status, and the full record of each job the step changed."""
            m = self.model
            for thread in THREADS:
                response = call("list_jobs", {"thread_id": thread, "statuses": list(STATUSES)})
                self.expect_result(f"state of {thread}", response, {"jobs": m.listed(thread, frozenset(STATUSES))})
                terminal = sum(1 for j in response["result"]["jobs"] if j["status"] in TERMINAL)
                if terminal > limits.retention_limit:
                    fail(f"state of {thread}: {terminal} terminal jobs kept, limit {limits.retention_limit}")
            for job_id in sorted(self.dirty):
                job = m.jobs.get(job_id)
                if job is not None:
                    self._inspect(job["thread_id"], job_id)
            self.dirty.clear()

    return ThreadJobsPeer


def peer_settings(max_examples: int, step_count: int, *, shrink: bool = True) -> Settings:
    """What run_stateful uses (no deadline, no database, quiet, health checks off);
    without shrink, the shrink phase is left out (time to first failure)."""
    phases = list(Phase) if shrink else [p for p in Phase if p not in (Phase.shrink, Phase.explain)]
    return Settings(
        max_examples=max_examples,
        stateful_step_count=step_count,
        deadline=None,
        database=None,
        verbosity=Verbosity.quiet,
        print_blob=False,
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,
        phases=phases,
    )


def run_peer(
    adapter_factory: Callable,
    *,
    max_examples: int,
    step_count: int,
    seed: int,
    shrink: bool = True,
    settings: Settings | None = None,
    limits: Limits = Limits(),
) -> PeerOutcome:
    """Run the peer machine against a fresh adapter from ``adapter_factory()``.
    ``settings`` (e.g. benchmarks/run.py's hypothesis_settings) replaces
    :func:`peer_settings`; ``shrink=False`` then still leaves the shrink phase out."""
    chosen = settings if settings is not None else peer_settings(max_examples, step_count, shrink=shrink)
    if not shrink:
        chosen = Settings(chosen, phases=[p for p in Phase if p not in (Phase.shrink, Phase.explain)])
    stats = PeerStats()
    adapter = adapter_factory()
    pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="peer")
    started = time.perf_counter()
    try:
        machine = build_peer_machine(adapter, stats, pool, limits, started)
        test = get_state_machine_test(machine, settings=chosen)
        hypothesis_seed(seed)(test)
        verdict, failure = "pass", None
        try:
            test()
        except (AssertionError, Flaky) as exc:  # Flaky: a race seen once, not again on replay
            verdict = "fail"
            failure = stats.first_failure or f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        seconds = time.perf_counter() - started
    finally:
        pool.shutdown(wait=True)
        adapter.close()
    return PeerOutcome(
        verdict, stats.examples, stats.steps, stats.calls, seconds, failure, stats.first_failure_at, stats
    )

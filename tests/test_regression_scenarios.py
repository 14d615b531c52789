"""Issue 11: the bugs real runtimes shipped are regression scenarios. Each
passes on the reference, fails on the mutant that reproduces the bug, and the
failure's first line names the rule the bug broke (the scenario's title)."""

import functools
import os
import time
from dataclasses import replace
from pathlib import Path

import pytest
from scenario_verdicts import conforms

from conformance.engine.runner import RunConfig, run_conformance
from conformance.mutants import load_mutants
from lifecycle_references.thread_jobs.adapter import ReferenceAdapter
from lifecycle_references.thread_jobs.runtime import _SYNC, Job, JobError, ThreadJobRuntime
from statemachines import load_spec

ROOT = Path(__file__).resolve().parent.parent

# (spec, scenario, mutant, reference profile) — docs/real-systems.md lists each.
CASES = [
    ("thread-jobs", "R1", "late_report_reopens", None),
    ("thread-jobs", "R2", "lost_update_starts", None),
    ("thread-jobs", "R1", "late_report_reopens", "psi-runtime"),
    ("async-jobs", "JM-R1", "job-manager.ack_does_not_wake", None),
    ("async-jobs", "JM-R2", "job-manager.evicted_still_delivered", None),
    ("async-jobs", "JM-R3", "job-manager.late_body_reschedules_eviction", None),
    ("process-sessions", "PS-R1", "terminal_poll_drops_later_output", None),
    ("process-sessions", "PS-R1", "terminal_poll_drops_later_output", "openclaw"),
    # Under the fixed upstream's reading (evicted_delivery: last_attempt) too.
    ("async-jobs", "JM-R2", "job-manager.evicted_still_delivered", "oh-my-pi"),
    ("async-jobs", "JM-E22", "job-manager.evicted_still_delivered", "oh-my-pi"),
    # The scenarios that used to pass these bugs by coincidence.
    ("async-jobs", "JM-E10", "job-manager.evicted_still_delivered", None),
    ("async-jobs", "JM-E11", "job-manager.late_body_reschedules_eviction", None),
    # oh-my-pi 18.x: JM-R6 is JM-R1's rule under due-time delivery; JM-R7 a bug 18.3.4 ships.
    ("async-jobs", "JM-R6", "oh-my-pi-18.due_time_in_queue_order", "oh-my-pi-18"),
    ("async-jobs", "JM-R7", "oh-my-pi-18.last_attempt_follows_id", "oh-my-pi-18"),
    ("async-jobs", "JM-R7", "oh-my-pi-18.last_attempt_follows_id", "oh-my-pi"),
]


def _spec(name: str) -> str:
    return str(ROOT / "spec" / f"{name}.yaml")


def _scenario(name: str, scenario_id: str):
    return next(s for s in load_spec(_spec(name)).scenarios if s.id == scenario_id)


@pytest.mark.parametrize("spec", ["thread-jobs", "async-jobs", "process-sessions"])
def test_each_regression_scenario_names_its_class_of_bug(spec):
    regressions = [s for s in load_spec(_spec(spec)).scenarios if s.id.split("-")[-1].startswith("R")]
    assert len(regressions) >= (1 if spec == "process-sessions" else 2)
    for scenario in regressions:
        assert scenario.description.startswith("Bug class: "), scenario.id


@pytest.mark.parametrize(
    "spec, scenario_id, mutant, profile", CASES, ids=[f"{c[1]}:{c[2]}:{c[3] or 'default'}" for c in CASES]
)
def test_regression_scenario_passes_on_the_reference_and_fails_on_the_bug(tmp_path, spec, scenario_id, mutant, profile):
    options = {"profile": profile} if profile else {}
    base = dict(spec_path=_spec(spec), stateful=False, only=(scenario_id,), adapter_options=options)
    reference = run_conformance(RunConfig(**base, report_dir=str(tmp_path / "reference")))
    assert [conforms(s) for s in reference["scenarios"]] == [True], reference["scenarios"]

    factory = load_mutants(load_spec(_spec(spec)).implementations["mutants"])[mutant].factory
    if profile:  # a mutant's factory takes the profile itself, as the reference's adapter options do
        factory = functools.partial(factory, profile=profile)
    buggy = run_conformance(
        RunConfig(
            **base, adapter_factory=factory, adapter_label=f"mutant:{mutant}", report_dir=str(tmp_path / "mutant")
        )
    )
    [outcome] = buggy["scenarios"]
    assert outcome["verdict"] == "fail", outcome
    first_line = outcome["failure"]["message"].splitlines()[0]
    title = _scenario(spec, scenario_id).title
    assert first_line.startswith(f"scenario {scenario_id} ({title}): "), first_line


# The bugs shipped in the real systems, under those systems' own profiles:
# the kit still catches each there, by scenarios and by the exploration alone.
UNDER_THEIR_PROFILE = [
    ("thread-jobs", "late_report_reopens", "psi-runtime"),
    ("thread-jobs", "lost_update_starts", "psi-runtime"),
    ("async-jobs", "job-manager.ack_does_not_wake", "oh-my-pi"),
    ("async-jobs", "job-manager.evicted_still_delivered", "oh-my-pi"),
    ("async-jobs", "job-manager.late_body_reschedules_eviction", "oh-my-pi"),
    ("async-jobs", "oh-my-pi-18.last_attempt_follows_id", "oh-my-pi-18"),
    ("process-sessions", "terminal_poll_drops_later_output", "openclaw"),
]


@pytest.mark.slow
@pytest.mark.parametrize(
    "spec, mutant, profile", UNDER_THEIR_PROFILE, ids=[f"{c[1]}:{c[2]}" for c in UNDER_THEIR_PROFILE]
)
def test_a_shipped_bug_is_caught_under_its_real_systems_profile(spec, mutant, profile):
    import functools

    from conformance.mutants import run_mutant

    found = load_mutants(load_spec(_spec(spec)).implementations["mutants"])[mutant]
    bound = type(found)(found.name, found.description, functools.partial(found.factory, profile=profile))
    result = run_mutant(_spec(spec), mutant, bound, profile="ci", seed=1, timeout_s=10)
    assert result.error is None, result.error
    assert result.killed_by_scenarios, f"{mutant} survived every scenario under {profile}"
    assert result.found_by_exploration, f"{mutant} was not found by the exploration alone under {profile}"


# ---------------------------------------------------- R2 against a narrow race
class _TightLostUpdate(ThreadJobRuntime):
    """A lost update with no pause inside: the read-then-overwrite window is
    the checks, the building of the record and one yield of the thread (as a
    log line or an I/O call would), where the shipped mutant sleeps 3 ms."""

    def start_job(self, thread_id, tool_call_id, tool_name, job_id=None):
        with self._lock:
            jobs, calls = dict(self._jobs), dict(self._tool_calls)
            by_thread = {k: dict(v) for k, v in self._by_thread.items()}
            created = next(self._created)
            job_id = job_id or self._generate_job_id()
        if calls.get(tool_call_id) is _SYNC:
            raise JobError("tool_call_resolved", self.config.msg_tool_call_resolved)
        if tool_call_id in calls:
            raise JobError("job_exists_for_tool_call", self.config.msg_job_exists_for_tool_call)
        job = Job(job_id, thread_id, tool_call_id, tool_name, "running", self._clock(), created_seq=created)
        time.sleep(0)  # the window holds a yield (a log line, an I/O call), not a pause
        with self._lock:
            jobs[job_id] = job
            by_thread.setdefault(thread_id, {})[job_id] = None
            calls[tool_call_id] = job_id
            self._jobs, self._by_thread, self._tool_calls = jobs, by_thread, calls  # no compare-and-swap
            return replace(job)

    def complete_sync(self, thread_id, tool_call_id, tool_name, result):
        with self._lock:
            calls = dict(self._tool_calls)
        if tool_call_id in calls:
            raise JobError("tool_call_resolved", self.config.msg_tool_call_resolved)
        calls[tool_call_id] = _SYNC
        time.sleep(0)
        with self._lock:
            self._tool_calls = calls  # no compare-and-swap
        return result


@pytest.fixture
def one_cpu():
    """The test's threads (and the kit's racing threads it starts) on one CPU."""
    if not hasattr(os, "sched_setaffinity"):
        pytest.skip("needs sched_setaffinity (Linux)")
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(before)})
    yield
    os.sched_setaffinity(0, before)


def test_r2_catches_a_lost_update_without_a_pause_on_one_core_every_time(tmp_path, one_cpu):
    racy = type("TightLostUpdateAdapter", (ReferenceAdapter,), {"runtime_class": _TightLostUpdate})
    base = dict(
        spec_path=_spec("thread-jobs"), stateful=False, only=("R2",), adapter_options={"profile": "psi-runtime"}
    )
    reference = run_conformance(RunConfig(**base, report_dir=str(tmp_path / "reference")))
    assert [conforms(s) for s in reference["scenarios"]] == [True], reference["scenarios"]
    for attempt in range(3):
        report = run_conformance(
            RunConfig(**base, adapter_factory=racy, adapter_label="tight", report_dir=str(tmp_path / f"racy{attempt}"))
        )
        assert [s["verdict"] for s in report["scenarios"]] == ["fail"], (attempt, report["scenarios"])

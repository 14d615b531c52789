"""Derived races of operations that name the records they change in a list
argument (statemachines/tools/races.py): the job tool's ``cancel`` raced with
itself and with each scalar writer of the same job, the list set from the
shared key by the group's ``args``; nothing derived where the data flow is not
understood, and nothing changed for specs without such lists."""

import dataclasses
import functools
import shutil
import threading
import time
from pathlib import Path

import pytest

from conformance.engine.choices import ABSENT
from conformance.engine.runner import RunConfig, run_conformance
from conformance.engine.stateful import Explorer, carry_out
from lifecycle_references.job_manager import JobManagerAdapter
from lifecycle_references.job_manager.runtime import CANCELLED, RUNNING
from lifecycle_references.job_manager.tool import ALREADY_COMPLETED, NOT_FOUND, JobTool
from statemachines import Model, derived_races, exploration_applies, load_spec
from statemachines.language.expressions import Expression
from statemachines.tools.races import list_record_access

ROOT = Path(__file__).resolve().parent.parent
ASYNC_JOBS = ROOT / "spec" / "async-jobs.yaml"

# What the specs without list arguments derived before list-writers were: unchanged.
BEFORE = {
    "thread-jobs": ["observe_outcome_twice", "cancel_job_twice"],
    "async-command": [],
    "task-progress": [
        "start_task_twice",
        "complete_task_twice",
        "fail_task_twice",
        "kill_task_twice",
        "mark_notified_twice",
        "foreground_task_twice",
        "update_summary_twice",
        "queue_message_twice",
        "drain_messages_twice",
        "set_retain_twice",
        "start_task_and_complete_task",
        "start_task_and_fail_task",
        "start_task_and_kill_task",
        "start_task_and_notify_task",
        "start_task_and_background_task",
        "start_task_and_update_progress",
        "start_task_and_update_summary",
        "start_task_and_set_retain",
        "complete_task_and_fail_task",
        "complete_task_and_notify_task",
        "complete_task_and_mark_notified",
        "complete_task_and_background_task",
        "complete_task_and_foreground_task",
        "complete_task_and_update_progress",
        "complete_task_and_update_summary",
        "complete_task_and_set_retain",
        "fail_task_and_kill_task",
        "fail_task_and_notify_task",
        "fail_task_and_mark_notified",
        "fail_task_and_background_task",
        "fail_task_and_foreground_task",
        "fail_task_and_update_progress",
        "fail_task_and_update_summary",
        "fail_task_and_set_retain",
        "kill_task_and_notify_task",
        "kill_task_and_background_task",
        "kill_task_and_update_progress",
        "kill_task_and_update_summary",
        "kill_task_and_set_retain",
        "notify_task_and_mark_notified",
        "background_task_and_foreground_task",
        "update_progress_and_update_summary",
        "queue_message_and_drain_messages",
    ],
}


@functools.cache
def _async_jobs():
    return load_spec(ASYNC_JOBS)  # loaded once: nothing here changes it


def _sources(group: dict) -> dict:
    return {op: {name: expr.source for name, expr in exprs.items()} for op, exprs in group["args"].items()}


@pytest.mark.parametrize("name", sorted(BEFORE))
def test_a_spec_without_list_arguments_derives_what_it_did_before(name):
    spec = load_spec(ROOT / "spec" / f"{name}.yaml")
    assert [group["name"] for group in derived_races(spec)] == BEFORE[name]
    assert not any(list_record_access(spec, op) for op in spec.operations)


def test_the_job_tool_races_itself_and_the_task_tables_cancel_on_the_job_its_cancel_list_names():
    spec = _async_jobs()
    # Only the cancel list is understood: the jobs it watches and acknowledges come (also)
    # from the running jobs it collects, so nothing is derived from them.
    assert set(list_record_access(spec, "job_tool")) == {"cancel"}
    reads, writes = list_record_access(spec, "job_tool")["cancel"]
    assert {"status", "ends_at"} <= writes and {"status", "job_id", "stop_ms"} <= reads
    derived = {group["name"]: group for group in derived_races(spec)}
    # (oh-my-pi 18's cancel_jobs, beside the job tool, has races of its own)
    assert list(derived)[:2] == ["job_tool_twice", "cancel_task_and_job_tool"]
    assert set(derived) - {"job_tool_twice", "cancel_task_and_job_tool"} == {
        "cancel_jobs_twice",
        "finish_job_and_cancel_jobs",
        "cancel_task_and_cancel_jobs",
    }

    twice = derived["job_tool_twice"]
    assert twice["calls"] == ["job_tool", "job_tool"] and twice["identical"] and twice["derived"]
    assert twice["same_args"] == ["cancel"] and twice["assumes"] is None
    # the other list naming jobs is empty; `list` (refused with a cancel list) is off
    assert _sources(twice) == {"job_tool": {"poll": "[]", "list": "false"}}

    pair = derived["cancel_task_and_job_tool"]
    assert pair["calls"] == ["cancel_task", "job_tool"] and pair["same_args"] == ["job_id"]
    assert not pair["identical"] and pair["derived"] and pair["assumes"] is None
    assert _sources(pair) == {"job_tool": {"cancel": "[shared.job_id]", "poll": "[]", "list": "false"}}
    assert all(isinstance(expr, Expression) for expr in pair["args"]["job_tool"].values())


def test_the_declared_finish_against_job_tool_group_is_not_derived_again():
    spec = _async_jobs()
    assert "tool_cancel_races_finish" in {group["name"] for group in spec.exploration.concurrent}
    assert not any(set(group["calls"]) == {"finish_job", "job_tool"} for group in derived_races(spec))
    # without the declared group, the same race is derived
    exploration = dataclasses.replace(
        spec.exploration,
        concurrent=[g for g in spec.exploration.concurrent if g["name"] != "tool_cancel_races_finish"],
    )
    derived = {g["name"]: g for g in derived_races(dataclasses.replace(spec, exploration=exploration))}
    assert derived["finish_job_and_job_tool"]["calls"] == ["finish_job", "job_tool"]
    assert _sources(derived["finish_job_and_job_tool"])["job_tool"]["cancel"] == "[shared.job_id]"
    # and `derived_races: false` still turns every derived race off
    off = dataclasses.replace(spec.exploration, derived_races=False)
    assert derived_races(dataclasses.replace(spec, exploration=off)) == []


def test_each_derived_group_runs_only_where_its_calls_are_offered():
    spec = _async_jobs()
    derived = {group["name"]: group for group in derived_races(spec)}
    job_tool = spec.default_parameters()
    task_table = {**job_tool, "surface": "task_table"}
    for params, twice in ((job_tool, True), (task_table, False)):
        offered = spec.offered_operations(params)
        assert exploration_applies(derived["job_tool_twice"], params, offered) is twice
        # job_tool and cancel_task belong to different surfaces: never together
        assert not exploration_applies(derived["cancel_task_and_job_tool"], params, offered)
    assert [g["name"] for g in Explorer(spec, job_tool, concurrent=True).derived] == ["job_tool_twice"]
    assert Explorer(spec, task_table, concurrent=True).derived == ()


def _model_with_a_running_and_a_finished_job(spec):
    model = Model(spec, spec.default_parameters())
    model.reset()
    for label in ("a", "b"):
        assert model.predict("start_job", {"label": label}).ok
    assert model.predict("finish_job", {"job_id": "bg_2", "outcome": "completed", "text": "t"}).ok
    return model  # bg_1 runs, bg_2 completed


def test_the_list_call_gets_the_shared_key_in_its_list():
    spec = _async_jobs()
    group = next(g for g in derived_races(spec) if g["name"] == "cancel_task_and_job_tool")
    explorer = Explorer(spec, spec.default_parameters(), concurrent=True)
    drawn = [("cancel_task", {"job_id": "bg_1"}), ("job_tool", {"wait_ms": 5000, "list": True, "poll": ["bg_2"]})]
    assert explorer.with_group_args(group, drawn, {"job_id": "bg_1"}) == [
        ("cancel_task", {"job_id": "bg_1"}),
        ("job_tool", {"wait_ms": 5000, "list": False, "poll": [], "cancel": ["bg_1"]}),
    ]


class _Machine:
    def __init__(self, keys):
        self.keys, self.group_answers = keys, None


class _Driver:
    def __init__(self):
        self.sent = []

    def concurrently(self, calls, lead=-1):
        self.sent.append(calls)
        return [{} for _ in calls]


@pytest.mark.parametrize("pick, moved", [(0, True), (3, False)])
def test_the_job_tool_twice_moves_its_cancel_list_onto_a_record_both_calls_change(pick, moved):
    """Both calls are alike (the first one's arguments), with the group's fixed
    arguments; three draws in four move the list onto the one record both
    would change (a running job), as a scalar key moves."""
    spec = _async_jobs()
    group = next(g for g in derived_races(spec) if g["name"] == "job_tool_twice")
    model = _model_with_a_running_and_a_finished_job(spec)
    explorer = Explorer(spec, spec.default_parameters(), concurrent=True)
    explorer.model = model
    names = explorer.args_plan("job_tool")[1]
    # a fresh (unknown) key in the cancel list, `list: true` and a poll drawn: the group fixes both
    values = {"poll": [(90, 1)], "cancel": [(0, pick)], "list": True, "wait_ms": ABSENT}
    raw = tuple(values[name] for name in names)
    driver = _Driver()
    carry_out(explorer, ("concurrent", group, [raw, raw], 0), _Machine(["bg_1", "bg_2"]), driver)
    cancel = ["bg_1"] if moved else [f"k{pick % 4 + 1}"]
    assert driver.sent == [[("job_tool", {"poll": [], "cancel": cancel, "list": False})] * 2]


def _spec_with(tmp_path: Path, old: str, new: str):
    """async-jobs with one text replaced (its included scenario files beside it)."""
    for path in ROOT.joinpath("spec").glob("async-jobs.*.yaml"):
        shutil.copy(path, tmp_path / path.name)
    text = ASYNC_JOBS.read_text(encoding="utf-8")
    assert text.count(old) >= 1, old
    (tmp_path / "async-jobs.yaml").write_text(text.replace(old, new), encoding="utf-8")
    return load_spec(tmp_path / "async-jobs.yaml")


@pytest.mark.parametrize(
    "old, new",
    [
        # the list mixes in another argument's items
        ('cancel: "has(args.cancel) ? args.cancel : []"', 'cancel: "has(args.cancel) ? args.cancel : args.poll"'),
        # the items are changed on the way
        ("- let: {cancel_ids: distinct(cancel)}", "- let: {cancel_ids: \"distinct(cancel).map(i, i + '')\"}"),
        # records outside the list are selected too
        ('where: "job.job_id in cancel_ids"', 'where: "job.job_id in cancel_ids || job.watched"'),
        # the records are selected by another field
        ('where: "job.job_id in cancel_ids"', 'where: "job.label in cancel_ids"'),
    ],
    ids=["two-arguments", "mapped", "or", "not-the-key"],
)
def test_a_list_whose_data_flow_is_not_understood_derives_nothing(tmp_path, old, new):
    spec = _spec_with(tmp_path, old, new)
    assert list_record_access(spec, "job_tool") == {}
    assert not any("job_tool" in group["calls"] for group in derived_races(spec))


# -- end to end: a check-then-act window in the job tool's cancel ------------------------


class _CancelWindowTool(JobTool):
    """Checks that the job runs, lets go of the runtime's lock for a moment
    (an ``await`` between the check and the act), then reports "cancelled"
    when the job is cancelled by then, by whichever call."""

    lock: threading.RLock

    def _cancel_one(self, job_id: str) -> str:
        job = self._manager.get(job_id)
        if job is None:
            return NOT_FOUND
        if job.status != RUNNING:
            return ALREADY_COMPLETED
        self.lock.release()
        try:
            time.sleep(0.005)
        finally:
            self.lock.acquire()
        self._manager.cancel(job_id)
        return "cancelled" if job.status == CANCELLED else ALREADY_COMPLETED


class _CancelWindowAdapter(JobManagerAdapter):
    tool_class = _CancelWindowTool

    def reset(self, now_ms: int) -> None:
        super().reset(now_ms)
        assert isinstance(self._tool, _CancelWindowTool)
        self._tool.lock = self._lock


@pytest.mark.slow
@pytest.mark.hypothesis
def test_the_derived_job_tool_race_finds_a_double_cancel_no_declared_group_shows(tmp_path):
    """Two job tools cancelling one running job at once: one must answer
    "already_completed". Only the derived job_tool_twice sends that race (a
    finish racing the cancel makes the mutant answer correctly)."""
    report = run_conformance(
        RunConfig(
            spec_path=str(ASYNC_JOBS),
            adapter_factory=_CancelWindowAdapter,
            adapter_label="cancel-window",
            profile="quick",
            seed=1,
            scenarios=False,
            shrink_s=0,
            report_dir=str(tmp_path),
        )
    )
    failure = report["stateful"]["failure"]
    assert report["stateful"]["verdict"] == "fail" and failure["kind"] == "linearizability", failure
    raced = next(step for step in failure["steps"] if step.get("index") == failure["step"])["concurrently"]
    assert [call["operation"] for call in raced] == ["job_tool", "job_tool"], raced
    # both report one job as cancelled by them
    cancelled = [
        {entry["id"] for entry in call["observed"]["result"]["cancelled"] or () if entry["status"] == "cancelled"}
        for call in raced
    ]
    assert cancelled[0] & cancelled[1], raced

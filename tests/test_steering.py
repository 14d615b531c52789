"""Steering the exploration (conformance/engine/steering.py): swarm testing read
against the weighted action list, rare records first, a snapshot of the counts
per example frozen at the first failure, and the same seed giving the same run."""

import functools
from pathlib import Path

import pytest

from conformance.engine import steering
from conformance.engine.runner import RunConfig, run_conformance
from conformance.engine.steering import RARE_PICK, Steering, SteeringChoices, Swarm
from lifecycle_references.thread_jobs.adapter import ReferenceAdapter
from statemachines import Model, load_spec

pytestmark = pytest.mark.hypothesis  # drives Hypothesis: tests/hypothesis_marker.py

ROOT = Path(__file__).resolve().parent.parent
SPEC = str(ROOT / "spec" / "thread-jobs.yaml")


class _Choices:
    """Hypothesis's choices stood in by a fixed list of integers."""

    def __init__(self, values):
        self.values = list(values)

    def draw_integer(self, low, high):
        value = self.values.pop(0)
        assert low <= value <= high
        return value


def test_a_left_out_kind_takes_the_next_kept_slot_and_never_all_are_left_out():
    swarm = Swarm(["a", "a", "b", "c"])
    swarm.draw(_Choices([1, 0, 0]))  # "a" left out
    assert swarm.left_out == {"a"}
    assert [swarm.kept(i) for i in range(4)] == [2, 2, 2, 3]
    swarm.draw(_Choices([1, 1, 1]))  # all three: nothing is left out instead
    assert not swarm.left_out and [swarm.kept(i) for i in range(4)] == [0, 1, 2, 3]
    off = Swarm(["a", "b"], enabled=False)
    off.draw(_Choices([]))  # switched off: draws nothing
    assert not off.left_out


def test_swarm_testing_never_leaves_out_the_races():
    """A check-then-act window needs its concurrent group: the kinds swarm
    testing must keep draw nothing and are never left out."""
    swarm = Swarm(["a", "concurrent g", "b"], always=frozenset({"concurrent g"}))
    swarm.draw(_Choices([1, 0]))  # one draw per kind it may leave out: "a", then "b"
    assert swarm.left_out == {"a"} and [swarm.kept(i) for i in range(3)] == [1, 1, 2]
    swarm.draw(_Choices([1, 1]))  # every kind it may leave out: nothing is left out instead
    assert not swarm.left_out


def test_the_exploration_keeps_its_concurrent_groups_out_of_swarm_testing(monkeypatch):
    from conformance.engine.stateful import Explorer

    monkeypatch.setattr(steering, "CHOICES", SteeringChoices(swarm=True))
    spec = load_spec(SPEC)
    explorer = Explorer(spec, spec.default_parameters(), concurrent=True)
    assert any(kind.startswith("concurrent ") for kind in explorer.swarm.labels)
    assert explorer.swarm.kinds and not any(kind.startswith("concurrent ") for kind in explorer.swarm.kinds)


def _model_with_two_jobs():
    spec = load_spec(SPEC)
    model = Model(spec, spec.default_parameters())
    model.reset()
    for job, call in (("j1", "c1"), ("j2", "c2")):
        started = model.predict("start_job", {"thread_id": "t1", "tool_call_id": call, "tool_name": "x", "job_id": job})
        assert started.ok, started.error
    model.predict("cancel_job", {"thread_id": "t1", "job_id": "j2", "requested_by": "user"})
    return model


def test_the_rarest_record_is_the_one_whose_latest_transition_the_run_took_least():
    model = _model_with_two_jobs()
    steering = Steering(SteeringChoices(rare_keys=True))
    steering.begin_example(model.coverage)  # j1: running (entered twice); j2: cancel requested once
    assert steering.rarest(["j1", "j2"], model) == "j2"
    steering.transitions = {"running -request_cancel-> pending_cancel": 50}
    assert steering.rarest(["j1", "j2"], model) == "j1"
    assert 0 < RARE_PICK < 256


def test_the_snapshot_is_frozen_at_the_first_failure():
    model = _model_with_two_jobs()
    steering = Steering(SteeringChoices(target=True))
    steering.begin_example(model.coverage)
    before = dict(steering.transitions)
    steering.freeze()
    model.predict("cancel_job", {"thread_id": "t1", "job_id": "j1", "requested_by": "user"})
    steering.begin_example(model.coverage)
    assert steering.transitions == before
    assert steering.score(model.coverage) > 0  # j1's pair is new to the frozen snapshot


class _Sequential(ReferenceAdapter):
    """The reference declaring no concurrency: what the exploration generates
    then does not depend on thread scheduling."""

    def describe(self):
        identity = super().describe()
        return {**identity, "capabilities": {**(identity.get("capabilities") or {}), "concurrent": False}}


def _explore_the_sequential_reference(seed: int) -> dict:
    """The quick exploration alone of ``_Sequential`` at ``seed``: its report's stateful entry."""
    config = RunConfig(
        spec_path=SPEC,
        adapter_factory=_Sequential,
        adapter_label="sequential reference",
        profile="quick",
        seed=seed,
        scenarios=False,
        report_dir=None,
        example_db="none",
    )
    return run_conformance(config)["stateful"]


@pytest.mark.parametrize("steered", [False, True], ids=["default", "every-steering-choice-on"])
def test_the_same_seed_gives_the_same_exploration(monkeypatch, steered):
    if steered:
        monkeypatch.setattr(steering, "CHOICES", SteeringChoices(swarm=True, rare_keys=True, target=True))
    runs = []
    for _ in range(2):
        stateful = _explore_the_sequential_reference(seed=3)
        coverage = stateful["coverage"]
        runs.append((stateful["steps"], stateful["examples"], coverage["pairs"], coverage["triples"]))
    assert runs[0] == runs[1]


def _task_progress_with_a_running_and_a_pending_task():
    spec = load_spec(str(ROOT / "spec" / "task-progress.yaml"))
    model = Model(spec, spec.default_parameters())
    model.reset()
    ids = ["a00000001", "a00000002"]
    for task_id in ids:
        args = {"kind": "agent", "description": "d", "mode": "async"}
        registered = model.predict("register_task", args, {"result": {"task_id": task_id}})
        assert registered.ok, registered.error
    started = model.predict("start_task", {"task_id": ids[0]})
    assert started.ok, started.error
    return spec, model, ids  # ids[0] runs, ids[1] is pending


def _raw_key(explorer, op: str, pick: int, key: str = "task_id") -> tuple:
    """A raw draw of ``op``'s arguments whose key (``key``) is (roll 60, ``pick``)."""
    _, names, _ = explorer.args_plan(op)
    return tuple((60, pick) if name == key else None for name in names)


@pytest.mark.parametrize("pick, moved", [(0, True), (1, True), (3, False), (7, False)])
def test_a_racing_group_mostly_moves_onto_a_record_every_call_accepts(pick, moved):
    """A completion racing a progress update on a pending task cannot open the
    update's check-then-act window (the completion fails alone): three draws
    in four move the group onto a running task; the fourth keeps the record."""
    from conformance.engine.stateful import Explorer

    spec, model, (running, pending) = _task_progress_with_a_running_and_a_pending_task()
    assert model.would_change("complete_task", {"task_id": running, "result": "r"}, running)
    assert not model.would_change("complete_task", {"task_id": pending, "result": "r"}, pending)  # "not changed"
    assert not model.would_change("complete_task", {"task_id": "a00000009", "result": "r"}, "a00000009")  # no record
    explorer = Explorer(spec, spec.default_parameters(), concurrent=True)
    explorer.model = model
    calls = [
        ("complete_task", {"task_id": pending, "result": "r"}),
        ("update_progress", {"task_id": pending, "input_tokens": 1, "output_tokens": 1, "tool_uses": []}),
    ]
    before = model.snapshot()
    got = explorer.contested(calls, ("task_id",), _raw_key(explorer, "complete_task", pick), "complete_task")
    assert [args["task_id"] for _, args in got] == ([running] * 2 if moved else [pending] * 2)
    assert [op for op, _ in got] == ["complete_task", "update_progress"]
    assert got[0][1]["result"] == "r" and got[1][1]["input_tokens"] == 1  # only the key moves
    # trying the records changed nothing in the model, nor its coverage
    assert model.store.records == before[1].records and model.coverage.counts == before[4].counts

    on_running = [(op, {**args, "task_id": running}) for op, args in calls]
    assert explorer.contested(on_running, ("task_id",), _raw_key(explorer, "complete_task", 0), "complete_task") == (
        on_running
    )
    explorer.model = None  # the benchmark's bare driver: nothing to ask
    assert explorer.contested(calls, ("task_id",), _raw_key(explorer, "complete_task", 0), "complete_task") == calls


@pytest.mark.parametrize("pick", [0, 1, 2])
def test_racing_notifiers_move_onto_a_finished_task_while_others_still_run(pick):
    """Notifiers race to send a finished task's one notification: only a
    terminal, unnotified record opens that window. While other tasks still
    run, the group must still find it (the non-terminal records are tried
    first, then the terminal ones): before, only running tasks were tried,
    and double_notify_race went unfound at a seed whose examples always had
    one running."""
    from conformance.engine.stateful import Explorer

    spec, model, (running, pending) = _task_progress_with_a_running_and_a_pending_task()
    finished = "a00000003"
    registered = model.predict(
        "register_task", {"kind": "agent", "description": "d", "mode": "async"}, {"result": {"task_id": finished}}
    )
    assert registered.ok, registered.error
    for op, args in (("start_task", {"task_id": finished}), ("complete_task", {"task_id": finished, "result": "r"})):
        outcome = model.predict(op, args)
        assert outcome.ok, outcome.error
    assert model.would_change("notify_task", {"task_id": finished}, finished)
    assert not any(model.would_change("notify_task", {"task_id": key}, key) for key in (running, pending))
    explorer = Explorer(spec, spec.default_parameters(), concurrent=True)
    explorer.model = model
    calls = [("notify_task", {"task_id": running})] * 3
    got = explorer.contested(calls, ("task_id",), _raw_key(explorer, "notify_task", pick), "notify_task")
    assert got == [("notify_task", {"task_id": finished})] * 3


def test_a_group_whose_call_names_the_record_in_a_list_moves_with_it():
    """The job tool names its jobs in a list: the group racing its cancel
    against finish_job sets ``cancel`` from the shared job id (the group's
    ``args``). Drawn on a finished job, the group moves onto the running
    one, and the cancel list moves with the finish's job id."""
    from conformance.engine.stateful import Explorer

    spec = load_spec(str(ROOT / "spec" / "async-jobs.yaml"))
    params = spec.default_parameters()
    model = Model(spec, params)
    model.reset()
    for label in ("a", "b"):
        assert model.predict("start_job", {"label": label}).ok
    assert model.predict("finish_job", {"job_id": "bg_2", "outcome": "completed", "text": "t"}).ok
    explorer = Explorer(spec, params, concurrent=True)
    explorer.model = model
    group = next(g for g in spec.exploration.concurrent if g["name"] == "tool_cancel_races_finish")
    drawn = [
        ("finish_job", {"job_id": "bg_2", "outcome": "completed", "text": "t"}),
        ("job_tool", {"wait_ms": 5000}),
    ]
    shared = {"job_id": "bg_2"}
    calls = explorer.with_group_args(group, drawn, shared)
    assert calls[1] == ("job_tool", {"wait_ms": 5000, "cancel": ["bg_2"], "poll": [], "list": False})
    regroup = functools.partial(explorer.with_group_args, group, shared=shared)
    got = explorer.contested(calls, ("job_id",), _raw_key(explorer, "finish_job", 0, "job_id"), "finish_job", regroup)
    assert got == [
        ("finish_job", {"job_id": "bg_1", "outcome": "completed", "text": "t"}),
        ("job_tool", {"wait_ms": 5000, "cancel": ["bg_1"], "poll": [], "list": False}),
    ]


@pytest.mark.parametrize("fresh", [True, False], ids=["fresh-examples", "hypothesiss-mutator"])
def test_every_example_is_drawn_afresh_without_hypothesiss_mutator(monkeypatch, fresh):
    """With ``fresh_examples`` (the default) the exploration's Hypothesis run never
    calls the generation-time mutator, which made six near copies of each new
    example; the mutator is back as it was after the run, for the user's own tests."""
    from hypothesis.internal.conjecture.engine import ConjectureRunner

    calls = []
    mutate = ConjectureRunner.generate_mutations_from

    def spy(self, data):
        calls.append(1)
        return mutate(self, data)

    monkeypatch.setattr(ConjectureRunner, "generate_mutations_from", spy)
    monkeypatch.setattr(steering, "CHOICES", SteeringChoices(fresh_examples=fresh))
    assert _explore_the_sequential_reference(seed=1)["verdict"] == "pass"
    assert ConjectureRunner.generate_mutations_from is spy
    assert bool(calls) is not fresh, calls

"""engine/replay_keys.py: which step lists a reduction may count as one."""

from __future__ import annotations

from conformance.engine.replay_keys import choices_made, replay_key


def _start(chosen: str, **args) -> dict:
    return {"call": "start_job", "args": {"label": "a", **args}, "chosen": [chosen]}


def _cancel(job: str) -> dict:
    return {"call": "cancel_job", "args": {"job_id": job}}


def test_lists_that_differ_only_in_the_names_they_recorded_share_a_key():
    recorded_then = [_start("job-5"), _start("job-6"), _cancel("job-6"), {"advance_ms": 10}]
    recorded_now = [_start("job-1"), _start("job-2"), _cancel("job-2"), {"advance_ms": 10}]
    assert replay_key(recorded_then) is not None
    assert replay_key(recorded_then) == replay_key(recorded_now)


def test_a_mention_of_another_record_or_a_name_as_written_gives_another_key():
    base = [_start("job-1"), _start("job-2"), _cancel("job-2")]
    other_record = [_start("job-1"), _start("job-2"), _cancel("job-1")]
    as_written = [_start("job-1"), _start("job-2"), _cancel("job-7")]  # no step chose job-7: sent as written
    keys = {replay_key(base), replay_key(other_record), replay_key(as_written)}
    assert len(keys) == 3


def test_arguments_clock_moves_and_explicit_ids_count():
    base = [_start("job-1"), {"advance_ms": 10}]
    assert replay_key(base) != replay_key([_start("job-1"), {"advance_ms": 11}])
    assert replay_key(base) != replay_key([_start("job-1", stop_ms=3), {"advance_ms": 10}])
    # An explicit id is sent as written: two different ones are two different calls.
    assert replay_key([_start("k1", id="k1")]) != replay_key([_start("k2", id="k2")])


def test_no_key_where_the_steps_alone_cannot_tell():
    race = [_start("job-1"), {"concurrently": [{"call": "cancel_job", "args": {"job_id": "job-1"}}] * 2}]
    assert replay_key(race) is None  # a race may replay another way
    assert replay_key([_start("job-1"), _start("job-1")]) is None  # one name recorded twice


def test_a_replay_that_chose_fewer_names_than_recorded_cannot_stand_for_its_key():
    steps = [_start("job-1"), _cancel("job-1")]
    assert choices_made(steps, [{"call": "start_job", "args": {}, "chosen": ["job-3"]}, _cancel("job-3")])
    assert not choices_made(steps, [{"call": "start_job", "args": {}}, _cancel("job-1")])  # the start was refused
    assert choices_made(steps, [{"call": "start_job", "args": {}, "chosen": ["job-1"]}])  # ended early

"""Divergence messages that point at the bug (issue 10, item 3): a list of
records that differs in which records it holds says so first, with counts and
keys, not the first field that happens to differ once the items shifted; every
value in a message is JSON."""

from __future__ import annotations

from conformance.engine.compare import compare
from statemachines import Prediction, first_difference


def _jobs(*ids, text=None):
    return [{"job_id": i, "status": "completed", "error_text": text} for i in ids]


def test_a_list_one_record_short_says_how_many_and_which_one_is_missing():
    expected = Prediction(result={"jobs": _jobs("bg-1", "bg-2", "bg-3")})
    observed = {"result": {"jobs": _jobs("bg-1", "bg-3")}}
    path, exp, obs, reason = compare(expected, observed, key="job_id")
    assert path == "result.jobs"  # the list, whatever index the first shifted field had
    assert reason.startswith('expected 3 item(s), got 2; missing job_id "bg-2"'), reason
    assert "first difference at result.jobs[1].job_id" in reason
    assert [j["job_id"] for j in exp] == ["bg-1", "bg-2", "bg-3"] and [j["job_id"] for j in obs] == ["bg-1", "bg-3"]


def test_a_list_keeping_the_wrong_record_names_both():
    expected = Prediction(result={"jobs": _jobs("bg-2", "bg-3")})
    observed = {"result": {"jobs": _jobs("bg-1", "bg-2")}}
    path, _, _, reason = compare(expected, observed, key="job_id")
    assert path == "result.jobs"
    assert reason.startswith(
        '2 item(s) as expected, but not the same ones; missing job_id "bg-3"; unexpected job_id "bg-1"'
    ), reason


def test_the_right_records_in_the_wrong_order_say_both_orders():
    expected = Prediction(result={"jobs": _jobs("a", "b")})
    observed = {"result": {"jobs": _jobs("b", "a")}}
    path, _, _, reason = compare(expected, observed, key="job_id")
    assert path == "result.jobs"
    assert reason.startswith('the right job_ids in the wrong order: expected ["a", "b"], got ["b", "a"]'), reason


def test_a_list_with_repeated_items_one_short_is_one_short_not_out_of_order():
    # five activities of one tool where four came back: a count, not an order
    expected = Prediction(result={"task_id": "a1", "recent_activities": ["Bash"] * 5})
    observed = {"result": {"task_id": "a1", "recent_activities": ["Bash"] * 4}}
    path, _, _, reason = compare(expected, observed, key="task_id")
    assert path == "result.recent_activities"
    assert reason.startswith('expected 5 item(s), got 4; missing item "Bash"'), reason
    assert "wrong order" not in reason


def test_a_field_of_the_same_records_is_still_reported_at_its_own_path():
    expected = Prediction(result={"jobs": _jobs("a", "b")})
    observed = {"result": {"jobs": _jobs("a") + _jobs("b", text="boom")}}
    path, _, _, reason = compare(expected, observed, key="job_id")
    assert path == "result.jobs[1].error_text" and reason == 'expected null, got "boom"'


def test_values_of_the_wrong_kind_are_named_in_json_terms():
    assert first_difference({"job": {}}, {"job": None}, "result").reason == "expected an object, got null"
    assert first_difference([1], True, "result").reason == "expected a list, got a boolean true"
    assert first_difference({"a": 1}, "x", "result").reason == 'expected an object, got a string "x"'


def test_a_record_differing_in_several_fields_names_them_all_under_the_first_path():
    """The headline's path stays the first differing key in sorted order (the
    failure's signature), but a wrong status beside a wrong text is named too:
    the text alone pointed the reader at the wrong code."""
    expected = Prediction(result={"job": {"job_id": "a", "result_text": "done", "status": "completed", "n": 1}})
    observed = {"result": {"job": {"job_id": "a", "result_text": None, "status": "running", "n": 2}}}
    path, exp, obs, reason = compare(expected, observed, key="job_id", siblings=True)
    assert (path, exp, obs) == ("result.job.n", 1, 2)
    assert reason == (
        'expected 1, got 2; also result.job.result_text: expected "done", got null; '
        'result.job.status: expected "completed", got "running"'
    ), reason
    assert compare(expected, observed, key="job_id")[3] == "expected 1, got 2"  # the race check's compare is bare


def test_an_accepted_sibling_difference_is_not_named():
    expected = Prediction(result={"job": {"result_text": "done", "status": "completed"}})
    observed = {"result": {"job": {"result_text": "other", "status": "running"}}}

    def accept(path, _expected, _observed):
        return path == "result.job.status"

    path, _, _, reason = compare(expected, observed, accept=accept, siblings=True)
    assert path == "result.job.result_text" and "status" not in reason, reason


def _failed(job_id, attempt):
    return {"effect": "delivery_failed", "job_id": job_id, "attempt": attempt}


def test_an_effect_list_one_short_writes_out_the_missing_effect():
    # five refused deliveries expected, four made: which one is missing, not five names against four
    expected = Prediction(result={}, effects=[_failed("bg_1", 1), _failed("bg_2", 1), _failed("bg_1", 2)])
    observed = {"result": {}, "effects": [_failed("bg_1", 1), _failed("bg_1", 2)]}
    path, exp, obs, reason = compare(expected, observed)
    # an effect more or less is news about the list: the failure is at the list, with both whole lists
    assert (path, exp, obs) == ("effects", expected.effects, observed["effects"])
    assert reason == (
        'expected 3 effect(s), got 2; missing delivery_failed(job_id="bg_2", attempt=1); by position: expected 1, got 2'
    ), reason


def test_effect_lists_of_other_lengths_share_one_path_wherever_they_part():
    # the same extra effect, first or last: one failure's signature, not two
    extra = {"effect": "message_injected", "job_id": "j2", "text": "x"}
    one = {"effect": "message_injected", "job_id": "j1", "text": "y"}
    first = compare(Prediction(result={}, effects=[one]), {"result": {}, "effects": [extra, one]})
    last = compare(Prediction(result={}, effects=[one]), {"result": {}, "effects": [one, extra]})
    assert first[0] == last[0] == "effects", (first, last)
    assert first[3].startswith('expected 1 effect(s), got 2; unexpected message_injected(job_id="j2"'), first[3]
    # the same length: the first differing field stays the path
    same = compare(Prediction(result={}, effects=[one]), {"result": {}, "effects": [extra]})
    assert same[0] == "effects[0].job_id", same


def test_an_accepted_effect_list_length_accepts_the_answer():
    extra = {"effect": "message_injected", "job_id": "j2", "text": "x"}
    answer = {"result": {}, "effects": [extra]}
    assert compare(Prediction(result={}, effects=[]), answer, accept=lambda path, *_: path == "effects") is None
    # a result that differs is still found before the effects
    assert (
        compare(Prediction(result={"n": 1}, effects=[]), answer, accept=lambda path, *_: path == "effects")[0]
        == "result.n"
    )


def test_effects_of_other_kinds_are_written_out_as_missing_and_unexpected():
    expected = Prediction(result={}, effects=[_failed("bg_1", 1)])
    observed = {"result": {}, "effects": [{"effect": "delivered", "job_id": "bg_1", "text": "x" * 60}]}
    _, _, _, reason = compare(expected, observed)
    assert reason.startswith(
        'expected effects ["delivery_failed"], got ["delivered"]; missing delivery_failed(job_id="bg_1", attempt=1); '
        'unexpected delivered(job_id="bg_1", text="' + "x" * 38 + "…)"  # a long value cut to 40 characters
    ), reason


def test_the_right_effects_in_the_wrong_order_are_written_out_in_both_orders():
    first, second = _failed("bg_1", 1), _failed("bg_2", 1)
    _, _, _, reason = compare(
        Prediction(result={}, effects=[first, second]), {"result": {}, "effects": [second, first]}
    )
    assert reason == (
        'expected "bg_1", got "bg_2"; the right effects in the wrong order: '
        'expected delivery_failed(job_id="bg_1", attempt=1), delivery_failed(job_id="bg_2", attempt=1), '
        'got delivery_failed(job_id="bg_2", attempt=1), delivery_failed(job_id="bg_1", attempt=1)'
    ), reason


def test_effects_differing_in_one_field_only_keep_the_plain_reason():
    _, _, _, reason = compare(
        Prediction(result={}, effects=[_failed("bg_1", 1)]), {"result": {}, "effects": [_failed("bg_1", 2)]}
    )
    assert reason == "expected 1, got 2"


def test_effects_expected_where_none_came_are_written_out():
    # no effect at all against two: the multiset difference must not need hashable effects
    expected = Prediction(result={}, effects=[_failed("bg_1", 1), _failed("bg_2", 1)])
    _, _, _, reason = compare(expected, {"result": {}, "effects": []})
    assert reason.startswith(
        'expected 2 effect(s), got 0; missing delivery_failed(job_id="bg_1", attempt=1), '
        'delivery_failed(job_id="bg_2", attempt=1)'
    ), reason
    _, _, _, reason = compare(Prediction(result={}, effects=[]), {"result": {}, "effects": [_failed("bg_1", 1)]})
    assert reason.startswith('expected 0 effect(s), got 1; unexpected delivery_failed(job_id="bg_1", attempt=1)'), (
        reason
    )

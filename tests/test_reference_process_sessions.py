"""The reference process-sessions runtime, checked on concrete call
sequences through call() and set_clock(): OpenClaw's reading (the defaults)
and Codex CLI's (profile codex), and the OpenClaw bug its mutant reproduces."""

from __future__ import annotations

import pytest
from reference_calls import err, ok

from lifecycle_references.process_sessions import ReferenceAdapter
from lifecycle_references.process_sessions.mutants import MUTANTS

__all__: list[str] = []


def start(a, session_id, background=True, **extra):
    return ok(a, "start_exec", session_id=session_id, background=background, notify_on_exit=False, **extra)


def test_cleanup_times_are_clamped_and_expire_at_their_instant():
    a = ReferenceAdapter()
    a.reset(10)
    start(a, "p1", cleanup_ms=1)
    start(a, "p2", cleanup_ms=99_000_000)
    ok(a, "end_process", session_id="p1", outcome="completed")
    ok(a, "end_process", session_id="p2", outcome="completed")
    assert ok(a, "get_session", session_id="p1")[0]["session"]["expires_at"] == 10 + 60_000
    assert ok(a, "get_session", session_id="p2")[0]["session"]["expires_at"] == 10 + 10_800_000
    assert a.set_clock(60_009) == []
    assert ok(a, "is_taken", session_id="p1")[0]["taken"] is True
    a.set_clock(60_010)
    assert ok(a, "is_taken", session_id="p1")[0]["taken"] is False


def test_a_terminal_poll_carries_what_the_staged_delivery_left_behind():
    for factory, expected in ((ReferenceAdapter, "bye"), (MUTANTS["terminal_poll_drops_later_output"].factory, "")):
        a = factory()
        ok(a, "start_exec", session_id="p1", background=True, notify_on_exit=True)
        ok(a, "write_output", session_id="p1", text="hi")
        assert ok(a, "poll", session_id="p1", scope="s1")[0]["output"] == "hi"
        ok(a, "write_output", session_id="p1", text="bye")
        ok(a, "end_process", session_id="p1", outcome="completed")
        assert ok(a, "poll", session_id="p1", scope="s1")[0]["output"] == expected
        assert ok(a, "commit_scope", scope="s1")[1] == [{"effect": "exit_notice_withdrawn", "session_id": "p1"}]


def test_a_removed_running_session_keeps_its_id_until_it_ends():
    a = ReferenceAdapter()
    start(a, "p1")
    assert ok(a, "remove", session_id="p1") == (
        {"session_id": "p1", "was_running": True},
        [{"effect": "termination_requested", "session_id": "p1"}],
    )
    assert err(a, "start_exec", session_id="p1", background=True, notify_on_exit=False)[0] == "id_taken"
    ok(a, "end_process", session_id="p1", outcome="killed")
    assert ok(a, "list_sessions")[0]["sessions"] == []
    start(a, "p1")


@pytest.fixture
def codex():
    return ReferenceAdapter(profile="codex")


def test_codex_prunes_an_ended_session_first_and_spares_the_recently_used(codex):
    for i in range(64):
        start(codex, f"k{i}")
    ok(codex, "end_process", session_id="k1", outcome="completed")
    assert start(codex, "n1")[1] == []  # the ended k1 goes, not the older, running k0
    assert ok(codex, "is_taken", session_id="k1")[0]["taken"] is False
    ok(codex, "end_process", session_id="n1", outcome="completed")  # ended, but among the 8 most recent
    assert start(codex, "n2")[1] == [{"effect": "termination_requested", "session_id": "k0"}]
    assert ok(codex, "is_taken", session_id="n1")[0]["taken"] is True


def test_codex_keeps_an_ended_session_until_a_poll_reports_it(codex):
    start(codex, "p1")
    ok(codex, "write_output", session_id="p1", text="x")
    ok(codex, "end_process", session_id="p1", outcome="failed")
    codex.set_clock(50_000_000)
    assert ok(codex, "poll", session_id="p1", scope="s2")[0] == {
        "session_id": "p1",
        "status": "failed",
        "output": "x",
        "exit_code": 1,
    }
    assert err(codex, "get_session", session_id="p1")[0] == "not_found"


def test_a_bad_parameter_is_refused():
    with pytest.raises(ValueError, match="retention must be"):
        ReferenceAdapter(retention="forever")
    with pytest.raises(ValueError, match="staged_polls must be a boolean"):
        ReferenceAdapter(staged_polls="maybe")
    assert ReferenceAdapter(staged_polls="false").describe()["parameters"] == {"staged_polls": False}

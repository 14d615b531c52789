"""Counterexamples that replay in another process: each value the
implementation chose is bound to the step that chose it (``save:`` and
``${name}``, engine/bindings.py), so a replay against an implementation
whose ids differ per process (random, UUID-like, time-based, a counter that
survives reset: tests/fixtures/random_ids.py) fails while the bug is there
and passes once it is fixed; a replay that does not reach the failure's
state says so (verdict not-reproducing, exit 3), never PASS; and a failure
can be kept as a scenario (``replay --to-scenario``, ``run --scenarios-file``)."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import sys
from pathlib import Path

import pytest
import yaml
from cli_result import kit

from conformance.engine.bindings import bind_steps, bound_steps

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
IN_PROCESS = ("--adapter", "random_ids:Program")


def _replays(output: str) -> list[str]:
    """The replay commands a run printed, as printed."""
    return re.findall(r"^\s*replay: (conformance replay .+?)\s*$", output, re.M)


def _explore(cwd: Path, *adapter: str):
    return kit(
        "run", "task-progress", *adapter, "--no-scenarios", "--workers", "1", "--max-failures", "1",
        cwd=cwd, pythonpath=FIXTURES,
    )  # fmt: skip


def _paste(line: str, cwd: Path, monkeypatch, *, fixed: bool):
    """A printed command run as printed, against the program with or without its fix."""
    if fixed:
        monkeypatch.setenv("RANDOM_IDS_FIXED", "1")
    else:
        monkeypatch.delenv("RANDOM_IDS_FIXED", raising=False)
    return kit(*shlex.split(line)[1:], cwd=cwd, pythonpath=FIXTURES)


def _check_printed_replays(cwd: Path, monkeypatch, *adapter: str) -> list[str]:
    monkeypatch.delenv("RANDOM_IDS_FIXED", raising=False)
    found = _explore(cwd, *adapter)
    assert found.returncode == 1, found.stdout + found.stderr
    replays = _replays(found.stdout)
    assert replays, found.stdout
    written = (cwd / "reports" / "counterexample-stateful.yaml").read_text()
    assert "save:" in written and "${task_id_1}" in written, written
    for line in replays:
        still = _paste(line, cwd, monkeypatch, fixed=False)
        assert still.returncode == 1 and "Verdict: FAIL" in still.stdout, (line, still.stdout + still.stderr)
        fixed = _paste(line, cwd, monkeypatch, fixed=True)
        assert fixed.returncode == 0 and "Verdict: PASS" in fixed.stdout, (line, fixed.stdout + fixed.stderr)
    return replays


def test_printed_replays_fail_on_the_buggy_program_and_pass_on_the_fixed_one(tmp_path, monkeypatch):
    _check_printed_replays(tmp_path, monkeypatch, *IN_PROCESS, "--adapter-opt", "ids=random")


@pytest.mark.slow
@pytest.mark.parametrize("ids", ["uuid", "time", "counter"])
def test_printed_replays_hold_for_every_kind_of_id(ids, tmp_path, monkeypatch):
    _check_printed_replays(tmp_path, monkeypatch, *IN_PROCESS, "--adapter-opt", f"ids={ids}")


@pytest.mark.slow
@pytest.mark.parametrize("ids", ["random", "uuid", "time", "counter"])
def test_printed_replays_hold_over_stdio(ids, tmp_path, monkeypatch):
    program = f"{shlex.quote(sys.executable)} {shlex.quote(str(FIXTURES / 'random_ids.py'))} {ids}"
    _check_printed_replays(tmp_path, monkeypatch, "--adapter-cmd", program)


def _recorded(tmp_path: Path, monkeypatch) -> Path:
    """A counterexample the exploration of the buggy program wrote."""
    monkeypatch.delenv("RANDOM_IDS_FIXED", raising=False)
    found = _explore(tmp_path, *IN_PROCESS, "--adapter-opt", "ids=uuid")
    assert found.returncode == 1, found.stdout + found.stderr
    return tmp_path / "reports" / "counterexample-stateful.yaml"


def _as_an_older_kit_wrote_it(path: Path) -> dict:
    """The file with the recorded values written out (no bindings), as before."""
    data = yaml.safe_load(path.read_text())
    values: dict[str, str] = {}
    report = yaml.safe_load((path.parent / "report.json").read_text())
    trace = report["stateful"]["failure"]["steps"]
    for step, recorded in zip(data["steps"], [s for s in trace if "operation" in s or "advance_ms" in s]):
        for name, where in (step.pop("save", None) or {}).items():
            node = recorded["observed"]
            for part in where.split("."):
                node = node[int(part)] if part.isdigit() else node[part]
            values[name] = node
    text = yaml.safe_dump(data, sort_keys=False)
    for name, value in values.items():
        text = text.replace("${" + name + "}", value)
    return yaml.safe_load(text)


def test_a_replay_that_does_not_reach_the_failures_state_is_not_a_pass(tmp_path, monkeypatch):
    recorded = _recorded(tmp_path, monkeypatch)
    literal = _as_an_older_kit_wrote_it(recorded)
    assert "${" not in yaml.safe_dump(literal) and any("answered" in s for s in literal["steps"])
    (tmp_path / "literal.yaml").write_text(yaml.safe_dump(literal, sort_keys=False))
    for fixed in (False, True):
        replayed = _paste(
            "conformance replay task-progress literal.yaml --adapter random_ids:Program --adapter-opt ids=uuid",
            tmp_path,
            monkeypatch,
            fixed=fixed,
        )
        out = replayed.stdout
        assert replayed.returncode == 3, out + replayed.stderr
        assert "Verdict: NOT-REPRODUCING  (exit code 3" in out
        assert re.search(r"the replay did not reach the failure's state: step 2 \(\w+ at literal.yaml:\d+\) "
                         r"answered error not_found where the recording had a result", out), out  # fmt: skip


def test_a_file_without_bindings_or_answer_kinds_still_replays(tmp_path, monkeypatch):
    """A file an older kit wrote names the recorded values and no answer
    kinds: it loads and replays as before (here against ids that are the
    same in every process)."""
    monkeypatch.delenv("RANDOM_IDS_FIXED", raising=False)
    found = _explore(tmp_path, *IN_PROCESS, "--adapter-opt", "ids=seeded")
    assert found.returncode == 1, found.stdout + found.stderr
    older = _as_an_older_kit_wrote_it(tmp_path / "reports" / "counterexample-stateful.yaml")
    for step in older["steps"]:
        step.pop("answered", None)
    (tmp_path / "older.yaml").write_text(yaml.safe_dump(older, sort_keys=False))
    line = "conformance replay task-progress older.yaml --adapter random_ids:Program --adapter-opt ids=seeded"
    again = _paste(line, tmp_path, monkeypatch, fixed=False)
    assert again.returncode == 1 and "Verdict: FAIL" in again.stdout, again.stdout + again.stderr
    fixed = _paste(line, tmp_path, monkeypatch, fixed=True)
    assert fixed.returncode == 0 and "Verdict: PASS" in fixed.stdout, fixed.stdout + fixed.stderr


def test_a_kept_failure_fails_on_the_buggy_program_and_passes_on_the_fixed_one(tmp_path, monkeypatch):
    recorded = _recorded(tmp_path, monkeypatch)
    shutil.copy(recorded, tmp_path / "found.yaml")
    kept = _paste(
        "conformance replay task-progress found.yaml --adapter random_ids:Program --adapter-opt ids=uuid "
        "--to-scenario kept.scenarios.yaml --scenario-id KEEP1",
        tmp_path,
        monkeypatch,
        fixed=False,
    )
    assert kept.returncode == 1 and "wrote scenario KEEP1 to kept.scenarios.yaml" in kept.stdout, kept.stdout
    scenario = yaml.safe_load((tmp_path / "kept.scenarios.yaml").read_text())["scenarios"][0]
    assert scenario["id"] == "KEEP1" and scenario["steps"][0]["save"] == {"task_id_1": "result.task_id"}
    assert "params.kill_pending == false" in scenario["assumes"]
    run = "conformance run task-progress --scenarios-file kept.scenarios.yaml --scenario KEEP1 " + " ".join(
        IN_PROCESS + ("--adapter-opt", "ids=counter")
    )
    buggy = _paste(run, tmp_path, monkeypatch, fixed=False)
    assert buggy.returncode == 1 and "KEEP1" in buggy.stdout, buggy.stdout + buggy.stderr
    assert "--scenarios-file kept.scenarios.yaml" in buggy.stdout  # the replay command names the file
    fixed = _paste(run, tmp_path, monkeypatch, fixed=True)
    assert fixed.returncode == 0 and "1 passed" in fixed.stdout, fixed.stdout + fixed.stderr


def test_a_scenario_file_naming_a_spec_scenario_is_refused_with_where(tmp_path):
    (tmp_path / "mine.yaml").write_text(
        "scenarios:\n- id: N1\n  title: mine\n  category: nominal\n  steps:\n  - call: evict\n    args: {}\n"
    )
    refused = kit("run", "task-progress", "--scenarios-file", "mine.yaml", "--no-stateful", cwd=tmp_path)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert re.search(r"mine.yaml:2.*scenario id 'N1' is the spec's already", refused.stdout + refused.stderr)


def test_bindings_name_each_chosen_value_and_its_near_misses():
    trace = [
        {
            "index": 0,
            "operation": "register_task",
            "args": {"kind": "agent"},
            "observed": {"result": {"task_id": "a1b2c3d4e"}, "effects": []},
            "chosen": ["a1b2c3d4e"],
        },
        {"index": 1, "advance_ms": 5},
        {
            "index": 2,
            "operation": "get_task",
            "args": {"task_id": "a1b2c3d4"},  # the id less its last character
            "observed": {"error": {"kind": "not_found", "message": "no"}},
        },
        {
            "index": 3,
            "operation": "queue_message",
            "args": {"task_id": "a1b2c3d4e", "message": "./a1b2c3d4e", "other": "A1B2C3D4E"},
            "observed": {"result": {"queued": 1}},
        },
    ]
    steps = bound_steps(trace)
    assert steps[0] == {
        "call": "register_task",
        "args": {"kind": "agent"},
        "save": {"task_id_1": "result.task_id"},
        "answered": "result",
    }
    assert steps[1] == {"advance_ms": 5}
    assert steps[2]["args"] == {"task_id": {"$expr": "task_id_1.substring(0, size(task_id_1) - 1)"}}
    assert steps[2]["answered"] == {"error": "not_found"}
    assert steps[3] == {  # the failing call: no answer kind recorded
        "call": "queue_message",
        "args": {"task_id": "${task_id_1}", "message": "./${task_id_1}", "other": {"$expr": "task_id_1.upperAscii()"}},
    }


def test_a_value_the_caller_gave_is_not_bound_and_a_group_saves_each_calls_own():
    steps = [
        {"call": "start", "args": {"job_id": "mine"}, "chosen": ["mine"]},
        {
            "concurrently": [
                {"call": "start", "args": {}, "chosen": ["job-7"]},
                {"call": "start", "args": {}, "chosen": ["job-8"]},
            ]
        },
        {"call": "cancel", "args": {"job_id": "job-8", "other": "mine"}},
    ]
    answers = [
        {"result": {"job_id": "mine"}},
        [{"result": {"job": {"job_id": "job-7"}}}, {"effects": [{"effect": "started", "job_id": "job-8"}]}],
        {"result": {}},
    ]
    out = bind_steps(steps, answers)
    assert "save" not in out[0]  # the caller named it: the same in every replay
    assert [c.get("save") for c in out[1]["concurrently"]] == [
        {"job_id_1": "result.job.job_id"},
        {"job_id_2": "effects.0.job_id"},
    ]
    assert all("answered" not in c for c in out[1]["concurrently"])  # a race may answer either way
    assert out[2]["args"] == {"job_id": "${job_id_2}", "other": "mine"}


def test_a_traces_scenario_binds_what_the_recorded_system_chose(tmp_path, monkeypatch):
    """check-trace --to-scenario goes through the same bindings: the id the
    recorded system chose is saved from its answer and named after it, so the
    scenario reaches its last step against a program whose ids differ."""
    from conformance.traces import TraceWriter

    trace = tmp_path / "recorded.jsonl"
    task = "s0cysbsvr"
    with TraceWriter(trace, "task-progress", "1.0.8", implementation={"name": "my-runtime"}) as writer:
        writer.call(
            "register_task",
            {"kind": "main_session", "mode": "async", "description": ""},
            result={"task_id": task, "status": "pending", "is_backgrounded": True},
            effects=[],
            at_ms=0,
        )
        writer.call("start_task", {"task_id": task}, result={"task_id": task, "status": "running"}, effects=[], at_ms=0)
        writer.call(
            "fail_task",
            {"task_id": task, "error": ""},
            result={"task_id": task, "status": "failed", "changed": True},
            effects=[{"effect": "notification", "task_id": task, "status": "failed"}],
            at_ms=0,
        )
        writer.call(
            "set_retain",
            {"task_id": task, "retain": True},
            result={"task_id": task, "retain": True, "evict_after": None},
            effects=[],
            at_ms=0,
        )
        writer.call("evict", {}, result={"evicted": [task]}, effects=[], at_ms=0)
    checked = kit(
        "check-trace", "task-progress", str(trace), "--to-scenario", "from-trace.yaml", "--scenario-id", "T9",
        cwd=tmp_path,
    )  # fmt: skip
    assert checked.returncode == 1 and "wrote scenario T9" in checked.stdout, checked.stdout + checked.stderr
    steps = yaml.safe_load((tmp_path / "from-trace.yaml").read_text())["scenarios"][0]["steps"]
    assert steps[0]["save"] == {"task_id_1": "result.task_id"}
    assert "task_id" not in steps[0]["expect"]["result"]  # chosen there: not the same in another run
    assert steps[1]["args"] == {"task_id": "${task_id_1}"}
    assert steps[2]["expect"]["effects"] == [{"effect": "notification", "task_id": "${task_id_1}", "status": "failed"}]
    assert steps[-1]["expect"]["result"] == {"evicted": ["${task_id_1}"]}  # what the trace observed, bound
    run = "conformance run task-progress --scenarios-file from-trace.yaml --scenario T9 --no-stateful "
    run += " ".join(IN_PROCESS + ("--adapter-opt", "ids=random"))
    for fixed, kind in ((False, "divergence"), (True, "expectation")):  # the last step: the author reviews it
        ran = _paste(run, tmp_path, monkeypatch, fixed=fixed)
        assert ran.returncode == 1, ran.stdout + ran.stderr
        failure = json.loads((tmp_path / "reports" / "report.json").read_text())["scenarios"][0]["failure"]
        assert failure["kind"] == kind and failure["step"] == 4, failure


@pytest.mark.slow
def test_the_pytest_front_door_prints_replays_that_hold(pytester, monkeypatch):
    monkeypatch.delenv("RANDOM_IDS_FIXED", raising=False)
    pytester.makepyprojecttoml("[tool.pytest.ini_options]\n")
    shutil.copy(FIXTURES / "random_ids.py", pytester.path / "random_ids.py")
    pytester.makepyfile(
        test_tasks="""
        from conformance.pytest_plugin import conformance_suite
        test_tp = conformance_suite("task-progress", adapter="random_ids:Program", adapter_options={"ids": "uuid"})
    """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-k", "stateful", timeout=600)
    result.assert_outcomes(failed=1)
    replays = _replays(result.stdout.str())
    assert replays and all("conformance-reports/test_tp/stateful/counterexample-" in r for r in replays), replays
    for line in replays:
        assert _paste(line, pytester.path, monkeypatch, fixed=False).returncode == 1, line
        assert _paste(line, pytester.path, monkeypatch, fixed=True).returncode == 0, line


@pytest.mark.slow
def test_workers_and_merged_shards_print_replays_that_hold(tmp_path, monkeypatch):
    monkeypatch.delenv("RANDOM_IDS_FIXED", raising=False)
    adapter = IN_PROCESS + ("--adapter-opt", "ids=time")
    common = ("run", "task-progress", *adapter, "--no-scenarios", "--max-failures", "1")
    workers = kit(*common, "--workers", "2", "--report-dir", "w", cwd=tmp_path, pythonpath=FIXTURES)
    for index in (1, 2):
        kit(*common, "--shard", f"{index}/2", "--report-dir", f"s{index}", cwd=tmp_path, pythonpath=FIXTURES)
    merged = kit("merge-reports", "m", "s1", "s2", cwd=tmp_path)
    for printed in (workers, merged):
        assert printed.returncode == 1, printed.stdout + printed.stderr
        replays = _replays(printed.stdout)
        assert replays, printed.stdout
        for line in replays:
            assert _paste(line, tmp_path, monkeypatch, fixed=False).returncode == 1, line
            assert _paste(line, tmp_path, monkeypatch, fixed=True).returncode == 0, line


def test_a_recorded_error_answered_as_a_result_is_not_reproducing_either(tmp_path):
    (tmp_path / "hand.yaml").write_text(
        "steps:\n"
        "- call: register_task\n"
        "  args: {kind: agent, mode: async, description: ''}\n"
        "  save: {t: result.task_id}\n"
        "  answered: result\n"
        "- call: get_task\n"
        "  args: {task_id: '${t}'}\n"
        "  answered: {error: not_found}\n"
        "- call: evict\n"
        "  args: {}\n"
    )
    replayed = kit("replay", "task-progress", "hand.yaml", cwd=tmp_path)
    assert replayed.returncode == 3, replayed.stdout + replayed.stderr
    assert "step 2 (get_task at hand.yaml:6) answered a result where the recording had error not_found" in (
        replayed.stdout.replace("\n", " ")
    ), replayed.stdout
    report = json.loads((tmp_path / "replay" / "report.json").read_text())
    assert report["verdict"] == "not-reproducing" and report["scenarios"][0]["failure"]["kind"] == "not-reproducing"


def test_a_racing_replay_is_not_reproducing_only_when_no_run_reaches_the_recorded_state(tmp_path):
    start = "  - {call: register_task, args: {kind: agent, mode: async, description: ''}}\n"
    racing = "requires: [concurrent]\nsteps:\n- concurrently:\n" + start + start
    (tmp_path / "never.yaml").write_text(racing + "- call: evict\n  args: {}\n  answered: {error: not_found}\n")
    never = kit("replay", "task-progress", "never.yaml", cwd=tmp_path)
    assert never.returncode == 3, never.stdout + never.stderr
    assert "in none of its 20 runs did its races reach the recorded state" in never.stdout.replace("\n", " ")
    (tmp_path / "always.yaml").write_text(racing + "- call: evict\n  args: {}\n  answered: result\n")
    assert kit("replay", "task-progress", "always.yaml", cwd=tmp_path).returncode == 0

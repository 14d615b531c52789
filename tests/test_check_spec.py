"""`conformance check-spec` (issue 37): each bundled spec's declared scope is
explored completely with no violation; spec mutants (one rule changed by a
textual edit) are caught with a shortest path of the expected length;
symmetric states count once; what is never reached is reported; exit codes."""

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from conformance.cli import cli
from conformance.engine.loaded_specs import load_spec_once
from statemachines import Model, load_spec
from statemachines.tools.check import canonical_form, check_spec, scenario_yaml, scope_of

ROOT = Path(__file__).resolve().parent.parent
SPECS = sorted(p for p in (ROOT / "spec").glob("*.yaml") if ".scenarios." not in p.name)
THREAD_JOBS = ROOT / "spec" / "thread-jobs.yaml"

# name -> (text in spec/thread-jobs.yaml, its replacement, invariant broken, shortest path length)
MUTANTS = {
    # a finish that forgets its completion time: start, finish
    "finish_forgets_completion_time": (
        "fields: {completed_at: now, completion_seq: cseq}",
        'fields: {completed_at: "null", completion_seq: cseq}',
        "terminal_has_completion_time",
        2,
    ),
    # a retention that keeps one job too many: two starts in one thread, two finishes
    "retention_keeps_one_too_many": (
        "limit: params.retention_limit\n",
        "limit: params.retention_limit + 1\n",
        "retention_bound",
        4,
    ),
    # a turn boundary that injects running jobs too: start, boundary
    "injects_running_jobs": (
        "states: terminal\n          where: \"!job.terminal_message_emitted\"",
        "where: \"!job.terminal_message_emitted\"",
        "emitted_only_when_terminal",
        2,
    ),
    # a tool runtime's outcome ignored once a cancel is pending: start, cancel
    "pending_cancel_never_finishes": (
        'when: "!(job.status in terminal_states)"',
        "when: \"job.status == 'running'\"",
        None,
        2,
    ),
}


def _mutant(tmp_path: Path, name: str) -> Path:
    """A copy of thread-jobs (with the files it includes) with one rule changed."""
    old, new, _, _ = MUTANTS[name]
    text = THREAD_JOBS.read_text(encoding="utf-8")
    assert text.count(old) == 1, f"{name}: the edit must match once"
    for other in ("thread-jobs.scenarios.yaml", "lifecycle-spec.schema.json", "lifecycle-spec-fragment.schema.json"):
        shutil.copy(ROOT / "spec" / other, tmp_path / other)
    target = tmp_path / "thread-jobs.yaml"
    target.write_text(text.replace(old, new), encoding="utf-8")
    return target


@pytest.mark.slow
@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.stem)
def test_bundled_scope_explored_completely_without_violation(path):
    spec = load_spec(str(path))
    assert "check" in spec.raw, f"{path.name} declares no check.scope"
    report = check_spec(spec)
    assert not report.problems
    assert report.stats.complete and report.stats.stopped is None
    assert report.violations == [], [f.to_dict() for f in report.violations]
    assert report.stats.states > 100


@pytest.mark.parametrize("name", ["finish_forgets_completion_time", "injects_running_jobs"])
def test_mutant_caught_with_its_shortest_path(tmp_path, name):
    _, _, invariant, length = MUTANTS[name]
    spec = load_spec(str(_mutant(tmp_path, name)))
    assert not check_spec(spec, {"max_depth": length - 1}).violations  # nothing shorter
    report = check_spec(spec, {"max_depth": length})
    broken = [f for f in report.violations if f.kind == "invariant"]
    assert [f.subject for f in broken] == [invariant]
    finding = broken[0]
    assert len(finding.path) == length
    assert finding.path[0].operation == "start_job"
    assert finding.where and finding.where.endswith(f":{_line_of(spec.path, f'id: {invariant}')}")
    text = scenario_yaml(spec, report.scope, finding)
    assert '"save": {"v1": "result.job_id"}' in text  # the generated job id is saved from the response
    if name == "finish_forgets_completion_time":
        assert '"job_id": "${v1}"' in text  # ... and used by the next call


@pytest.mark.slow
def test_retention_mutant_caught_within_the_declared_scope(tmp_path):
    _, _, invariant, length = MUTANTS["retention_keeps_one_too_many"]
    report = check_spec(load_spec(str(_mutant(tmp_path, "retention_keeps_one_too_many"))))
    broken = {f.subject: f for f in report.violations}
    assert invariant in broken
    assert len(broken[invariant].path) == length


@pytest.mark.slow
def test_a_record_that_cannot_finish_is_stuck(tmp_path):
    spec = load_spec(str(_mutant(tmp_path, "pending_cancel_never_finishes")))
    report = check_spec(spec)
    stuck = [f for f in report.violations if f.kind == "stuck"]
    assert [f.subject for f in stuck] == ["pending_cancel"]
    assert [step.operation for step in stuck[0].path] == ["start_job", "cancel_job"]
    assert len(stuck[0].path) == MUTANTS["pending_cancel_never_finishes"][3]
    assert stuck[0].where.endswith(f":{_line_of(spec.path, 'pending_cancel: {description')}")


def _line_of(path: str, text: str) -> int:
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


def test_symmetric_states_count_once():
    spec = load_spec(str(THREAD_JOBS))
    scope, _ = scope_of(spec)
    models = []
    for thread, call, job in (("t1", "c1", "j1"), ("t2", "c2", "j1"), ("t1", "c1", "j2")):
        model = Model(spec, scope.parameters)
        model.reset(0)
        model.predict("start_job", {"thread_id": thread, "tool_call_id": call, "tool_name": "search", "job_id": job})
        models.append(canonical_form(model, scope)[0])
    assert models[0] == models[1]  # another thread and tool call: the same state
    assert models[0] != models[2]  # another explicit job id is another state
    # One step from the start: 2 threads x 2 tool calls give 8 starts (a
    # generated id or the explicit j1), 4 synchronous completions and 2 busy
    # threads; with threads and tool calls merged: 2, 1 and 1 (and restart
    # goes back to the start).
    assert (len(scope.pools["thread_id"]), len(scope.pools["tool_call_id"])) == (2, 2)
    one_step = check_spec(spec, {"max_depth": 1})
    assert one_step.stats.states == 1 + 2 + 1 + 1


def test_states_never_reached_in_a_shallow_scope():
    spec = load_spec(str(THREAD_JOBS))
    report = check_spec(spec, {"max_depth": 1})
    unreached = {f.subject: f for f in report.unreached if f.kind == "unreached-state"}
    assert {"completed", "pending_cancel"} <= set(unreached)
    assert unreached["completed"].where.endswith(f":{_line_of(spec.path, 'completed: {terminal: true}')}")
    assert report.stats.complete and not report.stats.closed


def test_cli_exit_codes_and_json(tmp_path):
    runner = CliRunner()
    clean = runner.invoke(cli, ["check-spec", str(THREAD_JOBS), "--depth", "2"])
    assert clean.exit_code == 0, clean.output
    assert "complete within depth 2" in clean.output
    mutant = str(_mutant(tmp_path, "finish_forgets_completion_time"))
    found = runner.invoke(cli, ["check-spec", mutant, "--depth", "2"])
    assert found.exit_code == 1, found.output
    assert "error[invariant] terminal_has_completion_time" in found.output
    assert "- id: check-invariant-terminal_has_completion_time" in found.output
    as_json = runner.invoke(cli, ["check-spec", mutant, "--depth", "2", "--json"])
    data = json.loads(as_json.output)
    assert as_json.exit_code == 1
    assert data[0]["violations"][0]["path"][0]["call"] == "start_job"
    assert data[0]["complete"] is True
    broken = tmp_path / "broken.yaml"
    broken.write_text("format: lifecycle-spec/1\nid: broken\n", encoding="utf-8")
    assert runner.invoke(cli, ["check-spec", str(broken)]).exit_code == 2
    bad_param = runner.invoke(cli, ["check-spec", str(THREAD_JOBS), "--param", "no_such=1"])
    assert bad_param.exit_code == 2 and "unknown parameter no_such" in bad_param.output
    usage = runner.invoke(cli, ["check-spec", str(THREAD_JOBS), "--param", "novalue"])
    assert usage.exit_code == 2


def test_param_override_and_bounds():
    spec = load_spec(str(THREAD_JOBS))
    report = check_spec(spec, {"parameters": {"retention_limit": 3}, "max_depth": 3, "max_states": 20})
    assert report.scope.parameters["retention_limit"] == 3
    assert report.stats.stopped == "max_states 20"
    assert not report.stats.complete
    assert report.to_dict()["stopped"] == "max_states 20"


def test_a_fragment_is_checked_through_the_spec_including_it(tmp_path):
    mutant = _mutant(tmp_path, "finish_forgets_completion_time")
    fragment = mutant.parent / "thread-jobs.scenarios.yaml"
    result = CliRunner().invoke(cli, ["check-spec", str(fragment), str(mutant), "--depth", "2", "--json"])
    data = json.loads(result.output)
    assert result.exit_code == 1
    assert [Path(item["path"]).name for item in data] == ["thread-jobs.yaml"]


def test_a_result_breaking_its_schema_and_a_bad_scope(tmp_path):
    target = _mutant(tmp_path, "finish_forgets_completion_time")
    text = target.read_text(encoding="utf-8").replace(
        "'job_id': job_id, 'status': 'running'}", "'job_id': job_id, 'status': 'runing'}"
    )
    target.write_text(text, encoding="utf-8")
    spec = load_spec(str(target))
    report = check_spec(spec, {"max_depth": 1})
    (finding,) = [f for f in report.violations if f.kind == "result-schema"]
    assert finding.subject == "start_job" and "'running' was expected" in finding.message
    assert len(finding.path) == 1 and finding.where.endswith(f":{_line_of(spec.path, '  start_job:')}")
    bad = check_spec(spec, {"parameters": {"retention_limit": 0}})
    assert bad.problems and "retention_limit" in bad.problems[0]


def test_scope_names_checked():
    spec = load_spec(str(THREAD_JOBS))
    spec.raw["check"] = {"scope": {"args": {"start_job": {"colour": ["red"]}, "nope": {"x": [1]}}}}
    _, problems = scope_of(spec)
    assert problems == ["check.scope names no argument colour of start_job", "check.scope names no operation: nope"]


# -- shipped spec mutants (check.mutants) ------------------------------------------
def _shipped_mutants():
    from statemachines.tools.spec_mutants import load_spec_mutants

    for path in SPECS:
        spec = load_spec_once(str(path))
        for mutant in load_spec_mutants(spec):
            yield pytest.param(spec, mutant, id=f"{path.stem}:{mutant.name}")


SHIPPED = list(_shipped_mutants())


def test_at_least_eight_spec_mutants_ship_in_the_package():
    assert len(SHIPPED) >= 8
    setup = (ROOT / "setup.py").read_text(encoding="utf-8")
    assert '"mutants/*.yaml"' in setup  # the wheel carries them
    names = [param.values[1].name for param in SHIPPED]
    assert len(names) == len(set(names))


@pytest.mark.slow
@pytest.mark.parametrize(("spec", "mutant"), SHIPPED)
def test_each_shipped_mutant_is_caught_by_its_declared_shortest_path(spec, mutant):
    from statemachines.tools.spec_mutants import mutated_spec

    report = check_spec(mutated_spec(spec, mutant))
    assert report.stats.complete and not report.problems
    expected = [f for f in report.violations if f.kind == mutant.kind and f.subject in (mutant.subject, None)]
    assert expected, f"{mutant.name} is missed: {[f.to_dict() for f in report.violations]}"
    assert len(expected[0].path) == mutant.shortest


def _spec_copy(tmp_path: Path, mutants_text: str) -> Path:
    for other in ("thread-jobs.scenarios.yaml", "lifecycle-spec.schema.json", "lifecycle-spec-fragment.schema.json"):
        shutil.copy(ROOT / "spec" / other, tmp_path / other)
    (tmp_path / "mutants").mkdir()
    (tmp_path / "mutants" / "thread-jobs.yaml").write_text(mutants_text, encoding="utf-8")
    target = tmp_path / "thread-jobs.yaml"
    shutil.copy(THREAD_JOBS, target)
    return target


def test_a_missed_mutant_and_a_stale_one_fail_the_run(tmp_path):
    target = _spec_copy(
        tmp_path,
        "mutants:\n"
        "  - name: harmless\n"
        "    description: A summary reworded; nothing can catch it.\n"
        "    caught_by: {kind: invariant}\n"
        "    shortest: 1\n"
        "    edits:\n"
        "      - {at: /operations/restart/summary, was: 'The process restarts; job tracking lived in memory only.', becomes: x}\n",
    )
    runner = CliRunner()
    missed = runner.invoke(cli, ["check-spec", str(target), "--mutants", "--depth", "1"])
    assert missed.exit_code == 1, missed.output
    assert "missed" in missed.output and "0 of 1 spec mutant(s) caught as declared" in missed.output
    stale = (tmp_path / "mutants" / "thread-jobs.yaml").read_text(encoding="utf-8").replace("memory only.", "memory.")
    (tmp_path / "mutants" / "thread-jobs.yaml").write_text(stale, encoding="utf-8")
    result = runner.invoke(cli, ["check-spec", str(target), "--mutants", "--depth", "1", "--json"])
    assert result.exit_code == 2
    (outcome,) = json.loads(result.output)[0]["mutants"]
    assert "thread-jobs.yaml:7: edit at /operations/restart/summary" in outcome["problems"][0]
    assert "update the mutant" in outcome["problems"][0]
    (tmp_path / "mutants" / "thread-jobs.yaml").write_text("mutants:\n  - name: Bad Name\n", encoding="utf-8")
    broken = runner.invoke(cli, ["check-spec", str(target), "--mutants", "--depth", "1"])
    assert broken.exit_code == 2 and "thread-jobs.yaml:2" in broken.output


def test_limit_edges_the_scope_never_tries_are_reported():
    spec = load_spec(str(THREAD_JOBS))
    reached = check_spec(spec, {"max_depth": 2})
    assert not [f for f in reached.unreached if f.kind == "unreached-limit"]  # the scope's payloads take every edge
    report = check_spec(spec, {"max_depth": 2, "parameters": {"max_bytes": 10}})
    edges = {f.subject: f for f in report.unreached if f.kind == "unreached-limit"}
    assert set(edges) == {"payload_bytes.below", "payload_bytes.at", "payload_bytes.above"}
    assert edges["payload_bytes.at"].message == (
        "limit payload_bytes is never tried at its value: no observe_outcome.payload 10 bytes in the scope"
    )
    assert edges["payload_bytes.at"].where.endswith(f":{_line_of(spec.path, '- name: payload_bytes')}")
    # a payload for an unknown job is refused: it does not reach the edge
    refused_only = check_spec(spec, {"max_depth": 1})
    assert {"payload_lines.at", "payload_bytes.at"} <= {f.subject for f in refused_only.unreached}


def test_a_mutants_file_is_checked_through_its_spec_with_its_mutants():
    mutants = ROOT / "spec" / "mutants" / "async-command.yaml"
    result = CliRunner().invoke(cli, ["check-spec", str(mutants), "--depth", "1", "--json"])
    assert result.exit_code == 0, result.output
    [checked] = json.loads(result.output)
    assert Path(checked["path"]).name == "async-command.yaml"
    assert [(m["name"], m["shortest_found"]) for m in checked["mutants"]] == [("end_ignores_the_timeout", 1)]


def test_a_mutant_missed_by_a_shallower_search_says_why():
    from statemachines.tools.spec_mutants import run_spec_mutants

    outcomes = {o.mutant.name: o for o in run_spec_mutants(load_spec(str(THREAD_JOBS)), {"max_depth": 1})}
    assert outcomes["start_answers_a_misspelt_status"].as_declared  # one step: caught even so
    retention = outcomes["retention_keeps_one_too_many"]
    assert not retention.caught and retention.why_missed == "the scope searched to depth 1; showing it needs depth 4"
    stuck = outcomes["pending_cancel_never_finishes"]  # a stuck record needs twice its path
    assert stuck.why_missed == "the scope searched to depth 1; showing it needs depth 4"
    assert stuck.to_dict()["why_missed"] == stuck.why_missed


def test_an_invariant_that_spends_the_cost_budget_stops_the_search(tmp_path):
    # Each evaluation of it takes up to the budget's CPU time: a search that met it in every
    # state took minutes (and a run's coverage report, which searches the spec, as long).
    twenty = "[" + ",".join(str(i) for i in range(20)) + "]"
    runaway = "size(jobs) >= 0"
    for var in "abcdef":
        runaway = f"{twenty}.all({var}, {runaway} && {var} >= 0)"
    text = THREAD_JOBS.read_text(encoding="utf-8")
    old = '    check: "jobs.filter(j, j.status in terminal_states).size() <= params.retention_limit"'
    assert text.count(old) == 1
    for other in ("thread-jobs.scenarios.yaml", "lifecycle-spec.schema.json", "lifecycle-spec-fragment.schema.json"):
        shutil.copy(ROOT / "spec" / other, tmp_path / other)
    target = tmp_path / "thread-jobs.yaml"
    target.write_text(text.replace(old, f"    check: {json.dumps(runaway)}"), encoding="utf-8")
    spec = load_spec(str(target))
    where = f"{target}:{_line_of(str(target), twenty + '.all(f,')}"

    report = check_spec(spec)
    assert report.stats.stopped == f"{where} spent the cost budget of one evaluation", report.stats.stopped
    assert not report.stats.complete
    errors = [f for f in report.violations if f.kind == "step-error"]
    assert len(errors) == 1 and "cost budget" in errors[0].message, errors
    assert report.stats.states <= 5, report.stats  # stopped at the first state that evaluated it

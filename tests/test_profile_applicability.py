"""What a profile makes impossible is not applicable (issue #35): coverage items
the model cannot reach under the declared parameters are not counted by
--min-coverage and are listed with why; and both front doors (the CLI's
runner, the pytest plugin) decide a scenario's applicability the same way,
applicability before capabilities."""

import copy
import functools
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from conformance.cli import cli
from conformance.engine.applicability import not_applicable_items, run_bound
from conformance.engine.coverage import coverage_categories
from conformance.engine.loaded_specs import load_spec_once
from conformance.engine.scenarios import NOT_APPLICABLE, not_applicable_ids, run_scenario
from conformance.reporting import validate_report
from lifecycle_references.async_jobs import ReferenceAdapter
from statemachines import compile_spec, load_spec, load_spec_data, resolve_parameters
from statemachines.tools.reach import Bound, unreachable_items

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parent.parent
SPECS = sorted(p for p in (ROOT / "spec").glob("*.yaml") if not p.name.endswith(".scenarios.yaml"))
LIMIT = "start_job: limit_reached"


def params_of(spec, profile: str | None) -> dict:
    values, problems = resolve_parameters(spec, profile)
    assert problems == []
    return values


@pytest.fixture(scope="module")
def async_jobs():
    return load_spec(str(ROOT / "spec" / "async-jobs.yaml"))


# -- the model decides ----------------------------------------------------------------------
def test_a_cap_no_test_can_reach_is_not_applicable_with_the_guard_and_bound(async_jobs):
    params = params_of(async_jobs, "task-table")
    found = {u.item: u for u in unreachable_items(async_jobs, params, Bound(5360, "40 steps × 134 calls"))}
    assert found[LIMIT].category == "error-kinds"
    reason = found[LIMIT].reason
    guard = "size(running_now) < params.max_running"
    lines = (ROOT / "spec" / "async-jobs.yaml").read_text(encoding="utf-8").splitlines()
    line = next(n for n, text in enumerate(lines, 1) if f'require: "{guard}"' in text)
    assert f"async-jobs.yaml:{line}:" in reason and guard in reason  # the guard, where the spec says it
    assert "at most 5360 record(s) (40 steps × 134 calls)" in reason and "1000000" in reason


def test_a_reachable_cap_counts(async_jobs):
    items = unreachable_items(async_jobs, params_of(async_jobs, "job-manager"), Bound(5360, "bound"))
    assert LIMIT not in {u.item for u in items}  # max_running 15: a test reaches it


def test_an_unknown_bound_never_excuses_a_count(async_jobs):
    params = params_of(async_jobs, "task-table")
    assert LIMIT not in {u.item for u in unreachable_items(async_jobs, params, None)}
    assert LIMIT not in {u.item for u in unreachable_items(async_jobs, params, Bound(None, "unknown"))}


@pytest.mark.parametrize(("most", "applies"), [(99, False), (100, True), (101, True)])
def test_the_count_rule_is_exact_at_the_edge(async_jobs, most, applies):
    # size(running_now) < 100 fails only once 100 jobs run: a run creating 99 at most never sees it
    params = {**params_of(async_jobs, "task-table"), "max_running": 100}
    items = {u.item for u in unreachable_items(async_jobs, params, Bound(most, "bound"))}
    assert (LIMIT not in items) is applies


def test_a_guard_on_parameters_alone_rules_an_error_out():
    spec = load_spec(str(ROOT / "spec" / "thread-jobs.yaml"))
    item = "start_job: job_exists_for_tool_call"
    psi = {u.item: u.reason for u in unreachable_items(spec, params_of(spec, "psi-runtime"))}
    lines = (ROOT / "spec" / "thread-jobs.yaml").read_text(encoding="utf-8").splitlines()
    guard = next(
        n for n, line in enumerate(lines, 1) if "params.second_start_error != 'job_exists_for_tool_call'" in line
    )
    assert "second_start_error = \"tool_call_resolved\"" in psi[item] and f"thread-jobs.yaml:{guard}" in psi[item]
    assert item not in {u.item for u in unreachable_items(spec, params_of(spec, "allium-spec"))}


@functools.cache
def _async_jobs_data():
    return load_spec_data(ROOT / "spec" / "async-jobs.yaml")


def _variant(start_job_require: str, extra_steps: list | None = None):
    """async-jobs with start_job's guard replaced (and steps appended to start_job)."""
    path = ROOT / "spec" / "async-jobs.yaml"
    data, smap = _async_jobs_data()
    data = copy.deepcopy(data)
    data.pop("include", None)  # its scenarios: not needed here, and slow to compile
    data.pop("scenarios", None)
    steps = data["operations"]["start_job"]["steps"]
    assert "require" in steps[1]
    steps[1] = {**steps[1], "require": start_job_require}
    if extra_steps:
        steps[-1:-1] = extra_steps
        data["lifecycle"]["transitions"].append({"trigger": "abandon", "source": "running", "dest": "cancelled"})
    return compile_spec(data, smap, str(path))


@pytest.mark.parametrize(
    ("guard", "ruled_out"),
    [
        ("size(running_now) < params.max_running || params.id_prefix == 'other'", True),
        ("params.id_prefix == 'bg-' || size(running_now) < 1", True),  # either side that always holds
        ("size(running_now) < params.max_running && params.job_types == false", True),
        ("size(running_now) < params.max_running && size(running_now) < 3", False),  # both sides must hold
        ("(params.max_running > size(running_now))", True),
        ("params.max_running >= size(running_now) + 1", False),  # not the size alone: undecided
        ("size(running_now) <= params.max_running - 1", True),
        ("size(running_now) < params.max_running ? true : false", False),  # a conditional: undecided
        ("size(running_now) < params.max_running || size(running_now) > 0 ? true : false", False),
        ("size(terminal_states) < params.max_running", False),  # not a collect
    ],
)
def test_guard_rules(guard, ruled_out):
    spec = _variant(guard)
    params = params_of(spec, "task-table")
    items = {u.item for u in unreachable_items(spec, params, Bound(5360, "bound"))}
    assert (LIMIT in items) is ruled_out


def test_a_trigger_fired_only_in_a_dead_branch_never_fires():
    dead = {"when": "params.surface == 'job_tool'", "do": [{"fire": {"trigger": "abandon", "on": "t"}}]}
    spec = _variant("size(running_now) < params.max_running", [dead])
    task_table = {(u.category, u.item): u.reason for u in unreachable_items(spec, params_of(spec, "task-table"))}
    reason = task_table[("transitions", "running -abandon-> cancelled")]
    assert "params.surface == 'job_tool'" in reason and '"task_table"' in reason
    job_manager = {u.item for u in unreachable_items(spec, params_of(spec, "job-manager"))}
    assert "running -abandon-> cancelled" not in job_manager


def test_the_bound_follows_the_exploration_and_the_scenarios_that_apply(async_jobs):
    params = params_of(async_jobs, "task-table")
    applicable = [s for s in async_jobs.scenarios if s.id not in not_applicable_ids(async_jobs, params, {})]
    explored = run_bound(async_jobs, params, step_count=40, scenarios=applicable)
    assert explored.max_records is not None and 40 <= explored.max_records < 1_000_000
    alone = run_bound(async_jobs, params, step_count=None, scenarios=applicable)
    assert alone.max_records is not None and alone.max_records < explored.max_records
    # JM-E14 repeats max_running - 2 starts: under task-table it does not apply, so it does not count
    everything = run_bound(async_jobs, params, step_count=None, scenarios=list(async_jobs.scenarios))
    assert everything.max_records is not None and everything.max_records >= 999_998


def test_limits_and_races_that_cannot_run_are_listed_with_why(async_jobs):
    params = params_of(async_jobs, "task-table")
    items = {(i.category, i.item): i.reason for i in not_applicable_items(async_jobs, params, True, None)}
    assert "max_running = 1000000" in items[("boundary-classes", "running_cap: every edge")]
    sequential = not_applicable_items(async_jobs, params, False, None)
    races = [i for i in sequential if i.category == "races"]
    assert races and all("concurrent capability" in i.reason for i in races)


def test_categories_leave_out_what_cannot_occur_and_list_it(async_jobs):
    params = params_of(async_jobs, "task-table")
    counts = {"operations": {}, "outcomes": {"finish_job: not_found": 1}}
    cats = coverage_categories(async_jobs, counts, params, True, Bound(5360, "bound"))
    errors = cats["error-kinds"]
    assert (errors["covered"], errors["total"], errors["percent"]) == (1, 1, 100.0)
    assert [e["item"] for e in errors["not_applicable"]] == [LIMIT]
    unbounded = coverage_categories(async_jobs, counts, params, True, None)["error-kinds"]
    assert unbounded["percent"] == 50.0 and unbounded["missed"] == [LIMIT]


# -- the gate, as a user runs it -----------------------------------------------------------------
def run(tmp_path, *args):
    result = CliRunner().invoke(cli, ["run", "async-jobs", "--workers", "1", "--report-dir", str(tmp_path), *args])
    return result, json.loads((tmp_path / "report.json").read_text())


@pytest.mark.parametrize(
    "how",
    [
        ("--no-stateful",),  # the scenarios alone: a bound of their calls
        pytest.param(("--profile", "quick"), marks=pytest.mark.slow),  # with the exploration (about 15 s)
    ],
)
def test_task_table_passes_a_full_error_kinds_gate(tmp_path, how):
    result, report = run(tmp_path, "--adapter-opt", "profile=task-table", *how, "--min-coverage", "error-kinds=100")
    assert result.exit_code == 0, result.output
    assert validate_report(report) == []
    errors = report["coverage"]["categories"]["error-kinds"]
    assert errors["percent"] == 100.0 and errors["missed"] == []
    assert [e["item"] for e in errors["not_applicable"]] == [LIMIT]
    assert report["coverage"]["bound"]["max_records"] < 1_000_000
    assert f"error-kinds: {LIMIT}: never raised" in " ".join(result.output.split())
    summary = (tmp_path / "summary.md").read_text()
    assert "**Not applicable**" in summary and f"`{LIMIT}`" in summary


def test_a_gate_truly_missed_still_fails(tmp_path):
    # under job-manager the cap (15) is reachable: a run that never meets it misses it
    result, report = run(tmp_path, "--no-stateful", "--scenario", "JM-N1", "--min-coverage", "error-kinds=100")
    assert result.exit_code == 1, result.output
    errors = report["coverage"]["categories"]["error-kinds"]
    assert LIMIT in errors["missed"] and errors["not_applicable"] == []
    assert LIMIT in report["coverage"]["failure"]["message"]


# -- scenario applicability: one decision for both front doors ------------------------------------------------
class _WouldRun(Exception):
    pass


class _Session:
    """Enough of a session for run_scenario to decide; running would reset it."""

    def __init__(self, spec, params):
        self.spec, self.params, self.head_start = spec, params, -1

    def reset(self):
        raise _WouldRun


def _runner_verdict(spec, scenario, params, capabilities) -> str:
    try:
        return run_scenario(_Session(spec, params), scenario, capabilities).verdict
    except _WouldRun:
        return "run"


@functools.cache
def _bundled(name: str):
    return load_spec(str(ROOT / "spec" / name))


def _profiles(path: Path) -> list[tuple[str, str | None]]:
    spec = load_spec_once(str(path))
    return [(path.name, None)] + [(path.name, name) for name in spec.profiles]


@pytest.mark.parametrize(("name", "profile"), [case for path in SPECS for case in _profiles(path)])
@pytest.mark.parametrize("concurrent", [True, False])
def test_cli_and_plugin_agree_on_every_bundled_spec_and_profile(name, profile, concurrent):
    spec = _bundled(name)
    params = params_of(spec, profile)
    capabilities = {"concurrent": concurrent}
    plugin = set(not_applicable_ids(spec, params, capabilities))  # no item for these (pytest_plugin)
    verdicts = {s.id: _runner_verdict(spec, s, params, capabilities) for s in spec.scenarios}
    assert {i for i, v in verdicts.items() if v == NOT_APPLICABLE} == plugin
    assert all(v in ("run", "skip", NOT_APPLICABLE) for v in verdicts.values())


class SequentialReference:
    """The async-jobs reference, declaring no concurrency (as a single-threaded adapter would)."""

    def __new__(cls, **options):
        adapter = ReferenceAdapter(**options)
        identity = {**adapter.describe(), "capabilities": {"concurrent": False}}
        adapter.describe = lambda: identity
        return adapter


@pytest.mark.parametrize(
    ("profile", "other", "own"),
    [("task-table", "JM-E14", "TT-E15"), ("oh-my-pi", "TT-E15", "JM-E14"), ("oh-my-pi", "TT-E16", "JM-E14")],
)
def test_a_scenario_of_another_profile_is_never_a_skip_for_a_capability(tmp_path, profile, other, own):
    result, report = run(
        tmp_path,
        "--adapter",
        "test_profile_applicability:SequentialReference",
        "--adapter-opt",
        f"profile={profile}",
        "--no-stateful",
        "--scenario",
        other,
        "--scenario",
        own,
    )
    assert result.exit_code == 0, result.output
    assert [s["id"] for s in report["not_applicable"]["scenarios"]] == [other]
    (entry,) = report["scenarios"]
    assert (entry["id"], entry["verdict"]) == (own, "skip") and "concurrent capability" in entry["note"]


@pytest.mark.slow  # a pytest subprocess that starts the implementation to collect (about 8 s)
def test_the_plugin_makes_no_item_of_a_scenario_of_another_profile(pytester):
    pytester.makepyprojecttoml("[tool.pytest.ini_options]\n")
    pytester.makepyfile(
        sequential="""
        from lifecycle_references.async_jobs import ReferenceAdapter
        def Adapter(**options):
            adapter = ReferenceAdapter(**options)
            identity = {**adapter.describe(), "capabilities": {"concurrent": False}}
            adapter.describe = lambda: identity
            return adapter
    """,
        test_omp="""
        from conformance.pytest_plugin import conformance_suite

        test_aj = conformance_suite("async-jobs", adapter="sequential:Adapter", adapter_options={"profile": "oh-my-pi"})
    """,
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--co", "-q", timeout=300)
    collected = result.stdout.str()
    assert "test_omp.py::test_aj[JM-E14]" in collected  # its own: an item (skipped for the capability)
    assert "test_aj[TT-E15]" not in collected and "test_aj[TT-E16]" not in collected  # the task table's: no item
    assert "not applicable to profile oh-my-pi" in collected and "TT-E15" in collected


def test_merged_shards_judge_applicability_as_one_run(tmp_path):
    parts = []
    for i in (1, 2):
        part = tmp_path / f"part{i}"
        args = ["--adapter-opt", "profile=task-table", "--no-stateful", "--shard", f"{i}/2"]
        run(part, *args, "--min-coverage", "error-kinds=100")
        parts.append(str(part))
    result = CliRunner().invoke(cli, ["merge-reports", str(tmp_path / "merged"), *parts])
    assert result.exit_code == 0, result.output
    merged = json.loads((tmp_path / "merged" / "report.json").read_text())
    errors = merged["coverage"]["categories"]["error-kinds"]
    assert errors["percent"] == 100.0 and [e["item"] for e in errors["not_applicable"]] == [LIMIT]
    assert merged["coverage"]["gates"] == [
        {"category": "error-kinds", "minimum": 100.0, "percent": 100.0, "passed": True}
    ]
    assert validate_report(merged) == []


# -- a transition whose guard the parameters make false (issue 61) ------------------------------------------------
def test_a_guard_on_parameters_that_is_false_rules_its_transition_out():
    spec = _bundled("task-progress.yaml")
    default = {(u.category, u.item): u.reason for u in unreachable_items(spec, params_of(spec, None))}
    reason = default[("transitions", "pending -kill-> killed")]
    lines = (ROOT / "spec" / "task-progress.yaml").read_text(encoding="utf-8").splitlines()
    line = next(n for n, text in enumerate(lines, 1) if "guard: \"params.kill_pending\"" in text)
    assert f"task-progress.yaml:{line}" in reason and "kill_pending = false" in reason
    job_tool = {u.item for u in unreachable_items(spec, params_of(spec, "job-tool"))}
    assert "pending -kill-> killed" not in job_tool  # kill_pending: true


def test_a_transition_the_parameters_rule_out_is_not_counted_and_says_why():
    spec = _bundled("task-progress.yaml")
    params = params_of(spec, None)
    transitions = coverage_categories(spec, {"transitions": {}}, params, True, None)["transitions"]
    assert "pending -kill-> killed" not in transitions["missed"]
    assert [e["item"] for e in transitions["not_applicable"]] == ["pending -kill-> killed"]
    assert transitions["total"] == len(spec.lifecycle.transitions) - 1


def test_pairs_and_triples_the_parameters_rule_out_are_listed_with_why():
    spec = _bundled("thread-jobs.yaml")
    psi = coverage_categories(spec, {}, params_of(spec, "psi-runtime"))["triples"]
    ruled_out = {e["item"]: e["reason"] for e in psi["not_applicable"]}
    triple = "running: start_job -> job_exists_for_tool_call"
    assert triple in ruled_out and 'second_start_error = "tool_call_resolved"' in ruled_out[triple]
    assert triple not in psi["missed"]
    default = coverage_categories(spec, {}, params_of(spec, None))["triples"]
    assert triple in default["missed"] and default["not_applicable"] == []


def test_a_pair_with_a_transition_that_never_happens_is_not_applicable():
    guarded = {"trigger": "pause", "source": "running", "dest": "running", "guard": "params.job_types"}
    path = ROOT / "spec" / "async-jobs.yaml"
    raw, smap = _async_jobs_data()
    raw = copy.deepcopy(raw)
    raw.pop("include", None)
    raw.pop("scenarios", None)
    steps = raw["operations"]["start_job"]["steps"]
    steps[-1:-1] = [{"fire": {"trigger": "pause", "on": "t"}}]
    raw["lifecycle"]["transitions"].append(guarded)
    spec = compile_spec(raw, smap, str(path))
    pairs = coverage_categories(spec, {}, params_of(spec, "task-table"))["transition-pairs"]
    ruled_out = {e["item"]: e["reason"] for e in pairs["not_applicable"]}
    assert "running -pause-> running then running -complete-> completed" in ruled_out
    assert all("running -pause-> running never happens" in why for why in ruled_out.values())
    assert all("job_types = false" in why for why in ruled_out.values())
    assert pairs["total"] == 0 and not any("pause" in p for p in pairs["missed"])
    with_types = coverage_categories(spec, {}, {**params_of(spec, "task-table"), "job_types": True})
    assert with_types["transition-pairs"]["not_applicable"] == []


def test_a_refusal_a_transition_always_prevents_is_not_applicable():
    # under job-tool a pending task can be killed: kill_task never answers not_running on one
    spec = _bundled("task-progress.yaml")
    triple = "pending: kill_task -> not_running"
    job_tool = coverage_categories(spec, {}, params_of(spec, "job-tool"))["triples"]
    ruled_out = {e["item"]: e["reason"] for e in job_tool["not_applicable"]}
    assert "pending -kill-> killed" in ruled_out[triple] and "params.kill_pending` holds" in ruled_out[triple]
    assert triple not in job_tool["missed"]
    default = coverage_categories(spec, {}, params_of(spec, None))["triples"]
    assert triple in default["missed"] and default["not_applicable"] == []  # kill_pending false: it can happen
    reached = coverage_categories(spec, {"triples": {triple: 1}}, params_of(spec, "job-tool"))["triples"]
    assert reached["not_applicable"] == []  # what a run reached is never excused

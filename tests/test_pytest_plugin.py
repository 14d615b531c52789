"""The pytest plugin: a team's suite gets one item per scenario plus the exploration,
declared in Python (by spec name or path) or in pyproject.toml, also under pytest-xdist."""

import json
import shlex
import shutil
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml
from cli_result import kit

from conformance.pytest_plugin import SuiteEntryError, parse_suite_entry, relative_to_rootdir

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parent.parent
# The project under test is a fresh directory; keep pytest's cache out of it.
ARGS = ("-p", "no:cacheprovider")


def _project(pytester, ini: str = "") -> None:
    pytester.makepyprojecttoml("[tool.pytest.ini_options]\n" + ini)


def _run(pytester, *args):
    return pytester.runpytest_subprocess(*ARGS, *args, timeout=600)


def _applicable_thread_jobs_scenarios() -> int:
    """The bundled thread-jobs' scenarios that apply under the defaults (38 today)."""
    from conformance.engine.scenarios import not_applicable_ids
    from conformance.specs import resolve_spec
    from statemachines import load_spec

    spec = load_spec(resolve_spec("thread-jobs"))
    return len(spec.scenarios) - len(not_applicable_ids(spec, spec.default_parameters(), {"concurrent": True}))


@pytest.mark.slow
def test_suite_by_name_reports_items_at_the_users_test_file(pytester):
    _project(pytester)
    pytester.makepyfile(
        test_my_runtime="""
        from conformance.pytest_plugin import conformance_suite

        test_thread_jobs = conformance_suite("thread-jobs", profile="quick")
    """
    )
    result = _run(pytester, "--co", "-q")
    result.stdout.fnmatch_lines(
        [
            "test_my_runtime.py::test_thread_jobs[N1]",
            "test_my_runtime.py::test_thread_jobs[B8]",
            "test_my_runtime.py::test_thread_jobs[stateful]",
            f"{_applicable_thread_jobs_scenarios() + 1} tests collected*",  # and the exploration
        ]
    )
    junit = pytester.path / "junit.xml"
    result = _run(pytester, "-k", "N1 or B7 or E9 or stateful", f"--junitxml={junit}", "-o", "junit_family=xunit1")
    result.assert_outcomes(passed=5)  # N1, N10, B7, E9, stateful
    cases = ET.parse(junit).getroot().iter("testcase")
    # Reported where the suite is declared (line 3 of the user's file), not in the plugin.
    assert {(c.get("file"), c.get("line")) for c in cases} == {("test_my_runtime.py", "2")}


@pytest.mark.slow
def test_spec_path_is_relative_to_the_test_file_then_rootdir(pytester, monkeypatch):
    _project(pytester)
    for where in ("tests/specs", "shared"):
        target = pytester.path / where
        target.mkdir(parents=True)
        for name in ("thread-jobs.yaml", "thread-jobs.scenarios.yaml"):
            shutil.copy(ROOT / "spec" / name, target / name)
    (pytester.path / "tests" / "test_mine.py").write_text(
        "from conformance.pytest_plugin import conformance_suite\n"
        "test_local = conformance_suite('specs/thread-jobs.yaml', stateful=False)\n"
        "test_shared = conformance_suite('shared/thread-jobs.yaml', stateful=False)\n"
    )
    monkeypatch.chdir(pytester.path / "tests")  # `cd tests && pytest`
    result = _run(pytester, "-k", "N1 and not N10")
    result.assert_outcomes(passed=2)
    result.stdout.no_fnmatch_line("*cannot read*")


def test_unreadable_spec_is_one_failing_item_without_traceback(pytester):
    _project(pytester)
    pytester.makepyfile(
        test_bad="""
        from conformance.pytest_plugin import conformance_suite
        test_missing = conformance_suite("no-such-spec")
    """
    )
    result = _run(pytester)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*test_missing[[]spec[]]*", "*no-such-spec*"])
    result.stdout.no_fnmatch_line("*Traceback*")


@pytest.mark.slow
def test_mutant_fails_its_scenario_with_a_readable_failure(pytester):
    _project(pytester)
    pytester.makepyfile(
        mutant_adapter="""
        from lifecycle_references.thread_jobs.mutants import MUTANTS
        def Adapter(**options):
            return MUTANTS["evict_at_limit"].factory(**options)
    """,
        test_my_runtime="""
        from conformance.pytest_plugin import conformance_suite
        test_thread_jobs = conformance_suite("thread-jobs", adapter="mutant_adapter:Adapter")
    """,
    )
    result = _run(pytester, "-k", "B6 or N1", "--conformance-seed", "3")
    result.assert_outcomes(failed=1, passed=2)  # B6 fails; N1 and N10 pass
    result.stdout.fnmatch_lines(["*test_thread_jobs[[]B6[]]*", "*conformance run*--scenario B6*"])
    result.stdout.no_fnmatch_line("*Traceback*")


@pytest.mark.slow
def test_adapter_program_runs_next_to_the_test_file(pytester, monkeypatch):
    _project(pytester)
    shutil.copy(ROOT / "examples/python-stdio/adapter.py", pytester.path / "adapter.py")
    command = shlex.join([sys.executable, "adapter.py"])
    pytester.makepyfile(
        test_stdio=f"""
        from conformance.pytest_plugin import conformance_suite
        test_stdio = conformance_suite("thread-jobs", adapter_cmd={command!r}, stateful=False)
    """
    )
    (pytester.path / "elsewhere").mkdir()
    monkeypatch.chdir(pytester.path / "elsewhere")
    result = _run(pytester, str(pytester.path / "test_stdio.py"), "-k", "N1 or B7")
    result.assert_outcomes(passed=3)


INI_SUITES = """conformance_suites = [
  "thread-jobs profile=quick",
  "async-jobs name=task-table adapter-opt=profile=task-table stateful=no",
  "thread-jobs adaptr=x",
]
"""


@pytest.mark.slow
def test_ini_option_lists_suites_without_python(pytester):
    _project(pytester, INI_SUITES)
    pytester.makepyfile(test_other="def test_plain():\n    pass\n")
    result = _run(pytester, "--co", "-q")
    result.stdout.fnmatch_lines(
        [
            "pyproject.toml::thread-jobs[[]N1[]]",
            "pyproject.toml::thread-jobs[[]stateful[]]",
            "pyproject.toml::task-table[[]TT-N1[]]",
            "pyproject.toml::conformance_suites[[]3[]]",
            "test_other.py::test_plain",
        ]
    )
    result.stdout.no_fnmatch_line("pyproject.toml::task-table[[]stateful[]]")

    result = _run(pytester, "-k", "thread-jobs and N1 or TT-N2 or suites")
    result.assert_outcomes(passed=3, failed=1)  # thread-jobs N1 and N10, task-table N2; the bad entry
    result.stdout.fnmatch_lines(["*conformance_suites entry 3 ('thread-jobs adaptr=x'): unknown key 'adaptr'*"])
    result.stdout.no_fnmatch_line("*Traceback*")

    # Naming a test file runs that file only; naming the config file runs its suites;
    # the marker selects or excludes every conformance item.
    _run(pytester, "test_other.py").assert_outcomes(passed=1)
    result = _run(pytester, "pyproject.toml", "--co", "-q")
    result.stdout.fnmatch_lines(["pyproject.toml::thread-jobs[[]N1[]]"])
    result.stdout.no_fnmatch_line("test_other.py*")
    _run(pytester, "-m", "not conformance").assert_outcomes(passed=1)


@pytest.mark.slow
def test_works_under_xdist(pytester):
    _project(pytester, 'conformance_suites = ["thread-jobs name=ini-suite"]\n')
    pytester.makepyfile(
        test_xdist="""
        from conformance.pytest_plugin import conformance_suite
        test_thread_jobs = conformance_suite("thread-jobs")
    """
    )
    result = _run(pytester, "-n", "2", "-k", "N1 or B7 or stateful")
    result.stdout.fnmatch_lines(["*2 workers*"])
    result.assert_outcomes(passed=8)  # N1, N10, B7, stateful in each of the two suites


@pytest.mark.parametrize(
    "entry, message",
    [
        ("", "must start with a spec"),
        ("adapter=x:Y", "must start with a spec"),
        ("thread-jobs profile=fast", "profile='fast' is not one of"),
        ("thread-jobs seed=x", "seed='x' must be a whole number"),
        ("thread-jobs timeout=0", "must be a positive number"),
        ("thread-jobs stateful=maybe", "must be yes or no"),
        ("thread-jobs adapter-opt=profile", "adapter-opt=KEY=VALUE"),
        ("thread-jobs adapter=a:B adapter-cmd=x", "not both"),
        ("thread-jobs 'adapter-cmd=node a.js", "quote values"),
        ("thread-jobs quick", "is not key=value"),
    ],
)
def test_bad_ini_entries_say_what_to_fix(entry, message):
    with pytest.raises(SuiteEntryError, match=message.replace("(", r"\(").replace("[", r"\[")):
        parse_suite_entry(entry)


def test_ini_entry_settings():
    suite = parse_suite_entry(
        "spec/x.yaml name=mine adapter-cmd='node my adapter.js' adapter-opt=profile=p "
        "adapter-opt=k=v=w profile=deep seed=7 timeout=2.5 stateful=no"
    )
    assert (
        suite.spec,
        suite.name,
        suite.adapter_cmd,
        suite.adapter_options,
        suite.profile,
        suite.seed,
        suite.timeout_s,
        suite.stateful,
    ) == ("spec/x.yaml", "mine", "node my adapter.js", {"profile": "p", "k": "v=w"}, "deep", 7, 2.5, False)


@pytest.mark.slow
def test_ini_option_in_pytest_ini(pytester):
    pytester.makefile(
        ".ini",
        pytest="""
        [pytest]
        conformance_suites =
            thread-jobs name=tj stateful=no
            async-jobs adapter-opt=profile=task-table
    """,
    )
    result = _run(pytester, "--co", "-q")
    result.stdout.fnmatch_lines(
        ["pytest.ini::tj[[]N1[]]", "pytest.ini::async-jobs[[]TT-N1[]]", "pytest.ini::async-jobs[[]stateful[]]"]
    )
    result.stdout.no_fnmatch_line("pytest.ini::tj[[]stateful[]]")


@pytest.mark.slow
def test_skips_point_at_the_suite_with_a_readable_reason(pytester):
    _project(pytester)
    pytester.makepyfile(
        sequential_adapter="""
        from lifecycle_references.thread_jobs import ReferenceAdapter
        class Adapter(ReferenceAdapter):
            def describe(self):
                return {**super().describe(), "capabilities": {"concurrent": False}}
    """,
        test_sequential="""
        from conformance.pytest_plugin import conformance_suite

        test_tj = conformance_suite("thread-jobs", adapter="sequential_adapter:Adapter")
    """,
    )
    result = _run(pytester, "-k", "B4", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["SKIPPED [[]1[]] test_sequential.py:3: *needs the concurrent capability*"])


# A shipped mutant (a finished job can still be cancelled) declaring no concurrency,
# so the exploration from one seed does not depend on thread scheduling.
SEQUENTIAL_MUTANT = """
from lifecycle_references.thread_jobs.mutants import MUTANTS


def Adapter(**options):
    adapter = MUTANTS["cancel_finished_job"].factory(**options)
    identity = adapter.describe()
    identity = {**identity, "capabilities": {**(identity.get("capabilities") or {}), "concurrent": False}}
    adapter.describe = lambda: identity
    return adapter
"""


def _steps(path: Path) -> int:
    return len(yaml.safe_load(path.read_text(encoding="utf-8"))["steps"])


def _replay_lines(output: str) -> list[str]:
    return [line.partition("replay: ")[2] for line in output.splitlines() if line.startswith("replay: ")]


@pytest.mark.slow
def test_mutant_exploration_writes_a_counterexample_the_printed_replay_reproduces(pytester):
    _project(pytester)
    pytester.makepyfile(
        mutant_adapter=SEQUENTIAL_MUTANT,
        test_my_runtime="""
        from conformance.pytest_plugin import conformance_suite
        test_tj = conformance_suite("thread-jobs", adapter="mutant_adapter:Adapter")
    """,
    )
    result = _run(pytester, "-k", "stateful", "-p", "no:logging")
    result.assert_outcomes(failed=1)
    output = result.stdout.str()
    reports = pytester.path / "conformance-reports" / "test_tj" / "stateful"
    counterexample = reports / "counterexample-stateful.yaml"
    assert counterexample.is_file() and (reports / "report.json").is_file() and (reports / "summary.md").is_file()
    assert "reports: conformance-reports/test_tj/stateful/" in output
    replay = _replay_lines(output)[0]
    assert replay == (
        "conformance replay thread-jobs conformance-reports/test_tj/stateful/counterexample-stateful.yaml "
        "--adapter mutant_adapter:Adapter"
    ), output
    failure = output.partition(" FAILURES ")[2]
    assert str(pytester.path) not in failure and "site-packages" not in failure

    # The CLI, same spec, implementation, profile and seed: the plugin's counterexample is no longer.
    cli = kit(
        "run", "thread-jobs", "--adapter", "mutant_adapter:Adapter", "--profile", "quick", "--seed", "1",
        "--no-scenarios", "--report-dir", "cli-reports", cwd=pytester.path,
    )  # fmt: skip
    assert cli.returncode == 1, cli.stdout + cli.stderr
    assert _steps(counterexample) <= _steps(pytester.path / "cli-reports" / "counterexample-stateful.yaml")

    # Pasted as printed, from the rootdir: it reproduces the failure and keeps its inputs.
    replayed = kit(*shlex.split(replay)[1:], cwd=pytester.path)
    assert replayed.returncode == 1, replayed.stdout + replayed.stderr
    assert counterexample.is_file() and (reports / "report.json").is_file()


@pytest.mark.slow
def test_report_dir_option_and_scenario_items_write_reports(pytester):
    _project(pytester, 'conformance_report_dir = "from-ini"\n')
    pytester.makepyfile(
        test_mine="""
        from conformance.pytest_plugin import conformance_suite
        test_tj = conformance_suite("thread-jobs", stateful=False)
    """
    )
    _run(pytester, "-k", "N1 and not N10").assert_outcomes(passed=1)
    report = json.loads((pytester.path / "from-ini" / "test_tj" / "N1" / "report.json").read_text())
    assert report["verdict"] == "pass" and [s["id"] for s in report["scenarios"]] == ["N1"]
    assert report["stateful"] is None and report["spec"]["path"] == "thread-jobs"
    _run(pytester, "-k", "N1 and not N10", "--conformance-report-dir", "elsewhere").assert_outcomes(passed=1)
    assert (pytester.path / "elsewhere" / "test_tj" / "N1" / "junit.xml").is_file()


def test_paths_under_the_rootdir_become_relative(tmp_path):
    text = f"conformance replay {tmp_path}/spec/x.yaml {tmp_path}/r/c.yaml --deviations /elsewhere/d.yaml"
    assert (
        relative_to_rootdir(text, tmp_path) == "conformance replay spec/x.yaml r/c.yaml --deviations /elsewhere/d.yaml"
    )


def test_bundled_specs_are_named_by_name_and_files_by_path(tmp_path):
    from conformance.pytest_plugin import _resolve_spec

    found, named = _resolve_spec("thread-jobs", [tmp_path])
    assert named == "thread-jobs" and Path(found).is_file()
    (tmp_path / "mine.yaml").write_text("format: 1\n")
    assert _resolve_spec("mine.yaml", [tmp_path]) == (str(tmp_path / "mine.yaml"),) * 2


@pytest.mark.slow
def test_an_expired_deviation_fails_every_item(pytester):
    _project(pytester)
    (pytester.path / "deviations.yaml").write_text(
        "deviations: 1\nspec: thread-jobs\nentries:\n"
        "  - id: OLD\n    reason: a text we used to have\n    expires: 2021-05-01\n"
        "    accept:\n      path: error.message\n",
        encoding="utf-8",
    )
    pytester.makepyfile(
        test_mine="""
        from conformance.pytest_plugin import conformance_suite
        test_tj = conformance_suite("thread-jobs", stateful=False, deviations="deviations.yaml")
    """
    )
    result = _run(pytester, "-k", "N1 or B7")
    result.assert_outcomes(failed=3)  # N1, N10, B7: the reference passes them, the file has expired
    result.stdout.fnmatch_lines(
        ["*deviations.yaml:*OLD expired on 2021-05-01*", "*accepted deviations of thread-jobs*"]
    )
    assert str(pytester.path) not in result.stdout.str().partition(" FAILURES ")[2]


def test_commands_of_a_suite_declared_below_the_rootdir_cd_there_first(tmp_path):
    from conformance.pytest_plugin import commands_from_rootdir

    text = (
        f"(the whole exploration re-runs with: conformance run {tmp_path}/spec/x.yaml --adapter-cmd 'node a.js')\n"
        f"replay: conformance replay {tmp_path}/spec/x.yaml {tmp_path}/out/c.yaml --adapter-cmd 'node a.js'"
    )
    assert commands_from_rootdir(text, tmp_path, tmp_path / "tests") == (
        "(the whole exploration re-runs with: cd tests && conformance run ../spec/x.yaml --adapter-cmd 'node a.js')\n"
        "replay: cd tests && conformance replay ../spec/x.yaml ../out/c.yaml --adapter-cmd 'node a.js'"
    )
    assert commands_from_rootdir(text, tmp_path, tmp_path) == relative_to_rootdir(text, tmp_path)

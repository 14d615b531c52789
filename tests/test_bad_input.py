"""Bad input: malformed specs and misbehaving implementations.

The requirement under test:

  A malformed spec (YAML syntax error, schema violation, unknown state, a
  scenario naming an unknown operation, a bad expression, an empty or huge
  file) gets messages naming file, line and what is wrong -- all problems at
  once, no traceback, exit 2. An implementation that raises, hangs
  (per-operation timeout), or returns a result that breaks the operation's
  schema is reported as a failure of that implementation with a clear
  message; the run goes on and the report is still written.

Everything goes through the real command line (``python -m conformance.cli``)
in a subprocess, as a user or a CI job would run it.

Broken specs are made by copying ``spec/thread-jobs.yaml`` and
``spec/thread-jobs.scenarios.yaml`` into a temporary directory and editing the
copy's text; the expected line of each problem is looked up in the edited copy
(the line holding a marker the edit introduced), so the tests keep working when
the real spec gains or loses lines.

Misbehaving implementations live in ``tests/fixtures/bad_adapters.py``; each
wraps the reference implementation and breaks one thing.

Several cases here were found as kit bugs (a line number pointing at the
parent mapping, huge or alias-bomb files read whole, timeouts an
implementation could swallow, an implementation's sys.exit ending the kit...);
each now has a test stating the required behaviour.
"""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import pytest
from cli_result import Result
from fixtures.bad_adapters import HANG_S

from conformance.reporting import validate_report
from statemachines.load.source import MAX_SPEC_BYTES

ROOT = Path(__file__).resolve().parents[1]
SPEC_DIR = ROOT / "spec"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
FIXTURE_SPECS = FIXTURES / "specs"
MAIN = "thread-jobs.yaml"
SCEN = "thread-jobs.scenarios.yaml"
SPEC = "spec/thread-jobs.yaml"  # relative to ROOT, the working directory of every run
ADAPTERS = "tests.fixtures.bad_adapters"


# ----------------------------------------------------------------- helpers
def _env(columns: str | None = "1000") -> dict:
    env = dict(os.environ)
    env.pop("CONFORMANCE_DEBUG", None)  # the kit prints tracebacks only when asked to
    # No PYTHONPATH to the source tree: the kit under test is the installed one;
    # `tests.fixtures...` adapters are found because the kit looks in its working directory.
    # Rich wraps at 80 columns when output is not a terminal unless the kit or
    # COLUMNS says otherwise; a wide console keeps each message on one line so
    # assertions see `file:line: message` whole. (The kit may fix its own width;
    # test_long_paths_are_not_broken_across_lines checks what it does by default.)
    env.pop("COLUMNS", None)
    env.pop("LINES", None)
    if columns is not None:
        env["COLUMNS"] = columns
    return env


def conformance(*args: str, timeout: float = 120, columns: str | None = "1000", preexec_fn=None) -> Result:
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-P", "-m", "conformance.cli", *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=_env(columns),
        timeout=timeout,
        preexec_fn=preexec_fn,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr, time.monotonic() - started)


def flat(text: str) -> str:
    """Text with every run of whitespace (line breaks of a wrapped console too) as one space."""
    return " ".join(text.split())


def assert_clean(result: Result) -> None:
    """No traceback and no 'internal error' of the kit, whatever the outcome."""
    assert "Traceback" not in result.output, result.describe()
    assert "internal error" not in result.output, result.describe()


def broken_spec(tmp_path: Path, *edits: tuple[str, str, str]) -> Path:
    """Copy the thread-jobs spec (and its scenario file) into ``tmp_path`` and
    apply ``(file, regex, replacement)`` edits, each to the first match only.
    Returns the path of the main spec file."""
    for name in (MAIN, SCEN):
        shutil.copy(SPEC_DIR / name, tmp_path / name)
    for name, pattern, replacement in edits:
        path = tmp_path / name
        text = path.read_text(encoding="utf-8")
        new, count = re.subn(pattern, replacement, text, count=1, flags=re.M)
        assert count == 1, f"edit {pattern!r} found nothing in {name}; has the spec changed?"
        path.write_text(new, encoding="utf-8")
    return tmp_path / MAIN


def line_of(path: Path, marker: str) -> int:
    """The 1-based line holding ``marker``, which must occur on exactly one line."""
    hits = [i for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if marker in line]
    assert len(hits) == 1, f"marker {marker!r} is on lines {hits} of {path}"
    return hits[0]


def problem_lines(result: Result) -> list[str]:
    """The `file:line: message` lines of `conformance validate`'s output. The
    kit's console wraps long lines at a fixed width when it is not a terminal;
    a continuation line (one that starts without indentation) is joined back to
    the line it continues."""
    logical: list[str] = []
    for line in result.stderr.splitlines():
        if logical and line and not line[0].isspace() and not line.startswith("✗"):
            logical[-1] = logical[-1].rstrip() + " " + line
        else:
            logical.append(line)
    return [line.strip() for line in logical if line.startswith("  ") and not line.startswith("    hint:")]


def assert_problem(result: Result, file: Path, line: int | None, phrase: str) -> None:
    """Some reported problem names ``file:line`` and contains ``phrase``."""
    where = f"{file}:{line}:" if line is not None else f"{file}:"
    matching = [p for p in problem_lines(result) if p.startswith(where) and phrase in p]
    assert matching, f"no problem at {where} mentioning {phrase!r}\n{result.describe()}"


def load_report(report_dir: Path) -> dict:
    path = report_dir / "report.json"
    assert path.is_file(), f"no report.json in {report_dir}"
    report = json.loads(path.read_text(encoding="utf-8"))
    assert validate_report(report) == [], validate_report(report)
    junit = report_dir / "junit.xml"
    assert junit.is_file(), f"no junit.xml in {report_dir}"
    ET.parse(junit)  # well-formed
    return report


def scenario(report: dict, sid: str) -> dict:
    return next(s for s in report["scenarios"] if s["id"] == sid)


def run_adapter(tmp_path: Path, adapter: str, *args: str, timeout: float = 120) -> tuple[Result, Path]:
    report_dir = tmp_path / "reports"
    target = adapter if ":" in adapter or "." in adapter or "-" in adapter else f"{ADAPTERS}:{adapter}"
    result = conformance(
        "run", SPEC, "--adapter", target, "--profile", "quick", "--report-dir", report_dir, *args, timeout=timeout
    )
    return result, report_dir


def only(*ids: str) -> list[str]:
    return ["--no-stateful", *[a for sid in ids for a in ("--scenario", sid)]]


def _limit_memory(megabytes: int):
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (megabytes << 20, megabytes << 20))

    return apply


@pytest.fixture
def tmp():
    """A temporary directory with a short path. Problem lines carry absolute
    paths, and the kit wraps its output at a fixed width when it is not a
    terminal; pytest's tmp_path alone can be long enough to push a message onto
    two lines (test_long_paths_are_not_broken_across_lines covers that)."""
    path = Path(tempfile.mkdtemp(prefix="bad-input-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


# =========================================================== broken specs
@dataclass
class Case:
    """One broken variant of the thread-jobs spec."""

    id: str
    edits: tuple
    file: str  # the file the problem must be reported in
    marker: str  # text on the line the problem must be reported at (in the edited file)
    phrase: str  # part of the message saying what is wrong


CASES = [
    Case("yaml-syntax-error", ((MAIN, r"^title: ", "title: broken: "),), MAIN, "title: broken:", "YAML syntax error"),
    Case(
        "yaml-syntax-error-in-included-file",
        ((SCEN, r"^    title: ", "    title: broken: "),),
        SCEN,
        "title: broken:",
        "YAML syntax error",
    ),
    Case(
        "schema-wrong-type",
        ((MAIN, r"^version: .*$", "version: [1, 0, 0]"),),
        MAIN,
        "version: [1, 0, 0]",
        "is not of type 'string'",
    ),
    Case(
        "schema-unknown-key-in-transition",
        ((MAIN, r"(dest: pending_cancel)\}", r"\1, colour: red}"),),
        MAIN,
        "colour: red",
        "'colour' was unexpected",
    ),
    Case(
        "schema-wrong-type-in-included-file",
        ((SCEN, r"^    title: .*$", "    title: [not, a, string]"),),
        SCEN,
        "title: [not, a, string]",
        "is not of type 'string'",
    ),
    Case(
        "transition-unknown-state",
        ((MAIN, r"dest: pending_cancel\}", "dest: pending_cancell}"),),
        MAIN,
        "pending_cancell",
        "unknown state 'pending_cancell'",
    ),
    Case(
        "scenario-unknown-operation",
        ((SCEN, r"- call: complete_sync$", "- call: complete_synk"),),
        SCEN,
        "complete_synk",
        "unknown operation 'complete_synk'",
    ),
    Case(
        "scenario-unknown-argument",
        ((SCEN, r"(- call: complete_sync\n\s+args: \{)", r"\1colour: red, "),),
        SCEN,
        "colour: red",
        "operation complete_sync has no argument 'colour'",
    ),
    Case(
        "guard-cel-syntax-error",
        ((MAIN, r"guard: \"args\.outcome == 'completed'\"", "guard: \"args.outcome == 'completed' &&\""),),
        MAIN,
        "'completed' &&",
        "invalid CEL expression",
    ),
    Case(
        "guard-unknown-variable",
        ((MAIN, r"guard: \"args\.outcome == 'failed'\"", "guard: \"argz.outcome == 'failed'\""),),
        MAIN,
        "argz.outcome",
        "unknown name(s): argz",
    ),
    Case(
        "scenario-expression-unknown-variable",
        ((SCEN, r"\{\$expr: \"params\.", "{$expr: \"parms."),),
        SCEN,
        "parms.",
        "unknown name(s): parms",
    ),
    Case(
        "scenario-expression-syntax-error",
        ((SCEN, r"\{\$expr: \"params\.(\w+)\"\}", r'{$expr: "params.\1 +"}'),),
        SCEN,
        " +\"}",
        "invalid CEL expression",
    ),
    Case("scenario-undefined-saved-value", ((SCEN, r"\$\{gen\}", "${gne}"),), SCEN, "${gne}", "${gne} is not defined"),
    Case(
        "fire-unknown-trigger",
        ((MAIN, r"fire: \{trigger: finish,", "fire: {trigger: finnish,"),),
        MAIN,
        "finnish",
        "unknown trigger 'finnish'",
    ),
    Case(
        "emit-undeclared-effect",
        ((MAIN, r"(emit:\n\s+effect: )payload_spilled", r"\1payload_spilt"),),
        MAIN,
        "payload_spilt",
        "unknown effect 'payload_spilt'",
    ),
    Case(
        "scenario-expects-undeclared-effect",
        ((SCEN, r"\{effect: turn_requested,", "{effect: turn_requestd,"),),
        SCEN,
        "turn_requestd",
        "unknown effect 'turn_requestd'",
    ),
    Case(
        "duplicate-key", ((MAIN, r"^(title: .*)$", r"\1\ntitle: again"),), MAIN, "title: again", "duplicate key 'title'"
    ),
    Case(
        "duplicate-operation",
        ((MAIN, r"^  restart:$", "  retry_job:  # again\n    steps: [{result: \"{}\"}]\n  restart:"),),
        MAIN,
        "retry_job:  # again",
        "duplicate key 'retry_job'",
    ),
    Case(
        "limit-unknown-argument",
        ((MAIN, r"args: \[observe_outcome\.payload\]", "args: [observe_outcome.paylod]"),),
        MAIN,
        "observe_outcome.paylod",
        "operation observe_outcome has no argument 'paylod'",
    ),
    Case(
        "group-args-unknown-call",
        (
            (
                MAIN,
                r"(calls: \[cancel_job, observe_outcome\]\n      same_args: \[job_id\])",
                r"\1\n      args: {cancel_jobs: {job_id: shared.job_id}}",
            ),
        ),
        MAIN,
        "args: {cancel_jobs:",
        "'cancel_jobs' is not one of the group's calls",
    ),
    Case(
        "group-args-unknown-argument",
        (
            (
                MAIN,
                r"(calls: \[cancel_job, observe_outcome\]\n      same_args: \[job_id\])",
                r"\1\n      args: {cancel_job: {jobs: shared.job_id}}",
            ),
        ),
        MAIN,
        "args: {cancel_job: {jobs:",
        "operation cancel_job has no argument 'jobs'",
    ),
    Case(
        "group-args-for-every-call",
        (
            (
                MAIN,
                r"(calls: \[cancel_job, observe_outcome\]\n      same_args: \[job_id\])",
                r"\1\n      args: {cancel_job: {job_id: shared.job_id}, observe_outcome: {job_id: shared.job_id}}",
            ),
        ),
        MAIN,
        "args: {cancel_job: {job_id: shared.job_id}, observe_outcome",
        "every call gets its arguments from the shared ones",
    ),
    Case(
        "limit-unknown-batch",
        ((MAIN, r"batches: \[fill_thread, evicted_tool_call\]", "batches: [fill_threads, evicted_tool_call]"),),
        MAIN,
        "fill_threads",
        "unknown batch 'fill_threads'",
    ),
    Case(
        "batch-first-phase-once",
        (
            (
                MAIN,
                r"(phases:\n\s+- call: start_job\n)(\s+)(args: \{thread_id: shared)",
                r"\1\2once: true  # first\n\2\3",
            ),
        ),
        MAIN,
        "once: true  # first",
        "the first phase cannot run once",
    ),
    Case(
        "batch-weight-in-thousandths",
        ((MAIN, r"weight: 0\.1$", "weight: 0.125"),),
        MAIN,
        "weight: 0.125",
        "batch weight 0.125 has more than two decimal places",
    ),
    Case(
        "batch-weight-zero",
        ((MAIN, r"weight: 0\.1$", "weight: 0"),),
        MAIN,
        "weight: 0",
        "less than or equal to the minimum of 0",
    ),
    Case(
        "limit-value-unknown-parameter",
        ((MAIN, r"value: params\.retention_limit$", "value: params.retention_limt"),),
        MAIN,
        "params.retention_limt",
        "retention_limt",
    ),
    Case("empty-included-file", ((SCEN, r"\A[\s\S]*\Z", ""),), SCEN, None, "file is empty"),
]


UNKNOWN_KEY_LINE_BUG = (
    "kit bug: an unknown key is located at the mapping that holds it, not at the key's own line "
    "(statemachines/load/schema_check.py check_structure locates error.absolute_path, which for "
    "`additionalProperties` is the parent mapping); at the top level that is the document's first line"
)

CASES += [
    pytest.param(
        Case(
            "schema-unknown-key-in-scenario-step",
            ((SCEN, r"^(\s+)- call: complete_sync$", r"\1- call: complete_sync\n\1  colour: red"),),
            SCEN,
            "colour: red",
            "'colour' was unexpected",
        )
    ),
    pytest.param(
        Case(
            "schema-unknown-top-level-key",
            ((MAIN, r"^(version: .*)$", r"\1\ncolour: blue"),),
            MAIN,
            "colour: blue",
            "'colour' was unexpected",
        )
    ),
]


def _case(param) -> Case:
    return param.values[0] if hasattr(param, "values") else param


@pytest.fixture(scope="module")
def validated_cases():
    """Every case's broken spec in its own directory, all checked by ONE
    `conformance validate` run (which must report each file's problems and go
    on to the next file); each parametrized test then looks for its own."""
    base = Path(tempfile.mkdtemp(prefix="bad-input-"))
    specs = {}
    for param in CASES:
        case = _case(param)
        (base / case.id).mkdir()
        specs[case.id] = broken_spec(base / case.id, *case.edits)
    yield specs, conformance("validate", *specs.values())
    shutil.rmtree(base, ignore_errors=True)


@pytest.mark.parametrize("case", CASES, ids=lambda param: _case(param).id)
def test_validate_reports_file_line_and_what(validated_cases, case):
    specs, result = validated_cases
    spec = specs[case.id]
    assert result.returncode == 2, result.describe()
    assert_clean(result)
    assert f"✗ {spec}: " in result.stderr, result.describe()
    file = spec.parent / case.file
    line = line_of(file, case.marker) if case.marker else 1
    assert_problem(result, file, line, case.phrase)


def test_duplicate_scenario_id_names_both_places(tmp):
    ids = re.findall(r"^  - id: (\S+)$", (SPEC_DIR / SCEN).read_text(encoding="utf-8"), flags=re.M)
    first, second = ids[0], ids[1]
    spec = broken_spec(tmp, (SCEN, rf"^  - id: {re.escape(second)}$", f"  - id: {first}  # duplicate"))
    result = conformance("validate", spec)
    assert result.returncode == 2, result.describe()
    assert_clean(result)
    scen = tmp / SCEN
    assert_problem(result, scen, line_of(scen, "# duplicate"), f"duplicate scenario id '{first}'")
    assert f"also at {scen}:{_first_id_line(scen, first)}" in flat(result.stderr), result.describe()


def _first_id_line(path: Path, sid: str) -> int:
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line == f"  - id: {sid}":
            return i
    raise AssertionError(f"no scenario {sid} in {path}")


def test_two_independent_problems_in_two_files_are_both_reported(tmp):
    spec = broken_spec(
        tmp,
        (MAIN, r"dest: pending_cancel\}", "dest: pending_cancell}"),
        (SCEN, r"- call: complete_sync$", "- call: complete_synk"),
    )
    result = conformance("validate", spec)
    assert result.returncode == 2, result.describe()
    assert_clean(result)
    assert_problem(result, spec, line_of(spec, "pending_cancell"), "unknown state 'pending_cancell'")
    assert_problem(result, tmp / SCEN, line_of(tmp / SCEN, "complete_synk"), "unknown operation 'complete_synk'")


def test_two_schema_violations_in_two_files_are_both_reported(tmp):
    spec = broken_spec(
        tmp, (MAIN, r"^version: .*$", "version: [1, 0, 0]"), (SCEN, r"^    title: .*$", "    title: [not, a, string]")
    )
    result = conformance("validate", spec)
    assert result.returncode == 2, result.describe()
    assert_clean(result)
    assert_problem(result, spec, line_of(spec, "version: [1, 0, 0]"), "is not of type 'string'")
    assert_problem(result, tmp / SCEN, line_of(tmp / SCEN, "[not, a, string]"), "is not of type 'string'")


def test_two_bad_expressions_in_one_file_are_both_reported(tmp):
    spec = broken_spec(
        tmp,
        (MAIN, r"guard: \"args\.outcome == 'completed'\"", "guard: \"args.outcome == 'completed' &&\""),
        (MAIN, r"guard: \"args\.outcome == 'failed'\"", "guard: \"argz.outcome == 'failed'\""),
    )
    result = conformance("validate", spec)
    assert result.returncode == 2, result.describe()
    assert_clean(result)
    assert_problem(result, spec, line_of(spec, "'completed' &&"), "invalid CEL expression")
    assert_problem(result, spec, line_of(spec, "argz.outcome"), "unknown name(s): argz")


def test_problems_in_different_stages_are_reported_together(tmp):
    spec = broken_spec(
        tmp, (MAIN, r"dest: pending_cancel\}", "dest: pending_cancell}"), (SCEN, r"^    title: ", "    title: broken: ")
    )
    result = conformance("validate", spec)
    assert result.returncode == 2, result.describe()
    assert_problem(result, tmp / SCEN, line_of(tmp / SCEN, "title: broken:"), "YAML syntax error")
    assert_problem(result, spec, line_of(spec, "pending_cancell"), "unknown state 'pending_cancell'")


def test_unknown_top_level_key_is_reported(tmp):
    """The unknown key is named, with its file and line, exit 2."""
    spec = broken_spec(tmp, (MAIN, r"^(version: .*)$", r"\1\ncolour: blue"))
    result = conformance("validate", spec)
    assert result.returncode == 2, result.describe()
    assert_clean(result)
    assert any(p.startswith(f"{spec}:") and "'colour' was unexpected" in p for p in problem_lines(result)), (
        result.describe()
    )


def test_validate_goes_on_to_the_next_file(tmp):
    """Several files at once: each bad one is reported, the good one still validated."""
    result = conformance("validate", FIXTURE_SPECS / "empty.yaml", SPEC, FIXTURE_SPECS / "top-level-list.yaml")
    assert result.returncode == 2, result.describe()
    assert_clean(result)
    assert_problem(result, FIXTURE_SPECS / "empty.yaml", 1, "file is empty")
    assert_problem(result, FIXTURE_SPECS / "top-level-list.yaml", 1, "must be a YAML mapping")
    assert "✓ spec/thread-jobs.yaml" in result.stdout, result.describe()


# ------------------------------------------------------- whole-file problems
@pytest.mark.parametrize(
    "name, line, phrase",
    [
        ("empty.yaml", 1, "file is empty"),
        ("blank.yaml", 1, "file is empty"),
        ("comments-only.yaml", 1, "holds no YAML document"),
        ("top-level-list.yaml", 1, "must be a YAML mapping at the top level"),
    ],
)
def test_empty_and_shapeless_files(name, line, phrase):
    path = FIXTURE_SPECS / name
    result = conformance("validate", path)
    assert result.returncode == 2, result.describe()
    assert_clean(result)
    assert_problem(result, path, line, phrase)


def test_missing_file():
    result = conformance("validate", FIXTURE_SPECS / "no-such-spec.yaml")
    assert result.returncode == 2, result.describe()
    assert_clean(result)
    assert f"{FIXTURE_SPECS / 'no-such-spec.yaml'}: cannot read spec" in flat(result.stderr), result.describe()


def test_missing_included_file_is_named(tmp):
    spec = broken_spec(
        tmp, (MAIN, r"^include: \[thread-jobs\.scenarios\.yaml\]$", "include: [thread-jobs.scenarioz.yaml]")
    )
    result = conformance("validate", spec)
    assert result.returncode == 2, result.describe()
    assert_clean(result)
    assert "thread-jobs.scenarioz.yaml" in flat(result.stderr) and "cannot read" in flat(result.stderr), (
        result.describe()
    )


def test_file_over_the_size_limit(tmp):
    path = tmp / "huge.yaml"
    with path.open("w", encoding="utf-8") as out:
        out.write("format: lifecycle-spec/1\n")
        line = "# " + "x" * 98 + "\n"
        for _ in range(MAX_SPEC_BYTES // len(line) + 2):
            out.write(line)
    assert path.stat().st_size > MAX_SPEC_BYTES
    result = conformance("validate", path, timeout=60)
    assert result.returncode == 2, result.describe()
    assert_clean(result)
    assert f"{path}: file is {path.stat().st_size} bytes, over the {MAX_SPEC_BYTES}-byte limit" in flat(
        result.stderr
    ), result.describe()


def _validate_fits_in(megabytes: int) -> bool:
    result = conformance("validate", SPEC, preexec_fn=_limit_memory(megabytes))
    return result.returncode == 0


@pytest.mark.slow
def test_gigantic_file_is_refused_without_reading_it(tmp):
    if not _validate_fits_in(400):
        pytest.skip("the kit does not even load a good spec within a 400 MiB address space here")
    path = tmp / "gigantic.yaml"
    with path.open("wb") as out:  # sparse: takes no disk space
        out.truncate(3 << 30)
    result = conformance("validate", path, preexec_fn=_limit_memory(400), timeout=60)
    assert result.returncode == 2, result.describe()
    assert_clean(result)
    assert f"over the {MAX_SPEC_BYTES}-byte limit" in flat(result.stderr), result.describe()


@pytest.mark.slow
def test_alias_bomb_is_refused(tmp):
    if not _validate_fits_in(400):
        pytest.skip("the kit does not even load a good spec within a 400 MiB address space here")
    lines = ["format: lifecycle-spec/1", "a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)]
    path = tmp / "laughs.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = conformance("validate", path, preexec_fn=_limit_memory(400), timeout=120)
    assert result.returncode == 2, result.describe()
    assert_clean(result)
    assert any(p.startswith(f"{path}:") for p in problem_lines(result)), result.describe()


def test_deeply_nested_value_is_reported(tmp):
    path = tmp / "deep.yaml"
    path.write_text("format: lifecycle-spec/1\nx: " + "[" * 20000 + "]" * 20000 + "\n", encoding="utf-8")
    result = conformance("validate", path)
    assert result.returncode == 2, result.describe()
    assert_clean(result)
    assert any(p.startswith(f"{path}:2:") for p in problem_lines(result)), result.describe()


def test_python_tag_on_a_collection_is_reported(tmp):
    spec = broken_spec(tmp, (MAIN, r"^title: .*$", "title: !!python/object/apply:os.system [echo hi]"))
    result = conformance("validate", spec)
    assert result.returncode == 2, result.describe()
    assert_clean(result)
    assert_problem(result, spec, line_of(spec, "!!python/object"), "python/object")


# ------------------------------------------------------------ console output
def test_long_paths_are_not_broken_across_lines(tmp):
    deep = tmp / ("a-directory-with-a-rather-long-name-as-ci-workspaces-often-have-" * 3)
    deep.mkdir()
    spec = broken_spec(deep, (MAIN, r"dest: pending_cancel\}", "dest: pending_cancell}"))
    result = conformance("validate", spec, columns=None)
    assert result.returncode == 2, result.describe()
    assert f"{spec}:{line_of(spec, 'pending_cancell')}: unknown state" in result.stderr, result.describe()


@pytest.mark.slow
def test_user_text_is_printed_verbatim(tmp):
    bracketed = tmp / "[draft]" / "spec.yaml"
    bracketed.parent.mkdir()
    bracketed.write_text("", encoding="utf-8")
    result = conformance("validate", bracketed)
    assert f"✗ {bracketed}:" in result.stderr, result.describe()
    closing = tmp / "[" / "x].yaml"  # the path contains '[/x]'
    closing.parent.mkdir()
    closing.write_text("", encoding="utf-8")
    result = conformance("validate", closing)
    assert result.returncode == 2, result.describe()
    assert_clean(result)
    assert_problem(result, closing, 1, "file is empty")
    result, _ = run_adapter(tmp, "no.such.module:X", "--no-stateful")
    assert "❌" not in result.output and "no.such.module:X: " in result.stderr, result.describe()


# ------------------------------------------------- `run` on a broken spec
@pytest.mark.parametrize(
    "edits, expected",
    [
        pytest.param(
            (
                (MAIN, r"dest: pending_cancel\}", "dest: pending_cancell}"),
                (SCEN, r"- call: complete_sync$", "- call: complete_synk"),
            ),
            [
                (MAIN, "pending_cancell", "unknown state 'pending_cancell'"),
                (SCEN, "complete_synk", "unknown operation 'complete_synk'"),
            ],
            id="two-semantic-problems",
        ),
        pytest.param(
            ((MAIN, r"^title: ", "title: broken: "),),
            [(MAIN, "title: broken:", "YAML syntax error")],
            id="yaml-syntax-error",
        ),
        pytest.param(
            ((MAIN, r"guard: \"args\.outcome == 'completed'\"", "guard: \"args.outcome == 'completed' &&\""),),
            [(MAIN, "'completed' &&", "invalid CEL expression")],
            id="bad-expression",
        ),
    ],
)
def test_run_on_a_broken_spec_still_writes_the_report(tmp, edits, expected):
    spec = broken_spec(tmp, *edits)
    report_dir = tmp / "reports"
    result = conformance("run", spec, "--profile", "quick", "--report-dir", report_dir)
    assert result.returncode == 2, result.describe()
    assert_clean(result)
    report = load_report(report_dir)
    assert report["verdict"] == "error" and report["exit_code"] == 2
    assert report["scenarios"] == [] and report["stateful"] is None
    for name, marker, phrase in expected:
        where = f"{tmp / name}:{line_of(tmp / name, marker)}"
        assert any(
            p["kind"] == "spec-error" and p["where"] == where and phrase in p["message"] for p in report["problems"]
        ), (where, phrase, report["problems"])
        assert f"{where}: {phrase}" in flat(result.stderr), result.describe()
        junit = (report_dir / "junit.xml").read_text(encoding="utf-8")
        assert phrase in junit and where in junit
    assert (report_dir / "summary.md").is_file()


def test_run_on_an_empty_spec_file_still_writes_the_report(tmp):
    report_dir = tmp / "reports"
    result = conformance("run", FIXTURE_SPECS / "empty.yaml", "--report-dir", report_dir)
    assert result.returncode == 2, result.describe()
    assert_clean(result)
    report = load_report(report_dir)
    assert report["verdict"] == "error"
    assert [(p["where"], "file is empty" in p["message"]) for p in report["problems"]] == [
        (f"{FIXTURE_SPECS / 'empty.yaml'}:1", True)
    ]


def test_mutants_on_a_broken_spec(tmp):
    spec = broken_spec(tmp, (MAIN, r"dest: pending_cancel\}", "dest: pending_cancell}"))
    result = conformance("mutants", spec, "--profile", "quick")
    assert result.returncode == 2, result.describe()
    assert_clean(result)
    assert f"{spec}:{line_of(spec, 'pending_cancell')}: unknown state" in flat(result.stderr), result.describe()


def test_replay_of_a_broken_steps_file(tmp):
    steps = FIXTURE_SPECS / "replay-unknown-operation.yaml"
    report_dir = tmp / "reports"
    result = conformance("replay", SPEC, steps, "--report-dir", report_dir)
    assert result.returncode == 2, result.describe()
    assert f"{steps}:{line_of(steps, 'inspect_jbo')}: unknown operation 'inspect_jbo'" in flat(result.stderr), (
        result.describe()
    )
    assert_clean(result)
    report = load_report(report_dir)
    assert report["verdict"] == "error"


# ================================================ misbehaving implementations
def test_raising_operation_is_an_implementation_error(tmp_path):
    result, report_dir = run_adapter(tmp_path, "RaisesOnInspect", *only("N1", "N2", "N10"))
    assert result.returncode == 1, result.describe()
    assert_clean(result)
    report = load_report(report_dir)
    assert report["verdict"] == "fail"
    assert scenario(report, "N1")["verdict"] == "pass"  # the run went on around the failures
    for sid in ("N2", "N10"):
        entry = scenario(report, sid)
        assert entry["verdict"] == "fail"
        failure = entry["failure"]
        assert failure["kind"] == "implementation-error"
        assert failure["operation"] == "inspect_job"
        assert "inspect_job raised RuntimeError: inspect exploded: database is gone" in failure["message"]
        assert failure["steps"], "the steps up to the failure are kept as evidence"
    assert "inspect_job raised RuntimeError: inspect exploded" in flat(result.stdout)


@pytest.mark.slow
def test_hanging_operation_times_out_and_the_run_goes_on(tmp_path):
    # Each hang outlasts the whole run's limit: a kit that waited for one would be killed by it.
    result, report_dir = run_adapter(
        tmp_path, "HangsOnInspect", *only("N2", "N1", "N10"), "--timeout", "0.5", timeout=HANG_S / 2
    )
    assert result.returncode == 1, result.describe()
    assert_clean(result)
    report = load_report(report_dir)
    assert [s["id"] for s in report["scenarios"]] == ["N1", "N2", "N10"]
    assert scenario(report, "N1")["verdict"] == "pass"
    for sid in ("N2", "N10"):
        failure = scenario(report, sid)["failure"]
        assert failure["kind"] == "timeout"
        assert failure["operation"] == "inspect_job"
        assert "inspect_job did not answer within 0.5s" in failure["message"]


@pytest.mark.hypothesis  # its run explores (tests/hypothesis_marker.py)
def test_failure_in_the_stateful_exploration_is_reported(tmp_path):
    """The whole run (scenario matrix, then the quick exploration) against an
    implementation whose list_jobs breaks its schema: both parts report it."""
    result, report_dir = run_adapter(tmp_path, "ListJobsNotAList")  # scenarios and quick exploration
    assert result.returncode == 1, result.describe()
    assert_clean(result)
    report = load_report(report_dir)
    assert len(report["scenarios"]) > 1 and report["stateful"] is not None
    stateful = report["stateful"]
    assert stateful["verdict"] == "fail"
    assert stateful["failure"]["kind"] == "schema"
    assert "list_jobs: result.jobs breaks the result schema" in stateful["failure"]["message"]


@pytest.mark.slow
def test_hang_that_swallows_the_timeout_is_still_a_timeout(tmp_path):
    result, report_dir = run_adapter(tmp_path, "HangsSwallowingOnInspect", *only("N2"), "--timeout", "0.5")
    assert result.returncode == 1, result.describe()
    report = load_report(report_dir)
    failure = scenario(report, "N2")["failure"]
    assert failure and failure["kind"] == "timeout", failure


@pytest.fixture(scope="module")
def concurrent_hang(tmp_path_factory):
    """One run (shared by two tests) against an implementation whose start_job
    hangs when called concurrently, for longer than the run may take."""
    return run_adapter(
        tmp_path_factory.mktemp("concurrent-hang"),
        "HangsWhenConcurrent",
        *only("N1", "B1"),
        "--timeout",
        "0.5",
        timeout=HANG_S / 2,
    )


def test_concurrent_hang_is_reported_as_a_timeout(concurrent_hang):
    result, report_dir = concurrent_hang
    assert result.returncode == 1, result.describe()
    assert_clean(result)
    report = load_report(report_dir)
    assert scenario(report, "N1")["verdict"] == "pass"
    failure = scenario(report, "B1")["failure"]
    assert failure["kind"] == "timeout"
    assert "start_job (concurrent) did not answer within 0.5s" in failure["message"]


def test_concurrent_hang_does_not_keep_the_kit_alive(concurrent_hang):
    # The hang outlasts the run's limit (the fixture's subprocess timeout), so a
    # kit that waited for it would not have exited at all.
    result, _ = concurrent_hang
    assert result.returncode == 1, result.describe()


@pytest.mark.parametrize(
    "adapter, path, phrase",
    [
        ("ListJobsNotAList", "result.jobs", "list_jobs: result.jobs breaks the result schema"),
        ("ListJobsMissingStatus", "result.jobs[0]", "'status' is a required property"),
        ("UndeclaredEffectOnStart", "effects[0]", "effects[0] is 'telemetry_sent', which the spec does not declare"),
        ("BadEffectFieldsOnCancel", "effects[0]", "cancel_job: effects[0] (cancellation_requested) breaks its schema"),
    ],
)
def test_result_or_effect_breaking_the_schema(tmp_path, adapter, path, phrase):
    result, report_dir = run_adapter(tmp_path, adapter, *only("N2", "N6", "N10"))
    assert result.returncode == 1, result.describe()
    assert_clean(result)
    report = load_report(report_dir)
    failures = [s["failure"] for s in report["scenarios"] if s["failure"]]
    assert failures, report["scenarios"]
    assert len(report["scenarios"]) == 3  # every scenario asked for ran
    for failure in failures:
        assert failure["kind"] == "schema", failure
        assert failure["path"] == path
        assert phrase in failure["message"]
    assert phrase in flat(result.stdout)  # the console summary says it too


@pytest.mark.parametrize(
    "adapter, phrase",
    [
        ("InspectNeitherResultNorError", "a response must have exactly one of `result` and `error`"),
        ("InspectBothResultAndError", "a response must have exactly one of `result` and `error`"),
        ("InspectReturnsList", "a response must be an object, got list"),
        ("InspectReturnsNone", "a response must be an object, got NoneType"),
        ("InspectErrorWithoutKind", "`error` must be {\"kind\": string, \"message\": string}"),
    ],
)
def test_malformed_response(tmp_path, adapter, phrase):
    result, report_dir = run_adapter(tmp_path, adapter, *only("N1", "N2", "N10"))
    assert result.returncode == 1, result.describe()
    assert_clean(result)
    report = load_report(report_dir)
    assert scenario(report, "N1")["verdict"] == "pass"
    for sid in ("N2", "N10"):
        failure = scenario(report, sid)["failure"]
        assert failure["kind"] == "implementation-error"
        assert f"inspect_job: malformed response: {phrase}" in failure["message"]


def test_set_clock_raising_is_an_implementation_error(tmp_path):
    result, report_dir = run_adapter(tmp_path, "SetClockRaises", *only("N1", "N2"))
    assert result.returncode == 1, result.describe()
    assert_clean(result)
    report = load_report(report_dir)
    assert scenario(report, "N1")["verdict"] == "pass"
    failure = scenario(report, "N2")["failure"]
    assert failure["kind"] == "implementation-error"
    assert "set_clock raised RuntimeError: clock is broken" in failure["message"]


def test_set_clock_answering_a_non_list_is_an_implementation_error(tmp_path):
    result, report_dir = run_adapter(tmp_path, "SetClockReturnsNumber", *only("N1", "N2"))
    assert result.returncode == 1, result.describe()
    assert_clean(result)
    report = load_report(report_dir)
    assert scenario(report, "N1")["verdict"] == "pass"
    failure = scenario(report, "N2")["failure"]
    assert failure["kind"] == "implementation-error"
    assert "set_clock: malformed response" in failure["message"]


def test_reset_failing_is_an_error_of_each_scenario(tmp_path):
    result, report_dir = run_adapter(tmp_path, "ResetRaises", *only("N1", "N2"))
    assert result.returncode == 1, result.describe()
    assert_clean(result)
    report = load_report(report_dir)
    for sid in ("N1", "N2"):  # the run went on to N2 after N1 could not start
        entry = scenario(report, sid)
        assert entry["verdict"] == "error"
        assert entry["failure"]["kind"] == "implementation-error"
        assert "failed to reset: RuntimeError: reset failed" in entry["failure"]["message"]


# Misbehaviours the kit does not survive today: each should be a failure of the
# implementation (exit 1, report written), not a crash or an exit of the kit.
KIT_CRASHES = [
    pytest.param("ExitsOnInspect", "inspect_job", id="sys-exit"),
    pytest.param("RaisesUnprintableOnInspect", "inspect_job", id="unprintable-exception"),
    pytest.param("InspectNotJson", "inspect_job", id="not-json"),
]


@pytest.mark.parametrize("adapter, operation", KIT_CRASHES)
def test_implementation_misbehaviour_never_crashes_the_kit(tmp_path, adapter, operation):
    result, report_dir = run_adapter(tmp_path, adapter, *only("N1", "N2", "N10"))
    assert result.returncode == 1, result.describe()
    assert_clean(result)
    report = load_report(report_dir)
    assert scenario(report, "N1")["verdict"] == "pass"
    failure = scenario(report, "N2")["failure"]
    assert failure["kind"] == "implementation-error"
    assert operation in failure["message"]


@pytest.mark.parametrize("value", ["0", "-1", "nan"])
def test_timeout_must_be_positive(tmp_path, value):
    result = conformance(
        "run", SPEC, "--no-stateful", "--scenario", "N1", f"--timeout={value}", "--report-dir", tmp_path / "reports"
    )
    assert result.returncode == 2, result.describe()
    assert_clean(result)
    assert "--timeout" in result.stderr and "describe()" not in result.stderr, result.describe()


# ------------------------------------------------ describe() and loading
@pytest.mark.parametrize(
    "adapter, phrases",
    [
        ("RetentionZero", ["retention_limit must be >= 1, got 0", "the spec allows 1..100000"]),
        ("UnknownProfile", ["profile 'no-such-profile' is not defined by spec thread-jobs"]),
        ("DescribeRaises", ["describe() failed: RuntimeError: describe exploded"]),
        ("DescribeNotADict", ["describe() must return an object, got str"]),
        ("ConstructorRaises", ["failed to start: RuntimeError: cannot connect to the job runtime"]),
        ("NOT_CALLABLE", ["is not callable"]),
        ("NoCallMethod", ["has no call() method"]),
        ("NoSuchAttr", [f"module '{ADAPTERS}' has no attribute 'NoSuchAttr'"]),
        ("no.such.module:X", ["cannot import module 'no.such.module'", "is it installed or on PYTHONPATH?"]),
        (
            "tests.fixtures.broken_import:Adapter",
            [
                "importing 'tests.fixtures.broken_import' failed: RuntimeError: this adapter module fails while importing"
            ],
        ),
        ("no-colon", ["must look like package.module:Attribute"]),
    ],
)
def test_adapter_that_cannot_be_used_is_exit_2(tmp_path, adapter, phrases):
    result, report_dir = run_adapter(tmp_path, adapter, *only("N1"))
    assert result.returncode == 2, result.describe()
    assert_clean(result)
    for phrase in phrases:
        assert phrase in flat(result.stderr), result.describe()
    report = load_report(report_dir)
    assert report["verdict"] == "error" and report["exit_code"] == 2
    assert report["scenarios"] == []
    assert [p["kind"] for p in report["problems"]] == ["adapter-error"]
    assert all(phrase in report["problems"][0]["message"] for phrase in phrases)


@pytest.mark.parametrize(
    "adapter, phrases",
    [
        pytest.param("ParametersNotAnObject", ["parameters"], id="parameters-not-an-object"),
        pytest.param("CapabilitiesNotAnObject", ["capabilities"], id="capabilities-not-an-object"),
        pytest.param("HangsInDescribe", ["did not answer within 0.5s"], id="describe-hangs"),
    ],
)
def test_describe_breaking_the_protocol_is_exit_2(tmp_path, adapter, phrases):
    result, report_dir = run_adapter(tmp_path, adapter, *only("N1"), "--timeout", "0.5")
    assert result.returncode == 2, result.describe()
    assert_clean(result)
    report = load_report(report_dir)
    assert report["verdict"] == "error"
    assert [p["kind"] for p in report["problems"]] == ["adapter-error"]
    assert all(phrase in report["problems"][0]["message"] for phrase in phrases), report["problems"]


@pytest.mark.parametrize("command", ["run", "mutants"])
def test_a_spec_profile_given_as_the_exploration_profile_says_where_it_goes(command):
    # --profile is how much the exploration runs; task-table is one of async-jobs' own profiles
    from click.testing import CliRunner

    from conformance.cli import cli

    result = CliRunner().invoke(cli, [command, "async-jobs", "--profile", "task-table"])
    assert result.exit_code == 2
    assert "'task-table' is not an exploration profile (one of ci, deep, quick" in result.output
    assert "--adapter-opt profile=task-table" in result.output and "hello answer" in result.output

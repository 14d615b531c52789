"""pytest integration: a team's own test suite runs the kit on its implementation.

In a test module::

    from conformance.pytest_plugin import conformance_suite

    test_thread_jobs = conformance_suite("thread-jobs", adapter="my_runtime.conformance:Adapter")

collects one test item per scenario, named by its id (``test_thread_jobs[N1]``
...), plus ``test_thread_jobs[stateful]`` for the generated exploration, all
reported at that line of that file. The spec is a bundled spec's name or a
path, relative to the test file first, then to pytest's rootdir.

Without writing Python, list suites in ``pyproject.toml`` (or ``pytest.ini``)::

    [tool.pytest.ini_options]
    conformance_suites = [
      "thread-jobs adapter=my_runtime.conformance:Adapter profile=quick",
      "spec/mine.yaml name=node-impl adapter-cmd='node adapter.js' adapter-opt=profile=strict",
    ]

Each entry is a spec (name or path) followed by ``key=value`` settings named
like ``conformance run``'s options (see :data:`SUITE_KEYS`); paths and
adapter commands are taken relative to the config file's directory. Their
items are ``pyproject.toml::thread-jobs[N1]`` ...; they are collected when
pytest runs without file arguments, or when the config file itself is named
(``pytest pyproject.toml``). Every item carries the ``conformance`` marker
(``-m conformance`` / ``-m "not conformance"``).

``--conformance-profile`` and ``--conformance-seed`` override the defaults.
Each item is a run of the engine's ``run_conformance``, as ``conformance
run`` makes it (the suite's RunConfig narrowed to one scenario, or to the
exploration): the same reduction, failures grouped by cause, counterexample
files and reports, written to ``conformance-reports/<suite>/<case id>/``
under the rootdir (``--conformance-report-dir`` or the ini option
``conformance_report_dir`` change the base). A failed item's text is the
report's, its replay command relative to the rootdir. Each item starts the
implementation afresh; under pytest-xdist each worker runs its own items.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from .engine.budgets import MAX_FAILURES

# The plugin loads with every pytest run: keep it light (no Hypothesis import
# here); the engine is imported when a suite is built.
PROFILE_NAMES = ("ci", "deep", "quick")

__all__ = [
    "conformance_suite",
    "pytest_addoption",
    "SUITE_KEYS",
    "parse_suite_entry",
    "SuiteDefinition",
    "SuiteEntryError",
    "CaseResult",
    "report_base",
    "relative_to_rootdir",
    "case_failure_text",
    "commands_from_rootdir",
]

STATEFUL_ID = "stateful"
INI_OPTION = "conformance_suites"
MARKER = "conformance"

# Settings of one `conformance_suites` entry, named like `conformance run`'s options.
SUITE_KEYS = {
    "name": "the suite's name in node ids (default: the spec's file name without .yaml)",
    "adapter": "MODULE:ATTR, a Python adapter (default: the spec's bundled reference)",
    "adapter-opt": "KEY=VALUE passed to the adapter (repeatable)",
    "adapter-cmd": "a program speaking the stdio protocol, run in the config file's directory",
    "adapter-cli": "a command adapter config file",
    "profile": "exploration profile: quick (default), ci or deep",
    "seed": "seed of the exploration (default 1)",
    "timeout": "seconds one operation may take (default 10)",
    "stateful": "yes (default) or no: run the generated exploration",
    "max-failures": "distinct exploration failures to look for (default 3, as `conformance run`)",
    "deviations": "a deviations file (docs/deviations.md), relative to the file declaring the suite",
}


class SuiteEntryError(ValueError):
    """A `conformance_suites` entry that cannot be read; the message says how to fix it."""


@dataclass
class SuiteDefinition:
    """One conformance suite as a user declared it (in Python or in the ini file)."""

    spec: str
    adapter: str | None = None
    adapter_cmd: str | None = None
    adapter_cli: str | None = None
    adapter_options: dict = field(default_factory=dict)
    profile: str = "quick"
    seed: int = 1
    stateful: bool = True
    timeout_s: float = 10.0
    deviations: str | None = None  # a deviations file (docs/deviations.md)
    max_failures: int = MAX_FAILURES  # as `conformance run --max-failures`
    name: str | None = None
    # Where it was declared: reports point there, relative paths start there.
    file: str | None = None
    line: int = 0  # 0-based, as pytest's reportinfo


def conformance_suite(
    spec: str,
    *,
    adapter: str | None = None,
    adapter_options: dict | None = None,
    adapter_cmd: str | None = None,
    adapter_cli: str | None = None,
    profile: str = "quick",
    seed: int = 1,
    stateful: bool = True,
    timeout_s: float = 10.0,
    deviations: str | None = None,
    max_failures: int = MAX_FAILURES,
) -> SuiteDefinition:
    """A conformance suite for the module it is assigned in: pytest collects one
    item per scenario, plus the exploration, named after the variable."""
    if profile not in PROFILE_NAMES:
        raise ValueError(f"profile {profile!r} is not one of {', '.join(PROFILE_NAMES)}")
    if sum(x is not None for x in (adapter, adapter_cmd)) > 1:
        raise ValueError("give adapter (module:attribute) or adapter_cmd (a program), not both")
    caller = sys._getframe(1)  # the test module: relative spec paths and reports start there
    return SuiteDefinition(
        spec=spec,
        adapter=adapter,
        adapter_cmd=adapter_cmd,
        adapter_cli=adapter_cli,
        adapter_options=dict(adapter_options or {}),
        profile=profile,
        seed=seed,
        stateful=stateful,
        timeout_s=timeout_s,
        deviations=deviations,
        max_failures=max_failures,
        file=caller.f_globals.get("__file__"),
        line=caller.f_lineno - 1,
    )


# ----------------------------------------------------------------- ini entries

_TRUE, _FALSE = {"yes", "true", "1", "on"}, {"no", "false", "0", "off"}


def _seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = float("nan")
    if not 0 < seconds < float("inf"):
        raise SuiteEntryError(f"timeout={value!r} must be a positive number of seconds")
    return seconds


def parse_suite_entry(entry: str) -> SuiteDefinition:
    """``"thread-jobs adapter=my.mod:Adapter profile=quick"`` -> a definition."""
    try:
        words = shlex.split(entry)
    except ValueError as exc:
        raise SuiteEntryError(f"cannot split it into words: {exc} (quote values with spaces)") from None
    if not words or "=" in words[0]:
        raise SuiteEntryError("it must start with a spec name or path, then key=value settings")
    suite = SuiteDefinition(spec=words[0])
    for word in words[1:]:
        key, sep, value = word.partition("=")
        if not sep:
            raise SuiteEntryError(f"{word!r} is not key=value (known keys: {', '.join(SUITE_KEYS)})")
        if key not in SUITE_KEYS:
            raise SuiteEntryError(f"unknown key {key!r} (known keys: {', '.join(SUITE_KEYS)})")
        if key == "adapter-opt":
            opt, sep, opt_value = value.partition("=")
            if not sep or not opt:
                raise SuiteEntryError(f"adapter-opt={value!r} must be adapter-opt=KEY=VALUE")
            suite.adapter_options[opt] = opt_value
        elif key == "profile":
            if value not in PROFILE_NAMES:
                raise SuiteEntryError(f"profile={value!r} is not one of {', '.join(PROFILE_NAMES)}")
            suite.profile = value
        elif key == "seed":
            if not (value.isascii() and value.isdigit() and len(value) <= 19):  # isdigit alone takes "²"
                raise SuiteEntryError(f"seed={value!r} must be a whole number")
            suite.seed = int(value)
        elif key == "max-failures":
            if not (value.isascii() and value.isdigit() and len(value) <= 2) or not 1 <= int(value) <= 50:
                raise SuiteEntryError(f"max-failures={value!r} must be a whole number from 1 to 50")
            suite.max_failures = int(value)
        elif key == "timeout":
            suite.timeout_s = _seconds(value)
        elif key == "stateful":
            if value.lower() not in _TRUE | _FALSE:
                raise SuiteEntryError(f"stateful={value!r} must be yes or no")
            suite.stateful = value.lower() in _TRUE
        else:
            setattr(suite, key.replace("-", "_"), value)
    if suite.adapter and suite.adapter_cmd:
        raise SuiteEntryError("give adapter= (a Python adapter) or adapter-cmd= (a program), not both")
    return suite


# ----------------------------------------------------------------- running


def _resolve_spec(spec: str, bases: list[Path]) -> tuple[str, str]:
    """(the spec file, what commands name it by): a file relative to the
    declaring test file, then to the rootdir (named by its path), else an
    installed spec (named by its name, never by a site-packages path)."""
    from .specs import SpecNotFound, is_spec_name, resolve_spec

    for base in bases:
        candidate = base / spec
        if candidate.is_file():
            return str(candidate), str(candidate)
    try:
        found = resolve_spec(spec)  # as given, or an installed spec's name
    except SpecNotFound:
        return spec, spec  # loading says it cannot be read; the item shows that
    if is_spec_name(spec) and Path(found).is_file():
        return found, spec
    return os.path.abspath(found), os.path.abspath(found)


REPORT_DIR_INI = "conformance_report_dir"
DEFAULT_REPORT_DIR = "conformance-reports"


def report_base(config: pytest.Config) -> Path:
    """Where the items' report directories go: ``--conformance-report-dir``,
    the ini option, or ``conformance-reports``; relative to the rootdir."""
    chosen = config.getoption("--conformance-report-dir") or config.getini(REPORT_DIR_INI) or DEFAULT_REPORT_DIR
    return config.rootpath / chosen


class CaseFailed(Exception):
    """A conformance item failed; the message is the kit's failure text."""


@dataclass(frozen=True)
class CaseResult:
    """What one item's run left: its report (as written) and where it was written."""

    case: str
    report: dict
    report_dir: Path


class _SuiteRun:
    """One suite in one pytest process: the run configuration built once from
    its definition, narrowed per item and run by the engine's
    ``run_conformance`` (each item starts the implementation afresh)."""

    def __init__(self, definition: SuiteDefinition, rootdir: Path, name: str = ""):
        self.definition = definition
        self.rootdir = rootdir
        self.name = name or definition.name or Path(definition.spec).name.removesuffix(".yaml")
        base = Path(definition.file).resolve().parent if definition.file else rootdir
        self.base = base
        self.spec_path, self.spec_arg = _resolve_spec(definition.spec, [base, rootdir])
        self._config: Any = None
        self.not_applicable: list[str] = []
        self.profile = "default"

    @property
    def command_dir(self) -> Path:
        """Where the replay commands must run: the rootdir, or, for an adapter
        program (run where the suite was declared), that directory."""
        root = Path(os.path.realpath(self.rootdir))
        inside = self.base == root or root in self.base.parents
        return self.base if self.definition.adapter_cmd and inside else self.rootdir

    def case_ids(self, config: pytest.Config) -> list[str]:
        """Scenario ids (+ stateful) that apply to the implementation; raises SpecError.

        Which scenarios apply depends on the parameters the implementation
        declares, so the implementation is started (and closed) here; scenarios
        written for other parameters are no items at all (counted in the
        terminal summary). If it cannot start, every item fails with the reason."""
        from statemachines import SpecError, load_spec

        from .engine.runner import prepare
        from .engine.scenarios import not_applicable_ids
        from .errors import ConformanceError

        spec = load_spec(self.spec_path)
        ids = [scenario.id for scenario in spec.scenarios]
        try:
            prepared = prepare(self.run_config(config))
        except (SpecError, ConformanceError):  # every item's run reports why it cannot start
            pass
        else:
            try:
                capabilities = prepared.identity.get("capabilities") or {}
                self.not_applicable = not_applicable_ids(prepared.spec, prepared.params, capabilities)
                self.profile = prepared.identity.get("profile") or "default"
            finally:
                prepared.session.close()
            ids = [i for i in ids if i not in self.not_applicable]
        return ids + [STATEFUL_ID] if self.definition.stateful else ids

    def run_config(self, config: pytest.Config):
        """The suite's RunConfig, built once from its definition and the command line."""
        if self._config is None:
            self._config = _suite_config(self, config)
        return self._config

    def case_config(self, config: pytest.Config, case: str):
        """The suite's RunConfig narrowed to one item, writing in the item's report directory."""
        report_dir = self.report_dir(config, case)
        narrowed = {"scenarios": False} if case == STATEFUL_ID else {"only": (case,), "stateful": False}
        return dataclasses.replace(self.run_config(config), report_dir=str(report_dir), **narrowed)

    def report_dir(self, config: pytest.Config, case: str) -> Path:
        return report_base(config) / _path_part(self.name) / _path_part(case)

    def run_case(self, config: pytest.Config, case: str) -> CaseResult:
        """One item run by the engine, as ``conformance run`` runs it, its reports written."""
        from .engine.runner import run_conformance

        case_config = self.case_config(config, case)
        return CaseResult(case, run_conformance(case_config), Path(case_config.report_dir))


def _suite_config(run: _SuiteRun, config: pytest.Config):
    """A suite definition and the command line's overrides as a RunConfig (no report directory yet)."""
    from .engine.runner import RunConfig

    d = run.definition
    run_config = RunConfig(
        spec_path=run.spec_arg,
        adapter=d.adapter,
        adapter_options=dict(d.adapter_options),
        adapter_cmd=d.adapter_cmd,
        adapter_cli=str(run.base / d.adapter_cli) if d.adapter_cli else None,
        profile=config.getoption("--conformance-profile") or d.profile,
        seed=config.getoption("--conformance-seed") or d.seed,
        report_dir=None,
        timeout_s=d.timeout_s,
        deviations=str(run.base / d.deviations) if d.deviations else None,
        max_failures=d.max_failures,
    )
    if d.adapter_cmd:
        # The program runs where the suite was declared, so "node adapter.js" works
        # from any directory pytest is started in.
        from statemachines import SpecError, load_spec

        from .adapters.stdio import stdio_factory

        try:
            factory = stdio_factory(d.adapter_cmd, load_spec(run.spec_path), cwd=str(run.base))
        except SpecError:
            return run_config  # the run reports the spec's problems
        run_config = dataclasses.replace(run_config, adapter_factory=factory)
    return run_config


def _path_part(name: str) -> str:
    """A suite name or case id as one directory name."""
    return "".join(c if c.isalnum() or c in "-_.=" else "_" for c in name) or "_"


def relative_to_rootdir(text: str, rootdir: Path, workdir: Path | None = None) -> str:
    """``text`` with absolute paths under the rootdir made relative to
    ``workdir`` (the rootdir by default), so a command in it works when run
    from there."""
    up = os.curdir if workdir is None else os.path.relpath(os.path.realpath(rootdir), os.path.realpath(workdir))
    prefix = "" if up == os.curdir else up + os.sep
    for root in dict.fromkeys((str(rootdir), os.path.realpath(rootdir))):
        text = text.replace(root.rstrip(os.sep) + os.sep, prefix)
    return text


_COMMAND = re.compile(r"(replay: |re-runs with: )(conformance )")


def commands_from_rootdir(text: str, rootdir: Path, workdir: Path) -> str:
    """``text``'s commands made to work when pasted from the rootdir: paths
    relative to ``workdir`` (where an adapter program must run), and, when
    that is another directory, ``cd`` there first."""
    text = relative_to_rootdir(text, rootdir, workdir)
    where = os.path.relpath(os.path.realpath(workdir), os.path.realpath(rootdir))
    if where == os.curdir:
        return text
    return _COMMAND.sub(lambda m: f"{m[1]}cd {shlex.quote(where)} && {m[2]}", text)


def case_failure_text(result: CaseResult, rootdir: Path, workdir: Path | None = None) -> str:
    """An item's failure as the report tells it: what stopped the run, each
    failed check with its replay command, where the reports are; commands
    and paths as they work from the rootdir (see ``commands_from_rootdir``)."""
    from .reporting._format import failed_checks, failure_text

    report = result.report
    parts = [
        f"{p['where']}: {p.get('message')}" if p.get("where") else str(p.get("message")) for p in report["problems"]
    ]
    if report["verdict"] == "error":
        parts.insert(0, "cannot start or complete the conformance run (verdict error):")
    checks = list(failed_checks(report))
    parts += [f"{label}: {failure_text(failure, report)}" for label, failure in checks]
    if not checks and report.get("replay"):
        parts.append(f"replay: {report['replay']}")
    text = commands_from_rootdir("\n\n".join(parts), rootdir, workdir or rootdir)
    return f"{text}\n\nreports: {relative_to_rootdir(str(result.report_dir), rootdir)}{os.sep}"


def _skip_reason(result: CaseResult) -> str | None:
    """Why a passing item is a skip: its scenario was skipped or did not apply."""
    report = result.report
    for entry in report.get("scenarios") or []:
        if entry.get("verdict") not in ("pass", "fail", "error"):
            return entry.get("note") or entry.get("verdict")
    for entry in (report.get("not_applicable") or {}).get("scenarios") or []:
        return entry.get("reason") or "not applicable"
    return None


class ConformanceItem(pytest.Item):
    """One scenario (or the exploration) of a suite, reported where the suite was declared."""

    def __init__(self, *, run: _SuiteRun | None, case: str, problem: str | None = None, **kwargs):
        super().__init__(**kwargs)
        self.run, self.case, self.problem = run, case, problem
        self.result: CaseResult | None = None
        self.add_marker(MARKER)

    def runtest(self) -> None:
        if self.problem is not None or self.run is None:  # a suite that cannot run has a problem instead
            raise CaseFailed(self.problem or "no run")
        self.result = result = self.run.run_case(self.config, self.case)
        verdict = result.report["verdict"]
        if verdict == "interrupted":
            raise KeyboardInterrupt
        if verdict != "pass":
            raise CaseFailed(case_failure_text(result, self.config.rootpath, self.run.command_dir))
        reason = _skip_reason(result)
        if reason is not None:
            pytest.skip(reason)

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, CaseFailed):
            from .reporting._format import visible

            return visible(str(excinfo.value))  # received text's control characters show escaped
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        definition = self.run.definition if self.run else None
        path = Path(definition.file) if definition and definition.file else self.path
        return path, (definition.line if definition else 0), self.name


def _items(parent, name: str, definition: SuiteDefinition) -> list[ConformanceItem]:
    from statemachines import SpecError

    run = _SuiteRun(definition, parent.config.rootpath, name)
    try:
        ids = run.case_ids(parent.config)
    except SpecError as exc:
        # Collection must not crash with a traceback: one item reports the spec's problems.
        return [ConformanceItem.from_parent(parent, name=f"{name}[spec]", run=run, case="spec", problem=str(exc))]
    if run.not_applicable:
        parent.config.stash.setdefault(_NOT_APPLICABLE, []).append((name, run.profile, run.not_applicable))
    return [ConformanceItem.from_parent(parent, name=f"{name}[{case}]", run=run, case=case) for case in ids]


_NOT_APPLICABLE = pytest.StashKey[list]()
DEVIATIONS_FIELD = "conformance_deviations"  # on an item's call report: [suite, its report's deviations]


class _DeviationsSummary:
    """The accepted deviations of each suite, from its items' reports (under
    xdist they come from the workers with the test reports), summed per suite
    for the terminal summary."""

    def __init__(self, rootdir: Path) -> None:
        self.rootdir = rootdir
        self.sections: dict[str, list[dict]] = {}

    def pytest_runtest_logreport(self, report) -> None:
        found = getattr(report, DEVIATIONS_FIELD, None)
        if found and report.when == "call":
            suite, deviations = found
            self.sections.setdefault(suite, []).append(deviations)

    def pytest_terminal_summary(self, terminalreporter) -> None:
        from .engine.shards import merge_deviations
        from .reporting._format import deviation_lines

        for suite, sections in self.sections.items():
            merged = merge_deviations(sections) or {}
            report = {"deviations": merged}
            where = relative_to_rootdir(str(merged.get("file")), self.rootdir)
            terminalreporter.write_line(f"conformance: accepted deviations of {suite} ({where}):")
            for line in deviation_lines(report):
                terminalreporter.write_line(f"  {line}")


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    for name, profile, ids in config.stash.get(_NOT_APPLICABLE, []):
        terminalreporter.write_line(
            f"conformance: {len(ids)} scenario(s) of {name} not applicable to profile "
            f"{profile} (written for other parameters): {', '.join(ids)}"
        )


class ConformanceIniFile(pytest.File):
    """The config file listing `conformance_suites`: its suites' items."""

    def collect(self):
        for index, entry in enumerate(self.config.getini(INI_OPTION)):
            try:
                definition = parse_suite_entry(entry)
            except SuiteEntryError as exc:
                problem = f"{self.path.name}: {INI_OPTION} entry {index + 1} ({entry!r}): {exc}"
                yield ConformanceItem.from_parent(
                    self, name=f"{INI_OPTION}[{index + 1}]", run=None, case="entry", problem=problem
                )
                continue
            definition.file = str(self.path)
            name = definition.name or Path(definition.spec).name.removesuffix(".yaml")
            yield from _items(self, name, definition)


# ----------------------------------------------------------------- hooks


def pytest_addoption(parser) -> None:
    group = parser.getgroup("conformance", "lifecycle conformance kit")
    group.addoption(
        "--conformance-profile",
        choices=PROFILE_NAMES,
        default=None,
        help="stateful exploration profile for conformance suite items",
    )
    group.addoption("--conformance-seed", type=int, default=None, help="seed of the stateful exploration")
    group.addoption(
        "--conformance-report-dir",
        default=None,
        metavar="DIR",
        help=f"where each item writes its reports, in DIR/<suite>/<case id>/ (default: {DEFAULT_REPORT_DIR}, "
        "relative to the rootdir)",
    )
    parser.addini(
        REPORT_DIR_INI,
        default="",
        help=f"where conformance items write their reports (default: {DEFAULT_REPORT_DIR}, relative to the rootdir)",
    )
    parser.addini(
        INI_OPTION,
        type="linelist",
        default=[],
        help=f"conformance suites to collect, one per line: SPEC key=value ... (keys: {', '.join(SUITE_KEYS)})",
    )


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", f"{MARKER}: an item of a lifecycle conformance suite")
    config.pluginmanager.register(_DeviationsSummary(config.rootpath), "conformance-deviations")


def pytest_pycollect_makeitem(collector, name, obj):
    if isinstance(obj, SuiteDefinition) and collector.funcnamefilter(name):
        return _items(collector, name, obj)
    return None


def pytest_collect_file(file_path, parent):
    config = parent.config
    if config.inipath is not None and file_path == config.inipath and config.getini(INI_OPTION):
        return ConformanceIniFile.from_parent(parent, path=file_path)
    return None


@pytest.hookimpl(tryfirst=True)  # before -k/-m deselect, so they apply to these items too
def pytest_collection_modifyitems(session, config, items) -> None:
    _key_explorations_by_node(items)
    # The config file is not under testpaths: add its suites when pytest runs the
    # whole project (no file arguments), unless collection already visited it.
    if (
        config.inipath is None
        or not config.getini(INI_OPTION)
        or config.args_source == pytest.Config.ArgsSource.ARGS
        or any(isinstance(item.parent, ConformanceIniFile) for item in items)
    ):
        return
    collector = ConformanceIniFile.from_parent(session, path=config.inipath)
    items.extend(session.genitems(collector))


def _key_explorations_by_node(items) -> None:
    """An exploration test (``exploration_testcase``) keeps its failures in
    Hypothesis's example database under its pytest node id, as HypoFuzz keys
    every test it fuzzes: so a plain ``pytest`` replays what a campaign found."""
    for item in items:
        test = getattr(getattr(item, "obj", None), "hypothesis", None)
        inner = getattr(test, "inner_test", None)
        if inner is not None and getattr(inner, "_conformance_exploration", False):
            from .engine.hypothesis_support import key_database  # Hypothesis is loaded already here

            key_database(inner, item.nodeid.encode())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if not isinstance(item, ConformanceItem):
        return report
    # A skip raised inside the kit would point at this plugin; point at the suite instead.
    if report.skipped and isinstance(report.longrepr, tuple):
        path, line, _ = item.reportinfo()
        report.longrepr = (str(path), (line or 0) + 1, report.longrepr[2])
    deviations = item.result.report.get("deviations") if item.result is not None else None
    if call.when == "call" and deviations and item.run is not None:
        definition = item.run.definition
        setattr(report, DEVIATIONS_FIELD, [definition.name or definition.spec, deviations])
    return report

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
The items run on the same engine as the ``conformance`` command; under
pytest-xdist each worker starts its own instance of the implementation.
"""

from __future__ import annotations

import dataclasses
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

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
            if not value.isdigit():
                raise SuiteEntryError(f"seed={value!r} must be a whole number")
            suite.seed = int(value)
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


def _resolve_spec(spec: str, bases: list[Path]) -> str:
    """The spec file: relative to the declaring test file, then the rootdir, then an installed spec's name."""
    from .specs import SpecNotFound, resolve_spec

    try:
        for base in bases:
            found = resolve_spec(spec, relative_to=str(base))
            if Path(found).is_file():
                return found
        return resolve_spec(spec)  # what the user wrote (loading then says it cannot be read)
    except SpecNotFound:
        return spec  # loading says it cannot be read; the item shows that


class CaseFailed(Exception):
    """A conformance item failed; the message is the kit's failure text."""


class _SuiteRun:
    """One suite in one pytest process: its spec, and one implementation instance
    started by the first item that runs and closed at the end of the session."""

    def __init__(self, definition: SuiteDefinition, rootdir: Path):
        self.definition = definition
        base = Path(definition.file).resolve().parent if definition.file else rootdir
        self.base = base
        self.spec_path = _resolve_spec(definition.spec, [base, rootdir])
        self.state: dict[str, Any] = {}
        self.not_applicable: list[str] = []
        self.profile = "default"

    def case_ids(self, config: pytest.Config) -> list[str]:
        """Scenario ids (+ stateful) that apply to the implementation; raises SpecError.

        Which scenarios apply depends on the parameters the implementation
        declares, so the implementation is started here; scenarios written for
        other parameters are no items at all (counted in the terminal summary).
        If it cannot start, every item fails with the reason."""
        from statemachines import load_spec

        from .engine.scenarios import not_applicable_reason

        spec = load_spec(self.spec_path)
        ids = [scenario.id for scenario in spec.scenarios]
        try:
            _, prepared = self._prepared(config)
        except CaseFailed:
            pass
        else:
            self.not_applicable = [
                s.id for s in spec.scenarios if not_applicable_reason(prepared.spec, s, prepared.params) is not None
            ]
            self.profile = prepared.identity.get("profile") or "default"
            ids = [i for i in ids if i not in self.not_applicable]
        return ids + [STATEFUL_ID] if self.definition.stateful else ids

    def _prepared(self, config: pytest.Config):
        from statemachines import SpecError

        from .engine.deviations import DeviationsError
        from .engine.runner import RunConfig, prepare
        from .errors import AdapterLoadError

        if "error" in self.state:
            raise CaseFailed(self.state["error"])
        if "prepared" not in self.state:
            d = self.definition
            adapter_cli = str(self.base / d.adapter_cli) if d.adapter_cli else None
            run_config = RunConfig(
                spec_path=self.spec_path,
                adapter=d.adapter,
                adapter_options=dict(d.adapter_options),
                adapter_cmd=d.adapter_cmd,
                adapter_cli=adapter_cli,
                profile=config.getoption("--conformance-profile") or d.profile,
                seed=config.getoption("--conformance-seed") or d.seed,
                report_dir=None,
                timeout_s=d.timeout_s,
                deviations=str(self.base / d.deviations) if d.deviations else None,
            )
            try:
                if d.adapter_cmd:
                    # The program runs where the suite was declared, so "node adapter.js" works
                    # from any directory pytest is started in.
                    from statemachines import load_spec

                    from .adapters.stdio import stdio_factory

                    run_config = dataclasses.replace(
                        run_config,
                        adapter_factory=stdio_factory(d.adapter_cmd, load_spec(self.spec_path), cwd=str(self.base)),
                    )
                self.state["prepared"] = prepare(run_config)
                deviations = self.state["prepared"].session.deviations
                if deviations is not None and deviations.expired:  # fails every item until renewed or fixed
                    self.state["prepared"].session.close()
                    raise DeviationsError([f"{p['where']}: {p['message']}" for p in deviations.expired_problems()])
            except (SpecError, AdapterLoadError, DeviationsError) as exc:
                self.state["error"] = f"cannot start the conformance run: {exc}"
                raise CaseFailed(self.state["error"]) from None
            self.state["config"] = run_config
            config.add_cleanup(self.state["prepared"].session.close)
            if self.state["prepared"].session.deviations is not None:  # listed in the terminal summary
                config.stash.setdefault(_DEVIATIONS, []).append((self.definition, self.state["prepared"].session))
        return self.state["config"], self.state["prepared"]

    def run_case(self, config: pytest.Config, case: str) -> None:
        from .engine.runner import run_command
        from .engine.scenarios import run_scenario
        from .engine.stateful import run_stateful
        from .reporting._format import failure_text

        run_config, prepared = self._prepared(config)
        capabilities = prepared.identity.get("capabilities") or {}
        report = {"replay": None}
        if case == STATEFUL_ID:
            explored = run_stateful(
                prepared.spec,
                prepared.session,
                profile=run_config.profile,
                seed=run_config.seed,
                capabilities=capabilities,
            )
            if explored.failure is not None:
                explored.failure.replay = (
                    f"{run_command(run_config, prepared.target)} --profile "
                    f"{run_config.profile} --seed {run_config.seed} --no-scenarios"
                )
                raise CaseFailed(failure_text(explored.failure.to_dict(), report))
            return
        scenario = next(s for s in prepared.spec.scenarios if s.id == case)
        outcome = run_scenario(prepared.session, scenario, capabilities)
        if outcome.failure is not None:
            outcome.failure.replay = f"{run_command(run_config, prepared.target)} --scenario {case}"
            raise CaseFailed(failure_text(outcome.failure.to_dict(), report))
        if outcome.verdict != "pass":  # skip, or not applicable to this implementation
            pytest.skip(outcome.note or outcome.verdict)


class ConformanceItem(pytest.Item):
    """One scenario (or the exploration) of a suite, reported where the suite was declared."""

    def __init__(self, *, run: _SuiteRun | None, case: str, problem: str | None = None, **kwargs):
        super().__init__(**kwargs)
        self.run, self.case, self.problem = run, case, problem
        self.add_marker(MARKER)

    def runtest(self) -> None:
        if self.problem is not None or self.run is None:  # a suite that cannot run has a problem instead
            raise CaseFailed(self.problem or "no run")
        self.run.run_case(self.config, self.case)

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, CaseFailed):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        definition = self.run.definition if self.run else None
        path = Path(definition.file) if definition and definition.file else self.path
        return path, (definition.line if definition else 0), self.name


def _items(parent, name: str, definition: SuiteDefinition) -> list[ConformanceItem]:
    from statemachines import SpecError

    run = _SuiteRun(definition, parent.config.rootpath)
    try:
        ids = run.case_ids(parent.config)
    except SpecError as exc:
        # Collection must not crash with a traceback: one item reports the spec's problems.
        return [ConformanceItem.from_parent(parent, name=f"{name}[spec]", run=run, case="spec", problem=str(exc))]
    if run.not_applicable:
        parent.config.stash.setdefault(_NOT_APPLICABLE, []).append((name, run.profile, run.not_applicable))
    return [ConformanceItem.from_parent(parent, name=f"{name}[{case}]", run=run, case=case) for case in ids]


_NOT_APPLICABLE = pytest.StashKey[list]()
_DEVIATIONS = pytest.StashKey[list]()


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    from .reporting._format import deviation_lines

    for definition, session in config.stash.get(_DEVIATIONS, []):
        report = {"deviations": session.deviations.to_report()}
        terminalreporter.write_line(
            f"conformance: accepted deviations of {definition.name or definition.spec} "
            f"({report['deviations']['file']}):"
        )
        for line in deviation_lines(report):
            terminalreporter.write_line(f"  {line}")
        for problem in session.deviations.expired_problems():
            terminalreporter.write_line(f"  {problem['where']}: {problem['message']}")
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
    parser.addini(
        INI_OPTION,
        type="linelist",
        default=[],
        help=f"conformance suites to collect, one per line: SPEC key=value ... (keys: {', '.join(SUITE_KEYS)})",
    )


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", f"{MARKER}: an item of a lifecycle conformance suite")


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
    # A skip raised inside the kit would point at this plugin; point at the suite instead.
    if isinstance(item, ConformanceItem) and report.skipped and isinstance(report.longrepr, tuple):
        path, line, _ = item.reportinfo()
        report.longrepr = (str(path), (line or 0) + 1, report.longrepr[2])
    return report

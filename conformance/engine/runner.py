"""One conformance run: spec + implementation -> report. The CLI and the
pytest plugin both go through here, so they cannot drift apart.

A run ends one way whatever happens: the previous reports are removed first;
an interrupt (``Interrupted``, or a KeyboardInterrupt where the kit does not
own SIGINT) or a bug of the kit's is caught, the implementation closed (a
stdio program's whole process tree), and every report written with what
finished and the verdict ``interrupted`` (exit 128 + signal) or ``error``
(``internal-error``, exit 2). ``--max-failures N`` explores again (the next
seed) with the failures found so far masked (``Session.known_failures``); a
new failure whose steps, replayed with the masks lifted, first fail as a
reported one is that bug's consequence and is not reported
(``_search_more``). Writing the reports is the last step and is guarded
(``_write``): trouble with the directory or disk (``ReportWriteError``)
keeps the verdict, a bug in a writer makes it ``error``. A run in parts
(``RunConfig.shard``, ``engine/shards.py``) runs part of the scenarios and
1/N of the examples with a seed derived per part.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import shlex
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from statemachines import ExpressionError, Spec, SpecError, load_replay_file, load_scenario_file, resolve_parameters
from statemachines.language.expressions import run_cost_budget

from ..adapters.python import adapter_factory
from ..errors import AdapterLoadError, HypothesisUnsupported
from ..reporting.safe_files import open_new, write_atomic
from ..specs import SpecNotFound, resolve_spec, spec_target_problem
from .attribution import orderings_in_play
from .budgets import REDUCE_REPLAYS, CallGuard, ReplayBudget
from .causes import group_by_cause, length_of, steps_by_operation
from .deviations import DeviationsError
from .failures import DATA_ERRORS, NOT_REPRODUCING, Failure, same_bug, signature
from .hunt import HuntSettings, met_again, more_failures, shorter_met
from .interrupts import acknowledge, checkpoint, deferred, pending
from .loaded_specs import load_spec_once
from .model_trail import add_model_trail
from .profiles import PROFILES
from .run_result import ImplementationInfo, NotApplicable, Problem, RunResult, ScenarioEntry, SpecInfo
from .scenarios import NOT_APPLICABLE, RACE_RUNS, ScenarioOutcome, not_applicable_reason, run_scenario, scenario_cost
from .session import DEFAULT_TIMEOUT_S, Session, _CallTimeout

__all__ = [
    "RunConfig",
    "Progress",
    "run_conformance",
    "run_command",
    "prepare",
    "Prepared",
    "KIT_VERSION",
    "hand_over_spec",
    "new_report",
    "clear_report_files",
    "write_report_files",
    "mark_interrupted",
]

KIT_VERSION = "0.1.0"


@dataclass(frozen=True)
class RunConfig:
    """What one run checks and how: built once by a front door (``conformance
    run`` from its options, the pytest plugin, ``mutants``), never changed
    after; a run in parts derives each part's with ``dataclasses.replace``."""

    spec_path: str
    adapter: str | None = None  # module:attribute; None = the spec's reference implementation
    adapter_options: dict = field(default_factory=dict)
    adapter_factory: Callable | None = None  # an already-built factory (mutants, tests)
    adapter_label: str | None = None
    adapter_cmd: str | None = None  # a program speaking the stdio protocol (docs/adapter-protocol.md)
    adapter_cli: str | None = None  # a command adapter config: a command-line tool (docs/command-adapter.md)
    profile: str = "ci"
    seed: int = 1
    report_dir: str | None = "reports"
    scenarios: bool = True
    stateful: bool = True
    only: tuple[str, ...] = ()
    replay_file: str | None = None
    # A team's own scenario files (`scenarios:` lists, e.g. a kept counterexample), after the spec's.
    scenario_files: tuple[str, ...] = ()
    timeout_s: float = DEFAULT_TIMEOUT_S
    # Seconds of shrinking after which an implementation slow per call stops it, and what its
    # calls slower than the guard's second may take in shrinking, and again in all the
    # run's reductions (engine/budgets.py; None: the profile's; 0: no shrinking, and no
    # reduction unless reduce_replays says otherwise, which then gets the profile's).
    shrink_s: float | None = None
    # Replays reducing a found failure may spend (engine/reduce.py, engine/budgets.py);
    # None: the profile's (none when shrink_s is 0); 0: no reduction.
    reduce_replays: int | None = None
    # runs of each scenario that races calls (one without its own `race_runs:`)
    race_runs: int = RACE_RUNS
    min_coverage: dict = field(default_factory=dict)  # category -> minimum percent (conformance.engine.coverage)
    record_dir: str | None = None  # write each scenario's trace here (docs/traces.md)
    deviations: str | None = None  # a deviations file: accepted differences, avoided inputs (docs/deviations.md)
    # Hypothesis's example database: a directory, "none", or None for one under
    # the report directory (per spec, parameters and implementation).
    example_db: str | None = None
    # How many distinct exploration failures to look for (kind, operation, path):
    # after one, the exploration goes on with it masked (divergences only).
    max_failures: int = 1
    # What an in-process implementation prints, per case (engine/output_capture.py;
    # the CLI starts one, since it redirects the process's fds 1 and 2).
    output_capture: Any = None
    # A run in parts (engine/shards.py, docs/ci.md): ``shard`` = (I, N) runs the
    # I-th of N parts (its scenarios and its examples, seed derived per part);
    # ``exploration_parts`` = N runs all N parts of the exploration one after
    # another in this process: the same examples and seeds as N shards merged.
    shard: tuple[int, int] | None = None
    # ``run --workers N``: a directory the N workers share. Each runs every
    # scenario it claims there before another worker does (engine/shards.py:
    # claim_item), the costliest first, and leaves the cheapest until its part
    # of the exploration is done (CLAIM_RESERVE), so the workers end together.
    scenario_claims: str | None = None
    exploration_parts: int = 1
    # Where the default example databases go (None: REPORT_DIR/example-db);
    # worker processes write theirs under the final report directory.
    example_db_base: str | None = None
    # Hypothesis's observability (docs/running.md): every test case of the
    # exploration appended to this file as a JSON line, with each step's
    # operation, outcome and transitions as features (None: only when
    # Hypothesis's own switch is on, into its own directory).
    observations: str | None = None
    # The percent of a pool-drawn argument's draws that leave the pool: near misses of its
    # values and values of its JSON Schema (engine/stateful.py _BeyondPools); None: the
    # profile's (engine/profiles.py BEYOND_POOLS), 0: the pools' values alone.
    beyond_pools: float | None = None


def _reduce_replays(config: RunConfig) -> int:
    """Replays reducing a found failure may spend."""
    if config.reduce_replays is not None:
        return config.reduce_replays
    return 0 if config.shrink_s == 0 else REDUCE_REPLAYS[config.profile]


def _reduction_guard(config: RunConfig) -> CallGuard:
    """The time guard every reduction of a run shares (engine/budgets.py): the
    calls slower than its limit each may take the run's ``shrink_s`` in all
    (the profile's when shrinking is off or not set), once for them all."""
    allowance = config.shrink_s or PROFILES[config.profile]["shrink_s"]
    return CallGuard(allowance_s=allowance)


class Progress:
    """Callbacks the CLI uses to show progress; all optional."""

    def start(self, total_scenarios: int, stateful: bool) -> None: ...
    def scenario_done(self, outcome: ScenarioOutcome) -> None: ...
    def stateful_started(self, max_examples: int) -> None: ...
    def stateful_example(self, count: int) -> None: ...
    def stateful_phase(self, phase: str, failures: int) -> None:
        """The exploration entered ``phase`` (exploring, shrinking, reducing,
        looking for more) with ``failures`` found so far."""


@dataclass
class Prepared:
    spec: Spec
    session: Session
    identity: dict
    params: dict
    target: str


def _report_skeleton(config: RunConfig) -> dict:
    return _new_result(config).to_report()


def _new_result(config: RunConfig) -> RunResult:
    return RunResult(
        spec=SpecInfo(path=config.spec_path),
        implementation=ImplementationInfo(
            adapter=config.adapter_label or config.adapter or config.adapter_cmd or config.adapter_cli
        ),
        kit_version=KIT_VERSION,
    )


def new_report(config: RunConfig) -> dict:
    """An empty report (verdict error until something better is known), for
    other front doors that produce the same reports (check-trace)."""
    return _report_skeleton(config)


def clear_report_files(report: dict, report_dir: str) -> None:
    problem = _cleared(report_dir)
    if problem is not None:
        report["problems"].append(problem.to_dict())


def write_report_files(report: dict, report_dir: str) -> None:
    _write(report, report_dir)


def mark_interrupted(report: dict, exc: KeyboardInterrupt, done: str) -> None:
    """Verdict ``interrupted`` for a front door that tracks its own progress."""
    from .interrupts import Interrupted, interrupt_exit_code

    report["verdict"], report["exit_code"] = "interrupted", interrupt_exit_code(exc)
    cause = f"interrupted by {exc.signal_name}" if isinstance(exc, Interrupted) else "a KeyboardInterrupt was raised"
    report["problems"].append(
        {"kind": "interrupted", "where": None, "message": f"{cause}: {done}. The reports hold only what finished."}
    )


def run_command(config: RunConfig, target: str) -> str:
    """``conformance run SPEC <adapter args>``: the start of every replay command."""
    files = "".join(f" --scenarios-file {shlex.quote(path)}" for path in config.scenario_files)
    return f"conformance run {shlex.quote(config.spec_path)}{files} {_adapter_args(config, target)}"


def _adapter_args(config: RunConfig, target: str) -> str:
    if config.adapter_cmd is not None:
        parts = ["--adapter-cmd", config.adapter_cmd]
    else:
        parts = ["--adapter-cli", config.adapter_cli] if config.adapter_cli is not None else ["--adapter", target]
        for key, value in sorted(config.adapter_options.items()):
            parts += ["--adapter-opt", f"{key}={value}"]
    if config.deviations:
        parts += ["--deviations", config.deviations]
    return " ".join(shlex.quote(p) for p in parts)


# A spec the parent of forked workers loaded (``run --workers N``): the
# workers, forked with a copy of it, run on it instead of loading the file
# again (a tenth of a second each, while they compete for the cores).
_HANDED_OVER: dict[str, Any] = {}


def hand_over_spec(path: str, spec: Any) -> None:
    """Have the next ``prepare`` of the spec file ``path`` in this process (or
    in a process forked from it) use ``spec``, as loaded from that file; None:
    no longer (once the workers are forked)."""
    if spec is None:
        _HANDED_OVER.pop(os.path.realpath(path), None)
    else:
        _HANDED_OVER[os.path.realpath(path)] = spec


def prepare(config: RunConfig) -> Prepared:
    """Load the spec and start the implementation; raise SpecError or AdapterLoadError."""
    path = resolve_spec(config.spec_path)
    spec = _HANDED_OVER.pop(os.path.realpath(path), None) or load_spec_once(path)
    target = (
        config.adapter_label
        or config.adapter
        or config.adapter_cmd
        or config.adapter_cli
        or spec.implementations.get("reference")
    )
    session = _start(spec, _factory(config, spec, target), config.timeout_s)
    identity = _identity(session)
    params = _fit_parameters(session, spec, identity)
    if config.deviations:
        _load_deviations(session, spec, config.deviations)
    return Prepared(spec, session, identity, params, target or "")


def _factory(config: RunConfig, spec: Spec, target: str | None) -> Callable:
    """What builds the implementation's adapter: the config's own factory, a
    stdio program, a command adapter, or a Python target (the spec's reference
    by default, which must be one the kit trusts)."""
    if config.adapter_factory is not None:
        return config.adapter_factory
    if config.adapter_cmd is not None:
        if config.adapter:
            raise AdapterLoadError("give either an adapter (module:attribute) or an adapter command, not both")
        from ..adapters.stdio import stdio_factory

        return stdio_factory(config.adapter_cmd, spec)
    if config.adapter_cli is not None:
        if config.adapter:
            raise AdapterLoadError("give either an adapter (module:attribute) or a command adapter config, not both")
        from ..adapters.command import command_factory

        return command_factory(config.adapter_cli, config.adapter_options)
    if not target:
        raise AdapterLoadError(f"spec {spec.id} names no reference implementation; pass --adapter module:Attribute")
    if not (config.adapter_label or config.adapter):
        problem = spec_target_problem(target, spec=spec)
        if problem:
            raise AdapterLoadError(problem)  # a spec is data: it runs no code of its choosing
    return adapter_factory(target, config.adapter_options)


def _start(spec: Spec, factory: Callable, timeout_s: float) -> Session:
    watched = _WatchedStart(factory)
    try:
        return Session(spec, spec.default_parameters(), watched, timeout_s=timeout_s)
    except AdapterLoadError as exc:  # "did not start": say what the constructor was doing when time ran out
        where = watched.hung_in()
        if where is None:
            raise
        raise AdapterLoadError(f"{exc}: its constructor was still in {where}") from None


def _identity(session: Session) -> dict:
    """The implementation's describe() answer, checked; the session is closed when it fails."""
    try:
        identity = session.describe()
    except AdapterLoadError:  # already says what went wrong (e.g. a refused stdio handshake)
        session.close()
        raise
    except Exception as exc:
        session.close()
        raise AdapterLoadError(f"describe() failed: {type(exc).__name__}: {exc}") from None
    problem = _identity_problem(identity)
    if problem:
        session.close()
        raise AdapterLoadError(problem)
    return identity


def _fit_parameters(session: Session, spec: Spec, identity: dict) -> dict:
    """The spec's parameters under the implementation's declared profile, set on the session."""
    params, problems = resolve_parameters(spec, identity.get("profile"), identity.get("parameters") or {})
    if problems:
        session.close()
        raise AdapterLoadError("the implementation's declared profile does not fit the spec: " + "; ".join(problems))
    session.params = params
    session.model.params = params
    return params


def _load_deviations(session: Session, spec: Spec, path: str) -> None:
    from .deviations import load_deviations

    try:
        session.deviations = load_deviations(path, spec=spec)
    except BaseException:
        session.close()
        raise


class _WatchedStart:
    """The implementation's factory, noting where it was if it did not return
    in time (``hung_in``): "the adapter did not start" alone does not say that
    a constructor was stuck in, say, its own reset()."""

    def __init__(self, factory: Callable) -> None:
        self.factory = factory
        self.thread: int | None = None
        self.stuck: list[traceback.FrameSummary] | None = None
        self.returned = False

    def __call__(self):
        self.thread = threading.get_ident()
        try:
            adapter = self.factory()
        except _CallTimeout as exc:  # the timer interrupted it on the main thread: where it was is in the traceback
            self.stuck = traceback.extract_tb(exc.__traceback__)[1:]
            raise
        self.returned = True
        return adapter

    def hung_in(self) -> str | None:
        """Where the constructor was when it timed out ("C.reset (f.py:9), called
        from C.__init__ (f.py:5)"), or None if it did not time out."""
        import sys

        frames: list[traceback.FrameSummary] | None = self.stuck
        if frames is None and not self.returned and self.thread is not None and self.thread != threading.get_ident():
            frame = sys._current_frames().get(self.thread)  # abandoned in its worker thread, still stuck
            frames = traceback.extract_stack(frame) if frame else []
            starts = [i for i, f in enumerate(frames) if f.filename == __file__ and f.name == "__call__"]
            frames = frames[starts[-1] + 1 :] if starts else None
        own = [f for f in frames or () if not _library_file(f.filename)]
        if not own:
            return None
        chain = [f"{f.name} ({Path(f.filename).name}:{f.lineno})" for f in reversed(own[-3:])]
        return ", called from ".join(chain)


def _library_file(filename: str) -> bool:
    """The standard library's or the kit's own code (not the implementation's)."""
    import sysconfig

    kit = str(Path(__file__).resolve().parents[1])
    return filename.startswith((sysconfig.get_paths()["stdlib"], kit, "<frozen"))


def _identity_problem(identity) -> str | None:
    """What is wrong with an implementation's describe() answer, or None."""
    if not isinstance(identity, dict):
        return f"describe() must return an object, got {type(identity).__name__}"
    from ..adapters.json_values import json_problem

    found = json_problem(identity)
    if found:
        return f"describe() answered something JSON cannot carry: {found[0]} {found[1]}"
    for name, kinds, label in (
        ("name", (str, type(None)), "a string"),
        ("version", (str, type(None)), "a string"),
        ("profile", (str, type(None)), "a string or null"),
        ("parameters", (dict, type(None)), "an object"),
        ("capabilities", (dict, type(None)), "an object"),
    ):
        if not isinstance(identity.get(name), kinds):
            return f"describe() returned `{name}` as {type(identity.get(name)).__name__}; it must be {label}"
    for name, value in (identity.get("capabilities") or {}).items():
        if not isinstance(value, bool):
            return f"describe() returned capability `{name}` = {value!r}; it must be true or false"
    return None


def run_conformance(config: RunConfig, progress: Progress | None = None) -> dict:
    """Run everything the config asks for and return the report (also written
    to ``config.report_dir`` when set). Never raises for bad input: problems
    become an ``error`` verdict with exit code 2. A KeyboardInterrupt (Ctrl-C,
    or :class:`~conformance.engine.interrupts.Interrupted` for a signal) stops
    the run: what finished is reported with the verdict ``interrupted``.

    The phases, each over one :class:`RunResult`: clear the previous reports,
    prepare (load the spec, start the implementation), check (describe, the
    scenario matrix, the exploration with its reduction, hunt and grouping of
    failures by cause, the verdict), close the implementation, then write the
    reports from ``RunResult.to_report()``."""
    progress = progress or Progress()
    started = time.perf_counter()
    result = _new_result(config)
    if config.shard is not None:  # which part of which run (merge-reports checks it)
        from .shards import shard_info

        result.shard = shard_info(
            *config.shard,
            seed=config.seed,
            profile=config.profile,
            rerun=f"conformance run {shlex.quote(config.spec_path)}",
            min_coverage=config.min_coverage,
        )
    if config.report_dir:
        _clear_reports(config.report_dir, result, keep=_inputs(config))
    tracker = _Tracker()
    prepared = None
    threads_before = set(threading.enumerate())
    # a signal once the checks are over is kept: it must not stop the reports; the expressions
    # of the whole run share one cost budget (docs/trust-model.md)
    with deferred(), run_cost_budget():
        try:
            with deferred(False):  # the checks: a signal stops them
                prepared = _prepared_or_problems(config, result)
                if prepared is not None:
                    _run_or_problems(config, prepared, result, progress, tracker)
        except KeyboardInterrupt as exc:
            acknowledge()
            _interrupted(result, exc, tracker)
        except BaseException as exc:
            _internal_error(config, result, exc, tracker)
        if prepared is not None:
            _close(prepared.session, result, tracker)
            _threads_left(result, threads_before)
            if prepared.session.deviations is not None:
                result.deviations = prepared.session.deviations.to_report()  # also when interrupted or failed
        late = pending()
        if late is not None and result.verdict != "interrupted":  # received after the checks, while closing
            tracker.phase = "closing"
            _interrupted(result, late, tracker)
        result.duration_s = round(time.perf_counter() - started, 3)
        report = result.to_report()
        if config.report_dir:
            _write(report, config.report_dir)
    return report


def _adapter_named(config: RunConfig) -> str | None:
    return config.adapter or config.adapter_cmd or config.adapter_cli


def _prepared_or_problems(config: RunConfig, result: RunResult) -> Prepared | None:
    """``prepare``; None when the spec, the implementation or the deviations
    file cannot be loaded, each problem in the result."""
    try:
        return prepare(config)
    except SpecError as exc:
        result.problems = [_spec_problem(p) for p in exc.problems]
    except SpecNotFound as exc:
        result.problems = [Problem("spec-error", str(exc), config.spec_path)]
    except AdapterLoadError as exc:
        result.problems = [Problem("adapter-error", str(exc), _adapter_named(config))]
    except DeviationsError as exc:
        result.problems = [Problem("deviations-error", line, config.deviations) for line in exc.problems]
    return None


def _spec_problem(problem: Any) -> Problem:
    """A problem of the spec (``SpecError.problems``), its hint in the message."""
    return Problem("spec-error", problem.message + (f" (hint: {problem.hint})" if problem.hint else ""), problem.where)


def _run_or_problems(
    config: RunConfig, prepared: Prepared, result: RunResult, progress: Progress, tracker: _Tracker
) -> None:
    """``_run``; a spec or an implementation that fails the run as a whole
    (a broken replay file, an ``assumes`` that errs, an adapter that cannot
    restart) makes the verdict ``error``, the problem in the result."""
    try:
        _run(config, prepared, result, progress, tracker)
    except SpecError as exc:  # e.g. a broken replay file
        result.set_verdict("error", 2)
        result.problems += [_spec_problem(p) for p in exc.problems]
    except ExpressionError as exc:  # a spec expression failed outside any one step (e.g. an `assumes`)
        result.set_verdict("error", 2)
        result.add_problem("spec-error", f"the spec failed: {exc}", exc.where or None)
    except AdapterLoadError as exc:
        result.set_verdict("error", 2)
        result.add_problem("adapter-error", str(exc), _adapter_named(config))
    except HypothesisUnsupported as exc:  # the installed Hypothesis lacks what the exploration draws with
        result.set_verdict("error", 2)
        result.add_problem("environment-error", str(exc), "hypothesis")


def _internal_error(config: RunConfig, result: RunResult, exc: BaseException, tracker: _Tracker) -> None:
    """A fault of the kit's own: verdict ``error``, where the run was, the
    traceback on the kit's own stderr with CONFORMANCE_DEBUG=1."""
    result.set_verdict("error", 2)
    result.add_problem(
        "internal-error",
        f"internal error in the conformance kit: {_exception_text(exc)} (set CONFORMANCE_DEBUG=1 to see the traceback)",
        tracker.where(),
    )
    if os.environ.get("CONFORMANCE_DEBUG"):  # on the kit's own stderr, not the implementation's (captured)
        traceback.print_exc(file=getattr(config.output_capture, "kit_stderr", None))


class _Tracker:
    """Where the run stands, so an interrupt or a crash can say what finished."""

    def __init__(self) -> None:
        self.phase = "start"
        self.scenario: str | None = None
        self.scenarios_total = 0
        self.scenarios_done = 0
        self.examples = 0
        self.profile: str | None = None
        self.seed: int | None = None
        self.started = time.perf_counter()
        self.describe_failure: Callable | None = None  # set once the run knows its replay commands
        self.faults = 0  # close() failures reported (they fail the run)

    def where(self) -> str | None:
        if self.phase == "scenarios" and self.scenario:
            return f"scenario {self.scenario}"
        return "stateful exploration" if self.phase in ("stateful", "searching") else None


def _interrupted(result: RunResult, exc: KeyboardInterrupt, tracker: _Tracker) -> None:
    from .interrupts import Interrupted, interrupt_exit_code

    result.set_verdict("interrupted", interrupt_exit_code(exc))
    if isinstance(exc, Interrupted):
        cause = f"interrupted by {exc.signal_name}"
    else:  # no signal handler of the kit's saw it: the implementation (or a bare Ctrl-C in a library run)
        cause = "a KeyboardInterrupt was raised" + (f" inside {tracker.where()}" if tracker.where() else "")
    done = f"{tracker.scenarios_done} of {tracker.scenarios_total} scenarios finished"
    if tracker.phase == "scenarios" and tracker.scenario:
        done += f"; scenario {tracker.scenario} was running and is not reported"
    if tracker.phase == "searching":  # the failures found are complete; others may exist
        done += _searching_so_far(result, exc, tracker)
    elif tracker.phase == "stateful":
        done += _exploring_so_far(result, exc, tracker)
    elif tracker.phase == "start":
        done = "before any check ran"
    elif tracker.phase == "closing":  # the checks had all ended; the reports hold them
        done += "; every check had ended and the implementation was being closed"
    result.add_problem("interrupted", f"{cause}: {done}. The reports hold only what finished.", tracker.where())


def _carry_so_far(exc: BaseException, **found: Any) -> None:
    """Attach what the exploration found so far to an interrupt on its way up:
    ``stateful_so_far`` (its outcome), ``more_so_far`` (the further distinct
    failures); ``_interrupted`` reports them (engine/stateful.py attaches
    ``stateful_so_far`` too)."""
    vars(exc).update(found)


def _searching_so_far(result: RunResult, exc: KeyboardInterrupt, tracker: _Tracker) -> str:
    """Interrupted while looking for further distinct failures: those found, reported."""
    so_far, more = vars(exc)["stateful_so_far"], vars(exc).get("more_so_far", [])  # both set by _search_more
    found = [so_far.failure, *more]
    sorting = "sorting_by_cause" in vars(exc)  # set by _Run.keep_what_was_found
    so_far.failure.message += (
        "\n(the run was interrupted while the failures found were sorted by cause: "
        "failures listed apart may share a cause)"
        if sorting
        else "\n(the run was interrupted while the exploration looked for further "
        "distinct failures (--max-failures): there may be more)"
    )
    if tracker.describe_failure is not None:
        tracker.describe_failure(so_far.failure)
    result.stateful = {
        "verdict": "interrupted",
        "profile": tracker.profile,
        "seed": tracker.seed,
        "examples": so_far.examples,
        "steps": so_far.steps,
        "duration_s": round(time.perf_counter() - tracker.started, 3),
        "coverage": None,
        "failure": so_far.failure.to_dict(),
    }
    if more:
        result.stateful["more_failures"] = [failure.to_dict() for failure in more]
    now = "was sorting them by cause" if sorting else "was looking for more"
    return f"; the stateful exploration had found {len(found)} distinct failure(s), reported, and {now}"


def _exploring_so_far(result: RunResult, exc: KeyboardInterrupt, tracker: _Tracker) -> str:
    """Interrupted while exploring (or shrinking a failure): the failure found so far, if any."""
    so_far = getattr(exc, "stateful_so_far", None)
    if so_far is not None and so_far.failure is not None and tracker.describe_failure is not None:
        so_far.failure.message += (
            "\n(the run was interrupted while the exploration was shrinking it: "
            "this is the shortest failing sequence found so far)"
        )
        tracker.describe_failure(so_far.failure)
        done = (
            f"; the stateful exploration had run {so_far.examples} examples and found a failure "
            f"(reported, not fully shrunk)"
        )
    else:
        done = f"; the stateful exploration had run {tracker.examples} examples without a failure"
    result.stateful = {
        "verdict": "interrupted",
        "profile": tracker.profile,
        "seed": tracker.seed,
        "examples": so_far.examples if so_far else tracker.examples,
        "steps": so_far.steps if so_far else None,
        "duration_s": round(time.perf_counter() - tracker.started, 3),
        "coverage": None,
        "failure": so_far.failure.to_dict() if so_far and so_far.failure else None,
    }
    return done


def _close(session: Session, result: RunResult, tracker: _Tracker) -> None:
    """Close the implementation (stdio programs and their process trees too),
    whatever it does; an interrupt now does not stop the reports."""
    try:
        session.close()
    except KeyboardInterrupt as exc:
        if result.verdict != "interrupted":
            tracker.phase = "closing"
            _interrupted(result, exc, tracker)
    except Exception as exc:
        result.add_problem("adapter-error", f"closing the implementation failed: {type(exc).__name__}: {exc}")
    _faults(session, result, "closing the implementation", tracker)


def _faults(session: Session, result: RunResult, where: str, tracker: _Tracker) -> None:
    """close() hung, raised or called sys.exit (at the end, or before a
    restart): the implementation's failure. A run that passed fails."""
    for kind, message in session.take_faults():
        tracker.faults += 1
        result.add_problem(kind, message, where)
        if result.verdict == "pass":
            result.set_verdict("fail", 1)


def _threads_left(result: RunResult, before: set, grace_s: float = 0.5) -> None:
    """Say so when the implementation left non-daemon threads running: they
    would keep a Python process alive after the verdict (the CLI exits anyway)."""
    deadline = time.monotonic() + grace_s
    left = []
    for thread in threading.enumerate():
        if thread in before or thread.daemon or thread is threading.current_thread():
            continue
        thread.join(max(0.0, deadline - time.monotonic()))
        if thread.is_alive():
            left.append(thread.name)
    if left:
        result.add_problem(
            "threads-left",
            f"the implementation left {len(left)} non-daemon thread(s) running after close(): "
            f"{', '.join(sorted(left)[:10])}{' ...' if len(left) > 10 else ''}. They would keep a "
            f"Python process alive after the verdict; `conformance` exits with the verdict's code "
            f"anyway (stop them in close(), or make them daemon threads)",
            "closing the implementation",
        )


def _exception_text(exc: BaseException) -> str:
    """``Type: first line of the message``, even for an exception whose ``__str__`` fails."""
    try:
        lines = str(exc).strip().splitlines()
    except Exception:
        lines = ["<its message could not be printed>"]
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


def _inputs(config: RunConfig) -> list[str]:
    """The files a run reads that may sit in its report directory (a replayed
    counterexample above all): clearing the old reports never removes them."""
    return [path for path in (config.replay_file, config.spec_path, config.deviations, *config.scenario_files) if path]


def _clear_reports(report_dir: str, result: RunResult, keep: list[str] | None = None) -> None:
    """Remove the previous run's reports first: a run that ends early must
    never leave an earlier verdict behind for CI to publish."""
    problem = _cleared(report_dir, keep)
    if problem is not None:
        result.problems.append(problem)


def _cleared(report_dir: str, keep: list[str] | None = None) -> Problem | None:
    """Remove the previous reports from ``report_dir``, never the files in ``keep``;
    the problem when they could not be removed."""
    from ..reporting import clear_reports

    try:
        clear_reports(report_dir, keep or ())
    except OSError as exc:
        return Problem("report-error", f"could not remove the previous reports: {exc}", str(report_dir))
    return None


def _write(report: dict, report_dir: str) -> None:
    """Write the reports. Trouble with the directory or the disk (an
    unwritable directory, a directory where a file should be, a file-size
    limit) leaves the verdict as it is: the console prints it, and one line
    saying where writing failed (``_write_error``). Anything else is a bug of
    the kit's writers: the verdict becomes ``error`` (exit 2) and every
    document that can still be written says so."""
    from ..adapters.json_values import json_safe
    from ..reporting import FILE_NAMES, ReportWriteError, mark_stale, write_documents, write_reports

    try:
        paths = write_reports(report, report_dir)
    except ReportWriteError as exc:
        report["_write_error"] = f"{exc}; {mark_stale(report_dir)}"
        return
    except Exception as exc:
        report["verdict"], report["exit_code"] = "error", 2
        said = _exception_text(exc)
        mismatches = getattr(exc, "errors", None)  # InvalidReportError: what does not match the schema
        if mismatches:
            said += " " + "; ".join(mismatches[:3])
        report["problems"].append(
            {
                "kind": "internal-error",
                "where": str(report_dir),
                "message": f"internal error in the conformance kit while writing the reports: "
                f"{said} (set CONFORMANCE_DEBUG=1 to see the traceback)",
            }
        )
        if os.environ.get("CONFORMANCE_DEBUG"):
            traceback.print_exc()
        report.update(json_safe(report))  # whatever the report holds, report.json can carry it
        try:
            paths, failed = write_documents(report, report_dir)
        except Exception as again:
            report["_write_error"] = f"{again}; {mark_stale(report_dir)}"
            return
        for kind, why in failed.items():
            report.setdefault("_write_error", f"{FILE_NAMES[kind]} was not written: {why}")
    report["_paths"] = {k: str(v) for k, v in paths.items()}


def _run(config: RunConfig, prepared: Prepared, result: RunResult, progress: Progress, tracker: _Tracker) -> None:
    """The checks the config asks for, on the implementation ``prepare`` started, into ``result``."""
    run = _Run(config, prepared, result, progress, tracker)
    run.describe()
    scenarios = run.chosen_scenarios()
    if scenarios is not None:
        run.check(scenarios)


def _reset(coverage: Any) -> None:
    """Empty the coverage counts in place (the session's model keeps this object)."""
    coverage.__init__()


class _Run:
    """One run's checks on a prepared implementation, filling ``result``: the
    scenario matrix (or a replay), the stateful exploration in its parts, the
    scenarios a worker claims last, then the coverage gates and the verdict."""

    def __init__(
        self, config: RunConfig, prepared: Prepared, result: RunResult, progress: Progress, tracker: _Tracker
    ) -> None:
        self.config, self.prepared, self.result = config, prepared, result
        self.progress, self.tracker = progress, tracker
        self.spec, self.session = prepared.spec, prepared.session
        self.capabilities: dict = prepared.identity.get("capabilities") or {}
        self.adapter_args = _adapter_args(config, prepared.target)
        self.base_cmd = run_command(config, prepared.target)
        self.faces: list[Failure] = []  # shorter faces of a part's first failure (engine/faces.py)
        self.found_more: list[Failure] = []  # a part's further distinct failures, as they are found
        self.reduced = False  # whether the part's first failure has been reduced
        self.guard = _reduction_guard(config)  # one time guard for all the run's reductions

    def describe(self) -> None:
        """What was checked: the spec, the implementation, its parameters."""
        spec, identity = self.spec, self.prepared.identity
        self.result.spec = SpecInfo(
            path=self.config.spec_path,
            id=spec.id,
            version=spec.version,
            title=spec.title,
            lifecycle=spec.lifecycle_summary(),
        )
        self.result.implementation = ImplementationInfo(
            adapter=self.prepared.target,
            described=True,
            name=identity.get("name"),
            version=identity.get("version"),
            profile=identity.get("profile"),
            parameters=identity.get("parameters") or {},
            capabilities=self.capabilities,
        )
        self.result.parameters = self.prepared.params

    def chosen_scenarios(self) -> list | None:
        """The scenarios to run (a replay file's one, those named, or all; none
        with --no-scenarios); None, with a problem reported, when a named one
        does not exist."""
        config, spec = self.config, self.spec
        if config.replay_file:
            return [load_replay_file(spec, config.replay_file)] if config.scenarios else []
        matrix = list(spec.scenarios) + [s for path in config.scenario_files for s in load_scenario_file(spec, path)]
        if config.only:
            unknown = [s for s in config.only if s not in {sc.id for sc in matrix}]
            if unknown:
                self.result.add_problem(
                    "usage-error", f"unknown scenario id(s): {', '.join(unknown)}", config.spec_path
                )
                return None
            scenarios = [sc for sc in matrix if sc.id in config.only]
        else:
            scenarios = matrix
        return scenarios if config.scenarios else []

    def cost(self, scenario: Any) -> int:
        return scenario_cost(
            self.spec, scenario, self.prepared.params, self.capabilities, race_runs=self.config.race_runs
        )

    def check(self, scenarios: list) -> None:
        config = self.config
        claims = config.scenario_claims  # a worker's: any scenario that no other worker claimed before
        if claims is None and config.shard is not None:
            from .shards import shard_items

            scenarios = shard_items(scenarios, *config.shard, cost=self.cost)
        explore = config.stateful and not config.replay_file and not config.only
        self.progress.start(len(scenarios), explore)
        head, tail = _claim_order(scenarios, self.cost) if claims is not None else (scenarios, [])
        self.run_matrix(head, len(scenarios))
        run_coverage = self.session.model.coverage.copy()  # the scenarios' part; the exploration's is added below
        if explore:
            self.explore(run_coverage)
        if claims is not None:
            self.run_last_claims(tail, len(scenarios), run_coverage)
        self.decide(run_coverage)

    # -- the scenario matrix ------------------------------------------------------------
    def run_matrix(self, which: list, total: int) -> None:
        from .shards import claim_item

        claims = self.config.scenario_claims
        self.tracker.phase, self.tracker.scenarios_total = "scenarios", total
        for scenario in which:
            if claims is not None and not claim_item(claims, scenario.id):
                continue  # another worker runs it
            self.run_one(scenario)

    def run_one(self, scenario: Any) -> None:
        config, session, tracker = self.config, self.session, self.tracker
        tracker.scenario = scenario.id
        checkpoint()
        mark = _mark(config)
        outcome = run_scenario(session, scenario, self.capabilities, race_runs=config.race_runs)
        _explain_scenario_race(session, scenario, outcome)
        output = _output_since(config, mark)
        _faults(session, self.result, f"scenario {scenario.id}", tracker)
        tracker.scenarios_done += 1
        if config.record_dir and outcome.verdict in ("pass", "fail"):
            _record(config.record_dir, self.prepared, scenario.id, outcome, self.result)
        if outcome.verdict == NOT_APPLICABLE:
            if self.result.not_applicable is None:
                self.result.not_applicable = NotApplicable(self.prepared.identity.get("profile") or "default")
            self.result.not_applicable.scenarios.append(
                {"id": scenario.id, "title": scenario.title, "reason": outcome.note}
            )
        else:
            self.result.scenarios.append(self.scenario_entry(scenario, outcome, output))
        self.progress.scenario_done(outcome)

    def scenario_entry(self, scenario: Any, outcome: ScenarioOutcome, output: dict | None) -> ScenarioEntry:
        """The scenario's entry of the result, a failure with the command that replays it."""
        config = self.config
        if outcome.failure is not None:
            add_model_trail(outcome.failure, self.spec, self.session.model.params)
            outcome.failure.replay = (
                f"conformance replay {shlex.quote(config.spec_path)} {shlex.quote(config.replay_file)} "
                f"{self.adapter_args}"
                if config.replay_file
                else f"{self.base_cmd} --scenario {scenario.id}"
            )
        return ScenarioEntry(outcome, output)

    def run_last_claims(self, tail: list, total: int, run_coverage: Any) -> None:
        """A worker's last scenarios: those the other workers have not claimed
        yet; then its report lists every scenario in the spec's order."""
        _reset(self.session.model.coverage)
        self.run_matrix(tail, total)
        run_coverage.merge(self.session.model.coverage)
        self.result.scenario_order({scenario.id: position for position, scenario in enumerate(self.spec.scenarios)})

    # -- the stateful exploration ---------------------------------------------------------
    def explore(self, run_coverage: Any) -> None:
        """The exploration, in the parts this run carries out (engine/shards.py)."""
        from .shards import combine_stateful, part_examples, place_counterexamples

        config, tracker = self.config, self.tracker
        parts = _parts(config)
        multi = parts[0][1] > 1
        max_examples = PROFILES[config.profile]["max_examples"]
        self.progress.stateful_started(sum(part_examples(max_examples, i, n) for i, n in parts))
        tracker.phase, tracker.profile, tracker.seed = "stateful", config.profile, config.seed
        tracker.started = time.perf_counter()
        watch = _ExampleWatch(config, tracker, self.progress)
        with _observations(config):
            part_reports = [self.explore_part(index, count, multi, watch, run_coverage) for index, count in parts]
        if not multi:
            self.result.stateful = part_reports[0]
            del part_reports[0]["part"]
            return
        # the parts as one exploration, failures renumbered (engine/shards.py)
        self.result.stateful = combine_stateful(part_reports, config.seed, self.spec)
        if config.report_dir:
            for problem in place_counterexamples(self.result.stateful, config.report_dir, move=True):
                self.result.add_problem("report-error", problem, config.report_dir)

    def explore_part(self, index: int, count: int, multi: bool, watch: _ExampleWatch, run_coverage: Any) -> dict:
        """Part ``index`` of ``count`` of the exploration (all of it when
        ``count`` is 1): its report entry, its failures described."""
        from .shards import part_examples, part_seed
        from .stateful import run_stateful  # Hypothesis is loaded only by a run that explores

        config, session, tracker = self.config, self.session, self.tracker
        seed = part_seed(config.seed, index, count)
        examples = part_examples(PROFILES[config.profile]["max_examples"], index, count) if multi else None
        part = (index, count, seed) if multi else None
        tracker.phase, tracker.seed = "stateful", seed
        tracker.describe_failure = lambda failure: self.describe_failure(failure, part=part)
        _reset(session.model.coverage)  # coverage of the exploration alone
        if examples == 0:  # more parts than the profile has examples
            return self.empty_part(index, count, seed)
        watch.enter("exploring")
        outcome = run_stateful(
            self.spec,
            session,
            profile=config.profile,
            seed=seed,
            capabilities=self.capabilities,
            on_example=watch.on_example,
            shrink_s=config.shrink_s,
            database=_example_db(config, self.prepared),
            max_examples=examples,
            beyond_pools=config.beyond_pools,
        )
        tracker.phase = "verdict"
        self.found_more, self.reduced = [], False
        try:
            # What the exploration's examples took (shrinking included): the stateful table's counts and
            # the run's; the replays that reduce a failure below repeat them and are not counted.
            explored = session.model.coverage.copy()
            outcome.coverage = _coverage(self.spec, explored.as_dict(), session.params)
            more = self.failures_of(outcome, watch, seed, examples, part)
        except KeyboardInterrupt as exc:
            self.keep_what_was_found(exc, outcome)
            raise
        entry = outcome.to_dict()
        if more:
            entry["more_failures"] = [f.to_dict() for f in more]
        output = watch.output_since_last()
        if output:
            entry["output"] = output
        entry["part"] = {"index": index, "count": count, "seed": seed}
        _faults(session, self.result, "stateful exploration", tracker)
        run_coverage.merge(explored)
        watch.examples_before += max(outcome.examples, watch.in_part)
        return entry

    def keep_what_was_found(self, exc: KeyboardInterrupt, outcome: Any) -> None:
        """An interrupt after the exploration ended, outside the phases that
        attach their own findings to it (the reduction, the hunt for more): in
        the gaps between them, or while the failures are grouped and described.
        The failure found (reduced or not) and the others found so far go into
        the report with it."""
        if "stateful_so_far" in vars(exc):  # the phase it came from attached them
            return
        if outcome.failure is None or outcome.verdict != "fail":
            self.tracker.phase = "stateful"  # reported as an exploration that found nothing
            return
        _carry_so_far(exc, stateful_so_far=outcome, more_so_far=list(self.found_more))
        if self.reduced:  # the failures found are complete: reported as the hunt's, sorting them
            vars(exc)["sorting_by_cause"] = True
            self.tracker.phase = "searching"
        else:  # reported as a failure the exploration had not finished shrinking
            self.tracker.phase = "stateful"

    def empty_part(self, index: int, count: int, seed: int) -> dict:
        return {
            "verdict": "pass",
            "profile": self.config.profile,
            "seed": seed,
            "examples": 0,
            "steps": 0,
            "duration_s": 0.0,
            "failure": None,
            "coverage": _coverage(self.spec, self.session.model.coverage.as_dict(), self.session.params),
            "part": {"index": index, "count": count, "seed": seed},
        }

    def failures_of(
        self, outcome: Any, watch: _ExampleWatch, seed: int, examples: int | None, part: tuple | None
    ) -> list[Failure]:
        """The part's failure reduced, the distinct ones after it (--max-failures),
        each described; returns those after the first."""
        more: list[Failure] = self.found_more  # the distinct failures after the first, as they are found
        self.faces = []  # this part's
        met: dict[int, set[tuple]] = {}  # per failure (id): the failure found before it that it shows first
        if outcome.failure is not None and outcome.verdict == "fail":
            watch.enter("reducing")  # counts the failure found
            unreplayed = bool(outcome.failure.steps) and self.reduce_found(outcome)
            self.reduced = True
            if unreplayed:
                self.meet_again(outcome, watch, seed, examples)
            if self.config.max_failures > 1:
                watch.enter("looking for more")
            _search_more(
                self.config,
                self.spec,
                self.session,
                outcome,
                more,
                self.capabilities,
                watch.on_example,
                self.prepared,
                self.result,
                self.tracker,
                seed=seed,
                max_examples=examples,
                describe=lambda failure, number: self.describe_failure(failure, number=number, part=part),
                met=met,
                phase=watch.enter,
                guard=self.guard,
            )
            self.take_shorter_met(outcome, seed)
        if outcome.failure is None:
            return more
        found = _shortest_of_each([outcome.failure, *more, *self.faces])
        causes = self.grouped(found, met) if len(found) > 1 else found
        outcome.failure, more = causes[0], causes[1:]
        for number, failure in enumerate([*causes, *(s for c in causes for s in c.symptoms)], 1):
            self.describe_failure(failure, number=number, part=part)
        return more

    def grouped(self, found: list[Failure], met: dict[int, set[tuple]]) -> list[Failure]:
        """The failures grouped by cause (engine/causes.py); a fault of the
        kit's own while grouping lists them ungrouped, shortest first, and
        says so: the failures found are never lost to it."""
        try:
            return group_by_cause(found, met, self.orderings_in_play(found), steps_by_operation(self.spec))
        except Exception as exc:
            self.kit_fault("grouping the failures found by cause; they are listed ungrouped", exc)
            return sorted(found, key=length_of)

    def kit_fault(self, while_doing: str, exc: Exception) -> None:
        """A fault of the kit's own in a step the failures found do not depend on:
        a problem in the report (the traceback with CONFORMANCE_DEBUG=1)."""
        self.result.add_problem(
            "internal-error",
            f"internal error in the conformance kit while {while_doing}: {_exception_text(exc)} "
            "(set CONFORMANCE_DEBUG=1 to see the traceback)",
            "stateful exploration",
        )
        if os.environ.get("CONFORMANCE_DEBUG"):
            traceback.print_exc(file=getattr(self.config.output_capture, "kit_stderr", None))

    def orderings_in_play(self, failures: list[Failure]) -> dict[int, frozenset[str]]:
        """Per failure (``id()``), the spec's orderings it turns on (engine/attribution.py),
        when there are several failures to group; each is replayed once more."""
        if len(failures) < 2:
            return {}
        return {id(f): orderings_in_play(self.session, f) for f in failures if f.kind == "divergence" and f.steps}

    def reduce_found(self, outcome: Any) -> bool:
        """The failure Hypothesis shrank, made smaller by replaying it
        (engine/reduce.py); True when its steps, replayed, did not fail again,
        so that it stays as the exploration met it."""
        from .reduce import explain_race, reduce_failure

        budget = ReplayBudget(_reduce_replays(self.config), self.guard)  # the first failure's own, whole
        self.tracker.phase = "stateful"  # an interrupt now still reports the failure found
        try:
            outcome.failure = explain_race(self.session, outcome.failure)  # a sequential bug seen in a race
            outcome.failure = reduce_failure(self.session, outcome.failure, budget)
            unreduced = outcome.failure if budget.unreplayed else None  # its steps did not fail again
            if outcome.failure.kind == "linearizability" and budget.replays:
                # After a long trace, the race's calls one at a time may not show the bug; after
                # the few steps left now they may: then the plain failure is reduced in its turn.
                explained = explain_race(self.session, outcome.failure)
                if explained.kind != "linearizability":
                    outcome.failure = reduce_failure(self.session, explained, ReplayBudget(budget.replays, self.guard))
            outcome.failure = self.shorter_from_first(outcome, budget.replays // 2)
            unreplayed = unreduced is not None and outcome.failure is unreduced
            if outcome.guarded and outcome.guarded not in outcome.failure.message:
                outcome.failure.message += (
                    f"\n(shrinking stopped early: {outcome.guarded}; the reduction went on from where it "
                    f"stopped, so a faster implementation may end at another counterexample)"
                )
            self.look_for_a_shorter_face(outcome.failure)
        except KeyboardInterrupt as exc:  # report the failure as Hypothesis left it
            _carry_so_far(exc, stateful_so_far=outcome)
            raise
        self.tracker.phase = "verdict"
        return unreplayed

    def look_for_a_shorter_face(self, failure: Failure) -> None:
        """A long failure that turns on one of the spec's orderings may show in
        a few steps where another operation reads that ordering (engine/faces.py):
        found, it joins the failures grouped by cause, and heads them."""
        from .faces import LONG_ENOUGH, shorter_face

        if failure.kind != "divergence" or length_of(failure) <= LONG_ENOUGH:
            return
        try:
            orderings = orderings_in_play(self.session, failure)
            budget = ReplayBudget(_reduce_replays(self.config) // FACE_SHARE, self.guard)
            face = shorter_face(self.session, failure, orderings, budget) if orderings else None
        except Exception as exc:
            self.kit_fault("looking for a shorter face of the failure found", exc)
            return
        if face is not None:
            self.faces.append(face)

    def meet_again(self, outcome: Any, watch: _ExampleWatch, seed: int, examples: int | None) -> None:
        """A failure whose steps did not fail again when replayed could not be
        reduced: the exploration runs on with the next seed to meet it again
        (hunt.met_again), and an instance that replays, shorter, takes its place."""
        settings = _hunt_settings(self.config, self.prepared, seed, examples)
        watch.enter("looking again")
        try:
            again = met_again(
                self.spec,
                self.session,
                outcome,
                settings,
                capabilities=self.capabilities,
                on_example=watch.on_example,
                guard=self.guard,
            )
        except KeyboardInterrupt as exc:
            _carry_so_far(exc, stateful_so_far=outcome, more_so_far=list(self.found_more))
            self.tracker.phase = "searching"
            raise
        if again is not None and length_of(again) < length_of(outcome.failure):
            outcome.failure = again

    def take_shorter_met(self, outcome: Any, seed: int) -> None:
        """The first failure in fewer steps, as the hunt met it while it was
        masked (hunt.shorter_met), takes its place: another face of the bug
        that no reduction of the first reaches."""
        if outcome.failure is None or not self.session.mask_hits:
            return
        shorter = shorter_met(self.session, outcome.failure, seed, _reduce_replays(self.config), self.guard)
        if shorter is not None:
            outcome.failure = shorter

    def shorter_from_first(self, outcome: Any, replays: int) -> Failure:
        """The reduced failure, or the same bug reduced from where the exploration
        first met it when that is shorter: Hypothesis's shrinking can end on a
        path the replays cannot shorten as far (a same-instant ordering bug: 8
        steps after shrinking, 4 from the example first found). ``replays``
        bound this second reduction."""
        from .reduce import explain_race, reduce_failure

        reduced, first = outcome.failure, outcome.found_first
        if first is None or not first.steps or not replays or not same_bug(signature(first), signature(reduced)):
            return reduced
        other = reduce_failure(self.session, explain_race(self.session, first), ReplayBudget(replays, self.guard))
        if not same_bug(signature(other), signature(reduced)):
            return reduced
        length = length_of(other), length_of(reduced)
        if length[0] >= length[1]:
            return reduced
        other.message += (
            f"\n(from the example the exploration first found: {length[1]} step(s) from the one Hypothesis shrank)"
        )
        return other

    def describe_failure(self, failure: Failure, number: int = 1, part: tuple | None = None) -> None:
        add_model_trail(failure, self.spec, self.session.model.params)
        _describe_stateful_failure(
            self.config, self.spec, failure, self.base_cmd, self.adapter_args, number=number, part=part
        )

    # -- the verdict ------------------------------------------------------------------------
    def decide(self, run_coverage: Any) -> None:
        """The verdict: every case's, the coverage gates', expired deviations' and
        faults of the implementation; a failed run gets the command that replays it."""
        config, result, session = self.config, self.result, self.session
        self.list_unimplemented()
        # a replay that did not reach its failure's state (failures.NOT_REPRODUCING) is its own verdict
        unreached = [e for e in result.scenarios if e.failure is not None and e.failure.kind == NOT_REPRODUCING]
        verdicts = [entry.outcome.verdict for entry in result.scenarios if entry not in unreached]
        if result.stateful:
            verdicts.append(result.stateful["verdict"])
        sharded = config.shard is not None and config.shard[1] > 1
        # a shard's coverage is its part's: merge-reports applies --min-coverage to the whole run's
        gating = dataclasses.replace(config, min_coverage={}) if sharded else config
        verdicts.append(_run_coverage(gating, self.spec, run_coverage, session.params, result, self.base_cmd))
        if session.deviations is not None and session.deviations.expired:
            result.problems += [Problem.from_dict(p) for p in session.deviations.expired_problems()]
            verdicts.append("fail")  # an accepted difference past its date: renew it or fix it
        failed = any(v in ("fail", "error") for v in verdicts) or self.tracker.faults > 0
        result.set_verdict(*(("fail", 1) if failed else (NOT_REPRODUCING, 3) if unreached else ("pass", 0)))
        if failed or unreached:  # a command that reproduces this run's failures, whatever kind of run it was
            result.replay = self.replay_command()
        if result.shard is not None:
            result.shard["rerun"] = f"{self.base_cmd} {_selection_args(config)}"
        _data_errors(result)

    def list_unimplemented(self) -> None:
        """The operations that answered not_implemented, listed with the scenarios not applicable."""
        if not self.session.unimplemented:
            return
        if self.result.not_applicable is None:
            self.result.not_applicable = NotApplicable(self.prepared.identity.get("profile") or "default")
        self.result.not_applicable.operations = [
            {"operation": name, "message": message} for name, message in sorted(self.session.unimplemented.items())
        ]

    def replay_command(self) -> str:
        config = self.config
        if config.replay_file:
            return (
                f"conformance replay {shlex.quote(config.spec_path)} {shlex.quote(config.replay_file)} "
                f"{self.adapter_args}"
            )
        return f"{self.base_cmd} {_selection_args(config)}" + ("" if config.only else _parts_args(config))


class _ExampleWatch:
    """The exploration's examples as they run, over all its parts: counted for
    the tracker and the progress display; the output kept is that of the last
    example that wrote anything."""

    def __init__(self, config: RunConfig, tracker: _Tracker, progress: Progress) -> None:
        self.config, self.tracker, self.progress = config, tracker, progress
        self.mark = _mark(config)
        self.output: dict | None = None
        self.examples_before = 0  # examples of the parts already run
        # This part's examples so far, over its explorations (the first, and those of the
        # search for more): each exploration counts its own from 1, the display goes on.
        self.in_part = 0
        self._run_base = self._last_count = 0
        self.phase = ""
        self.failures = 0  # the exploration's failures found so far, all parts
        self.counted = False  # the failure of the exploration running now is counted

    def enter(self, phase: str) -> None:
        """The exploration's phase, for the progress display: exploring,
        shrinking, reducing, looking for more. A failure is counted when its
        shrinking or its reduction starts (once)."""
        if phase == "exploring":  # a part starts
            self.in_part = self._run_base = self._last_count = 0
        if phase in ("exploring", "looking for more"):
            self.counted = False
        elif not self.counted:
            self.failures, self.counted = self.failures + 1, True
        if phase != self.phase:
            self.phase = phase
            self.progress.stateful_phase(phase, self.failures)

    def on_example(self, count: int, shrinking: bool = False) -> None:
        if shrinking and self.phase in ("exploring", "looking for more"):
            self.enter("shrinking")
        if count <= self._last_count:  # another exploration of the part began: its count goes on from here
            self._run_base = self.in_part
        self._last_count, self.in_part = count, self._run_base + count
        self.tracker.examples = self.examples_before + self.in_part
        self.output = _output_since(self.config, self.mark) or self.output
        self.mark = _mark(self.config)
        self.progress.stateful_example(self.examples_before + self.in_part)
        checkpoint()

    def output_since_last(self) -> dict | None:
        return _output_since(self.config, self.mark) or self.output


def _observations(config: RunConfig) -> contextlib.AbstractContextManager:
    """While the exploration runs: Hypothesis's observations into the run's
    file, when one was asked for (``RunConfig.observations``)."""
    if not config.observations:
        return contextlib.nullcontext()
    from .hypothesis_support import observations_to  # Hypothesis is loaded only by a run that explores

    return observations_to(config.observations)


def _explain_scenario_race(session: Session, scenario: Any, outcome: ScenarioOutcome) -> None:
    """A scenario's race that, one call at a time, is a plain divergence: the bug is sequential."""
    if outcome.failure is None or outcome.failure.kind != "linearizability":
        return
    from .reduce import explain_race

    explained = explain_race(session, outcome.failure)
    if explained is not outcome.failure:
        explained.message = f"scenario {scenario.id} ({scenario.title}): {explained.message}"
        outcome.failure = explained


# A worker of ``run --workers N`` leaves the cheapest scenarios, about this
# share of the matrix's estimated cost, until its part of the exploration is
# done: the parts' explorations take different times (their examples differ
# in length), and the worker that finishes its part first then runs more of
# them, so the workers end together.
CLAIM_RESERVE = 0.3
# The search for a shorter face of the first failure spends up to this
# fraction (1/N) of the reduction's replays.
FACE_SHARE = 4


def _claim_order(scenarios: list, cost: Callable) -> tuple[list, list]:
    """A worker's scenarios to claim (engine/shards.py: claim_item), the
    costliest first: those to claim before its exploration, those after."""
    costs = {scenario.id: cost(scenario) for scenario in scenarios}
    ordered = sorted(scenarios, key=lambda scenario: -costs[scenario.id])
    total, before = sum(costs.values()), 0
    for position, scenario in enumerate(ordered):
        if before >= (1 - CLAIM_RESERVE) * total:
            return ordered[:position], ordered[position:]
        before += costs[scenario.id]
    return ordered, []


def _shortest_of_each(failures: list[Failure]) -> list[Failure]:
    """The failures, one per signature: the shortest (the first found of
    equal ones). A shorter face (engine/faces.py) may repeat a failure the
    hunt for more found too."""
    shortest: dict[tuple, Failure] = {}
    for failure in failures:
        kept = shortest.get(signature(failure))
        if kept is None or length_of(failure) < length_of(kept):
            shortest[signature(failure)] = failure
    return [failure for failure in failures if shortest[signature(failure)] is failure]


def _data_errors(result: RunResult) -> None:
    """A failure of the spec itself or of its input (``failures.DATA_ERRORS``:
    a CEL error, a refused replay argument) makes the verdict ``error``, exit
    2: the run could not be carried out as written, whatever the implementation
    did. Each one is also a problem, at the file:line its message names."""
    found = [
        (entry.id, entry.failure.kind, entry.failure.message)
        for entry in result.scenarios
        if entry.failure is not None and entry.failure.kind in DATA_ERRORS
    ]
    failure = (result.stateful or {}).get("failure") or {}
    if failure.get("kind") in DATA_ERRORS:
        found.append(("stateful exploration", failure["kind"], failure["message"]))
    for where, kind, message in found:
        at = re.search(r"(\S+\.(?:ya?ml|json):\d+)", message)
        result.add_problem(kind, message.splitlines()[0], at.group(1) if at else where)
    if found:
        result.set_verdict("error", 2)


def _parts(config: RunConfig) -> list[tuple[int, int]]:
    """The parts of the exploration this run carries out: (index, count) each."""
    if config.shard is not None and config.shard[1] > 1:
        return [config.shard]
    count = max(1, int(config.exploration_parts))
    return [(index, count) for index in range(1, count + 1)]


def _selection_args(config: RunConfig) -> str:
    """The options that chose what this run ran (its scenarios, its
    exploration), so that a replay command runs the same and reaches the same
    coverage; without the parts (``_parts_args``)."""
    args = [f"--scenario {shlex.quote(i)}" for i in config.only]
    if not config.scenarios:
        args.append("--no-scenarios")
    elif config.race_runs != RACE_RUNS:
        args.append(f"--race-runs {config.race_runs}")
    if config.only:  # scenarios named: the exploration does not run
        return " ".join(args)
    if not config.stateful:
        args.append("--no-stateful")
    elif config.max_failures != 1:  # the exploration goes on after a failure, covering more
        args.append(f"--max-failures {config.max_failures}")
    return " ".join(args + [f"--profile {config.profile}", f"--seed {config.seed}"])


def _parts_args(config: RunConfig) -> str:
    """What a replay command adds to re-run this run's part(s): the number of
    parts always, since ``--workers`` defaults to the cores of the machine
    that re-runs it and each part explores with seeds of its own."""
    if config.shard is not None and config.shard[1] > 1:
        return f" --shard {config.shard[0]}/{config.shard[1]}"
    return f" --workers {config.exploration_parts}" if config.stateful else ""


def _mark(config: RunConfig):
    """Where the implementation's captured output stands (None: not captured)."""
    if config.output_capture is None:
        return None
    try:
        return config.output_capture.mark()
    except OSError:  # capturing must never stop a run
        return None


def _output_since(config: RunConfig, mark) -> dict | None:
    """What the implementation printed since ``mark`` (report ``output``)."""
    if config.output_capture is None or mark is None:
        return None
    try:
        return config.output_capture.since(mark)
    except OSError:
        return None


def _example_db(config: RunConfig, prepared: Prepared) -> str | None:
    """Where Hypothesis keeps this run's failing examples, so a re-run tries
    them again (after its own examples found nothing)."""
    if config.example_db is not None:
        return None if config.example_db.lower() == "none" else config.example_db
    if config.example_db_base:
        base = Path(config.example_db_base)
    elif config.report_dir:
        base = Path(config.report_dir) / "example-db"
    else:
        return None
    import hashlib
    import json

    key = json.dumps(
        [prepared.spec.id, prepared.spec.version, prepared.params, prepared.target], sort_keys=True, default=str
    )
    return str(base / f"{prepared.spec.id}-{hashlib.sha256(key.encode()).hexdigest()[:12]}")


def _record(record_dir: str, prepared: Prepared, name: str, outcome: ScenarioOutcome, result: RunResult) -> None:
    """Write the scenario's steps as a trace (conformance check-trace reads it)."""
    from ..traces.format import header_line, lines_of_session

    session, identity = prepared.session, prepared.identity
    steps = outcome.failure.steps if outcome.failure is not None and outcome.failure.steps else session.trace
    header = header_line(
        prepared.spec.id,
        prepared.spec.version,
        profile=identity.get("profile"),
        parameters=prepared.params,
        implementation={"name": identity.get("name"), "version": identity.get("version"), "adapter": prepared.target},
        source=f"conformance run --record, scenario {name}",
    )
    path = Path(record_dir) / f"{name}.jsonl"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open_new(path) as handle:
            handle.write(header + "\n")
            for line in lines_of_session(steps, session.probe_calls()):
                handle.write(line + "\n")
    except OSError as exc:
        result.add_problem("report-error", f"could not write the trace: {exc}", str(path))


def _hunt_settings(config: RunConfig, prepared: Prepared, seed: int, max_examples: int | None) -> HuntSettings:
    """What the explorations after the part's first may do (engine/hunt.py)."""
    return HuntSettings(
        max_failures=config.max_failures,
        seed=seed,
        profile=config.profile,
        examples=max_examples or PROFILES[config.profile]["max_examples"],
        replays=_reduce_replays(config),
        shrink_s=config.shrink_s,
        database=_example_db(config, prepared),
        beyond_pools=config.beyond_pools,
    )


def _search_more(
    config: RunConfig,
    spec: Spec,
    session: Session,
    outcome,
    more: list[Failure],
    capabilities: dict,
    on_example,
    prepared: Prepared,
    result: RunResult,
    tracker: _Tracker,
    *,
    seed: int,
    max_examples: int | None,
    describe: Callable[[Failure, int], None],
    met: dict[int, set[tuple]],
    phase: Callable[[str], None] | None = None,
    guard: CallGuard | None = None,
) -> None:
    """``hunt.more_failures`` into ``more``, so that what it finds is never lost:
    the failures found before it are complete, so an interrupt reports them
    (with those it found so far), and a fault of the kit's own while it
    searches becomes a problem in the report beside them."""
    settings = _hunt_settings(config, prepared, seed, max_examples)
    try:
        more_failures(
            spec,
            session,
            outcome,
            settings,
            capabilities=capabilities,
            on_example=on_example,
            more=more,
            met=met,
            phase=phase,
            guard=guard,
        )
    except KeyboardInterrupt as exc:
        for number, failure in enumerate(more, 2):
            describe(failure, number)
        _carry_so_far(exc, stateful_so_far=outcome, more_so_far=list(more))
        tracker.phase = "searching"
        raise
    except Exception as exc:
        result.add_problem(
            "internal-error",
            f"internal error in the conformance kit while looking for further distinct failures "
            f"(--max-failures): {_exception_text(exc)}; the failures reported were found before it "
            f"(set CONFORMANCE_DEBUG=1 to see the traceback)",
            "stateful exploration",
        )
        if os.environ.get("CONFORMANCE_DEBUG"):
            traceback.print_exc(file=getattr(config.output_capture, "kit_stderr", None))


def _describe_stateful_failure(
    config: RunConfig,
    spec: Spec,
    failure: Failure,
    base_cmd: str,
    adapter_args: str,
    number: int = 1,
    part: tuple | None = None,
) -> None:
    """The exploration's failure gets its seed, a counterexample file and the
    commands that replay it. ``part``: (index, count, seed) of the part of a
    run in parts that found it (its file is renamed once all parts ran)."""
    seed = failure.seed if failure.seed is not None else part[2] if part else config.seed
    failure.seed = seed
    rerun = (
        f"{base_cmd} --profile {config.profile} --seed {config.seed} --shard {part[0]}/{part[1]} --no-scenarios"
        if part
        else f"{base_cmd} --profile {config.profile} --seed {seed} --no-scenarios --workers 1"
    )
    if failure.steps and config.report_dir:
        name = "counterexample-stateful.yaml" if number == 1 else f"counterexample-stateful-{number}.yaml"
        if part:
            name = f"counterexample-stateful-part{part[0]}-{number}.yaml"
        path = Path(config.report_dir) / name
        try:
            _write_counterexample(path, spec, failure, config, part)
        except OSError as exc:  # the report directory's trouble is reported when the reports are written
            failure.replay = rerun
            failure.message += (
                f"\n(the counterexample could not be written to {path}: {exc.strerror or exc}; "
                f"the whole exploration re-runs with: {rerun})"
            )
            return
        failure.counterexample_file = str(path)
        failure.replay = f"conformance replay {shlex.quote(config.spec_path)} {shlex.quote(str(path))} {adapter_args}"
        failure.message += f"\n(the whole exploration re-runs with: {rerun})"
    else:
        failure.replay = rerun


def _run_coverage(config: RunConfig, spec: Spec, coverage, params: dict, result: RunResult, base_cmd: str) -> str:
    """Coverage of the whole run per category, the --min-coverage gates, and
    the failure the state diagram highlights; returns the gates' verdict."""
    from ..reporting._format import failed_checks
    from .applicability import bound_to_dict
    from .coverage import check_gates, coverage_categories, failure_focus
    from .pairs import pairs_report

    counts = coverage.as_dict()
    concurrent = bool(result.implementation.capabilities.get("concurrent"))
    bound = _run_bound(config, spec, params, concurrent)
    categories = coverage_categories(spec, counts, params, concurrent, bound)
    gates, failure = check_gates(categories, config.min_coverage)
    if failure is not None:
        failure.replay = f"{base_cmd} {_selection_args(config)}{_parts_args(config)} " + " ".join(
            f"--min-coverage {g['category']}={g['minimum']:g}" for g in gates
        )
    result.coverage = {
        "categories": categories,
        "transitions": counts["transitions"],
        "states": counts["states"],
        "operations": counts["operations"],
        "outcomes": counts["outcomes"],
        "policies": counts["policies"],
        "races": counts["races"],
        "limits": counts["limits"],
        # the counts merge-reports sums (engine/shards.py)
        "bound": bound_to_dict(bound),  # the most records a test creates: what not_applicable was judged within
        "pairs": counts["pairs"],
        "triples": counts["triples"],
        **pairs_report(spec, counts, params),
        "gates": gates,
        "failure": failure.to_dict() if failure else None,
    }
    first = next((f for _, f in failed_checks(result.to_report()) if f and f.get("kind") != "coverage"), None)
    if result.spec.lifecycle is not None:
        result.spec.lifecycle["highlight"] = failure_focus(spec, first)
    return "fail" if failure is not None else "pass"


def _run_bound(config: RunConfig, spec: Spec, params: dict, concurrent: bool):
    """The most records one test of this run creates (applicability.run_bound):
    an example of the exploration, if it runs, or a scenario that applies."""
    from .applicability import run_bound

    steps = PROFILES[config.profile]["stateful_step_count"] if config.stateful else None
    scenarios = []
    for scenario in spec.scenarios if config.scenarios else ():
        try:
            if not_applicable_reason(spec, scenario, params) is None:
                scenarios.append(scenario)
        except ExpressionError:
            continue  # the scenario fails at once (its `assumes` is the spec's error)
    return run_bound(spec, params, step_count=steps, scenarios=scenarios, concurrent=concurrent)


def _coverage(spec: Spec, counts: dict, params: dict) -> dict:
    """Coverage counts plus what the spec declares (and these parameters offer) that was never exercised."""
    from statemachines.tools.reach import unreachable_items

    # what the model cannot reach under these parameters is not "never exercised" (docs/running.md)
    cannot = {(u.category, u.item) for u in unreachable_items(spec, params)}
    declared = [f"{src} -{t.trigger}-> {t.dest}" for t in spec.lifecycle.transitions for src in t.sources]
    uncovered = [n for n in declared if n not in counts["transitions"] and ("transitions", n) not in cannot]
    offered = spec.offered_operations(params)
    uncovered += [f"operation {op}" for op in spec.operations if op in offered and op not in counts["operations"]]
    uncovered += [
        f"state {s}" for s in spec.lifecycle.states if s not in counts["states"] and ("states", s) not in cannot
    ]
    return {
        "operations": counts["operations"],
        "outcomes": counts["outcomes"],
        "transitions": counts["transitions"],
        "states": counts["states"],
        "policies": counts["policies"],
        "races": counts["races"],
        "limits": counts["limits"],
        "pairs": counts["pairs"],
        "triples": counts["triples"],
        "uncovered": uncovered,
    }


def _counterexample_title(spec: Spec, failure: Failure, config: RunConfig, part: tuple | None) -> str:
    """The file's title: the run's seed, and for a run whose exploration is
    split in parts (``--workers``, ``--shard``) the part and the seed that
    part explored from, derived from the run's (engine/shards.py)."""
    found_at = failure.seed if failure.seed is not None else part[2] if part else config.seed
    if part is None:
        return f"Shrunk counterexample for {spec.id} {spec.version} (seed {found_at}, profile {config.profile})"
    return (
        f"Shrunk counterexample for {spec.id} {spec.version} (run seed {config.seed}, profile {config.profile}; "
        f"found by exploration part {part[0]} of {part[1]}, at its derived seed {found_at})"
    )


def _write_counterexample(
    path: Path, spec: Spec, failure: Failure, config: RunConfig, part: tuple | None = None
) -> None:
    from .bindings import bound_steps

    # the replayable steps (a group's probe calls left out: its replay makes them again),
    # each value the implementation chose bound to the step that chose it (engine/bindings.py)
    steps = bound_steps(failure.steps)
    doc = {
        "id": "stateful-counterexample",
        "title": _counterexample_title(spec, failure, config, part),
        "failure": failure.headline(),  # bounded: serialising a huge answer here took minutes
        "requires": ["concurrent"] if any("concurrently" in s for s in failure.steps) else [],
        "steps": steps,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    header = (
        "# The failing step list the stateful exploration found, shrunk by Hypothesis and reduced by replaying\n"
        "# it (every step left is needed for this failure); replay it with the command in the report.\n"
    )
    write_atomic(path, header + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=120))

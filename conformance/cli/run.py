"""``conformance run``: its options, parsed once into a ``RunRequest``, and
the run in this process or in worker processes (conformance/workers.py),
which receive the run's ``RunConfig`` as an object."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import click

from statemachines import Spec, SpecError, load_spec

from ..engine.budgets import MAX_FAILURES
from ..engine.profiles import PROFILES
from ..engine.runner import RunConfig, hand_over_spec, run_conformance
from ..errors import AdapterLoadError
from ..progress import VERBOSE, progress_for
from .common import (
    ExplorationProfile,
    adapter_options,
    capture_implementation_output,
    check_adapter_choice,
    cli,
    console,
    deviations_option,
    errors,
    finish,
    parse_seed,
    spec_file,
    verbosity,
    verbosity_options,
    with_options,
)
from .entry import run_guarded

__all__ = ["RunRequest", "run", "run_request", "run_here", "run_worker"]


@dataclass(frozen=True)
class RunRequest:
    """``conformance run`` as its options ask, checked and parsed once: what
    to run (the engine's config, which each worker process receives with its
    part set), in how many processes, and how much to show."""

    config: RunConfig
    workers: int  # processes: 1 runs everything in this one
    level: int  # QUIET, NORMAL or VERBOSE (conformance.progress)


@cli.command()
@click.argument("spec", type=click.Path(dir_okay=False))
@with_options(adapter_options)
@click.option(
    "--profile",
    type=ExplorationProfile(),
    default="ci",
    show_default=True,
    help="How much stateful exploration: quick, ci or deep.",
)
@click.option("--seed", default="1", show_default=True, help="Seed of the exploration (a number, or 'random').")
@click.option(
    "--report-dir",
    default="reports",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Where report.json, junit.xml and summary.md are written.",
)
@click.option("--scenario", "only", multiple=True, metavar="ID", help="Run only these scenarios (repeatable).")
@click.option(
    "--scenarios-file",
    "scenario_files",
    multiple=True,
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="A file of your own scenarios (a `scenarios:` list, as `conformance replay --to-scenario` writes "
    "a kept failure) run after the spec's matrix (repeatable).",
)
@click.option("--no-scenarios", is_flag=True, help="Skip the scenario matrix.")
@click.option("--no-stateful", is_flag=True, help="Skip the stateful exploration.")
@click.option(
    "--min-coverage",
    "min_coverage",
    multiple=True,
    metavar="CATEGORY=PERCENT",
    help="Fail (exit 1) when the run exercised less of a category: transitions, states, operations, "
    "error-kinds, policies, boundary-classes or races (repeatable), e.g. transitions=90.",
)
@click.option(
    "--record",
    "record_dir",
    type=click.Path(file_okay=False),
    default=None,
    metavar="DIR",
    help="Write the trace of every scenario as it ran to DIR/<id>.jsonl (re-check it offline with "
    "`conformance check-trace`, attach a failing one to a bug report).",
)
@click.option(
    "--observability",
    is_flag=True,
    help="Write Hypothesis's observations of the exploration (JSON lines, each test case with its steps' "
    "operations, outcomes and transitions as features, for Tyche) to REPORT_DIR/observed/testcases.jsonl.",
)
@click.option(
    "--max-failures",
    "max_failures",
    type=click.IntRange(1, 50),
    default=MAX_FAILURES,
    show_default=True,
    help="Distinct exploration failures to look for: after one, the exploration goes on with it "
    "accepted, and each distinct failure gets its own counterexample file (what an accepted "
    "failure leaves behind, later reads that differ because of it, is not counted again).",
)
@click.option(
    "--beyond-pools",
    "beyond_pools",
    type=click.FloatRange(0, 50),
    default=None,
    metavar="PERCENT",
    help="The percent of the draws of an argument drawn from a pool (exploration.pools) that leave "
    "it: two thirds near misses of a pool value (other case, Unicode form, full width, white space, "
    "a path, the longest value allowed), one third values of the argument's JSON Schema; every one "
    "within that schema (default: the profile's, 12; 0: the pools' values alone).",
)
@click.option(
    "--example-db",
    "example_db",
    default=None,
    metavar="DIR",
    help="Where Hypothesis keeps the failing examples it found, so the next run tries them again "
    "after its own examples found nothing (default: REPORT_DIR/example-db/<spec>-<digest>; 'none' keeps nothing).",
)
@click.option(
    "--race-runs",
    "race_runs",
    type=click.IntRange(1, 1000),
    default=20,
    show_default=True,
    help="How many times each scenario that races calls runs (unless it sets `race_runs:`): a "
    "lost-update race may pass one run and fail the next. One whose calls never met the race window "
    "(never in flight together) in any run is reported as not exercised.",
)
@click.option(
    "--workers",
    "workers",
    default=None,
    metavar="N|auto",
    help="Run in N worker processes, each a part of the scenario matrix and of the exploration's examples "
    "(its own seed, derived from --seed), merged into one report; 1 runs everything in this process. "
    "Default: $CONFORMANCE_WORKERS, else 'auto': the cores available. The implementation is "
    "started once per worker: say --workers 1 when it cannot run twice side by side (docs/ci.md).",
)
@click.option(
    "--shard",
    "shard",
    default=None,
    metavar="I/N",
    help="Run only part I of N (for N CI jobs): 1/N of the scenarios (split by estimated cost) and 1/N of "
    "the exploration's examples; "
    "the report is partial: combine the N with `conformance merge-reports` (docs/ci.md).",
)
@click.option(
    "--example-db-base",
    "example_db_base",
    default=None,
    hidden=True,
    help="Where the default example databases go (workers: the final report directory's).",
)
@click.option(
    "--scenario-claims",
    "scenario_claims",
    default=None,
    hidden=True,
    type=click.Path(file_okay=False),
    help="A directory the workers of one run share: run each scenario not claimed there yet, the "
    "cheapest after this part of the exploration (workers: their temporary directory's).",
)
@deviations_option
@with_options(verbosity_options)
def run(**options: Any) -> None:
    """Check an implementation against SPEC: the scenario matrix, then a
    Hypothesis stateful exploration generated from the spec.

    SPEC is a spec file or the name of an installed spec (`conformance
    specs` lists them). Without --adapter/--adapter-cmd/--adapter-cli the
    spec's bundled reference implementation is checked.

    \b
    Exit codes: 0 conforms, 1 does not conform, 2 usage, spec or
    adapter-loading error, 3 a kept scenario did not reach its recorded
    state (not reproducing), 130 interrupted (Ctrl-C, SIGINT), 143
    terminated (SIGTERM). An interrupted run still writes every report,
    with the verdict `interrupted` and what finished."""
    request = run_request(options)
    if request.workers > 1:
        _run_in_workers(request)
    else:
        run_here(request.config, request.level)


def run_request(options: Mapping[str, Any]) -> RunRequest:
    """The options ``run`` was given (click's names), checked and parsed, in
    the order their usage errors are reported."""
    level = verbosity(options["quiet"], options["verbose"])
    spec_file(options["spec"])
    check_adapter_choice(options["adapter"], options["adapter_opts"], options["adapter_cmd"], options["adapter_cli"])
    adapter_options = _adapter_options(options["adapter_opts"])
    minimums, shard, workers = _run_shape(options)
    config = RunConfig(
        spec_path=options["spec"],
        adapter=options["adapter"],
        adapter_options=adapter_options,
        adapter_cmd=options["adapter_cmd"],
        adapter_cli=options["adapter_cli"],
        timeout_s=options["timeout_s"],
        profile=options["profile"],
        seed=parse_seed(options["seed"]),
        report_dir=options["report_dir"],
        only=tuple(options["only"]),
        scenario_files=tuple(_readable(path) for path in options["scenario_files"]),
        scenarios=not options["no_scenarios"],
        stateful=not options["no_stateful"],
        min_coverage=minimums,
        record_dir=options["record_dir"],
        max_failures=options["max_failures"],
        beyond_pools=options["beyond_pools"],
        example_db=options["example_db"],
        race_runs=options["race_runs"],
        shard=shard,
        example_db_base=options["example_db_base"],
        scenario_claims=options["scenario_claims"],
        deviations=options["deviations"],
        observations=_observations_file(options),
    )
    return RunRequest(config, workers, level)


def _observations_file(options: Mapping[str, Any]) -> str | None:
    """--observability: the file every process of the run appends to, begun afresh."""
    if not options["observability"]:
        return None
    path = os.path.abspath(os.path.join(options["report_dir"], "observed", "testcases.jsonl"))
    try:
        os.unlink(path)
    except OSError:
        pass
    return path


def _readable(path: str) -> str:
    """A --scenarios-file that is not there is a usage error that names it, before anything runs."""
    if not os.path.isfile(path):
        raise click.UsageError(f"--scenarios-file {path}: no such file")
    return path


def _adapter_options(pairs: tuple[str, ...]) -> dict[str, str]:
    from ..adapters.python import parse_options

    try:
        return parse_options(pairs)
    except AdapterLoadError as exc:
        raise click.UsageError(str(exc)) from None


def _run_shape(options: Mapping[str, Any]) -> tuple[dict[str, float], tuple[int, int] | None, int]:
    """--min-coverage, --shard and --workers parsed: the gates, the part this
    process runs, and how many worker processes run it."""
    from ..engine.coverage import parse_min_coverage
    from ..engine.shards import parse_shard
    from ..workers import fork_workers, parse_workers

    workers = options["workers"]
    try:
        minimums = parse_min_coverage(options["min_coverage"])
        shard = parse_shard(options["shard"]) if options["shard"] is not None else None
        count = parse_workers(workers)
        if count > 1:
            fork_workers()  # CONFORMANCE_WORKER_START is checked before anything starts
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    if shard is not None and count > 1:
        if workers is not None:
            raise click.UsageError(
                "--shard runs one part of a run in this process; --workers splits a run itself: "
                "give one of them (or --workers 1 with --shard)"
            )
        count = 1  # CONFORMANCE_WORKERS does not split a shard again
    if workers is None and options["only"]:  # named scenarios only: no worker without a scenario of its own
        count = min(count, len(set(options["only"])))
    return minimums, shard, count


def run_here(config: RunConfig, level: int) -> None:
    """The run in this process, shown as ``level`` asks; ends with SystemExit (the verdict's code)."""
    config = dataclasses.replace(config, output_capture=capture_implementation_output())
    with progress_for(console, errors, level) as progress:
        report = run_conformance(config, progress)
    finish(report, level)


def run_worker(config: RunConfig) -> None:
    """A worker process of ``run --workers N`` (conformance/workers.py): its
    part of the run, each scenario's verdict and the progress on stderr for
    the parent to read; ends with SystemExit."""
    run_guarded(lambda: run_here(config, VERBOSE))


def _run_in_workers(request: RunRequest) -> None:
    """``run --workers N``: N parts of this run in worker processes, merged (conformance/workers.py)."""
    from ..workers import run_in_workers, start_workers

    config = request.config
    # The workers keep their failing examples where a run in one process would.
    base = os.path.join(str(config.report_dir), "example-db") if config.example_db is None else None
    config = dataclasses.replace(config, example_db_base=base)
    # The spec is loaded once, here, before the workers start: a forked worker
    # runs on this process's copy of it (engine/runner.py: hand_over_spec) rather
    # than load it again, and this process merges with it. The workers start
    # before the progress display's thread does.
    path = spec_file(config.spec_path)
    loaded = _load_for_workers(path)
    try:
        begun = start_workers(config, request.workers, run_worker)
    finally:
        if loaded is not None:
            hand_over_spec(path, None)
    try:  # this process only waits, shows progress and merges: the workers get the cores first
        os.nice(10)
    except (AttributeError, OSError):  # no nice on this system, or not allowed
        pass
    try:
        with progress_for(console, errors, request.level) as progress:
            report = run_in_workers(
                begun,
                progress,
                scenarios_total=_scenarios_total(config, loaded),
                examples_total=_examples_total(config),
                spec=loaded,
            )
    except BaseException:
        for worker in begun.workers:
            if worker.running():
                worker.kill()
        raise
    finish(report, request.level)


def _load_for_workers(path: str) -> Spec | None:
    """The spec, handed over to the workers about to be forked; None when it
    does not load (every worker reports its problems)."""
    try:
        loaded = load_spec(path)
    except SpecError:
        return None
    hand_over_spec(path, loaded)
    return loaded


def _scenarios_total(config: RunConfig, spec: Spec | None) -> int:
    if not config.scenarios or spec is None:
        return 0
    return len([s for s in spec.scenarios if not config.only or s.id in config.only])


def _examples_total(config: RunConfig) -> int:
    return 0 if not config.stateful or config.only else int(PROFILES[config.profile]["max_examples"])

"""The ``conformance`` command.

Exit codes: 0 the implementation conforms (or the spec is valid, or every
mutant was killed); 1 it does not; 2 a usage, spec or adapter-loading error.
"""

from __future__ import annotations

import math
import os
import re
import sys
import traceback

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from statemachines import SpecError, load_spec

from .engine import runner as R
from .engine.session import DEFAULT_TIMEOUT_S
from .engine.stateful import PROFILES
from .errors import AdapterLoadError, ConformanceError
from .progress import NORMAL, QUIET, VERBOSE, progress_for
from .scaffold import TRANSPORTS
from .schema_files import SCHEMA_NAMES
from .specs import SpecNotFound, bundled_specs, resolve_spec, spec_target_problem

__all__ = ["main", "cli"]

# In CI logs (no terminal) rich would wrap at 80 columns; tables get a wide
# page, and plain lines (paths, file:line, replay commands) are never wrapped.
console = Console(highlight=False, width=None if sys.stdout.isatty() else 160, soft_wrap=True)
errors = Console(stderr=True, highlight=False, soft_wrap=True)


class _Seconds(click.ParamType):
    """A positive, finite number of seconds."""

    name = "seconds"

    def convert(self, value, param, ctx):
        try:
            number = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        if not math.isfinite(number) or number <= 0:
            self.fail(f"{value!r} must be a positive, finite number of seconds", param, ctx)
        return number


def _parse_seed(value: str) -> int:
    if value == "random":
        return int.from_bytes(os.urandom(4), "big")
    try:
        return int(value)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a whole number or 'random'") from None


def _print_problems(report: dict) -> None:
    for problem in report.get("problems", []):
        where = f"{problem['where']}: " if problem.get("where") else ""
        errors.print(Text("error ", style="bold red") + Text(f"{where}{problem['message']}"))


def _finish(report: dict, level: int = NORMAL) -> None:
    from .reporting import render_console_summary

    if report["verdict"] == "error":
        _print_problems(report)
    elif level <= QUIET:
        failed = [s for s in report["scenarios"] if s["verdict"] in ("fail", "error")]
        if report.get("stateful") and report["stateful"]["verdict"] in ("fail", "error"):
            failed.append({"id": "stateful", **report["stateful"]})
        for entry in failed:
            message = ((entry.get("failure") or {}).get("message") or "").splitlines()[:1]
            console.print(f"FAIL {entry['id']}: {message[0] if message else entry['verdict']}", markup=False)
        console.print(f"Verdict: {report['verdict'].upper()}", markup=False)
    else:
        try:
            render_console_summary(report, console)
        except Exception as exc:
            errors.print(
                f"error: the console summary failed ({type(exc).__name__}: {exc}); the reports hold every detail",
                markup=False,
            )
            console.print(f"Verdict: {str(report['verdict']).upper()}  (exit code {report['exit_code']})", markup=False)
    if level > QUIET:
        _say_output_was_captured(report)
    paths = report.get("_paths") or {}
    if paths:
        console.print("reports: " + ", ".join(paths.values()), highlight=False)
    if report.get("_write_error"):
        errors.print(f"error: writing the reports failed: {report['_write_error']}", markup=False)
    sys.exit(report["exit_code"])


def _say_output_was_captured(report: dict) -> None:
    """One line when an in-process implementation printed: where it went."""
    cases = [entry["output"] for entry in report.get("scenarios") or [] if entry.get("output")]
    if (report.get("stateful") or {}).get("output"):
        cases.append(report["stateful"]["output"])
    if cases:
        written = sum(case.get("stdout_bytes", 0) + case.get("stderr_bytes", 0) for case in cases)
        console.print(
            f"the implementation printed {written} bytes to stdout/stderr in {len(cases)} case(s): kept "
            f"in report.json (`output` of each case), not shown here",
            markup=False,
            style="dim",
        )


adapter_options = [
    click.option(
        "--adapter",
        "adapter",
        metavar="MODULE:ATTR",
        help="The implementation's adapter (an Adapter class or factory). "
        "Default: the spec's bundled reference implementation.",
    ),
    click.option(
        "--adapter-opt",
        "adapter_opts",
        multiple=True,
        metavar="KEY=VALUE",
        help="Keyword option passed to the adapter (repeatable).",
    ),
    click.option(
        "--adapter-cmd",
        "adapter_cmd",
        metavar="COMMAND",
        help="Run the implementation as a program speaking the stdio adapter protocol "
        "(`conformance docs adapter-protocol`), e.g. \"node my-adapter.js\". Not with --adapter.",
    ),
    click.option(
        "--adapter-cli",
        "adapter_cli",
        metavar="CONFIG",
        type=click.Path(dir_okay=False),
        help="Run a command-line tool as the implementation, one invocation per operation, as the "
        "config file says (`conformance docs command-adapter`). --adapter-opt sets its profile and vars.",
    ),
    click.option(
        "--timeout",
        "timeout_s",
        type=_Seconds(),
        default=DEFAULT_TIMEOUT_S,
        show_default=True,
        help="Seconds one operation may take before it counts as hung.",
    ),
]


deviations_option = click.option(
    "--deviations",
    type=click.Path(dir_okay=False),
    default=None,
    metavar="FILE",
    help="A deviations file: differences your team accepts and inputs not to send, each with a reason and an "
    "optional expiry date; every report lists them (`conformance docs deviations`).",
)


def _check_adapter_choice(adapter, adapter_opts, adapter_cmd, adapter_cli=None) -> None:
    if adapter_cmd is not None and (adapter or adapter_opts or adapter_cli):
        raise click.UsageError(
            "--adapter-cmd runs a program; it cannot be combined with --adapter, --adapter-opt or --adapter-cli"
        )
    if adapter_cli is not None and adapter:
        raise click.UsageError("--adapter-cli runs a command-line tool; it cannot be combined with --adapter")


def _spec_file(spec: str) -> str:
    """SPEC as a file to load: a path, or the name of an installed spec. A
    name that is neither is a usage error, before anything runs or is written."""
    try:
        path = resolve_spec(spec)
    except SpecNotFound as exc:
        raise click.UsageError(str(exc)) from None
    if not os.path.exists(path):
        raise click.UsageError(
            f"cannot read spec {spec}: no such file (give a spec file, or the name of an "
            f"installed spec: `conformance specs` lists them)"
        )
    return path


verbosity_options = [
    click.option("-q", "--quiet", is_flag=True, help="Only the verdict, failures and where the reports are."),
    click.option("-v", "--verbose", is_flag=True, help="Also a line per scenario as it finishes."),
]


def _verbosity(quiet: bool, verbose: bool) -> int:
    if quiet and verbose:
        raise click.UsageError("--quiet and --verbose exclude each other")
    return QUIET if quiet else VERBOSE if verbose else NORMAL


def _with(options):
    def decorate(fn):
        for option in reversed(options):
            fn = option(fn)
        return fn

    return decorate


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(R.KIT_VERSION, prog_name="conformance")
def cli() -> None:
    """Spec-driven conformance kit for job and task lifecycles."""


@cli.command()
@click.argument("spec", type=click.Path(dir_okay=False))
@_with(adapter_options)
@click.option(
    "--profile",
    type=click.Choice(sorted(PROFILES)),
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
    "--max-failures",
    "max_failures",
    type=click.IntRange(1, 50),
    default=3,
    show_default=True,
    help="Distinct exploration failures to look for: after one, the exploration goes on with it "
    "accepted, and each distinct failure gets its own counterexample file (what an accepted "
    "failure leaves behind, later reads that differ because of it, is not counted again).",
)
@click.option(
    "--example-db",
    "example_db",
    default=None,
    metavar="DIR",
    help="Where Hypothesis keeps the failing examples it found, so the next run tries them first "
    "(default: REPORT_DIR/example-db/<spec>-<digest>; 'none' keeps nothing).",
)
@click.option(
    "--race-runs",
    "race_runs",
    type=click.IntRange(1, 1000),
    default=20,
    show_default=True,
    help="How many times each scenario that races calls runs (unless it sets `race_runs:`): a "
    "lost-update race may pass one run and fail the next.",
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
@_with([deviations_option])
@_with(verbosity_options)
def run(
    spec,
    adapter,
    adapter_opts,
    adapter_cmd,
    adapter_cli,
    timeout_s,
    profile,
    seed,
    report_dir,
    only,
    no_scenarios,
    no_stateful,
    min_coverage,
    record_dir,
    max_failures,
    example_db,
    race_runs,
    workers,
    shard,
    example_db_base,
    scenario_claims,
    deviations,
    quiet,
    verbose,
):
    """Check an implementation against SPEC: the scenario matrix, then a
    Hypothesis stateful exploration generated from the spec.

    SPEC is a spec file or the name of an installed spec (`conformance
    specs` lists them). Without --adapter/--adapter-cmd/--adapter-cli the
    spec's bundled reference implementation is checked.

    \b
    Exit codes: 0 conforms, 1 does not conform, 2 usage, spec or
    adapter-loading error, 130 interrupted (Ctrl-C, SIGINT), 143
    terminated (SIGTERM). An interrupted run still writes every report,
    with the verdict `interrupted` and what finished."""
    from .adapters.python import parse_options
    from .engine.shards import parse_shard
    from .workers import fork_workers, parse_workers

    level = _verbosity(quiet, verbose)
    _spec_file(spec)
    _check_adapter_choice(adapter, adapter_opts, adapter_cmd, adapter_cli)
    from .engine.coverage import parse_min_coverage

    try:
        options = parse_options(adapter_opts)
    except AdapterLoadError as exc:
        raise click.UsageError(str(exc)) from None
    try:
        minimums = parse_min_coverage(min_coverage)
        parts = parse_shard(shard) if shard is not None else None
        worker_count = parse_workers(workers)
        if worker_count > 1:
            fork_workers()  # CONFORMANCE_WORKER_START is checked before anything starts
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    if parts is not None and worker_count > 1:
        if workers is not None:
            raise click.UsageError(
                "--shard runs one part of a run in this process; --workers splits a run itself: "
                "give one of them (or --workers 1 with --shard)"
            )
        worker_count = 1  # CONFORMANCE_WORKERS does not split a shard again
    if workers is None and only:  # named scenarios only: no worker without a scenario of its own
        worker_count = min(worker_count, len(set(only)))
    seed_value = _parse_seed(seed)
    if worker_count > 1:
        _run_in_workers(
            worker_count,
            level,
            spec=spec,
            report_dir=report_dir,
            profile=profile,
            seed=seed_value,
            only=only,
            no_scenarios=no_scenarios,
            no_stateful=no_stateful,
            example_db=example_db,
            args=_worker_args(
                spec,
                adapter,
                adapter_opts,
                adapter_cmd,
                adapter_cli,
                timeout_s,
                profile,
                seed_value,
                only,
                no_scenarios,
                no_stateful,
                min_coverage,
                record_dir,
                max_failures,
                example_db,
                race_runs,
                deviations,
            ),
        )
        return
    config = R.RunConfig(
        min_coverage=minimums,
        spec_path=spec,
        adapter=adapter,
        adapter_options=options,
        adapter_cmd=adapter_cmd,
        adapter_cli=adapter_cli,
        profile=profile,
        seed=seed_value,
        report_dir=report_dir,
        only=tuple(only),
        shard=parts,
        example_db_base=example_db_base,
        scenarios=not no_scenarios,
        stateful=not no_stateful,
        timeout_s=timeout_s,
        record_dir=record_dir,
        deviations=deviations,
        example_db=example_db,
        max_failures=max_failures,
        race_runs=race_runs,
        scenario_claims=scenario_claims,
    )
    config.output_capture = _capture_implementation_output()
    with progress_for(console, errors, level) as progress:
        report = R.run_conformance(config, progress)
    _finish(report, level)


def _worker_args(
    spec,
    adapter,
    adapter_opts,
    adapter_cmd,
    adapter_cli,
    timeout_s,
    profile,
    seed,
    only,
    no_scenarios,
    no_stateful,
    min_coverage,
    record_dir,
    max_failures,
    example_db,
    race_runs,
    deviations,
) -> list[str]:
    """The arguments of ``conformance run`` each worker gets (it adds --shard and --report-dir)."""
    args = [spec]
    if adapter is not None:
        args += ["--adapter", adapter]
    for option in adapter_opts:
        args += ["--adapter-opt", option]
    for flag, value in (
        ("--adapter-cmd", adapter_cmd),
        ("--adapter-cli", adapter_cli),
        ("--record", record_dir),
        ("--example-db", example_db),
        ("--deviations", deviations),
    ):
        if value is not None:
            args += [flag, value]
    args += [
        "--timeout",
        repr(timeout_s),
        "--profile",
        profile,
        "--seed",
        str(seed),
        "--max-failures",
        str(max_failures),
        "--race-runs",
        str(race_runs),
    ]
    for scenario_id in only:
        args += ["--scenario", scenario_id]
    for gate in min_coverage:
        args += ["--min-coverage", gate]
    args += ["--no-scenarios"] * bool(no_scenarios) + ["--no-stateful"] * bool(no_stateful)
    return args


def _run_in_workers(
    count: int, level: int, *, spec, report_dir, profile, seed, only, no_scenarios, no_stateful, example_db, args
) -> None:
    """``run --workers N``: N shards of this run in worker processes, merged (conformance/workers.py)."""
    from .workers import run_in_workers, start_workers

    if example_db is None:  # the workers keep their failing examples where a run in one process would
        args = args + ["--example-db-base", os.path.join(report_dir, "example-db")]
    # The spec is loaded once, here, before the workers start: a forked worker
    # runs on this process's copy of it (engine/runner.py: hand_over_spec) rather
    # than load it again, and this process merges with it. The workers start
    # before the progress display's thread does.
    spec_file = _spec_file(spec)
    try:
        loaded = load_spec(spec_file)
    except SpecError:
        loaded = None  # every worker reports the spec's problems
    else:
        R.hand_over_spec(spec_file, loaded)
    try:
        begun = start_workers(args, count, report_dir, entry=main)
    finally:
        if loaded is not None:
            R.hand_over_spec(spec_file, None)
    try:  # this process only waits, shows progress and merges: the workers get the cores first
        os.nice(10)
    except (AttributeError, OSError):  # no nice on this system, or not allowed
        pass
    try:
        scenarios = [] if no_scenarios or loaded is None else [s for s in loaded.scenarios if not only or s.id in only]
        examples = 0 if no_stateful or only else PROFILES[profile]["max_examples"]
        with progress_for(console, errors, level) as progress:
            report = run_in_workers(
                args,
                count,
                report_dir,
                progress,
                scenarios_total=len(scenarios),
                examples_total=examples,
                spec=loaded,
                begun=begun,
            )
    except BaseException:
        for worker in begun.workers:
            if worker.running():
                worker.kill()
        raise
    _finish(report, level)


@cli.command("merge-reports")
@click.argument("out_dir", type=click.Path(file_okay=False))
@click.argument("shards", nargs=-1, required=True, type=click.Path())
@click.option(
    "--spec",
    "spec_name",
    default=None,
    metavar="SPEC",
    help="The spec the shards ran (a file or an installed spec's name); default: the path their reports "
    "name, read from here.",
)
@_with(verbosity_options)
def merge_reports_command(out_dir, shards, spec_name, quiet, verbose):
    """Combine the reports of the shards of one run (`conformance run --shard
    I/N`, one per I: their report directories or report.json files) into one
    report.json, junit.xml and summary.md in OUT_DIR, with one verdict:
    scenarios, exploration examples, coverage (and --min-coverage gates) and
    distinct failures of all shards, counterexample files copied along.

    \b
    Exit codes: 0 conforms, 1 does not conform, 2 shards that cannot be
    merged (of different runs, missing or given twice) or a shard that
    could not run, 130/143 a shard was interrupted."""
    from .engine.shards import load_shard_report, merge_reports

    level = _verbosity(quiet, verbose)
    loaded = [load_shard_report(path) for path in shards]
    target = os.path.realpath(out_dir)
    for _, directory in loaded:
        if os.path.realpath(directory) == target:
            raise click.UsageError(
                f"OUT_DIR {out_dir} is the report directory of a shard; write the merged "
                f"report to a directory of its own"
            )
    spec = None
    if spec_name is not None:
        try:
            spec = load_spec(_spec_file(spec_name))
        except SpecError as exc:
            errors.print(str(exc), markup=False)
            sys.exit(2)
    report = merge_reports(loaded, None, spec=spec)  # refuses (exit 2) before anything is written
    cleared: dict = {"problems": []}
    R.clear_report_files(cleared, out_dir)
    report = merge_reports(loaded, out_dir, spec=spec)
    report["problems"] = cleared["problems"] + report["problems"]
    R.write_report_files(report, out_dir)
    _finish(report, level)


@cli.command()
@click.argument("spec", type=click.Path(dir_okay=False))
@click.argument("steps_file", type=click.Path(dir_okay=False))
@_with(adapter_options)
@click.option("--report-dir", default="reports", show_default=True, type=click.Path(file_okay=False))
@_with([deviations_option])
def replay(spec, steps_file, adapter, adapter_opts, adapter_cmd, adapter_cli, timeout_s, report_dir, deviations):
    """Replay a counterexample STEPS_FILE (written by a failed run) against an
    implementation. SPEC is a spec file or the name of an installed spec.

    \b
    Exit codes: 0 conforms, 1 does not conform, 2 usage, spec or
    adapter-loading error, 130 interrupted (Ctrl-C, SIGINT), 143
    terminated (SIGTERM)."""
    from .adapters.python import parse_options

    _spec_file(spec)
    _check_adapter_choice(adapter, adapter_opts, adapter_cmd, adapter_cli)
    config = R.RunConfig(
        spec_path=spec,
        adapter=adapter,
        adapter_options=parse_options(adapter_opts),
        adapter_cmd=adapter_cmd,
        adapter_cli=adapter_cli,
        report_dir=report_dir,
        stateful=False,
        replay_file=steps_file,
        timeout_s=timeout_s,
        deviations=deviations,
    )
    config.output_capture = _capture_implementation_output()
    report = R.run_conformance(config)
    _finish(report)


def _capture_implementation_output():
    """From here to the end of the process, fds 1 and 2 belong to the
    implementation (captured per case into the report: engine/output_capture.py)
    and the kit's console writes through duplicates of the originals. Not
    when stdout/stderr are not the process's own (e.g. click's CliRunner)."""
    from .engine.output_capture import OutputCapture

    try:
        if sys.stdout.fileno() != 1 or sys.stderr.fileno() != 2:
            return None
    except (AttributeError, OSError, ValueError):
        return None
    capture = OutputCapture.start()
    if capture is not None:
        console.file, errors.file = capture.kit_stdout, capture.kit_stderr
    return capture


def _is_fragment(path: str) -> bool:
    """A file meant for another spec's `include:` (it has no `format:` of its own)."""
    from statemachines.load.source import load_yaml_file

    try:
        data, _ = load_yaml_file(path)
    except SpecError:
        return False  # let the full load report it
    return isinstance(data, dict) and "format" not in data and "id" not in data and bool(data)


def _including_specs(fragment: str) -> list[str]:
    """Spec files in the fragment's directory whose `include:` names it."""
    from pathlib import Path

    from statemachines.load.source import load_yaml_file

    target = Path(fragment).resolve()
    found = []
    for candidate in sorted(target.parent.glob("*.y*ml")):
        if candidate.resolve() == target:
            continue
        try:
            data, _ = load_yaml_file(str(candidate))
        except SpecError:
            continue
        includes = data.get("include") if isinstance(data, dict) else None
        if isinstance(includes, list) and any(
            isinstance(name, str) and (candidate.parent / name).resolve() == target for name in includes
        ):
            found.append(str(Path(fragment).parent / candidate.name))
    return found


@cli.command()
@click.argument("specs", nargs=-1, required=True, type=click.Path(dir_okay=False))
def validate(specs):
    """Check spec files: YAML, structure, expressions, references. Each
    SPECS item is a file or the name of an installed spec. Exit 0 (all valid)
    or 2."""
    bad = 0
    queue = list(specs)
    for given in queue:
        try:
            path = resolve_spec(given)  # a path that does not exist comes back for the loader to report
        except SpecNotFound as exc:
            bad += 1
            errors.print(Text(f"✗ {given}", style="bold red") + Text(f": {exc}"))
            continue
        if _is_fragment(path):
            # A changed fragment (e.g. from a pre-commit hook) is checked through the specs beside it
            # that include it, so a broken scenario file cannot pass on its own.
            owners = _including_specs(path)
            queue += [owner for owner in owners if owner not in queue]
            via = f"checked through {', '.join(owners)}" if owners else "checked as part of the spec that includes it"
            console.print(Text("· ", style="dim") + Text(f"{given}: a fragment (no `format:`), {via}"))
            continue
        try:
            spec = load_spec(path)
        except SpecError as exc:
            bad += 1
            errors.print(Text(f"✗ {given}", style="bold red") + Text(f": {len(exc.problems)} problem(s)"))
            for problem in exc.problems:
                errors.print(Text(f"  {problem}"))
            continue
        console.print(
            Text("✓ ", style="green")
            + Text(
                f"{given}: {spec.id} {spec.version} — {len(spec.lifecycle.states)} states, {len(spec.operations)} "
                f"operations, {len(spec.scenarios)} scenarios, {len(spec.invariants)} invariants"
            )
        )
    sys.exit(2 if bad else 0)


# -- spec authors' tools (issue 13): lint ------------------------------------
@cli.command()
@click.argument("specs", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--strict", is_flag=True, help="Exit 1 when any finding is not suppressed (default: warnings only).")
@click.option("--json", "as_json", is_flag=True, help="Print the findings as JSON.")
@click.option("--show-suppressed", is_flag=True, help="Also list the findings the spec suppresses, with its reasons.")
def lint(specs, strict, as_json, show_suppressed):
    """Find what is valid but probably wrong or untested in spec files: unreachable
    states, unfired transitions, unused parameters, definitions and effects,
    error kinds never raised, operations, transitions, errors and policies no
    scenario exercises, profiles restating defaults. Exit 0 (warnings), 1 with
    --strict when a finding is not suppressed, 2 when a spec does not load."""
    import json

    from statemachines.tools.lint import lint_spec

    resolved = []
    for given in specs:  # a file, or the name of an installed spec
        try:
            resolved.append(resolve_spec(given))
        except SpecNotFound as exc:
            raise click.UsageError(str(exc)) from None
    specs = resolved
    fragments = [path for path in specs if _is_fragment(path)]
    reports = [lint_spec(path) for path in specs if path not in fragments]
    if not as_json:
        for path in fragments:
            console.print(
                Text("· ", style="dim")
                + Text(f"{path}: a fragment (no `format:`), linted as part of the spec that includes it")
            )
    if as_json:
        click.echo(json.dumps([r.to_dict() for r in reports], indent=2))
    else:
        for report in reports:
            for problem in report.problems:
                errors.print(Text("error ", style="bold red") + Text(str(problem)))
            shown = report.findings if show_suppressed else report.active
            for finding in shown:
                style = "bold red" if finding.severity == "error" else "yellow"
                line = Text(f"{finding.where}: ") + Text(f"{finding.severity}[{finding.rule}]", style=style)
                line += Text(f": {finding.message}")
                console.print(line)
                if finding.hint:
                    console.print(Text(f"    hint: {finding.hint}", style="dim"))
                if finding.suppressed is not None:
                    console.print(Text(f"    suppressed: {' '.join(finding.suppressed.split())}", style="dim"))
            mark = (
                Text("✗ ", style="red")
                if report.problems
                else (Text("! ", style="yellow") if report.active else Text("✓ ", style="green"))
            )
            tail = (
                f"does not load ({len(report.problems)} problem(s)); run `conformance validate`"
                if report.problems
                else f"{len(report.active)} finding(s), {len(report.suppressed)} suppressed"
            )
            console.print(mark + Text(f"{report.path}: {tail}"))
    if any(r.problems or any(f.severity == "error" for f in r.findings) for r in reports):
        sys.exit(2)
    sys.exit(1 if strict and any(r.active for r in reports) else 0)


# -- spec authors' tools (issue 13): diff ------------------------------------
@cli.command()
@click.argument("old", type=click.Path(dir_okay=False))
@click.argument("new", required=False, type=click.Path(dir_okay=False))
@click.option("--rev", metavar="GITREV", help="Compare OLD as it was at this git revision with OLD as it is now.")
@click.option("--json", "as_json", is_flag=True, help="Print the changes as JSON instead of Markdown.")
@click.option("--output", "output", type=click.Path(dir_okay=False), help="Also write the Markdown to this file.")
@click.option(
    "--check-version", is_flag=True, help="Exit 1 when the new version is bumped less than the changes call for."
)
def diff(old, new, rev, as_json, output, check_version):
    """What changed between two versions of a spec (OLD NEW, or OLD --rev GITREV),
    whether each change makes it stricter, looser or neither for implementations,
    which scenarios it touches, and the version bump it calls for. Markdown
    (for a pull-request comment) or --json. Exit 0, 1 (--check-version), 2."""
    import json

    from statemachines.tools.diff import diff_specs, render_diff_markdown

    from .spec_revision import load_spec_at_revision

    if (rev is None) == (new is None):
        raise click.UsageError("give two spec files (OLD NEW), or one spec and --rev GITREV")
    try:
        before = load_spec_at_revision(old, rev) if rev else load_spec(old)
        after = load_spec(old if rev else new)
    except SpecError as exc:
        for problem in exc.problems:
            errors.print(Text(f"error {problem}"))
        sys.exit(2)
    result = diff_specs(before, after)
    markdown = render_diff_markdown(result)
    if output:
        with open(output, "w", encoding="utf-8") as handle:
            handle.write(markdown)
    click.echo(json.dumps(result.to_dict(), indent=2, ensure_ascii=False) if as_json else markdown)
    sys.exit(1 if check_version and not result.version_ok else 0)


@cli.command()
@click.argument("spec", type=click.Path(dir_okay=False))
@click.option(
    "--profile",
    type=click.Choice(sorted(PROFILES)),
    default="ci",
    show_default=True,
    help="How much stateful exploration: quick, ci or deep.",
)
@click.option("--seed", default="1", show_default=True)
@click.option("--only", "only", multiple=True, metavar="NAME", help="Run only these mutants.")
@click.option(
    "--adapter-opt",
    "adapter_opts",
    multiple=True,
    metavar="KEY=VALUE",
    help="Keyword option passed to every mutant, as `conformance run` passes it to the reference "
    "(repeatable); profile=NAME checks the mutants under that profile of the spec.",
)
@click.option(
    "--all-profiles",
    is_flag=True,
    help="Run every mutant under the spec's defaults and under each profile of the spec its "
    "implementation offers, one table per profile.",
)
@click.option("--timeout", "timeout_s", type=_Seconds(), default=DEFAULT_TIMEOUT_S, show_default=True)
def mutants(spec, profile, seed, only, adapter_opts, all_profiles, timeout_s):
    """Run the kit against every mutant SPEC ships (a file or an installed
    spec's name); exit 0 only if all are killed (in every profile run), 1 if
    one survives, 2 for a spec or loading error. A mutant whose
    implementation does not offer the chosen profile is listed as not
    applicable there."""
    from .adapters.python import parse_options
    from .mutants import declared_profile, load_mutants, run_mutant

    try:
        loaded = load_spec(_spec_file(spec))
    except SpecError as exc:
        errors.print(str(exc), markup=False)
        sys.exit(2)
    target = loaded.implementations.get("mutants")
    if not target:
        errors.print(f"spec {loaded.id} ships no mutants (implementations.mutants)", markup=False)
        sys.exit(2)
    if spec_target_problem(target, "mutants"):  # a spec is data: it names only trusted code (docs/trust-model.md)
        errors.print(spec_target_problem(target, "mutants"), markup=False)
        sys.exit(2)
    try:
        options = parse_options(adapter_opts)
    except AdapterLoadError as exc:
        raise click.UsageError(str(exc)) from None
    chosen_profile = options.get("profile")
    if all_profiles and chosen_profile is not None:
        raise click.UsageError("give either --all-profiles or --adapter-opt profile=NAME, not both")
    if chosen_profile is not None and chosen_profile not in loaded.profiles:
        raise click.UsageError(
            f"spec {loaded.id} has no profile {chosen_profile!r} (its profiles: "
            f"{', '.join(sorted(loaded.profiles)) or 'none'})"
        )
    try:
        table_of_mutants = load_mutants(target)
    except AdapterLoadError as exc:
        errors.print(str(exc), markup=False)
        sys.exit(2)
    unknown = [n for n in only if n not in table_of_mutants]
    if unknown:
        raise click.UsageError(f"unknown mutant(s): {', '.join(unknown)} (known: {', '.join(table_of_mutants)})")
    seed_value = _parse_seed(seed)
    chosen = [(n, m) for n, m in table_of_mutants.items() if not only or n in only]
    if all_profiles:
        runs = [(None, dict(options))] + [(p, {**options, "profile": p}) for p in sorted(loaded.profiles)]
    else:
        runs = [(chosen_profile, options)]
    survived, applicable_anywhere = [], 0
    for spec_profile, run_options in runs:
        under = spec_profile or "the spec's defaults"
        results, not_applicable = [], []
        for index, (name, mutant) in enumerate(chosen, 1):
            starts, declared = declared_profile(mutant, run_options, timeout_s)
            if not starts:
                not_applicable.append((name, declared))
                continue
            if spec_profile is None and all_profiles and declared in loaded.profiles:
                continue  # its implementation's default is a profile of the spec: it runs there
            label = f"mutant {index}/{len(chosen)}: {name}" + (f" under {spec_profile}" if spec_profile else "")
            if not console.is_terminal:
                errors.print(f"progress: {label}", markup=False)
            with console.status(label) if console.is_terminal else _nothing():
                results.append(
                    run_mutant(
                        spec, name, mutant, profile=profile, seed=seed_value, timeout_s=timeout_s, options=run_options
                    )
                )
        if results:
            applicable_anywhere += 1
            _print_mutants(results, f"Mutants of {loaded.id} under {under} (exploration {profile}, seed {seed_value})")
            survived += [f"{r.name}" + (f" ({spec_profile})" if spec_profile else "") for r in results if not r.killed]
        elif not not_applicable:  # each declares a profile of the spec by default, and runs under it
            console.print(
                f"no mutant runs under {under}: each runs under the profile its implementation declares",
                highlight=False,
                markup=False,
            )
        if not_applicable:
            names = ", ".join(name for name, _ in not_applicable)
            console.print(
                f"not applicable under {under} (their implementation does not start with these options): "
                f"{names}; e.g. {not_applicable[0][1]}",
                highlight=False,
                markup=False,
            )
    if not applicable_anywhere:
        errors.print("no mutant applies: none starts with these adapter options", markup=False)
        sys.exit(2)
    if len(runs) > 1:
        console.print(
            "every profile: " + (f"survived: {', '.join(survived)}" if survived else "all killed"),
            highlight=False,
            markup=False,
        )
    sys.exit(1 if survived else 0)


def _print_mutants(results: list, title: str) -> None:
    """One profile's mutants as a table, then how many were killed."""
    table = Table(title=title)
    for column in ("mutant", "killed", "by scenarios", "by exploration alone", "bug"):
        table.add_column(column, overflow="fold")
    for r in results:
        table.add_row(
            Text(r.name),
            Text("killed", style="green") if r.killed else Text("SURVIVED", style="red"),
            Text(", ".join(r.killed_by_scenarios))
            if r.killed_by_scenarios
            else Text(f"error: {r.error}" if r.error else "—", style="red" if r.error else ""),
            Text(f"yes ({r.exploration_kind})") if r.found_by_exploration else Text("no", style="yellow"),
            Text(r.description),
        )
    console.print(table)
    survived = [r.name for r in results if not r.killed]
    missed = [r.name for r in results if not r.found_by_exploration]
    console.print(
        f"{len(results) - len(survived)}/{len(results)} killed; exploration alone found "
        f"{len(results) - len(missed)}/{len(results)}" + (f"; survived: {', '.join(survived)}" if survived else ""),
        highlight=False,
    )


@cli.command("specs")
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
def list_specs(as_json):
    """List the installed specs that can be named instead of a path: this
    kit's own and those other packages contribute (entry point group
    lifecycle_conformance.specs)."""
    import json

    rows = []
    for entry in bundled_specs():
        try:
            spec = load_spec(entry.path)
        except SpecError as exc:
            rows.append(
                {
                    "name": entry.name,
                    "error": f"{len(exc.problems)} problem(s); run `conformance validate {entry.name}`",
                    "source": entry.source,
                }
            )
            continue
        rows.append(
            {
                "name": entry.name,
                "id": spec.id,
                "version": spec.version,
                "title": spec.title,
                "profiles": sorted(spec.profiles),
                "operations": len(spec.operations),
                "scenarios": len(spec.scenarios),
                "reference": spec.implementations.get("reference"),
                "mutants": spec.implementations.get("mutants"),
                "source": entry.source,
                "path": str(entry.path),
            }
        )
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    table = Table(title="Installed specs (name them instead of a path: conformance run NAME)")
    for column in ("name", "version", "profiles", "operations", "scenarios", "bundled reference"):
        table.add_column(column, overflow="fold")
    for row in rows:
        if "error" in row:
            table.add_row(Text(row["name"]), Text(row["error"], style="red"), Text(""), Text(""), Text(""), Text(""))
            continue
        table.add_row(
            Text(row["name"]),
            Text(row["version"]),
            Text(", ".join(row["profiles"]) or "—"),
            Text(str(row["operations"])),
            Text(str(row["scenarios"])),
            Text(row["reference"] or "—"),
        )
    console.print(table)


@cli.command("docs")
@click.argument("name", required=False)
def show_docs(name):
    """Print one of the kit's documents (the protocol for --adapter-cmd, the
    command adapter's config, the contracts), or list them without NAME."""
    from importlib import resources

    shipped = {
        entry.name.removesuffix(".md"): entry
        for entry in resources.files("conformance.docs").iterdir()
        if entry.name.endswith(".md")
    }
    if name is None:
        for doc in sorted(shipped):
            first = shipped[doc].read_text(encoding="utf-8").lstrip().splitlines()[0].lstrip("# ")
            console.print(f"{doc:<28} {first}", markup=False)
        console.print("print one with: conformance docs NAME", markup=False)
        return
    key = name.removesuffix(".md").removeprefix("docs/")
    if key not in shipped:
        raise click.UsageError(f"no document {name!r} (shipped: {', '.join(sorted(shipped))})")
    click.echo(shipped[key].read_text(encoding="utf-8"))


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return None


@cli.command()
@click.argument("spec")
@click.option(
    "--transport",
    type=click.Choice(list(TRANSPORTS)),
    default="python",
    show_default=True,
    help="python: an Adapter class in the kit's process; stdio-python / stdio-node: a program "
    "speaking the stdio protocol.",
)
@click.option(
    "--dir",
    "directory",
    default=".",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Where to write the adapter and its pytest file.",
)
@click.option("--force", is_flag=True, help="Overwrite files the scaffold would replace.")
def init(spec, transport, directory, force):
    """Write an adapter skeleton for SPEC (a bundled spec's name or a path) and a
    pytest file running it: every operation stubbed, answering not_implemented,
    with a comment naming its args, result and errors. It runs as written."""
    import shlex
    import shutil

    from .scaffold import ScaffoldError, check_scaffold, plan_scaffold, write_scaffold

    path = _spec_file(spec)
    try:
        loaded = load_spec(path)
    except SpecError as exc:
        errors.print(Text(f"✗ {spec}", style="bold red") + Text(f": {len(exc.problems)} problem(s)"))
        for problem in exc.problems:
            errors.print(Text(f"  {problem}"))
        sys.exit(2)
    # A bundled name stays a name; a path is written relative to the target directory.
    spec_ref = spec if path != spec else os.path.relpath(os.path.abspath(path), os.path.abspath(directory))
    scaffold = plan_scaffold(loaded, spec_ref, transport)
    try:
        written = write_scaffold(scaffold, directory, force=force)
    except ScaffoldError as exc:
        errors.print(f"error: {exc}", markup=False)
        sys.exit(2)
    here = plan_scaffold(
        loaded,
        spec_ref,
        transport,
        python=shlex.quote(sys.executable),
        pytest=f"{shlex.quote(sys.executable)} -m pytest",
    )
    for file in written:
        console.print(Text("✓ ", style="green") + Text(f"wrote {file}"))
    console.print(
        f"{len(loaded.operations)} operations of {loaded.id} {loaded.version} stubbed; each answers "
        f"not_implemented until you connect it. Run it now, from {directory}:",
        highlight=False,
    )
    console.print(f"  {here.run_command}\n  {here.test_command}", highlight=False, soft_wrap=True)
    adapter_file = next(name for name in scaffold.files if not name.startswith("test_"))
    problem = check_scaffold(loaded, path, transport, directory, adapter_file)
    if problem is None:
        console.print(Text("✓ ", style="green") + Text(f"{adapter_file} starts and answers the kit's handshake"))
    else:
        hint = " (is Node.js installed?)" if transport == "stdio-node" and shutil.which("node") is None else ""
        errors.print(f"warning: {adapter_file} was written but does not start yet{hint}: {problem}", markup=False)


@cli.command("check-trace")
@click.argument("spec", type=click.Path(dir_okay=False))
@click.argument("traces", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option(
    "--report-dir",
    default="reports",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Where report.json, junit.xml and summary.md are written.",
)
@click.option(
    "--to-scenario",
    "to_scenario",
    type=click.Path(dir_okay=False),
    default=None,
    metavar="FILE",
    help="Write the first failing session, up to the failing event, as a scenario to FILE (the "
    "observed answers as expectations) for a spec author to review and add to a matrix.",
)
@click.option("--scenario-id", default="T1", show_default=True, help="The id of the scenario --to-scenario writes.")
@_with([deviations_option])
@_with(verbosity_options)
def check_trace(spec, traces, report_dir, to_scenario, scenario_id, deviations, quiet, verbose):
    """Check recorded TRACES (JSON lines: docs/traces.md) of a real system
    against SPEC, without running it: every answer, effect and invariant,
    overlapping operations by linearizability. Same reports as `run`; each
    session of a trace (between resets) is one check, and a failure names
    the trace's line.

    \b
    Exit codes: 0 every trace conforms, 1 one does not, 2 a spec or trace
    that cannot be read, 130/143 interrupted."""
    from .traces import check_trace_run

    level = _verbosity(quiet, verbose)
    _spec_file(spec)
    if to_scenario and not re.fullmatch(r"[A-Za-z][A-Za-z0-9_.-]*", scenario_id):
        raise click.UsageError(
            f"--scenario-id {scenario_id!r}: a scenario id starts with a letter, then letters, digits, '_', '.' or '-'"
        )
    report = check_trace_run(
        spec, list(traces), report_dir, to_scenario=to_scenario, scenario_id=scenario_id, deviations=deviations
    )
    if to_scenario:
        if report.get("_scenario_file"):
            console.print(
                f"wrote scenario {scenario_id} to {to_scenario} (review its last step before adding it)",
                highlight=False,
            )
        elif report["verdict"] == "pass":
            console.print("no session failed: no scenario written", highlight=False)
    _finish(report, level)


@cli.command()
@click.argument("name", type=click.Choice(SCHEMA_NAMES))
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write the schema to this file instead of printing it.",
)
def schema(name, output):
    """Print the JSON Schema of a spec file (spec-fragment: a file a spec
    includes), report.json, the stdio protocol's messages or a command adapter config (for editors: save it and point
    `# yaml-language-server: $schema=<file>` at it)."""
    from .schema_files import schema_json

    text = schema_json(name)
    if output is None:
        click.echo(text, nl=False)
        return
    try:
        with open(output, "w", encoding="utf-8") as handle:
            handle.write(text)
    except OSError as exc:
        raise click.UsageError(f"cannot write {output}: {exc.strerror}") from None
    console.print(f"wrote the {name} schema to {output}", highlight=False)


def main(argv: list[str] | None = None) -> None:
    try:
        _main(argv)
    except SystemExit as exc:
        _exit_despite_threads(exc)
        raise


def console_main() -> None:
    """The ``conformance`` command: ``main``, then exit at once. When the
    command is done (its reports written, its output flushed, its exit
    handlers run) nothing is left to do but free memory, and a run's worth of
    objects takes the interpreter's own shutdown a tenth of a second or more,
    on every start of the command (each ``--workers`` run, each CI job); so
    the process ends with ``os._exit``. ``main`` itself, for a program that
    calls it, returns as any function does."""
    import atexit

    try:
        main()
        code = 0
    except SystemExit as exc:
        code = _exit_code(exc)
    atexit._run_exitfuncs()  # adapter programs stopped, temporary directories removed, logging flushed
    _flush_output()
    os._exit(code)


def _exit_code(exc: SystemExit) -> int:
    """The process's exit code for ``exc`` (a message instead of a code is said, and exits 1)."""
    if exc.code is None:
        return 0
    if not isinstance(exc.code, int):
        errors.print(str(exc.code), markup=False)
        return 1
    return exc.code


def _flush_output() -> None:
    for stream in (console.file, errors.file, sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass


def _exit_despite_threads(exc: SystemExit) -> None:
    """Exit with this code now if non-daemon threads (an in-process
    implementation's, left running) would keep the interpreter waiting for
    them forever: flush, run the exit handlers (they stop adapter programs
    and remove temporary directories) for a bounded time, then ``os._exit``.
    The run's report already says which threads were left."""
    import atexit
    import threading

    left = [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon and t.is_alive()]
    if not left:
        return
    code = _exit_code(exc)
    cleanup = threading.Thread(target=atexit._run_exitfuncs, daemon=True, name="conformance-exit")
    cleanup.start()
    cleanup.join(5.0)
    _flush_output()
    os._exit(code)


def _main(argv: list[str] | None = None) -> None:
    from .engine.interrupts import interrupt_exit_code, signals_stop_the_run

    try:
        # Not click's standalone mode: it turns Ctrl-C into "Aborted!" and
        # exit 1, the code for "does not conform".
        with signals_stop_the_run():
            code = cli.main(args=argv, prog_name="conformance", standalone_mode=False)
    except ConformanceError as exc:
        errors.print(f"error: {exc}", markup=False)
        sys.exit(2)
    except click.exceptions.Abort as exc:  # click's wrapping of a KeyboardInterrupt (or EOF at a prompt)
        errors.print("interrupted", markup=False)
        sys.exit(interrupt_exit_code(exc.__cause__) if exc.__cause__ is not None else 130)
    except KeyboardInterrupt as exc:
        errors.print("interrupted", markup=False)
        sys.exit(interrupt_exit_code(exc))
    except click.ClickException as exc:  # usage errors: click's own message and exit code 2
        exc.show()
        sys.exit(exc.exit_code)
    except SystemExit:
        raise
    except Exception as exc:  # a bug in the kit itself: say so plainly, keep details for --debug
        errors.print(f"internal error in the conformance kit: {type(exc).__name__}: {exc}", markup=False)
        if os.environ.get("CONFORMANCE_DEBUG"):
            traceback.print_exc(file=errors.file)
        else:
            errors.print("set CONFORMANCE_DEBUG=1 to see the traceback", markup=False)
        sys.exit(2)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    console_main()

"""After a run: ``replay`` a counterexample against an implementation,
``check-trace`` (recorded traces of a real system, checked offline) and
``merge-reports`` (the shards of one run as one report)."""

from __future__ import annotations

import os
import re

import click

from statemachines import ExpressionError, SpecError, load_spec

from ..engine.runner import RunConfig, clear_report_files, new_report, run_conformance, write_report_files
from .common import (
    adapter_options,
    capture_implementation_output,
    check_adapter_choice,
    cli,
    console,
    deviations_option,
    finish,
    spec_file,
    verbosity,
    verbosity_options,
    with_options,
)

__all__ = ["replay", "check_trace", "merge_reports_command"]


@cli.command()
@click.argument("spec", type=click.Path(dir_okay=False))
@click.argument("steps_file", type=click.Path(dir_okay=False))
@with_options(adapter_options)
@click.option(
    "--report-dir",
    default=None,
    type=click.Path(file_okay=False),
    help="Where the replay's reports go (default: a replay/ directory beside STEPS_FILE, so the run "
    "that wrote it keeps its reports).",
)
@deviations_option
def replay(
    spec: str,
    steps_file: str,
    adapter: str | None,
    adapter_opts: tuple[str, ...],
    adapter_cmd: str | None,
    adapter_cli: str | None,
    timeout_s: float,
    report_dir: str | None,
    deviations: str | None,
) -> None:
    """Replay a counterexample STEPS_FILE (written by a failed run) against an
    implementation. SPEC is a spec file or the name of an installed spec.

    \b
    Exit codes: 0 conforms, 1 does not conform, 2 usage, spec or
    adapter-loading error, 130 interrupted (Ctrl-C, SIGINT), 143
    terminated (SIGTERM)."""
    from ..adapters.python import parse_options

    spec_file(spec)
    counterexample_file(steps_file)
    check_adapter_choice(adapter, adapter_opts, adapter_cmd, adapter_cli)
    config = RunConfig(
        spec_path=spec,
        adapter=adapter,
        adapter_options=parse_options(adapter_opts),
        adapter_cmd=adapter_cmd,
        adapter_cli=adapter_cli,
        report_dir=report_dir if report_dir is not None else replay_report_dir(steps_file),
        stateful=False,
        replay_file=steps_file,
        timeout_s=timeout_s,
        deviations=deviations,
        output_capture=capture_implementation_output(),
    )
    report = run_conformance(config)
    finish(report)


def counterexample_file(steps_file: str) -> None:
    """A STEPS_FILE that is not there is a usage error that names it, before
    anything runs or is written."""
    if not os.path.isfile(steps_file):
        raise click.UsageError(
            f"cannot read counterexample file {steps_file}: no such file (a failed run prints the "
            f"path of each counterexample it wrote, and lists them in its report)"
        )


def replay_report_dir(steps_file: str) -> str:
    """The default report directory of a replay: replay/ beside the file, so
    replaying a counterexample never clears the reports it came with."""
    return os.path.join(os.path.dirname(steps_file) or ".", "replay")


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
@deviations_option
@with_options(verbosity_options)
def check_trace(
    spec: str,
    traces: tuple[str, ...],
    report_dir: str,
    to_scenario: str | None,
    scenario_id: str,
    deviations: str | None,
    quiet: bool,
    verbose: bool,
) -> None:
    """Check recorded TRACES (JSON lines: docs/traces.md) of a real system
    against SPEC, without running it: every answer, effect and invariant,
    overlapping operations by linearizability. Same reports as `run`; each
    session of a trace (between resets) is one check, and a failure names
    the trace's line.

    \b
    Exit codes: 0 every trace conforms, 1 one does not, 2 a spec or trace
    that cannot be read, 130/143 interrupted."""
    from ..traces import check_trace_run

    level = verbosity(quiet, verbose)
    spec_file(spec)
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
    finish(report, level)


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
@with_options(verbosity_options)
def merge_reports_command(
    out_dir: str, shards: tuple[str, ...], spec_name: str | None, quiet: bool, verbose: bool
) -> None:
    """Combine the reports of the shards of one run (`conformance run --shard
    I/N`, one per I: their report directories or report.json files) into one
    report.json, junit.xml and summary.md in OUT_DIR, with one verdict:
    scenarios, exploration examples, coverage (and --min-coverage gates) and
    distinct failures of all shards, counterexample files copied along.

    \b
    Exit codes: 0 conforms, 1 does not conform, 2 shards that cannot be
    merged (of different runs, missing or given twice) or a shard that
    could not run, 130/143 a shard was interrupted."""
    from statemachines.language.expressions import run_cost_budget

    level = verbosity(quiet, verbose)
    with run_cost_budget():  # a spec a forged shard names is loaded and read within the command's budget
        report = _merge(out_dir, shards, spec_name)
    finish(report, level)


def _merge(out_dir: str, shards: tuple[str, ...], spec_name: str | None) -> dict:
    """The merged report of ``shards``, written to ``out_dir`` (verdict
    ``error`` when one is refused)."""
    from ..engine.shards import ShardError, load_shard_report

    loaded, refused = [], []
    for path in shards:
        try:
            loaded.append(load_shard_report(path))
        except ShardError as exc:
            refused.append(str(exc))
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
            spec = load_spec(spec_file(spec_name))
        except SpecError as exc:
            refused.append(str(exc))
    return _merged_or_refused(loaded, refused, out_dir, spec)


def _merged_or_refused(loaded: list, refused: list[str], out_dir: str, spec) -> dict:
    """The merged report written to ``out_dir``; when a shard is refused (or
    cannot be merged), a report with verdict ``error`` (exit 2) naming it."""
    from ..engine.shards import ShardError, merge_reports

    cleared: dict = {"problems": []}
    if not refused:
        try:
            merge_reports(loaded, None, spec=spec)  # refuses (exit 2) before anything is copied
            clear_report_files(cleared, out_dir)
            report = merge_reports(loaded, out_dir, spec=spec)
            report["problems"] = cleared["problems"] + report["problems"]
            write_report_files(report, out_dir)
            return report
        except (ShardError, ExpressionError) as exc:  # ExpressionError: the spec's expressions, over budget
            refused.append(str(exc))
        except (KeyError, TypeError, ValueError, AttributeError, IndexError, RecursionError) as exc:
            refused.append(f"a shard's report is not one the kit writes ({type(exc).__name__}: {str(exc)[:200]})")
    report = new_report(RunConfig(spec_path=""))
    report["problems"] = [{"kind": "input-refused", "where": None, "message": m} for m in refused]
    clear_report_files(report, out_dir)
    write_report_files(report, out_dir)
    return report

"""After a run: ``replay`` a counterexample against an implementation,
``check-trace`` (recorded traces of a real system, checked offline) and
``merge-reports`` (the shards of one run as one report)."""

from __future__ import annotations

import os
import re

import click

from statemachines import ExpressionError, SpecError, load_spec

from ..engine.runner import (
    RunConfig,
    clear_report_files,
    mark_interrupted,
    new_report,
    run_conformance,
    write_report_files,
)
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
@click.option(
    "--to-scenario",
    "to_scenario",
    type=click.Path(dir_okay=False),
    default=None,
    metavar="FILE",
    help="Keep the failure: write STEPS_FILE as a regression scenario to FILE (a `scenarios:` file, "
    "bindings included) that `run --scenarios-file FILE` or a spec's `include:` runs; written when "
    "the replay reached the failure's state (it fails, or passes once the bug is fixed).",
)
@click.option("--scenario-id", default="R1", show_default=True, help="The id of the scenario --to-scenario writes.")
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
    to_scenario: str | None,
    scenario_id: str,
    deviations: str | None,
) -> None:
    """Replay a counterexample STEPS_FILE (written by a failed run) against an
    implementation. SPEC is a spec file or the name of an installed spec.

    \b
    Exit codes: 0 conforms, 1 does not conform, 2 usage, spec or
    adapter-loading error, 3 not reproducing (a recorded step answered
    in another kind: the replay did not reach the failure's state),
    130 interrupted (Ctrl-C, SIGINT), 143 terminated (SIGTERM)."""
    from ..adapters.python import parse_options

    spec_file(spec)
    counterexample_file(steps_file)
    check_adapter_choice(adapter, adapter_opts, adapter_cmd, adapter_cli)
    if to_scenario:
        check_scenario_id(scenario_id)
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
    if to_scenario:
        keep_failure(report, spec, steps_file, to_scenario, scenario_id)
    finish(report)


class _NotWritten(click.ClickException):
    exit_code = 2  # the file asked for could not be written: not a verdict on the implementation


def check_scenario_id(scenario_id: str) -> None:
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_.-]*", scenario_id):
        raise click.UsageError(
            f"--scenario-id {scenario_id!r}: a scenario id starts with a letter, then letters, digits, '_', '.' or '-'"
        )


def keep_failure(report: dict, spec: str, steps_file: str, out: str, scenario_id: str) -> None:
    """``--to-scenario``: the counterexample as a regression scenario, when
    the replay reached the failure's state (verdict fail or pass); assuming
    the parameters the replay ran under, as check-trace's scenarios do."""
    from statemachines.load.source import load_yaml_file

    from ..engine.bindings import regression_scenario
    from ..traces.to_scenario import recorded_assumes, write_scenario_file

    if report["verdict"] not in ("fail", "pass"):
        console.print(f"the replay did not reach the failure's state: no scenario written to {out}", highlight=False)
        return
    loaded = load_spec(spec_file(spec))
    declared = (report.get("implementation") or {}).get("parameters") or {}
    assumes = recorded_assumes(loaded, report.get("parameters") or {}, declared.keys())
    data, _ = load_yaml_file(steps_file)
    scenario = regression_scenario(data, scenario_id, os.path.basename(steps_file), assumes)
    note = (
        f"# Written by `conformance replay --to-scenario`: run it with `conformance run {spec} --scenarios-file\n"
        f"# {out} ...`, or add it to a spec's scenario matrix (an `include:`d scenarios file).\n"
    )
    try:
        write_scenario_file(out, scenario, note)
    except OSError as exc:
        raise _NotWritten(f"cannot write {out}: {exc.strerror or exc}") from None
    console.print(f"wrote scenario {scenario_id} to {out}", highlight=False)


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
    if to_scenario:
        check_scenario_id(scenario_id)
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

    from ..engine.interrupts import deferred

    level = verbosity(quiet, verbose)
    _refuse_a_shard_directory(out_dir, shards)
    # The previous merged report goes first, as `run` does: a merge that is
    # interrupted or fails leaves this merge's report (verdict error or
    # interrupted), never an older verdict.
    report = new_report(RunConfig(spec_path=""))
    clear_report_files(report, out_dir)
    with deferred():  # a signal while the reports are written is kept: it must not stop them
        try:
            # loading and merging: a signal stops them; a spec a forged shard names is
            # loaded and read within the command's expression budget
            with deferred(False), run_cost_budget():
                report = _merged_or_refused(shards, spec_name, out_dir, report["problems"])
        except KeyboardInterrupt as exc:
            mark_interrupted(report, exc, "the shards were not merged")
        except Exception as exc:  # a bug of the kit: the reports are written all the same, verdict error
            report["verdict"], report["exit_code"] = "error", 2
            report["problems"].append(
                {
                    "kind": "internal-error",
                    "where": None,
                    "message": f"internal error in the conformance kit while merging the shards: "
                    f"{type(exc).__name__}: {str(exc)[:300]}",
                }
            )
        write_report_files(report, out_dir)
    finish(report, level)


def _refuse_a_shard_directory(out_dir: str, shards: tuple[str, ...]) -> None:
    """A usage error when OUT_DIR is the directory of one of the shards
    (checked before the old merged report in OUT_DIR is removed)."""
    target = os.path.realpath(out_dir)
    for path in shards:
        directory = path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))
        if os.path.lexists(path) and os.path.realpath(directory) == target:
            raise click.UsageError(
                f"OUT_DIR {out_dir} is the report directory of a shard; write the merged "
                f"report to a directory of its own"
            )


def _merged_or_refused(shards: tuple[str, ...], spec_name: str | None, out_dir: str, problems: list) -> dict:
    """The merged report (counterexample files copied into ``out_dir``); when
    a shard is refused (or cannot be merged), a report with verdict ``error``
    (exit 2) naming it. ``problems``: those of clearing ``out_dir``."""
    from ..engine.shards import ShardError, load_shard_report

    loaded, refused = [], []
    for path in shards:
        try:
            loaded.append(load_shard_report(path))
        except ShardError as exc:
            refused.append(str(exc))
    spec = None
    if spec_name is not None:
        try:
            spec = load_spec(spec_file(spec_name))
        except SpecError as exc:
            refused.append(str(exc))
    return _merge_loaded(loaded, refused, out_dir, spec, problems)


def _merge_loaded(loaded: list, refused: list[str], out_dir: str, spec, problems: list) -> dict:
    """``loaded`` shard reports merged into ``out_dir`` (unless one was
    ``refused``, or they cannot be merged: then a report with verdict
    ``error`` naming why)."""
    from ..engine.shards import ShardError, merge_reports

    refused = list(refused)
    if not refused:
        try:
            merge_reports(loaded, None, spec=spec)  # refuses (exit 2) before anything is copied
            report = merge_reports(loaded, out_dir, spec=spec)
            report["problems"] = problems + report["problems"]
            return report
        except (ShardError, ExpressionError) as exc:  # ExpressionError: the spec's expressions, over budget
            refused.append(str(exc))
        except (KeyError, TypeError, ValueError, AttributeError, IndexError, RecursionError) as exc:
            refused.append(f"a shard's report is not one the kit writes ({type(exc).__name__}: {str(exc)[:200]})")
    report = new_report(RunConfig(spec_path=""))
    report["problems"] = problems + [{"kind": "input-refused", "where": None, "message": m} for m in refused]
    return report

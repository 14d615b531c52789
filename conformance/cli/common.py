"""What the commands share: the consoles, the ``cli`` group they hang on,
the options several commands take, and ``finish`` (a report on the console,
then the exit code)."""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

import click
from rich.text import Text

from ..engine.runner import KIT_VERSION
from ..engine.session import DEFAULT_TIMEOUT_S
from ..progress import NORMAL, QUIET, VERBOSE
from ..reporting.console import SafeConsole
from ..specs import SpecNotFound, resolve_spec

if TYPE_CHECKING:
    from ..engine.output_capture import OutputCapture

__all__ = [
    "ExplorationProfile",
    "console",
    "errors",
    "cli",
    "Seconds",
    "parse_seed",
    "finish",
    "adapter_options",
    "deviations_option",
    "verbosity_options",
    "with_options",
    "check_adapter_choice",
    "spec_file",
    "verbosity",
    "capture_implementation_output",
]


class ExplorationProfile(click.Choice):
    """``--profile``: how much exploration (quick, ci, deep). A name that is
    none of those is most often one of a spec's profiles (``task-table``),
    which the implementation chooses: the error says how."""

    def __init__(self) -> None:
        from ..engine.profiles import PROFILES

        super().__init__(sorted(PROFILES))

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if value in self.choices:
            return value
        self.fail(
            f"{value!r} is not an exploration profile (one of {', '.join(map(str, self.choices))}: how much "
            f"the exploration runs). A spec's own profiles (parameters of one real system, such as task-table) "
            f"are chosen by the implementation: --adapter-opt profile={value} for a Python adapter or a "
            f"command-line tool's config; a stdio implementation names its profile in its hello answer "
            f"(conformance docs adapter-protocol).",
            param,
            ctx,
        )


# In CI logs (no terminal) rich would wrap at 80 columns; tables get a wide
# page, and plain lines (paths, file:line, replay commands) are never wrapped.
# Both show received text's control characters escaped (SafeConsole).
console = SafeConsole(highlight=False, width=None if sys.stdout.isatty() else 160, soft_wrap=True)
errors = SafeConsole(stderr=True, highlight=False, soft_wrap=True)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(KIT_VERSION, prog_name="conformance")
def cli() -> None:
    """Spec-driven conformance kit for job and task lifecycles."""


class Seconds(click.ParamType):
    """A positive, finite number of seconds."""

    name = "seconds"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        try:
            number = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        if not math.isfinite(number) or number <= 0:
            self.fail(f"{value!r} must be a positive, finite number of seconds", param, ctx)
        return number


def parse_seed(value: str) -> int:
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


def _print_failures_only(report: dict) -> None:
    """``--quiet``: a line per failed case, then the verdict."""
    failed = [s for s in report["scenarios"] if s["verdict"] in ("fail", "error")]
    if report.get("stateful") and report["stateful"]["verdict"] in ("fail", "error"):
        failed.append({"id": "stateful", **report["stateful"]})
    for entry in failed:
        message = ((entry.get("failure") or {}).get("message") or "").splitlines()[:1]
        console.print(f"FAIL {entry['id']}: {message[0] if message else entry['verdict']}", markup=False)
    console.print(f"Verdict: {report['verdict'].upper()}", markup=False)


def _print_summary(report: dict) -> None:
    from ..reporting import render_console_summary

    try:
        render_console_summary(report, console)
    except Exception as exc:
        errors.print(
            f"error: the console summary failed ({type(exc).__name__}: {exc}); the reports hold every detail",
            markup=False,
        )
        console.print(f"Verdict: {str(report['verdict']).upper()}  (exit code {report['exit_code']})", markup=False)


def finish(report: dict, level: int = NORMAL) -> None:
    """Show the report as ``level`` asks, say where its files are, and exit with its code."""
    if report["verdict"] == "error":
        _print_problems(report)
    elif level <= QUIET:
        _print_failures_only(report)
    else:
        _print_summary(report)
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
        type=Seconds(),
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


verbosity_options = [
    click.option("-q", "--quiet", is_flag=True, help="Only the verdict, failures and where the reports are."),
    click.option("-v", "--verbose", is_flag=True, help="Also a line per scenario as it finishes."),
]

F = TypeVar("F", bound=Callable[..., Any])


def with_options(options: Iterable[Callable[[F], F]]) -> Callable[[F], F]:
    """Apply a list of click options, the first listed outermost (as written above a function)."""

    def decorate(fn: F) -> F:
        for option in reversed(list(options)):
            fn = option(fn)
        return fn

    return decorate


def check_adapter_choice(
    adapter: str | None, adapter_opts: tuple[str, ...], adapter_cmd: str | None, adapter_cli: str | None = None
) -> None:
    if adapter_cmd is not None and (adapter or adapter_opts or adapter_cli):
        raise click.UsageError(
            "--adapter-cmd runs a program; it cannot be combined with --adapter, --adapter-opt or --adapter-cli"
        )
    if adapter_cli is not None and adapter:
        raise click.UsageError("--adapter-cli runs a command-line tool; it cannot be combined with --adapter")


def spec_file(spec: str) -> str:
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


def verbosity(quiet: bool, verbose: bool) -> int:
    if quiet and verbose:
        raise click.UsageError("--quiet and --verbose exclude each other")
    return QUIET if quiet else VERBOSE if verbose else NORMAL


def capture_implementation_output() -> OutputCapture | None:
    """From here to the end of the process, fds 1 and 2 belong to the
    implementation (captured per case into the report: engine/output_capture.py)
    and the kit's console writes through duplicates of the originals. Not
    when stdout/stderr are not the process's own (e.g. click's CliRunner)."""
    from ..engine.output_capture import OutputCapture

    try:
        if sys.stdout.fileno() != 1 or sys.stderr.fileno() != 2:
            return None
    except (AttributeError, OSError, ValueError):
        return None
    capture = OutputCapture.start()
    if capture is not None and capture.kit_stdout is not None and capture.kit_stderr is not None:
        console.file, errors.file = capture.kit_stdout, capture.kit_stderr
    return capture

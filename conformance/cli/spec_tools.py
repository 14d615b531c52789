"""Spec authors' tools: ``validate`` (does a spec load), ``lint`` (valid
but probably wrong or untested) and ``diff`` (what changed between two
versions, and the version bump it calls for)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click
from rich.text import Text

from statemachines import SpecError, load_spec

from ..reporting.safe_files import open_new
from ..specs import SpecNotFound, resolve_spec
from .common import cli, console, errors

if TYPE_CHECKING:
    from statemachines.tools.lint import Finding, LintReport

__all__ = ["validate", "lint", "diff"]


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
def validate(specs: tuple[str, ...]) -> None:
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
def lint(specs: tuple[str, ...], strict: bool, as_json: bool, show_suppressed: bool) -> None:
    """Find what is valid but probably wrong or untested in spec files: unreachable
    states, unfired transitions, unused parameters, definitions and effects,
    error kinds never raised, operations, transitions, errors and policies no
    scenario exercises, profiles restating defaults. Exit 0 (warnings), 1 with
    --strict when a finding is not suppressed, 2 when a spec does not load."""
    import json

    from statemachines.tools.lint import lint_spec

    paths = [_resolved(given) for given in specs]  # a file, or the name of an installed spec
    fragments = [path for path in paths if _is_fragment(path)]
    reports = [lint_spec(path) for path in paths if path not in fragments]
    if as_json:
        click.echo(json.dumps([r.to_dict() for r in reports], indent=2))
    else:
        for path in fragments:
            console.print(
                Text("· ", style="dim")
                + Text(f"{path}: a fragment (no `format:`), linted as part of the spec that includes it")
            )
        for report in reports:
            _print_lint_report(report, show_suppressed)
    sys.exit(_lint_exit_code(reports, strict))


def _resolved(given: str) -> str:
    try:
        return resolve_spec(given)
    except SpecNotFound as exc:
        raise click.UsageError(str(exc)) from None


def _print_lint_report(report: LintReport, show_suppressed: bool) -> None:
    """One spec's findings (and load problems), then a line saying how it went."""
    for problem in report.problems:
        errors.print(Text("error ", style="bold red") + Text(str(problem)))
    for finding in report.findings if show_suppressed else report.active:
        _print_finding(finding)
    if report.problems:
        mark = Text("✗ ", style="red")
        tail = f"does not load ({len(report.problems)} problem(s)); run `conformance validate`"
    else:
        mark = Text("! ", style="yellow") if report.active else Text("✓ ", style="green")
        tail = f"{len(report.active)} finding(s), {len(report.suppressed)} suppressed"
    console.print(mark + Text(f"{report.path}: {tail}"))


def _print_finding(finding: Finding) -> None:
    style = "bold red" if finding.severity == "error" else "yellow"
    line = Text(f"{finding.where}: ") + Text(f"{finding.severity}[{finding.rule}]", style=style)
    line += Text(f": {finding.message}")
    console.print(line)
    if finding.hint:
        console.print(Text(f"    hint: {finding.hint}", style="dim"))
    if finding.suppressed is not None:
        console.print(Text(f"    suppressed: {' '.join(finding.suppressed.split())}", style="dim"))


def _lint_exit_code(reports: list[LintReport], strict: bool) -> int:
    """2 when a spec does not load or has an error, 1 with --strict for an active finding, else 0."""
    if any(r.problems or any(f.severity == "error" for f in r.findings) for r in reports):
        return 2
    return 1 if strict and any(r.active for r in reports) else 0


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
def diff(old: str, new: str | None, rev: str | None, as_json: bool, output: str | None, check_version: bool) -> None:
    """What changed between two versions of a spec (OLD NEW, or OLD --rev GITREV),
    whether each change makes it stricter, looser or neither for implementations,
    which scenarios it touches, and the version bump it calls for. Markdown
    (for a pull-request comment) or --json. Exit 0, 1 (--check-version), 2."""
    import json

    from statemachines.tools.diff import diff_specs, render_diff_markdown

    from ..spec_revision import load_spec_at_revision

    if (rev is None) == (new is None):
        raise click.UsageError("give two spec files (OLD NEW), or one spec and --rev GITREV")
    try:
        before = load_spec_at_revision(old, rev) if rev else load_spec(old)
        after = load_spec(new if new is not None else old)  # with --rev: OLD as it is now
    except SpecError as exc:
        for problem in exc.problems:
            errors.print(Text(f"error {problem}"))
        sys.exit(2)
    result = diff_specs(before, after)
    markdown = render_diff_markdown(result)
    if output:
        with open_new(output) as handle:
            handle.write(markdown)
    click.echo(json.dumps(result.to_dict(), indent=2, ensure_ascii=False) if as_json else markdown)
    sys.exit(1 if check_version and not result.version_ok else 0)

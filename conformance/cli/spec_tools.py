"""Spec authors' tools: ``validate`` (does a spec load), ``lint`` (valid
but probably wrong or untested), ``diff`` (what changed between two
versions, and the version bump it calls for) and ``check-spec`` (the
spec's own model explored exhaustively within a small scope)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click
from rich.text import Text

from statemachines import SpecError, load_spec

from ..reporting._format import visible
from ..reporting.safe_files import open_new
from ..specs import SpecNotFound, resolve_spec
from .common import cli, console, errors

if TYPE_CHECKING:
    from collections.abc import Callable

    from statemachines import Spec
    from statemachines.tools.check import CheckReport
    from statemachines.tools.lint import Finding, LintReport
    from statemachines.tools.search_budget import SearchBudget

__all__ = ["validate", "lint", "diff", "check_spec_command"]

CHECK_TIME_LIMIT_S = 300.0  # check-spec's default: a received spec's scope cannot keep it going for hours


def _progress(command: str) -> Callable[[str], None]:
    """The line a search prints (stderr) every few seconds while it goes on."""

    def say(line: str) -> None:
        errors.print(Text(f"… {command}: {line}", style="dim"))

    return say


def _every() -> float:
    """Seconds between two progress lines: as a run's (``CONFORMANCE_PROGRESS_INTERVAL``)."""
    from ..progress import _interval

    return _interval()


def _ran_out(what: str, exhausted: str, hint: str) -> None:
    """The message when a command's budget ran out (it then exits 2)."""
    errors.print(
        Text("error ", style="bold red")
        + Text(f"{what}: the search ran out of {exhausted}; what it found so far is shown. {hint}")
    )


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
    # A fragment sits beside the spec including it; a mutants file (check.mutants) may sit one below.
    for shown_dir, directory in (
        (Path(fragment).parent, target.parent),
        (Path(fragment).parent.parent, target.parent.parent),
    ):
        for candidate in sorted(directory.glob("*.y*ml")):
            if candidate.resolve() == target:
                continue
            try:
                data, _ = load_yaml_file(str(candidate))
            except SpecError:
                continue
            if any((candidate.parent / name).resolve() == target for name in _named_files(data)):
                found.append(str(shown_dir / candidate.name))
    return found


def _named_files(data: object) -> list[str]:
    """The files a spec's data names: its `include:` entries and its `check.mutants`."""
    if not isinstance(data, dict):
        return []
    includes = data.get("include")
    names = [name for name in includes if isinstance(name, str)] if isinstance(includes, list) else []
    check = data.get("check")
    mutants = check.get("mutants") if isinstance(check, dict) else None
    return names + ([mutants] if isinstance(mutants, str) else [])


@cli.command()
@click.argument("specs", nargs=-1, required=True, type=click.Path(dir_okay=False))
def validate(specs: tuple[str, ...]) -> None:
    """Check spec files: YAML, structure, expressions, references. Each
    SPECS item is a file or the name of an installed spec. Exit 0 (all valid)
    or 2."""
    from statemachines.language.expressions import run_cost_budget

    with run_cost_budget():  # constant expressions are evaluated: within the command's budget
        bad = _validate_all(specs)
    sys.exit(2 if bad else 0)


def _validate_all(specs: tuple[str, ...]) -> int:
    """Validate each spec (and those including a fragment given), printing
    what each holds or its problems; how many do not load."""
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
    return bad


# -- spec authors' tools (issue 13): lint ------------------------------------
@cli.command()
@click.argument("specs", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--strict", is_flag=True, help="Exit 1 when any finding is not suppressed (default: warnings only).")
@click.option("--json", "as_json", is_flag=True, help="Print the findings as JSON.")
@click.option("--show-suppressed", is_flag=True, help="Also list the findings the spec suppresses, with its reasons.")
@click.option(
    "--search/--no-search",
    default=True,
    show_default=True,
    help="Search the spec's declared check.scope first (as check-spec does); when the search is complete, "
    "unreachable states come from it instead of the static guess.",
)
def lint(specs: tuple[str, ...], strict: bool, as_json: bool, show_suppressed: bool, search: bool) -> None:
    """Find what is valid but probably wrong or untested in spec files: unreachable
    states, unfired transitions, unused parameters, definitions and effects,
    error kinds never raised, operations, transitions, errors and policies no
    scenario exercises, profiles restating defaults. Unreachable states come
    from check-spec's search of the declared scope when it is complete (the
    finding says so), else from a static guess (the finding says why). Exit 0
    (warnings), 1 with --strict when a finding is not suppressed, 2 when a
    spec does not load or its search ran out of its budget (60 s, memory,
    expression cost; the findings are printed all the same)."""
    import json

    from statemachines.language.expressions import run_cost_budget
    from statemachines.tools.lint import lint_spec

    paths = [_resolved(given) for given in specs]  # a file, or the name of an installed spec
    fragments = [path for path in paths if _is_fragment(path)]
    with run_cost_budget():
        reports = [
            lint_spec(path, search=search, progress=_progress("lint"), progress_every_s=_every())
            for path in paths
            if path not in fragments
        ]
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
    for report in reports:
        if report.exhausted:
            _ran_out(
                report.path,
                report.exhausted,
                "Unreachable states are a static guess; narrow check.scope or --no-search.",
            )
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
    if any(r.problems or r.exhausted or any(f.severity == "error" for f in r.findings) for r in reports):
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
@click.option(
    "--behaviour/--no-behaviour",
    default=True,
    show_default=True,
    help="Run both versions' models over the new version's check scope and list the behaviours possible "
    "under one and not the other, each as its shortest sequence and a sentence.",
)
@click.option(
    "--time-limit",
    type=click.FloatRange(min=0.1),
    default=30.0,
    show_default=True,
    help="Seconds the behaviour search may take (it then says where it stopped).",
)
def diff(
    old: str,
    new: str | None,
    rev: str | None,
    as_json: bool,
    output: str | None,
    check_version: bool,
    behaviour: bool,
    time_limit: float,
) -> None:
    """What changed between two versions of a spec (OLD NEW, or OLD --rev GITREV),
    whether each change makes it stricter, looser or neither for implementations,
    which scenarios it touches, and the version bump it calls for; then what
    behaviour changed: both versions' models run in lockstep over the new
    version's check scope, each behaviour possible under one and not the
    other given as its shortest operation sequence and one sentence (a
    parameter the scope fixes, but the versions set differently, is searched
    at small values that keep the two apart). Markdown (for a pull-request
    comment) or --json. Exit 0, 1 (--check-version), 2 (a spec that does not
    load, or a behaviour search that ran out of its budget: --time-limit,
    memory, expression cost; the partial Markdown is written all the same)."""
    import json

    from statemachines.language.expressions import run_cost_budget
    from statemachines.tools.diff import diff_specs, render_diff_markdown
    from statemachines.tools.search_budget import SearchBudget

    from ..spec_revision import load_spec_at_revision

    if (rev is None) == (new is None):
        raise click.UsageError("give two spec files (OLD NEW), or one spec and --rev GITREV")
    with run_cost_budget():
        try:
            before = load_spec_at_revision(old, rev) if rev is not None else load_spec(old)
            after = load_spec(new if new is not None else old)  # with --rev: OLD as it is now
        except SpecError as exc:
            for problem in exc.problems:
                errors.print(Text(f"error {problem}"))
            sys.exit(2)
        budget = SearchBudget(time_limit_s=time_limit, progress=_progress("diff"), progress_every_s=_every())
        result = diff_specs(before, after, behaviour=behaviour, budget=budget)
    markdown = visible(render_diff_markdown(result))  # received text shows escaped
    if output:
        with open_new(output) as handle:
            handle.write(markdown)
    click.echo(json.dumps(result.to_dict(), indent=2, ensure_ascii=False) if as_json else markdown)
    exhausted = result.behaviour.exhausted if result.behaviour is not None else None
    if exhausted:
        _ran_out("diff", exhausted, "Raise --time-limit, narrow the new version's check.scope, or --no-behaviour.")
        sys.exit(2)
    sys.exit(1 if check_version and not result.version_ok else 0)


# -- spec authors' tools (issue 37): check-spec -------------------------------
def _parameter_overrides(given: tuple[str, ...]) -> dict:
    """``KEY=VALUE`` pairs; a value that reads as JSON (2, true, "x") is that value, else the text."""
    import json

    values: dict = {}
    for item in given:
        key, sep, text = item.partition("=")
        if not sep or not key:
            raise click.UsageError(f"--param takes KEY=VALUE, not {item!r}")
        try:
            values[key] = json.loads(text)
        except ValueError:
            values[key] = text
    return values


@cli.command("check-spec")
@click.argument("specs", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--depth", type=click.IntRange(min=0), help="Longest operation sequence (the scope's max_depth).")
@click.option("--max-states", type=click.IntRange(min=1), help="Stop (incomplete) after this many distinct states.")
@click.option("--max-records", type=click.IntRange(min=0), help="Records a state may hold and be explored further.")
@click.option(
    "--max-values",
    type=click.IntRange(min=1),
    help="Values a pool or an argument of the scope may list (the kit's ceiling for a received spec: 32).",
)
@click.option(
    "--time-limit",
    type=click.FloatRange(min=0.1),
    default=CHECK_TIME_LIMIT_S,
    show_default=True,
    help="Seconds the search of one spec may take; past it, exit 2 with what it found so far.",
)
@click.option(
    "--param", "params", multiple=True, metavar="KEY=VALUE", help="A parameter value of the scope (repeatable)."
)
@click.option(
    "--mutants",
    is_flag=True,
    help="Also check the spec mutants the spec names (check.mutants): each must be caught, by a shortest "
    "path as long as it declares; exit 1 when one is missed.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
def check_spec_command(
    specs: tuple[str, ...],
    depth: int | None,
    max_states: int | None,
    max_records: int | None,
    max_values: int | None,
    time_limit: float,
    params: tuple[str, ...],
    mutants: bool,
    as_json: bool,
) -> None:
    """Prove a spec's own rules: explore its model over every state reachable
    within the small scope it declares (`check.scope`), breadth first, and
    report invariants violated, predictions breaking the declared schemas and
    steps failing (each with its shortest path as a scenario), stuck records,
    and what was never reached. With --mutants, also each spec mutant the spec
    names: the spec with one rule changed, which must be caught (a mutants
    file given as SPECS checks its spec with its mutants). Exit 0
    (clean), 1 (violations, or a mutant missed), 2 (a spec or mutants file
    that does not load, an unusable scope, or a search that ran out of its
    budget: --time-limit, memory, expression cost, or the kit's ceilings on
    what a spec's own scope may ask for, which only these options raise)."""
    from statemachines.language.expressions import run_cost_budget

    overrides: dict = {"parameters": _parameter_overrides(params)}
    for name, value in (
        ("max_depth", depth),
        ("max_states", max_states),
        ("max_records", max_records),
        ("max_values", max_values),
    ):
        if value is not None:
            overrides[name] = value
    with run_cost_budget():
        code, results = _check_specs(specs, overrides, time_limit, mutants, as_json)
    if as_json:
        import json

        click.echo(json.dumps(results, indent=2, ensure_ascii=False))
    sys.exit(code)


def _check_specs(
    specs: tuple[str, ...], overrides: dict, time_limit: float, mutants: bool, as_json: bool
) -> tuple[int, list[dict]]:
    """check-spec over each spec: (the exit code, each spec's result)."""
    from statemachines.tools.check import check_spec
    from statemachines.tools.search_budget import SearchBudget

    code, results = 0, []
    paths, through_mutants = _specs_of(specs)
    for given in paths:
        try:
            spec = load_spec(given)
        except SpecError as exc:
            code = 2
            results.append({"path": given, "problems": [str(p) for p in exc.problems]})
            for problem in exc.problems:
                errors.print(Text(f"error {problem}"))
            continue
        budget = SearchBudget(
            time_limit_s=time_limit, progress=_progress(f"check-spec {given}"), progress_every_s=_every()
        )
        report = check_spec(spec, overrides, budget=budget)
        code = max(code, 2 if report.problems or report.stats.exhausted else 1 if report.violations else 0)
        results.append(report.to_dict())
        if not as_json:
            _print_check_report(spec, report)
        if report.stats.exhausted:
            _ran_out(given, report.stats.exhausted, "Raise --time-limit or --max-states, or narrow check.scope.")
            continue  # the mutants would each spend as much
        if mutants or given in through_mutants:  # a changed mutants file (a pre-commit hook) runs its mutants
            mutants_budget = SearchBudget(
                time_limit_s=time_limit, progress=_progress(f"check-spec --mutants {given}"), progress_every_s=_every()
            )
            code = max(code, _check_mutants(spec, overrides, results[-1], as_json, mutants_budget))
    return code, results


def _check_mutants(spec: Spec, overrides: dict, result: dict, as_json: bool, budget: SearchBudget) -> int:
    """Run the spec's mutants into ``result["mutants"]`` (printing a table
    unless ``as_json``), all within ``budget``; the exit code they call for."""
    from statemachines.tools.spec_mutants import run_spec_mutants

    try:
        outcomes = run_spec_mutants(spec, overrides, budget)
    except SpecError as exc:
        result["mutants_problems"] = [str(p) for p in exc.problems]
        for problem in exc.problems:
            errors.print(Text(f"error {problem}"))
        return 2
    result["mutants"] = [o.to_dict() for o in outcomes]
    if not as_json:
        _print_mutants(spec, outcomes)
    if any(o.problems for o in outcomes):
        return 2
    return 0 if all(o.as_declared for o in outcomes) else 1


def _print_mutants(spec: Spec, outcomes: list) -> None:
    from rich.table import Table

    if not outcomes:
        console.print(Text(f"· {spec.path}: names no spec mutants (check.mutants)", style="dim"))
        return
    table = Table(title=f"spec mutants of {spec.id}", title_justify="left")
    for column in ("mutant", "caught by", "path", "declared", "verdict"):
        table.add_column(column)
    for o in outcomes:
        caught = f"{o.finding.kind} {o.finding.subject}" if o.finding else "—"
        if o.problems:
            verdict = Text("does not apply", style="bold red")
        elif not o.caught:
            verdict = Text("missed" + (f" ({o.why_missed})" if o.why_missed else ""), style="bold red")
        elif not o.as_declared:
            verdict = Text(f"caught, path {'shorter' if o.length < o.mutant.shortest else 'longer'}", style="red")
        else:
            verdict = Text("caught", style="green")
        table.add_row(o.mutant.name, caught, str(o.length or "—"), str(o.mutant.shortest), verdict)
    console.print(table)
    for o in outcomes:
        for problem in o.problems:
            errors.print(Text("error ", style="bold red") + Text(problem))
    good = sum(o.as_declared for o in outcomes)
    mark = Text("✓ ", style="green") if good == len(outcomes) else Text("✗ ", style="red")
    console.print(mark + Text(f"{spec.path}: {good} of {len(outcomes)} spec mutant(s) caught as declared"))


def _specs_of(given: tuple[str, ...]) -> tuple[list[str], set[str]]:
    """The spec files to check: each given file or installed spec's name, a
    fragment (a scenario file from a pre-commit hook) through the specs beside
    it that include it; each once. Also those reached through a mutants file
    (check.mutants), whose mutants are then checked too."""
    out: list[str] = []
    through_mutants: set[str] = set()
    for item in given:
        path = _resolved(item)
        owners = _including_specs(path) if _is_fragment(path) else [path]
        if _is_fragment(path) and _is_mutants_file(path):
            through_mutants.update(owners)
        out += [owner for owner in owners if owner not in out]
    return out, through_mutants


def _is_mutants_file(path: str) -> bool:
    from statemachines.load.source import load_yaml_file

    try:
        data, _ = load_yaml_file(path)
    except SpecError:
        return False
    return isinstance(data, dict) and "mutants" in data


def _print_check_report(spec: Spec, report: CheckReport) -> None:
    from statemachines.tools.check import scenario_yaml

    for problem in report.problems:
        errors.print(Text("error ", style="bold red") + Text(f"{report.path}: {problem}"))
    if not report.scope.declared:
        console.print(Text(f"· {report.path}: no check.scope declared; the default bounds apply", style="dim"))
    for note in report.scope.ceilinged:
        errors.print(Text(f"· {report.path}: {note}", style="yellow"))
    for finding in report.violations:
        line = Text(f"{finding.where or report.path}: ") + Text(f"error[{finding.kind}]", style="bold red")
        console.print(line + Text(f" {finding.subject}: {finding.message}"))
        console.print(Text(f"    shortest path: {len(finding.path)} step(s); as a scenario:", style="dim"))
        for text in scenario_yaml(spec, report.scope, finding).splitlines():
            console.print(Text(f"    {text}"), soft_wrap=True)
    for finding in report.unreached:
        line = Text(f"{finding.where or report.path}: ") + Text(f"note[{finding.kind}]", style="yellow")
        console.print(line + Text(f" {finding.message}"))
    stats = report.stats
    reach = (
        f"stopped at {stats.stopped}"
        if stats.stopped
        else f"complete within depth {report.scope.max_depth}"
        + (" (closed: nothing left to explore)" if stats.closed else "")
    )
    numbers = (
        f"{stats.states} states, {stats.transitions} transitions, depth {stats.depth}, "
        f"{stats.seconds:.1f} s ({stats.states_per_second:.0f} states/s); {reach}"
    )
    bad = report.problems or report.violations
    mark = Text("✗ ", style="red") if bad else Text("✓ ", style="green")
    tail = f"{len(report.violations)} violation(s), {len(report.unreached)} never reached"
    console.print(mark + Text(f"{report.path}: {numbers}; {tail}"))

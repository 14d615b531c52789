"""Console summary with rich, readable both in a terminal and in CI logs.

All report text goes in as ``Text`` objects, never as markup strings:
implementation messages may contain "[...]" that rich would otherwise parse
as markup (or reject), and ":name:" that it would turn into emoji.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich.console import Console
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from ._format import (
    beyond_pools_line,
    compact_json,
    deviation_lines,
    failed_checks,
    first_line,
    ordered_scenarios,
    race_windows_text,
    replay_for,
    step_text,
    values_shown,
    verdict_counts,
    visible,
)
from .difference import describe_difference

__all__ = ["VERDICT_STYLES", "DIFFERENCE_LINES", "SafeConsole", "render_console_summary"]

DIFFERENCE_LINES = 4  # facts of what differs printed under a failure

VERDICT_STYLES = {
    "pass": "bold green",
    "fail": "bold red",
    "error": "bold yellow",
    "skip": "dim",
    "interrupted": "bold magenta",
    "not-reproducing": "bold yellow",
}


class SafeConsole(Console):
    """A rich Console that shows the control characters of what it prints
    escaped (``\\x1b``, ``\\u202e``; :func:`visible`): received text (a spec's
    title, an implementation's message) cannot colour the terminal, set its
    window title, ring its bell or overwrite a line. The escape codes of the
    kit's own styles are added after this, and are kept. Strings are never
    read as markup or emoji codes (``[link=...]`` in a spec's text stays
    text); the kit styles what it prints with ``Text`` objects."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("markup", False)
        kwargs.setdefault("emoji", False)
        super().__init__(*args, **kwargs)

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        return super()._render_buffer(
            segment if segment.control else Segment(visible(segment.text, keep="\n"), segment.style)
            for segment in buffer
        )


def _verdict(verdict: object) -> Text:
    return Text(str(verdict).upper(), style=VERDICT_STYLES.get(str(verdict), ""))


def _clipped(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def render_console_summary(report: dict, console: Console | None = None) -> None:
    """Print the summary; ``console`` defaults to a new stdout Console."""
    console = console or SafeConsole()
    _print_matrix(console, report)
    console.print(_stateful_line(report.get("stateful")))
    stateful = report.get("stateful") or {}
    # "never reached" after an exploration that ran its whole budget: one that
    # failed stopped early, so what it did not reach says little.
    _print_pairs(
        console, report.get("coverage"), explored=bool(stateful.get("examples")) and stateful.get("verdict") == "pass"
    )
    checks = list(failed_checks(report))
    _print_stubbed(console, report, checks)
    shown_replays = _print_failures(console, checks, report)
    _print_not_applicable(console, report)
    _print_deviations(console, report)
    _print_problems(console, report.get("problems") or [])
    if report.get("replay") and report["replay"] not in shown_replays:
        console.print(Text("Replay: " + report["replay"], style="dim"), soft_wrap=True)
    console.print(_verdict_line(report))


def _print_matrix(console: Console, report: dict) -> None:
    spec = report.get("spec") or {}
    title = " ".join(str(p) for p in (spec.get("id") or "unknown spec", spec.get("version")) if p)
    table = Table(title=Text(f"Conformance: {title}"), title_justify="left")
    for column in ("ID", "Category", "Scenario", "Verdict"):
        table.add_column(column, no_wrap=column != "Scenario")
    for s in ordered_scenarios(report):
        table.add_row(
            Text(str(s.get("id"))),
            Text(str(s.get("category") or "")),
            Text(str(s.get("title") or "")),
            _verdict(s.get("verdict")).append(f" {race_windows_text(s)}" if race_windows_text(s) else ""),
        )
    # An empty table reads like a rendering bug; say what happened.
    console.print(table if table.row_count else Text(f"Conformance: {title}: no scenario was run"))


def _stateful_details(st: dict) -> list[str]:
    details = [
        f"profile {st['profile']}" if st.get("profile") else None,
        f"seed {st['seed']}" if st.get("seed") is not None else None,
        f"{st['examples']} examples" if st.get("examples") is not None else None,
        f"{st['steps']} steps" if st.get("steps") is not None else None,
        f"{st['duration_s']:.1f} s" if isinstance(st.get("duration_s"), (int, float)) else None,
        _never_exercised(st) if st.get("coverage") else None,
        beyond_pools_line(st.get("beyond_pools")),
    ]
    return [d for d in details if d]


def _never_exercised(st: dict) -> str:
    """How many of the spec's operations, transitions, states ... the
    exploration never exercised (report.json's coverage.uncovered, listed in
    summary.md)."""
    count = len((st.get("coverage") or {}).get("uncovered") or [])
    return f"{count} never exercised" if count else "all exercised"


def _stateful_line(st: dict | None) -> Text:
    line = Text("Stateful exploration: ")
    if not st:
        line.append("not run", style="dim")
        return line
    line.append_text(_verdict(st.get("verdict")))
    details = _stateful_details(st)
    if details:
        line.append(f" ({', '.join(details)})")
    return line


NEVER_REACHED_SHOWN = 3  # on the console; summary.md and report.json say more


def _print_pairs(console: Console, coverage: dict | None, explored: bool = True) -> None:
    """One line of the finer coverage (engine/pairs.py) and, after an
    exploration, the rarest combinations it never came near (a replay or a
    run of scenarios alone was never meant to reach them: summary.md and
    report.json still list them)."""
    categories = (coverage or {}).get("categories") or {}
    pairs, triples = categories.get("transition-pairs"), categories.get("triples")
    if not pairs or not triples:
        return
    reached = (
        f"Transition pairs reached: {pairs['covered']}/{pairs['total']}"
        if pairs["total"]
        else "Transition pairs: none (no record of this lifecycle changes state twice)"
    )
    console.print(Text(f"{reached}; (state, operation, outcome) triples: {triples['covered']}/{triples['total']}"))
    if not explored:
        return
    for line in ((coverage or {}).get("never_reached") or [])[:NEVER_REACHED_SHOWN]:
        console.print(Text(f"  {line}", style="dim"), soft_wrap=True)


def _is_stub(failure: dict | None) -> bool:
    return (failure or {}).get("kind") == "not-implemented"


def _print_stubbed(console: Console, report: dict, checks: list[tuple[str, dict | None]]) -> None:
    """The operations the implementation does not offer (each answered
    not_implemented): listed once, as not applicable, instead of a page of
    identical failures; the scenarios calling them are not applicable. A
    report that still has such answers as failures (an older kit's, or a
    stub with nothing else to draw) lists them once too, with what they stop."""
    operations = (report.get("not_applicable") or {}).get("operations") or []
    stubbed: dict[str, list[str]] = {}
    for label, failure in checks:
        if failure is not None and _is_stub(failure) and failure.get("operation"):
            stubbed.setdefault(str(failure.get("operation")), []).append(
                label.split(" ", 1)[0] if label != "stateful exploration" else "the exploration"
            )
    if operations:
        console.print()
        console.print(
            Text(
                f"Not implemented: {len(operations)} operation(s) answer not_implemented "
                "(the scenarios calling them are not applicable; the exploration stopped drawing them)",
                style="bold yellow",
            ),
            soft_wrap=True,
        )
        for entry in operations:
            detail = f" ({entry['message']})" if entry.get("message") else ""
            console.print(Text(f"  operation {entry['operation']} is not implemented{detail}"), soft_wrap=True)
        if any(_is_stub(failure) for _, failure in checks):
            console.print(Text("  nothing left to check: no operation answers otherwise", style="bold red"))
    listed = {str(entry.get("operation")) for entry in operations}
    failing = {op: labels for op, labels in sorted(stubbed.items()) if op not in listed}
    if failing:
        console.print()
        console.print(Text(f"Not implemented: {len(failing)} operation(s) answer not_implemented", style="bold red"))
        for operation, labels in failing.items():
            console.print(
                Text(f"  operation {operation} is not implemented (stops {', '.join(labels)})"), soft_wrap=True
            )


def _print_failures(console: Console, checks: list[tuple[str, dict | None]], report: dict) -> set[str]:
    """One block per failed check but the stubs; returns the replay commands shown."""
    shown_replays: set[str] = set()
    for label, failure in checks:
        if _is_stub(failure):
            continue
        replay = _print_failure(console, label, failure or {}, report)
        if replay:
            shown_replays.add(replay)
    return shown_replays


def _print_failure(console: Console, label: str, failure: dict, report: dict) -> str | None:
    console.print()
    head = Text(label, style="bold red")
    head.append(f"  [{failure.get('kind', 'no details')}]", style="red")
    console.print(head)
    _print_message(console, str(failure.get("message") or ""))
    if failure.get("path"):
        console.print(Text(f"  at {failure['path']}", style="cyan"))
    for name in values_shown(failure):
        console.print(Text(f"  {name}: {compact_json(failure.get(name), 300)}"), soft_wrap=True)
    _print_difference(console, failure)
    _print_last_steps(console, failure)
    replay = replay_for(failure, report)
    if replay:
        # soft_wrap: a hard-wrapped command could not be copied from a log.
        console.print(Text("  replay: " + replay, style="dim"), soft_wrap=True)
    return replay


def _print_difference(console: Console, failure: dict) -> None:
    """What differs between structured expected and observed values (their
    first facts; summary.md has more)."""
    expected, observed = failure.get("expected"), failure.get("observed")
    if expected is None or observed is None or not isinstance(expected, (dict, list)):
        return
    found = describe_difference(expected, observed, limit=DIFFERENCE_LINES)
    for line in found.lines:
        console.print(Text("  differs: " + _clipped(line, 240), style="yellow"), soft_wrap=True)
    if found.left_out:
        console.print(Text(f"  ... {found.left_out} more difference(s) in summary.md", style="dim"))


def _print_message(console: Console, message: str) -> None:
    message_lines = message.strip().splitlines()
    for text in message_lines[:3]:
        # A line of a message can quote an answer: a console line stays readable.
        console.print(Text("  " + _clipped(text, 1000)))
    if len(message_lines) > 3:
        more = len(message_lines) - 3
        console.print(Text(f"  ... {more} more line{'' if more == 1 else 's'} in summary.md", style="dim"))


# A counterexample this short is printed whole: it reads as the bug report.
_STEPS_SHOWN_WHOLE = 8


def _print_last_steps(console: Console, failure: dict) -> None:
    steps = failure.get("steps") or []
    if not steps:
        return
    where = f" (file: {failure['counterexample_file']})" if failure.get("counterexample_file") else ""
    # the probe calls judging a concurrent group are part of it, as in the counterexample file
    count = sum(1 for step in steps if not step.get("follow_up"))
    console.print(Text(f"  {count} step(s) lead here, listed in summary.md and report.json{where}", style="dim"))
    if count > _STEPS_SHOWN_WHOLE:
        folded = _folded(steps)
        if len(folded) <= _FOLDED_SHOWN:
            console.print(Text("    (a run of calls of one operation shows its first and last call)", style="dim"))
            for line, style in folded:
                console.print(Text("    " + _clipped(line, 240), style=style), soft_wrap=True)
            return
    shown = steps if count <= _STEPS_SHOWN_WHOLE else steps[-3:]
    if len(shown) < len(steps):
        earlier = count - sum(1 for step in shown if not step.get("follow_up"))  # as the file counts them
        console.print(Text(f"    ... {earlier} earlier step(s) in the file; the last {len(shown)}:", style="dim"))
    for step in shown:
        console.print(Text("    " + _clipped(step_text(step), 240)), soft_wrap=True)


# A longer counterexample is printed whole when runs of one operation, folded,
# leave at most this many lines: a table filled to its limit before the step
# that matters reads as three lines, not as the last three of twenty.
_FOLDED_SHOWN = 12
_FOLD_FROM = 4  # calls of one operation in a row (three show whole: folding saves nothing)


def _folded(steps: list[dict]) -> list[tuple[str, str]]:
    """The steps as lines (text, style), each run of ``_FOLD_FROM`` or more
    plain calls of one operation in a row shown as its first call, how many
    more there are, and its last call."""
    lines: list[tuple[str, str]] = []
    start = 0
    while start < len(steps):
        end = start + 1
        while end < len(steps) and _plain_call(steps[start]) and _same_operation(steps[start], steps[end]):
            end += 1
        run = steps[start:end]
        if len(run) >= _FOLD_FROM:
            middle = len(run) - 2
            lines.append((step_text(run[0]), ""))
            lines.append((f"... {middle} more {run[0]['operation']} call{'' if middle == 1 else 's'}", "dim"))
            lines.append((step_text(run[-1]), ""))
        else:
            lines.extend((step_text(step), "") for step in run)
        start = end
    return lines


def _plain_call(step: dict) -> bool:
    return "operation" in step and not step.get("follow_up") and "concurrently" not in step


def _same_operation(first: dict, step: dict) -> bool:
    return _plain_call(step) and step.get("operation") == first.get("operation")


def _print_not_applicable(console: Console, report: dict) -> None:
    not_applicable = report.get("not_applicable")
    if not_applicable and not_applicable.get("scenarios"):
        console.print(
            Text(
                f"{len(not_applicable['scenarios'])} scenario(s) not applicable to profile "
                f"{not_applicable.get('profile')} (written for other parameters"
                + (", or calling an operation not implemented" if not_applicable.get("operations") else "")
                + "; listed in report.json)",
                style="dim",
            )
        )
    _print_coverage_not_applicable(console, report.get("coverage") or {})


def _print_coverage_not_applicable(console: Console, coverage: dict) -> None:
    """Coverage items that cannot occur in this run: each with why in a
    category a --min-coverage gate judges, else counted on one line."""
    categories = coverage.get("categories") or {}
    gated = {g.get("category") for g in coverage.get("gates") or []}
    entries = [(key, e) for key, entry in categories.items() for e in entry.get("not_applicable") or []]
    if not entries:
        return
    console.print(
        Text(
            f"{len(entries)} coverage item(s) cannot occur in this run, not counted by --min-coverage "
            "(listed with why in summary.md and report.json)" + (":" if gated else ""),
            style="dim",
        )
    )
    for key, entry in entries:
        if key in gated:
            console.print(Text(_clipped(f"  {key}: {entry['item']}: {entry['reason']}", 400)), soft_wrap=True)


def _print_deviations(console: Console, report: dict) -> None:
    deviations = deviation_lines(report)
    if deviations:
        console.print(Text(f"Accepted deviations ({(report.get('deviations') or {}).get('file')}):", style="yellow"))
        for line in deviations:
            console.print(Text("  " + line, style="yellow"), soft_wrap=True)


def _print_problems(console: Console, problems: list[dict]) -> None:
    if not problems:
        return
    console.print()
    for p in problems:
        where = f" ({p['where']})" if p.get("where") else ""
        console.print(Text(f"! {p.get('kind')}{where}: {first_line(p.get('message'))}", style="yellow"))


def _verdict_line(report: dict) -> Text:
    """The verdict, with what each part of the run came to: the scenarios'
    counts (or that none ran) and the exploration's verdict."""
    scenarios = report.get("scenarios") or []
    c = verdict_counts(scenarios)
    parts = [
        f"scenarios: {c['pass']} passed, {c['fail']} failed, {c['error']} errors, {c['skip']} skipped"
        if scenarios
        else "no scenario run"
    ]
    stateful = report.get("stateful") or {}
    if stateful.get("verdict"):
        parts.append(f"exploration: {stateful['verdict']}")
    final = Text("\nVerdict: ")
    final.append_text(_verdict(report.get("verdict")))
    final.append(f"  (exit code {report.get('exit_code')}; {'; '.join(parts)})")
    return final

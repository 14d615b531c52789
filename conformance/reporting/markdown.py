"""summary.md: a human summary for CI job summaries and pull requests."""

from __future__ import annotations

import re

from ._format import (
    beyond_pools_line,
    compact_json,
    deviation_lines,
    failed_checks,
    ordered_scenarios,
    pretty_json,
    race_windows_text,
    replay_for,
    step_text,
    values_shown,
    verdict_counts,
    visible,
)
from .difference import describe_difference
from .mermaid import mermaid_state_diagram

__all__ = [
    "VERDICT_ICONS",
    "COUNTS_NOTE",
    "DIAGRAM_LEGEND",
    "MESSAGE_LINES",
    "SMALL_VALUE_LINES",
    "render_summary_markdown",
]

VERDICT_ICONS = {"pass": "✅", "fail": "❌", "error": "⚠️", "skip": "⏭", "interrupted": "⏹", "not-reproducing": "❓"}


def _icon(verdict: object) -> str:
    return VERDICT_ICONS.get(str(verdict), "❔")


def _verdict(verdict: object) -> str:
    return f"{_icon(verdict)} {verdict}"


def _text(value) -> str:
    # Messages come from implementations; "<" could open raw HTML.
    return str(value).replace("&", "&amp;").replace("<", "&lt;")


def _cell(value) -> str:
    return " ".join(_text("" if value is None else value).replace("|", "\\|").split())


def _code(value) -> str:
    """Inline code span that survives backticks inside the value."""
    text = " ".join(str(value).split())
    ticks = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def _fence(text, lang: str = "") -> str:
    ticks = "`" * max(3, max((len(run) for run in re.findall(r"`+", str(text))), default=0) + 1)
    return f"{ticks}{lang}\n{str(text).rstrip()}\n{ticks}"


def _count_table(title: str, column: str, counts: dict | None) -> list[str]:
    if not counts:
        return []
    lines = [f"**{title}**", "", f"| {column} | Count |", "|---|---:|"]
    lines += [f"| {_cell(name)} | {count} |" for name, count in counts.items()]
    return lines + [""]


def _header(report: dict) -> list[str]:
    return (
        _title_lines(report)
        + _implementation_lines(report.get("implementation"))
        + _parameter_lines(report.get("parameters"))
        + [_result_line(report), ""]
    )


def _title_lines(report: dict) -> list[str]:
    spec = report.get("spec") or {}
    verdict = report.get("verdict")
    title = " ".join(str(p) for p in (spec.get("id") or "unknown spec", spec.get("version")) if p)
    kit = report.get("kit") or {}
    facts = [
        f"_{_text(spec['title'])}_" if spec.get("title") else None,
        _code(spec["path"]) if spec.get("path") else None,
        f"{kit.get('name', '')} {kit.get('version', '')}".strip() or None,
        f"started {report['started_at']}" if report.get("started_at") else None,
        f"{report['duration_s']:.1f} s" if isinstance(report.get("duration_s"), (int, float)) else None,
        f"exit code {report.get('exit_code')}",
    ]
    return [
        f"# {_icon(verdict)} {_text(title)}: {str(verdict).upper()}",
        "",
        " · ".join(f for f in facts if f),
        "",
    ]


def _assignments(values: dict) -> str:
    return ", ".join(_code(f"{k}={compact_json(v)}") for k, v in values.items())


def _implementation_lines(impl: dict | None) -> list[str]:
    if not impl:
        return ["**Implementation:** not loaded", ""]
    who = " ".join(str(p) for p in (impl.get("name") or "unnamed implementation", impl.get("version")) if p)
    declared = impl.get("parameters") or {}
    parts = [
        f"**Implementation:** {_text(who)}",
        f"profile {_code(impl['profile'])}" if impl.get("profile") else "no profile",
        f"adapter {_code(impl['adapter'])}" if impl.get("adapter") else None,
        "declared parameters: " + (_assignments(declared) if declared else "none"),
    ]
    return [" · ".join(p for p in parts if p), ""]


def _parameter_lines(parameters: dict | None) -> list[str]:
    if not parameters:
        return []
    return ["**Effective parameters:** " + _assignments(parameters), ""]


def _result_line(report: dict) -> str:
    scenarios = report.get("scenarios") or []
    c = verdict_counts(scenarios)
    result = (
        f"**Result:** {c['pass']} passed, {c['fail']} failed, {c['error']} errors, {c['skip']} skipped "
        f"of {len(scenarios)} scenarios"
    )
    not_applicable = (report.get("not_applicable") or {}).get("scenarios") or []
    if not_applicable:
        result += f" · {len(not_applicable)} not applicable to profile {_code(report['not_applicable'].get('profile'))}"
    stateful = report.get("stateful")
    if stateful:
        return result + f" · stateful exploration {_verdict(stateful.get('verdict'))}"
    return result + " · stateful exploration not run"


def _matrix(report: dict) -> list[str]:
    lines = ["## Scenario matrix", ""]
    scenarios = ordered_scenarios(report)
    if not scenarios:
        return lines + ["No scenario was run.", ""]
    lines += ["| ID | Category | Scenario | Verdict |", "|---|---|---|---|"]
    lines += [
        f"| {_cell(s.get('id'))} | {_cell(s.get('category') or '')} | {_cell(s.get('title') or '')} "
        f"| {_verdict(s.get('verdict'))}{_text(' · ' + race_windows_text(s)) if race_windows_text(s) else ''} |"
        for s in scenarios
    ]
    return lines + [""]


def _not_applicable(report: dict) -> list[str]:
    entries = (report.get("not_applicable") or {}).get("scenarios") or []
    operations = (report.get("not_applicable") or {}).get("operations") or []
    lines = [
        f"Not implemented (not applicable): operation {_code(o['operation'])}"
        + (f" ({_text(o['message'])})" if o.get("message") else "")
        for o in operations
    ]
    lines += [""] if lines else []
    if not entries:
        return lines
    lines += [
        "<details><summary>"
        + f"{len(entries)} scenario(s) not applicable to profile "
        + _text(str(report["not_applicable"].get("profile")))
        + "</summary>",
        "",
        "| ID | Scenario | Why |",
        "|---|---|---|",
    ]
    lines += [f"| {_cell(e['id'])} | {_cell(e.get('title') or '')} | {_cell(e['reason'])} |" for e in entries]
    return lines + ["", "</details>", ""]


def _deviations(report: dict) -> list[str]:
    block = report.get("deviations")
    if not block:
        return []
    lines = [
        "## Accepted deviations",
        "",
        f"From {_code(block.get('file'))}: {block.get('accepted', 0)} difference(s) accepted"
        + (f" ({block['schema_accepted']} of them schema failures)" if block.get("schema_accepted") else "")
        + f", {block.get('avoided', 0)} call(s) not sent.",
        "",
    ]
    lines += [f"- {_text(line)}" for line in deviation_lines(report)]
    return lines + [""]


def _stateful(report: dict) -> list[str]:
    lines = ["## Stateful exploration", ""]
    st = report.get("stateful")
    if not st:
        return lines + ["Not run.", ""]
    duration = f"{st['duration_s']:.1f} s" if isinstance(st.get("duration_s"), (int, float)) else ""
    lines += [
        "| Verdict | Profile | Seed | Examples | Steps | Duration |",
        "|---|---|---:|---:|---:|---:|",
        f"| {_verdict(st.get('verdict'))} | {_cell(st.get('profile') or '')} | {_cell(st.get('seed', ''))} "
        f"| {_cell(st.get('examples', ''))} | {_cell(st.get('steps', ''))} | {duration} |",
        "",
    ]
    beyond = beyond_pools_line(st.get("beyond_pools"))
    if beyond:
        lines += [f"Arguments drawn from pools, {beyond} (`--beyond-pools`).", ""]
    cov = st.get("coverage") or {}
    if any(cov.get(key) for key in ("operations", "transitions", "states", "policies")):
        lines += [COUNTS_NOTE, ""]
    for title, column, key in (
        ("Operations", "Operation", "operations"),
        ("Transitions", "Transition", "transitions"),
        ("States", "State", "states"),
        ("Policies", "Policy", "policies"),
    ):
        lines += _count_table(title, column, cov.get(key))
    if cov.get("uncovered"):
        lines += ["**Never exercised**", ""] + [f"- {_code(u)}" for u in cov["uncovered"]] + [""]
    elif cov:
        lines += ["Every transition and policy was exercised.", ""]
    return lines


_CATEGORY_NAMES = {
    "transitions": "Transitions",
    "states": "States",
    "operations": "Operations",
    "error-kinds": "Error kinds",
    "policies": "Policies",
    "boundary-classes": "Boundary classes",
    "races": "Races",
    "transition-pairs": "Transition pairs",
    "triples": "State, operation, outcome",
}
MISSED_SHOWN = 12
# The exploration's tables and the diagram count different things: each says which.
COUNTS_NOTE = (
    "Counts of the exploration's examples, shrinking included (not the replays that reduce a failure); "
    "the diagram under Lifecycle adds the scenarios' calls."
)
DIAGRAM_LEGEND = (
    "Each edge: trigger · times this run took it, the scenarios' and the exploration's together (the "
    "Transitions table counts the exploration's alone; replays that reduce a failure are not counted); "
    "dashed grey: never taken; red: what the first failure is about."
)


def _coverage(report: dict) -> list[str]:
    """What the whole run (scenarios and exploration) exercised, per category, with its gates."""
    cov = report.get("coverage")
    if not cov or not cov.get("categories"):
        return []
    gates = {g["category"]: g for g in cov.get("gates") or []}
    lines = [
        "## Coverage",
        "",
        "Scenarios and exploration together.",
        "",
        "| Category | Covered | Minimum | Never exercised |",
        "|---|---:|---:|---|",
    ]
    for key, entry in cov["categories"].items():
        gate = gates.get(key)
        minimum = "—" if gate is None else f"{'✅' if gate['passed'] else '❌'} {gate['minimum']:g}%"
        missed = entry.get("missed") or []
        shown = ", ".join(_code(m) for m in missed[:MISSED_SHOWN])
        if len(missed) > MISSED_SHOWN:
            shown += f", … {len(missed) - MISSED_SHOWN} more"
        lines.append(
            f"| {_CATEGORY_NAMES.get(key, _cell(key))} | {entry['covered']}/{entry['total']} "
            f"({entry['percent']:g}%) | {minimum} | {shown or '—'} |"
        )
    never = cov.get("never_reached") or []
    if never:
        lines += [
            "",
            "Never reached (the rare transition pairs the run did not come near, the least approached first):",
            "",
        ]
        lines += [f"- {_code(line)}" for line in never]
    return lines + [""] + _coverage_not_applicable(cov)


def _coverage_not_applicable(cov: dict) -> list[str]:
    """The items no test of this run can reach, each with why (not counted above nor by --min-coverage)."""
    entries = [
        (key, entry) for key, category in cov["categories"].items() for entry in category.get("not_applicable") or []
    ]
    if not entries:
        return []
    lines = ["**Not applicable** (cannot occur in this run; not counted above nor by `--min-coverage`)", ""]
    for key, entry in entries:
        name = _CATEGORY_NAMES.get(key, _text(key))
        # the reason quotes the spec's expressions between backticks: shown as code
        quoted = str(entry["reason"]).split("`")
        reason = "".join(_code(part) if i % 2 else _text(part) for i, part in enumerate(quoted))
        lines.append(f"- {name}: {_code(entry['item'])}: {reason}")
    return lines + [""]


# summary.md keeps each failure to about 150 lines: the message's first
# lines, the steps' first and last, what differs; whole values are in
# report.json (and values/ when large).
MESSAGE_LINES = 40
STEPS_HEAD, STEPS_TAIL = 10, 30
SMALL_VALUE_LINES = 12  # a value this short (pretty JSON) is shown whole
STEP_CHARS = 300  # of one step's line (its answer is in report.json whole)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _failure(label: str, failure: dict | None, report: dict) -> list[str]:
    lines = [f"### {_text(label)}", ""]
    if not failure:
        lines += ["No failure details were recorded.", ""]
    else:
        lines += _failure_facts(failure) + ["", _fence(_clipped_message(failure.get("message", "")), "text"), ""]
        lines += _failure_steps(failure)
        lines += _failure_values(failure)
        lines += _model_lines(failure)
    replay = replay_for(failure, report)
    if replay:
        lines += ["**Replay**", "", _fence(replay, "sh"), ""]
    return lines


def _failure_facts(failure: dict) -> list[str]:
    facts = [f"- **Kind:** {_code(failure.get('kind'))}"]
    if failure.get("operation"):
        args = ", ".join(f"{k}={compact_json(v)}" for k, v in (failure.get("args") or {}).items())
        call = f"{failure['operation']}({args})"
        facts.append(f"- **Operation:** {_code(call)}")
    if failure.get("step") is not None:
        facts.append(f"- **First divergence:** step {failure['step']}")
    if failure.get("path"):
        facts.append(f"- **Path:** {_code(failure['path'])}")
    if failure.get("seed") is not None:
        facts.append(f"- **Seed:** {failure['seed']}")
    if failure.get("counterexample_file"):
        facts.append(f"- **Counterexample:** {_code(failure['counterexample_file'])}")
    return facts


def _clipped_message(message: object) -> str:
    lines = str(message).rstrip().splitlines()
    if len(lines) <= MESSAGE_LINES:
        return "\n".join(lines)
    kept = MESSAGE_LINES - 1
    return "\n".join(lines[:kept] + [f"… {len(lines) - kept} more line(s): the whole message is in report.json"])


def _failure_steps(failure: dict) -> list[str]:
    steps = failure.get("steps") or []
    if not steps:
        return []
    lines = ["**Steps**", ""]
    shown = list(enumerate(steps, 1))
    if len(steps) > STEPS_HEAD + STEPS_TAIL + 1:
        shown = shown[:STEPS_HEAD] + [(0, None)] + shown[-STEPS_TAIL:]
    for n, step in shown:
        if step is None:
            lines.append(f"- … {len(steps) - STEPS_HEAD - STEPS_TAIL} step(s) left out (all in report.json)")
            continue
        mark = " ← **first divergence**" if step.get("index") == failure.get("step") else ""
        lines.append(f"{n}. step {step.get('index')}: {_code(_clip(step_text(step), STEP_CHARS))}{mark}")
    return lines + [""]


MODEL_RECORDS = 3  # records of the model shown at the diverging step (report.json has up to six)


def _model_lines(failure: dict) -> list[str]:
    """What the model held at the step where the implementation parted from
    it: the transitions its records took along the steps, and the records
    that step read or changed (report.json has each step's)."""
    steps = [s for s in failure.get("steps") or [] if isinstance(s, dict)]
    at = next((s for s in steps if s.get("index") == failure.get("step")), steps[-1] if steps else None)
    model = (at or {}).get("model")
    if at is None or not isinstance(model, dict):
        return []
    taken = [t for s in steps if s is not at for t in (s.get("model") or {}).get("transitions") or []]
    lines = [
        f"**The model at step {at.get('index')}** (what it held after the step; the step read or changed the first)",
        "",
    ]
    if taken:
        lines.append(f"- Transitions before it: {', '.join(_code(t) for t in taken)}")
    if model.get("transitions"):
        lines.append(f"- Transitions of this step: {', '.join(_code(t) for t in model['transitions'])}")
    touched = list(dict.fromkeys([*(model.get("read") or []), *(model.get("changed") or [])]))
    if touched:
        lines.append(f"- Records the step read or changed: {', '.join(_code(k) for k in touched)}")
    if model.get("note"):
        lines.append(f"- {_text(model['note'])}")
    lines.append("")
    for record in (model.get("records") or [])[:MODEL_RECORDS]:
        lines.append(f"- {_code(_clip(compact_json(record), STEP_CHARS))}")
    more = len(model.get("records") or []) - MODEL_RECORDS + int(model.get("more_records") or 0)
    if more > 0:
        lines.append(f"- … {more} more record(s) of the model")
    return lines + [""]


def _small(value: object) -> bool:
    return pretty_json(value).count("\n") < SMALL_VALUE_LINES


def _failure_values(failure: dict) -> list[str]:
    """What differs between the failure's expected and observed values, and
    the values themselves only when they are short."""
    present = values_shown(failure)
    lines: list[str] = []
    if len(present) == 2:
        found = describe_difference(failure.get("expected"), failure.get("observed"))
        where = f" at {_code(failure['path'])}" if failure.get("path") else ""
        lines += [f"**What differs**{where}", ""] + [f"- {_text(line)}" for line in found.lines]
        if found.left_out:
            lines.append(f"- … {found.left_out} more difference(s): compare the whole values in report.json")
        lines.append("")
    for key in present:
        if _small(failure.get(key)):
            lines += [f"**{key.capitalize()}**", "", _fence(pretty_json(failure.get(key)), "json"), ""]
    if any(not _small(failure.get(key)) for key in present):
        whole = " and ".join(f"`{key}`" for key in present if not _small(failure.get(key)))
        lines += [f"The whole {whole} value(s) are in report.json (large ones under `values/`).", ""]
    return lines


def render_summary_markdown(report: dict) -> str:
    lines = (
        _header(report)
        + _matrix(report)
        + _not_applicable(report)
        + _deviations(report)
        + _stateful(report)
        + _coverage(report)
    )

    failures = list(failed_checks(report))
    if failures:
        lines += ["## Failures", ""]
        for label, failure in failures:
            lines += _failure(label, failure, report)

    if report.get("problems"):
        lines += ["## Problems", ""]
        for p in report["problems"]:
            where = f" ({_code(p['where'])})" if p.get("where") else ""
            # Indented continuation lines keep a multi-line message in its item.
            message = _text(p.get("message", "")).strip().replace("\n", "\n  ")
            lines.append(f"- **{_text(p.get('kind'))}**{where}: {message}")
        lines.append("")

    lifecycle = (report.get("spec") or {}).get("lifecycle")
    if lifecycle:
        taken = (report.get("coverage") or {}).get("transitions")
        legend = DIAGRAM_LEGEND if taken is not None else ""
        lines += ["## Lifecycle", ""] + ([legend, ""] if legend else [])
        lines += [_fence(mermaid_state_diagram(lifecycle, taken), "mermaid"), ""]

    if report.get("replay"):
        lines += ["## Replay", "", _fence(report["replay"], "sh"), ""]
    # Received text (titles, descriptions, answers) shows, escaped, never acts.
    return visible("\n".join(lines).rstrip()) + "\n"

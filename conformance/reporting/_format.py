"""Plain-text pieces shared by the JUnit, Markdown and console writers.

Every writer reads the report with ``.get`` and defaults: an "error" report
may carry little more than its problems, and rendering it must still work.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

__all__ = [
    "beyond_pools_line",
    "CATEGORY_ORDER",
    "compact_json",
    "deviation_lines",
    "failed_checks",
    "failure_text",
    "first_line",
    "ordered_scenarios",
    "pretty_json",
    "race_windows_text",
    "values_shown",
    "replay_for",
    "step_text",
    "verdict_counts",
    "visible",
]

CATEGORY_ORDER = ("nominal", "edge", "boundary")


def _escape(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def visible(text: Any, keep: str = "\n\t") -> str:
    """``text`` with every character that is not printable escaped (``\\x1b``,
    ``\\u202e``), except those in ``keep``: control characters (ESC, BEL, CR,
    the other C0 and C1 codes), line and paragraph separators, format
    characters such as bidirectional overrides, unassigned code points. Received
    text (spec titles, implementation answers) goes through this before a
    terminal, a Markdown file or JUnit XML shows it: it cannot colour the
    terminal, set a window title, or hide or reorder what a reader sees."""
    text = str(text)
    if text.isprintable():
        return text
    return "".join(
        line if line.isprintable() else "".join(c if c.isprintable() or c in keep else _escape(c) for c in line)
        for line in _LINES.split(text)
    )


_LINES = re.compile("(\n)")


def first_line(text: Any, default: str = "") -> str:
    lines = str(text or "").strip().splitlines()
    return lines[0].strip() if lines else default


def compact_json(value: Any, limit: int | None = None) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str)
    if limit is not None and len(text) > limit:
        text = text[: limit - 1] + "…"
    return text


def deviation_lines(report: dict) -> list[str]:
    """One line per entry of the run's deviations file: what it covered, how
    often, why, and its first example (accepted deviations are never silent)."""
    block = report.get("deviations") or {}
    lines = []
    for d in block.get("entries") or []:
        if d.get("id") in (block.get("expired") or []):
            done = f"EXPIRED on {d.get('expires')} (not applied)"
        elif d.get("kind") == "avoid":
            done = f"avoided {d.get('count', 0)} call(s) of {d.get('operation')}"
        else:
            done = f"accepted {d.get('count', 0)} time(s)"
            if d.get("schema_count"):
                done += f", {d['schema_count']} of them a schema failure"
        line = f"{d.get('id')}: {done}: {' '.join(str(d.get('reason') or '').split())}"
        example = d.get("example") or {}
        if d.get("kind") == "accept" and example:
            line += (
                f" (e.g. {example.get('operation')} {example.get('path')}: expected "
                f"{compact_json(example.get('expected'), 80)}, got {compact_json(example.get('observed'), 80)})"
            )
        schema = d.get("schema_example") or {}
        if d.get("kind") == "accept" and schema and schema != example:
            line += (
                f" (schema failure e.g. {schema.get('operation')} {schema.get('path')}: "
                f"{compact_json(schema.get('expected'), 80)})"
            )
        if d.get("errors"):
            line += f" [its `when` failed: {first_line(d['errors'][0])}]"
        lines.append(line)
    return lines


def pretty_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2, default=str)


def _call_text(call: dict) -> str:
    args = call.get("args") or {}
    text = f"{call.get('operation', '?')}({', '.join(f'{k}={compact_json(v)}' for k, v in args.items())})"
    if "observed" in call:
        # Observations can be whole job lists; the full value of the
        # diverging step is shown separately as expected/observed.
        text += f" -> {compact_json(call['observed'], limit=200)}"
    return text


def step_text(step: dict) -> str:
    """One step on one line: a call, a clock advance, or concurrent calls."""
    if "advance_ms" in step:
        return f"advance clock +{step['advance_ms']} ms"
    if "concurrently" in step:
        return "concurrently: " + " | ".join(_call_text(c) for c in step["concurrently"]) + _order_text(step)
    if step.get("follow_up"):  # the kit's probe judging the group before it; every replay makes it again
        return f"(checking the concurrent calls) {_call_text(step)}"
    return _call_text(step)


def _order_text(group: dict) -> str:
    """How the model explained a group's answers, when not in the calls'
    own order: which call took effect first (counted from 1, as listed)."""
    order = group.get("order")
    if not isinstance(order, list) or order == list(range(len(order))):
        return ""
    return " (took effect in the order " + ", ".join(f"call {i + 1}" for i in order) + ")"


def replay_for(failure: dict | None, report: dict) -> str | None:
    # A failure's own command is the narrowest replay; the run's command
    # reproduces it too, just more slowly.
    return (failure or {}).get("replay") or report.get("replay")


def values_shown(failure: dict) -> list[str]:
    """Which of a failure's expected and observed values a report shows. A
    divergence at a path shows both, null too: null expected beside 0
    observed is the news. Otherwise (a race, a schema break) each
    one that is not null (a null expected there means "not applicable"), and
    an observed null beside an expected value."""
    both = (failure.get("expected"), failure.get("observed"))
    if failure.get("path") and failure.get("kind") == "divergence" and both != (None, None):
        return ["expected", "observed"]
    return [
        name
        for name in ("expected", "observed")
        if failure.get(name) is not None or (name == "observed" and failure.get("expected") is not None)
    ]


def failure_text(failure: dict | None, report: dict) -> str:
    """The full failure as plain text (JUnit body)."""
    if not failure:
        replay = replay_for(None, report)
        return "no failure details were recorded" + (f"\n\nreplay: {replay}" if replay else "")
    out = [f"[{failure.get('kind', '?')}] {failure.get('message', '')}".rstrip()]
    if failure.get("operation"):
        out.append(f"operation: {_call_text({'operation': failure['operation'], 'args': failure.get('args')})}")
    if failure.get("step") is not None:
        out.append(f"first divergence at step {failure['step']}")
    if failure.get("path"):
        out.append(f"path: {failure['path']}")
    for key in values_shown(failure):
        text = pretty_json(failure.get(key))  # bounded in written reports; a failure straight from a run may not be
        if len(text) > 65536:
            text = text[:65535] + f"… ({len(text):,} characters in all)"
        out.append(f"{key}:\n{text}")
    if failure.get("steps"):
        out.append("steps:")
        for step in failure["steps"]:
            mark = "   <-- first divergence" if step.get("index") == failure.get("step") else ""
            out.append(f"  [{step.get('index')}] {step_text(step)}{mark}")
    if failure.get("seed") is not None:
        out.append(f"seed: {failure['seed']}")
    if failure.get("counterexample_file"):
        out.append(f"counterexample: {failure['counterexample_file']}")
    replay = replay_for(failure, report)
    if replay:
        out.append(f"replay: {replay}")
    return "\n".join(out)


def ordered_scenarios(report: dict) -> list[dict]:
    """Scenarios grouped nominal, edge, boundary (others last), matrix order kept within a group."""
    rank = {c: i for i, c in enumerate(CATEGORY_ORDER)}
    return sorted(report.get("scenarios") or [], key=lambda s: rank.get(s.get("category"), len(rank)))


def race_windows_text(scenario: dict) -> str:
    """What a racing scenario's runs came to, beside its verdict: "race not
    exercised (0/20 runs)" or "race window met in 7/20 runs"; "" for a
    scenario that races no calls."""
    windows = scenario.get("race_windows")
    if not isinstance(windows, dict):
        return ""
    met, runs = windows.get("met"), windows.get("runs")
    if not met:
        return f"race not exercised ({met}/{runs} runs)"
    return f"race window met in {met}/{runs} runs"


def verdict_counts(scenarios: list[dict]) -> dict[str, int]:
    counts = {"pass": 0, "fail": 0, "error": 0, "skip": 0}
    for s in scenarios:
        verdict = str(s.get("verdict"))
        counts[verdict] = counts.get(verdict, 0) + 1
    return counts


def failed_checks(report: dict) -> Iterator[tuple[str, dict | None]]:
    """(label, failure) for every scenario, the stateful run and the coverage gate that did not pass."""
    for s in ordered_scenarios(report):
        if s.get("verdict") in ("fail", "error") or s.get("failure"):
            yield f"{s.get('id')} {s.get('title') or ''}".strip(), s.get("failure")
    stateful = report.get("stateful")
    if stateful and (stateful.get("verdict") in ("fail", "error") or stateful.get("failure")):
        causes = [stateful.get("failure"), *(stateful.get("more_failures") or [])]
        for number, failure in enumerate(causes, 1):
            yield (
                ("stateful exploration" if number == 1 else f"stateful exploration, distinct failure {number}"),
                failure,
            )
        for number, failure in enumerate(causes, 1):  # engine/causes.py: the same cause, longer
            for index, symptom in enumerate((failure or {}).get("symptoms") or [], 1):
                yield f"stateful exploration, failure {number}, symptom {index} (same cause)", symptom
    coverage = report.get("coverage") or {}
    if coverage.get("failure"):
        yield "coverage gate", coverage["failure"]


def beyond_pools_line(beyond: dict | None) -> str | None:
    """What the draws of pool-drawn arguments took beyond their pools (report.json's
    stateful.beyond_pools), in a few words; None when nothing was drawn from a pool."""
    if not beyond:
        return None
    total = sum(beyond.get(way) or 0 for way in ("pool", "near_miss", "schema"))
    return (
        f"beyond pools {beyond.get('share')} %: {beyond.get('near_miss') or 0} near misses and "
        f"{beyond.get('schema') or 0} schema values of {total} pool draws"
    )

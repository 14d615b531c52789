"""A failing stretch of a trace as a scenario a spec author can review.

The scenario replays the failing session from its start (a scenario always
starts from a reset) up to the event that broke the rule, with the answers
the trace observed as its expectations (a value the system chose, such as
an id a later call passes, saved from the answer that gave it and named
``${name}`` after it: engine/bindings.py). The last step therefore pins what
the recorded system did: the author decides whether the spec or the system
is wrong, edits that expectation to what the spec demands, and adds the
scenario to a matrix as a regression.

The scenario ``assumes`` the parameters the trace was recorded under: every
parameter a profile of the spec sets, and every one the trace declared, at
the recorded value (``recorded_assumes``). Pasted as is, it then runs only
where those values hold, and is listed as not applicable under another
profile instead of failing there.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import yaml

from ..engine.bindings import bind_recorded
from ..reporting.safe_files import write_atomic
from .format import TraceEvent, read_trace

__all__ = ["scenario_from_trace", "write_scenario_file", "recorded_assumes", "cel_literal"]


def _expect(call: dict) -> dict:
    expect: dict = {}
    if "error" in call:
        expect["error"] = {k: call["error"][k] for k in ("kind", "message") if k in call["error"]}
    else:
        expect["result"] = call.get("result")
    if "effects" in call:
        expect["effects"] = call["effects"]
    return expect


def cel_literal(value: Any) -> str:
    """``value`` as a CEL literal (strings single-quoted)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if isinstance(value, int | float):
        return repr(value)
    raise ValueError(f"no CEL literal for {value!r}")


def recorded_assumes(spec: Any, params: dict, declared: Iterable[str] = ()) -> str | None:
    """A CEL ``assumes`` holding exactly where the parameters that profiles set
    (and those in ``declared``) have the recorded values; None if there are none."""
    names = {name for profile in spec.profiles.values() for name in profile.parameters} | set(declared)
    terms = [
        f"params.{name} == {cel_literal(params[name])}"
        for name in sorted(names)
        if name in params and isinstance(params[name], str | int | float | bool | None)
    ]
    return " && ".join(terms) or None


def scenario_from_trace(
    path: str | Path,
    first_line: int,
    last_line: int,
    *,
    scenario_id: str,
    failure_message: str,
    assumes: str | None = None,
    profile: str | None = None,
) -> dict:
    """The events of ``path`` on lines first_line..last_line as a scenario;
    ``assumes`` (``recorded_assumes``) limits it to the recorded parameters of
    ``profile`` (the one the trace declared, None: the spec's defaults)."""
    headline = failure_message.splitlines()[0] if failure_message else "a failure"
    scenario = _scenario(path, first_line, last_line, scenario_id, headline)
    if assumes:
        under = f"profile {profile}" if profile else "the spec's default parameters"
        scenario["assumes"] = assumes
        scenario["not_applicable"] = f"recorded under {under}: it holds only where these parameter values do"
    # what the recorded system chose (ids, paths) saved from its answer and named in later steps
    scenario["steps"] = bind_recorded(_steps(_events_between(path, first_line, last_line)))
    return scenario


def _scenario(path: str | Path, first_line: int, last_line: int, scenario_id: str, headline: str) -> dict:
    return {
        "id": scenario_id,
        "title": f"Regression from trace {Path(path).name} line {last_line}",
        "category": "edge",
        "description": (
            f"Recorded in {Path(path).name}, lines {first_line}-{last_line}. check-trace said: "
            f"{headline}. Every expectation is the answer the trace observed; ids and paths the "
            "implementation chose are saved from the answer that gave them; review the last "
            "step (what the spec demands there) before adding this scenario to a matrix."
        ),
    }


def _events_between(path: str | Path, first_line: int, last_line: int) -> Iterator[TraceEvent]:
    """The trace's events on lines first_line..last_line, resets left out."""
    for event in read_trace(path):
        if not isinstance(event, TraceEvent) or event.line < first_line or event.kind == "reset":
            continue
        if event.line > last_line:
            break
        yield event


def _steps(events: Iterable[TraceEvent]) -> list[dict]:
    """Scenario steps: each call or group of concurrent calls, and a clock
    advance wherever the trace's time moved on."""
    steps: list[dict] = []
    now = 0
    for event in events:
        calls = event.calls if event.kind == "concurrently" else [event.data]
        if event.kind == "clock":
            at = event.data["clock_ms"]
        else:
            at = max((c.get("at_ms", c.get("start_ms", 0)) for c in calls), default=0)
        if at > now:
            steps.append({"advance_ms": at - now})
            now = at
        if event.kind == "concurrently":
            steps.append(_concurrent_step(calls))
        elif event.kind != "clock":
            steps.append({"call": event.data["call"], "args": event.data["args"], "expect": _expect(event.data)})
    return steps


def _concurrent_step(calls: list[dict]) -> dict:
    """Concurrent calls expect counts: how many answered, with which error kinds and effects."""
    kinds: dict[str, int] = {}
    effects: dict[str, int] = {}
    for c in calls:
        if "error" in c:
            kinds[c["error"]["kind"]] = kinds.get(c["error"]["kind"], 0) + 1
        for effect in c.get("effects", []):
            effects[effect["effect"]] = effects.get(effect["effect"], 0) + 1
    expect: dict[str, int | dict[str, int]] = {"ok": sum(1 for c in calls if "result" in c)}
    expect.update({"error_kinds": kinds} if kinds else {})
    expect.update({"effect_counts": effects} if effects else {})
    return {"concurrently": [{"call": c["call"], "args": c["args"]} for c in calls], "expect": expect}


_TRACE_NOTE = (
    "# Written by `conformance check-trace --to-scenario`: review it, then move the scenario into\n"
    "# a spec's scenario matrix (an `include:`d scenarios file).\n"
)


def write_scenario_file(path: str | Path, scenario: dict, note: str = _TRACE_NOTE) -> None:
    """``scenario`` as a scenarios file (a spec fragment), ``note`` (comment lines) under its schema line."""
    header = "# yaml-language-server: $schema=./lifecycle-spec-fragment.schema.json\n" + note
    write_atomic(
        path, header + yaml.safe_dump({"scenarios": [scenario]}, sort_keys=False, allow_unicode=True, width=110)
    )

"""Passive conformance: check recorded traces against a spec.

A trace is replayed through the same :class:`~conformance.engine.session.Session`
a live run uses, with a :class:`TraceAdapter` standing in for the
implementation: it answers each operation with the answer the trace
recorded. So every check of a live run applies unchanged: answers and
effects against the model's prediction (reading the implementation's own
choices, such as generated ids), response schemas, invariants, and the
linearizability check for operations that overlapped. Each session of a
trace (the part between two resets) becomes one check in the report, named
after the trace file and the line it starts on; a failure names the line
of the event that broke the rule and shows the events around it.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from statemachines import Spec, resolve_parameters, use_file_reader

from ..adapters.adapter import Adapter
from ..engine.failures import Failure
from ..engine.loaded_specs import load_spec_once
from ..engine.session import Session
from ..specs import resolve_spec
from .format import TraceError, TraceEvent, TraceHeader, read_trace

if TYPE_CHECKING:
    from ..engine.deviations import Deviations

__all__ = ["TraceAdapter", "check_traces", "TraceMismatch"]

CONTEXT_BEFORE, CONTEXT_AFTER = 3, 2
# A session keeps its steps for the failure report; for a long trace only the
# latest ones are kept (a failure shows the steps leading to it, and the
# trace's line numbers locate everything else), so memory stays flat.
KEEP_STEPS, TRIM_AT = 200, 400


class TraceMismatch(Exception):
    """The kit asked the recorded implementation something the trace does not hold."""


class TraceAdapter(Adapter):
    """Answers with what the trace recorded. The checker loads the answers of
    the next event before each step; the session's calls take them."""

    def __init__(self, header: TraceHeader):
        self.header = header
        self._answers: list[tuple[str, dict, dict]] = []
        self._clock_effects: list[dict] = []
        self._lock = threading.Lock()
        self.files: dict[str, str] = {}  # file contents the trace recorded, by path

    def read_file(self, path: str) -> str:
        """What a recorded file held; the disk is never read for a trace."""
        if path in self.files:
            return self.files[path]
        raise FileNotFoundError(2, "the trace does not record this file's content (a `files` entry)", path)

    def describe(self) -> dict:
        return {
            "name": self.header.implementation.get("name") or "recorded trace",
            "version": self.header.implementation.get("version"),
            "profile": self.header.profile,
            "parameters": self.header.parameters,
            "capabilities": {"concurrent": True},
        }

    def reset(self, now_ms: int) -> None:
        self._answers, self._clock_effects, self.files = [], [], {}

    def expect_calls(self, calls: list[dict]) -> None:
        self._answers = [
            (c["call"], c["args"], {k: c[k] for k in ("result", "error", "effects") if k in c}) for c in calls
        ]
        for c in calls:
            self.files.update(c.get("files") or {})

    def expect_clock(self, effects: list[dict], files: dict | None = None) -> None:
        self._clock_effects = list(effects)
        self.files.update(files or {})

    def set_clock(self, now_ms: int) -> list[dict]:
        effects, self._clock_effects = self._clock_effects, []
        return effects

    def call(self, operation: str, args: dict) -> dict:
        with self._lock:
            for i, (op, recorded_args, answer) in enumerate(self._answers):
                if op == operation and recorded_args == args:
                    del self._answers[i]
                    return answer
        raise TraceMismatch(
            f"the kit needed an answer to {operation}({json.dumps(args)}) that the trace does not record"
        )


class _Part:
    """One session of a trace, streamed: its events up to the next reset."""

    def __init__(self, events: Iterator[TraceEvent], first: TraceEvent):
        self._events, self._pending = events, first
        self.first_line = self.last_line = first.line
        self.count = 0
        self.next_part: TraceEvent | None = None  # the first event after the reset that ended this part
        self._walk = self._events_of_part()

    def __iter__(self) -> Iterator[TraceEvent]:
        return self._walk  # one pass: iterating again goes on where the last one stopped

    def _events_of_part(self) -> Iterator[TraceEvent]:
        event: TraceEvent | None = self._pending
        while event is not None:
            if event.kind == "reset":
                for after in self._events:  # the next part starts at the next event that is not a reset
                    if after.kind != "reset":
                        self.next_part = after
                        break
                return
            self.count += 1
            self.last_line = event.line
            yield event
            event = next(self._events, None)


def _sessions(events: Iterator[TraceEvent]) -> Iterator[_Part]:
    """Split a trace's events at its resets, without holding them in memory."""
    first = next((e for e in events if e.kind != "reset"), None)
    while first is not None:
        part = _Part(events, first)
        yield part
        for _ in part:  # a part abandoned after a failure is read to its end
            pass
        first = part.next_part


def _overlapping(events: Iterator[TraceEvent]) -> Iterator[TraceEvent]:
    """Consecutive calls whose start/end instants overlap become one group."""
    held: TraceEvent | None = None
    for event in events:
        data = event.data
        if (
            held is not None
            and event.kind == "call"
            and "start_ms" in data
            and "end_ms" in data
            and held.kind in ("call", "concurrently")
        ):
            members = held.calls if held.kind == "concurrently" else [held.data]
            if all("start_ms" in m and "end_ms" in m for m in members) and data["start_ms"] < max(
                m["end_ms"] for m in members
            ):
                held = TraceEvent("concurrently", held.line, {"concurrently": [*members, data]}, [*members, data])
                continue
        if held is not None:
            yield held
        held = event
    if held is not None:
        yield held


def _context(path: Path, line: int) -> str:
    """The trace's lines around ``line``, marked, for a failure message."""
    lo, hi = max(1, line - CONTEXT_BEFORE), line + CONTEXT_AFTER
    shown = []
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, 1):
            if number > hi:
                break
            if number >= lo:
                text = raw.decode("utf-8", "replace").rstrip("\n")
                text = text if len(text) <= 300 else text[:299] + "…"
                shown.append(f"{'>' if number == line else ' '} {number:>6} | {text}")
    return "\n".join(shown)


def _check_session(
    session: Session, adapter: TraceAdapter, events: Iterator[TraceEvent], path: Path
) -> tuple[Failure, int] | None:
    """Replay one session; the failure and the line of the event it is about, if any."""
    session.reset()
    probes = session.probe_calls()
    for event in _overlapping(events):
        data = event.data
        if event.kind == "clock":
            target = int(data["clock_ms"])
            ms = target - max(session.now, session.model.now)
            if ms < 0:
                return Failure(
                    kind="trace-error",
                    message=(
                        f"the clock goes back to {target} ms (it was at {max(session.now, session.model.now)} ms)"
                    ),
                ), event.line
            adapter.expect_clock(data.get("effects", []), data.get("files"))
            failure = session.advance(ms)
            if failure:
                return failure, event.line
            continue
        calls = event.calls if event.kind == "concurrently" else [data]
        _known_operations(session, [*calls, *(data.get("observed_after") or [])], path, event.line)
        at = max((c.get("at_ms", c.get("start_ms", 0)) for c in calls), default=0)
        ahead = at - max(session.now, session.model.now)
        if ahead > 0:  # time passed with nothing recorded: the implementation did nothing on its own
            adapter.expect_clock([])
            failure = session.advance(ahead)
            if failure:
                return failure, event.line
        if event.kind == "concurrently":
            after = data.get("observed_after") or []
            adapter.expect_calls([*calls, *after])
            session.observe_after_concurrent = [(c["call"], c["args"]) for c in after] == probes and bool(probes)
            try:
                _, failure = session.call_concurrently([(c["call"], c["args"]) for c in calls])
            finally:
                session.observe_after_concurrent = True
        else:
            adapter.expect_calls(calls)
            _, failure = session.call(data["call"], data["args"])
        if failure:
            return failure, event.line
        if len(session.trace) > TRIM_AT:
            del session.trace[:-KEEP_STEPS]
            for position, step in enumerate(session.trace):
                step["index"] = position
    return None


def _known_operations(session: Session, calls: list[dict], path: Path, line: int) -> None:
    """TraceError at the event's line for an operation the spec does not have."""
    operations = session.model.spec.operations
    for call in calls:
        name = call.get("call")
        if name not in operations:
            shown = repr(name) if len(repr(name)) <= 80 else repr(name)[:80] + "..."
            raise TraceError(
                f"{path}:{line}: operation {shown} is not an operation of spec {session.model.spec.id} "
                f"(it has: {', '.join(sorted(operations))}); fix the trace's `call` or check it against its spec"
            )


def check_traces(
    spec_path: str, traces: list[str], *, deviations: str | None = None, accepted: list | None = None
) -> tuple[Spec, dict, list[dict], list[dict], dict]:
    """Check each trace file; returns the spec, the parameters of the first
    trace, the report's check entries (one per session), problems, and the
    implementation the first trace's header names.
    Raises SpecError, SpecNotFound or TraceError for input that cannot be read."""
    spec = load_spec_once(resolve_spec(spec_path))  # one load per spec a process checks traces of
    loaded = None
    if deviations:  # accepted differences apply to recorded answers as to live ones
        from ..engine.deviations import load_deviations

        loaded = load_deviations(deviations, spec=spec)
        if accepted is not None:
            accepted.append(loaded)
    entries: list[dict] = []
    problems: list[dict] = []
    first_params: dict | None = None
    identity: dict | None = None
    for trace in traces:
        path = Path(trace)
        header, events = _open_trace(path, spec, problems)
        params = _trace_parameters(spec, header, path)
        first_params = first_params if first_params is not None else params
        identity = identity or _identity(header)
        entries += _check_trace(spec, params, header, events, path, loaded)
    return spec, first_params or {}, entries, problems, identity or {}


def _open_trace(path: Path, spec: Spec, problems: list[dict]) -> tuple[TraceHeader, Iterator[TraceEvent]]:
    """The trace's header, checked against the spec (a version mismatch is a
    problem, another spec an error), and its events."""
    events = read_trace(path)
    header = next(events)
    assert isinstance(header, TraceHeader)  # read_trace yields the header first, then events only
    if header.spec_id != spec.id:
        raise TraceError(f"{path}:{header.line}: the trace is of spec {header.spec_id!r}, not {spec.id!r}")
    if header.spec_version and header.spec_version != spec.version:
        problems.append(
            {
                "kind": "trace-warning",
                "where": f"{path}:{header.line}",
                "message": f"the trace was recorded for {spec.id} {header.spec_version}; "
                f"checking it against {spec.version}",
            }
        )
    return header, (e for e in events if isinstance(e, TraceEvent))


def _trace_parameters(spec: Spec, header: TraceHeader, path: Path) -> dict:
    params, wrong = resolve_parameters(spec, header.profile, header.parameters)
    if wrong:
        raise TraceError(
            f"{path}:{header.line}: the header's profile or parameters do not fit spec {spec.id}: " + "; ".join(wrong)
        )
    return params


def _identity(header: TraceHeader) -> dict:
    """The implementation a trace's header names, as the report shows it."""
    return {
        "name": header.implementation.get("name"),
        "version": header.implementation.get("version"),
        "profile": header.profile,
        "parameters": header.parameters,
    }


def _check_trace(
    spec: Spec,
    params: dict,
    header: TraceHeader,
    events: Iterator[TraceEvent],
    path: Path,
    loaded: Deviations | None,
) -> list[dict]:
    """One check entry per session of the trace at ``path``."""
    adapter = TraceAdapter(header)
    session = Session(spec, params, lambda: adapter)
    session.deviations = loaded
    previous_reader = use_file_reader(adapter.read_file)
    try:
        return [_check_part(session, adapter, part, number, path) for number, part in enumerate(_sessions(events), 1)]
    finally:
        use_file_reader(previous_reader)
        session.close()


def _check_part(session: Session, adapter: TraceAdapter, part: _Part, number: int, path: Path) -> dict:
    started = time.perf_counter()
    try:
        found = _check_session(session, adapter, iter(part), path)
    except TraceMismatch as exc:
        found = Failure(kind="trace-error", message=str(exc)), part.last_line
    if found is not None:
        for _ in part:  # count the rest of the session for its title
            pass
    first, last = part.first_line, part.last_line
    entry: dict = {
        "id": f"{path.name}:{first}",
        "category": "trace",
        "title": f"{path.name} session {number} (lines {first}-{last}, {part.count} events)",
        "_source": (str(path), first, None if found is None else found[1]),
    }
    if found is None:
        entry.update(verdict="pass", failure=None)
    else:
        failure, line = found
        if failure.kind == "implementation-error" and "TraceMismatch" in failure.message:
            failure.kind = "trace-error"  # the kit asked for more than the trace holds, not a bug
        failure.message = f"{path}:{line}: {failure.message}\n{_context(path, line)}"
        entry.update(verdict="error" if failure.kind == "trace-error" else "fail", failure=failure.to_dict())
    entry["duration_s"] = round(time.perf_counter() - started, 4)
    return entry

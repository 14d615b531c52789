"""Running the scenario matrix: every step in lockstep with the model, and
every written expectation checked against what the implementation did."""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from statemachines import (
    AdvanceStep,
    CallStep,
    ConcurrentStep,
    ExpressionError,
    RepeatStep,
    Scenario,
    first_difference,
    render,
)
from statemachines.load.source import list_index
from statemachines.tools.dryrun import scenario_operations

from ..errors import AdapterLoadError
from .bindings import answered, describe_answer
from .compare import without_path
from .failures import DATA_ERRORS, INPUT_REFUSED, NOT_REPRODUCING, Failure
from .interrupts import checkpoint
from .session import Session

__all__ = [
    "NOT_APPLICABLE",
    "RACE_RUNS",
    "RaceWindowRuns",
    "ScenarioOutcome",
    "race_coverage_key",
    "not_applicable_ids",
    "not_applicable_reason",
    "not_offered_reason",
    "race_runs_of",
    "scenario_applicability",
    "run_scenario",
    "run_steps",
    "scenario_cost",
]

# A scenario written for other parameters (another profile): not a skip, and
# not a test item; reports count these on one line and list them in report.json.
NOT_APPLICABLE = "not-applicable"


def not_applicable_reason(spec, scenario: Scenario, params: dict) -> str | None:
    """Why these parameters make the scenario inapplicable, in words, or None."""
    if scenario.assumes is not None and not scenario.assumes.evaluate_bool(
        {"params": params}, role="a scenario's `assumes`"
    ):
        names = sorted(set(re.findall(r"params\.(\w+)", scenario.assumes.source)))
        here = ", ".join(f"{n} = {json.dumps(params.get(n))}" for n in names if n in params)
        because = f"it assumes {scenario.assumes.source}" + (f"; here {here}" if here else "")
        absent = scenario_operations(scenario.steps) - spec.offered_operations(params)
        # `not_applicable` is written for parameters that offer the scenario's operations (its own
        # surface); for another surface it would name the wrong cause and an equivalent that does not run.
        why = "" if absent else getattr(scenario, "not_applicable", "")
        return f"{why} ({because})" if why else because
    absent = sorted(scenario_operations(scenario.steps) - spec.offered_operations(params))
    if absent:
        return f"it calls {', '.join(absent)}, which these parameters do not offer"
    return None


def not_offered_reason(unimplemented: dict[str, str], operations) -> str | None:
    """Why a scenario calling ``operations`` is not applicable to an
    implementation that answered ``not_implemented`` for some of them
    (``Session.unimplemented``: operation -> its message), or None."""
    absent = sorted(set(operations) & set(unimplemented))
    if not absent:
        return None
    said = "; ".join(f"{op}: {unimplemented[op]}" for op in absent if unimplemented[op])
    return (
        f"it calls {', '.join(absent)}, which the implementation does not offer "
        f"(it answers not_implemented{': ' + said if said else ''})"
    )


def scenario_applicability(spec, scenario: Scenario, params: dict, capabilities: dict) -> tuple[str, str | None]:
    """Whether ``scenario`` runs here: ("run", None), (NOT_APPLICABLE, why:
    written for other parameters) or ("skip", why: it needs a capability the
    implementation does not declare). Applicability is decided first, so a
    scenario of another profile is never a skip. The one decision both front
    doors use (engine/runner.py through ``run_scenario``, the pytest plugin's
    items); raises ExpressionError when its ``assumes`` cannot be evaluated."""
    reason = not_applicable_reason(spec, scenario, params)
    if reason:
        return NOT_APPLICABLE, reason
    missing = [r for r in getattr(scenario, "requires", ()) or () if not capabilities.get(r)]
    if missing:
        return "skip", (
            f"needs the {', '.join(missing)} capability, which the implementation does not declare "
            f"(describe() -> capabilities)"
        )
    return "run", None


def not_applicable_ids(spec, params: dict, capabilities: dict) -> list[str]:
    """The ids of the spec's scenarios that do not apply here (``scenario_applicability``);
    one whose ``assumes`` cannot be evaluated applies (its run reports the spec's error)."""
    out = []
    for scenario in spec.scenarios:
        try:
            if scenario_applicability(spec, scenario, params, capabilities)[0] == NOT_APPLICABLE:
                out.append(scenario.id)
        except ExpressionError:
            continue
    return out


@dataclass
class ScenarioOutcome:
    scenario: Scenario
    verdict: str  # pass | fail | error | skip | not-applicable
    failure: Failure | None
    duration_s: float
    note: str | None = None
    # A scenario that races calls: in how many of its runs a concurrent group
    # met the race window (crew.StartLine.overlapped), of how many runs.
    race_windows: RaceWindowRuns | None = None

    def to_dict(self) -> dict:
        entry = {
            "id": self.scenario.id,
            "title": self.scenario.title,
            "category": self.scenario.category,
            "verdict": self.verdict,
            "duration_s": round(self.duration_s, 4),
            "failure": self.failure.to_dict() if self.failure else None,
        }
        if self.race_windows is not None:
            entry["race_windows"] = {"met": self.race_windows.met, "runs": self.race_windows.runs}
        return entry


@dataclass
class RaceWindowRuns:
    """Runs of a racing scenario, and those in which one of its concurrent
    groups met the race window."""

    runs: int = 0
    met: int = 0


def race_coverage_key(scenario_id: str) -> str:
    """The key of a racing scenario in the coverage's ``races`` counts (its
    count: the runs that met the race window; 0 when none did)."""
    return f"scenario {scenario_id}"


class _Stop(Exception):
    def __init__(self, failure: Failure):
        self.failure = failure


class _Avoided(Exception):
    """A step would send a call that an accepted deviation says not to send."""

    def __init__(self, deviation, operation: str, where: str):
        self.deviation, self.operation, self.where = deviation, operation, where


# How many times a scenario that races calls is run when it does not say
# (`race_runs:`): one passing run of a lost-update race proves nothing.
RACE_RUNS = 20


def _races_calls(scenario: Scenario) -> bool:
    return any(isinstance(step, ConcurrentStep) for step in _flatten(scenario.steps))


def race_runs_of(scenario: Scenario, default: int = RACE_RUNS) -> int:
    """Runs of ``scenario``: 1 without concurrent steps, else its own race_runs or ``default``."""
    if not _races_calls(scenario):
        return 1
    return max(1, int(getattr(scenario, "race_runs", None) or default))


def scenario_cost(spec, scenario: Scenario, params: dict, capabilities: dict, *, race_runs: int = RACE_RUNS) -> int:
    """About how long ``scenario`` takes to run, in calls: each call 1, a
    concurrent group 1 more than its calls (its threads and the check of its
    outcomes cost about that much), a repeat its steps times its count; all
    of it once per run (``race_runs_of``). 0 for a scenario that will not run
    (a capability it needs is not declared, or it does not apply to these
    parameters: what ``run_scenario`` checks first). Used to split the matrix
    into parts that take about as long (engine/shards.py)."""
    try:
        if scenario_applicability(spec, scenario, params, capabilities)[0] != "run":
            return 0
    except ExpressionError:
        return 1  # it fails at once (the spec's error)
    env = {"params": params}

    def calls(steps: list) -> int:
        total = 0
        for step in steps:
            if isinstance(step, CallStep):
                total += 1
            elif isinstance(step, ConcurrentStep):
                total += 1 + len(step.calls)
            elif isinstance(step, RepeatStep):
                try:
                    times = step.times if isinstance(step.times, int) else int(render(step.times, env))
                except (ExpressionError, TypeError, ValueError):
                    times = 1  # it depends on values saved while it runs
                total += max(0, times) * calls(step.steps)
        return total

    return race_runs_of(scenario, race_runs) * (1 + calls(scenario.steps))


def run_scenario(
    session: Session, scenario: Scenario, capabilities: dict, *, race_runs: int = RACE_RUNS
) -> ScenarioOutcome:
    """Run one scenario; one with concurrent steps runs ``race_runs`` times
    (or its own ``race_runs:``) and fails on the first run that fails."""
    started = time.perf_counter()
    try:
        verdict, reason = scenario_applicability(session.spec, scenario, session.params, capabilities)
    except ExpressionError as exc:  # its `assumes` failed or is not a boolean: the spec's error
        failure = Failure(kind="spec-error", message=f"scenario {scenario.id}: {exc}", steps=[])
        return ScenarioOutcome(scenario, "error", failure, time.perf_counter() - started)
    if verdict != "run":
        return ScenarioOutcome(scenario, verdict, None, 0.0, reason)
    absent = not_offered_reason(getattr(session, "unimplemented", {}), scenario_operations(scenario.steps))
    if absent:  # an operation it calls answered not_implemented before: not run again
        return ScenarioOutcome(scenario, NOT_APPLICABLE, None, 0.0, absent)
    runs, run = race_runs_of(scenario, race_runs), 0
    windows = RaceWindowRuns() if _races_calls(scenario) else None
    unreached: list[_Stop] = []  # runs of a racing scenario whose race did not reach the recorded state
    try:
        for run in range(1, runs + 1):
            if run > 1:
                checkpoint()
            missed = _run_once(session, scenario, run, runs, windows)
            if missed is not None:
                unreached.append(_Stop(missed))
        if len(unreached) == runs:
            run = 0
            raise unreached[0]
    except _Avoided as avoided:
        d = avoided.deviation
        note = (
            f"deviation {d.id} avoids this input: {avoided.operation} at {avoided.where} ({' '.join(d.reason.split())})"
        )
        return ScenarioOutcome(scenario, "skip", None, time.perf_counter() - started, note)
    except _Stop as stop:
        if stop.failure.kind == NOT_IMPLEMENTED_KIND:  # the operation is not offered: no verdict on it
            absent = not_offered_reason(session.unimplemented, [stop.failure.operation or ""])
            why = absent or stop.failure.message.splitlines()[0]
            return ScenarioOutcome(scenario, NOT_APPLICABLE, None, time.perf_counter() - started, why)
        failure = _confirm(session, scenario, stop.failure)
        failure.message = f"scenario {scenario.id} ({scenario.title}): {failure.message}"
        if runs > 1 and not run:
            failure.message += f"\n(in none of its {runs} runs did its races reach the recorded state)"
        elif runs > 1:
            failure.message += (
                f"\n(in run {run} of {runs}: this scenario races calls, so it runs {runs} times; "
                f"{'it passed the runs before' if run > 1 else 'the first run failed'})"
            )
        # the spec or the input, not the implementation; or a replay that did not reach its state
        verdict = "error" if failure.kind in DATA_ERRORS or failure.kind == NOT_REPRODUCING else "fail"
        _count_coverage(session, scenario, windows)
        return ScenarioOutcome(scenario, verdict, failure, time.perf_counter() - started, race_windows=windows)
    except AdapterLoadError as exc:
        failure = Failure(
            kind="implementation-error", message=f"scenario {scenario.id}: {exc}", steps=list(session.trace)
        )
        return ScenarioOutcome(scenario, "error", failure, time.perf_counter() - started)
    except ExpressionError as exc:
        failure = Failure(kind="spec-error", message=f"scenario {scenario.id}: {exc}", steps=list(session.trace))
        return ScenarioOutcome(scenario, "error", failure, time.perf_counter() - started)
    finally:
        session.head_start = -1
    _count_coverage(session, scenario, windows)
    if windows is not None and windows.met == 0:
        return ScenarioOutcome(
            scenario, "skip", None, time.perf_counter() - started, _not_exercised(windows), race_windows=windows
        )
    passed = None
    if windows is not None:
        ran = f"all {runs} runs" if runs > 1 else "its one run"
        passed = f"passed {ran} (it races calls; the race window was met in {windows.met} of {runs})"
    if unreached:
        met = f"; the race window was met in {windows.met} of {runs}" if windows is not None else ""
        passed = (
            f"passed {runs - len(unreached)} of {runs} runs (it races calls{met}); in the other "
            f"{len(unreached)} its races did not reach the recorded state"
        )
    return ScenarioOutcome(scenario, "pass", None, time.perf_counter() - started, passed, race_windows=windows)


def _count_run(windows: RaceWindowRuns | None, session: Session, before: int) -> None:
    """One run of a racing scenario counted: it met the race window when one
    of its concurrent groups did."""
    if windows is None:
        return
    windows.runs += 1
    windows.met += int(session.race_windows.met > before)


def _count_coverage(session: Session, scenario: Scenario, windows: RaceWindowRuns | None) -> None:
    """A racing scenario that ran is an item of the ``races`` coverage,
    covered when a run met the race window."""
    if windows is not None and windows.runs:
        session.model.coverage.hit("races", race_coverage_key(scenario.id), windows.met)


def _not_exercised(windows: RaceWindowRuns) -> str:
    runs = f"{windows.runs} run" + ("s" if windows.runs != 1 else "")
    return (
        f"race not exercised: in none of its {runs} were the racing calls in flight together "
        "(each answered before the next one went), so no race was tested; "
        "on a busy or one-core machine, raise --race-runs or give the implementation more cores"
    )


# The failure kind of an answer of error kind not_implemented (engine/session.py).
NOT_IMPLEMENTED_KIND = "not-implemented"


def _run_once(
    session: Session, scenario: Scenario, run: int, runs: int, windows: RaceWindowRuns | None = None
) -> Failure | None:
    """One run of ``scenario`` from a reset, counted in ``windows`` (a racing
    scenario's); the failure when a racing scenario's run did not reach a
    recorded state (``NOT_REPRODUCING``: its race went another way, the next
    run may not), else None. Any other failure stops the scenario (``_Stop``)."""
    session.reset()
    # Each run lets another of a group's calls lead (it tends to run first):
    # a check-then-act window opens only when the checking call leads.
    session.head_start = -run
    before = session.race_windows.met
    try:
        run_steps(session, scenario.steps, {"params": session.params})
    except _Stop as stop:
        if runs == 1 or stop.failure.kind != NOT_REPRODUCING:
            raise
        return stop.failure
    finally:
        _count_run(windows, session, before)
    return None


# Failures that are evidence by themselves: a race that broke an invariant
# need not recur to be real.
_DEFINITIVE = {"linearizability", "invariant", "timeout", "spec-error", INPUT_REFUSED, NOT_REPRODUCING}


def _confirm(session: Session, scenario: Scenario, failure: Failure) -> Failure:
    """Replay a failed scenario once. It is nondeterministic only when the
    implementation's answers themselves differ between the two runs (then the
    failure shows both answers side by side); the same answers always mean
    the first failure stands."""
    if failure.kind in _DEFINITIVE or any(isinstance(s, ConcurrentStep) for s in _flatten(scenario.steps)):
        return failure
    first_trace = failure.steps
    try:
        session.reset()
        run_steps(session, scenario.steps, {"params": session.params})
        again = None
    except _Stop as stop:
        again = stop.failure
    except Exception:
        return failure
    if again is not None and (again.kind, again.step, again.path) == (failure.kind, failure.step, failure.path):
        return failure
    replay_trace = session.trace if again is None else again.steps
    last = len(first_trace) - 1 if failure.step is None else failure.step
    if again is not None and again.step is not None:
        last = min(last, again.step)
    differing = _differing_answers(first_trace, replay_trace, last)
    if not differing:
        return failure  # the same answers: whatever made the replay end otherwise, the implementation did not
    where = (
        "passed"
        if again is None
        else f"failed differently ({again.kind} at step {again.step}: {again.message.splitlines()[0]})"
    )
    shown = next((i for i in differing if i == last), differing[-1])
    first, second = _answer_at(first_trace, shown), _answer_at(replay_trace, shown)
    steps = ", ".join(map(str, differing[:10])) + (", ..." if len(differing) > 10 else "")
    return Failure(
        kind="nondeterminism",
        step=failure.step,
        operation=failure.operation,
        args=failure.args,
        expected=failure.expected,
        observed=failure.observed,
        path=failure.path,
        steps=first_trace,
        message=(
            f"the implementation answered differently when the same steps were replayed "
            f"(answers differ at step(s) {steps}): the first run failed ({failure.kind}: "
            f"{failure.message.splitlines()[0]}), the replay {where}\n"
            f"step {shown}, {_label(first_trace, shown)}, differs at {_differs_at(first, second)}:\n"
            f"  first run: {_short_json(first)}\n"
            f"  replay:    {_short_json(second)}"
        ),
    )


def _answers(trace: list) -> dict:
    return {step.get("index"): step for step in trace if isinstance(step, dict)}


def _answer_at(trace: list, index: int) -> Any:
    return _answers(trace).get(index, {}).get("observed")


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=repr)


def _differing_answers(first: list, replay: list, last: int) -> list[int]:
    """The steps up to ``last`` whose answers (or calls) differ between two runs."""
    a, b = _answers(first), _answers(replay)
    out = []
    for index in sorted(i for i in set(a) | set(b) if isinstance(i, int) and i <= last):
        x, y = a.get(index), b.get(index)
        if x is None or y is None or _canonical(x) != _canonical(y):
            out.append(index)
    return out


def _label(trace: list, index: int) -> str:
    step = _answers(trace).get(index) or {}
    if "advance_ms" in step:
        return f"the clock moved +{step['advance_ms']} ms"
    return f"{step.get('operation', '?')}({_short_json(step.get('args'), 120)})"


def _differs_at(first: Any, second: Any) -> str:
    diff = first_difference(first, second) or first_difference(second, first)
    return diff.path if diff is not None else "(the value)"


def _short_json(value: Any, limit: int = 400) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=repr)
    return text if len(text) <= limit else text[: limit - 1] + f"… ({len(text)} chars)"


def _flatten(steps: list):
    for step in steps:
        yield step
        if isinstance(step, RepeatStep):
            yield from _flatten(step.steps)


def run_steps(session: Session, steps: list, env: dict) -> None:
    for step in steps:
        if isinstance(step, CallStep):
            _call(session, step, env)
        elif isinstance(step, AdvanceStep):
            ms = step.ms if isinstance(step.ms, int) else int(render(step.ms, env))
            failure = session.advance(ms)
            if failure:
                raise _Stop(failure)
        elif isinstance(step, RepeatStep):
            times = step.times if isinstance(step.times, int) else int(render(step.times, env))
            for i in range(times):
                if step.var:
                    env[step.var] = i
                run_steps(session, step.steps, env)
        elif isinstance(step, ConcurrentStep):
            _concurrently(session, step, env)


def _call(session: Session, step: CallStep, env: dict) -> None:
    args = render(step.args, env)
    deviation = session.avoided(step.operation, args)
    if deviation is not None:
        raise _Avoided(deviation, step.operation, step.where)
    response, failure = session.call(step.operation, args)
    if failure:
        if failure.kind == INPUT_REFUSED:  # the step of the file that gave the input
            failure.message = f"{step.where}: {failure.message}"
        raise _Stop(failure)
    assert response is not None  # a call answers None only with a failure
    _check_answered(session, step, response)
    if step.expect:
        expect = render(step.expect, env)
        problem = _unmet(
            expect, response, session.acceptor(step.operation, args, len(session.trace) - 1, "expectation")
        )
        if problem:
            path, expected, observed, reason = problem
            raise _Stop(
                Failure(
                    kind="expectation",
                    operation=step.operation,
                    args=args,
                    step=len(session.trace) - 1,
                    message=(
                        f"{step.operation} at {step.where}: {path}: {reason} (the spec's model agreed with the "
                        f"implementation here, so the scenario's written expectation contradicts the model)"
                    ),
                    expected=expected,
                    observed=observed,
                    path=path,
                    steps=list(session.trace),
                )
            )
    for name, target in step.save.items():
        env[name] = _pick(response, target, step)


def _check_answered(session: Session, step: CallStep, response: dict) -> None:
    """A call that records the kind of answer it got (``answered``: a
    counterexample file's calls, engine/bindings.py) and now, with the model
    agreeing, answers in another kind: the run did not reach the recorded
    state, and whatever follows proves nothing (``NOT_REPRODUCING``)."""
    if step.answered is None:
        return
    now = answered(response)
    if now == step.answered:
        return
    number = len(session.trace)
    raise _Stop(
        Failure(
            kind=NOT_REPRODUCING,
            operation=step.operation,
            args=session.trace[-1].get("args") if session.trace else None,
            step=number - 1,
            expected=step.answered,
            observed=now,
            message=(
                f"the replay did not reach the failure's state: step {number} ({step.operation} at {step.where}) "
                f"answered {describe_answer(now)} where the recording had {describe_answer(step.answered)}, and "
                f"the spec allows both here. A value the implementation chose may not be bound to the step that "
                f"chose it (a file written by an older kit names the recorded values), or the implementation "
                f"now takes another path to this step; the failure was not checked, so this is not a pass"
            ),
            steps=list(session.trace),
        )
    )


def _unmet(expect: dict, response: dict, accept=None):
    """The first written expectation the response does not meet and no
    accepted deviation covers, as (path, expected, observed, reason), or None."""
    problem = _first_unmet(expect, response)
    while problem is not None and accept is not None and accept(problem[0], problem[1], problem[2]):
        if problem[0] in ("error", "result"):  # the whole answer differs, and that is accepted
            return None
        expect = without_path(expect, problem[0])
        problem = _first_unmet(expect, response)
    return problem


def _first_unmet(expect: dict, response: dict):
    if "error" in expect:
        if "error" not in response:
            # paths as the model's comparison names them: where the answer went the other way
            return (
                "result",
                {"error": expect["error"]},
                response.get("result"),
                f"expected error {expect['error'].get('kind')}",
            )
        diff = first_difference(expect["error"], response["error"], "error")
        if diff:
            return (diff.path, diff.expected, diff.observed, diff.reason)
    if "result" in expect:
        if "result" not in response:
            return ("error", {"result": expect["result"]}, response.get("error"), "expected a result, got an error")
        diff = first_difference(expect["result"], response["result"], "result")
        if diff:
            return (diff.path, diff.expected, diff.observed, diff.reason)
    if "effects" in expect:
        diff = first_difference(expect["effects"], response.get("effects", []), "effects")
        if diff:
            return (diff.path, diff.expected, diff.observed, diff.reason)
    return None


def _pick(response: dict | None, target: str, step: CallStep) -> Any:
    node: Any = response
    for part in target.split("."):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and list_index(part, len(node)) is not None:
            node = node[int(part)]
        else:
            raise _Stop(
                Failure(
                    kind="expectation",
                    operation=step.operation,
                    message=f"{step.operation} at {step.where}: cannot save {target}: the response has no such value",
                    observed=response,
                )
            )
    return node


def _concurrently(session: Session, step: ConcurrentStep, env: dict) -> None:
    calls = [(c.operation, render(c.args, env)) for c in step.calls]
    for operation, args in calls:
        deviation = session.avoided(operation, args)
        if deviation is not None:
            raise _Avoided(deviation, operation, step.where)
    responses, failure = session.call_concurrently(calls)
    if failure:
        raise _Stop(failure)
    expect = step.expect or {}
    problems = _group_problems(expect, responses)
    if problems:
        raise _Stop(
            Failure(
                kind="expectation",
                step=len(session.trace) - 1,
                message=f"concurrent calls at {step.where}: " + "; ".join(problems),
                expected=expect,
                observed=responses,
                steps=list(session.trace),
            )
        )
    for c, response in zip(step.calls, responses):
        for name, target in c.save.items():
            env[name] = _pick(response, target, c)


def _group_problems(expect: dict, responses: list[dict | None]) -> list[str]:
    """What a concurrent group's answers do not meet of its written
    expectation: how many calls succeed, how many fail with each error kind,
    how many effects of each name they report in all."""
    ok = sum(1 for r in responses if r and "result" in r)
    kinds = Counter(r["error"]["kind"] for r in responses if r and "error" in r)
    effects = Counter(e["effect"] for r in responses if r for e in r.get("effects", []))
    problems = []
    if "ok" in expect and ok != expect["ok"]:
        problems.append(f"expected {expect['ok']} call(s) to succeed, {ok} did")
    for kind, count in (expect.get("error_kinds") or {}).items():
        if kinds.get(kind, 0) != count:
            problems.append(f"expected {count} error(s) {kind}, got {kinds.get(kind, 0)}")
    for name, count in (expect.get("effect_counts") or {}).items():
        if effects.get(name, 0) != count:
            problems.append(f"expected {count} {name} effect(s) in total, got {effects.get(name, 0)}")
    return problems

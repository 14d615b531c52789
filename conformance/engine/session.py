"""A session drives one implementation in lockstep with the spec's model.

Every call goes to the implementation first (with a timeout), its answer is
checked for shape and against the operation's schemas, then the model
predicts what the answer must be and the two are compared. Everything is
recorded in a trace that becomes a failure's step list or a counterexample.

An answer is JSON when ``adapters.json_values`` says so in one walk (NaN,
Infinity, integer keys, integers past 64 bits, lone surrogates and deep
nesting refused; only a refused answer is walked again to name the path); it
fits the operation's schemas by ``answer_schemas`` (common keywords compiled
to closures, the rest and every message ``jsonschema``'s). Invariants are the
model's own and observed ones ("one injection per job"). A concurrent group's
calls run on ``crew`` threads from one start line; the answers (and a probe
right after) must match some sequential order (``linearize``). The session
goes on from the first matching order and keeps the group (``RaceOutcome``);
a later step the model disagrees with first tries those groups' other end
states, newest first (``Session._reconsider``), so an order no answer told
apart yet is not reported as a failure. Every call into the implementation
(constructor, ``describe``, ``reset``, ``set_clock``, ``call``, ``close``)
runs under the timeout and catches ``BaseException``: what comes out is the
implementation's failure with its kind, and the run goes on.
"""

from __future__ import annotations

import copy
import json
import queue
import re
import signal
import threading
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, NamedTuple

from statemachines import ExpressionError, Model, ObservationError, Prediction, Spec

from ..adapters.adapter import Adapter
from ..adapters.json_values import is_plain_answer, is_plain_json, json_problem, json_safe
from ..errors import AdapterLoadError, InputRefused
from .answer_schemas import AnswerSchema
from .budgets import SlowCalls
from .compare import compare, observation_problem
from .crew import Crew, RaceWindows, StartLine, fine_switching, launch_order
from .deviations import Deviations
from .failures import INPUT_REFUSED, NOT_IMPLEMENTED, Failure
from .interrupts import checkpoint, stops_the_run
from .linearize import MAX_LATER_STEPS, MAX_OPEN_RACES, RaceOutcome, linearize, other_end_states

# The examples that met a masked failure in the fewest steps, kept per mask (Session.mask_hits).
MASK_HITS = 3

__all__ = ["Session", "compare", "check_shape", "describe_exception", "DEFAULT_TIMEOUT_S", "launch_order"]

DEFAULT_TIMEOUT_S = 10.0
# close() may take longer than an operation (a program saying bye and exiting,
# workers joined): it gets the timeout, but never less than this.
CLOSE_TIMEOUT_FLOOR_S = 5.0
# Values of the probe's pool beyond the pool's own the probe reads (each is a probe call more).
_PROBE_EXTRA_MAX = 8


class _CallTimeout(BaseException):
    """Raised inside a hung call by the interval timer. A BaseException so that an
    implementation's own ``except Exception`` cannot swallow it."""


def _alarm(signum, frame):
    raise _CallTimeout()


# Every call on the main thread swaps the SIGALRM handler in and out. The
# ``signal`` module's own ``signal()`` wraps the C function in conversions
# to and from enums that cost more than the swap itself; the C function
# takes and returns the same handlers as plain values.
try:
    from _signal import signal as _set_handler
except ImportError:  # pragma: no cover - an interpreter without the C module
    _set_handler = signal.signal
_SIGALRM = int(getattr(signal, "SIGALRM", 14))
_ITIMER_REAL = getattr(signal, "ITIMER_REAL", 0)


def _no_timer(which: int, seconds: float) -> None:
    """Stands for ``signal.setitimer`` where there is none; never called there
    (``_Worker`` then runs every call on its thread)."""
    raise OSError("this interpreter has no signal.setitimer")


_set_timer = getattr(signal, "setitimer", _no_timer)


class _Passed(NamedTuple):
    """A probe answer that passed: the model's read token then, what the
    prediction read, the answer's text, and what the prediction counted."""

    token: tuple
    reads: tuple
    answer: str
    hits: Any


class _Worker:
    """Runs adapter calls with a timeout. On the main thread a call runs
    directly under an interval timer (cheap); elsewhere it runs on a daemon
    thread that is abandoned if the implementation hangs."""

    def __init__(self) -> None:
        self._direct = hasattr(signal, "setitimer")
        self._start()

    def _start(self) -> None:
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        threading.Thread(target=self._loop, args=(self._queue,), daemon=True, name="adapter-call").start()

    @staticmethod
    def _loop(jobs: queue.SimpleQueue) -> None:
        while True:
            fn, box, done = jobs.get()
            if fn is None:
                return
            try:
                box.append((True, fn()))
            except BaseException as exc:
                box.append((False, exc))
            done.set()

    def run(self, fn: Callable[[], Any], timeout: float) -> Any:
        if self._direct and threading.current_thread() is threading.main_thread():
            previous = _set_handler(_SIGALRM, _alarm)
            _set_timer(_ITIMER_REAL, timeout)
            try:
                return fn()
            finally:
                _set_timer(_ITIMER_REAL, 0)
                _set_handler(_SIGALRM, previous)
        box: list = []
        done = threading.Event()
        self._queue.put((fn, box, done))
        if not done.wait(timeout):
            self._start()  # the old thread stays stuck in the implementation; leave it
            raise _CallTimeout()
        ok, value = box[0]
        if ok:
            return value
        raise value

    def on_main_thread(self) -> bool:
        """Whether calls run on the main thread (the only one a signal interrupts)."""
        return self._direct and threading.current_thread() is threading.main_thread()

    def close(self) -> None:
        self._queue.put((None, None, None))


def describe_exception(exc: BaseException) -> str:
    """``Type: message`` for an exception raised by an implementation, even one
    whose own ``__str__`` fails."""
    try:
        text = str(exc)
    except Exception:
        text = "<its message could not be printed>"
    said = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    if isinstance(exc, KeyboardInterrupt):
        said += " (the implementation's own: no Ctrl-C or signal reached the kit)"
    elif isinstance(exc, SystemExit):
        said += " (the implementation tried to end the process; the kit carries on)"
    return said


def check_shape(response: Any) -> str | None:
    """Why a response does not have the protocol's shape or holds a value
    JSON cannot carry (with its path), or None."""
    return _shape(response)[0]


def _shape(response: Any, *, plain: bool = False) -> tuple[str | None, str | None, str | None]:
    """(why the response is malformed or None, its canonical JSON text when
    it is not and that text was needed, the JSON path of a value JSON cannot
    carry). ``plain``: ``is_plain_answer`` passed it already."""
    problem = _structure(response)
    if problem:
        return problem, None, None
    # The one walk every answer gets (no serialisation): plain JSON values
    # only, strings that encode, nesting within bounds.
    if plain or is_plain_answer(response):
        return None, None, None
    # Something else is in it: serialise it (allow_nan=False refuses NaN and
    # Infinity; the walk (is_plain_json) finds what json.dumps lets through:
    # integer keys become strings, integers of any size), and find the value
    # at fault with its path.
    try:
        text = json.dumps(response, sort_keys=True, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        text = None
    if text is not None and is_plain_json(response) and (text.isascii() or _encodes(text)):
        return None, text, None
    found = json_problem(response)
    if found is None:
        if text is not None:
            return None, text, None  # e.g. an enum member: JSON writes its value
        found = ("(the answer)", "is not JSON-compatible")
    path, what = found
    return f"{path} {what}", None, path


def _json_path(parts: Any) -> str:
    """A schema error's path below its value, as the kit prints paths (``.jobs[3].status``)."""
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts)


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
        return True
    except UnicodeEncodeError:  # a lone surrogate
        return False


def _structure(response: Any) -> str | None:
    if not isinstance(response, dict):
        return f"a response must be an object, got {type(response).__name__}"
    has_result, has_error = "result" in response, "error" in response
    if has_result == has_error:
        return "a response must have exactly one of `result` and `error`"
    if has_error:
        err = response["error"]
        if not isinstance(err, dict) or not isinstance(err.get("kind"), str) or not isinstance(err.get("message"), str):
            return "`error` must be {\"kind\": string, \"message\": string}"
    effects = response.get("effects", [])
    if not isinstance(effects, list) or not all(
        isinstance(e, dict) and isinstance(e.get("effect"), str) for e in effects
    ):
        return "`effects` must be a list of objects, each with an `effect` name"
    return None


class Session:
    """One implementation instance and one model, stepped together."""

    def __init__(
        self, spec: Spec, params: dict, factory: Callable[[], Adapter], *, timeout_s: float = DEFAULT_TIMEOUT_S
    ):
        self.spec, self.params, self.factory, self.timeout_s = spec, params, factory, timeout_s
        self.model = Model(spec, params)
        self.worker = _Worker()
        self.crew = Crew()  # the threads of concurrent groups
        # Which call of a concurrent group is started last, and so usually runs first (-1: the
        # last call): a replay that retries a race (engine/reduce.py) gives each call the lead in turn.
        self.head_start = -1
        # Whether the calls of concurrent groups met the race window (StartLine.overlapped):
        # the last group's, and how many of all groups did (counts, never reset).
        self.last_race_met = False
        self.race_windows = RaceWindows()
        self._probed_revision: int | None = None  # the model's revision the last passing probe saw
        self._probe_calls: tuple | None = None  # (the parameters, the extra values, the probe calls they give)
        # Values of the probe's pool that calls passed although the pool does not list
        # them (a replay's reduction renames a thread "t2" to "a"): the probe reads them too.
        self._probe_extra: list = []
        self._probe_pool_args = _pool_arguments(spec)
        probe = spec.exploration.probe or {}
        self._probe_pool = spec.exploration.pools.get(probe.get("for_pool") or "", [])  # the values it lists
        # Per probe call (operation, arguments' text): what passed last time (Session._probe_one).
        self._probe_passed: dict[tuple[str, str], _Passed] = {}
        self._plain_answer: Any = None  # the answer call() just found plain (check_response need not walk it again)
        self.faults: list[tuple[str, str]] = []  # close() failures: (failure kind, message)
        # Operations the implementation does not offer: each answered not_implemented once
        # (operation -> its message). Never cleared: scenarios calling them are not applicable,
        # the exploration stops drawing them.
        self.unimplemented: dict[str, str] = {}
        self.adapter = self._build_adapter()
        self.trace: list[dict] = []
        self.now = 0
        self.calls = 0
        # The calls that took over the time guard's limit each, with the checking of their
        # answers (engine/budgets.py): what ends shrinking and reduction for a slow implementation.
        self.slow_calls = SlowCalls()
        self._needs_restart = False
        self.defer_model_invariants = False  # the stateful suite checks them once per step
        # Accepted deviations (conformance.engine.deviations), set by the runner
        # from --deviations: differences the team accepts, inputs it avoids.
        self.deviations: Deviations | None = None
        # Failures already reported in this exploration (operation, path with
        # indexes as [*]): masked like accepted deviations while it looks for
        # distinct ones (--max-failures).
        self.known_failures: list[tuple[str | None, str]] = []
        # Per mask of known_failures, the steps of the examples that met it in the
        # fewest steps (MASK_HITS of them, shortest first), each with the seed it was
        # explored with (``exploring_seed``): the same failure met again, perhaps in
        # another face that reduces to fewer steps (hunt.shorter_met).
        self.mask_hits: dict[tuple[str | None, str], list[tuple[int | None, list[dict]]]] = {}
        self.exploring_seed: int | None = None
        # After concurrent calls, observe the visible state (the probe) so the
        # chosen sequential order must explain it too; a recorded trace that
        # did not observe it switches this off.
        self.observe_after_concurrent = True
        # The last concurrent group's other possible end states, tried when a
        # later step contradicts the order chosen for it (linearize.RaceOutcome).
        self.race_outcome: RaceOutcome | None = None
        # Answers found valid, by their JSON text, for the schemas the compiled
        # subset does not cover (engine/answer_schemas.py): only those need it.
        self._valid_responses: set = set()
        self._schema_deviation = False  # an accepted deviation covered a schema failure of the answer checked last
        self._result_validators = {
            name: AnswerSchema(op.result_schema) for name, op in spec.operations.items() if op.result_schema
        }
        self._effect_validators = {name: AnswerSchema(e.schema) for name, e in spec.effects.items()}
        self._all_compiled = all(
            v.compiled for v in [*self._result_validators.values(), *self._effect_validators.values()]
        )
        # Each invariant over reported effects, with its rule (an observed invariant has one).
        self._observed_invariants = [
            (inv, inv.observed) for inv in spec.invariants if inv.kind == "observed" and inv.observed is not None
        ]
        self._seen: dict[str, dict] = {inv.id: {} for inv, _ in self._observed_invariants}

    # -- lifecycle ------------------------------------------------------------
    def describe(self) -> dict:
        try:
            return self.worker.run(self.adapter.describe, self.timeout_s)
        except _CallTimeout:
            self._needs_restart = True
            raise AdapterLoadError(f"describe() did not answer within {self.timeout_s:g}s") from None
        except AdapterLoadError:
            raise
        except BaseException as exc:  # SystemExit and the implementation's own KeyboardInterrupt too
            if self._stops(exc):
                raise
            raise AdapterLoadError(f"describe() failed: {describe_exception(exc)}") from None

    def reset(self) -> None:
        if self._needs_restart:
            self._restart_adapter()
        self.now = 0
        self.trace = []
        self.race_outcome = None
        self._probe_extra = []
        for seen in self._seen.values():
            seen.clear()
        self.model.reset(0)
        try:
            self.worker.run(lambda: self.adapter.reset(0), self.timeout_s)
        except _CallTimeout:
            self._needs_restart = True
            raise AdapterLoadError(f"the implementation did not reset within {self.timeout_s:g}s") from None
        except AdapterLoadError:
            raise
        except BaseException as exc:
            if self._stops(exc):
                raise
            self._needs_restart = True
            raise AdapterLoadError(f"the implementation failed to reset: {describe_exception(exc)}") from None

    def _build_adapter(self) -> Adapter:
        try:
            return self.worker.run(self.factory, self.timeout_s)
        except _CallTimeout:
            raise AdapterLoadError(f"the adapter did not start within {self.timeout_s:g}s") from None
        except AdapterLoadError:
            raise
        except BaseException as exc:  # e.g. sys.exit in a constructor
            if self._stops(exc):
                raise
            raise AdapterLoadError(f"the adapter failed to start: {describe_exception(exc)}") from None

    def _stops(self, exc: BaseException) -> bool:
        """A real interrupt (it ends the run), not the implementation's own failure."""
        return stops_the_run(exc, main_thread=self.worker.on_main_thread())

    def _close_adapter(self, when: str) -> None:
        """close() under the timeout (at least CLOSE_TIMEOUT_FLOOR_S); what
        goes wrong is one of ``faults``."""
        limit = max(self.timeout_s, CLOSE_TIMEOUT_FLOOR_S)
        try:
            self.worker.run(self.adapter.close, limit)
        except _CallTimeout:
            self.faults.append(
                ("timeout", f"close() {when} did not return within {limit:g}s; the kit stopped waiting for it")
            )
        except BaseException as exc:  # SystemExit, the implementation's own KeyboardInterrupt too
            if self._stops(exc):
                raise
            self.faults.append(("implementation-error", f"close() {when} raised {describe_exception(exc)}"))

    def _restart_adapter(self) -> None:
        self._close_adapter("(before the implementation was started again)")
        self.adapter = self._build_adapter()
        self._needs_restart = False

    def close(self) -> None:
        """Close the implementation, bounded by the timeout; a fault is kept
        in ``faults`` (only a real interrupt is raised)."""
        try:
            self._close_adapter("at the end of the run")
        finally:
            self.worker.close()
            self.crew.close()

    def take_faults(self) -> list[tuple[str, str]]:
        """The (kind, message) of each fault of close() since the last call."""
        faults, self.faults = self.faults, []
        return faults

    # -- steps ------------------------------------------------------------------
    def advance(self, ms: int) -> Failure | None:
        started = time.perf_counter()
        try:
            return self._advance(ms)
        finally:
            self.slow_calls.record(1, time.perf_counter() - started)

    def _advance(self, ms: int) -> Failure | None:
        # An operation that waits moved the clock with it (the model knows where to).
        self.now = max(self.now, self.model.now) + int(ms)
        index = len(self.trace)
        entry = {"index": index, "advance_ms": int(ms), "now_ms": self.now}
        self.trace.append(entry)
        try:
            effects = self.worker.run(lambda: self.adapter.set_clock(self.now), self.timeout_s)
            effects = [] if effects is None else effects
        except _CallTimeout:
            self._needs_restart = True
            return self._fail("timeout", f"set_clock({self.now}) did not answer within {self.timeout_s:g}s", index)
        except BaseException as exc:
            if self._stops(exc):
                raise
            return self._fail("implementation-error", f"set_clock raised {describe_exception(exc)}", index)
        observed: dict[str, Any] = {"result": {}, "effects": effects}
        entry["observed"] = _printable(observed)
        failure = self.check_response("set_clock", {"now_ms": self.now}, observed, index)
        if failure:
            return failure
        try:
            prediction = self.model.advance(self.now)
        except ExpressionError as exc:
            return self._fail("spec-error", f"the spec failed while moving the clock: {exc}", index)
        diff = compare(
            prediction,
            observed,
            self.spec.entity.key,
            accept=self.acceptor("set_clock", {"now_ms": self.now}, index),
            siblings=True,
        )
        if diff and self._reconsider(lambda: self._agrees("set_clock", self.now, observed)):
            diff = None  # another order of the last concurrent calls explains it
        if diff:
            return self._divergence(f"after the clock moved to {self.now} ms", index, diff)
        self._remember("set_clock", self.now, observed)
        return self.check_invariants([(index, "set_clock", observed)])

    def _invoke(self, operation: str, args: dict) -> tuple[dict | None, tuple[str, str] | None]:
        self.calls += 1
        checkpoint()  # a Ctrl-C whose first raise was lost (e.g. in a gc callback) stops the run here
        try:
            response = self.worker.run(lambda: self.adapter.call(operation, args), self.timeout_s)
        except _CallTimeout:
            self._needs_restart = True
            return None, ("timeout", f"{operation} did not answer within {self.timeout_s:g}s")
        except InputRefused as exc:  # the adapter refused the input before anything ran: not the implementation's
            return None, (INPUT_REFUSED, str(exc))
        except BaseException as exc:  # SystemExit too: an implementation may not end the kit
            if self._stops(exc):
                raise
            return None, ("implementation-error", f"{operation} raised {describe_exception(exc)}")
        return response, None

    def call(self, operation: str, args: dict, *, record: bool = True) -> tuple[dict | None, Failure | None]:
        started = time.perf_counter()
        try:
            return self._call(operation, args, record)
        finally:
            self.slow_calls.record(1, time.perf_counter() - started)

    def _call(self, operation: str, args: dict, record: bool) -> tuple[dict | None, Failure | None]:
        index = len(self.trace)  # where the call stands (or would stand) in the trace
        self._note_pool_values(operation, args)
        response, problem = self._invoke(operation, args)
        # One walk tells both the trace and the answer check that the answer is plain JSON.
        plain = problem is None and is_plain_answer(response)
        if record:
            self.trace.append(
                {"index": index, "operation": operation, "args": args, "observed": _kept(response, plain)}
            )
        if problem:
            return None, self._fail(problem[0], problem[1], index, operation=operation, args=args)
        self._plain_answer = response if plain else None
        return response, self.judge(operation, args, response, index)

    def judge(self, operation: str, args: dict, response: Any, index: int) -> Failure | None:
        failure = self.check_response(operation, args, response, index)
        if failure:
            return failure
        try:
            prediction = self.model.predict(operation, args, response)
        except ObservationError as exc:
            return self._result_difference(exc, operation, args, response, index) or self._fail(
                "divergence",
                f"{operation}: {observation_problem(exc, response)}",
                index,
                operation=operation,
                args=args,
                observed=response,
            )
        except ExpressionError as exc:
            return self._fail(
                "spec-error",
                f"the spec failed while predicting {operation}: {exc}",
                index,
                operation=operation,
                args=args,
            )
        if prediction.chosen and index < len(self.trace) and self.trace[index].get("operation") == operation:
            self.trace[index]["chosen"] = list(prediction.chosen)  # what a replay maps to the new choices
        diff = compare(
            prediction, response, self.spec.entity.key, accept=self.acceptor(operation, args, index), siblings=True
        )
        if diff and self._reconsider(lambda: self._agrees(operation, args, response, index)):
            diff = None  # another order of the last concurrent calls explains it
        if diff:
            return self._divergence(operation, index, diff, operation=operation, args=args)
        self._remember(operation, args, response)
        return self.check_invariants([(index, operation, response)])

    def _result_difference(
        self, exc: ObservationError, operation: str, args: dict, response: Any, index: int
    ) -> Failure | None:
        """A failed ``check`` is about an answer otherwise right ("the reply
        must carry an error object"): when the answer differs from the result
        the steps predicted before the check (a job found where none is
        known), that difference is the failure, not the check's message."""
        if exc.result is None or not isinstance(response, dict) or "result" not in response:
            return None
        answer = {"result": response["result"]}  # effects may come after the check: not predicted yet
        diff = compare(
            Prediction(result=exc.result),
            answer,
            self.spec.entity.key,
            accept=self.acceptor(operation, args, index),
            siblings=True,
        )
        return None if diff is None else self._divergence(operation, index, diff, operation=operation, args=args)

    def _divergence(self, heading: str, index: int, diff: tuple, **call: Any) -> Failure:
        """The failure of an answer that differs from the prediction (``diff``:
        compare's; ``call``: the operation and arguments, for a call's answer)."""
        path, expected, got, reason = diff
        return self._fail(
            "divergence", f"{heading}: {path}: {reason}", index, expected=expected, observed=got, path=path, **call
        )

    # -- races decided later --------------------------------------------------------
    def _remember(self, operation: str | None, args: Any, response: Any) -> None:
        """A step that matched, kept while the orders of the last races may
        still change (``operation`` None: a concurrent group, ``args`` its
        calls, answers, probe answers and place in the trace)."""
        newer = None
        for outcome in list(self.race_outcome.chain()) if self.race_outcome is not None else ():
            outcome.later.append((operation, args, response))
            if len(outcome.later) > MAX_LATER_STEPS:  # the order chosen long ago stands
                if newer is None:
                    self.race_outcome = None
                else:
                    newer.previous = None
                return
            newer = outcome

    def _agrees(self, operation: str | None, args: Any, response: Any, index: int | None = None) -> bool:
        """Whether the model, from where it is now, predicts this answer (and
        takes the step); for a concurrent group (``operation`` None), whether
        some order of its calls does."""
        if operation is None:
            calls, responses, followups, at = args
            kept = self.race_outcome
            try:
                # the group's trace entry gets the order found now (and the values it chose):
                # _reconsider puts the entries back when no other end state is adopted
                return linearize(self, calls, responses, at, followups) is None
            finally:
                self.race_outcome = kept
        try:
            if operation == "set_clock":
                prediction = self.model.advance(args)
                args = {"now_ms": args}
            else:
                prediction = self.model.predict(operation, args, response)
        except (ObservationError, ExpressionError):
            return False
        if (
            index is not None
            and prediction.chosen
            and index < len(self.trace)
            and self.trace[index].get("operation") == operation
        ):
            self.trace[index]["chosen"] = list(prediction.chosen)
        return compare(prediction, response, self.spec.entity.key, accept=self.acceptor(operation, args)) is None

    def _reconsider(self, check: Callable[[], bool]) -> bool:
        """A step the model disagrees with: try the other end states of the
        last concurrent groups still open (orders that matched their answers
        too, but ended elsewhere), the newest group first: replay every step
        since it from each (later groups by finding an order for them again),
        then ``check`` this one. The first that explains them all is adopted
        (True); else the model is left as it was (False)."""
        if self.race_outcome is None:
            return False
        failing, kept = self.model.snapshot(), self.race_outcome
        entries = self._group_entries(kept)
        for outcome in list(kept.chain()):
            for end, order in other_end_states(self, outcome):
                self.model.restore(end)
                self.race_outcome = outcome  # the groups after it are replayed with their first matching order
                if all(self._agrees(op, args, response) for op, args, response in outcome.later) and check():
                    outcome.adopt(self, order)
                    return True
        self.model.restore(failing)
        self.race_outcome = kept
        for index, entry in entries.items():
            self.trace[index] = entry
        return False

    def _group_entries(self, outcome: RaceOutcome) -> dict[int, dict]:
        """Copies of the trace entries of the concurrent groups checked since the
        oldest open race (their order and chosen values may be found again)."""
        first = min((o.index for o in outcome.chain() if o.index is not None), default=len(self.trace))
        return {
            i: copy.deepcopy(entry)
            for i, entry in enumerate(self.trace[first:], first)
            if isinstance(entry, dict) and entry.get("concurrently")
        }

    def acceptor(self, operation: str, args: Any, index: int | None = None, failure: str = "divergence"):
        """What ``compare`` asks about each difference: does an accepted
        deviation cover it? (None without a deviations file.) ``failure``:
        what a difference is (a ``divergence``, a scenario's ``expectation``)."""
        if self.deviations is None and not self.known_failures:
            return None
        deviations, known = self.deviations, self.known_failures

        def accept(path: str, expected: Any, observed: Any) -> bool:
            if (
                deviations is not None
                and deviations.accept(
                    operation,
                    args,
                    path,
                    _printable(expected),
                    _printable(observed),
                    where=f"step {index}" if index is not None else None,
                    failure=failure,
                )
                is not None
            ):
                return True
            general = re.sub(r"\[\d+\]", "[*]", path)
            mask = next(((op, where) for op, where in known if op in (None, operation) and general == where), None)
            if mask is not None and index is not None:
                self._met_mask(mask, index)
            return mask is not None

        return accept

    def _met_mask(self, mask: tuple[str | None, str], index: int) -> None:
        """Keep the steps to ``index`` when they are among the fewest yet to meet ``mask``."""
        held = self.mask_hits.setdefault(mask, [])
        if len(held) < MASK_HITS or index + 1 < len(held[-1][1]):
            held.append((self.exploring_seed, [dict(step) for step in self.trace[: index + 1]]))
            held.sort(key=lambda hit: len(hit[1]))
            del held[MASK_HITS:]

    def avoided(self, operation: str, args: Any, *, count: bool = True):
        """The deviation that says not to send this call, or None (``count``:
        counted in the report; a reduction's replay asks without counting)."""
        if self.deviations is None:
            return None
        return self.deviations.avoid(
            operation, args, addressed=lambda: self.model.addressed(operation, args), count=count
        )

    def check_response(self, operation: str, args: dict, response: Any, index: int) -> Failure | None:
        plain, self._plain_answer = response is self._plain_answer and response is not None, None
        shape, text, path = _shape(response, plain=plain)
        if shape:
            self._sanitise_trace(response)
        if shape and path is not None:
            # A value JSON cannot carry (NaN, a huge integer, an integer key...):
            # the answer breaks the protocol there, wherever the spec looks.
            return self._fail(
                "implementation-error",
                f"{operation}: malformed response: {shape}; an answer must be JSON (docs/adapter-protocol.md)",
                index,
                operation=operation,
                args=args,
                observed=json_safe(response),
                path=path,
            )
        if shape:
            return self._fail(
                "implementation-error",
                f"{operation}: malformed response: {shape}",
                index,
                operation=operation,
                args=args,
                observed=json_safe(response),
            )
        if "error" in response and response["error"]["kind"] == NOT_IMPLEMENTED:
            # A stub (e.g. from `conformance init`) says so plainly instead of being judged.
            detail = response["error"]["message"]
            self.unimplemented.setdefault(operation, detail or "")
            return self._fail(
                "not-implemented",
                f"operation {operation} is not implemented" + (f" ({detail})" if detail else ""),
                index,
                operation=operation,
                args=args,
                observed=_printable(response),
            )
        if self._all_compiled:
            return self._check_schemas(operation, args, response, index)
        # Some schema is checked by jsonschema alone: most answers repeat one already
        # found valid (the same list, the same error), so remember valid ones.
        if text is None:
            text = json.dumps(response, sort_keys=True, ensure_ascii=False, default=str)
        fingerprint = (operation, text)
        if fingerprint in self._valid_responses:
            return None
        self._schema_deviation = False
        failure = self._check_schemas(operation, args, response, index)
        if failure is None and not self._schema_deviation:
            if len(self._valid_responses) > 20_000:
                self._valid_responses.clear()
            self._valid_responses.add(fingerprint)
        return failure

    def _check_schemas(self, operation: str, args: dict, response: dict, index: int) -> Failure | None:
        if "result" in response and operation in self._result_validators:
            for error in self._result_validators[operation].errors(response["result"]):
                where = "result" + _json_path(error.absolute_path)
                if self._schema_accepted(operation, args, where, error.message, error.instance, index):
                    continue
                schema_path = "/".join(map(str, error.schema_path))
                return self._fail(
                    "schema",
                    f"{operation}: {where} breaks the result schema (at schema path {schema_path}): {error.message}",
                    index,
                    operation=operation,
                    args=args,
                    observed=response["result"],
                    path=where,
                )
        for i, effect in enumerate(response.get("effects", [])):
            failure = self._check_effect(operation, args, i, effect, index)
            if failure is not None:
                return failure
        return None

    def _check_effect(self, operation: str, args: dict, i: int, effect: dict, index: int) -> Failure | None:
        """Effect ``i`` of an answer against its declared schema: the first
        break no accepted deviation covers, as a failure."""
        validator = self._effect_validators.get(effect["effect"])
        if validator is None:
            declared = ", ".join(self._effect_validators)
            why = f"effect {effect['effect']!r} is not declared (declared: {declared})"
            if self._schema_accepted(operation, args, f"effects[{i}]", why, effect, index):
                return None
            return self._fail(
                "schema",
                f"{operation}: effects[{i}] is {effect['effect']!r}, which the spec does not declare "
                f"(declared: {declared})",
                index,
                operation=operation,
                args=args,
                observed=effect,
                path=f"effects[{i}]",
            )
        for error in validator.errors(effect):
            where = f"effects[{i}]" + _json_path(error.absolute_path)
            if self._schema_accepted(operation, args, where, error.message, error.instance, index):
                continue
            return self._fail(
                "schema",
                f"{operation}: effects[{i}] ({effect['effect']}) breaks its schema: {error.message}",
                index,
                operation=operation,
                args=args,
                observed=effect,
                path=f"effects[{i}]",
            )
        return None

    def _schema_accepted(self, operation: str, args: dict, path: str, why: str, observed: Any, index: int) -> bool:
        """Whether an accepted deviation covers this schema failure at
        ``path`` (``expected`` is then the schema's message, ``observed``
        the value at the path); counted apart in the report when it does."""
        if self.deviations is None:
            return False
        found = self.deviations.accept(
            operation, args, path, why, _printable(observed), where=f"step {index}", failure="schema"
        )
        self._schema_deviation = self._schema_deviation or found is not None
        return found is not None

    def check_invariants(self, judged: Sequence[tuple[int, str, dict | None]]) -> Failure | None:
        if not self.defer_model_invariants:
            failure = self.check_model_invariants(judged[-1][0])
            if failure:
                return failure
        return self.check_observed(judged)

    def check_model_invariants(self, index: int | None = None) -> Failure | None:
        """The spec's invariants over the model state touched since the last check."""
        try:
            broken = self.model.check_invariants()
        except ExpressionError as exc:  # e.g. an invariant that is not a boolean, or divides by zero
            return self._fail(
                "spec-error",
                f"the spec failed while checking its invariants: {exc}",
                len(self.trace) - 1 if index is None else index,
            )
        for inv_id, message in broken:
            return self._fail(
                "spec-error",
                f"the spec's own model broke invariant {inv_id}: {message}",
                len(self.trace) - 1 if index is None else index,
            )
        return None

    def check_observed(self, judged: Sequence[tuple[int, str, dict | None]]) -> Failure | None:
        """Invariants over what the implementation reported (e.g. one injection per job)."""
        for index, operation, response in judged:
            for inv, rule in self._observed_invariants:
                seen = self._seen[inv.id]
                if operation == rule.get("until"):
                    seen.clear()
                for effect in response.get("effects", []) if response else []:
                    if effect.get("effect") != rule["effect"]:
                        continue
                    key = effect.get(rule["unique"])
                    # A record created again under a key that was freed (e.g. an id
                    # reused after eviction) is another record: it starts afresh.
                    life = self.model.births.get(key, 0) if isinstance(key, (str, int, float, bool)) else 0
                    if key in seen and seen[key][1] == life:
                        first = seen[key][0]
                        when = (
                            f"twice by the concurrent calls of step {index}"
                            if first == index
                            else f"at step {first} and again at step {index}"
                        )
                        return self._fail(
                            "invariant",
                            f"invariant {inv.id} broken: {inv.description} — "
                            f"{rule['effect']} for {rule['unique']}={key!r} "
                            f"was reported {when}",
                            index,
                            operation=operation,
                            observed=effect,
                        )
                    seen[key] = (index, life)
        return None

    # -- concurrency ------------------------------------------------------------
    def call_concurrently(self, calls: list[tuple[str, dict]]) -> tuple[list[dict | None], Failure | None]:
        """Issue calls at the same time; the outcome must match some sequential order."""
        started, before = time.perf_counter(), self.calls
        try:
            return self._call_concurrently(calls)
        finally:  # the group's calls and the probe calls after it (counted by _invoke)
            self.slow_calls.record(len(calls) + self.calls - before, time.perf_counter() - started)

    def _call_concurrently(self, calls: list[tuple[str, dict]]) -> tuple[list[dict | None], Failure | None]:
        index = len(self.trace)
        for operation, args in calls:
            self._note_pool_values(operation, args)
        line = self._race(calls)
        self.last_race_met = line.overlapped()
        self.race_windows.hit(self.last_race_met)
        responses, failure = self._collect(calls, line, index)
        if failure is None:
            failure = self._check_group_answers(calls, responses, index)
        if failure is not None:
            return responses, failure
        # The order in which the implementation applied the calls may show only
        # later (e.g. in list order); observe the state now so the chosen
        # sequential order must explain it too.
        probes = self.probe_calls() if self.observe_after_concurrent else []
        followups, failure = self._follow_up(probes)
        if failure is not None:
            return responses, failure
        judged = [(index, op, r) for (op, _), r in zip(calls, responses)]
        failure = self._order_group(calls, responses, index, followups, judged)
        if failure is not None:
            return responses, failure
        failure = self.check_invariants(judged)
        if failure is None and followups and len(followups) == len(probes):
            # The follow-up calls were the probe, and the order adopted matches
            # them: the state is probed already (probe(when_changed=True) skips it).
            self._probed_revision = self.model.revision
        return responses, failure

    def _race(self, calls: list[tuple[str, dict]]) -> StartLine:
        """Make the calls on the crew's threads, all let go at once; back when
        every call has returned, or when one raised and every call before it
        returned (or the timeout passed)."""
        line = StartLine(len(calls))

        def run(i: int, op: str, args: dict, release: Callable[[], None]) -> None:
            line.start(self.timeout_s)
            outcome: tuple[bool, Any]
            went = time.perf_counter()
            try:
                outcome = (True, self.adapter.call(op, args))
            except BaseException as exc:
                outcome = (False, exc)
            span = (went, time.perf_counter())
            release()
            line.finish(i, outcome, span)

        # Daemon threads: a call that never returns must not keep the kit alive.
        # The thread that reaches the start line last runs first (it holds the
        # interpreter when the others wake): that one is call ``head_start``.
        # A fine switch interval while they race: on one core a read-then-write
        # window inside an in-process implementation is cut by the other calls.
        with fine_switching():
            for i in launch_order(len(calls), self.head_start):
                op, args = calls[i]
                self.crew.submit(partial(run, i, op, args))
            line.wait(self.timeout_s)
        return line

    def _collect(
        self, calls: list[tuple[str, dict]], line: StartLine, index: int
    ) -> tuple[list[dict | None], Failure | None]:
        """The group's answers in call order, up to the first call that did not
        answer (a timeout) or raised: its failure, the group then in the trace."""
        responses: list[dict | None] = []
        for i, (op, args) in enumerate(calls):
            outcome = line.outcomes[i]
            if outcome is None:
                self._needs_restart = True
                responses.append(None)
                self.trace.append({"index": index, "concurrently": _group(calls, responses)})
                return responses, self._fail(
                    "timeout",
                    f"{op} (concurrent) did not answer within {self.timeout_s:g}s",
                    index,
                    operation=op,
                    args=args,
                )
            ok, value = outcome
            if not ok:
                responses.append(None)
                self.trace.append({"index": index, "concurrently": _group(calls, responses)})
                if isinstance(value, InputRefused):
                    return responses, self._fail(INPUT_REFUSED, str(value), index, operation=op, args=args)
                return responses, self._fail(
                    "implementation-error",
                    f"{op} (concurrent) raised {describe_exception(value)}",
                    index,
                    operation=op,
                    args=args,
                )
            responses.append(value)
        return responses, None

    def _check_group_answers(
        self, calls: list[tuple[str, dict]], responses: list[dict | None], index: int
    ) -> Failure | None:
        """The group in the trace, and each answer's shape and schemas checked."""
        # One walk per answer tells both the trace and the answer check that it is plain JSON.
        plain = [is_plain_answer(response) for response in responses]
        self.trace.append({"index": index, "concurrently": _group(calls, responses, plain)})
        for (op, args), response, ok in zip(calls, responses, plain):
            self._plain_answer = response if ok else None
            failure = self.check_response(op, args, response, index)
            if failure:
                return failure
        return None

    def _follow_up(self, probes: list[tuple[str, dict]]) -> tuple[list, Failure | None]:
        """The probe calls after a group, each in the trace and checked: their
        ``(operation, args, answer)``s, or the first one's failure."""
        followups: list[tuple[str, dict, Any]] = []
        for op, args in probes:
            response, problem = self._invoke(op, args)
            ok = problem is None and is_plain_answer(response)
            # ``follow_up``: part of the group's check, made again by every replay of the group
            # (engine/reduce.py: steps_of_trace leaves it out of a counterexample's steps)
            self.trace.append(
                {
                    "index": len(self.trace),
                    "operation": op,
                    "args": args,
                    "observed": _kept(response, ok),
                    "follow_up": True,
                }
            )
            if problem:
                return followups, self._fail(problem[0], problem[1], len(self.trace) - 1, operation=op, args=args)
            self._plain_answer = response if ok else None
            failure = self.check_response(op, args, response, len(self.trace) - 1)
            if failure:
                return followups, failure
            followups.append((op, args, response))
        return followups, None

    def _order_group(
        self,
        calls: list[tuple[str, dict]],
        responses: list,
        index: int,
        followups: list,
        judged: list[tuple[int, str, dict | None]],
    ) -> Failure | None:
        """The observed invariants over the group's answers (the sharper
        diagnosis), then a sequential order of its calls that explains the
        answers and the follow-ups (the model left in its end state), with
        another order of a group before if needed; the groups before stay open."""
        saved = {k: dict(v) for k, v in self._seen.items()}
        failure = self.check_observed(judged)  # the sharper diagnosis, when it applies
        if failure:
            return failure
        self._seen = saved  # check_invariants records them again
        earlier, self.race_outcome = self.race_outcome, None
        failure = linearize(self, calls, responses, index, followups)  # sets the group's own outcome
        if failure and earlier is not None:
            failure, earlier = self._explained_by_earlier(failure, earlier, calls, responses, index, followups)
        if failure:
            return failure
        if earlier is not None:
            self._keep_open(earlier, (list(calls), list(responses), list(followups), index))
        return None

    def _explained_by_earlier(
        self,
        failure: Failure,
        earlier: RaceOutcome,
        calls: list[tuple[str, dict]],
        responses: list,
        index: int,
        followups: list,
    ) -> tuple[Failure | None, RaceOutcome | None]:
        """Whether another order of a group before explains this group: no
        failure then, and the outcome adopted; else ``failure`` and the groups
        before as _reconsider left them."""
        self.race_outcome = earlier  # another order of a group before may explain this one
        open_before: list = []

        def explained() -> bool:
            open_before[:] = [self.race_outcome]  # the outcome _reconsider adopted
            return linearize(self, calls, responses, index, followups) is None

        if self._reconsider(explained):
            return None, open_before[0]
        return failure, self.race_outcome

    def _keep_open(self, earlier: RaceOutcome, group: tuple) -> None:
        """The groups before stay open behind this one (the newest few): a
        later step may still show that one of them went another way."""
        self.race_outcome, newest = earlier, self.race_outcome
        self._remember(None, group, None)
        before = self.race_outcome
        if newest is not None:
            newest.previous = before
            for depth, outcome in enumerate(newest.chain()):
                if depth == MAX_OPEN_RACES - 1:
                    outcome.previous = None
            self.race_outcome = newest

    # -- probes -------------------------------------------------------------------
    def probe_calls(self) -> list[tuple[str, dict]]:
        """The spec's read-only probe calls (one per pool value, and one per
        other value of the pool's arguments the calls so far passed), which
        show the implementation's whole visible state."""
        return [(op, args) for op, args, _ in self._probe_plan()]

    def _note_pool_values(self, operation: str, args: Any) -> None:
        """Note a value the call passes for the probe's pool that the pool does
        not list (a thread a replay renamed), so the probe reads its scope too."""
        names = self._probe_pool_args.get(operation)
        if not names or not isinstance(args, dict):
            return
        for name in names:
            value = args.get(name)
            if (
                isinstance(value, (str, int))
                and not isinstance(value, bool)
                and value not in self._probe_pool
                and value not in self._probe_extra
                and len(self._probe_extra) < _PROBE_EXTRA_MAX
            ):
                self._probe_extra.append(value)

    def _probe_plan(self) -> list[tuple[str, dict, str | None]]:
        """The probe calls, each with a fresh copy of its arguments (an
        implementation may change what it is handed) and a text naming it."""
        probe = self.spec.exploration.probe
        if probe and probe["call"] in self.unimplemented:
            return []  # the implementation does not offer it: nothing to look through
        cached = self._probe_calls
        if cached is None or cached[0] is not self.params or len(cached[1]) != len(self._probe_extra):
            # built once per parameters, and again when a call passed another value of the pool
            probe, calls = self.spec.exploration.probe, []
            if probe and probe["call"] in self.spec.offered_operations(self.params):
                values = self.spec.exploration.pools.get(probe["for_pool"], [None]) if probe["for_pool"] else [None]
                if probe["for_pool"]:
                    values = [*values, *self._probe_extra]
                for v in values:
                    args = probe["args"].evaluate({"params": self.params, "pool_value": v})
                    try:
                        text = json.dumps(args, sort_keys=True, allow_nan=False)
                    except (TypeError, ValueError):
                        text = None
                    calls.append((probe["call"], args, text))
            cached = self._probe_calls = (self.params, tuple(self._probe_extra), calls)
        return [
            (op, json.loads(text) if text is not None else copy.deepcopy(args), text) for op, args, text in cached[2]
        ]

    def probe(self, *, when_changed: bool = False) -> Failure | None:
        """Compare the implementation's visible state with the model's.
        ``when_changed`` (after a step of the exploration): only what the step
        changed in the model. Nothing if the model's state is the one the last
        probe found matching; else the probe calls whose prediction reads what
        changed (``Model.read_token``: a scope's records, the tables, the clock),
        not those of scopes the step left alone. Whatever the implementation
        changed on its own, in a scope the step did not touch, shows at the next
        probe of that scope, or at the whole probe that ends every example."""
        revision = self.model.revision
        if when_changed and revision == self._probed_revision:
            return None
        for op, args, text in self._probe_plan():
            if when_changed and self._still_passing(op, text) is not None:
                continue
            response, failure = self._probe_one(op, args, text)
            if failure:
                # Only a failing probe joins the trace: it is the step that shows the divergence.
                self.trace.append(
                    {"index": len(self.trace), "operation": op, "args": args, "observed": _printable(response)}
                )
                failure.step = len(self.trace) - 1
                failure.steps = [dict(s) for s in self.trace]
                failure.message = f"probe after the last step: {failure.message}"
                return failure
        self._probed_revision = revision
        return None

    def _still_passing(self, op: str, text: str | None) -> _Passed | None:
        """What this probe call passed with last time, if nothing its prediction
        read has changed in the model since (the model expects the same answer)."""
        passed = self._probe_passed.get((op, text)) if text is not None else None
        return passed if passed is not None and passed.token == self.model.read_token(passed.reads) else None

    def _probe_one(self, op: str, args: dict, text: str | None) -> tuple[dict | None, Failure | None]:
        """One probe call, judged. Every probe asks the implementation; the
        model's prediction and the checks are skipped only when the answer is
        the very one (same text) that passed them the last time, and nothing
        that prediction read has changed in the model since (Model.read_token):
        the same answer to the same question about the same state."""
        started = time.perf_counter()
        try:
            return self._judged_probe(op, args, text)
        finally:
            self.slow_calls.record(1, time.perf_counter() - started)

    def _judged_probe(self, op: str, args: dict, text: str | None) -> tuple[dict | None, Failure | None]:
        index = len(self.trace)  # where the probe would stand in the trace
        response, problem = self._invoke(op, args)
        if problem:
            return None, self._fail(problem[0], problem[1], index, operation=op, args=args)
        passed = self._still_passing(op, text)
        if passed is not None and type(response) is dict and repr(response) == passed.answer:
            self.model.coverage.merge(passed.hits)  # what the prediction counted, counted again
            self._remember(op, args, response)
            return response, self.check_invariants([(index, op, response)])
        epoch = self.model.epoch
        self.model.track_reads, self.model.last_reads = text is not None, None
        try:
            failure = self.judge(op, args, response, index)
        finally:
            self.model.track_reads = False
        reads = self.model.last_reads
        if failure is None and reads is not None and self.model.epoch == epoch and type(response) is dict:
            self._probe_passed[(op, text)] = _Passed(
                self.model.read_token(reads), reads, repr(response), self.model.last_hits
            )
        return response, failure

    # -- helpers ------------------------------------------------------------------
    def _sanitise_trace(self, response: Any) -> None:
        """The trace keeps answers as they came; one found not to be JSON (e.g.
        a lone surrogate, which only the careful check sees) is replaced there
        by its JSON-safe copy, so reports can carry it."""
        for entry in reversed(self.trace[-64:]):
            for holder in [entry] + list(entry.get("concurrently") or []):
                if holder.get("observed") is response:
                    holder["observed"] = json_safe(response)

    def _fail(self, kind: str, message: str, index: int | None, **evidence) -> Failure:
        evidence.setdefault("expected", None)
        return Failure(kind=kind, message=message, step=index, steps=[dict(s) for s in self.trace], **evidence)


def _pool_arguments(spec: Spec) -> dict[str, list[str]]:
    """Per operation, its arguments drawn from the probe's pool (``x-draw:
    {pool: thread_id}``), whose values the probe must read."""
    probe = spec.exploration.probe
    pool = probe.get("for_pool") if probe else None
    if not pool:
        return {}
    found: dict[str, list[str]] = {}
    for name, operation in spec.operations.items():
        for arg, schema in sorted(((operation.args_schema or {}).get("properties") or {}).items()):
            draw = schema.get("x-draw") if isinstance(schema, dict) else None
            if isinstance(draw, dict) and draw.get("pool") == pool:
                found.setdefault(name, []).append(arg)
    return found


def _group(calls, responses, plain=()) -> list[dict]:
    """A concurrent group's trace entries; ``plain[i]``: answer i is known to be plain JSON already."""
    return [
        {
            "operation": op,
            "args": args,
            "observed": _kept(responses[i], i < len(plain) and plain[i]) if i < len(responses) else None,
        }
        for i, (op, args) in enumerate(calls)
    ]


def _kept(response: Any, plain: bool) -> Any:
    """An answer as the trace keeps it, ``plain`` when is_plain_answer passed it already."""
    return response if plain else _printable(response)


def _printable(value: Any) -> Any:
    """The value as the trace keeps it: itself when it is plain JSON, else a
    copy JSON can carry (what is not JSON described in strings)."""
    return value if is_plain_json(value) else json_safe(value)

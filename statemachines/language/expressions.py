"""Spec expressions: CEL, compiled once, evaluated safely.

Guards, computed values and invariants in a spec are CEL expressions
(Common Expression Language). They are parsed by a CEL implementation, never
by Python's ``eval``; a spec can only call the functions listed here.
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import json
import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..errors import EvaluationBudgetError, ExpressionError, RunCostError
from .cel_import import cel
from .cel_subset import NotSubset, compile_subset

__all__ = [
    "Expression",
    "compile_expression",
    "fields_used",
    "PURE_FUNCTIONS",
    "MODEL_FUNCTIONS",
    "text_of_size",
    "fill",
    "MAX_EVALUATION_STEPS",
    "MAX_EVALUATION_SECONDS",
    "MAX_EXPRESSION_CHARS",
    "MAX_TEXT_BYTES",
    "MAX_EVALUATION_BYTES",
    "type_name",
    "MAX_RUN_EXPRESSION_SECONDS",
    "RunCost",
    "run_cost_budget",
    "run_cost_spent",
    "RUN_EXPRESSION_BUDGET_ENV",
]

# The cost budget of one evaluation: how many iterations of comprehension
# bodies (`all`, `exists`, `exists_one`, `filter`, `map`, nested ones
# multiplying) it may take. A spec's loops run over its records and payloads;
# a million iterations is far beyond what any check needs and a few seconds
# at most. Past it the evaluation stops with a spec error.
MAX_EVALUATION_STEPS = 1_000_000
# ... and how much CPU time: iterations that copy large values (a `map` whose
# body returns a list) cost far more than a counted step.
MAX_EVALUATION_SECONDS = 2.0
# The longest expression a spec may write: the CEL parser recurses once per
# operator in a chain, and tens of thousands of them overflow its stack.
MAX_EXPRESSION_CHARS = 10_000
# The largest text `text()` builds.
MAX_TEXT_BYTES = 64 << 20
# ... and what the kit's functions may build and consume in one evaluation, in
# all: the bytes of every string and 64 per list item or map entry they take
# in or hand back (`repeat`, `indices`, `join`, `text`, ...), charged before a
# result is built when its size is known in advance.
MAX_EVALUATION_BYTES = 2 * MAX_TEXT_BYTES
_ITEM_BYTES = 64
# The function every comprehension body calls once per iteration (the budget).
_TICK = "kit_tick"
# The time all the expressions of one command (`run`, `check-spec`, `lint`,
# `diff`, `merge-reports`, ...) may take together: an expression that spends
# most of one evaluation's budget at every evaluation (a deviation's `when`
# over a large range) would otherwise keep a quick run going for hours. Only
# expressions that loop or call the kit's functions are timed (the others
# cost microseconds), by the wall clock (reading the CPU clock is a system
# call, too slow for every evaluation), and only an evaluation that took
# longer than CHARGED_FROM_SECONDS counts: a spec's own expressions take
# microseconds each, so a long deep run never spends the budget on them,
# while one that takes a second at every evaluation spends it in minutes.
MAX_RUN_EXPRESSION_SECONDS = 300.0
CHARGED_FROM_SECONDS = 0.005


class RunCost:
    """The time the expressions of one command have taken, against its
    limit; shared by the command's threads (a concurrent group's crew)."""

    __slots__ = ("limit_s", "spent_s")

    def __init__(self, limit_s: float) -> None:
        self.limit_s = limit_s
        self.spent_s = 0.0

    def charge(self, seconds: float) -> None:
        self.spent_s += seconds

    @property
    def why(self) -> str | None:
        """What was spent, once the limit is passed (None before)."""
        if self.spent_s <= self.limit_s:
            return None
        return f"{self.limit_s:g} s spent evaluating expressions"


_RUN_COST: RunCost | None = None  # the command's, while one runs (`run_cost_budget`)


@contextlib.contextmanager
def run_cost_budget(limit_s: float | None = None) -> Iterator[RunCost]:
    """Count the CPU time of every expression evaluated inside, against
    ``limit_s`` (default MAX_RUN_EXPRESSION_SECONDS); once it is spent, every
    evaluation that runs a program raises RunCostError. A budget already
    counting (a command inside another) goes on counting."""
    global _RUN_COST
    if _RUN_COST is not None:
        yield _RUN_COST
        return
    _RUN_COST = RunCost(_run_limit() if limit_s is None else limit_s)
    try:
        yield _RUN_COST
    finally:
        _RUN_COST = None


RUN_EXPRESSION_BUDGET_ENV = "CONFORMANCE_EXPRESSION_BUDGET_S"


def _run_limit() -> float:
    """The user's budget (``CONFORMANCE_EXPRESSION_BUDGET_S``, seconds), else the kit's."""
    try:
        value = float(os.environ.get(RUN_EXPRESSION_BUDGET_ENV, MAX_RUN_EXPRESSION_SECONDS))
    except ValueError:
        return MAX_RUN_EXPRESSION_SECONDS
    return value if value > 0 else MAX_RUN_EXPRESSION_SECONDS


def run_cost_spent() -> str | None:
    """What the command's expressions spent, once past its budget (else None)."""
    return None if _RUN_COST is None else _RUN_COST.why


_MACROS = ("all", "exists", "exists_one", "filter", "map")

# Variables bound by CEL comprehension macros (`xs.filter(x, ...)`) are
# reported as references by the parser; they are not free variables.
_MACRO_VAR = re.compile(r"\.(?:all|exists|exists_one|filter|map)\(\s*([A-Za-z_][A-Za-z0-9_]*)\s*,")
_DOTTED = re.compile(r"^(?!(?:true|false|null|in)$)[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*$")
_OPERATOR = re.compile(r"^(_.*_|@.*|!_|-_)$")
_BUILTINS = {
    "size",
    "has",
    "int",
    "uint",
    "double",
    "string",
    "bytes",
    "bool",
    "type",
    "dyn",
    "duration",
    "timestamp",
    "matches",
    "contains",
    "startsWith",
    "endsWith",
    "exists",
    "all",
    "exists_one",
    "filter",
    "map",
    "max",
    "min",
    "lowerAscii",
    "upperAscii",
    "join",
    "split",
    "replace",
    "trim",
    "indexOf",
    "lastIndexOf",
    "substring",
    "in",
    "_[_]",  # indexing a list or map
}


def fill(template: str, values: dict) -> str:
    """Fill ``{name}`` placeholders; unknown placeholders stay as written."""
    return re.sub(
        r"\{([A-Za-z_][A-Za-z0-9_]*)\}",
        lambda m: str(values[m.group(1)]) if m.group(1) in values else m.group(0),
        template,
    )


def text_of_size(size_bytes: int, lines: int) -> str:
    """An ASCII text of exactly ``size_bytes`` bytes spread over exactly ``lines`` lines."""
    size_bytes, lines = int(size_bytes), max(1, int(lines))
    if size_bytes < 2 * lines - 1:
        raise ValueError(f"text({size_bytes}, {lines}): {lines} lines need at least {2 * lines - 1} bytes")
    if size_bytes > MAX_TEXT_BYTES:
        raise ValueError(f"text({size_bytes}, {lines}): more than the {MAX_TEXT_BYTES}-byte limit of a built text")
    body = size_bytes - (lines - 1)  # bytes left after the newlines
    base, extra = divmod(body, lines)
    return "\n".join("x" * (base + (1 if i < extra else 0)) for i in range(lines))


_RAW_FUNCTIONS: dict[str, Callable] = {
    "fill": fill,
    "text": text_of_size,
    "repeat": lambda s, n: _repeat(str(s), int(n)),
    "line_count": lambda s: s.count("\n") + 1,
    "byte_size": lambda s: len(s.encode("utf-8")),
    # A value's JSON text (non-ASCII kept as is): what a runtime that serialises
    # a payload before measuring or writing it produces.
    "to_json": lambda v: json.dumps(v, ensure_ascii=False),
    # The last n items of a list (all of it when shorter; none when n <= 0).
    "last_n": lambda xs, n: list(xs)[max(0, len(list(xs)) - int(n)) :] if int(n) > 0 else [],
    # The smallest / largest item of a list, or `default` when it is empty.
    "least": lambda xs, default: min(list(xs), default=default),
    "greatest": lambda xs, default: max(list(xs), default=default),
    # The strings of a list joined with a separator.
    "join": lambda xs, sep: str(sep).join(str(x) for x in xs),
    # Items in first-occurrence order, without repeats.
    "distinct": lambda xs: list(dict.fromkeys(xs)),
    # The positions of a list's items: [0, 1, ..., size - 1] (to map with an index).
    "indices": lambda xs: list(range(len(list(xs)))),
    # The position of x in a list, or -1.
    "index_of": lambda xs, x: list(xs).index(x) if x in list(xs) else -1,
    # An integer power (exponential backoff: base * pow(2, attempt)).
    "pow": lambda b, e: _pow(int(b), int(e)),
    # CEL's string extension, called as methods: `id.substring(0, size(id) - 1)`.
    "substring": lambda s, start, end=None: _substring(str(s), int(start), None if end is None else int(end)),
    "charAt": lambda s, i: _char_at(str(s), int(i)),
    "indexOf": lambda s, sub, start=0: str(s).find(str(sub), _at(str(s), int(start))),
    "lastIndexOf": lambda s, sub, last=None: _last_index_of(str(s), str(sub), last),
    "lowerAscii": lambda s: "".join(chr(ord(c) + 32) if "A" <= c <= "Z" else c for c in str(s)),
    "upperAscii": lambda s: "".join(chr(ord(c) - 32) if "a" <= c <= "z" else c for c in str(s)),
    "replace": lambda s, old, new, n=-1: str(s).replace(str(old), str(new), int(n) if int(n) >= 0 else -1),
    "split": lambda s, sep, n=-1: _split(str(s), str(sep), int(n)),
    "trim": lambda s: str(s).strip(),
}


def _at(text: str, index: int) -> int:
    """``index`` as a position in ``text`` (0 to its length), or a clear error."""
    if not 0 <= index <= len(text):
        raise ValueError(f"index {index} is out of range for a string of {len(text)} character(s)")
    return index


def _substring(text: str, start: int, end: int | None) -> str:
    end = len(text) if end is None else end
    if _at(text, start) > _at(text, end):
        raise ValueError(f"substring({start}, {end}): the start is past the end")
    return text[start:end]


def _char_at(text: str, index: int) -> str:
    return text[_at(text, index) : index + 1]


def _last_index_of(text: str, sub: str, last: Any) -> int:
    end = len(text) if last is None else _at(text, int(last)) + len(sub)
    return text.rfind(sub, 0, end)


def _split(text: str, sep: str, limit: int) -> list[str]:
    """CEL's split: ``limit`` 0 gives no parts, a negative one every part, n at most n."""
    if limit == 0:
        return []
    parts = list(text) if sep == "" else text.split(sep)
    if 0 < limit < len(parts):
        head = parts[: limit - 1]
        return [*head, sep.join(parts[limit - 1 :]) if sep else "".join(parts[limit - 1 :])]
    return parts


def _fill_cost(template: Any, values: Any) -> int:
    """What ``fill`` may build: every placeholder replaced by the longest value."""
    text = str(template)
    longest = max((_size(v) for v in values.values()), default=0) if isinstance(values, dict) else 0
    return len(text) + text.count("{") * longest


def _join_cost(xs: Any, sep: Any) -> int:
    items = _count(xs)
    return _size(xs) + len(str(sep)) * max(0, items - 1)


def _count(xs: Any) -> int:
    try:
        return len(xs)
    except TypeError:
        return 0


def _int_or_zero(value: Any) -> int:
    try:
        return max(0, int(value))
    except (TypeError, ValueError, OverflowError):
        return 0


# What each function will build, known before it runs (its arguments are charged too).
_BUILD_COST: dict[str, Callable[..., int]] = {
    "repeat": lambda s, n: len(str(s).encode("utf-8")) * _int_or_zero(n),
    "text": lambda size, lines: _int_or_zero(size),
    "indices": lambda xs: _count(xs) * _ITEM_BYTES,
    "fill": _fill_cost,
    "join": _join_cost,
    "to_json": lambda v: _size(v),
}


def _size(value: Any, limit: int = MAX_EVALUATION_BYTES + 1) -> int:
    """What a value counts for against the budget (strings by their length, list
    items and map entries 64 each), counted up to ``limit``."""
    total, stack = 0, [value]
    while stack and total < limit:
        item = stack.pop()
        if isinstance(item, str):
            total += len(item)
        elif isinstance(item, (bytes, bytearray)):
            total += len(item)
        elif isinstance(item, dict):
            total += _ITEM_BYTES * len(item)
            stack.extend(item.values())
            stack.extend(item.keys())
        elif isinstance(item, (list, tuple)):
            total += _ITEM_BYTES * len(item)
            if len(item) and isinstance(item[0], (str, list, tuple, dict, bytes)):
                stack.extend(item)
        else:
            total += 8
    return total


_CURRENT: contextvars.ContextVar[_Budget | None] = contextvars.ContextVar("conformance_cel_budget", default=None)


def _charged(name: str, fn: Callable) -> Callable:
    """``fn`` charging the budget of the evaluation under way: its arguments,
    what it will build (when known in advance), then what it built."""
    cost = _BUILD_COST.get(name)

    def call(*args: Any) -> Any:
        budget = _CURRENT.get()
        if budget is None:  # called outside an evaluation: a budget of its own
            budget = _Budget(MAX_EVALUATION_STEPS, MAX_EVALUATION_SECONDS)
        if budget.charge(sum(_size(a) for a in args) + (cost(*args) if cost else 0), name):
            return budget.refuse()
        result = fn(*args)
        if cost is None and budget.charge(_size(result), name):  # a size not known in advance
            return budget.refuse()
        return result

    call.__name__ = name
    return call


def _repeat(text: str, times: int) -> str:
    """``text`` written ``times`` times (none when times <= 0), within the built-text limit."""
    if times > 0 and len(text.encode("utf-8")) * times > MAX_TEXT_BYTES:
        raise ValueError(f"repeat(..., {times}): more than the {MAX_TEXT_BYTES}-byte limit of a built text")
    return text * max(0, times)


def _pow(base: int, exponent: int) -> int:
    """``base ** exponent`` within CEL's 64-bit integers (never a huge Python number)."""
    if exponent < 0:
        raise ValueError(f"pow({base}, {exponent}): the exponent must not be negative")
    if base in (0, 1) or exponent == 0:
        return 1 if exponent == 0 else base
    if base == -1:
        return -1 if exponent % 2 else 1
    if exponent > 64:
        raise OverflowError(f"pow({base}, {exponent}) overflows a 64-bit integer")
    value = base**exponent
    if not -(1 << 63) <= value < (1 << 63):
        raise OverflowError(f"pow({base}, {exponent}) overflows a 64-bit integer")
    return value


PURE_FUNCTIONS: dict[str, Callable] = {name: _charged(name, fn) for name, fn in _RAW_FUNCTIONS.items()}


class BudgetSpent(ValueError):
    """The cost budget of one evaluation is spent (raised by the kit's functions
    when the Python subset evaluates; the CEL binding gets a marker value)."""


def type_name(value: Any) -> str:
    """A value's type in the words of CEL and the spec format."""
    if isinstance(value, bool):
        return "a boolean"
    if value is None:
        return "null"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, dict):
        return "a map"
    return type(value).__name__


class _Budget:
    """Counts comprehension iterations and the CPU time they take; past either
    budget each tick answers a value that is not a boolean, so the evaluation
    stops at once (raising from the callback would make the CEL binding print
    to stderr)."""

    __slots__ = ("left", "seconds", "deadline", "units", "why", "bytes_left", "in_cel")

    def __init__(self, steps: int, seconds: float) -> None:
        self.left = steps
        self.seconds = seconds
        # The CPU clock is read lazily: once every 16 units of work (charges
        # and ticks), starting at the first reading. Reading a thread's CPU
        # clock is a system call, tens of microseconds under load, and most
        # evaluations do less work than that: read at every evaluation, it
        # was a sixth of a mutant run's time.
        self.deadline: float | None = None
        self.units = 0
        self.why: str | None = None
        self.bytes_left = MAX_EVALUATION_BYTES
        self.in_cel = False  # the CEL binding calls the functions: answer a marker, never raise

    def start_clock(self) -> None:
        """Start counting CPU time now, if not started yet."""
        if self.deadline is None:
            self.deadline = time.thread_time() + self.seconds

    def _out_of_time(self) -> bool:
        """Whether the CPU time is spent, reading the clock on every 16th unit
        of work (the first reading starts it)."""
        self.units += 1
        if self.units & 15:
            return False
        if self.deadline is None:
            self.start_clock()
            return False
        return time.thread_time() > self.deadline

    def charge(self, cost: int, name: str) -> bool:
        """Charge what a function takes in or builds; True when the budget is spent."""
        self.bytes_left -= cost
        if self.why is None:
            if self.bytes_left < 0:
                self.why = (
                    f"{MAX_EVALUATION_BYTES >> 20} MiB built or taken in by its functions "
                    f"(`{name}` asked for {cost:,} more)"
                )
            elif self._out_of_time():
                self.why = f"{MAX_EVALUATION_SECONDS:g} s of CPU time"
        return self.why is not None

    def refuse(self) -> Any:
        if self.in_cel:
            return "kit: cost budget spent"
        raise BudgetSpent(self.why)

    def check_time(self) -> None:
        """Whether the CPU time is spent, reading the clock now (after work
        that charges nothing, such as a CEL program's own evaluation)."""
        if self.why is None and self.deadline is not None and time.thread_time() > self.deadline:
            self.why = f"{MAX_EVALUATION_SECONDS:g} s of CPU time"

    def tick(self) -> Any:
        self.left -= 1
        if self.why is None:
            if self.left < 0:
                self.why = f"{MAX_EVALUATION_STEPS:,} iterations of its comprehensions"
            elif self._out_of_time():
                self.why = f"{MAX_EVALUATION_SECONDS:g} s of CPU time in its comprehensions"
        return True if self.why is None else "kit: cost budget spent"

    @property
    def spent(self) -> bool:
        return self.why is not None


# Provided by the model at evaluation time (they read model state or the
# implementation's observation); listed here so specs can be checked statically.
MODEL_FUNCTIONS = frozenset(
    {
        "known",
        "table_has",
        "table_get",
        "record",
        "observed",
        "observed_effect",
        "smallest_free_key",
        "free_key",
        "lookup",
    }
)


@dataclass
class Expression:
    """A compiled CEL expression and where it was written."""

    source: str
    where: str
    program: Any = field(repr=False)
    variables: frozenset[str] = frozenset()
    functions: frozenset[str] = frozenset()
    ticked: bool = False  # the program's comprehension bodies call the budget's tick

    def evaluate(self, env: dict, functions: dict[str, Callable] | None = None) -> Any:
        """The expression's value. Every failure (a missing key, a type error,
        division by zero, overflow, the cost budget) is an ExpressionError
        naming the expression and where the spec wrote it."""
        if self.path is not None:
            return self._lookup(env, self.path)
        if not (self.functions or self.ticked):
            return self._evaluate_within(env, functions, None)
        run = _RUN_COST
        if run is not None:
            if run.why is not None:
                raise self._over_run_budget(run.why)
            started = time.perf_counter()  # not the CPU clock: a system call, read by few evaluations
        budget = _Budget(MAX_EVALUATION_STEPS, MAX_EVALUATION_SECONDS)
        token = _CURRENT.set(budget)
        try:
            return self._evaluate_within(env, functions, budget)
        finally:
            _CURRENT.reset(token)
            if run is not None:
                spent = time.perf_counter() - started
                if spent > CHARGED_FROM_SECONDS:
                    run.charge(spent)

    def _evaluate_within(self, env: dict, functions: dict[str, Callable] | None, budget: _Budget | None) -> Any:
        if self.fast is not None:
            try:
                return self.fast(env)
            except _NotFast:
                pass  # unexpected value shapes: let CEL decide (and report)
        elif self.subset is not None:
            try:
                return self.subset(env, functions)
            except NotSubset:
                if budget is not None and budget.spent:  # never run again what spent the budget
                    raise self._over_budget(budget) from None
                # values the subset does not judge exactly: CEL decides (and reports)
        return self._evaluate_by_cel(env, functions, budget)

    def _evaluate_by_cel(self, env: dict, functions: dict[str, Callable] | None, budget: _Budget | None) -> Any:
        target = self._cel_input(env, functions, budget)
        if budget is not None:
            budget.in_cel = True
            budget.start_clock()
        try:
            value = self.program.execute(target)
        except Exception as exc:
            raise self._failure(exc, budget) from None
        if budget is not None:
            budget.check_time()  # the CPU limit holds outside comprehensions too
            if budget.spent:  # an error of the budget swallowed by `||` or `&&`
                raise self._over_budget(budget)
        return value

    def _cel_input(self, env: dict, functions: dict[str, Callable] | None, budget: _Budget | None) -> Any:
        """What the CEL program executes on (the variables, or a context that
        also holds the functions and the budget's tick), and the budget."""
        # The binding converts every variable it is given into CEL values, so
        # hand it only the ones this expression uses (payloads can be large).
        # A map is handed over with only the fields the expression reads (a
        # spec's params hold long message templates that no guard reads).
        env = {
            name: env[name]
            if fields is None or not isinstance(env[name], dict)
            else {f: env[name][f] for f in fields if f in env[name]}
            for name, fields in self.reads
            if name in env
        }
        if budget is None:
            return env
        context = cel.Context()
        for name in self.functions:
            fn = (functions or {}).get(name) or PURE_FUNCTIONS.get(name)
            if fn is not None:
                context.add_function(name, fn)
        if self.ticked:
            context.add_function(_TICK, budget.tick)
        context.update(env)
        return context

    def _failure(self, exc: Exception, budget: _Budget | None) -> ExpressionError:
        """The ExpressionError for what the CEL program raised: the budget's,
        when it is spent and the error is not arithmetic or nesting."""
        if isinstance(exc, ZeroDivisionError):
            detail = _plain(exc, "division by zero")
        elif isinstance(exc, OverflowError):
            detail = f"integer overflow ({_plain(exc, 'overflow')})"
        elif isinstance(exc, RecursionError):
            detail = "nested too deeply to evaluate"
        elif budget is not None and budget.spent:
            return self._over_budget(budget)
        elif isinstance(exc, KeyError):
            detail = f"no field {exc.args[0]!r} in the value"
        else:
            detail = _plain(exc, type(exc).__name__)
        return ExpressionError(f"`{self.source}`: {detail}", self.where)

    def evaluate_each(self, env: dict, name: str, values: list) -> list | None:
        """The value for each of ``values`` bound to ``name`` in ``env`` (which
        is changed), by the direct Python evaluation in one loop; None when
        this expression has none or a value is not one it judges exactly
        (then evaluate each as usual)."""
        fast = self.fast
        if fast is None:
            return None
        out = []
        try:
            for value in values:
                env[name] = value
                out.append(fast(env))
        except _NotFast:
            return None
        return out

    def evaluate_bool(
        self, env: dict, functions: dict[str, Callable] | None = None, *, role: str = "a condition"
    ) -> bool:
        """The value of a guard, requirement, check, condition or invariant,
        which must be a boolean: anything else (a string, a number, null) is
        an ExpressionError, never silently true or false."""
        return self.boolean(self.evaluate(env, functions), role)

    def boolean(self, value: Any, role: str = "a condition") -> bool:
        """``value`` (this expression's result) if it is a boolean, else the ExpressionError saying so."""
        if not isinstance(value, bool):
            raise ExpressionError(
                f"`{self.source}` is {role} and must be true or false, but it gave "
                f"{_shown(value)} ({type_name(value)})",
                self.where,
            )
        return value

    def _over_budget(self, budget: _Budget) -> ExpressionError:
        return EvaluationBudgetError(
            f"`{self.source}`: evaluation stopped after {budget.why} (the cost budget of one "
            f"evaluation); loop over fewer values, nest fewer comprehensions or build smaller values",
            self.where,
        )

    def _over_run_budget(self, why: str) -> ExpressionError:
        return RunCostError(
            f"`{self.source}`: not evaluated: the expressions of this command spent its cost budget "
            f"({why} in all); an expression that takes most of a second at every evaluation (a deviation's "
            f"`when`, a guard over a large range) is the usual cause: loop over fewer values",
            self.where,
        )

    reads: tuple = ()  # (variable, the fields it reads, or None for all of it), for every variable
    path: tuple[str, ...] | None = None  # set when the expression is a plain dotted name
    fast: Callable[[dict], Any] | None = None  # exact Python evaluation of a few trivial shapes
    subset: Callable[[dict, dict | None], Any] | None = None  # exact Python evaluation of common CEL (cel_subset)

    def _lookup(self, env: dict, path: tuple[str, ...]) -> Any:
        head = path[0]
        if head not in env:
            raise ExpressionError(f"`{self.source}`: undefined name {head!r}", self.where)
        value = env[head]
        if len(path) == 1:
            return value
        for part in path[1:]:
            if not isinstance(value, dict) or part not in value:
                raise ExpressionError(f"`{self.source}`: no field {part!r} in the value", self.where)
            value = value[part]
        return value

    def unknown_names(self, variables: set[str] | frozenset[str]) -> list[str]:
        """Free variables and functions this expression uses that are not available."""
        missing = sorted(v for v in self.variables if v not in variables)
        missing += sorted(
            f"{f}()"
            for f in self.functions
            if f not in PURE_FUNCTIONS and f not in MODEL_FUNCTIONS and f not in _BUILTINS
        )
        return missing


def _plain(exc: BaseException, fallback: str) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else fallback


def _shown(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


class _NotFast(Exception):
    """A fast path met values it does not handle exactly like CEL."""


_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_PATH = rf"(?!(?:true|false|null|in)\b){_NAME}(?:\.{_NAME})*"
_MAP_ITEM = re.compile(rf"\s*'({_NAME})'\s*:\s*({_PATH})\s*")
_IN = re.compile(rf"^\s*({_PATH})\s+in\s+({_PATH})\s*$")
_NOT = re.compile(rf"^\s*!\s*({_PATH})\s*$")
# ``a.b == 'text'``, ``a.b != null``: a string literal without escapes or quotes, or null
_EQUALS = re.compile(rf"^\s*({_PATH})\s*(==|!=)\s*('[^'\\\"\n]*'|\"[^'\\\"\n]*\"|null)\s*$")
_PLAIN = (str, bool, int, float, list, dict, type(None))


def _constant(program: Any) -> Callable[[dict], Any]:
    """An expression without variables or functions has one value: computed
    once (by CEL), then handed out as a fresh copy so no caller can change it."""
    box: list = []

    def value(env):
        if not box:
            try:
                box.append(program.execute({}))
            except Exception:
                raise _NotFast() from None
        found = box[0]
        return copy.deepcopy(found) if isinstance(found, (list, dict)) else found

    return value


def _getter(path: str) -> Callable[[dict], Any]:
    head, *rest = path.split(".")
    if len(rest) == 1:  # `record.field`, by far the most common: one lookup each
        (field_name,) = rest

        def get_field(env: dict):
            value = env.get(head)
            if isinstance(value, dict) and field_name in value:
                return value[field_name]
            raise _NotFast()

        return get_field

    def get(env: dict):
        if head not in env:
            raise _NotFast()
        value = env[head]
        for part in rest:
            if not isinstance(value, dict) or part not in value:
                raise _NotFast()
            value = value[part]
        return value

    return get


FastPath = Callable[[dict], Any]


def _fast_path(source: str) -> FastPath | None:
    """Python evaluation for a few trivial shapes, with CEL's exact semantics for
    the value types they accept (anything else falls back to CEL): a map
    literal of field reads, ``a.b in c``, ``a.b == 'text'`` (or ``!=``, or
    null), and ``!a.b``."""
    text = source.strip()
    for shape in (_map_of_reads, _membership, _equality, _negation):
        fast = shape(text)
        if fast is not None:
            return fast
    return None


def _map_of_reads(text: str) -> FastPath | None:
    inner = text[1:-1]
    if not (text.startswith("{") and text.endswith("}")) or "{" in inner or "}" in inner:
        return None
    parts = inner.split(",") if inner.strip() else []
    items = [m for m in (_MAP_ITEM.fullmatch(part) for part in parts) if m is not None]
    if len(items) != len(parts):
        return None
    getters = [(m.group(1), _getter(m.group(2))) for m in items]
    return lambda env: {key: get(env) for key, get in getters}


def _membership(text: str) -> FastPath | None:
    match = _IN.match(text)
    if not match:
        return None
    item, container = _getter(match.group(1)), _getter(match.group(2))

    def contains(env):
        value, pool = item(env), container(env)
        if not isinstance(pool, list) or not isinstance(value, str) or not all(isinstance(p, str) for p in pool):
            raise _NotFast()
        return value in pool

    return contains


def _equality(text: str) -> FastPath | None:
    match = _EQUALS.match(text)
    if not match:
        return None
    get, negated, literal = _getter(match.group(1)), match.group(2) == "!=", match.group(3)
    wanted = None if literal == "null" else literal[1:-1]

    def equals(env):
        value = get(env)
        if not isinstance(value, _PLAIN):  # CEL's equality across these types is Python's
            raise _NotFast()
        same = value is None if wanted is None else (isinstance(value, str) and value == wanted)
        return same is not negated

    return equals


def _negation(text: str) -> FastPath | None:
    match = _NOT.match(text)
    if not match:
        return None
    get = _getter(match.group(1))

    def negate(env):
        value = get(env)
        if not isinstance(value, bool):
            raise _NotFast()
        return not value

    return negate


def fields_used(source: str, var: str) -> frozenset[str] | None:
    """The fields of ``var`` an expression reads (``var.field``), or None when it
    uses ``var`` as a whole (e.g. passes it to a function) and needs every field."""
    if re.search(rf"\b{re.escape(var)}\b(?!\s*\.)", source):
        return None
    return frozenset(re.findall(rf"\b{re.escape(var)}\.([A-Za-z_][A-Za-z0-9_]*)", source))


# Names that follow a value's dot without being one of its fields.
_METHOD_NAMES = frozenset(
    {
        "all",
        "exists",
        "exists_one",
        "map",
        "filter",
        "size",
        "contains",
        "startsWith",
        "endsWith",
        "matches",
        "keys",
        "values",
        "optMap",
        "optFlatMap",
        "orValue",
        "hasValue",
        "value",
        "or",
        "join",
        "split",
        "lowerAscii",
        "upperAscii",
        "trim",
        "replace",
        "indexOf",
        "lastIndexOf",
        "substring",
        "charAt",
        "format",
        "sort",
        "sortBy",
    }
)


def _fields_read(source: str, var: str) -> frozenset[str] | None:
    """The fields of the map ``var`` an expression can read, or None when it
    may read any (it uses ``var`` whole, calls a method on it, or selects a
    field in a way the plain ``var.field`` reading does not see)."""
    fields = fields_used(source, var)
    name = re.escape(var)
    if (
        fields is None
        or fields & _METHOD_NAMES
        or re.search(
            rf"\b{name}\s*\.\s*(?![A-Za-z_])|\b{name}\s+\.|"
            rf"\b{name}\.\s",
            source,
        )
    ):
        return None
    return fields


def compile_expression(source: Any, where: str, *, max_chars: int | None = MAX_EXPRESSION_CHARS) -> Expression:
    """Compile CEL text; raise ExpressionError with a readable message on bad
    syntax or an expression longer than ``max_chars``. Comprehension bodies
    are compiled to count their iterations against the cost budget."""
    source = _expression_text(source, where, max_chars)
    program, executable = _compile_cel(source, where)
    bound = set(_MACRO_VAR.findall(source))
    path = tuple(source.strip().split(".")) if _DOTTED.match(source.strip()) else None
    variables = frozenset(v for v in program.variables() if v not in bound)
    functions = frozenset(f for f in program.functions() if not _OPERATOR.match(f))
    fast = subset = None
    if path is None:
        constant = not variables and not functions and executable is program
        fast = _constant(program) if constant else _fast_path(source)
        if fast is None:
            subset = compile_subset(source, _subset_functions(functions))
    return Expression(
        source=source,
        where=where,
        program=executable,
        variables=variables,
        functions=functions,
        reads=tuple((v, _fields_read(source, v)) for v in sorted(variables)),
        ticked=executable is not program,
        path=path,
        fast=fast,
        subset=subset,
    )


def _expression_text(source: Any, where: str, max_chars: int | None) -> str:
    """The CEL text of a spec value (a YAML literal becomes its CEL spelling),
    refused when it is empty, too long or uses the budget's reserved name."""
    if isinstance(source, bool):
        source = "true" if source else "false"
    elif source is None:
        source = "null"
    elif isinstance(source, (int, float)):
        source = repr(source)
    if not isinstance(source, str) or not source.strip():
        raise ExpressionError("an expression must be a non-empty CEL string", where)
    if max_chars is not None and len(source) > max_chars:
        raise ExpressionError(
            f"the expression is {len(source)} characters long, over the {max_chars}-character "
            f"limit of one expression (`{source[:60]}...`)",
            where,
        )
    if _TICK in source:
        raise ExpressionError(f"`{_TICK}` is a name the kit reserves; use another name", where)
    return source


def _compile_cel(source: str, where: str) -> tuple[Any, Any]:
    """(the program as written, for its names; the program to run, whose
    comprehension bodies tick the budget: the same one when it has none)."""
    try:
        program = cel.compile(source)
        ticked_source = _with_ticks(source)
        executable = program if ticked_source == source else cel.compile(ticked_source)
    except (ValueError, RuntimeError) as exc:
        detail = str(exc).split("ERROR: <input>:", 1)[-1].strip()
        raise ExpressionError(f"invalid CEL expression `{source}`: {detail}", where) from None
    except RecursionError:
        raise ExpressionError(f"the expression is nested too deeply (`{source[:60]}...`)", where) from None
    return program, executable


def _subset_functions(functions: frozenset[str]) -> dict[str, Callable | None]:
    """The functions the CEL subset may call: the pure ones themselves, the
    model's as None (handed over at evaluation time)."""
    return {name: PURE_FUNCTIONS.get(name) for name in functions if name in PURE_FUNCTIONS or name in MODEL_FUNCTIONS}


# -------------------------------------------------- the cost budget's ticks

_MACRO_CALL = re.compile(r"\.\s*(" + "|".join(sorted(_MACROS, key=len, reverse=True)) + r")\s*\(")
_IDENT_CHAR = re.compile(r"[A-Za-z0-9_]")


def _string_end(text: str, i: int) -> int:
    """The index just past the string literal starting at ``i`` (a quote,
    possibly after an r/b prefix already skipped by the caller)."""
    raw = i > 0 and text[i - 1] in "rR" and (i < 2 or not _IDENT_CHAR.match(text[i - 2]))
    quote = text[i]
    if text.startswith(quote * 3, i):
        end = text.find(quote * 3, i + 3)
        while end != -1 and not raw and _escaped(text, end):
            end = text.find(quote * 3, end + 1)
        return len(text) if end == -1 else end + 3
    j = i + 1
    while j < len(text):
        if text[j] == "\\" and not raw:
            j += 2
            continue
        if text[j] == quote or text[j] == "\n":
            return j + 1
        j += 1
    return len(text)


def _escaped(text: str, index: int) -> bool:
    backslashes = 0
    while index - 1 - backslashes >= 0 and text[index - 1 - backslashes] == "\\":
        backslashes += 1
    return backslashes % 2 == 1


def _arguments(text: str, start: int) -> tuple[list[tuple[int, int]], int] | None:
    """The top-level argument spans of a call whose ``(`` is at ``start - 1``,
    and the index of its ``)``; None when the text ends first."""
    spans, depth, begin, i = [], 0, start, start
    while i < len(text):
        c = text[i]
        if c in "'\"":
            i = _string_end(text, i)
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            if depth == 0:
                spans.append((begin, i))
                return spans, i
            depth -= 1
        elif c == "," and depth == 0:
            spans.append((begin, i))
            begin = i + 1
        i += 1
    return None


def _with_ticks(text: str) -> str:
    """The expression with every comprehension body (the arguments after the
    loop variable) wrapped as ``kit_tick() ? (body) : null``: one tick per
    iteration, the body's value unchanged while the budget lasts."""
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c in "'\"":
            end = _string_end(text, i)
            out.append(text[i:end])
            i = end
            continue
        match = _MACRO_CALL.match(text, i) if c == "." else None
        if match:
            parsed = _arguments(text, match.end())
            if parsed is not None and len(parsed[0]) >= 2:
                spans, close = parsed
                first = text[spans[0][0] : spans[0][1]]
                bodies = [f"{_TICK}() ? ({_with_ticks(text[a:b])}) : null" for a, b in spans[1:]]
                out.append(f".{match.group(1)}({first}, {', '.join(bodies)})")
                i = close + 1
                continue
        out.append(c)
        i += 1
    return "".join(out)

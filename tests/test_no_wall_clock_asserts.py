"""No test asserts a wall-clock duration: on a busy machine (two cores, other
work beside the tests) any such limit fails although nothing is wrong. Tests
bound work in counts; a hang is caught by a limit on the whole run that the
hang itself outlasts; timings belong to benchmarks/."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
CLOCKS = {"monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns", "time", "time_ns"}
DURATIONS = {"seconds", "elapsed", "elapsed_s", "duration", "duration_s", "wall_s"}
ORDERINGS = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)


def _reads_a_clock(node: ast.AST) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            func = sub.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
            if name in CLOCKS:
                return True
        name = sub.attr if isinstance(sub, ast.Attribute) else sub.id if isinstance(sub, ast.Name) else None
        if name in DURATIONS or (isinstance(sub, ast.Subscript) and ast.unparse(sub.slice).strip("'\"") in DURATIONS):
            return True
    return False


def _a_limit(node: ast.AST) -> bool:
    """A number other than 0 (``> 0`` is a sanity check, not a limit)."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node = node.operand
    return isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and node.value != 0


def _a_duration(node: ast.AST) -> bool:
    """A clock reading or a duration; not the abs() of a difference (two figures
    of one measurement checked against each other)."""
    is_abs = isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "abs"
    return not is_abs and _reads_a_clock(node)


def duration_asserts(source: str) -> list[int]:
    """Lines of the asserts that hold a clock reading or a duration to a limit."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Assert):
            continue
        for compare in ast.walk(node.test):
            if not isinstance(compare, ast.Compare):
                continue
            sides = [compare.left, *compare.comparators]
            pairs = [(sides[i], op, sides[i + 1]) for i, op in enumerate(compare.ops) if isinstance(op, ORDERINGS)]
            if any((_a_duration(a) and _a_limit(b)) or (_a_limit(a) and _a_duration(b)) for a, _, b in pairs):
                found.append(node.lineno)
                break
    return found


def test_the_check_sees_a_duration_assert():
    source = (
        "import time\nstarted = time.monotonic()\nassert time.monotonic() - started < 5\n"
        "assert result.seconds < 20, 'slow'\nassert report['duration_s'] < 5\nassert len(x) < 5\n"
        "assert 0 < run.seconds <= other.seconds\nassert abs(a / b['seconds'] - r) < 0.01\n"
    )
    assert duration_asserts(source) == [3, 4, 5]


def test_no_test_asserts_a_wall_clock_duration():
    found = [
        f"{path.relative_to(TESTS)}:{line}"
        for path in sorted(TESTS.rglob("*.py"))
        for line in duration_asserts(path.read_text(encoding="utf-8"))
    ]
    assert not found, f"tests assert wall-clock durations (bound work in counts instead): {', '.join(found)}"

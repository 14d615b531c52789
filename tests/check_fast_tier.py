#!/usr/bin/env python3
"""Check the fast tier (``pytest -m "not slow"``) against what it promises
(CONTRIBUTING.md): it runs at least 60 % of the tests, green, and every module
of ``conformance/`` and ``statemachines/`` is imported and exercised by some
fast test.

"Exercised" means some line inside one of the module's functions ran, not only
its top level at import (a module with no function, such as a package's
``__init__`` re-exporting names, counts once imported). It is measured with
coverage.py over the fast tier as contributors run it (``-n auto``); the
``patch = subprocess`` setting also measures the xdist workers and the
``conformance`` processes the tests start.

Run it from an editable install (``pip install -e ".[test]"``)::

    python tests/check_fast_tier.py            # exit 0: every promise kept
    python tests/check_fast_tier.py -n 2       # extra arguments go to pytest

It prints the tier's share of the tests, its wall time under coverage (slower
than without: see CONTRIBUTING.md for the plain figure) and any module no fast
test reaches.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("conformance", "statemachines")
MIN_SHARE = 0.60
FAST = ("-m", "not slow")


@dataclass(frozen=True)
class TierRun:
    """What the fast tier's pytest run printed, and how long it took."""

    returncode: int
    summary: str
    wall_s: float


def collected(pytest_args: list[str]) -> int:
    """How many tests pytest selects with these arguments (a collection only).
    The share is counted this way because a run under xdist does not print
    how many tests its ``-m`` deselected."""
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", *pytest_args], cwd=ROOT, capture_output=True, text=True
    )
    found = re.search(r"(\d+)(?:/\d+)? tests? collected", proc.stdout)
    if proc.returncode != 0 or not found:
        raise SystemExit(f"collecting the tests failed:\n{proc.stdout[-5000:]}{proc.stderr[-5000:]}")
    return int(found.group(1))


def _coverage_config(data_dir: Path) -> Path:
    rc = data_dir / "coveragerc"
    rc.write_text(
        "[run]\n"
        "parallel = true\n"
        "patch = subprocess\n"
        f"source_pkgs = {', '.join(PACKAGES)}\n"
        f"data_file = {data_dir / '.coverage'}\n"
    )
    return rc


def run_fast_tier(rc: Path, pytest_args: list[str]) -> TierRun:
    parallel = [] if any(a.startswith(("-n", "--numprocesses")) for a in pytest_args) else ["-n", "auto"]
    command = [sys.executable, "-m", "coverage", "run", f"--rcfile={rc}", "-m", "pytest", *FAST, *parallel, "-q"]
    started = time.monotonic()
    proc = subprocess.run([*command, *pytest_args], cwd=ROOT, capture_output=True, text=True)
    wall_s = time.monotonic() - started
    lines = proc.stdout.strip().splitlines()
    summary = lines[-1] if lines else ""
    if proc.returncode != 0:
        sys.stdout.write(proc.stdout[-20000:] + proc.stderr[-5000:])
    return TierRun(proc.returncode, summary, wall_s)


def function_body_lines(source: str) -> set[int]:
    """The lines of statements inside the functions (and methods) of a module:
    they run only when something calls them, not at import."""
    lines: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for statement in node.body:
                lines.update(range(statement.lineno, (statement.end_lineno or statement.lineno) + 1))
    return lines


def unexercised_modules(rc: Path) -> list[str]:
    """The modules of PACKAGES that no fast test imported, or whose functions
    none of them called."""
    import coverage

    cov = coverage.Coverage(config_file=str(rc))
    cov.combine()
    data = cov.get_data()
    measured = {Path(f).resolve(): set(data.lines(f) or ()) for f in data.measured_files()}
    missing = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            ran = measured.get(path.resolve(), set())
            body = function_body_lines(path.read_text(encoding="utf-8"))
            if not ran or (body and not ran & body):
                missing.append(f"{path.relative_to(ROOT)}: {'called' if ran else 'imported'} by no fast test")
    return missing


def main(pytest_args: list[str]) -> int:
    with tempfile.TemporaryDirectory(prefix="fast-tier-coverage-") as tmp:
        rc = _coverage_config(Path(tmp))
        tier = run_fast_tier(rc, pytest_args)
        print(f"fast tier: {tier.summary} ({tier.wall_s:.0f} s wall under coverage)")
        problems = [] if tier.returncode == 0 else [f"the fast tier is not green (pytest exit {tier.returncode})"]
        fast, every = collected([*FAST]), collected([])
        share = fast / every
        if share < MIN_SHARE:
            problems.append(
                f"the fast tier runs {share:.0%} of the tests ({fast} of {every}), fewer than {MIN_SHARE:.0%}"
            )
        else:
            print(f"it runs {share:.0%} of the tests ({fast} of {every})")
        problems += unexercised_modules(rc)
    for problem in problems:
        print(f"FAIL {problem}")
    if not problems:
        print(f"every module of {' and '.join(PACKAGES)} is exercised by a fast test")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

#!/usr/bin/env python3
"""Run the test suite against the kit as users get it.

Builds the wheel from this checkout, installs it (not editable) into a fresh
virtual environment outside the repository, and runs pytest from a directory
outside the source tree with ``-P``, so the checkout cannot shadow the
installed package (tests/conftest.py checks that it does not). Needs only a
Python 3.11+ with venv; everything else comes from the package index.

    python3 tests/run_installed.py            # the whole suite, a pytest-xdist worker per core and one more
    python3 tests/run_installed.py -k stdio   # extra arguments go to pytest
    python3 tests/run_installed.py -n 0       # any -n/--dist/-p no:xdist of yours replaces the default
    python3 tests/run_installed.py --hypothesis lowest -m "hypothesis and not slow"   # oldest Hypothesis

``--hypothesis VERSION`` installs that Hypothesis beside the kit (``lowest``:
the lower bound pyproject.toml declares; without the option pip picks the
newest). CI (``.ci/run``) runs the whole suite with the newest and the fast
tests that drive Hypothesis (tests/hypothesis_marker.py) again with
``lowest``, so both ends of the declared range are tested.

The tests run in parallel (``parallel_defaults`` below): one worker more than
the machine has cores, since part of every long test waits on the processes
and threads it drives (on the 2-core machine the project builds on, the suite
took 16 min 27 s with three workers and 18 min 32 s with two, run after run
the same day). Tests that must not share the machine with others would carry
``xdist_group`` markers, which ``--dist loadgroup`` keeps on one worker each.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEST_EXTRAS = "test"


def default_workers(cores: int | None = None) -> int:
    """pytest-xdist workers for the whole suite: one per core, and one more."""
    return (cores if cores is not None else os.cpu_count() or 1) + 1


PARALLEL = ("-n", str(default_workers()), "--dist", "loadgroup")
# Arguments that say how to run in parallel (or not): with any of them, PARALLEL is left out.
_PARALLEL_OPTIONS = ("-n", "--numprocesses", "--dist", "-d", "--tx", "no:xdist")


def parallel_defaults(argv: list[str]) -> tuple[str, ...]:
    """PARALLEL, unless the caller's pytest arguments already say how to
    distribute the tests (``-n 0``, ``-n4``, ``--dist load``, ``-p no:xdist``)."""
    for arg in argv:
        if arg in _PARALLEL_OPTIONS or any(arg.startswith(f"{opt}=") for opt in _PARALLEL_OPTIONS):
            return ()
        if arg.startswith("-n") and arg[2:].isalnum():  # -n4, -nauto
            return ()
    return PARALLEL


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python3 tests/run_installed.py",
        description="Run the test suite against the kit built as a wheel and installed in a fresh "
        "virtual environment. Every argument this script does not know goes to pytest.",
        epilog="examples: -k stdio | -n 0 | --hypothesis lowest -m 'hypothesis and not slow'",
        allow_abbrev=False,
    )
    parser.add_argument(
        "--hypothesis",
        metavar="VERSION",
        help="install this Hypothesis beside the kit ('lowest': the lower bound pyproject.toml declares; "
        "default: the newest)",
    )
    return parser


def hypothesis_option(argv: list[str]) -> tuple[str | None, list[str]]:
    """``--hypothesis VERSION`` (or ``--hypothesis=VERSION``) taken out of the
    arguments: (VERSION or None, the rest, for pytest). ``lowest`` becomes
    the lower bound pyproject.toml declares. ``--help`` prints the usage and
    exits, before anything is built."""
    options, rest = _parser().parse_known_args(argv)
    version = options.hypothesis
    if version == "lowest":
        version = declared_lowest_hypothesis()
    return version, rest


def declared_lowest_hypothesis(pyproject: Path = ROOT / "pyproject.toml") -> str:
    """The lower bound of the ``hypothesis>=`` dependency pyproject.toml declares."""
    found = re.search(r'"hypothesis>=([0-9][0-9.]*)', pyproject.read_text(encoding="utf-8"))
    if not found:
        raise SystemExit(f"{pyproject}: no `hypothesis>=VERSION` dependency to take the lowest version from")
    return found.group(1)


def _run(argv: list[str | Path]) -> None:
    print("+ " + " ".join(str(a) for a in argv), flush=True)
    subprocess.run(argv, check=True)


def main(argv: list[str]) -> int:
    hypothesis_version, argv = hypothesis_option(argv)
    work = Path(tempfile.mkdtemp(prefix="lifecycle-conformance-test-"))
    try:
        env_dir, wheels, outside = work / "venv", work / "dist", work / "cwd"
        outside.mkdir()
        venv.EnvBuilder(with_pip=True, clear=True).create(env_dir)
        python = env_dir / ("Scripts" if os.name == "nt" else "bin") / "python"
        _run([python, "-m", "pip", "install", "-q", "--upgrade", "pip"])
        _run([python, "-m", "pip", "wheel", "-q", "--no-deps", "-w", wheels, ROOT])
        wheel = next(wheels.glob("lifecycle_conformance-*.whl"))
        pins = [f"hypothesis=={hypothesis_version}"] if hypothesis_version else []
        _run([python, "-m", "pip", "install", "-q", f"{wheel}[{TEST_EXTRAS}]", *pins])
        _run([python, "-c", "import hypothesis; print('Hypothesis', hypothesis.__version__)"])
        env = dict(os.environ, CONFORMANCE_TEST_INSTALLED="1", CONFORMANCE_REPO=str(ROOT))
        env.pop("PYTHONPATH", None)
        command: list[str | Path] = [
            python,
            "-P",
            "-m",
            "pytest",
            "-c",
            ROOT / "pyproject.toml",
            "--rootdir",
            ROOT,
            ROOT / "tests",
            *parallel_defaults(argv),
            *argv,
        ]
        print("+ " + " ".join(str(a) for a in command), flush=True)
        return subprocess.run(command, cwd=outside, env=env).returncode
    except subprocess.CalledProcessError as exc:
        print(f"setting up the installed kit failed: {exc}", file=sys.stderr)
        return 2
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

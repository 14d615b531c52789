"""How the ``conformance`` command starts and ends: ``main`` (for programs
and worker processes), ``console_main`` (the console script), and the rules
they share: signals stop a run, errors become exit codes, and a process that
an implementation's threads would keep alive exits anyway."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
import traceback
from collections.abc import Callable, MutableMapping
from pathlib import Path

import click

from ..errors import ConformanceError
from .common import cli, console, errors

__all__ = ["main", "console_main", "run_guarded", "hypothesis_files_in_cache"]

# Hypothesis reads it when it first needs a file (in every release the kit supports).
HYPOTHESIS_STORAGE = "HYPOTHESIS_STORAGE_DIRECTORY"


def main(argv: list[str] | None = None) -> None:
    """The ``conformance`` command line with ``argv`` (default: ``sys.argv``);
    ends with SystemExit carrying the exit code."""
    run_guarded(lambda: cli.main(args=argv, prog_name="conformance", standalone_mode=False))


def run_guarded(command: Callable[[], object]) -> None:
    """Run ``command`` as the ``conformance`` command runs (``_guarded``), then
    exit: with its code, or 0 when it returns something else."""
    try:
        _guarded(command)
    except SystemExit as exc:
        _exit_despite_threads(exc)
        raise


def console_main() -> None:
    """The ``conformance`` command: ``main``, then exit at once. When the
    command is done (its reports written, its output flushed, its exit
    handlers run) nothing is left to do but free memory, and a run's worth of
    objects takes the interpreter's own shutdown a tenth of a second or more,
    on every start of the command (each ``--workers`` run, each CI job); so
    the process ends with ``os._exit``. ``main`` itself, for a program that
    calls it, returns as any function does."""
    hypothesis_files_in_cache(os.environ)  # not in the user's working directory; workers inherit it
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = _exit_code(exc)
    atexit._run_exitfuncs()  # adapter programs stopped, temporary directories removed, logging flushed
    _flush_output()
    os._exit(code)


def hypothesis_files_in_cache(environ: MutableMapping[str, str]) -> Path | None:
    """Have Hypothesis keep its working files in the user's cache directory
    (``$XDG_CACHE_HOME`` or ``~/.cache``, then ``lifecycle-conformance/hypothesis``),
    through HYPOTHESIS_STORAGE_DIRECTORY in ``environ``, and return it; None,
    changing nothing, when that variable already says where.

    Besides an example database (the kit's is under the report directory),
    Hypothesis keeps the table of Unicode categories its text strategies
    read, worked out from ``unicodedata`` in a second or more when missing,
    and its temporary files, by default under ``.hypothesis`` in the working
    directory: every ``conformance`` command run from a new directory worked
    the table out again and left a ``.hypothesis`` there. Now it is worked
    out once per user. Where no cache directory can be made (no home,
    read-only), a temporary directory is used and removed at exit. Only the
    command does this (a program calling ``main`` keeps its own settings), and
    Hypothesis is not imported for it."""
    if environ.get(HYPOTHESIS_STORAGE):
        return None
    directory = _user_cache(environ)
    if directory is None:
        directory = Path(tempfile.mkdtemp(prefix="lifecycle-conformance-hypothesis-"))
        atexit.register(shutil.rmtree, directory, ignore_errors=True)
    environ[HYPOTHESIS_STORAGE] = str(directory)
    return directory


def _user_cache(environ: MutableMapping[str, str]) -> Path | None:
    xdg = environ.get("XDG_CACHE_HOME") or ""
    try:
        # The XDG rules: a relative path in the variable is to be ignored.
        base = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".cache"
        directory = base / "lifecycle-conformance" / "hypothesis"
        directory.mkdir(parents=True, exist_ok=True)
    except (OSError, RuntimeError):  # no home directory, or none that can be written
        return None
    return directory if os.access(directory, os.W_OK) else None


def _exit_code(exc: SystemExit) -> int:
    """The process's exit code for ``exc`` (a message instead of a code is said, and exits 1)."""
    if exc.code is None:
        return 0
    if not isinstance(exc.code, int):
        errors.print(str(exc.code), markup=False)
        return 1
    return exc.code


def _flush_output() -> None:
    for stream in (console.file, errors.file, sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass


def _exit_despite_threads(exc: SystemExit) -> None:
    """Exit with this code now if non-daemon threads (an in-process
    implementation's, left running) would keep the interpreter waiting for
    them forever: flush, run the exit handlers (they stop adapter programs
    and remove temporary directories) for a bounded time, then ``os._exit``.
    The run's report already says which threads were left."""
    import threading

    left = [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon and t.is_alive()]
    if not left:
        return
    code = _exit_code(exc)
    cleanup = threading.Thread(target=atexit._run_exitfuncs, daemon=True, name="conformance-exit")
    cleanup.start()
    cleanup.join(5.0)
    _flush_output()
    os._exit(code)


def _guarded(command: Callable[[], object]) -> None:
    """``command`` with SIGINT and SIGTERM stopping the run, ending in SystemExit:
    2 for a kit error or a usage error, 130/143 interrupted, an internal error
    said plainly (its traceback with CONFORMANCE_DEBUG=1)."""
    from ..engine.interrupts import interrupt_exit_code, signals_stop_the_run

    try:
        # Not click's standalone mode: it turns Ctrl-C into "Aborted!" and
        # exit 1, the code for "does not conform".
        with signals_stop_the_run():
            code = command()
    except ConformanceError as exc:
        errors.print(f"error: {exc}", markup=False)
        sys.exit(2)
    except click.exceptions.Abort as exc:  # click's wrapping of a KeyboardInterrupt (or EOF at a prompt)
        errors.print("interrupted", markup=False)
        sys.exit(interrupt_exit_code(exc.__cause__) if exc.__cause__ is not None else 130)
    except KeyboardInterrupt as exc:
        errors.print("interrupted", markup=False)
        sys.exit(interrupt_exit_code(exc))
    except click.ClickException as exc:  # usage errors: click's own message and exit code 2
        exc.show()
        sys.exit(exc.exit_code)
    except SystemExit:
        raise
    except Exception as exc:  # a bug in the kit itself: say so plainly, keep details for --debug
        errors.print(f"internal error in the conformance kit: {type(exc).__name__}: {exc}", markup=False)
        if os.environ.get("CONFORMANCE_DEBUG"):
            traceback.print_exc(file=errors.file)
        else:
            errors.print("set CONFORMANCE_DEBUG=1 to see the traceback", markup=False)
        sys.exit(2)
    sys.exit(code if isinstance(code, int) else 0)

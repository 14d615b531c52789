"""The tool's entry point: the reference tool, or one of its shipped faulty
variants when ``ASYNC_CLI_MUTANT`` names it. Kept apart from ``tool`` so that
the mutants (subclasses of the tool) and the tool do not import each other."""

from __future__ import annotations

import os
import sys

from .mutants import MUTANT_CLASSES
from .tool import EXIT_USAGE, AsyncCli, UsageError

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Run one invocation. ``ASYNC_CLI_MUTANT`` selects one of the shipped
    faulty variants (lifecycle_references.async_cli.mutants) instead."""
    cls = AsyncCli
    name = os.environ.get("ASYNC_CLI_MUTANT")
    if name:
        if name not in MUTANT_CLASSES:
            sys.stderr.write(f"unknown ASYNC_CLI_MUTANT {name!r}\n")
            return EXIT_USAGE
        cls = MUTANT_CLASSES[name]
    try:
        cli = cls()
    except UsageError as exc:
        sys.stderr.write(f"async-cli: {exc}\n")
        return EXIT_USAGE
    return cli.run(sys.argv[1:] if argv is None else argv)

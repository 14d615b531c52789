"""The ``conformance`` command: one module per family of commands, all on
the ``cli`` group (``common``), started by ``main`` or ``console_main``
(``entry``).

- ``run``: check an implementation (in this process or in workers)
- ``replay``: replay, check-trace, merge-reports
- ``spec_tools``: validate, lint, diff, check-spec
- ``catalog``: specs, docs, schema
- ``mutants``, ``init``

Exit codes: 0 the implementation conforms (or the spec is valid, or every
mutant was killed); 1 it does not; 2 a usage, spec or adapter-loading error.
"""

from __future__ import annotations

from . import catalog, init, mutants, replay, run, spec_tools  # noqa: F401  # each adds its commands to cli
from .common import cli
from .entry import console_main, main

__all__ = ["main", "cli", "console_main"]

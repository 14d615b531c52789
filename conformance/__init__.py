"""lifecycle-conformance: check a job or task lifecycle implementation against
a spec. The surface users write against::

    from conformance import Adapter, RunConfig, run_conformance, conformance_suite

Rooms (see ARCHITECTURE.md): ``conformance.adapters`` reaches an
implementation (Python, stdio, command line), ``conformance.engine`` judges it,
``conformance.reporting`` writes what it found; ``cli``, ``pytest_plugin`` and
``mutants`` are the front doors. Names load lazily, so that an implementation
importing ``Adapter`` pulls in nothing else of the kit.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "Adapter",
    "EffectRecorder",
    "error_response",
    "result_response",
    "RunConfig",
    "run_conformance",
    "conformance_suite",
    "ConformanceError",
    "resolve_spec",
    "bundled_specs",
    "exploration_testcase",
]

_WHERE = {
    "Adapter": "conformance.adapters.adapter",
    "EffectRecorder": "conformance.adapters.adapter",
    "error_response": "conformance.adapters.adapter",
    "result_response": "conformance.adapters.adapter",
    "RunConfig": "conformance.engine.runner",
    "run_conformance": "conformance.engine.runner",
    "conformance_suite": "conformance.pytest_plugin",
    "ConformanceError": "conformance.errors",
    "resolve_spec": "conformance.specs",
    "bundled_specs": "conformance.specs",
    "exploration_testcase": "conformance.fuzzing",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        value = getattr(importlib.import_module(_WHERE[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'conformance' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

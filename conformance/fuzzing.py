"""The stateful exploration as a plain Hypothesis test, for long campaigns.

    # tests/test_conformance_fuzz.py
    from conformance import exploration_testcase

    TestThreadJobsExploration = exploration_testcase("thread-jobs", adapter="my_runtime.conformance:Adapter")

That is a ``unittest.TestCase`` whose ``runTest`` is the kit's generated
exploration as a ``@given`` test (``stateful.exploration_test``: the same
steps, model and checks as ``conformance run``): pytest runs it like any
test, and HypoFuzz runs it for hours across cores::

    hypothesis fuzz -n 4 -- tests/test_conformance_fuzz.py

Failures HypoFuzz finds go to Hypothesis's example database (the default
``.hypothesis/examples``, shared with pytest), so a plain ``pytest`` of the
same file replays them first and fails with the kit's message: the broken
rule, expected and observed values, and the steps that lead there.
Unlike ``conformance run`` there is no fixed seed and no shrinking budget:
a fuzzer wants fresh randomness, and the database keeps what it found.
"""

from __future__ import annotations

import sys
import unittest
import warnings
from pathlib import Path
from typing import Any

import hypothesis
from hypothesis import HealthCheck
from hypothesis import settings as Settings

from statemachines import SpecError

from .engine.hypothesis_support import LOWEST_TESTED, NEWEST_TESTED
from .engine.runner import RunConfig, prepare
from .engine.session import DEFAULT_TIMEOUT_S
from .engine.stateful import PROFILES, Explorer, _Stats, build_example, exploration_test
from .errors import AdapterLoadError, ConformanceError

__all__ = ["exploration_testcase", "ExplorationSetupError", "HypoFuzzCompatibilityWarning", "HYPOFUZZ_ALIAS_MISSING"]

_UNSET: Any = object()


HYPOFUZZ_ALIAS_MISSING = (
    "conformance.fuzzing: this Hypothesis ({version}) keeps a shrunk failure's explain-phase comments "
    "neither as `slice_comments` (what HypoFuzz 25.11 reads) nor as `span_comments` (what the kit can "
    "alias), so a HypoFuzz worker may crash right after shrinking a failure it found, before saving it. "
    "Exploration tests still run under pytest; for fuzzing campaigns install a Hypothesis the kit is "
    'tested with (pip install "hypothesis>={lowest},<={newest}") or a HypoFuzz release that knows this one.'
)


class HypoFuzzCompatibilityWarning(UserWarning):
    """HypoFuzz may not be able to save what it finds with this Hypothesis."""


def _hypofuzz_compatibility(result_class: Any = _UNSET) -> bool:
    """HypoFuzz (25.11) reads a shrunk failure's explain-phase comments as
    ``slice_comments``, which Hypothesis (6.170) now calls ``span_comments``:
    without the old name a fuzz worker crashes right after shrinking the
    failure it found, before it saves the shrunk failure, and the unshrunk
    one it saved first is written by a background thread the crash may cut
    off (a later ``pytest`` then has nothing to replay). The old name is
    given back, read-only, as an alias of the new one, only where it is
    missing; nothing else about Hypothesis changes. A Hypothesis with
    neither name (or without the class) gets a ``HypoFuzzCompatibilityWarning``
    saying so and what to install; False then."""
    if result_class is _UNSET:
        try:
            from hypothesis.internal.conjecture.data import ConjectureResult as result_class
        except ImportError:
            result_class = None
    fields: Any = getattr(result_class, "__dataclass_fields__", None) or getattr(result_class, "__attrs_attrs__", ())
    names = set(fields) if isinstance(fields, dict) else {getattr(f, "name", None) for f in fields}
    if result_class is not None and (hasattr(result_class, "slice_comments") or "slice_comments" in names):
        return True
    if result_class is not None and "span_comments" in names:
        result_class.slice_comments = property(lambda result: result.span_comments)
        return True
    warnings.warn(
        HYPOFUZZ_ALIAS_MISSING.format(version=hypothesis.__version__, lowest=LOWEST_TESTED, newest=NEWEST_TESTED),
        HypoFuzzCompatibilityWarning,
        stacklevel=2,
    )
    return False


_hypofuzz_compatibility()


class ExplorationSetupError(ConformanceError):
    """The spec or the implementation of an exploration test could not be set up."""


def exploration_testcase(
    spec: str,
    *,
    adapter: str | None = None,
    adapter_options: dict | None = None,
    adapter_cmd: str | None = None,
    adapter_cli: str | None = None,
    profile: str = "ci",
    timeout_s: float = DEFAULT_TIMEOUT_S,
):
    """A ``unittest.TestCase`` class running the exploration of ``spec``
    (a bundled spec's name, or a path relative to the calling module)
    against an implementation (the spec's reference when none is given).

    The implementation starts now, when the test module is imported, and
    serves every example of the process; ``profile`` sets the examples and
    steps of one pytest run (HypoFuzz ignores the example count)."""
    if profile not in PROFILES:
        raise ValueError(f"profile {profile!r} is not one of {', '.join(PROFILES)}")
    caller = sys._getframe(1).f_globals.get("__file__")
    base = Path(caller).resolve().parent if caller else Path.cwd()
    spec_path = str(base / spec) if (base / spec).is_file() else spec
    adapter_cli = str(base / adapter_cli) if adapter_cli and (base / adapter_cli).is_file() else adapter_cli
    config = RunConfig(
        spec_path=spec_path,
        adapter=adapter,
        adapter_options=dict(adapter_options or {}),
        adapter_cmd=adapter_cmd,
        adapter_cli=adapter_cli,
        profile=profile,
        report_dir=None,
        timeout_s=timeout_s,
    )
    try:
        prepared = prepare(config)
    except (SpecError, AdapterLoadError) as exc:
        raise ExplorationSetupError(f"cannot set up the exploration of {spec}: {exc}") from None
    capabilities = prepared.identity.get("capabilities") or {}
    explorer = Explorer(prepared.spec, prepared.params, bool(capabilities.get("concurrent")))
    prepared.session.defer_model_invariants = True  # checked once per step, as in `conformance run`
    # Hypothesis and HypoFuzz shrink as long as they like, and keep every failure they meet.
    stats = _Stats(shrink_s=float("inf"), pin=False)
    name = f"Exploration_{prepared.spec.id.replace('-', '_')}"
    steps = PROFILES[profile]["stateful_step_count"]
    # No database here: the default one, shared by pytest and HypoFuzz, keeps failures.
    # Every health check off but nested_given (HypoFuzz skips a test that suppresses
    # it; the exploration nests no @given).
    settings = Settings(
        max_examples=PROFILES[profile]["max_examples"],
        stateful_step_count=steps,
        deadline=None,
        suppress_health_check=[check for check in HealthCheck if check.name != "nested_given"],
    )
    run_test = exploration_test(
        build_example(prepared.spec, prepared.session, explorer, stats),
        explorer.draw_step,
        step_count=steps,
        settings=settings,
        method=True,
        key=f"exploration:{prepared.spec.id}:{prepared.target}",
    )
    # A plain TestCase whose one test is the @given exploration: pytest runs it,
    # HypoFuzz fuzzes it as any Hypothesis test.
    return type(
        name,
        (unittest.TestCase,),
        {
            "runTest": run_test,
            "conformance_session": prepared.session,
            "__module__": sys._getframe(1).f_globals.get("__name__", __name__),
        },
    )

"""pytest integration: a team's own test suite runs the kit on its implementation.

In a test module::

    from conformance.pytest_plugin import conformance_suite

    test_thread_jobs = conformance_suite("spec/thread-jobs.yaml",
                                         adapter="my_runtime.conformance:Adapter")

collects one test item per scenario, named by its id (``test_thread_jobs[N1]``
...), plus ``test_thread_jobs[stateful]`` for the generated exploration.
``--conformance-profile`` and ``--conformance-seed`` override the defaults.
The items run on the same engine as the ``conformance`` command.
"""
from __future__ import annotations

import pytest

# The plugin loads with every pytest run: keep it light (no Hypothesis import
# here); the engine is imported when a suite is built.
PROFILE_NAMES = ("ci", "deep", "quick")

__all__ = ["conformance_suite", "pytest_addoption"]

STATEFUL_ID = "stateful"


def pytest_addoption(parser) -> None:
    group = parser.getgroup("conformance", "lifecycle conformance kit")
    group.addoption("--conformance-profile", choices=PROFILE_NAMES, default=None,
                    help="stateful exploration profile for conformance_suite items")
    group.addoption("--conformance-seed", type=int, default=None, help="seed of the stateful exploration")


def conformance_suite(spec_path: str, *, adapter: str | None = None, adapter_options: dict | None = None,
                      profile: str = "quick", seed: int = 1, stateful: bool = True, timeout_s: float = 10.0):
    """A parametrized pytest test function: one item per scenario, plus the exploration."""
    from statemachines import SpecError, load_spec

    from .errors import AdapterLoadError
    from .reporting._format import failure_text
    from .engine.runner import RunConfig, prepare, run_command
    from .engine.scenarios import run_scenario
    from .engine.stateful import run_stateful

    try:
        ids = [scenario.id for scenario in load_spec(spec_path).scenarios]
    except SpecError as exc:
        # Collection must not crash with a traceback: one item reports the spec's problems.
        message = str(exc)

        @pytest.mark.parametrize("case", ["spec"])
        def invalid_spec(case):
            pytest.fail(message, pytrace=False)
        return invalid_spec
    if stateful:
        ids.append(STATEFUL_ID)

    state: dict = {}

    def _prepared(request):
        """One implementation instance for all items of this suite, closed at the end of the run."""
        if "error" in state:
            pytest.fail(state["error"], pytrace=False)
        if "prepared" not in state:
            config = RunConfig(spec_path=spec_path, adapter=adapter, adapter_options=dict(adapter_options or {}),
                               profile=request.config.getoption("--conformance-profile") or profile,
                               seed=request.config.getoption("--conformance-seed") or seed,
                               report_dir=None, timeout_s=timeout_s)
            try:
                state["prepared"] = prepare(config)
            except (SpecError, AdapterLoadError) as exc:
                state["error"] = f"cannot start the conformance run: {exc}"
                pytest.fail(state["error"], pytrace=False)
            state["config"] = config
            request.config.add_cleanup(state["prepared"].session.close)
        return state["config"], state["prepared"]

    @pytest.mark.parametrize("case", ids)
    def test_conformance(case, request):
        config, prepared = _prepared(request)
        capabilities = prepared.identity.get("capabilities") or {}
        report = {"replay": None}
        if case == STATEFUL_ID:
            outcome = run_stateful(prepared.spec, prepared.session, profile=config.profile, seed=config.seed,
                                   capabilities=capabilities)
            if outcome.failure is not None:
                outcome.failure.replay = (f"{run_command(config, prepared.target)} "
                                          f"--profile {config.profile} --seed {config.seed} --no-scenarios")
                pytest.fail(failure_text(outcome.failure.to_dict(), report), pytrace=False)
            return
        scenario = next(s for s in prepared.spec.scenarios if s.id == case)
        outcome = run_scenario(prepared.session, scenario, capabilities)
        if outcome.verdict == "skip":
            pytest.skip(outcome.note or "skipped")
        if outcome.failure is not None:
            outcome.failure.replay = f"{run_command(config, prepared.target)} --scenario {case}"
            pytest.fail(failure_text(outcome.failure.to_dict(), report), pytrace=False)

    return test_conformance

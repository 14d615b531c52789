"""Running the kit against a spec's shipped mutants: faulty variants of its
reference implementation that the kit must catch."""

from __future__ import annotations

import dataclasses
import functools
import threading
from dataclasses import dataclass
from typing import Any

from .adapters.python import resolve_target
from .engine.budgets import MAX_FAILURES
from .engine.runner import RunConfig, run_conformance
from .errors import AdapterLoadError

__all__ = [
    "MutantResult",
    "load_mutants",
    "run_mutant",
    "explore_mutant",
    "mutant_config",
    "as_run_reports",
    "declared_profile",
]


@dataclass
class MutantResult:
    name: str
    description: str
    killed_by_scenarios: list[str]
    found_by_exploration: bool
    exploration_kind: str | None
    exploration_message: str | None
    error: str | None = None
    counterexample_steps: int | None = None  # steps of the exploration's (reduced) counterexample
    errored_scenarios: list[str] = dataclasses.field(default_factory=list)  # of killed_by_scenarios: errors, not fails

    @property
    def killed(self) -> bool:
        return bool(self.killed_by_scenarios) or self.found_by_exploration


def load_mutants(target: str) -> dict:
    mutants = resolve_target(target)
    if not isinstance(mutants, dict) or not mutants:
        raise AdapterLoadError(f"{target} must be a non-empty dict of name -> mutant")
    for name, mutant in mutants.items():
        if not callable(getattr(mutant, "factory", None)):
            raise AdapterLoadError(f"mutant {name} in {target} has no factory()")
    return mutants


def declared_profile(mutant, options: dict, timeout_s: float) -> tuple[bool, str | None]:
    """Whether the mutant's implementation starts with these adapter options
    (``profile=NAME`` chooses a profile of the spec, as for ``conformance run
    --adapter-opt``): ``(True, the profile its describe() declares)``, or
    ``(False, why not)`` -- e.g. its reference does not offer that profile."""
    box: list = []

    def probe() -> None:
        try:
            adapter = mutant.factory(**options)
            try:
                identity = adapter.describe()
            finally:
                adapter.close()
            box.append((True, identity.get("profile") if isinstance(identity, dict) else None))
        except Exception as exc:
            box.append((False, f"{type(exc).__name__}: {exc}"))

    worker = threading.Thread(target=probe, daemon=True, name="mutant-probe")
    worker.start()
    worker.join(timeout_s)
    return box[0] if box else (False, f"it did not start and describe itself within {timeout_s:g}s")


def mutant_config(
    spec_path: str,
    name: str,
    mutant,
    *,
    profile: str,
    seed: int,
    timeout_s: float,
    shrink_s: float = 0.0,
    reduce_replays: int = 0,
    beyond_pools: float | None = None,
) -> RunConfig:
    """The run of one mutant (no report files; shrinking and the replay
    reduction off unless asked): ``run_mutant`` runs its scenarios and its
    exploration apart; ``explore_mutant`` runs the exploration alone."""
    return RunConfig(
        spec_path=spec_path,
        adapter_factory=mutant.factory,
        adapter_label=f"mutant:{name}",
        profile=profile,
        seed=seed,
        report_dir=None,
        timeout_s=timeout_s,
        shrink_s=shrink_s,
        reduce_replays=reduce_replays,
        beyond_pools=beyond_pools,
    )


def as_run_reports(config: RunConfig) -> RunConfig:
    """``config`` (from ``mutant_config``) with a failure shrunk and reduced
    by its profile's budgets, and the hunt for more failures bounded by
    ``--max-failures``' default: the counterexample `conformance run` reports
    by default, whose length issue 33's per-seed gate holds to 1.5 times
    the mutant's declared shortest."""
    return dataclasses.replace(config, shrink_s=None, reduce_replays=None, max_failures=MAX_FAILURES)


def run_mutant(
    spec_path: str,
    name: str,
    mutant,
    *,
    options: dict | None = None,
    record_dir: str | None = None,
    **run: Any,
) -> MutantResult:
    """Run the scenarios, then the exploration alone, against one mutant.
    ``run`` is ``mutant_config``'s keywords: ``profile`` (the exploration's
    depth: quick, ci, deep), ``seed``, ``timeout_s``, and optionally
    ``shrink_s`` and ``reduce_replays``. ``options`` are passed to the
    mutant's factory (``{"profile": "psi-runtime"}``: that profile of the
    spec). Hypothesis's shrinking and the replay reduction are off by default:
    whether the exploration finds the bug is what counts here. With
    ``reduce_replays``, the failure found is reduced by replaying it and
    ``counterexample_steps`` says how many steps it kept. With ``record_dir``,
    the scenarios' traces are recorded there (one file per scenario)."""
    base = _with_options(mutant_config(spec_path, name, mutant, **run), mutant, options)
    scenarios = _scenario_matrix(base, record_dir)
    if scenarios["verdict"] == "error":
        return _not_run(name, mutant, scenarios)
    explored = explore_mutant(base, mutant)
    return dataclasses.replace(
        explored,
        killed_by_scenarios=[s["id"] for s in scenarios["scenarios"] if s["verdict"] in ("fail", "error")],
        errored_scenarios=[s["id"] for s in scenarios["scenarios"] if s["verdict"] == "error"],
    )


def _scenario_matrix(base: RunConfig, record_dir: str | None) -> dict:
    """The scenario matrix against a mutant, in two passes. First every
    scenario that races calls runs once instead of ``race_runs`` times: a bug
    that shows without a race shows there, for a fraction of the calls (with
    a process per call, the repeated races were three quarters of them).
    Only if no scenario failed does the matrix run again with every racing
    scenario's full runs, since a race may need many runs to show. A scenario
    that failed once fails the matrix, so the verdict is the full matrix's;
    the scenarios listed as killing the mutant are those of the pass that
    killed it. A scenario's own ``race_runs:`` applies in both passes."""
    only_once = dataclasses.replace(base, stateful=False, record_dir=record_dir, race_runs=1)
    scenarios = _not_interrupted(run_conformance(only_once))
    if scenarios["verdict"] != "pass" or base.race_runs <= 1:
        return scenarios
    return _not_interrupted(run_conformance(dataclasses.replace(only_once, race_runs=base.race_runs)))


def explore_mutant(config: RunConfig, mutant) -> MutantResult:
    """The exploration alone against one mutant (``config`` from
    ``mutant_config``; its scenarios are not run): whether it found the bug and,
    with a reduction, in how many steps. A run that cannot start is ``error``."""
    name = (config.adapter_label or "").removeprefix("mutant:")
    explored = _not_interrupted(run_conformance(dataclasses.replace(config, scenarios=False)))
    if explored["verdict"] == "error":
        return _not_run(name, mutant, explored)
    stateful = explored.get("stateful") or {}
    failure = stateful.get("failure") or {}
    return MutantResult(
        name,
        mutant.description,
        [],
        stateful.get("verdict") == "fail",
        failure.get("kind"),
        (failure.get("message") or "").splitlines()[0] if failure else None,
        counterexample_steps=_steps(failure.get("steps")) if failure else None,
    )


def _not_run(name: str, mutant, report: dict) -> MutantResult:
    """A mutant whose run could not start or check anything: the report's problems."""
    problems = "; ".join(p["message"] for p in report["problems"])
    return MutantResult(name, mutant.description, [], False, None, None, error=problems)


def _with_options(config: RunConfig, mutant, options: dict | None) -> RunConfig:
    """``config`` with the mutant's factory bound to ``options`` (a mutant's
    factory takes them as keywords; RunConfig.adapter_options is for adapters
    the kit builds itself)."""
    if not options:
        return config
    return dataclasses.replace(config, adapter_factory=functools.partial(mutant.factory, **options))


def _steps(trace: list | None) -> int | None:
    """Steps of a failure's trace as a counterexample file counts them."""
    from .engine.reduce import steps_of_trace

    return len(steps_of_trace(trace)) if trace else None


def _not_interrupted(report: dict) -> dict:
    """A run stopped by Ctrl-C/SIGTERM stops the whole mutant campaign, not just one mutant."""
    from .engine.interrupts import checkpoint

    checkpoint()
    if report["verdict"] == "interrupted":
        raise KeyboardInterrupt(report["problems"][-1]["message"] if report["problems"] else "interrupted")
    return report

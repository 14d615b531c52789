"""Running the kit against a spec's shipped mutants: faulty variants of its
reference implementation that the kit must catch."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .errors import AdapterLoadError
from .adapters.python import resolve_target
from .engine.runner import RunConfig, run_conformance

__all__ = ["MutantResult", "load_mutants", "run_mutant"]


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


def run_mutant(spec_path: str, name: str, mutant, *, profile: str, seed: int,
               timeout_s: float, on_example: Callable | None = None, shrink_s: float = 0.0,
               reduce_s: float = 0.0) -> MutantResult:
    """Run the scenarios, then the exploration alone, against one mutant.
    Hypothesis's shrinking and the replay reduction are off by default:
    whether the exploration finds the bug is what counts here. With
    ``reduce_s``, the failure found is reduced by replaying it and
    ``counterexample_steps`` says how many steps it kept."""
    base = dict(spec_path=spec_path, adapter_factory=mutant.factory, adapter_label=f"mutant:{name}",
                profile=profile, seed=seed, report_dir=None, timeout_s=timeout_s, shrink_s=shrink_s,
                reduce_s=reduce_s)
    scenarios = _not_interrupted(run_conformance(RunConfig(**base, stateful=False)))
    if scenarios["verdict"] == "error":
        problems = "; ".join(p["message"] for p in scenarios["problems"])
        return MutantResult(name, mutant.description, [], False, None, None, error=problems)
    killed = [s["id"] for s in scenarios["scenarios"] if s["verdict"] in ("fail", "error")]
    explored = _not_interrupted(run_conformance(RunConfig(**base, scenarios=False)))
    stateful = explored.get("stateful") or {}
    failure = stateful.get("failure") or {}
    return MutantResult(name, mutant.description, killed, stateful.get("verdict") == "fail",
                        failure.get("kind"), (failure.get("message") or "").splitlines()[0] if failure else None,
                        counterexample_steps=_steps(failure.get("steps")) if failure else None)


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

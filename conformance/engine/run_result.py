"""What one run found, as its phases fill it in (engine/runner.py): typed
fields, not the report's dictionary. The report (report.json, and what
``run_conformance`` returns) is made from it once, by :meth:`RunResult.to_report`,
when every phase is done; the writers (conformance/reporting/) take that form.

The exploration's section stays in the report's form (``stateful``): a run in
parts combines its parts' sections the way ``merge-reports`` combines shards'
report files (engine/shards.py), one code path for both.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from .failures import Failure
from .scenarios import ScenarioOutcome

__all__ = [
    "KIT_NAME",
    "Problem",
    "SpecInfo",
    "ImplementationInfo",
    "ScenarioEntry",
    "NotApplicable",
    "RunResult",
]

KIT_NAME = "lifecycle-conformance"


@dataclass
class Problem:
    """Something that went wrong outside a single check: a spec, adapter,
    report or environment error, an interrupt, a fault of the implementation."""

    kind: str
    message: str
    where: str | None = None

    @classmethod
    def from_dict(cls, entry: dict) -> Problem:
        return cls(kind=entry["kind"], message=entry["message"], where=entry.get("where"))

    def to_dict(self) -> dict:
        return {"kind": self.kind, "where": self.where, "message": self.message}


@dataclass
class SpecInfo:
    """The spec the run checked; only ``path`` is known before it loads."""

    path: str
    id: str | None = None
    version: str | None = None
    title: str | None = None
    lifecycle: dict | None = None  # the state diagram's data (Spec.lifecycle_summary), its failure highlighted

    def to_dict(self) -> dict:
        return {
            "id": self.id,
            "version": self.version,
            "title": self.title,
            "path": self.path,
            "lifecycle": self.lifecycle,
        }


@dataclass
class ImplementationInfo:
    """The implementation as named on the command line and, once it started,
    as it described itself (``described``)."""

    adapter: str | None
    described: bool = False
    name: str | None = None
    version: str | None = None
    profile: str | None = None
    parameters: dict = field(default_factory=dict)
    capabilities: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        if not self.described:
            return {"adapter": self.adapter}
        return {
            "adapter": self.adapter,
            "name": self.name,
            "version": self.version,
            "profile": self.profile,
            "parameters": self.parameters,
            "capabilities": self.capabilities,
        }


@dataclass
class ScenarioEntry:
    """One scenario that ran: its outcome, and what the implementation printed."""

    outcome: ScenarioOutcome
    output: dict | None = None

    @property
    def id(self) -> str:
        return self.outcome.scenario.id

    @property
    def failure(self) -> Failure | None:
        return self.outcome.failure

    def to_dict(self) -> dict:
        entry = self.outcome.to_dict()
        if self.outcome.note:
            entry["note"] = self.outcome.note
        if self.output:
            entry["output"] = self.output
        return entry


@dataclass
class NotApplicable:
    """Scenarios that do not apply under the implementation's profile, each
    with why, and the operations the implementation does not offer (each
    answered not_implemented)."""

    profile: str
    scenarios: list[dict] = field(default_factory=list)  # {id, title, reason}
    operations: list[dict] = field(default_factory=list)  # {operation, message}

    def to_dict(self) -> dict:
        out: dict[str, Any] = {"profile": self.profile, "scenarios": self.scenarios}
        if self.operations:
            out["operations"] = self.operations
        return out


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class RunResult:
    """One run's findings. The verdict is ``error`` (exit 2) until a phase
    decides otherwise: a run that stops early never passes by default."""

    spec: SpecInfo
    implementation: ImplementationInfo
    kit_version: str
    verdict: str = "error"
    exit_code: int = 2
    started_at: str = field(default_factory=_now)
    duration_s: float = 0.0
    parameters: dict = field(default_factory=dict)
    scenarios: list[ScenarioEntry] = field(default_factory=list)
    not_applicable: NotApplicable | None = None
    stateful: dict | None = None  # the report's `stateful` section (report.schema.json)
    coverage: dict | None = None
    problems: list[Problem] = field(default_factory=list)
    replay: str | None = None  # the command that reproduces a failed run's failures
    shard: dict | None = None  # which part of which run (engine/shards.py: shard_info)
    deviations: dict | None = None  # the deviations file applied, and what it accepted

    def set_verdict(self, verdict: str, exit_code: int) -> None:
        self.verdict, self.exit_code = verdict, exit_code

    def add_problem(self, kind: str, message: str, where: str | None = None) -> None:
        self.problems.append(Problem(kind, message, where))

    def scenario_order(self, order: dict[str, int]) -> None:
        """List the scenarios (and those not applicable) in ``order`` (id -> position)."""
        self.scenarios.sort(key=lambda entry: order.get(entry.id, len(order)))
        if self.not_applicable is not None:
            self.not_applicable.scenarios.sort(key=lambda entry: order.get(entry["id"], len(order)))

    def to_report(self) -> dict:
        """The report (report.schema.json), as the writers and every front door take it."""
        report: dict[str, Any] = {
            "kit": {"name": KIT_NAME, "version": self.kit_version},
            "verdict": self.verdict,
            "exit_code": self.exit_code,
            "started_at": self.started_at,
            "duration_s": self.duration_s,
            "spec": self.spec.to_dict(),
            "implementation": self.implementation.to_dict(),
            "parameters": self.parameters,
            "scenarios": [entry.to_dict() for entry in self.scenarios],
            "stateful": self.stateful,
            "problems": [problem.to_dict() for problem in self.problems],
            "replay": self.replay,
        }
        optional = {
            "shard": self.shard,
            "not_applicable": self.not_applicable.to_dict() if self.not_applicable else None,
            "coverage": self.coverage,
            "deviations": self.deviations,
        }
        report.update({key: value for key, value in optional.items() if value is not None})
        return report

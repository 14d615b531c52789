"""The reference implementations of spec/async-jobs.yaml, one per profile.

``ReferenceAdapter(profile=...)`` builds the job manager (profile
``job-manager``, the default) or the task table (profile ``task-table``);
other options are that implementation's parameter overrides. ``MUTANTS`` holds
the faulty variants of both, named ``<profile>.<bug>`` after the profile each
describes by default.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from conformance.adapters.adapter import Adapter

from ..job_manager import JobManagerAdapter
from ..job_manager.mutants import MUTANTS as _JOB_MANAGER_MUTANTS
from ..mutant import Mutant
from ..task_table import TaskTableAdapter
from ..task_table.mutants import MUTANTS as _TASK_TABLE_MUTANTS

__all__ = ["MUTANTS", "PROFILES", "ReferenceAdapter"]

PROFILES: dict[str, type[JobManagerAdapter] | type[TaskTableAdapter]] = {
    "job-manager": JobManagerAdapter,
    "task-table": TaskTableAdapter,
    "oh-my-pi": JobManagerAdapter,
    "oh-my-pi-18": JobManagerAdapter,
    "defect": TaskTableAdapter,
}


def ReferenceAdapter(profile: str | None = None, **params: Any) -> Adapter:
    """The reference implementation of ``profile`` (default job-manager)."""
    name = profile or "job-manager"
    if name not in PROFILES:
        raise ValueError(f"unknown profile {name!r}; choose one of: {', '.join(PROFILES)}")
    return PROFILES[name](profile=name, **params)


def _prefixed(prefix: str, mutants) -> dict[str, Mutant]:
    items = mutants.values() if isinstance(mutants, dict) else mutants
    return {f"{prefix}.{m.name}": replace(m, name=f"{prefix}.{m.name}") for m in items}


def _by_profile(mutants: dict[str, Mutant]) -> dict[str, Mutant]:
    """Each mutant named after the profile it describes (a bug of a rule only one
    runtime's profile reads is that runtime: oh-my-pi 18.x's are ``oh-my-pi-18.*``)."""
    out: dict[str, Mutant] = {}
    for mutant in mutants.values():
        out.update(_prefixed(getattr(mutant.factory, "default_profile", "job-manager"), [mutant]))
    return out


MUTANTS: dict[str, Mutant] = {
    **_by_profile(_JOB_MANAGER_MUTANTS),
    **_prefixed("task-table", _TASK_TABLE_MUTANTS),
}

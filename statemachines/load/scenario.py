"""Scenario steps (the N/E/B matrix) in compiled form, and value templates.

A template is JSON in which ``{$expr: CEL}`` computes a value and ``${name}``
inside a string substitutes a saved value or a repeat counter.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ..language.expressions import Expression

__all__ = [
    "CallStep",
    "AdvanceStep",
    "RepeatStep",
    "ConcurrentStep",
    "ScenarioStep",
    "render",
    "template_names",
    "PLACEHOLDER",
]

PLACEHOLDER = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass
class CallStep:
    operation: str
    args: Any
    save: dict[str, str]
    expect: Any | None
    where: str
    # The kind of answer the call got when it was recorded ("result" or
    # {"error": KIND}): a run where it answers otherwise did not reach the
    # recorded state (a counterexample file's calls carry it).
    answered: Any = None


@dataclass
class AdvanceStep:
    ms: int | Expression
    where: str


@dataclass
class RepeatStep:
    times: int | Expression
    var: str | None
    steps: list[ScenarioStep]
    where: str


@dataclass
class ConcurrentStep:
    calls: list[CallStep]
    expect: dict = field(default_factory=dict)
    where: str = ""


ScenarioStep = CallStep | AdvanceStep | RepeatStep | ConcurrentStep


def render(template: Any, env: dict, functions: dict | None = None) -> Any:
    """Instantiate a template with ``env`` (params, saved values, counters)."""
    if isinstance(template, Expression):
        return template.evaluate(env, functions)
    if isinstance(template, str):
        whole = PLACEHOLDER.fullmatch(template)
        if whole:  # "${x}" alone keeps x's type (an int stays an int)
            return env[whole.group(1)]
        return PLACEHOLDER.sub(lambda m: str(env[m.group(1)]), template)
    if isinstance(template, dict):
        return {k: render(v, env, functions) for k, v in template.items()}
    if isinstance(template, list):
        return [render(v, env, functions) for v in template]
    return template


def template_names(template: Any) -> set[str]:
    """Names a template refers to through ``${name}`` or in ``$expr`` expressions."""
    if isinstance(template, Expression):
        return set(template.variables)
    if isinstance(template, str):
        return set(PLACEHOLDER.findall(template))
    if isinstance(template, dict):
        return set().union(*(template_names(v) for v in template.values())) if template else set()
    if isinstance(template, list):
        return set().union(*(template_names(v) for v in template)) if template else set()
    return set()

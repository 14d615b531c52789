"""Effective parameter values: spec defaults, then a named profile, then what
the implementation declares, each checked against the spec's bounds."""

from __future__ import annotations

from .spec import Spec

__all__ = ["resolve_parameters"]


def resolve_parameters(spec: Spec, profile: str | None = None, declared: dict | None = None) -> tuple[dict, list[str]]:
    """Return (values, problems). Problems say what is wrong and what is allowed."""
    values = spec.default_parameters()
    problems: list[str] = []
    if profile:
        if profile not in spec.profiles:
            known = ", ".join(spec.profiles) or "(none)"
            problems.append(f"profile {profile!r} is not defined by spec {spec.id} (profiles: {known})")
        else:
            values.update(spec.profiles[profile].parameters)
    for name, value in (declared or {}).items():
        param = spec.parameters.get(name)
        if param is None:
            problems.append(
                f"declared parameter {name!r} is not a parameter of spec {spec.id} "
                f"(parameters: {', '.join(spec.parameters)})"
            )
            continue
        if param.type in ("integer", "number") and isinstance(value, str):
            try:
                value = int(value) if param.type == "integer" else float(value)
            except ValueError:
                pass
        why = param.violation(value)
        if why:
            problems.append(f"declared {why}; the spec allows {param.bounds()}")
        elif param.fixed and value != param.default:
            problems.append(
                f"parameter {name} is fixed at {param.default!r} by the spec; "
                f"an implementation may not declare {value!r}"
            )
        else:
            values[name] = value
    return values, problems

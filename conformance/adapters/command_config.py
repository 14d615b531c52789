"""The command adapter's config file: loading, validation and argv templates.

A config (YAML or JSON, docs/command-adapter.md) maps each spec operation to
an argv template. Templates are filled without a shell:

- ``{name}`` inside an element is replaced by the value of ``name`` (a call
  argument, else a config var, else a built-in such as ``{state_dir}``);
  strings as they are, other JSON values as JSON (``true``, ``3``);
  ``{{`` and ``}}`` are literal braces;
- an element that is exactly ``{*name}`` becomes several elements: a list
  value item by item, a string split like a POSIX shell would split it
  (quotes respected, nothing expanded, nothing run);
- a nested list is an optional group, left out when one of its
  placeholders has no value (an absent or null argument).

Whatever a value holds (spaces, ``;``, ``$(...)``), it stays data: one
argv element, or the words of ``{*name}``. Names the config defines (vars and
built-ins) mean what the config says: a call argument of the same name does
not replace them. When the program itself (argv[0]) comes from a call
argument, the adapter runs it only if the tool printed it or the operation's
``allowed_prefixes`` allow it (``command_trust.py``, docs/trust-model.md).
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from ..errors import AdapterLoadError

__all__ = [
    "CommandConfig",
    "CommandConfigError",
    "TemplateError",
    "BUILTINS",
    "load_command_config",
    "expand_argv",
    "expand_text",
    "placeholders",
    "program_element",
]

SCHEMA_PATH = resources.files("conformance").joinpath("schemas", "command-adapter.schema.json")
BUILTINS = ("python", "config_dir", "cache_dir", "run_dir", "state_dir", "clock_file", "now_ms", "profile")
DEFAULT_TIMEOUT_S = 5.0
_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{(\*?)([A-Za-z_][A-Za-z0-9_]*)\}|[{}]")


class CommandConfigError(AdapterLoadError):
    """The config file is unreadable or wrong; the message says where and how to fix it."""


class TemplateError(Exception):
    """A template cannot be filled for one call (a placeholder with no value)."""

    def __init__(self, name: str, element: str):
        self.name, self.element = name, element
        super().__init__(
            f"the argv element {element!r} needs {{{name}}}, which neither the call's arguments, "
            f"the config's vars nor the built-ins ({', '.join(BUILTINS)}) provide"
        )


@dataclass
class CommandConfig:
    path: Path
    name: str
    version: str
    profile: str | None
    parameters: dict
    capabilities: dict
    vars: dict
    env: dict
    inherit_env: bool
    cwd: str
    timeout_s: float
    operations: dict  # name -> {"argv": [...], "timeout_s": float, "env": {...}}
    reset_argv: list | None = None
    reset_timeout_s: float = DEFAULT_TIMEOUT_S
    raw: dict = field(default_factory=dict)

    @property
    def directory(self) -> Path:
        return self.path.parent


def placeholders(template: Any) -> set[str]:
    """Every name a template (a string or nested lists of strings) refers to."""
    if isinstance(template, list):
        return set().union(*(placeholders(t) for t in template)) if template else set()
    return {m.group(2) for m in _PLACEHOLDER.finditer(str(template)) if m.group(2)}


def _render(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def expand_text(element: str, values: dict) -> str:
    """``{name}`` replaced by its value's text; a name without a value raises TemplateError."""

    def replace(match: re.Match) -> str:
        token = match.group(0)
        if token in ("{{", "}}"):
            return token[0]
        name = match.group(2)
        if not name:
            return token  # a lone brace is literal
        if match.group(1):
            raise TemplateError(name, element)  # {*name} only works as a whole element
        if values.get(name) is None:
            raise TemplateError(name, element)
        return _render(values[name])

    return _PLACEHOLDER.sub(replace, element)


def _expand_element(element: str, values: dict) -> list[str]:
    whole = re.fullmatch(r"\{\*([A-Za-z_][A-Za-z0-9_]*)\}", element)
    if whole:
        name = whole.group(1)
        value = values.get(name)
        if value is None:
            raise TemplateError(name, element)
        if isinstance(value, list):
            return [_render(v) for v in value]
        try:
            return shlex.split(_render(value))
        except ValueError as exc:
            raise TemplateError(name, f"{element} (its value {value!r} cannot be split: {exc})") from None
    return [expand_text(element, values)]


def program_element(template: list, values: dict) -> str | None:
    """The template element the program (argv[0]) comes from with these values:
    the first element (or part of an included optional group) that expands to
    at least one word; None when the template expands to nothing."""
    for element in template:
        parts = element if isinstance(element, list) else [element]
        if isinstance(element, list) and any(values.get(name) is None for name in placeholders(element)):
            continue
        for part in parts:
            if _expand_element(part, values):
                return part
    return None


def expand_argv(template: list, values: dict) -> list[str]:
    """The argv for one call. Optional groups whose placeholders lack a value are left out."""
    argv: list[str] = []
    for element in template:
        if isinstance(element, list):
            if any(values.get(name) is None for name in placeholders(element)):
                continue
            for part in element:
                argv += _expand_element(part, values)
        else:
            argv += _expand_element(element, values)
    return argv


# -------------------------------------------------------------------- loading


def _schema() -> dict:
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


def _line_of(text: str, path: list) -> int | None:
    """The 1-based line of the YAML node at ``path`` (or of its nearest parent)."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return None
    line = node.start_mark.line + 1 if node is not None else None
    for part in path:
        if isinstance(node, yaml.MappingNode):
            match = next((v for k, v in node.value if k.value == str(part)), None)
            if match is None:
                key = next((k for k, _ in node.value if k.value == str(part)), None)
                return key.start_mark.line + 1 if key is not None else line
            node = match
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
        else:
            break
        line = node.start_mark.line + 1
    return line


def _where(path: list) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(the top level)"


def _schema_problem(error: jsonschema.ValidationError) -> str:
    """One error, said plainly, with the schema's hint on how to fix it."""
    best = error
    if error.context:  # oneOf/anyOf: the alternative that came closest
        best = jsonschema.exceptions.best_match(error.context)
    schema = best.schema if isinstance(best.schema, dict) else {}
    hint = schema.get("description")
    if not hint and isinstance(error.schema, dict):
        hint = error.schema.get("description")
    if best.validator == "additionalProperties" and isinstance(best.instance, dict):
        allowed = sorted(schema.get("properties") or {})
        extra = sorted(set(best.instance) - set(allowed))
        message = f"unknown key(s) {', '.join(map(repr, extra))}" + (
            f"; known keys: {', '.join(allowed)}" if allowed else ""
        )
    elif best.validator == "required":
        message = best.message.replace("is a required property", "is missing")
    else:
        message = best.message
    return message + (f" (fix: {hint})" if hint else "")


def load_command_config(path: str | Path) -> CommandConfig:
    """Read and check a config file. Every problem becomes a CommandConfigError
    naming the file, the key (with its line) and what to write instead."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CommandConfigError(f"command adapter config {path}: no such file") from None
    except OSError as exc:
        raise CommandConfigError(f"command adapter config {path}: cannot read it ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise CommandConfigError(f"command adapter config {path}: not UTF-8 text") from None
    try:
        data = yaml.safe_load(text)  # JSON is YAML too
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise CommandConfigError(f"command adapter config {where}: not valid YAML/JSON: {problem}") from None
    except (ValueError, RecursionError) as exc:  # a 5,000-digit integer, an impossible date, deep nesting
        said = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)[:200]
        raise CommandConfigError(f"command adapter config {path}: a value Python cannot build: {said}") from None
    if not isinstance(data, dict):
        raise CommandConfigError(
            f"command adapter config {path}: the file must hold a mapping with "
            f"`command_adapter: 1`, `implementation` and `operations`, "
            f"not {type(data).__name__}"
        )
    validator = jsonschema.Draft202012Validator(_schema())
    errors = sorted(validator.iter_errors(data), key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path))))
    if errors:
        lines = []
        for error in errors[:5]:
            key_path = list(error.absolute_path)
            if error.validator == "additionalProperties" and isinstance(error.instance, dict):
                extra = sorted(set(error.instance) - set(error.schema.get("properties") or {}))
                key_path += extra[:1]  # point at the unknown key itself
            line = _line_of(text, key_path)
            where = f"{path}:{line}" if line else str(path)
            lines.append(f"{where}: {_where(list(error.absolute_path))}: {_schema_problem(error)}")
        more = f"\n(and {len(errors) - 5} more)" if len(errors) > 5 else ""
        raise CommandConfigError("command adapter config is wrong:\n  " + "\n  ".join(lines) + more)
    config = _build(path, data)
    _check_names(text, config)
    return config


def _build(path: Path, data: dict) -> CommandConfig:
    timeout = float(data.get("timeout_s", DEFAULT_TIMEOUT_S))
    operations = {}
    for name, op in data["operations"].items():
        operations[name] = {
            "argv": list(op["argv"]),
            "timeout_s": float(op.get("timeout_s", timeout)),
            "env": dict(op.get("env") or {}),
            "allowed_prefixes": [list(prefix) for prefix in op.get("allowed_prefixes") or []],
        }
    reset = data.get("reset") or {}
    impl = data["implementation"]
    return CommandConfig(
        path=path.resolve(),
        name=impl["name"],
        version=str(impl["version"]),
        profile=data.get("profile"),
        parameters=dict(data.get("parameters") or {}),
        capabilities=dict(data.get("capabilities") or {}),
        vars=dict(data.get("vars") or {}),
        env=dict(data.get("env") or {}),
        inherit_env=bool(data.get("inherit_env", True)),
        cwd=data.get("cwd", "{config_dir}"),
        timeout_s=timeout,
        operations=operations,
        reset_argv=list(reset["argv"]) if reset else None,
        reset_timeout_s=float(reset.get("timeout_s", timeout)),
        raw=data,
    )


def _check_names(text: str, config: CommandConfig) -> None:
    """Vars may not hide built-ins; vars, env and cwd may refer only to built-ins and vars."""

    def fail(key_path: list, message: str):
        line = _line_of(text, key_path)
        where = f"{config.path}:{line}" if line else str(config.path)
        raise CommandConfigError(f"command adapter config {where}: {_where(key_path)}: {message}")

    for name in config.vars:
        if name in BUILTINS:
            fail(
                ["vars", name],
                f"{name!r} is a built-in placeholder ({', '.join(BUILTINS)}); give your var another name",
            )
    known = set(BUILTINS) | set(config.vars)
    checks = [(["vars", n], v) for n, v in config.vars.items()] + [(["env", n], v) for n, v in config.env.items()]
    checks.append((["cwd"], config.cwd))
    for op_name, op in config.operations.items():
        checks += [
            (["operations", op_name, "allowed_prefixes", i], prefix) for i, prefix in enumerate(op["allowed_prefixes"])
        ]
    for key_path, value in checks:
        unknown = sorted(placeholders(value) - known)
        if unknown:
            why = (
                "an allowed prefix is fixed by the config, so it may use vars and built-ins only"
                if "allowed_prefixes" in key_path
                else "call arguments are available in argv only"
            )
            fail(
                key_path,
                f"refers to {{{unknown[0]}}}, which is neither a var nor a built-in ({', '.join(BUILTINS)}); {why}",
            )
    for name, value in config.vars.items():
        if placeholders(value) & set(config.vars):
            fail(["vars", name], "a var may refer to built-ins only, not to other vars")

"""``conformance init``: a runnable adapter skeleton for one spec and transport.

Every operation of the spec gets a stub whose comment names its arguments,
its result and its declared errors (read from the compiled spec), and which
answers an error of kind ``not_implemented`` until the user connects it: the
kit reports each as "operation X is not implemented". A pytest file using the
plugin comes with it, so the scaffold runs before the user writes a line.

Everything the spec says (its title, summaries, names, schemas) reaches the
files only through a literal encoder: ``repr`` for Python values,
``json.dumps`` for JavaScript ones, :func:`comment_line` (one line, control
characters escaped) in comments, and ASCII identifiers checked as such. No
template pastes spec text into code or into a string's quotes, so a title
holding quotes, newlines or ``*/`` stays text (docs/trust-model.md).
"""

from __future__ import annotations

import json
import keyword
import os
import re
import shlex
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from statemachines import Spec

from .engine.failures import NOT_IMPLEMENTED
from .errors import ConformanceError
from .reporting._format import visible
from .reporting.safe_files import refuse_symlinks, write_atomic

__all__ = [
    "TRANSPORTS",
    "ScaffoldError",
    "Scaffold",
    "plan_scaffold",
    "write_scaffold",
    "check_scaffold",
    "render_schema",
    "profile_summary",
    "comment_line",
    "method_names",
]

TRANSPORTS = {
    "python": "a Python adapter class, run in the kit's process (--adapter module:Adapter)",
    "stdio-python": "a Python program speaking the stdio protocol (--adapter-cmd), standard library only",
    "stdio-node": "a Node.js program speaking the stdio protocol (--adapter-cmd), no dependencies",
}


class ScaffoldError(ConformanceError):
    """The scaffold cannot be written (e.g. a file would be overwritten)."""


@dataclass
class Scaffold:
    files: dict[str, str]  # file name (in the target directory) -> content
    run_command: str  # `conformance run ...`, from the target directory
    test_command: str
    programs: tuple[str, ...] = ()  # files to mark executable


# ------------------------------------------------------------------ schemas in comments


def _merge(a: dict, b: dict) -> dict:
    """allOf, shallowly: properties merged key by key, required lists joined."""
    out = dict(a)
    for key, value in b.items():
        if key == "properties" and isinstance(out.get(key), dict) and isinstance(value, dict):
            props = dict(out[key])
            for name, sub in value.items():
                props[name] = (
                    _merge(props[name], sub) if isinstance(props.get(name), dict) and isinstance(sub, dict) else sub
                )
            out[key] = props
        elif key == "required":
            out[key] = list(dict.fromkeys([*out.get(key, []), *value]))
        else:
            out[key] = value
    return out


def render_schema(schema: Any, depth: int = 0) -> str:
    """A JSON Schema as a short type expression: ``{job_id: string, note?: string | null}``."""
    if schema is True or not isinstance(schema, dict) or not schema:
        return "any"
    if "allOf" in schema:
        return render_schema(_merged_all_of(schema), depth)
    for key, render in _COMBINATORS:
        if key in schema:
            return render(schema, depth)
    return " | ".join(_render_type(schema, type_, depth) for type_ in _types(schema) if type_) or "any"


def _merged_all_of(schema: dict) -> dict:
    merged = {k: v for k, v in schema.items() if k != "allOf"}
    for part in schema["allOf"]:
        if isinstance(part, dict):
            merged = _merge(merged, part)
    return merged


# Keywords that say the whole type, in the order they are looked for.
_COMBINATORS: list[tuple[str, Callable[[dict, int], str]]] = [
    ("$ref", lambda schema, depth: schema["$ref"].rsplit("/", 1)[-1]),
    ("const", lambda schema, depth: json.dumps(schema["const"])),
    ("enum", lambda schema, depth: " | ".join(json.dumps(v) for v in schema["enum"])),
    ("oneOf", lambda schema, depth: " | ".join(render_schema(s, depth) for s in schema["oneOf"])),
    ("anyOf", lambda schema, depth: " | ".join(render_schema(s, depth) for s in schema["anyOf"])),
]


def _types(schema: dict) -> list:
    """The schema's ``type`` as a list (implied by ``properties`` or ``items`` when absent)."""
    types = schema.get("type")
    if types is None:
        types = "object" if "properties" in schema else "array" if "items" in schema else None
    return types if isinstance(types, list) else [types]


def _render_type(schema: dict, type_: str, depth: int) -> str:
    if type_ == "object":
        return _render_object(schema, depth)
    if type_ == "array":
        return f"[{render_schema(schema.get('items'), depth + 1)}]"
    return str(type_)


def _render_object(schema: dict, depth: int) -> str:
    props = {k: v for k, v in (schema.get("properties") or {}).items() if v is not False}
    if not props:
        return "object"
    if depth >= 2:
        return "{...}"
    required = set(schema.get("required") or ())
    fields = (f"{k}{'' if k in required else '?'}: {render_schema(v, depth + 1)}" for k, v in props.items())
    return "{" + ", ".join(fields) + "}"


def _arg_lines(schema: dict | None) -> list[str]:
    schema = schema or {}
    required = set(schema.get("required") or ())
    props = schema.get("properties") or {}
    if not props:
        return ["(none)"]
    return [
        f"{name}: {render_schema(sub, 1)}{' (required)' if name in required else ''}" for name, sub in props.items()
    ]


def _wrap(text: str, width: int = 88) -> list[str]:
    return textwrap.wrap(text, width, subsequent_indent="    ", break_on_hyphens=False) or [""]


def _operation_doc(spec: Spec, name: str) -> list[str]:
    """The comment lines of one operation's stub (no comment markers)."""
    op = spec.operations[name]
    lines = [*_wrap(" ".join(op.summary.split()) or name), ""]
    lines.append("args:")
    lines += [f"  {line}" for arg in _arg_lines(op.args_schema) for line in _wrap(arg, 84)]
    lines += _wrap("result: " + (render_schema(op.result_schema) if op.result_schema else "any (not declared)"))
    lines += _wrap("errors: " + (", ".join(op.errors) if op.errors else "none declared"))
    if op.read_only:
        lines.append("read-only: it must not change anything.")
    if op.assumes is not None:
        lines += _wrap(f"offered only when {op.assumes.source}")
    return lines


def _value(value: Any) -> str:
    return json.dumps(value)


def _profile_lines(spec: Spec, chosen: str | None) -> list[str]:
    """Each profile with the parameter values declaring it sets."""
    if not spec.profiles:
        return []
    head = (
        f"Profiles (this adapter declares {chosen}; declaring a profile sets its values):"
        if chosen
        else "Profiles (declare one in describe(), or None for the spec's defaults; declaring one sets its values):"
    )
    lines = [head]
    for profile in spec.profiles.values():
        lines += [f"  {line}" for line in _wrap(f"{profile.name}: {' '.join(profile.description.split())}", 84)]
        sets = ", ".join(f"{name}={_value(value)}" for name, value in profile.parameters.items())
        lines += [f"    {line}" for line in _wrap(f"sets {sets}" if sets else "sets no parameter", 82)]
    return [*lines, ""]


def _parameter_line(spec: Spec, p: Any, chosen: str | None) -> str:
    bounds = (
        ""
        if p.minimum is None and p.maximum is None
        else f", {'' if p.minimum is None else p.minimum}..{'' if p.maximum is None else p.maximum}"
    )
    choices = f", one of {', '.join(map(str, p.enum))}" if p.enum else ""
    profile_values = spec.profiles[chosen].parameters if chosen else {}
    if p.name in profile_values:
        value = f"{_value(profile_values[p.name])} (set by {chosen}; spec default {_value(p.default)})"
    else:
        value = f"default {_value(p.default)}"
    return f"{p.name}: {p.type}, {value}{bounds}{choices}"


def _parameter_lines(spec: Spec, chosen: str | None) -> list[str]:
    if not spec.parameters:
        return []
    head = (
        f"Parameters under {chosen}: declaring `profile: {chosen}` alone sets every value below; "
        f"declare one in `parameters` only where your implementation differs:"
        if chosen
        else "Parameters (the spec's defaults, or a declared profile's values; declare in `parameters` "
        "only the values your implementation uses where they differ):"
    )
    lines = _wrap(head, 88)
    lines += [f"  {line}" for p in spec.parameters.values() for line in _wrap(_parameter_line(spec, p, chosen), 84)]
    return [*lines, ""]


# When a program may declare capabilities.concurrent: true (conformance/adapters/stdio.py:
# with it, the kit writes a concurrent group's requests without waiting and matches the
# answers by id, in any order; without it, one request at a time, under a lock).
_CONCURRENCY = {
    "python": (
        "Concurrency: with capabilities.concurrent True the kit calls call() from several threads "
        "at once (concurrent groups and derived races, checked for linearizability). Declare True "
        "only if your implementation is safe to call in parallel; with False the scenarios and "
        "races that need it are skipped."
    ),
    "stdio": (
        "Concurrency: with capabilities.concurrent true the kit writes several call requests "
        "before reading their answers, and matches the answers by id, in any order. A "
        "single-threaded loop like this one, which reads a request, answers it and only then "
        "reads the next, may declare true as long as every call answers on its own: no call may "
        "wait for a later request (for example a wait that another call ends), or the loop stops "
        "there until the kit's timeout. A concurrent group's calls then take effect one at a "
        "time, in the order the loop reads them, which is one order the kit accepts. A program "
        "that answers on several threads or tasks declares true only if its operations are safe "
        "to run at once. With false, the scenarios and races that need it are skipped."
    ),
}


def _header(spec: Spec, chosen: str | None = None, transport: str = "python") -> list[str]:
    """Profiles, parameters, effects and concurrency, for the top of the adapter."""
    lines = [f"Spec: {spec.id} {spec.version}: {spec.title}", ""]
    lines += _profile_lines(spec, chosen) + _parameter_lines(spec, chosen)
    if spec.effects:
        lines.append("Effects (what the implementation does to its environment; list them in each answer):")
        for effect in spec.effects.values():
            lines += [f"  {line}" for line in _wrap(f"{effect.name}: {render_schema(effect.schema)}", 84)]
        lines.append("")
    lines += _wrap(_CONCURRENCY["python" if transport == "python" else "stdio"], 88)
    return lines


def profile_summary(spec: Spec, chosen: str) -> str:
    """What declaring profile ``chosen`` sets, in one line (``conformance init`` prints it)."""
    sets = ", ".join(f"{name}={_value(value)}" for name, value in spec.profiles[chosen].parameters.items())
    return f"profile {chosen}: declaring it sets {sets or 'no parameter'}"


def comment_line(text: str) -> str:
    """``text`` safe inside a ``#`` or ``//`` comment: one line whatever it
    holds (newlines, carriage returns, U+2028 and every other control or
    format character escaped, :func:`visible`)."""
    return visible(text, keep="")


def _comment(lines: list[str], marker: str, indent: str = "") -> str:
    return "\n".join(f"{indent}{marker} {comment_line(line)}".rstrip() for line in lines)


def _identifier(name: str) -> str:
    """An ASCII Python identifier made of ``name`` (other characters become ``_``)."""
    ident = re.sub(r"[^A-Za-z0-9_]", "_", name)
    ident = ident if ident.isidentifier() and not keyword.iskeyword(ident) else f"_{ident}"
    if not (ident.isascii() and ident.isidentifier()):  # checked, not assumed
        raise ScaffoldError(f"cannot make an identifier of {name!r}")
    return ident


def method_names(spec: Spec) -> dict[str, str]:
    """Each operation's stub method name (``op_...``), distinct even where two
    operation names differ only in characters an identifier cannot hold."""
    names: dict[str, str] = {}
    for operation in spec.operations:
        base = f"op_{_identifier(operation)}"
        name, n = base, 2
        while name in names.values():
            name, n = f"{base}_{n}", n + 1
        names[operation] = name
    return names


# ------------------------------------------------------------------ templates


def _run_lines(run_command: str, test_command: str, marker: str) -> str:
    return _comment(["Run it:", f"    {run_command}", f"    {test_command}"], marker)


def _spec_literal(spec: Spec) -> str:
    """The spec's id and version as a Python dict literal (repr: data, never code)."""
    return f"{{'id': {spec.id!r}, 'version': {spec.version!r}}}"


def _python_adapter(spec: Spec, run_command: str, test_command: str, profile: str | None = None) -> str:
    methods = method_names(spec)
    stubs = []
    for name in spec.operations:
        stubs.append(
            f"    def {methods[name]}(self, args: dict) -> dict:\n"
            f"{_comment(_operation_doc(spec, name), '#', '        ')}\n"
            "        return not_implemented()\n"
        )
    table = ",\n".join(f"        {name!r}: {methods[name]}" for name in spec.operations)
    return f'''"""Adapter written by `conformance init` for the spec named below.

Connect each op_* method to your implementation. Until you do, it answers an
error of kind "{NOT_IMPLEMENTED}" and the kit reports "operation X is not implemented".

Answers are JSON data: {{"result": ..., "effects": [...]}} or
{{"error": {{"kind": ..., "message": ...}}, "effects": [...]}} (conformance.adapters.adapter).
"""
{_run_lines(run_command, test_command, "#")}

from conformance.adapters.adapter import Adapter as AdapterBase
from conformance.adapters.adapter import EffectRecorder, error_response, result_response  # noqa: F401  # for the methods you add

SPEC = {_spec_literal(spec)}
NOT_IMPLEMENTED = "{NOT_IMPLEMENTED}"  # the kit reports this kind as "operation X is not implemented"

{_comment(_header(spec, profile, "python"), "#")}


def not_implemented() -> dict:
    return error_response(NOT_IMPLEMENTED, "a stub written by conformance init")


class Adapter(AdapterBase):
    def __init__(self, **options):
        self.options = options  # --adapter-opt KEY=VALUE arrive here
        self.effects = EffectRecorder()  # record effects per call: self.effects.record("name", field=...)
        self.now_ms = 0

    def describe(self) -> dict:
        return {{"name": "my-implementation", "version": "0.0.0",
                "profile": {profile!r},  # one of the spec's profiles sets its values (see above)
                "parameters": {{}},     # the values your implementation uses, where they differ
                "capabilities": {{"concurrent": False}}}}  # True if call() is safe in parallel: Concurrency, above

    def reset(self, now_ms: int) -> None:
        # Start a fresh instance of your implementation; the kit owns the clock.
        self.now_ms = now_ms

    def set_clock(self, now_ms: int) -> list[dict]:
        self.now_ms = now_ms
        return []  # effects your implementation produced because time passed

    def call(self, operation: str, args: dict) -> dict:
        handler = self.OPERATIONS.get(operation)
        if handler is None:
            return error_response("unknown_operation", f"{{SPEC['id']}} has no operation {{operation!r}}")
        return handler(self, args)

{chr(10).join(stubs)}
    OPERATIONS = {{
{table},
    }}
'''


def _stdio_python_adapter(spec: Spec, run_command: str, test_command: str, profile: str | None = None) -> str:
    methods = method_names(spec)
    stubs = []
    for name in spec.operations:
        stubs.append(
            f"    def {methods[name]}(self, args):\n"
            f"{_comment(_operation_doc(spec, name), '#', '        ')}\n"
            "        return not_implemented()\n"
        )
    table = ",\n".join(f"    {name!r}: Implementation.{methods[name]}" for name in spec.operations)
    return f'''#!/usr/bin/env python3
"""Adapter program written by `conformance init` for the spec named below.

It speaks the kit's stdio protocol: one JSON request per line on stdin, one
JSON answer per line on stdout (`conformance schema protocol` prints the
schema). Standard library only. Connect each op_* method to your
implementation; until you do, it answers an error of kind "{NOT_IMPLEMENTED}"
and the kit reports "operation X is not implemented".
"""
{_run_lines(run_command, test_command, "#")}

import json
import sys

SPEC = {_spec_literal(spec)}
NOT_IMPLEMENTED = "{NOT_IMPLEMENTED}"  # the kit reports this kind as "operation X is not implemented"

{_comment(_header(spec, profile, "stdio"), "#")}


def not_implemented():
    return {{"error": {{"kind": NOT_IMPLEMENTED, "message": "a stub written by conformance init"}}, "effects": []}}


class Implementation:
    def __init__(self):
        self.now_ms = 0

    def reset(self, now_ms):
        # Start a fresh instance of your implementation; the kit owns the clock.
        self.now_ms = now_ms

    def set_clock(self, now_ms):
        self.now_ms = now_ms
        return []  # effects your implementation produced because time passed

{chr(10).join(stubs)}

OPERATIONS = {{
{table},
}}


def handle(implementation, request):
    """The answer to one request, without its id."""
    kind = request["type"]
    if kind == "hello":
        return {{"protocol": 1, "implementation": {{"name": "my-implementation", "version": "0.0.0"}},
                "specs": [{{**SPEC, "profile": {profile!r}, "parameters": {{}}}}],  # profile/parameters: see above
                "capabilities": {{"concurrent": False}}}}  # this loop may declare True: Concurrency, above
    if kind == "reset":
        implementation.reset(request["now_ms"])
        return {{"ok": True}}
    if kind == "clock":
        return {{"ok": True, "effects": implementation.set_clock(request["now_ms"])}}
    if kind == "call":
        handler = OPERATIONS.get(request["operation"])
        if handler is None:
            return {{"error": {{"kind": "unknown_operation", "message": request["operation"]}}, "effects": []}}
        return handler(implementation, request["args"])
    if kind == "bye":
        return {{"ok": True}}
    return {{"error": {{"kind": "unknown_request", "message": f"unknown request type {{kind!r}}"}}}}


def main():
    implementation = Implementation()
    for line in sys.stdin:
        request = json.loads(line)
        sys.stdout.write(json.dumps({{"id": request["id"], **handle(implementation, request)}}) + "\\n")
        sys.stdout.flush()  # the kit waits for each answer
        if request["type"] == "bye":
            break


if __name__ == "__main__":
    main()
'''


def _node_adapter(spec: Spec, run_command: str, test_command: str, profile: str | None = None) -> str:
    stubs = []
    for name in spec.operations:
        stubs.append(
            f"  {json.dumps(name)}(args) {{\n"
            f"{_comment(_operation_doc(spec, name), '//', '    ')}\n"
            "    return notImplemented();\n  },\n"
        )
    return f'''#!/usr/bin/env node
'use strict';
// Adapter program written by `conformance init` for the spec named below.
//
// It speaks the kit's stdio protocol: one JSON request per line on stdin, one
// JSON answer per line on stdout (`conformance schema protocol` prints the
// schema). No dependencies. Connect each operation below to your
// implementation; until you do, it answers an error of kind "{NOT_IMPLEMENTED}"
// and the kit reports "operation X is not implemented".
//
{_run_lines(run_command, test_command, "//")}

const readline = require('readline');

const SPEC = {{ id: {json.dumps(spec.id)}, version: {json.dumps(spec.version)} }};
const NOT_IMPLEMENTED = '{NOT_IMPLEMENTED}'; // the kit reports this kind as "operation X is not implemented"

{_comment(_header(spec, profile, "stdio"), "//")}

function notImplemented() {{
  return {{ error: {{ kind: NOT_IMPLEMENTED, message: 'a stub written by conformance init' }}, effects: [] }};
}}

const state = {{ nowMs: 0 }};

function reset(nowMs) {{
  // Start a fresh instance of your implementation; the kit owns the clock.
  state.nowMs = nowMs;
}}

function setClock(nowMs) {{
  state.nowMs = nowMs;
  return []; // effects your implementation produced because time passed
}}

const OPERATIONS = {{
{"".join(stubs)}}};

function handle(request) {{
  switch (request.type) {{
    case 'hello':
      return {{ protocol: 1, implementation: {{ name: 'my-implementation', version: '0.0.0' }},
               specs: [{{ ...SPEC, profile: {_value(profile)}, parameters: {{}} }}], // profile/parameters: see above
               capabilities: {{ concurrent: false }} }}; // this loop may declare true: Concurrency, above
    case 'reset':
      reset(request.now_ms);
      return {{ ok: true }};
    case 'clock':
      return {{ ok: true, effects: setClock(request.now_ms) }};
    case 'call': {{
      const handler = Object.prototype.hasOwnProperty.call(OPERATIONS, request.operation)
        ? OPERATIONS[request.operation] : null;
      if (!handler) return {{ error: {{ kind: 'unknown_operation', message: request.operation }}, effects: [] }};
      return handler(request.args);
    }}
    case 'bye':
      return {{ ok: true }};
    default:
      return {{ error: {{ kind: 'unknown_request', message: `unknown request type ${{request.type}}` }} }};
  }}
}}

const lines = readline.createInterface({{ input: process.stdin }});
lines.on('line', (line) => {{
  const request = JSON.parse(line);
  process.stdout.write(JSON.stringify({{ id: request.id, ...handle(request) }}) + '\\n');
  if (request.type === 'bye') lines.close();
}});
'''


def _test_file(spec: Spec, spec_ref: str, transport: str, adapter_file: str, suite_name: str) -> str:
    if transport == "python":
        imports, argument = "", f"adapter={f'{Path(adapter_file).stem}:Adapter'!r}"
    elif transport == "stdio-python":
        imports = "import shlex\nimport sys\n\n"
        argument = f"adapter_cmd=shlex.join([sys.executable, {adapter_file!r}])"
    else:
        imports, argument = "", f"adapter_cmd={f'node {adapter_file}'!r}"
    where = "" if transport == "python" else " The adapter program runs in this file's directory."
    return f'''"""Conformance of this implementation to the spec named below: one test
per scenario of the spec, plus a generated stateful exploration.
Written by `conformance init`.{where}"""
{_comment([f"Spec: {spec.id} {spec.version}: {spec.title}"], "#")}
{imports}from conformance.pytest_plugin import conformance_suite

{suite_name} = conformance_suite({spec_ref!r}, {argument})
'''


# ------------------------------------------------------------------ planning and writing


def plan_scaffold(
    spec: Spec,
    spec_ref: str,
    transport: str,
    *,
    profile: str | None = None,
    python: str = "python3",
    pytest: str = "pytest",
) -> Scaffold:
    """The files for ``spec`` (named ``spec_ref`` in them: a bundled name, or a
    path relative to the target directory) and ``transport``; the adapter
    declares ``profile`` (one of the spec's, or None) and its header shows the
    values that sets. ``python`` and ``pytest`` are how the commands in the
    files start those programs."""
    if transport not in TRANSPORTS:
        raise ScaffoldError(f"unknown transport {transport!r}; choose one of {', '.join(TRANSPORTS)}")
    if profile is not None and profile not in spec.profiles:
        known = ", ".join(spec.profiles) or "none"
        raise ScaffoldError(f"{spec.id} has no profile {profile!r}; its profiles: {known}")
    slug = _identifier(spec.id.replace("-", "_"))  # ASCII, checked: it names the files
    test_file = f"test_{slug}_conformance.py"
    if transport == "python":
        adapter_file = f"{slug}_adapter.py"
        run = f"conformance run {shlex.quote(spec_ref)} --adapter {slug}_adapter:Adapter"
    elif transport == "stdio-python":
        adapter_file = f"{slug}_adapter.py"
        run = f"conformance run {shlex.quote(spec_ref)} --adapter-cmd {shlex.quote(f'{python} {adapter_file}')}"
    else:
        adapter_file = f"{slug}_adapter.js"
        run = f"conformance run {shlex.quote(spec_ref)} --adapter-cmd {shlex.quote(f'node {adapter_file}')}"
    test = f"{pytest} {test_file}"
    render = {"python": _python_adapter, "stdio-python": _stdio_python_adapter, "stdio-node": _node_adapter}
    return Scaffold(
        files={
            adapter_file: render[transport](spec, run, test, profile),
            test_file: _test_file(spec, spec_ref, transport, adapter_file, f"test_{slug}"),
        },
        run_command=run,
        test_command=test,
        programs=() if transport == "python" else (adapter_file,),
    )


def write_scaffold(scaffold: Scaffold, directory: str | os.PathLike, *, force: bool = False) -> list[Path]:
    """Write the files; refuses to overwrite any unless ``force``."""
    target = Path(directory)
    linked = [why for why in (refuse_symlinks(target / name) for name in scaffold.files) if why]
    if os.path.islink(target):
        linked.insert(0, f"{target} is a symbolic link (to {os.readlink(target)})")
    if linked:
        raise ScaffoldError(
            f"{'; '.join(linked)}: `init` never writes through a symbolic link (dangling or not); "
            f"remove it or choose another --dir"
        )
    existing = [name for name in scaffold.files if os.path.lexists(target / name)]
    if existing and not force:
        raise ScaffoldError(
            f"{', '.join(str(target / n) for n in existing)} already exist(s); "
            f"choose another --dir or pass --force to overwrite"
        )
    try:
        target.mkdir(parents=True, exist_ok=True)
        written = []
        for name, content in scaffold.files.items():
            path = target / name
            write_atomic(path, content)
            if name in scaffold.programs:
                path.chmod(path.stat().st_mode | 0o111)
            written.append(path)
    except OSError as exc:
        raise ScaffoldError(f"cannot write the scaffold into {target}: {exc.strerror or exc}") from None
    return written


def check_scaffold(
    spec: Spec, spec_path: str, transport: str, directory: str | os.PathLike, adapter_file: str
) -> str | None:
    """Start the written adapter and take its handshake, as a run would; None if
    it answers, else what went wrong (e.g. Node.js is not installed)."""
    from statemachines import SpecError

    from .adapters.python import adapter_factory
    from .adapters.stdio import stdio_factory
    from .engine.runner import RunConfig, prepare
    from .errors import AdapterLoadError

    where = str(Path(directory).resolve())
    try:
        if transport == "python":
            sys.path.insert(0, where)  # import the module now, from where it was written
            try:
                factory = adapter_factory(f"{Path(adapter_file).stem}:Adapter")
            finally:
                sys.path.remove(where)
        else:
            program = [sys.executable] if transport == "stdio-python" else ["node"]
            factory = stdio_factory([*program, adapter_file], spec, cwd=where)
        prepared = prepare(
            RunConfig(spec_path=spec_path, adapter_factory=factory, adapter_label=adapter_file, report_dir=None)
        )
    except (SpecError, AdapterLoadError) as exc:
        return str(exc)
    prepared.session.close()
    return None

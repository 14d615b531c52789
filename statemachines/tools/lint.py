"""Lint a lifecycle spec: what is valid but probably wrong, or untested.

``conformance validate`` says whether the kit can run a spec; lint says what
an author should look at: states no operation reaches, transitions no
operation fires, parameters, definitions and effects nothing uses, error
kinds declared but never raised, operations, transitions, error kinds and
policies no scenario exercises (found by following every scenario on the
model, under the defaults and every profile), and profiles that restate a
default. Every finding has a stable rule name, file:line and a fix hint.

Whether a state can be reached is settled by ``check-spec``'s search when
the spec declares a scope (``check.scope``) and the search explores it
completely: it follows guards, conditions and parameters. Otherwise it is a
static guess (a state no fired trigger leads to), and the finding says why
the search could not settle it. Each finding names its ``basis``.

A spec silences a finding it accepts, with a reason, under ``lint.suppress``::

    lint:
      suppress:
        - {rule: unused-parameter, at: msg_internal, reason: read by implementations only}

``at`` matches the finding's subject (shell-style wildcards allowed; a list
for several).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..errors import Problem, SpecError
from ..load.spec import Spec
from ..model import steps as S
from ..model.compiler import compile_spec, load_spec_data
from ..model.model import POLICY_ACTS
from .check import EVERY_STATE_REACHED, CheckReport, check_spec, declared_scope
from .dryrun import ScenarioWalk, scenario_operations, walk_scenarios
from .search_budget import SearchBudget

__all__ = [
    "RULES",
    "Finding",
    "LintReport",
    "lint_spec",
    "lint_loaded",
    "fired_triggers",
    "raised_errors",
    "emitted_effects",
    "parameters_read",
]

# Rule name -> what it finds. The spec schema's `lint.suppress[].rule` enum lists the same names.
RULES = {
    "unreachable-state": "a state no sequence of operations can reach from the initial state",
    "unfired-transition": "a transition whose trigger no operation (or on_clock step) fires",
    "terminal-exit": "a terminal state with an outgoing transition (also a validation error)",
    "unused-parameter": "a parameter no expression reads",
    "unused-definition": "a definition no $ref uses",
    "unemitted-effect": "an effect no emit step produces",
    "unraised-error": "an error kind an operation declares but none of its steps raises",
    "undeclared-error": "an error kind a step raises that its operation does not declare (also a validation error)",
    "uncalled-operation": "an operation no scenario calls",
    "untested-transition": "a transition no scenario takes",
    "untested-error": "an error kind no scenario makes its operation return",
    "untested-policy": "a policy no scenario makes act",
    "default-profile-value": "a profile setting a parameter to its default",
    "scenario-not-followed": "a scenario the model alone could not follow to its end (what it exercises is then partly unknown)",
    "unused-suppression": "a lint.suppress entry that matches no finding",
}


@dataclass(frozen=True)
class Finding:
    rule: str
    subject: str  # what it is about; a suppression's `at` matches this
    message: str
    file: str | None = None
    line: int | None = None
    hint: str | None = None
    severity: str = "warning"  # "warning", or "error" for what validation also rejects
    suppressed: str | None = None  # the reason the spec gives for accepting it
    basis: str = "static"  # "static" (read from the spec's text) or "search" (check-spec's complete search)

    @property
    def where(self) -> str:
        if self.file is None:
            return "<spec>"
        return f"{self.file}:{self.line}" if self.line else self.file

    def __str__(self) -> str:
        text = f"{self.where}: {self.severity}[{self.rule}]: {self.message}"
        return f"{text}\n    hint: {self.hint}" if self.hint else text

    def to_dict(self) -> dict:
        return {
            "rule": self.rule,
            "severity": self.severity,
            "subject": self.subject,
            "message": self.message,
            "file": self.file,
            "line": self.line,
            "hint": self.hint,
            "suppressed": self.suppressed,
            "basis": self.basis,
        }


@dataclass
class LintReport:
    path: str
    findings: list[Finding] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)  # why the spec does not load (lint could not run)
    exhausted: str | None = None  # the search's budget that ran out (time, memory, expression cost)

    @property
    def active(self) -> list[Finding]:
        return [f for f in self.findings if f.suppressed is None]

    @property
    def suppressed(self) -> list[Finding]:
        return [f for f in self.findings if f.suppressed is not None]

    def to_dict(self) -> dict:
        return {
            "spec": self.path,
            "findings": [f.to_dict() for f in self.findings],
            "problems": [{"where": p.where, "message": p.message, "hint": p.hint} for p in self.problems],
            "exhausted": self.exhausted,
        }


# -- what the spec's steps do (static) ----------------------------------------
def _all_step_lists(spec: Spec) -> Iterator[tuple[str, list]]:
    for name, op in spec.operations.items():
        yield name, op.steps
    yield "on_clock", spec.on_clock


def fired_triggers(spec: Spec) -> set[str]:
    return {
        step.trigger for _, steps in _all_step_lists(spec) for step in S.walk_steps(steps) if isinstance(step, S.Fire)
    }


def raised_errors(steps: list) -> set[str]:
    kinds = set()
    for step in S.walk_steps(steps):
        err = (
            step.error
            if isinstance(step, (S.Require, S.Reject))
            else step.missing
            if isinstance(step, S.Find)
            else step.otherwise
            if isinstance(step, S.Fire)
            else None
        )
        if err is not None:
            kinds.add(err.kind)
    return kinds


def emitted_effects(spec: Spec) -> set[str]:
    return {
        step.effect for _, steps in _all_step_lists(spec) for step in S.walk_steps(steps) if isinstance(step, S.Emit)
    }


_PARAM_READ = re.compile(r"\bparams\s*(?:\.\s*([A-Za-z_]\w*)|\[\s*['\"]([A-Za-z_]\w*)['\"]\s*\])")
_PROSE = {"description", "title", "summary"}


def _strings(value: Any, skip_top: frozenset = frozenset()) -> Iterator[str]:
    """Every string in the raw spec that is not prose (description, title, summary)."""
    stack = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, str):
            yield node
        elif isinstance(node, dict):
            for k, v in node.items():
                if (depth == 0 and k in skip_top) or k in _PROSE:
                    continue
                stack.append((v, depth + 1))
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node)


def parameters_read(raw: dict) -> set[str]:
    """Parameters some expression or template of the spec reads (``params.NAME``)."""
    names = set()
    for text in _strings(raw, frozenset({"parameters", "profiles", "lint"})):
        for m in _PARAM_READ.finditer(text):
            names.add(m.group(1) or m.group(2))
    return names


def _refs(raw: dict) -> set[str]:
    found = set()
    stack = [raw]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/definitions/"):
                found.add(ref.rsplit("/", 1)[-1])
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return found


# -- the rules -----------------------------------------------------------------
@dataclass(frozen=True)
class _Exercised:
    """What the scenarios that ran did on the model, over every walk."""

    transitions: set[str]
    outcomes: set[str]
    policies: set[str]

    @classmethod
    def by(cls, ran: list[ScenarioWalk]) -> _Exercised:
        return cls(
            transitions=set().union(*(w.transitions for w in ran)),
            outcomes=set().union(*(w.outcomes for w in ran)),
            policies=set().union(*(w.policies for w in ran)),
        )


class _Linter:
    def __init__(self, spec: Spec, search: CheckReport | None = None):
        self.spec = spec
        self.search = search
        self.findings: list[Finding] = []

    def add(self, rule: str, subject: str, path: tuple, message: str, hint: str, basis: str = "static") -> None:
        file, line = self.spec.source_map.locate(path)
        self.findings.append(Finding(rule, subject, message, file, line, hint, basis=basis))

    def searched(self) -> bool:
        """Whether check-spec's search of the declared scope settles reachability:
        it ran to completion, or it stopped once every state was reached."""
        search = self.search
        if search is None or search.problems:
            return False
        return search.stats.complete or search.stats.stopped == EVERY_STATE_REACHED

    def why_static(self) -> str:
        if self.search is None:
            return "no check.scope is declared, so check-spec's search cannot settle it"
        if self.search.problems:
            return f"check-spec's search could not run: {self.search.problems[0]}"
        return f"check-spec's search of the declared scope stopped at {self.search.stats.stopped}"

    def run(self, walks: list[ScenarioWalk]) -> list[Finding]:
        self.unreachable: set[str] = set()
        self.lifecycle()
        self.unused()
        self.errors()
        self.profiles()
        self.scenarios(walks)
        return sorted(self.findings, key=lambda f: (f.file or "", f.line or 0))

    def lifecycle(self) -> None:
        lc = self.spec.lifecycle
        fired = fired_triggers(self.spec)
        for i, t in enumerate(lc.transitions):
            if t.trigger not in fired:
                self.add(
                    "unfired-transition",
                    _transition_names(t)[0]
                    if len(t.sources) == 1
                    else f"{'|'.join(t.sources)} -{t.trigger}-> {t.dest}",
                    ("lifecycle", "transitions", i),
                    f"no operation fires {t.trigger!r}, so {', '.join(_transition_names(t))} never happens",
                    f"add `- fire: {{trigger: {t.trigger}, on: <record>}}` to the operation that causes it, "
                    f"or remove the transition",
                )
        if self.searched():
            self.unreachable_by_search()
            return
        reach, frontier = {lc.initial}, [lc.initial]
        while frontier:
            here = frontier.pop()
            for t in lc.transitions:
                if t.trigger in fired and here in t.sources and t.dest not in reach:
                    reach.add(t.dest)
                    frontier.append(t.dest)
        for name in lc.states:
            if name not in reach:
                self.unreachable.add(name)
                self.add(
                    "unreachable-state",
                    name,
                    ("lifecycle", "states", name),
                    f"no sequence of operations reaches state {name!r} from {lc.initial!r}: every transition "
                    f"into it has a trigger no operation fires, or starts from another unreachable state "
                    f"(a static guess: {self.why_static()})",
                    "fire the transition into it from an operation (or on_clock), or remove the state",
                )

    def unreachable_by_search(self) -> None:
        """States the complete search never reached: it follows guards, conditions and
        parameters, which the static guess (triggers some operation fires) cannot."""
        search = self.search
        assert search is not None  # searched() holds
        stats, depth = search.stats, search.scope.max_depth
        never = [f.subject for f in search.findings if f.kind == "unreached-state"]
        how = (
            "closed: nothing is left to explore, so no sequence reaches it under the scope's parameters"
            if stats.closed
            else f"a sequence longer than {depth} steps or other parameter values may still reach it"
        )
        for name in never:
            self.unreachable.add(name)
            self.add(
                "unreachable-state",
                name,
                ("lifecycle", "states", name),
                f"check-spec's complete search of the declared scope ({stats.states} states within depth "
                f"{depth}) never reaches state {name!r} from {self.spec.lifecycle.initial!r} ({how})",
                "make a transition into it possible (its trigger, guard and the conditions around the fire "
                "step), widen check.scope if it needs more steps or other parameters, or remove the state",
                basis="search",
            )

    def unused(self) -> None:
        spec = self.spec
        read = parameters_read(spec.raw)
        for name in spec.parameters:
            if name not in read:
                self.add(
                    "unused-parameter",
                    name,
                    ("parameters", name),
                    f"parameter {name!r} is declared but no expression reads params.{name}",
                    f"use params.{name} where it matters, or remove it (an implementation may still "
                    f"declare it only if the spec keeps it)",
                )
        used = _refs({k: v for k, v in spec.raw.items() if k != "lint"})
        for name in spec.definitions:
            if name not in used:
                self.add(
                    "unused-definition",
                    name,
                    ("definitions", name),
                    f"definition {name!r} is never referenced",
                    f'refer to it with {{$ref: "#/definitions/{name}"}} or remove it',
                )
        emitted = emitted_effects(spec)
        for name in spec.effects:
            if name not in emitted:
                self.add(
                    "unemitted-effect",
                    name,
                    ("effects", name),
                    f"effect {name!r} is declared but no emit step produces it",
                    f"add `- emit: {{effect: {name}, fields: {{...}}}}` where it happens, or remove it",
                )

    def errors(self) -> None:
        for name, op in self.spec.operations.items():
            raised = raised_errors(op.steps)
            for i, kind in enumerate(op.errors):
                if kind not in raised:
                    self.add(
                        "unraised-error",
                        f"{name}: {kind}",
                        ("operations", name, "errors", i),
                        f"operation {name} declares error {kind!r} but none of its steps raises it",
                        f"raise it (`require` ... `error: {{kind: {kind}, ...}}`, `reject`, `find` ... "
                        f"`missing`) or remove it from errors",
                    )

    def profiles(self) -> None:
        for pname, profile in self.spec.profiles.items():
            for key, value in profile.parameters.items():
                param = self.spec.parameters.get(key)
                if param is not None and value == param.default and type(value) is type(param.default):
                    self.add(
                        "default-profile-value",
                        f"{pname}.{key}",
                        ("profiles", pname, "parameters", key),
                        f"profile {pname} sets {key} to {value!r}, which is already its default",
                        "remove the line (the profile inherits the default), or change the default",
                    )

    def scenarios(self, walks: list[ScenarioWalk]) -> None:
        spec = self.spec
        called = set().union(*(scenario_operations(sc.steps) for sc in spec.scenarios)) if spec.scenarios else set()
        exercised = _Exercised.by([w for w in walks if w.skipped is None])
        self.uncalled_operations(called)
        self.untested_transitions(exercised.transitions)
        self.untested_errors(called, exercised.outcomes)
        self.untested_policies(exercised.policies)
        self.unfollowed_scenarios(walks)

    def uncalled_operations(self, called: set[str]) -> None:
        for name in self.spec.operations:
            if name not in called:
                self.add(
                    "uncalled-operation",
                    name,
                    ("operations", name),
                    f"no scenario calls operation {name}",
                    f"add a scenario step `- call: {name}` (a nominal case at least)",
                )

    def untested_transitions(self, taken: set[str]) -> None:
        fired = fired_triggers(self.spec)
        for i, t in enumerate(self.spec.lifecycle.transitions):
            if t.trigger not in fired:
                continue  # already reported as unfired
            for src, name in zip(t.sources, _transition_names(t)):
                if name not in taken and src not in self.unreachable:
                    self.add(
                        "untested-transition",
                        name,
                        ("lifecycle", "transitions", i),
                        f"no scenario takes transition {name}",
                        "add a scenario whose steps take it (the model must fire it: check guards and arguments)",
                    )

    def untested_errors(self, called: set[str], outcomes: set[str]) -> None:
        for name, op in self.spec.operations.items():
            if name not in called:
                continue  # already reported as uncalled
            raised = raised_errors(op.steps)
            for i, kind in enumerate(op.errors):
                if kind in raised and f"{name}: {kind}" not in outcomes:
                    self.add(
                        "untested-error",
                        f"{name}: {kind}",
                        ("operations", name, "errors", i),
                        f"no scenario makes {name} fail with {kind!r}",
                        f"add an edge scenario: `- call: {name}` with arguments that fail, and "
                        f"`expect: {{error: {{kind: {kind}}}}}`",
                    )

    def untested_policies(self, events: set[str]) -> None:
        for name, policy in self.spec.policies.items():
            missing = [what for event, what in POLICY_ACTS.get(policy.kind, ()) if f"{name}.{event}" not in events]
            if missing:
                self.add(
                    "untested-policy",
                    name,
                    ("policies", name),
                    f"no scenario makes {policy.kind} policy {name} act: none {' or '.join(missing)}",
                    "add a scenario that drives it there (a boundary scenario just past its limit)",
                )

    def unfollowed_scenarios(self, walks: list[ScenarioWalk]) -> None:
        seen = set()
        for walk in walks:
            if walk.problem and walk.scenario not in seen:
                seen.add(walk.scenario)
                index = next(i for i, sc in enumerate(self.spec.scenarios) if sc.id == walk.scenario)
                self.add(
                    "scenario-not-followed",
                    walk.scenario,
                    ("scenarios", index),
                    f"the model alone could not follow scenario {walk.scenario} ({walk.parameters}): "
                    f"{walk.problem}; what it exercises is counted only up to there",
                    "a run against an implementation shows whether the scenario itself is wrong",
                )


def _transition_names(t) -> list[str]:
    return [f"{src} -{t.trigger}-> {t.dest}" for src in t.sources]


# -- suppressions ---------------------------------------------------------------
def _suppress(spec: Spec, findings: list[Finding]) -> list[Finding]:
    entries = (spec.raw.get("lint") or {}).get("suppress") or []
    used = [False] * len(entries)
    out = []
    for finding in findings:
        for i, entry in enumerate(entries):
            patterns = entry.get("at") if isinstance(entry.get("at"), list) else [entry.get("at", "*")]
            if entry.get("rule") == finding.rule and any(
                fnmatch.fnmatchcase(finding.subject, str(p)) for p in patterns
            ):
                finding = replace(finding, suppressed=str(entry.get("reason", "")))
                used[i] = True
                break
        out.append(finding)
    for i, entry in enumerate(entries):
        if not used[i]:
            file, line = spec.source_map.locate(("lint", "suppress", i))
            out.append(
                Finding(
                    "unused-suppression",
                    f"{entry.get('rule')} {entry.get('at')}",
                    f"suppression of {entry.get('rule')} at {entry.get('at')!r} matches no finding",
                    file,
                    line,
                    "remove it: what it silenced is fixed (or `at` is misspelled)",
                )
            )
    return out


def lint_loaded(spec: Spec, search: CheckReport | None = None) -> list[Finding]:
    """The findings for an already loaded spec, suppressions applied; with
    ``search`` (check-spec's report over the declared scope), what it settles
    when complete (unreachable states) comes from it instead of the static guess."""
    return _suppress(spec, _Linter(spec, search).run(walk_scenarios(spec)))


SEARCH_TIME_LIMIT_S = 60.0


def lint_spec(
    path: str | Path, search: bool = True, progress: Callable[[str], None] | None = None, progress_every_s: float = 10.0
) -> LintReport:
    """Load and lint one spec file (with ``search``, a spec declaring
    ``check.scope`` is searched first: ``lint_loaded``). A spec that does not
    load yields its problems (those a lint rule also names become error findings)."""
    report = LintReport(str(path))
    try:
        data, smap = load_spec_data(path)
        spec = compile_spec(data, smap, str(path))
    except SpecError as exc:
        for p in exc.problems:
            if p.code in RULES:
                report.findings.append(Finding(p.code, p.message, p.message, p.file, p.line, p.hint, "error"))
            else:
                report.problems.append(p)
        return report
    searched = (
        check_spec(
            spec,
            until_every_state=True,
            budget=SearchBudget(time_limit_s=SEARCH_TIME_LIMIT_S, progress=progress, progress_every_s=progress_every_s),
        )
        if search and declared_scope(spec)
        else None
    )
    report.exhausted = searched.stats.exhausted if searched is not None else None
    report.findings = lint_loaded(spec, searched)
    return report

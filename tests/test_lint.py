"""`conformance lint`: each rule on a fixture spec made to break it, suppressions,
the bundled specs lint clean, and the CLI's exit codes."""

import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from conformance.cli import cli
from statemachines.tools.lint import RULES, lint_spec

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "lint"
SPECS = sorted(p for p in (ROOT / "spec").glob("*.yaml") if ".scenarios." not in p.name)

# rule -> (subject of the finding, a text that must be on the line it points at)
EXPECTED = {
    "unreachable-state": ("on_hold", "on_hold: {}"),
    "unfired-transition": ("open -discard-> closed", "trigger: discard"),
    "terminal-exit": (None, "trigger: reopen, source: closed"),
    "unused-parameter": ("max_tickets", "max_tickets:"),
    "unused-definition": ("note", "note: {type: string"),
    "unemitted-effect": ("reopened_event", "reopened_event:"),
    "unraised-error": ("close_ticket: already_closed", "errors: [not_found, already_closed]"),
    "undeclared-error": (None, "otherwise: {kind: already_closed"),
    "uncalled-operation": ("get_ticket", "get_ticket:"),
    "untested-transition": ("open -reject-> rejected", "trigger: reject, source: open"),
    "untested-error": ("close_ticket: already_closed", "errors: [not_found, already_closed]"),
    "untested-policy": ("retention", "retention:"),
    "default-profile-value": ("terse.msg_not_found", "parameters: {msg_not_found: No such ticket}"),
    "scenario-not-followed": ("E2", "- id: E2"),
    "unused-suppression": (None, "- rule: unused-parameter"),
}
# What a defect brings along by necessity (an unreachable state's way in is never fired).
ALSO = {"unreachable-state": {"unfired-transition"}}


def test_every_rule_has_a_fixture_and_a_test():
    assert set(EXPECTED) == set(RULES)
    assert {p.stem for p in FIXTURES.glob("*.yaml")} == set(RULES) | {"clean"}


def test_the_clean_fixture_has_no_finding():
    report = lint_spec(FIXTURES / "clean.yaml")
    assert report.findings == [] and report.problems == []


@pytest.mark.parametrize("rule", sorted(EXPECTED))
def test_rule_is_reported_on_its_fixture(rule):
    path = FIXTURES / f"{rule}.yaml"
    report = lint_spec(path)
    assert report.problems == []
    assert {f.rule for f in report.findings} == {rule} | ALSO.get(rule, set()), [str(f) for f in report.findings]
    finding = next(f for f in report.findings if f.rule == rule)
    subject, on_line = EXPECTED[rule]
    if subject is not None:
        assert finding.subject == subject
    assert finding.file == str(path) and finding.line
    assert on_line in path.read_text().splitlines()[finding.line - 1]
    assert finding.hint
    assert finding.severity == ("error" if rule in ("terminal-exit", "undeclared-error") else "warning")


def test_a_suppressed_finding_carries_its_reason(tmp_path):
    text = (FIXTURES / "unused-parameter.yaml").read_text() + (
        "\nlint:\n  suppress:\n    - rule: unused-parameter\n      at: max_*\n"
        "      reason: declared by implementations for their own limits\n"
    )
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    report = lint_spec(path)
    assert report.active == []
    assert [(f.rule, f.suppressed) for f in report.suppressed] == [
        ("unused-parameter", "declared by implementations for their own limits")
    ]


def test_a_suppression_needs_a_reason(tmp_path):
    text = (FIXTURES / "unused-parameter.yaml").read_text() + (
        "\nlint:\n  suppress:\n    - {rule: unused-parameter, at: max_tickets}\n"
    )
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    report = lint_spec(path)
    assert report.problems and "reason" in str(report.problems[0])


@pytest.mark.parametrize("path", SPECS, ids=[p.name for p in SPECS])
def test_bundled_specs_lint_clean_or_say_why(path):
    report = lint_spec(path)
    assert report.problems == []
    assert report.active == [], "\n".join(map(str, report.active))
    for finding in report.suppressed:
        assert len(finding.suppressed.split()) >= 5, f"{finding}: give a real reason"


def test_cli_warns_by_default_and_fails_with_strict():
    runner = CliRunner()
    path = str(FIXTURES / "unused-definition.yaml")
    loose = runner.invoke(cli, ["lint", path])
    assert loose.exit_code == 0
    assert re.search(r"unused-definition\.yaml:\d+: warning\[unused-definition\]", loose.output)
    assert "hint:" in loose.output
    strict = runner.invoke(cli, ["lint", "--strict", path])
    assert strict.exit_code == 1
    clean = runner.invoke(cli, ["lint", "--strict", str(FIXTURES / "clean.yaml")])
    assert clean.exit_code == 0, clean.output


def test_cli_json_and_broken_specs():
    runner = CliRunner()
    result = runner.invoke(cli, ["lint", "--json", str(FIXTURES / "untested-policy.yaml")])
    data = json.loads(result.output)
    assert data[0]["findings"][0]["rule"] == "untested-policy"
    broken = runner.invoke(cli, ["lint", str(FIXTURES / "terminal-exit.yaml")])
    assert broken.exit_code == 2 and "error[terminal-exit]" in broken.output


def _thread_jobs_copy(tmp_path, edit):
    for name in ("thread-jobs.yaml", "thread-jobs.scenarios.yaml"):
        shutil.copy(ROOT / "spec" / name, tmp_path / name)
    path = tmp_path / "thread-jobs.yaml"
    text = path.read_text(encoding="utf-8")
    assert edit[0] in text
    path.write_text(text.replace(edit[0], edit[1]), encoding="utf-8")
    return path


def test_unreachable_state_comes_from_the_complete_search(tmp_path):
    # A guard no argument in scope meets: the trigger is fired, so the static guess sees nothing.
    path = _thread_jobs_copy(
        tmp_path,
        (
            "- {trigger: request_cancel, source: running, dest: pending_cancel}",
            "- {trigger: request_cancel, source: running, dest: pending_cancel, guard: \"args.requested_by == 'agent'\"}",
        ),
    )
    static = lint_spec(path, search=False)
    assert "unreachable-state" not in {f.rule for f in static.findings}
    searched = lint_spec(path)
    [finding] = [f for f in searched.findings if f.rule == "unreachable-state"]
    assert (finding.subject, finding.basis) == ("pending_cancel", "search")
    assert finding.message.startswith("check-spec's complete search of the declared scope (")
    assert "within depth 4) never reaches state 'pending_cancel' from 'running'" in finding.message
    assert "pending_cancel: {description" in path.read_text().splitlines()[finding.line - 1]
    assert finding.to_dict()["basis"] == "search"


def test_a_static_guess_says_why_the_search_did_not_settle_it(tmp_path):
    report = lint_spec(FIXTURES / "unreachable-state.yaml")
    [finding] = [f for f in report.findings if f.rule == "unreachable-state"]
    assert finding.basis == "static"
    assert "(a static guess: no check.scope is declared, so check-spec's search cannot settle it)" in finding.message
    text = (FIXTURES / "unreachable-state.yaml").read_text() + "\ncheck:\n  scope:\n    max_states: 1\n"
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    [stopped] = [f for f in lint_spec(path).findings if f.rule == "unreachable-state"]
    assert (
        stopped.basis == "static"
        and "check-spec's search of the declared scope stopped at max_states 1" in stopped.message
    )

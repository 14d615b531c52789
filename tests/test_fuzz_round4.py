"""Property-based fuzzing of the surfaces of issue 64 (round 4), in the style
of tests/test_fuzz_received_files.py: whatever Hypothesis writes, the
command-trust check never trusts an echoed input, the GitHub Action's
outputs stay the three it sets with the real exit code, and a spec-mutants
pointer gives a result or an error at its file:line, never another
exception. (Generated code: tests/test_hostile_codegen.py.)"""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conformance.adapters import command_trust
from conformance.errors import InputRefused

pytestmark = pytest.mark.hypothesis  # drives Hypothesis: tests/hypothesis_marker.py

ROOT = Path(__file__).resolve().parents[1]
FUZZ = settings(
    max_examples=15,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

WORD = st.text(st.sampled_from("abcdtouch/.'\" -"), min_size=1, max_size=12)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    before=st.lists(WORD, max_size=6),
    flood=st.lists(st.lists(WORD, max_size=8), max_size=12),
    printed=st.lists(WORD, max_size=12),
    bound=st.integers(1, 8),
)
def test_an_echoed_input_is_never_trusted_however_much_follows(before, flood, printed, bound):
    """With a tiny bound: an input handed to the tool, then any number of
    other arguments and printed lines, then the tool echoing the input in a
    command field. The echo is refused, whatever the order and amount."""
    evil = "touch /tmp/PWNED-64"
    saved = command_trust.MAX_REMEMBERED
    command_trust.MAX_REMEMBERED = bound
    try:
        trust = command_trust.CommandTrust()
        for text in before:
            trust.note_arguments({"x": text})
        trust.note_arguments({"text": evil})
        for texts in flood:
            trust.note_arguments({f"a{i}": text for i, text in enumerate(texts)})
        for text in printed:
            trust.note_output({"own_command": f"tool {text}"})
        trust.note_output({"status_command": evil})
        with pytest.raises(InputRefused):
            trust.check("run", ["{*command}"], {"command": evil}, {}, shlex.split(evil), [], "cli.yaml")
    finally:
        command_trust.MAX_REMEMBERED = saved


# ------------------------------------------------------------------ the Action's outputs

LINE_BITS = st.sampled_from(["\n", "\r", "\r\n", "=", "<<", "EOF", "exit-code", "verdict", "pass", "0", "out", "/"])


@FUZZ
@given(report_dir=st.lists(LINE_BITS, min_size=1, max_size=10).map("".join))
def test_no_report_dir_adds_or_overrides_an_action_output(tmp_path_factory, report_dir):
    from test_ci_integrations import _Action, _failing_conformance

    where = tmp_path_factory.mktemp("action")
    action = _Action(where, _failing_conformance(where), {"spec": "thread-jobs", "report-dir": report_dir})
    assert action.run(skip=("Install the conformance kit",)) != 0, action.log
    out = action.outputs["run"]
    assert set(out) <= {"exit-code", "verdict", "report-dir"}, out
    assert out["exit-code"] in ("1", "2") and out["verdict"] in ("fail", "error"), out


# ------------------------------------------------------------------ spec-mutants pointers

POINTER_PART = st.one_of(
    st.text(st.characters(categories=["Nd", "No", "Nl"]), min_size=1, max_size=4),
    st.text("0123456789", min_size=1, max_size=30),
    st.sampled_from(["-", "", "~0", "~1", "²", "9" * 5000, "1" + "0" * 19]),
    st.text(max_size=8),
)


@pytest.fixture(scope="module")
def mutant_dir(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("mutants")
    shutil.copy(ROOT / "spec/thread-jobs.yaml", directory)
    shutil.copy(ROOT / "spec/thread-jobs.scenarios.yaml", directory)
    (directory / "mutants").mkdir()
    return directory


@FUZZ
@given(first=POINTER_PART, second=POINTER_PART, was=st.sampled_from(["now", None]))
def test_any_mutant_pointer_is_applied_or_refused_at_its_line(mutant_dir, first, second, was):
    import json

    from statemachines import SpecError, load_spec
    from statemachines.tools.spec_mutants import load_spec_mutants, mutated_spec

    at = f"/operations/observe_outcome/steps/{first}/do/{second}/set/fields/completed_at"
    edit = f"      - at: {json.dumps(at)}\n" + (f"        was: {was}\n" if was else "") + '        becomes: "null"\n'
    (mutant_dir / "mutants/thread-jobs.yaml").write_text(
        "spec: thread-jobs\nmutants:\n  - name: fuzzed\n    description: a fuzzed pointer\n"
        "    caught_by: {kind: invariant, subject: terminal_has_completion_time}\n    shortest: 2\n"
        f"    edits:\n{edit}",
        encoding="utf-8",
    )
    spec = load_spec(str(mutant_dir / "thread-jobs.yaml"))
    try:
        (mutant,) = load_spec_mutants(spec)
        mutated_spec(spec, mutant)
    except SpecError as exc:
        text = "\n".join(str(p) for p in exc.problems)
        assert "mutants/thread-jobs.yaml:" in text, text

"""Issue 11: every parameter that lets a spec say what a real system does is
demanded by the kit from the YAML alone. In a copy of the spec whose default
is changed (no Python edited), the reference, still doing the old default,
fails; declaring the new value, it passes again."""

import re
import shutil
from pathlib import Path

import pytest

from conformance.engine.runner import RunConfig, run_conformance

ROOT = Path(__file__).resolve().parent.parent
SPEC_DIR = ROOT / "spec"
FRAGMENTS = {
    "thread-jobs": ["thread-jobs.scenarios.yaml"],
    "async-jobs": [
        "async-jobs.job-manager.scenarios.yaml",
        "async-jobs.task-table.scenarios.yaml",
        "async-jobs.oh-my-pi-18.scenarios.yaml",
    ],
    "process-sessions": ["process-sessions.scenarios.yaml"],
}

# (spec, parameter, the default in the copy, what the YAML says today, options of the
# reference in both runs, whether only the exploration can tell the two apart)
CASES = [
    ("thread-jobs", "second_start_error", "tool_call_resolved", "job_exists_for_tool_call", {}, False),
    ("thread-jobs", "unknown_job_text", "job_not_found", "not_found_in_thread", {}, False),
    ("thread-jobs", "spill_at", "injection", "outcome", {}, False),
    ("thread-jobs", "keep_payload", "true", "false", {}, False),
    ("thread-jobs", "payload_size", "serialised", "raw", {}, True),
    ("thread-jobs", "spill_file_content", "json", "payload", {}, False),
    ("async-jobs", "empty_poll", "nothing", "absent", {}, False),
    ("async-jobs", "empty_text", "omitted", "returned", {}, False),
    ("async-jobs", "empty_text", "omitted_by_tool", "returned", {}, False),
    ("async-jobs", "evicted_in_wait", "last_state", "dropped", {}, False),
    ("async-jobs", "drained_cancel_status", "body_outcome", "table_status", {"profile": "task-table"}, False),
    ("async-jobs", "id_counter_start", "0", "1", {"profile": "task-table"}, False),
    ("process-sessions", "retention", "until_polled", "ttl", {}, False),
    ("process-sessions", "staged_polls", "false", "true", {}, False),
]


def _copy_with_default(tmp_path: Path, spec: str, name: str, new: str) -> Path:
    for fragment in FRAGMENTS[spec]:
        shutil.copy(SPEC_DIR / fragment, tmp_path)
    text = (SPEC_DIR / f"{spec}.yaml").read_text()
    pattern = rf"(\n  {name}:\n    type: \w+\n    default: )[^\n]+"
    changed, count = re.subn(pattern, rf"\g<1>{new}", text)
    assert count == 1, f"parameter {name} not found in {spec}.yaml"
    path = tmp_path / f"{spec}.yaml"
    path.write_text(changed)
    return path


def _run(path: Path, tmp_path: Path, options: dict, stateful: bool, label: str) -> dict:
    return run_conformance(
        RunConfig(
            spec_path=str(path),
            profile="quick",
            seed=1,
            adapter_options=options,
            stateful=stateful,
            report_dir=str(tmp_path / label),
        )
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "spec, name, new, old, options, exploration_only", CASES, ids=[f"{c[0]}:{c[1]}" for c in CASES]
)
def test_changing_the_default_in_yaml_changes_what_is_demanded(
    tmp_path, spec, name, new, old, options, exploration_only
):
    path = _copy_with_default(tmp_path, spec, name, new)
    failing = _run(path, tmp_path, options, stateful=exploration_only, label="old")
    assert failing["parameters"][name] != old and failing["verdict"] == "fail", (
        f"the reference doing {name}={old} passed a spec whose default is {new}"
    )
    if not exploration_only:
        assert any(s["verdict"] == "fail" for s in failing["scenarios"])
    declaring = _run(path, tmp_path, {**options, name: new}, stateful=True, label="new")
    assert str(declaring["implementation"]["parameters"][name]).lower() == new
    assert declaring["verdict"] == "pass", (
        [s for s in declaring["scenarios"] if s["verdict"] not in ("pass", "skip")],
        (declaring.get("stateful") or {}).get("failure"),
    )


def test_scenarios_that_cannot_hold_under_a_real_system_say_why_and_their_equivalents_run(tmp_path):
    report = run_conformance(
        RunConfig(
            spec_path=str(SPEC_DIR / "thread-jobs.yaml"),
            stateful=False,
            adapter_options={"profile": "psi-runtime"},
            report_dir=str(tmp_path),
        )
    )
    assert report["verdict"] == "pass"
    reasons = {entry["id"]: entry["reason"] for entry in report["not_applicable"]["scenarios"]}
    assert set(reasons) == {
        "N7",
        "E1",
        "E10",
        "B5",
        "B11",
        "B15",
    }  # B11, B15: the raw-size limits at the outcome; B9 covers them here
    assert reasons["E1"].startswith("This runtime answers a second start with tool_call_resolved")
    assert "E14" in reasons["E1"] and "here second_start_error = \"tool_call_resolved\"" in reasons["E1"]
    verdicts = {s["id"]: s["verdict"] for s in report["scenarios"]}
    assert all(verdicts[i] == "pass" for i in ("N11", "E14", "B9")), verdicts


def test_not_applicable_without_assumes_is_a_spec_error(tmp_path):
    from statemachines import SpecError, load_spec

    for fragment in FRAGMENTS["thread-jobs"]:
        shutil.copy(SPEC_DIR / fragment, tmp_path)
    text = (SPEC_DIR / "thread-jobs.yaml").read_text()
    path = tmp_path / "thread-jobs.yaml"
    path.write_text(
        text.replace(
            "include: [thread-jobs.scenarios.yaml]",
            "include: [thread-jobs.scenarios.yaml]\n"
            "scenarios:\n  - id: X1\n    title: x\n    category: edge\n"
            "    not_applicable: a reason without a condition\n"
            "    steps: [{call: restart, args: {}}]\n",
        )
    )
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    assert "has no assumes" in str(caught.value)


def test_spill_file_matchers_judge_exactly(tmp_path):
    from statemachines import Matcher

    raw, document = tmp_path / "raw.log", tmp_path / "doc.json"
    raw.write_text("a\nb", encoding="utf-8")
    document.write_text('"a\\nb"', encoding="utf-8")
    assert Matcher((("file_equals", "a\nb"),)).failure(str(raw)) is None
    assert "exactly" in Matcher((("file_equals", "a\nb"),)).failure(str(document))
    assert Matcher((("file_json", "a\nb"),)).failure(str(document)) is None
    assert "one JSON document" in Matcher((("file_json", "a\nb"),)).failure(str(raw))
    assert "JSON document to be" in Matcher((("file_json", "a\nc"),)).failure(str(document))


def test_a_reason_is_given_only_where_its_equivalent_scenario_runs():
    """A `not_applicable` text names the cause and the equivalent scenario for parameters of the
    scenario's own surface. Under every bundled parameter set (defaults and each profile), wherever a
    report gives that text, each scenario it names applies there; a scenario of another surface
    (e.g. TT-N6 under oh-my-pi, JM-E17 under defect) gets only its condition and the values."""
    from conformance.engine.scenarios import not_applicable_reason
    from statemachines import load_spec
    from statemachines.tools.dryrun import parameter_sets

    given = 0
    for name in FRAGMENTS:
        spec = load_spec(SPEC_DIR / f"{name}.yaml")
        ids = {s.id for s in spec.scenarios}
        for label, params in parameter_sets(spec):
            applies = {s.id for s in spec.scenarios if not_applicable_reason(spec, s, params) is None}
            for scenario in spec.scenarios:
                reason = not_applicable_reason(spec, scenario, params)
                if not scenario.not_applicable or reason is None:
                    continue
                if not reason.startswith(scenario.not_applicable):
                    assert reason.startswith("it assumes "), (name, label, scenario.id, reason)
                    continue
                given += 1
                named = set(re.findall(r"[A-Z]+(?:-[A-Z]+)?\d+", scenario.not_applicable)) & ids
                assert named, (name, scenario.id, "names no equivalent scenario")
                assert named <= applies, (
                    f"{name} {label}: {scenario.id} says {sorted(named - applies)} "
                    f"covers the rule, which does not run there: {reason}"
                )
    assert given >= 10  # the texts are given where they belong (N7/E1/E10/B5 under psi-runtime, ...)

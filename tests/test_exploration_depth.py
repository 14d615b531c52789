"""The generated exploration reaches the deep states on its own (default ci profile)."""
from pathlib import Path

from conformance.engine.runner import RunConfig, run_conformance

ROOT = Path(__file__).resolve().parent.parent


def test_ci_exploration_reaches_full_retention_ties_and_races(tmp_path):
    report = run_conformance(RunConfig(spec_path=str(ROOT / "spec" / "thread-jobs.yaml"), profile="ci",
                                       scenarios=False, report_dir=str(tmp_path)))
    stateful = report["stateful"]
    assert stateful["verdict"] == "pass"
    policies = stateful["coverage"]["policies"]
    assert policies.get("retention.evicted", 0) > 0      # more than retention_limit terminal jobs in a thread
    assert policies.get("retention.at_limit", 0) > 0     # exactly at the limit
    assert policies.get("completion_order.tie", 0) > 0   # equal completion times ordered by the tie-break
    assert policies.get("payload.spilled", 0) > 0 and policies.get("payload.at_limit", 0) > 0
    transitions = stateful["coverage"]["transitions"]
    assert transitions.get("running -request_cancel-> pending_cancel", 0) > 0
    assert transitions.get("pending_cancel -finish-> completed", 0) > 0   # best-effort cancel, then completion
    outcomes = stateful["coverage"]["outcomes"]
    for rejected in ("start_job: duplicate_job_id", "inspect_job: not_found_in_thread",
                     "cancel_job: not_found_in_thread", "retry_job: retry_not_supported"):
        assert outcomes.get(rejected, 0) > 0, rejected  # forbidden calls were tried and rejected


def test_fresh_keys_take_the_shape_of_the_keys_the_implementation_handed_out():
    from conformance.engine.stateful import shaped_key

    seen = ["job-1", "job-3", "k2"]  # k2: one of the kit's own fresh names, never a shape
    assert [shaped_key(seen, pick) for pick in (129, 130, 131)] == ["job-4", "job-5", "job-6"]
    assert shaped_key(["task-007"], 0) == "task-008"   # padding kept
    assert shaped_key(["abc", "k1", 7], 0) is None      # nothing numbered to imitate


def test_a_generated_id_that_collides_with_an_explicit_one_is_found_by_the_exploration():
    # The mutant's id counter skips no id a caller chose; only an explicit id in the
    # implementation's own shape ("job-<n>" next in line) shows it.
    from conformance.mutants import load_mutants, run_mutant
    from statemachines import load_spec

    spec = str(ROOT / "spec" / "thread-jobs.yaml")
    mutant = load_mutants(load_spec(spec).implementations["mutants"])["generated_id_collides"]
    result = run_mutant(spec, "generated_id_collides", mutant, profile="ci", seed=1, timeout_s=10)
    assert result.found_by_exploration, result
    assert "generated job id" in result.exploration_message, result.exploration_message


def test_coverage_says_which_races_the_exploration_reached(tmp_path):
    report = run_conformance(RunConfig(spec_path=str(ROOT / "spec" / "thread-jobs.yaml"), profile="quick",
                                       scenarios=False, report_dir=str(tmp_path)))
    races = report["coverage"]["categories"]["races"]
    # the spec's four concurrent groups, each named with the calls it races
    assert races["total"] == 4, races
    assert races["covered"] == 4 - len(races["missed"]) and races["covered"] >= 2, races
    assert all(report["coverage"]["races"].get(name) for name in ("racing_emitters", "cancel_races_completion")
               if not any(m.startswith(name) for m in races["missed"])), report["coverage"]["races"]
    summary = (tmp_path / "summary.md").read_text(encoding="utf-8")
    assert "| Races |" in summary, summary


def test_races_are_not_counted_against_an_implementation_that_takes_no_concurrent_calls():
    from statemachines import load_spec
    from conformance.engine.coverage import coverage_categories

    spec = load_spec(ROOT / "spec" / "thread-jobs.yaml")
    empty = {c: {} for c in ("operations", "outcomes", "transitions", "states", "policies", "races")}
    assert coverage_categories(spec, empty, spec.default_parameters(), concurrent=False)["races"]["total"] == 0
    declared = coverage_categories(spec, empty, spec.default_parameters(), concurrent=True)["races"]
    assert declared["missed"] == ["racing_emitters: turn_boundary | turn_boundary | turn_boundary",
                                  "cancel_races_completion: cancel_job | observe_outcome",
                                  "sync_races_background: complete_sync | start_job",
                                  "concurrent_starts: start_job | start_job | start_job | start_job"], declared

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

"""Every shipped mutant of the reference is killed — by the scenario matrix and
by the stateful exploration alone."""

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.engine.budgets import REDUCE_REPLAYS
from conformance.engine.loaded_specs import load_spec_once
from conformance.mutants import as_run_reports, explore_mutant, load_mutants, mutant_config, run_mutant
from conformance.traces import check_trace_run

ROOT = Path(__file__).resolve().parent.parent
SPEC = str(ROOT / "spec" / "thread-jobs.yaml")
SPECS_WITH_MUTANTS = {}
for _path in sorted((ROOT / "spec").glob("*.yaml")):
    if ".scenarios." not in _path.name:
        _target = load_spec_once(_path).implementations.get("mutants")
        if _target:
            SPECS_WITH_MUTANTS[str(_path)] = load_mutants(_target)
CASES = [(spec, name) for spec, mutants in SPECS_WITH_MUTANTS.items() for name in sorted(mutants)]


# Each spec ships enough realistic bugs; a spec driving a real command-line
# tool (every step a process) may ship fewer.
MINIMUM_MUTANTS = {"async-command": 6}


@pytest.mark.parametrize("spec", sorted(SPECS_WITH_MUTANTS), ids=lambda p: Path(p).stem)
def test_there_are_enough_mutants(spec):
    assert len(SPECS_WITH_MUTANTS[spec]) >= MINIMUM_MUTANTS.get(Path(spec).stem, 10)


REPLAYS = REDUCE_REPLAYS["ci"]  # the replay reduction's budget at the ci profile, as `conformance run` spends it
SEEDS = (1, 2, 3)  # the exploration's seeds a mutant gets, in this order, until one finds it short enough
# Mutants of values outside the pools: the exploration reaches them with pool-drawn arguments
# leaving their pools (off by default for now: engine/profiles.py), so they get the share.
BEYOND_THE_POOLS = ["job-manager.preferred_ids_ignore_case", "job-manager.label_normalised_nfc"]


def _share(name: str) -> float | None:
    from conformance.engine.profiles import RECOMMENDED_BEYOND_POOLS

    return RECOMMENDED_BEYOND_POOLS if name in BEYOND_THE_POOLS else None


def longest_acceptable(shortest: int) -> int:
    """The longest counterexample accepted for a bug whose shortest one has
    ``shortest`` steps: 1.5 times as many, rounded down. (Issue 10's second
    target, never above 12 steps for a bug that needs 5 or fewer, follows.)"""
    return int(shortest * 1.5)


@pytest.mark.slow
@pytest.mark.parametrize("spec, name", CASES, ids=[f"{Path(s).stem}:{n}" for s, n in CASES])
def test_mutant_is_killed_by_scenarios_and_by_exploration_alone_with_a_short_counterexample(spec, name, tmp_path):
    mutant = SPECS_WITH_MUTANTS[spec][name]
    assert mutant.shortest, f"{name} declares no shortest counterexample (Mutant.shortest)"
    # The ci profile is what `conformance run` and `conformance mutants` use by default. The failure
    # found is reduced by replaying it (first without Hypothesis's shrinking, which is slower).
    record = tmp_path / "traces"
    result = run_mutant(
        spec,
        name,
        mutant,
        profile="ci",
        seed=1,
        timeout_s=10,
        reduce_replays=REPLAYS,
        record_dir=str(record),
        beyond_pools=_share(name),
    )
    assert result.error is None, result.error
    assert result.killed_by_scenarios, f"{name} survived every scenario"
    assert_traces_fail_where_the_live_run_failed(spec, name, record, result)
    # Races and thread-scheduled ids make a seed's path vary between processes and under load
    # (CI runs of 2026-11-23 missed job-manager.list_not_acknowledging with seeds 1 and 2, and
    # took task-table.fires_in_start_order down a 176-step path with seed 1, where a re-run of the
    # same installed kit found it in 6 and 4 steps): the exploration gets the next seeds too, as a
    # user re-running with --seed would. Which seeds were tried is part of every assertion message.
    limit = longest_acceptable(mutant.shortest)
    tried = [(1, 0, result.counterexample_steps if result.found_by_exploration else None)]
    best = result if result.found_by_exploration else None
    # The seeds first with the replay reduction alone (a second or two each in process), then,
    # only if none was short enough, as `conformance run` reports by default (as_run_reports:
    # Hypothesis's shrinking before the reduction, and the hunt for more failures, whose
    # shortest leads): with a slow transport (a process per step) a long failing example needs
    # both, and so does a retention bug first met through a batch that settles each job with a
    # call of its own (shrinking finds the batch that lets them all end with one clock move; the
    # replay reduction cannot turn one into the other). A bug whose first failure shows through a
    # clock move and a read (job-manager.cancel_not_sticky: 4 steps) may need the hunt to meet its
    # 3-step form, an explicit call. The scenarios ran once, above.
    for as_run, seed in [(False, s) for s in SEEDS[1:]] + [(True, s) for s in SEEDS]:
        if best is not None and best.counterexample_steps <= limit:
            break
        config = mutant_config(
            spec, name, mutant, profile="ci", seed=seed, timeout_s=10, reduce_replays=REPLAYS, beyond_pools=_share(name)
        )
        if as_run:
            config = as_run_reports(config)
        again = explore_mutant(config, mutant)
        assert again.error is None, again.error
        tried.append(
            (
                seed,
                "as run" if as_run else 0,
                again.counterexample_steps if again.found_by_exploration else None,
            )
        )
        if again.found_by_exploration and (best is None or again.counterexample_steps < best.counterexample_steps):
            best = again
    assert best is not None, f"{name} was not found by the stateful exploration alone (seed, shrinking, steps: {tried})"
    assert best.counterexample_steps <= limit, (
        f"{name}: a counterexample of {best.counterexample_steps} steps where {mutant.shortest} suffice "
        f"(at most {limit} accepted; (seed, shrinking, steps) tried: {tried}): {best.exploration_message}"
    )


GATE_SEEDS = (1, 2, 3, 4, 5)
GATE_CASES = [(spec, name, seed) for spec, name in CASES for seed in GATE_SEEDS]


@pytest.mark.slow
@pytest.mark.seed_gate
@pytest.mark.parametrize(
    "spec, name, seed", GATE_CASES, ids=[f"{Path(s).stem}:{n}:seed{seed}" for s, n, seed in GATE_CASES]
)
def test_each_seed_finds_the_mutant_with_a_short_counterexample(spec, name, seed):
    """Issue 33's per-seed target, the scheduled tier (``--seed-gate``, CONTRIBUTING.md): at
    each of seeds 1-5, not the first seed that works, the exploration alone finds every
    shipped mutant, and the counterexample `conformance run` would report by default (the ci
    profile's shrinking and replay reduction, --max-failures 3) is at most 1.5 times the
    mutant's declared shortest. A seed that misses or runs long fails on its own line."""
    mutant = SPECS_WITH_MUTANTS[spec][name]
    config = mutant_config(spec, name, mutant, profile="ci", seed=seed, timeout_s=10, beyond_pools=_share(name))
    result = explore_mutant(as_run_reports(config), mutant)
    assert result.error is None, result.error
    assert result.found_by_exploration, f"{name} survived the ci exploration at seed {seed}"
    limit = longest_acceptable(mutant.shortest)
    assert result.counterexample_steps <= limit, (
        f"{name} at seed {seed}: a counterexample of {result.counterexample_steps} steps where "
        f"{mutant.shortest} suffice (at most {limit} accepted): {result.exploration_message}"
    )


def assert_traces_fail_where_the_live_run_failed(spec: str, name: str, record: Path, result) -> None:
    """Passive conformance (docs/traces.md): the traces the scenario run recorded,
    checked offline by `check-trace`, fail exactly the scenarios that failed live."""
    failed_live = set(result.killed_by_scenarios) - set(result.errored_scenarios)
    checked = check_trace_run(spec, sorted(str(p) for p in record.glob("*.jsonl")), None)
    failed_offline = {Path(s["id"].split(":")[0]).stem for s in checked["scenarios"] if s["verdict"] == "fail"}
    # a scenario that errored live (the mutant raised, timed out) left no answer to record
    failed_offline -= set(result.errored_scenarios)
    assert failed_offline == failed_live, (name, failed_live, failed_offline)
    if failed_live:
        assert checked["exit_code"] == 1


def test_the_acceptable_length_follows_the_targets():
    assert [longest_acceptable(n) for n in (1, 2, 5, 6, 7, 41)] == [1, 3, 7, 9, 10, 61]


@pytest.mark.slow
def test_mutants_command_prints_a_table_and_gates_on_kills(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-P",
            "-m",
            "conformance.cli",
            "mutants",
            SPEC,
            "--profile",
            "quick",
            "--only",
            "list_cross_thread",
            "--only",
            "restart_keeps_jobs",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "list_cross_thread" in proc.stdout and "restart_keeps_jobs" in proc.stdout
    assert "2/2 killed; exploration alone found 2/2" in proc.stdout


# Issue 36: bug classes a ci run at one seed used to miss, because the exploration never generated
# the combination they need. Each must now be found by the exploration alone at every one of seeds 1-5.
STEERED_CLASSES = [
    ("task-progress", "auto_background_refires"),  # a timer due in the background fires again in the foreground
    ("task-progress", "auto_background_ties_by_id"),  # timers due together fire in id order
    ("task-progress", "foreground_reports_evicted"),  # an evicted task stays in the foreground slot
    ("async-jobs", "job-manager.stop_delay_ignores_earlier_end"),  # a cancel's stop delay hides an earlier end
    ("async-jobs", "job-manager.ties_by_job_id"),  # bodies ending together return in id order
    ("thread-jobs", "eviction_keeps_tool_call"),  # an evicted job's tool call stays resolved
    ("thread-jobs", "emitted_at_turn_start"),  # injections dated by their turn's start (inspect only)
    ("task-progress", "abbreviated_task_ids"),  # an abbreviation of a task id finds the task
    ("task-progress", "trimmed_task_ids"),  # a task id with white space around it finds the task
    ("task-progress", "path_like_task_ids"),  # a task id given as a path to it finds the task
    ("task-progress", "completion_ignores_notified"),  # a flag set while running, read at the end
    ("task-progress", "drain_keeps_after_end"),  # a queue used after its task ended
    ("task-progress", "cascade_uses_root_retain"),  # a retained root's kill, seen in a child's record
    ("task-progress", "cascade_stops_at_evicted"),  # a kill through an evicted middle of a tree
    ("async-jobs", "task-table.idle_wait_stays_enrolled"),  # a wait nothing could wake, then one outcome
    ("thread-jobs", "llm_error_clears_cancel"),  # a pending cancel's field only inspect_job shows, lost
    ("async-jobs", "job-manager.cancel_report_outlives_eviction"),  # a cancel list's record kept across a wait
    # Issue 63: values beyond the pools (near misses of a pool value, within the argument's schema)
]


@pytest.mark.slow
@pytest.mark.parametrize("stem, name", STEERED_CLASSES, ids=[f"{s}:{n}" for s, n in STEERED_CLASSES])
def test_missed_bug_classes_are_found_by_the_exploration_alone_at_every_seed(stem, name):
    # exploration only, no shrinking or reduction: each run ends at its first failure (seconds)
    spec = str(ROOT / "spec" / f"{stem}.yaml")
    mutant = SPECS_WITH_MUTANTS[spec][name]
    missed = []
    for seed in (1, 2, 3, 4, 5):
        result = explore_mutant(mutant_config(spec, name, mutant, profile="ci", seed=seed, timeout_s=10), mutant)
        assert result.error is None, result.error
        if not result.found_by_exploration:
            missed.append(seed)
    assert not missed, f"{name} survived the ci exploration at seeds {missed}"


@pytest.mark.slow
@pytest.mark.parametrize("name", BEYOND_THE_POOLS)
def test_values_beyond_the_pools_are_found_by_the_exploration_alone_with_the_share_on(name):
    """BUILD taken once build is held; a decomposed accent in a label comes back
    composed: found at every seed once pool-drawn arguments leave their pools."""
    from conformance.engine.profiles import RECOMMENDED_BEYOND_POOLS

    spec = str(ROOT / "spec" / "async-jobs.yaml")
    mutant = SPECS_WITH_MUTANTS[spec][name]
    missed = []
    for seed in (1, 2, 3, 4, 5):
        config = mutant_config(spec, name, mutant, profile="ci", seed=seed, timeout_s=10)
        result = explore_mutant(dataclasses.replace(config, beyond_pools=RECOMMENDED_BEYOND_POOLS), mutant)
        assert result.error is None, result.error
        if not result.found_by_exploration:
            missed.append(seed)
    assert not missed, f"{name} survived the ci exploration at seeds {missed}"


@pytest.mark.parametrize("first, passes", [("fail", 1), ("error", 1), ("pass", 2)])
def test_racing_scenarios_run_once_first_and_in_full_only_when_nothing_failed(monkeypatch, first, passes):
    """A mutant's matrix runs each racing scenario once first (a process-per-call
    spec spent three quarters of its calls repeating races that never showed a
    non-race bug); only a matrix that passed runs again with the full race runs."""
    import conformance.mutants as mutants

    runs = []

    def run_conformance(config):
        runs.append(config)
        return {"verdict": first if len(runs) == 1 else "fail", "scenarios": [], "problems": []}

    monkeypatch.setattr(mutants, "run_conformance", run_conformance)
    name = "cancel_finished_job"
    config = mutant_config(SPEC, name, SPECS_WITH_MUTANTS[SPEC][name], profile="ci", seed=1, timeout_s=10)
    report = mutants._scenario_matrix(config, "traces")
    assert config.race_runs > 1  # the kit's default for a scenario that races calls
    full = [(1, False, "traces"), (config.race_runs, False, "traces")]
    assert [(c.race_runs, c.stateful, c.record_dir) for c in runs] == full[:passes]
    assert report["verdict"] == (first if passes == 1 else "fail")

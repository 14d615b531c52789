"""Smoke test of benchmarks/run.py: it runs and reports every number.

No timing thresholds here: the numbers depend on the machine. The targets are
checked by reading the benchmark's own ``meets_targets``, not by this test.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "run.py"

METRICS = (
    "kit_steps_per_s",
    "kit_calls_per_s",
    "bare_steps_per_s",
    "overhead_ratio",
    "model_cost_ratio_100k_vs_100",
    "check_spec_states_per_s",
    "stdio_steps_per_s",
    "inprocess_steps_per_s",
    "stdio_vs_inprocess_ratio",
    "trace_events",
    "trace_events_per_s",
    "trace_peak_rss_mb",
    "trace_rss_ratio_vs_tenth",
    "failing_to_passing_wall_ratio",
    "peer_steps_per_s",
    "peer_ratio",
    "peer_ratio_over_seeds",
)
TARGETED = (
    "overhead_ratio",
    "model_cost_ratio_100k_vs_100",
    "ci_wall_s",
    "peer_ratio",
    "ttff_ratio",
    "workers_speedup",
    "cli_ci_wall_s",
    "failing_to_passing_wall_ratio",
)


@pytest.mark.slow
def test_quick_benchmark_reports_every_number():
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--json", "--quick", "--skip-ci-run"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)  # stdout is exactly one JSON object

    for key in METRICS:
        value = result[key]
        assert isinstance(value, (int, float)) and not isinstance(value, bool), (key, value)
        assert value > 0, (key, value)
    assert result["ci_wall_s"] is None  # skipped
    assert result["workers_speedup"] is None and result["cli_ci_wall_s"] is None  # ci runs: skipped too
    # --quick counts the seeds that kill each mutant of the subset, without shrinking every failure
    kills = result["details"]["seed_kills"]
    assert kills["seeds"] == [1, 2] and kills["mutants"] > 0, kills
    assert result["mutant_seed_kills_mean"] == round(sum(map(len, kills["killed"].values())) / kills["mutants"], 3)
    assert result["mutant_length_ratio_max"] is None and result["mutant_lengths_over_1_5"] is None

    assert set(result["targets"]) == set(TARGETED)
    assert set(result["meets_targets"]) == set(TARGETED)
    assert result["meets_targets"]["ci_wall_s"] is None
    for key in ("overhead_ratio", "model_cost_ratio_100k_vs_100", "peer_ratio"):
        assert isinstance(result["meets_targets"][key], bool)

    assert result["machine"]["cpu_count"] >= 1
    assert result["machine"]["python"].count(".") == 2
    assert isinstance(result["seed"], int)
    assert result["quick"] is True
    assert isinstance(result["warnings"], list)

    settings = result["settings"]
    assert settings["profile"] == "quick"
    assert settings["max_examples"] > 0 and settings["stateful_step_count"] > 0
    assert settings["model"]["jobs_per_thread"] > 0
    assert len(settings["model"]["live_jobs"]) == 2

    details = result["details"]
    for side in ("kit", "bare"):
        assert details[side]["steps"] > 0 and details[side]["examples"] > 0 and details[side]["seconds"] > 0
        assert isinstance(details[side]["completed"], bool)
        assert isinstance(details[side]["aborted_attempts"], list)
    assert details["model"]["small"]["per_op_us"] > 0 and details["model"]["big"]["per_op_us"] > 0
    assert details["ci"] is None
    # ratios come from the numbers of this same run
    assert abs(result["overhead_ratio"] - result["kit_steps_per_s"] / result["bare_steps_per_s"]) < 0.01
    kit = details["kit"]  # one repeat: the kit's run itself
    assert (
        abs(result["kit_calls_per_s"] - kit["sequential_adapter_calls"] / kit["seconds"])
        < 0.01 * result["kit_calls_per_s"]
    )
    peer = details["peer"]
    assert abs(result["peer_ratio"] - peer["kit_steps_per_s"] / peer["peer_steps_per_s"]) < 0.01
    assert all(run["verdict"] == "pass" and run["steps"] > 0 for run in peer["peer_runs"])
    across = details["peer_seeds"]
    assert [row["seed"] for row in across["seeds"]] == [result["seed"], result["seed"] + 1]  # 2 seeds with --quick
    assert (
        abs(result["peer_ratio_over_seeds"] - across["kit_median_steps_per_s"] / across["peer_median_steps_per_s"])
        < 0.01
    )
    # a failing and a passing run of the same task table, the ratio from their own wall times
    both = details["failing_vs_passing"]
    assert both["passing"]["verdict"] == "pass" and both["failing"]["verdict"] == "fail"
    assert abs(result["failing_to_passing_wall_ratio"] - both["failing"]["wall_s"] / both["passing"]["wall_s"]) < 0.01
    rows = details["ttff"]["mutants"]
    assert rows and all(isinstance(row["kit_found"], bool) and isinstance(row["peer_found"], bool) for row in rows)
    # a mutant found has a positive time to first failure; one not found has none
    for row in rows:
        for side in ("kit", "peer"):
            assert (row[f"{side}_ttff_s"] is not None and row[f"{side}_ttff_s"] > 0) == row[f"{side}_found"], row


def test_ci_rounds_take_the_run_of_median_wall_time():
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import run as bench
    finally:
        sys.path.remove(str(SCRIPT.parent))
    runs = [{"wall_s": 3.9, "exit_code": 0}, {"wall_s": 3.5, "exit_code": 0}, {"wall_s": 3.7, "exit_code": 0}]
    middle = bench._median_run(runs)
    assert middle["wall_s"] == 3.7 and middle["rounds_wall_s"] == [3.9, 3.5, 3.7]
    assert bench._median_run(runs[:2])["wall_s"] == 3.5  # the lower middle of an even count
    missing = bench._median_run([*runs, {"wall_s": None}])
    assert missing["wall_s"] is None  # a run that never completed: no figure, not a flattering one


def _seed_kills():
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import seed_kills
    finally:
        sys.path.remove(str(SCRIPT.parent))
    return seed_kills


def test_counterexample_lengths_are_read_from_the_reduced_failure_and_counted_over_the_limit():
    seed_kills = _seed_kills()
    failure = {
        "steps": [
            {"operation": "start_job", "args": {}, "chosen": ["job-1"]},
            {"operation": "start_job", "args": {}, "chosen": ["job-2"]},
            {"operation": "turn_boundary", "args": {}},
        ],
        "message": "turn_boundary: result differs\n(reduced from 9 to 3 step(s) by replaying it (40 replays))",
    }
    row = seed_kills._length_row("thread-jobs:m", 2, 2, {"verdict": "fail", "failure": failure})
    assert row["steps"] == 3 and row["ratio"] == 1.5, row
    assert row["note"] == "(reduced from 9 to 3 step(s) by replaying it (40 replays))"
    rows = [row, {**row, "seed": 3, "steps": 4, "ratio": 2.0}, {**row, "seed": 4, "steps": 2, "ratio": 1.0}]
    figures = seed_kills._length_figures(rows)
    assert figures["length_ratio_max"] == 2.0
    assert figures["lengths_over_limit"] == 1  # 1.5 itself is within the target, 2.0 is over
    assert figures["over_limit"] == ["thread-jobs:m seed 3: 4/2"]
    assert seed_kills._length_figures([])["length_ratio_max"] is None


def test_the_seed_kills_gate_names_each_missed_seed_and_each_counterexample_over_the_limit():
    seed_kills = _seed_kills()
    result = {
        "seeds": [1, 2, 3],
        "killed": {"thread-jobs:a": [1, 2, 3], "thread-jobs:b": [1, 3]},
        "over_limit": ["thread-jobs:a seed 2: 4/2"],
    }
    assert seed_kills.gate_problems(result) == [
        "thread-jobs:b missed at seed(s) [2]",
        "thread-jobs:a seed 2: 4/2 (over 1.5x)",
    ]
    assert seed_kills.gate_problems({**result, "killed": {"thread-jobs:a": [1, 2, 3]}, "over_limit": []}) == []


def test_seed_kills_selects_the_subset_every_in_process_spec_or_named_specs():
    seed_kills = _seed_kills()
    assert seed_kills._selection(False, []) is seed_kills.SUBSET
    assert seed_kills._selection(True, []) == {spec: None for spec in seed_kills.IN_PROCESS_SPECS}
    assert "spec/async-command.yaml" not in seed_kills._selection(True, [])  # a process per step: named only
    assert seed_kills._selection(False, ["async-command"]) == {"spec/async-command.yaml": None}
    both = seed_kills._selection(True, ["async-command"])
    assert set(both) == {*seed_kills.IN_PROCESS_SPECS, "spec/async-command.yaml"}
    for wrong in ("thread-jobz", "thread-jobs.scenarios", "../README"):
        problem = seed_kills._selection(False, [wrong])
        assert isinstance(problem, str) and f"--spec {wrong}: no such bundled spec" in problem
        assert "async-command, async-jobs, process-sessions, task-progress, thread-jobs" in problem  # says what exists


def test_seed_kills_logs_each_mutant_as_soon_as_its_last_seed_is_in():
    seed_kills = _seed_kills()
    tasks = [("spec/thread-jobs.yaml", name, seed) for name in ("a", "b") for seed in (1, 2)]
    events = []

    def runs():
        for _, name, seed in tasks:
            events.append(f"ran {name}:{seed}")
            yield {"killed": seed == 1, "shortest": 2, "steps": 10, "seconds": 1.0, "stateful": {"failure": {}}}

    counts = seed_kills._tally(tasks, runs(), (1, 2), False, lambda line: events.append(line.strip()))
    assert events == [
        "ran a:1",
        "ran a:2",
        "thread-jobs:a: killed at seeds [1]",  # before b's runs: a long gate shows what it found so far
        "ran b:1",
        "ran b:2",
        "thread-jobs:b: killed at seeds [1]",
    ]
    figures = seed_kills._figures(counts, (1, 2), False)
    assert figures["mean_seeds_killed"] == 1.0 and figures["steps_per_s"] == 10.0 and figures["mutants"] == 2


@pytest.mark.slow
def test_seed_kills_measures_a_mutants_counterexample_against_its_declared_shortest():
    """One sequential mutant at two seeds, as run.py's figure measures it: the
    exploration kills it, and its shrunk and reduced counterexample is no
    shorter than the shortest the mutant declares (a shorter one would make
    the declaration, and every ratio, wrong) and within 1.5 times it; the two
    seeds run at once (``--jobs 2``), each in a process of its own."""
    seed_kills = _seed_kills()
    selection = {"spec/async-jobs.yaml": ["job-manager.backoff_not_doubling"]}
    result = seed_kills.measure_seed_kills(selection, seeds=(1, 2), jobs=2)
    assert result["killed"] == {"async-jobs:job-manager.backoff_not_doubling": [1, 2]}, result
    for row in result["lengths"]:
        assert row["shortest"] <= row["steps"] and row["ratio"] == round(row["steps"] / row["shortest"], 3), row
    assert result["length_ratio_max"] <= seed_kills.LENGTH_LIMIT, result["lengths"]
    assert [row["seed"] for row in result["lengths"]] == [1, 2]  # in task order, whichever process ran each


@pytest.mark.slow
def test_cpu_throughput_compares_trees_in_alternating_rounds():
    """benchmarks/cpu_throughput.py, as a smoke test: this checkout, one
    quick exploration per round, each round in its own process."""
    script = ROOT / "benchmarks" / "cpu_throughput.py"
    args = [sys.executable, str(script), str(ROOT), "--profile", "quick", "--seeds", "1", "2", "--rounds", "2"]
    done = subprocess.run(args, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["profile"] == "quick" and result["seeds"] == [1, 2] and result["rounds"] == 2
    tree = result["trees"][str(ROOT)]
    assert tree["profile"] == "quick"  # as each round's process ran it
    assert tree["steps_per_cpu_s"] > 0 and tree["calls_per_cpu_s"] > 0
    assert len(tree["steps_per_cpu_s_by_round"]) == 2 and tree["steps_ratio_to_first"] == 1.0
    assert done.stderr.count("steps/CPU-s") == 2

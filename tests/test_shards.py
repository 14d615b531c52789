"""A run in parts (issue 16): ``run --shard I/N`` runs the I-th of N disjoint
parts, ``conformance merge-reports`` combines the parts into one report, and
``run --workers N`` does both on one machine. The shards of a run, merged,
give the same verdict, coverage and failures as the unsharded run of the same
seeds: ``conformance run --workers N``, one command and one report, whose N
parts are the same scenarios, examples and seeds (docs/ci.md).

The implementations here declare no concurrency, so what the exploration
generates does not depend on thread scheduling, and the comparison is exact.
Shard runs go through the real command line in child processes."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from conformance.engine.scenarios import scenario_cost
from conformance.engine.shards import claim_item, parse_shard, part_examples, part_seed, shard_items
from conformance.reporting import validate_report
from statemachines import load_spec

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT_S = 600

ADAPTERS = textwrap.dedent('''\
    """The thread-jobs reference and one of its mutants, declaring no concurrency."""
    from lifecycle_references.thread_jobs import ReferenceAdapter
    from lifecycle_references.thread_jobs.mutants import MUTANTS


    def _sequential(identity):
        return {**identity, "capabilities": {**(identity.get("capabilities") or {}), "concurrent": False}}


    class Reference(ReferenceAdapter):
        def describe(self):
            return _sequential(super().describe())


    def cancel_finished_job(**options):
        adapter = MUTANTS["cancel_finished_job"].factory(**options)
        describe = adapter.describe
        adapter.describe = lambda: _sequential(describe())
        return adapter
    ''')


def _kit(args: list[str], cwd: Path, **popen) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-P", "-m", "conformance.cli", *args],
        cwd=cwd,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "COLUMNS": "200", "CONFORMANCE_WORKERS": "1", "CONFORMANCE_PROGRESS_INTERVAL": "0.3"},
        **popen,
    )


def _done(proc: subprocess.Popen, timeout: float = TIMEOUT_S) -> tuple[int, str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"the kit did not finish in {timeout} s:\n{out[-3000:]}\n{err[-3000:]}") from None
    text = out + err
    assert "Traceback" not in text, text
    return proc.returncode, text


def _report(directory: Path) -> dict:
    report = json.loads((directory / "report.json").read_text(encoding="utf-8"))
    assert validate_report(report) == [], validate_report(report)
    return report


@pytest.fixture
def adapters(tmp_path, monkeypatch):
    (tmp_path / "sequential.py").write_text(ADAPTERS, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


# ------------------------------------------------------------ what a part is
def test_the_parts_are_disjoint_and_complete():
    items = [f"S{n}" for n in range(37)]
    for count in (1, 2, 3, 5, 40):
        parts = [shard_items(items, index, count) for index in range(1, count + 1)]
        assert sorted(s for part in parts for s in part) == sorted(items)  # every scenario once
        assert sum(len(part) for part in parts) == len(items)
        for total in (30, 100, 3):
            examples = [part_examples(total, index, count) for index in range(1, count + 1)]
            assert sum(examples) == total and max(examples) - min(examples) <= 1
        seeds = [part_seed(7, index, count) for index in range(1, count + 1)]
        assert len(set(seeds)) == count  # disjoint seeds
        if count > 1:  # never one another's --max-failures seeds (seed + 1, seed + 2, ...)
            assert not {s + k for s in seeds for k in range(1, 4)} & set(seeds)
    assert part_seed(7, 1, 1) == 7  # one part is a plain run
    assert part_seed(7, 1, 2) != part_seed(8, 1, 2)
    assert parse_shard("2/4") == (2, 4) and parse_shard(" 1 / 1 ") == (1, 1)
    for bad in ("0/2", "3/2", "2", "a/b", "1/0"):
        with pytest.raises(ValueError, match="--shard"):
            parse_shard(bad)


def test_the_matrix_is_split_by_cost_into_parts_that_take_about_as_long():
    spec = load_spec(ROOT / "spec" / "thread-jobs.yaml")
    params = spec.default_parameters()
    costs = {s.id: scenario_cost(spec, s, params, {"concurrent": True}) for s in spec.scenarios}
    # what a scenario costs: its calls, a concurrent group one more than its calls, a repeat
    # its steps times its count, all of it once per run of a scenario that races calls
    b1 = next(s for s in spec.scenarios if s.id == "B1")  # 8 x (two groups of two calls, a call), a call; raced
    assert scenario_cost(spec, b1, params, {"concurrent": True}, race_runs=1) == 1 + 8 * (3 + 3 + 1) + 1
    assert costs["B1"] == 20 * (1 + 8 * (3 + 3 + 1) + 1)
    assert scenario_cost(spec, b1, params, {"concurrent": False}) == 0  # skipped: needs a capability
    n9 = next(s for s in spec.scenarios if s.id == "N9")  # assumes retention_limit >= 3
    assert costs["N9"] > 0 and scenario_cost(spec, n9, {**params, "retention_limit": 2}, {"concurrent": True}) == 0
    for count in (2, 3, 4):
        parts = [shard_items(spec.scenarios, index, count, cost=lambda s: costs[s.id]) for index in range(1, count + 1)]
        ids = [s.id for part in parts for s in part]
        assert sorted(ids) == sorted(costs) and len(ids) == len(costs)  # every scenario once
        for part in parts:  # each part in matrix order
            assert [s.id for s in part] == [s.id for s in spec.scenarios if s in part]
        loads = [sum(costs[s.id] for s in part) for part in parts]
        assert max(loads) - min(loads) <= max(costs.values()), loads  # no part waits on another for long
        assert parts == [
            shard_items(spec.scenarios, index, count, cost=lambda s: costs[s.id]) for index in range(1, count + 1)
        ]  # the same split every time
    by_position = [shard_items(spec.scenarios, index, 2) for index in (1, 2)]
    loads = [sum(costs[s.id] for s in part) for part in by_position]
    balanced = [
        sum(costs[s.id] for s in shard_items(spec.scenarios, index, 2, cost=lambda s: costs[s.id])) for index in (1, 2)
    ]
    assert max(balanced) - min(balanced) < max(loads) - min(loads)  # better than every other scenario


def _claim_all(directory: str, keys: list[str], connection) -> None:
    connection.send([key for key in keys if claim_item(directory, key)])
    connection.close()


def test_each_scenario_is_claimed_by_exactly_one_worker(tmp_path):
    assert claim_item(tmp_path, "B1") and not claim_item(tmp_path, "B1") and claim_item(tmp_path, "b1")
    import multiprocessing

    context = multiprocessing.get_context("spawn")  # processes of their own, as workers are
    keys = [f"S{n}" for n in range(200)]
    (tmp_path / "race").mkdir()
    pipes, procs = [], []
    for number in range(4):  # each in another order, so that they collide all along
        order = keys[number * 50 :] + keys[: number * 50]
        receive, send = context.Pipe(duplex=False)
        proc = context.Process(target=_claim_all, args=(str(tmp_path / "race"), order, send))
        proc.start()
        pipes.append(receive)
        procs.append(proc)
    claimed = [pipe.recv() for pipe in pipes]
    for proc in procs:
        proc.join(60)
    assert sorted(key for mine in claimed for key in mine) == sorted(keys)  # each once, none lost


# ------------------------------------------------------------ merged shards == one process
def _failures(report: dict) -> list[dict]:
    stateful = report["stateful"] or {}
    found = [stateful.get("failure")] + list(stateful.get("more_failures") or [])
    return [
        {key: f.get(key) for key in ("kind", "operation", "path", "steps", "seed", "expected", "observed")}
        | {"file": Path(f["counterexample_file"]).name if f.get("counterexample_file") else None}
        for f in found
        if f
    ]


def _comparable(report: dict, counts: bool) -> dict:
    """What must be equal. ``counts``: also how often each thing was exercised,
    which for a failing run depends on how much shrinking its wall-clock budget
    allowed (the examples Hypothesis tries while shrinking count too)."""
    stateful = report["stateful"]
    coverage = report["coverage"]
    out = {
        "verdict": (report["verdict"], report["exit_code"]),
        "scenarios": [(s["id"], s["verdict"], (s.get("failure") or {}).get("kind")) for s in report["scenarios"]],
        "not_applicable": [s["id"] for s in (report.get("not_applicable") or {}).get("scenarios", [])],
        "coverage": {"categories": coverage["categories"], "gates": coverage["gates"]},
        "exploration": {
            "verdict": stateful["verdict"],
            "seed": stateful["seed"],
            "uncovered": stateful["coverage"]["uncovered"],
        },
        "parts": [{k: p[k] for k in ("index", "count", "seed", "verdict")} for p in stateful["parts"]],
        "failures": _failures(report),
    }
    if counts:
        out["coverage"].update(
            {key: coverage[key] for key in ("transitions", "states", "operations", "outcomes", "policies")}
        )
        out["exploration"].update({key: stateful[key] for key in ("examples", "steps", "coverage")})
        out["parts"] = [
            {k: p[k] for k in ("index", "count", "seed", "examples", "steps", "verdict")} for p in stateful["parts"]
        ]
    return out


@pytest.mark.slow
@pytest.mark.parametrize(
    "adapter, verdict", [("sequential:Reference", "pass"), ("sequential:cancel_finished_job", "fail")]
)
def test_merged_shards_give_what_the_unsharded_run_of_the_same_seeds_gives(adapters, tmp_path, adapter, verdict):
    common = [
        "thread-jobs",
        "--adapter",
        adapter,
        "--profile",
        "quick",
        "--seed",
        "5",
        "--example-db",
        "none",
        "--min-coverage",
        "operations=100",
        "--max-failures",
        "1",
    ]
    shards = [
        _kit(["run", *common, "--shard", f"{i}/2", "--report-dir", str(tmp_path / f"shard{i}")], cwd=adapters)
        for i in (1, 2)
    ]
    for proc in shards:
        code, text = _done(proc)
        assert code in (0, 1), text
    code, text = _done(_kit(["run", *common, "--workers", "2", "--report-dir", str(tmp_path / "whole")], cwd=adapters))
    whole = _report(tmp_path / "whole")
    assert code == whole["exit_code"], text
    partial = [_report(tmp_path / f"shard{i}") for i in (1, 2)]
    assert [p["shard"]["index"] for p in partial] == [1, 2] and all(p["shard"]["count"] == 2 for p in partial)
    assert not {s["id"] for s in partial[0]["scenarios"]} & {s["id"] for s in partial[1]["scenarios"]}
    assert all(p["coverage"]["gates"] == [] for p in partial)  # a shard never gates its part alone

    code, text = _done(
        _kit(
            [
                "merge-reports",
                str(tmp_path / "merged"),
                str(tmp_path / "shard1"),
                str(tmp_path / "shard2" / "report.json"),
            ],
            cwd=adapters,
        )
    )
    merged = _report(tmp_path / "merged")
    assert code == merged["exit_code"] == whole["exit_code"], text
    assert whole["verdict"] == verdict
    assert _comparable(merged, counts=verdict == "pass") == _comparable(whole, counts=verdict == "pass")
    assert merged["coverage"]["gates"][0]["category"] == "operations"
    assert len(merged["stateful"]["parts"]) == 2
    if verdict == "pass":
        # every example of the profile ran; Hypothesis may also run a few short ones it
        # does not count towards max_examples (its generator may end a sequence early)
        assert 30 <= merged["stateful"]["examples"] <= 40
    assert "shard" not in merged
    for directory, report in ((tmp_path / "merged", merged), (tmp_path / "whole", whole)):
        for failure in [report["stateful"]["failure"]] + report["stateful"].get("more_failures", []):
            if failure and failure.get("counterexample_file"):
                path = Path(failure["counterexample_file"])
                assert path.parent == directory and path.is_file()  # the files moved along, renumbered
                assert yaml.safe_load(path.read_text(encoding="utf-8"))["steps"]
                assert str(path) in failure["replay"]
    if verdict == "fail":
        assert merged["replay"].endswith("--profile quick --seed 5 --workers 2") and merged["replay"] == whole["replay"]
        assert merged["stateful"]["failure"] is not None
        assert "--shard " in merged["stateful"]["failure"]["message"]  # re-running the part that found it
        assert "Verdict: FAIL" in text


# ------------------------------------------------------------ refusals
@pytest.mark.slow
def test_merge_reports_refuses_shards_it_cannot_merge(adapters, tmp_path):
    one = ["thread-jobs", "--adapter", "sequential:Reference", "--no-stateful", "--scenario", "N1", "--scenario", "N2"]
    runs = {
        "s1": [*one, "--shard", "1/2"],
        "s2": [*one, "--shard", "2/2"],
        "s2-seed": [*one, "--shard", "2/2", "--seed", "9"],
        "s2-spec": ["task-progress", "--no-stateful", "--shard", "2/2"],
        "plain": one,
    }
    procs = {
        name: _kit(["run", *args, "--report-dir", str(tmp_path / name)], cwd=adapters) for name, args in runs.items()
    }
    for name, proc in procs.items():
        code, text = _done(proc)
        assert code == 0, (name, text)

    def merge(*dirs: str, refused: bool = True) -> tuple[int, str]:
        out = tmp_path / "out"
        code, text = _done(_kit(["merge-reports", str(out), *[str(tmp_path / d) for d in dirs]], cwd=adapters))
        assert _report(out)["verdict"] == ("error" if refused else "pass"), "a refused merge writes an error report"
        return code, " ".join(text.split())

    code, text = merge("s1")
    assert code == 2 and "shard(s) 2/2 missing" in text and "re-run a shard" in text, text
    code, text = merge("s1", "s1", "s2")
    assert code == 2 and "shard 1/2 is given twice" in text, text
    code, text = merge("s1", "s2-seed")
    assert code == 2 and "their seeds differ" in text and "Merge only the shards of one run" in text, text
    code, text = merge("s1", "s2-spec")
    assert code == 2 and "their specs (id, version) differ" in text, text
    code, text = merge("s1", "plain")
    assert code == 2 and "not a shard's report" in text and "--shard I/N" in text, text
    code, text = merge("s1", "nowhere")
    assert code == 2 and "no report.json there" in text, text
    code, text = _done(
        _kit(["merge-reports", str(tmp_path / "s1"), str(tmp_path / "s1"), str(tmp_path / "s2")], cwd=adapters)
    )
    assert code == 2 and "report directory of a shard" in text, text

    code, text = merge("s2", "s1", refused=False)  # in any order
    assert code == 0, text
    merged = _report(tmp_path / "out")
    assert [s["id"] for s in merged["scenarios"]] == ["N1", "N2"] and merged["verdict"] == "pass"


@pytest.mark.slow
def test_shard_and_workers_usage_errors(tmp_path):
    for args, said in (
        (["--shard", "3/2"], "I must be between 1 and N"),
        (["--workers", "0"], "at least 1 worker"),
        (["--workers", "many"], "'auto'"),
        (["--workers", "2", "--shard", "1/2"], "give one of them"),
    ):
        code, text = _done(_kit(["run", "thread-jobs", *args, "--report-dir", str(tmp_path / "r")], cwd=tmp_path))
        assert code == 2 and said in " ".join(text.split()), (args, text)
        assert not (tmp_path / "r" / "report.json").exists()


# ------------------------------------------------------------ --workers
def test_the_workers_progress_says_when_their_exploration_failed():
    """Past the first failure a worker runs shrinking's examples (and looks
    for more), so the examples counted pass the profile's; the parent's
    progress line must say why, not "[exploration] ... failures 0"."""
    from types import SimpleNamespace

    from conformance.workers import _stateful_phase, _Worker

    def worker(*lines: str, scenario_failures: int = 0) -> SimpleNamespace:
        seen = SimpleNamespace(examples=0, phase="", failures=0, scenario_failures=scenario_failures)
        for line in lines:
            _Worker._note_progress(seen, line)  # type: ignore[arg-type]
        seen.stateful_failures = max(0, seen.failures - seen.scenario_failures)
        return seen

    exploring = worker("progress: [exploration], examples 40/50, failures 1, elapsed 9s", scenario_failures=1)
    assert (exploring.examples, exploring.phase, exploring.stateful_failures) == (40, "exploration", 0)
    shrinking = worker(
        "progress: [exploration], examples 20/50, failures 0, elapsed 3s",
        "progress: [shrinking], examples 20/50, failures 1, elapsed 4s",
        "progress: [shrinking], examples 71/50, failures 1, elapsed 9s",
    )
    assert shrinking.examples == 71 and shrinking.stateful_failures == 1
    assert _stateful_phase([exploring]) == ("exploring", 0)  # a scenario's failure is not the exploration's
    assert _stateful_phase([exploring, shrinking]) == ("shrinking", 1)
    assert _stateful_phase([worker("progress: [scenarios], scenarios 3/9, failures 0, elapsed 1s")]) == ("", 0)


@pytest.mark.slow
def test_workers_run_the_parts_in_parallel_and_report_one_run(adapters, tmp_path):
    report_dir = tmp_path / "reports"
    code, text = _done(
        _kit(
            [
                "run",
                "thread-jobs",
                "--adapter",
                "sequential:cancel_finished_job",
                "--profile",
                "quick",
                "--workers",
                "2",
                "--no-scenarios",
                "--report-dir",
                str(report_dir),
            ],
            cwd=adapters,
        )
    )
    assert code == 1, text
    report = _report(report_dir)
    assert report["verdict"] == "fail" and "Verdict: FAIL" in text and str(report_dir / "report.json") in text
    assert [p["index"] for p in report["stateful"]["parts"]] == [1, 2] and report["stateful"]["examples"] >= 30
    assert "progress: " in text and "examples " in text  # the workers' progress, summed
    # once a worker's exploration failed, the progress says what it does now, and that it found one
    assert re.search(r"progress: \[(shrinking|reducing|looking for more)[^\]]*\].* failures [1-9]", text), text
    failure = report["stateful"]["failure"]
    counterexample = Path(failure["counterexample_file"])
    assert counterexample == report_dir / "counterexample-stateful.yaml" and counterexample.is_file()
    # its title names the run's seed, and the part and derived seed that found it
    title = yaml.safe_load(counterexample.read_text(encoding="utf-8"))["title"]
    part = next(p for p in report["stateful"]["parts"] if p["seed"] == failure["seed"])
    assert "(run seed 1, profile quick; found by exploration part " in title, title
    assert f"part {part['index']} of 2, at its derived seed {failure['seed']})" in title, title
    assert (report_dir / "junit.xml").is_file() and (report_dir / "summary.md").is_file()
    assert list((report_dir / "example-db").iterdir()), "the workers keep failing examples under the report dir"
    # the replay command the report prints reproduces the failure
    replay = failure["replay"].split()
    assert replay[:2] == ["conformance", "replay"]
    code, text = _done(_kit([*replay[1:], "--report-dir", str(tmp_path / "replayed")], cwd=adapters))
    assert code == 1, text
    assert _report(tmp_path / "replayed")["scenarios"][0]["failure"]["kind"] == failure["kind"]


@pytest.mark.slow
def test_forked_and_spawned_workers_give_the_same_run(adapters, tmp_path):
    # On Linux workers are forked from the kit's process; CONFORMANCE_WORKER_START=spawn
    # starts each as a new interpreter (what macOS and Windows get). The same parts either way.
    common = [
        "run",
        "thread-jobs",
        "--adapter",
        "sequential:Reference",
        "--profile",
        "quick",
        "--seed",
        "3",
        "--example-db",
        "none",
        "--workers",
        "2",
    ]
    reports = {}
    for how in ("fork", "spawn"):
        proc = subprocess.Popen(
            [sys.executable, "-P", "-m", "conformance.cli", *common, "--report-dir", str(tmp_path / how)],
            cwd=adapters,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, "CONFORMANCE_WORKER_START": how},
        )
        code, text = _done(proc)
        assert code == 0, text
        reports[how] = _report(tmp_path / how)
    assert [p["seed"] for p in reports["fork"]["stateful"]["parts"]] == [
        p["seed"] for p in reports["spawn"]["stateful"]["parts"]
    ]
    assert _comparable(reports["fork"], counts=True) == _comparable(reports["spawn"], counts=True)
    spec = load_spec(ROOT / "spec" / "thread-jobs.yaml")
    for report in reports.values():  # every scenario once, in matrix order, whichever worker claimed it
        ran = [s["id"] for s in report["scenarios"]] + [s["id"] for s in report["not_applicable"]["scenarios"]]
        assert sorted(ran, key=[s.id for s in spec.scenarios].index) == [s.id for s in spec.scenarios]
        assert [s["id"] for s in report["scenarios"]] == [
            s.id for s in spec.scenarios if s.id in {e["id"] for e in report["scenarios"]}
        ]
    proc = subprocess.Popen(
        [sys.executable, "-P", "-m", "conformance.cli", *common, "--report-dir", str(tmp_path / "bad")],
        cwd=adapters,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "CONFORMANCE_WORKER_START": "thread"},
    )
    code, text = _done(proc)
    assert code == 2 and "CONFORMANCE_WORKER_START 'thread'" in text and "Traceback" not in text, text


@pytest.mark.slow
def test_workers_one_is_a_run_in_one_process(adapters, tmp_path):
    code, text = _done(
        _kit(
            [
                "run",
                "thread-jobs",
                "--adapter",
                "sequential:Reference",
                "--profile",
                "quick",
                "--workers",
                "1",
                "--no-scenarios",
                "--report-dir",
                str(tmp_path / "r"),
            ],
            cwd=adapters,
        )
    )
    assert code == 0, text
    report = _report(tmp_path / "r")
    assert "parts" not in report["stateful"] and "shard" not in report
    # every example of the profile ran; Hypothesis may also run a few short ones it
    # does not count towards max_examples (its generator may end a sequence early)
    assert report["stateful"]["seed"] == 1 and 30 <= report["stateful"]["examples"] <= 40


@pytest.mark.slow
def test_workers_default_to_the_cores_and_every_replay_names_its_parts(adapters, tmp_path, monkeypatch):
    from conformance.workers import available_cores, parse_workers

    monkeypatch.delenv("CONFORMANCE_WORKERS")  # conftest.py runs the other tests in one process
    assert parse_workers(None) == available_cores()
    monkeypatch.setenv("CONFORMANCE_WORKERS", "3")
    assert parse_workers(None) == 3 and parse_workers("1") == 1
    # Without --workers and CONFORMANCE_WORKERS, a run has a worker per core (the default):
    # its replay command says how many, so that it re-runs the same parts on any machine.
    env = {k: v for k, v in os.environ.items() if k != "CONFORMANCE_WORKERS"}
    cores = available_cores()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-P",
            "-m",
            "conformance.cli",
            "run",
            "thread-jobs",
            "--adapter",
            "sequential:cancel_finished_job",
            "--profile",
            "quick",
            "--no-scenarios",
            "--report-dir",
            str(tmp_path / "default"),
        ],
        cwd=adapters,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    code, text = _done(proc)
    assert code == 1, text
    report = _report(tmp_path / "default")
    assert len(report["stateful"].get("parts") or [None]) == cores
    assert report["replay"].endswith(f"--workers {cores}"), report["replay"]
    failure = report["stateful"]["failure"]
    rerun = failure["message"].split("re-runs with: ")[1].split(")")[0]
    assert ("--shard " in rerun) if cores > 1 else rerun.endswith("--workers 1"), rerun
    # A run in one process says --workers 1: on a machine with more cores the default would split it.
    code, text = _done(
        _kit(
            [
                "run",
                "thread-jobs",
                "--adapter",
                "sequential:cancel_finished_job",
                "--profile",
                "quick",
                "--no-scenarios",
                "--report-dir",
                str(tmp_path / "one"),
            ],
            cwd=adapters,
        )
    )
    assert code == 1, text
    one = _report(tmp_path / "one")
    assert one["replay"].endswith("--seed 1 --workers 1"), one["replay"]
    assert "--no-scenarios --workers 1)" in one["stateful"]["failure"]["message"]
    # Named scenarios get no worker without a scenario of its own.
    code, text = _done(
        subprocess.Popen(
            [
                sys.executable,
                "-P",
                "-m",
                "conformance.cli",
                "run",
                "thread-jobs",
                "--adapter",
                "sequential:Reference",
                "--scenario",
                "N1",
                "--report-dir",
                str(tmp_path / "n1"),
            ],
            cwd=adapters,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
    )
    assert code == 0, text
    assert "shard" not in _report(tmp_path / "n1") and len(_report(tmp_path / "n1")["scenarios"]) == 1


@pytest.mark.slow
def test_ctrl_c_stops_every_worker_and_writes_the_merged_report(adapters, tmp_path):
    report_dir = tmp_path / "reports"
    proc = _kit(
        [
            "run",
            "thread-jobs",
            "--adapter",
            "sequential:Reference",
            "--profile",
            "deep",
            "--workers",
            "2",
            "--report-dir",
            str(report_dir),
        ],
        cwd=adapters,
    )
    seen, deadline = [], time.monotonic() + 300
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        seen.append(line)
        if "examples " in line and "examples 0/" not in line:
            break
    else:
        proc.kill()
    assert seen and "examples " in seen[-1], "".join(seen)
    children = [
        int(pid)
        for pid in subprocess.run(
            ["pgrep", "-P", str(proc.pid)], capture_output=True, text=True, timeout=30
        ).stdout.split()
    ]
    assert len(children) == 2, children
    proc.send_signal(signal.SIGINT)
    code, text = _done(proc, timeout=180)
    assert code == 130, text
    report = _report(report_dir)
    assert report["verdict"] == "interrupted" and report["exit_code"] == 130
    assert any(
        p["kind"] == "interrupted" and "The reports hold only what finished" in p["message"] for p in report["problems"]
    )
    assert report["scenarios"], "the scenarios the workers finished are reported"
    assert "Verdict: INTERRUPTED" in text
    for pid in children:
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1][:3]

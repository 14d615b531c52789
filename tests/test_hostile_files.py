"""Files a user receives, round 3 (issue 34): shard reports, traces, numbers
and dates out of range. Each refusal names the file (and line), the verdict
is `error` with exit 2, a report is written, and nothing outside what the
user named is read."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.engine.shards import ShardError, load_shard_report, merge_reports, vet_counterexamples
from conformance.reporting import validate_report

ROOT = Path(__file__).resolve().parents[1]


def kit(*args, cwd=ROOT, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "CONFORMANCE_DEBUG"}
    env["COLUMNS"] = "1000"
    return subprocess.run(
        [sys.executable, "-P", "-m", "conformance.cli", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )


def clean(proc: subprocess.CompletedProcess) -> str:
    text = proc.stdout + proc.stderr
    assert "Traceback" not in text and "internal error" not in text, text
    return " ".join(text.split())


def written(directory: Path) -> dict:
    report = json.loads((directory / "report.json").read_text(encoding="utf-8"))
    assert validate_report(report) == [], validate_report(report)
    return report


@pytest.fixture(scope="module")
def shard(tmp_path_factory) -> Path:
    """One real shard report (1/1) of a one-scenario run."""
    where = tmp_path_factory.mktemp("shard") / "s1"
    proc = kit(
        "run", "spec/thread-jobs.yaml", "--no-stateful", "--scenario", "N1", "--shard", "1/1", "--report-dir", where
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return where


def copy_shard(shard: Path, where: Path) -> Path:
    shutil.copytree(shard, where, symlinks=True)
    return where


# ------------------------------------------------------------ item 2: merge-reports
def _with_failure(report: dict, counterexample_file: str) -> dict:
    report = copy.deepcopy(report)
    report["stateful"] = {"failure": {"counterexample_file": counterexample_file}}
    return report


@pytest.mark.parametrize(
    "named", ["/proc/self/environ", "../../etc/passwd", "/etc/counterexample-x/../passwd", "notes.txt"]
)
def test_a_counterexample_file_outside_the_shard_directory_is_refused(shard, tmp_path, named):
    report, directory = load_shard_report(copy_shard(shard, tmp_path / "s"))
    with pytest.raises(ShardError, match="refused: failure.counterexample_file"):
        vet_counterexamples(_with_failure(report, named), directory, directory / "report.json")


@pytest.mark.parametrize("kind", ["symlink", "fifo", "device", "huge"])
def test_only_a_regular_counterexample_file_of_the_shard_is_read(shard, tmp_path, kind):
    report, directory = load_shard_report(copy_shard(shard, tmp_path / "s"))
    path = directory / "counterexample-stateful.yaml"
    if kind == "symlink":
        (tmp_path / "secret").write_text("secret")
        path.symlink_to(tmp_path / "secret")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        path.symlink_to("/dev/zero")
    else:
        with open(path, "wb") as handle:
            handle.truncate(64 * 1024 * 1024)
    with pytest.raises(ShardError, match="refused"):
        vet_counterexamples(_with_failure(report, "/elsewhere/counterexample-stateful.yaml"), directory, path)
    report = _with_failure(report, "/elsewhere/counterexample-stateful.yaml")
    if kind != "huge":
        return
    path.unlink()
    path.write_text("steps: []\n")
    vet_counterexamples(report, directory, path)  # the shard machine's path: only the name counts
    assert report["stateful"]["failure"]["counterexample_file"] == str(path)


@pytest.mark.parametrize("kind", ["symlink-entry", "symlink-dir", "fifo", "forged"])
def test_values_of_a_shard_are_regular_files_never_followed(shard, tmp_path, kind):
    directory = copy_shard(shard, tmp_path / "s")
    secret = tmp_path / "secret"
    secret.write_text("SECRET=1")
    digest = hashlib.sha256(b"SECRET=1").hexdigest()
    if kind == "symlink-dir":
        (tmp_path / "other").mkdir()
        (tmp_path / "other" / f"sha256-{digest}.txt").write_text("SECRET=1")
        (directory / "values").symlink_to(tmp_path / "other")
    else:
        (directory / "values").mkdir()
        entry = directory / "values" / f"sha256-{digest}.txt"
        if kind == "symlink-entry":
            entry.symlink_to(secret)
        elif kind == "fifo":
            os.mkfifo(entry)
        else:
            entry.write_text("not what the digest says")
    out = tmp_path / "merged"
    proc = kit("merge-reports", out, directory, timeout=60)
    text = clean(proc)
    assert proc.returncode == 2 and "refused" in text and "values" in text, text
    report = written(out)
    assert report["verdict"] == "error" and report["problems"][0]["kind"] == "input-refused"
    assert not (out / "values").exists()


@pytest.mark.parametrize("kind", ["symlink", "fifo", "deep", "bigint", "garbage-shape"])
def test_a_shard_report_that_is_not_a_regular_kit_report_is_refused_with_a_report(shard, tmp_path, kind):
    directory = copy_shard(shard, tmp_path / "s")
    path = directory / "report.json"
    original = path.read_text()
    path.unlink()
    if kind == "symlink":
        (tmp_path / "elsewhere.json").write_text(original)
        path.symlink_to(tmp_path / "elsewhere.json")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "deep":
        path.write_text("[" * 100_000 + "]" * 100_000)
    elif kind == "bigint":
        path.write_text(original.replace('"index": 1', '"index": ' + "9" * 5000, 1))
    else:
        report = json.loads(original)
        report["spec"] = "not an object"
        report["shard"]["count"] = "two"
        path.write_text(json.dumps(report))
    out = tmp_path / "merged"
    (out).mkdir()
    (out / "report.json").write_text('{"verdict": "pass"}')  # an earlier merge's verdict
    proc = kit("merge-reports", out, directory, timeout=60)
    text = clean(proc)
    assert proc.returncode == 2 and str(path) in text, text
    assert written(out)["verdict"] == "error"


def test_merge_reports_still_merges_a_good_shard(shard, tmp_path):
    out = tmp_path / "merged"
    proc = kit("merge-reports", out, copy_shard(shard, tmp_path / "s"), timeout=60)
    assert proc.returncode == 0, clean(proc)
    assert written(out)["verdict"] == "pass"


def test_merge_reports_in_process_refuses_what_it_cannot_read(shard, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)  # where the shard ran: its report names the spec as spec/thread-jobs.yaml
    report, directory = load_shard_report(copy_shard(shard, tmp_path / "s"))
    assert merge_reports([(report, directory)], None)["verdict"] == "pass"


# ------------------------------------------------------------ item 5: check-trace
TRACE_HEADER = '{"trace": 1, "spec": {"id": "thread-jobs"}}\n'


@pytest.mark.parametrize(
    "line, said",
    [
        ('{"call": "no_such_op", "args": {}, "result": {}}', "operation 'no_such_op' is not an operation"),
        ('{"call": "begin_turn", "args": {"x": ' + "[" * 100_000 + "]" * 100_000 + "}, \"result\": {}}", "nested"),
        ('{"clock_ms": ' + "9" * 5000 + "}", "outside the 64-bit range"),
        ('{"clock_ms": 18446744073709551616}', "outside the 64-bit range"),
    ],
    ids=["unknown-operation", "deep", "huge-int", "int-over-64-bit"],
)
def test_check_trace_meets_a_hostile_line_with_its_file_line_and_a_report(tmp_path, line, said):
    from conformance.traces import check_trace_run

    trace = tmp_path / "t.jsonl"
    trace.write_text(TRACE_HEADER + line + "\n")
    out = tmp_path / "r"
    out.mkdir()
    (out / "report.json").write_text('{"verdict": "pass"}')
    report = check_trace_run("thread-jobs", [str(trace)], str(out))
    assert report["verdict"] == "error" and report["exit_code"] == 2, report["problems"]
    problem = report["problems"][0]
    assert problem["where"] == f"{trace}:2" and said in problem["message"], problem
    assert written(out)["verdict"] == "error"


def test_check_trace_cli_on_a_fifo_refuses_without_blocking(tmp_path):
    fifo = tmp_path / "t.jsonl"
    os.mkfifo(fifo)
    proc = kit("check-trace", "thread-jobs", fifo, "--report-dir", tmp_path / "r", timeout=60)
    text = clean(proc)
    assert proc.returncode == 2 and str(fifo) in text, text
    assert written(tmp_path / "r")["verdict"] == "error"


# ------------------------------------------------------------ item 6: numbers and dates
HUGE = "9" * 5000


@pytest.mark.parametrize(
    "name, text, line",
    [
        ("replay", f"id: x\nsteps:\n  - call: start_job\n    args: {{thread_id: t1, tool_call_id: {HUGE}}}\n", 4),
        (
            "replay-64",
            "id: x\nsteps:\n  - call: start_job\n    args: {thread_id: t1, tool_call_id: 0x8000000000000000}\n",
            4,
        ),
        (
            "deviations",
            "deviations: 1\nentries:\n  - id: D1\n    reason: r\n    expires: 2026-02-30\n    accept: {path: error}\n",
            5,
        ),
        ("deviations-int", f"deviations: 1\nentries:\n  - id: D1\n    reason: {HUGE}\n", 4),
    ],
)
def test_out_of_range_integers_and_impossible_dates_are_refused_at_their_line(tmp_path, name, text, line):
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    out = tmp_path / "r"
    if name.startswith("replay"):
        proc = kit("replay", "spec/thread-jobs.yaml", path, "--report-dir", out, timeout=60)
    else:
        proc = kit(
            "run",
            "spec/thread-jobs.yaml",
            "--no-stateful",
            "--scenario",
            "N1",
            "--deviations",
            path,
            "--report-dir",
            out,
            timeout=60,
        )
    said = clean(proc)
    assert proc.returncode == 2 and f"{path}:{line}:" in said, said
    assert "64-bit range" in said or "not a valid date" in said, said
    assert written(out)["verdict"] == "error"


def test_a_spec_with_an_integer_over_64_bits_is_a_spec_error(tmp_path):
    from statemachines import SpecError
    from statemachines.load.source import load_yaml_text

    for text, line in ((f"a: 1\nb: [{HUGE}]\n", 2), ("a: 1\nb: -9223372036854775809\n", 2), ("d: 2026-13-01\n", 1)):
        with pytest.raises(SpecError) as caught:
            load_yaml_text(text, "s.yaml")
        assert f"s.yaml:{line}:" in str(caught.value), caught.value
    assert load_yaml_text("a: 9223372036854775807\n", "s.yaml")[0] == {"a": 2**63 - 1}


# ------------------------------------------------------------ workers: only the kit's own signed file
class _Evil:
    def __reduce__(self):
        return (os.system, (f"touch {os.environ.get('EVIL_TARGET', '/nonexistent/x')}",))


@pytest.mark.parametrize("where", ["cwd", "workers-dir-no-key", "workers-dir-forged-key"])
def test_python_m_conformance_workers_never_unpickles_a_received_file(tmp_path, where):
    import pickle

    target = tmp_path / "PWNED"
    directory = tmp_path
    env = {k: v for k, v in os.environ.items() if k != "CONFORMANCE_WORKER_KEY"}
    env["EVIL_TARGET"] = str(target)
    if where != "cwd":
        directory = tmp_path / "conformance-workers-abc"
        directory.mkdir(mode=0o700)
    path = directory / "evil.pickle"
    data = pickle.dumps(_Evil())
    if where == "workers-dir-forged-key":
        env["CONFORMANCE_WORKER_KEY"] = "00" * 32
        data = b"conformance-worker-file 1 " + b"0" * 64 + b"\n" + data
    path.write_bytes(data)
    path.chmod(0o600)
    proc = subprocess.run(
        [sys.executable, "-P", "-m", "conformance.workers", str(path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        cwd=ROOT,
    )
    assert proc.returncode == 2 and "refused" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert not target.exists()


def test_a_worker_file_the_kit_wrote_loads(tmp_path, monkeypatch):
    import secrets
    import tempfile

    from conformance.engine.runner import RunConfig
    from conformance.workers import WORKER_KEY_ENV, _write_worker_file, load_worker_file

    directory = Path(tempfile.mkdtemp(prefix="conformance-workers-", dir=tmp_path))
    key = secrets.token_bytes(32)
    _write_worker_file(directory / "w.pickle", print, RunConfig(spec_path="s"), key)
    monkeypatch.setenv(WORKER_KEY_ENV, key.hex())
    entry, config = load_worker_file(str(directory / "w.pickle"))
    assert entry is print and config.spec_path == "s" and WORKER_KEY_ENV not in os.environ


# ------------------------------------------------------------ item 4: the CEL budget counts built-ins
@pytest.mark.parametrize(
    "source, env",
    [
        ("size(indices(repeat(job.status, 4000000))) > 0", {"job": {"status": "running"}}),
        (" + ".join(["repeat('x', 67000000)"] * 20) + " != ''", {}),
        ("size(indices(repeat('x', 67000000))) > 0", {}),
        ("size(join(indices(repeat('ab', 100000)), repeat('x', 60000000))) > 0", {}),
        ("size(fill(repeat('{a}', 3000), {'a': repeat('x', 60000)})) > 0", {}),
        ("[1, 2, 3].all(i, size(repeat('x', 67000000)) > 0)", {}),
    ],
    ids=["indices-of-repeat", "twenty-repeats", "constant-indices", "join-separator", "fill", "in-comprehension"],
)
def test_built_ins_are_charged_by_what_they_build_and_take_in(source, env):
    import time

    from statemachines import ExpressionError
    from statemachines.language.expressions import compile_expression

    started = time.process_time()
    with pytest.raises(ExpressionError, match=r"spec.yaml:7: .*evaluation stopped after"):
        compile_expression(source, "spec.yaml:7").evaluate(env)
    assert time.process_time() - started < 5


def _spec_with_invariant(tmp_path: Path, check: str) -> Path:
    for name in ("thread-jobs.yaml", "thread-jobs.scenarios.yaml"):
        shutil.copy(ROOT / "spec" / name, tmp_path / name)
    spec = tmp_path / "thread-jobs.yaml"
    text = spec.read_text()
    invariant = f'  - id: hostile\n    description: over budget\n    each: job\n    check: "{check}"\n'
    spec.write_text(text.replace("\ninvariants:\n", "\ninvariants:\n" + invariant, 1))
    return spec


def test_an_invariant_over_budget_is_a_spec_error_with_its_line_never_a_pass(tmp_path):
    spec = _spec_with_invariant(tmp_path, "size(indices(repeat(job.status, 4000000))) > 0")
    line = spec.read_text().splitlines().index('    check: "size(indices(repeat(job.status, 4000000))) > 0"') + 1
    proc = kit("run", spec, "--no-stateful", "--scenario", "N2", "--report-dir", tmp_path / "r", timeout=120)
    text = clean(proc)
    assert proc.returncode == 2 and f"{spec}:{line}" in text and "evaluation stopped after" in text, text
    assert written(tmp_path / "r")["verdict"] == "error"


def test_validate_folds_constants_under_the_same_budget(tmp_path):
    spec = _spec_with_invariant(tmp_path, "size(indices(repeat('x', 67000000))) > 0")
    proc = kit("validate", spec, timeout=60)
    text = clean(proc)
    assert proc.returncode == 2 and "evaluation stopped after" in text and str(spec) in text, text


@pytest.mark.parametrize("named", ["/proc/self/environ", "../../etc/passwd", "link-out.yaml"])
def test_merge_reports_reads_no_spec_path_a_shard_report_points_outside(shard, tmp_path, monkeypatch, named):
    report, directory = load_shard_report(copy_shard(shard, tmp_path / "s"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "link-out.yaml").symlink_to("/etc/passwd")
    report["spec"]["path"] = named
    with pytest.raises(ShardError, match="name the spec with --spec"):
        merge_reports([(report, directory)], None)


def test_a_command_adapter_config_with_a_huge_integer_is_a_config_error(tmp_path):
    from conformance.adapters.command_config import CommandConfigError, load_command_config

    path = tmp_path / "adapter.yaml"
    path.write_text("command_adapter: 1\nx: " + HUGE + "\n")
    with pytest.raises(CommandConfigError, match=str(path)):
        load_command_config(path)


@pytest.mark.parametrize("kind", ["replay", "deviations", "spec"])
def test_a_fifo_named_as_a_received_file_is_refused_without_blocking(tmp_path, kind):
    from conformance.engine.deviations import DeviationsError, load_deviations
    from statemachines import SpecError, load_spec
    from statemachines.model.compiler import load_replay_file

    fifo = tmp_path / f"{kind}.yaml"
    os.mkfifo(fifo)
    loaders = {
        "replay": lambda: load_replay_file(load_spec(ROOT / "spec" / "thread-jobs.yaml"), fifo),
        "deviations": lambda: load_deviations(fifo),
        "spec": lambda: load_spec(fifo),
    }
    with pytest.raises((SpecError, DeviationsError), match="not a regular file"):
        loaders[kind]()

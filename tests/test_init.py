"""`conformance init`: the scaffold runs as written and says plainly what is not implemented."""

import json
import py_compile
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.scaffold import render_schema
from statemachines import load_spec

ROOT = Path(__file__).resolve().parent.parent
NODE = shutil.which("node")
TRANSPORTS = [
    "python",
    "stdio-python",
    pytest.param("stdio-node", marks=pytest.mark.skipif(NODE is None, reason="node is not installed")),
]


def _conformance(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "conformance.cli", *args], cwd=cwd, capture_output=True, text=True, timeout=600
    )


def _adapter_args(transport: str) -> list[str]:
    if transport == "python":
        return ["--adapter", "thread_jobs_adapter:Adapter"]
    if transport == "stdio-python":
        return ["--adapter-cmd", shlex.join([sys.executable, "thread_jobs_adapter.py"])]
    return ["--adapter-cmd", "node thread_jobs_adapter.js"]


@pytest.mark.slow
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_scaffold_runs_and_reports_each_operation_as_not_implemented(tmp_path, transport):
    target = tmp_path / "my-adapter"
    proc = _conformance("init", "thread-jobs", "--transport", transport, "--dir", str(target), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"12 operations of thread-jobs {load_spec(ROOT / 'spec/thread-jobs.yaml').version} stubbed" in proc.stdout
    assert "starts and answers the kit's handshake" in proc.stdout  # init tried it

    proc = _conformance(
        "run", "thread-jobs", *_adapter_args(transport), "--profile", "quick", "--report-dir", "out", cwd=target
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output
    assert "Traceback" not in output and "internal error" not in output
    assert "operation start_job is not implemented" in proc.stdout
    report = json.loads((target / "out/report.json").read_text())
    # not implemented is not applicable, never a failure: no scenario fails, each calling a stub
    # is not applicable with why; the exploration fails only since it has nothing left to draw
    assert not [s for s in report["scenarios"] if s["verdict"] == "fail"]
    reasons = [s["reason"] for s in report["not_applicable"]["scenarios"]]
    assert reasons and any("which the implementation does not offer (it answers not_implemented" in r for r in reasons)
    stubbed = {entry["operation"] for entry in report["not_applicable"]["operations"]}
    assert "start_job" in stubbed
    failure = report["stateful"]["failure"]
    assert failure["kind"] == "not-implemented" and "no operation to draw" in failure["message"]


@pytest.mark.slow
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_scaffolded_pytest_file_runs_from_anywhere(tmp_path, transport):
    target = tmp_path / "adapter"
    assert (
        _conformance("init", "thread-jobs", "--transport", transport, "--dir", str(target), cwd=tmp_path).returncode
        == 0
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            str(target / "test_thread_jobs_conformance.py"),
            "-p",
            "no:cacheprovider",
            "-k",
            "N1 or N2",
            "-rs",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    # A stubbed operation is not applicable, never a failure: each scenario is skipped, saying why.
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "3 skipped" in proc.stdout  # N1, N2, N10
    assert "which the implementation does not offer (it answers not_implemented" in proc.stdout
    assert "Traceback" not in proc.stdout


@pytest.mark.slow
def test_every_operation_is_stubbed_with_its_args_result_and_errors(tmp_path):
    spec = load_spec(str(ROOT / "spec/async-jobs.yaml"))
    for transport, name in (("python", "async_jobs_adapter.py"), ("stdio-node", "async_jobs_adapter.js")):
        target = tmp_path / transport
        assert (
            _conformance("init", "async-jobs", "--transport", transport, "--dir", str(target), cwd=tmp_path).returncode
            == 0
        )
        text = (target / name).read_text()
        for op_name, op in spec.operations.items():
            marker = f"def op_{op_name}(" if transport == "python" else f'"{op_name}"(args) {{'
            assert marker in text, f"{op_name} has no stub in {name}"
            stub = text.split(marker, 1)[1].split(
                "not_implemented()" if transport == "python" else "notImplemented()", 1
            )[0]
            for required in op.args_schema.get("required", []):
                assert f"{required}: " in stub and "(required)" in stub
            assert "result: " in stub
            assert f"errors: {', '.join(op.errors)}" in stub if op.errors else "errors: none declared" in stub
        for profile in spec.profiles:
            assert f"{profile}: " in text
    py_compile.compile(str(tmp_path / "python/async_jobs_adapter.py"), doraise=True)
    if NODE:
        check = subprocess.run(
            [NODE, "--check", str(tmp_path / "stdio-node/async_jobs_adapter.js")],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert check.returncode == 0, check.stderr


def test_spec_by_path_is_written_relative_to_the_scaffold(tmp_path):
    spec_dir = tmp_path / "specs"
    spec_dir.mkdir()
    for name in ("thread-jobs.yaml", "thread-jobs.scenarios.yaml"):
        shutil.copy(ROOT / "spec" / name, spec_dir / name)
    proc = _conformance("init", "specs/thread-jobs.yaml", "--dir", "deep/adapter", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    test_file = (tmp_path / "deep/adapter/test_thread_jobs_conformance.py").read_text()
    assert "conformance_suite('../../specs/thread-jobs.yaml'" in test_file


@pytest.mark.slow
def test_init_refuses_to_overwrite_and_reports_bad_input(tmp_path):
    assert _conformance("init", "thread-jobs", "--dir", "a", cwd=tmp_path).returncode == 0
    proc = _conformance("init", "thread-jobs", "--dir", "a", cwd=tmp_path)
    assert proc.returncode == 2 and "already exist" in proc.stderr and "--force" in proc.stderr
    assert _conformance("init", "thread-jobs", "--dir", "a", "--force", cwd=tmp_path).returncode == 0
    proc = _conformance("init", "no-such-spec", cwd=tmp_path)
    assert proc.returncode == 2 and "no-such-spec" in proc.stderr and "Traceback" not in proc.stderr
    proc = _conformance("init", "thread-jobs", "--transport", "stdio-go", cwd=tmp_path)
    assert proc.returncode == 2 and "stdio-go" in proc.stderr


def test_render_schema_reads_like_a_type():
    schema = {
        "type": "object",
        "required": ["id"],
        "properties": {
            "id": {"type": "string"},
            "tags": {"type": "array", "items": {"enum": ["a", "b"]}},
            "note": {"type": ["string", "null"]},
            "hidden": False,
        },
    }
    assert render_schema(schema) == '{id: string, tags?: ["a" | "b"], note?: string | null}'
    merged = {
        "allOf": [
            {"type": "object", "required": ["a"], "properties": {"a": {"type": "integer"}}},
            {"required": ["b"], "properties": {"b": {"const": True}}},
        ]
    }
    assert render_schema(merged) == "{a: integer, b: true}"
    assert render_schema({}) == "any"


def test_init_with_a_profile_shows_its_values_and_declares_it(tmp_path):
    proc = _conformance(
        "init", "async-jobs", "--transport", "stdio-python", "--profile", "task-table", "--dir", "a", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "The adapter declares profile task-table: declaring it sets surface=\"task_table\", max_running=1000000" in (
        " ".join(proc.stdout.split())
    )
    text = (tmp_path / "a/async_jobs_adapter.py").read_text()
    header = " ".join(line.lstrip("# ") for line in text.splitlines() if line.startswith("#"))
    assert "declaring `profile: task-table` alone sets every value below" in header
    assert "max_running: integer, 1000000 (set by task-table; spec default 15)" in header
    assert '{**SPEC, "profile": \'task-table\', "parameters": {}}' in text
    py_compile.compile(str(tmp_path / "a/async_jobs_adapter.py"), doraise=True)
    assert "starts and answers the kit's handshake" in proc.stdout  # the declared profile is accepted


def test_init_says_when_a_stdio_loop_may_declare_concurrent_true(tmp_path):
    for transport, name in (("stdio-python", "thread_jobs_adapter.py"), ("stdio-node", "thread_jobs_adapter.js")):
        plan = __import__("conformance.scaffold", fromlist=["plan_scaffold"]).plan_scaffold(
            load_spec(str(ROOT / "spec/thread-jobs.yaml")), "thread-jobs", transport
        )
        text = " ".join(line.lstrip("#/ ") for line in plan.files[name].splitlines())
        assert "A single-threaded loop like this one" in text
        assert "may declare true as long as every call answers on its own" in text
        assert "this loop may declare" in text  # next to the capability itself


def test_init_refuses_a_profile_the_spec_does_not_have(tmp_path):
    proc = _conformance("init", "async-jobs", "--profile", "nope", "--dir", "a", cwd=tmp_path)
    assert proc.returncode == 2 and "async-jobs has no profile 'nope'" in proc.stderr and "task-table" in proc.stderr
    assert not (tmp_path / "a").exists()


@pytest.mark.parametrize("force", [False, True])
def test_init_never_writes_through_a_symlink_even_a_dangling_one(tmp_path, force):
    """Issue 34, item 3: a link planted in --dir (dangling or not) is refused, nothing written."""
    from conformance.scaffold import Scaffold, ScaffoldError, write_scaffold

    outside = tmp_path / "outside"
    outside.mkdir()
    target = tmp_path / "d"
    target.mkdir()
    (target / "adapter.py").symlink_to(outside / "planted.py")  # dangling: planted.py does not exist
    files = {"adapter.py": "print(1)\n", "test_it.py": "x = 1\n"}
    scaffold = Scaffold(files=files, run_command="r", test_command="t")
    with pytest.raises(ScaffoldError, match="symbolic link"):
        write_scaffold(scaffold, target, force=force)
    assert list(outside.iterdir()) == [] and not (target / "test_it.py").exists()
    linked = tmp_path / "linked"
    linked.symlink_to(outside)
    with pytest.raises(ScaffoldError, match="symbolic link"):
        write_scaffold(scaffold, linked, force=force)
    assert list(outside.iterdir()) == []

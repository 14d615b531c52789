"""The OpenClaw example's adapter (examples/real-systems/openclaw), checked
without npm: it drives a stand-in registry in the published file layout
(tests/fixtures/openclaw-standin, written from the spec), through the
commands its README prints, with the unpacked package's folder swapped for
the stand-in's."""

import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "real-systems" / "openclaw"
STANDIN = ROOT / "tests" / "fixtures" / "openclaw-standin"
README_PACKAGE = "/tmp/openclaw/package"  # where the README unpacks the package
NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(NODE is None, reason="node is not installed on this machine")


def readme_runs() -> list[list[str]]:
    """The README's `conformance run` commands, split as a shell would."""
    text = (EXAMPLE / "README.md").read_text(encoding="utf-8")
    runs = []
    for block in re.findall(r"```sh\n(.*?)```", text, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if words[:2] == ["conformance", "run"]:
                runs.append(words[2:])
    return runs


def adapter(*args: str, requests: list[dict]) -> tuple[int, list[dict], str]:
    lines = "".join(json.dumps(r) + "\n" for r in requests)
    proc = subprocess.run(
        [NODE, str(EXAMPLE / "adapter.mjs"), *args], input=lines, capture_output=True, text=True, timeout=60
    )
    return proc.returncode, [json.loads(line) for line in proc.stdout.splitlines()], proc.stderr


def call(n: int, operation: str, **args) -> dict:
    return {"id": n, "type": "call", "operation": operation, "args": args}


def test_the_readme_runs_the_adapter_from_the_unpacked_package():
    runs = readme_runs()
    assert len(runs) == 2
    for argv in runs:
        assert argv[0] == "process-sessions"
        command = shlex.split(argv[argv.index("--adapter-cmd") + 1])
        assert command[:2] == ["node", "examples/real-systems/openclaw/adapter.mjs"]
        assert command[command.index("--package-dir") + 1] == README_PACKAGE
        if "--deviations" in argv:
            assert (ROOT / argv[argv.index("--deviations") + 1]).is_file()


def test_the_adapter_drives_the_registry_on_its_virtual_clock():
    code, answers, stderr = adapter(
        "--package-dir",
        str(STANDIN),
        "--ttl-ms",
        "1000",  # raised to the minimum, 60000, as the registry clamps it
        requests=[
            {"id": 0, "type": "hello", "protocol": 1},
            {"id": 1, "type": "reset", "now_ms": 100},
            call(2, "start_exec", session_id="p1", background=True, notify_on_exit=True),
            call(3, "write_output", session_id="p1", text="hi"),
            call(4, "end_process", session_id="p1", outcome="timed_out"),
            call(5, "get_session", session_id="p1"),
            {"id": 6, "type": "clock", "now_ms": 60099},
            call(7, "is_taken", session_id="p1"),
            {"id": 8, "type": "clock", "now_ms": 60100},
            call(9, "is_taken", session_id="p1"),
            call(10, "start_exec", session_id="p1", background=False, notify_on_exit=False),
            call(11, "poll", session_id="p1", scope="s1"),
            call(12, "start_exec", session_id="p2", background="yes", notify_on_exit=False),
            {"id": 13, "type": "bye"},
        ],
    )
    assert code == 0, stderr
    by_id = {a["id"]: a for a in answers}
    hello = by_id[0]
    assert hello["specs"] == [
        {"id": "process-sessions", "version": "1.0.0", "profile": "openclaw", "parameters": {"default_ttl_ms": 1000}}
    ]
    assert hello["implementation"]["version"] == "0.0.0-standin"
    assert by_id[4]["effects"] == [{"effect": "exit_notice", "session_id": "p1", "status": "failed"}]
    session = by_id[5]["result"]["session"]
    assert (session["status"], session["exit_reason"], session["ended_at"], session["expires_at"]) == (
        "failed",
        "overall-timeout",
        100,
        60100,
    )
    assert [by_id[7]["result"]["taken"], by_id[9]["result"]["taken"]] == [True, False]
    assert by_id[11]["error"] == {"kind": "not_backgrounded", "message": "Session p1 is not backgrounded."}
    assert by_id[12]["error"]["kind"] == "invalid_arguments"


@pytest.mark.parametrize(
    "args, problem",
    [
        ((), "no package: give --package-dir DIR or set OPENCLAW_PACKAGE_DIR"),
        (("--package-dir", str(ROOT / "spec")), "is not an unpacked openclaw package"),
        (("--package-dir", str(STANDIN), "--ttl-ms", "soon"), "--ttl-ms needs a whole number"),
    ],
)
def test_a_wrong_invocation_says_what_to_do_and_exits_2(args, problem):
    code, answers, stderr = adapter(*args, requests=[])
    assert code == 2 and answers == []
    assert problem in stderr and "usage: node adapter.mjs --package-dir DIR" in stderr


@pytest.mark.slow
def test_the_readme_command_passes_against_the_standin(tmp_path):
    argv = readme_runs()[0]
    at = argv.index("--adapter-cmd") + 1
    argv[at] = argv[at].replace(README_PACKAGE, str(STANDIN))
    argv[argv.index("--report-dir") + 1] = str(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-P", "-m", "conformance.cli", "run", *argv, "--profile", "quick"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["implementation"]["profile"] == "openclaw"
    assert {s["verdict"] for s in report["scenarios"]} == {"pass"}
    assert report["stateful"]["verdict"] == "pass"


def test_the_figures_the_docs_give_follow_from_the_spec():
    """docs/real-systems.md and the example's README give the OpenClaw run's
    scenario counts; those that follow from the spec (its version, how many
    scenarios apply under the profile, PS-R1 the one failing) are read from it."""
    from conformance.engine.scenarios import not_applicable_reason
    from statemachines import load_spec, resolve_parameters

    spec = load_spec(ROOT / "spec" / "process-sessions.yaml")
    params, _ = resolve_parameters(spec, "openclaw", None)
    applies = [s.id for s in spec.scenarios if not_applicable_reason(spec, s, params) is None]
    assert "PS-R1" in applies
    passing, not_applicable = len(applies) - 1, len(spec.scenarios) - len(applies)
    docs = (ROOT / "docs" / "real-systems.md").read_text(encoding="utf-8")
    readme = (EXAMPLE / "README.md").read_text(encoding="utf-8")
    assert (
        f"under process-sessions {spec.version}, ci, seeds 1-3: {passing} scenarios pass, "
        f"{not_applicable} are not applicable"
    ) in docs
    assert f"Scenarios (process-sessions {spec.version}, ci): {passing} pass; {not_applicable} are not" in readme

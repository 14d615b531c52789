"""The command adapter (conformance/command.py, docs/command-adapter.md): a
command-line tool run as an implementation, one invocation per operation.

Small stdlib programs written into tmp_path play the tool: one echoes its
argv, others hang, crash, print garbage or leave a detached process behind.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from conformance.adapters.command import CommandAdapter, command_factory, observe
from conformance.adapters.command_config import CommandConfigError, TemplateError, expand_argv, load_command_config
from conformance.engine.runner import RunConfig, run_conformance
from conformance.errors import InputRefused

ROOT = Path(__file__).resolve().parents[1]
SPEC = str(ROOT / "spec" / "async-command.yaml")
PY = sys.executable


def write_tool(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(body), encoding="utf-8")
    return path


def write_config(tmp_path: Path, operations: dict, **extra) -> Path:
    data = {
        "command_adapter": 1,
        "implementation": {"name": "fixture", "version": "0.1"},
        "operations": operations,
        **extra,
    }
    path = tmp_path / "adapter.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


ECHO = """
    import json, os, sys
    print(json.dumps({"argv": sys.argv[1:], "cwd": os.getcwd(),
                      "clock": open(os.environ["CLOCK"]).read().strip() if "CLOCK" in os.environ else None,
                      "state": os.environ.get("STATE"), "token": os.environ.get("CONFORMANCE_COMMAND_RUN")}))
"""


@pytest.fixture
def echo(tmp_path):
    tool = write_tool(tmp_path, "echo", ECHO)
    config = write_config(
        tmp_path,
        {
            "say": {"argv": ["{python}", str(tool), "say", "{text}", ["--count", "{count}"], "{*extra}"]},
            "now": {"argv": ["{python}", str(tool), "--now={now_ms}"]},
        },
        env={"CLOCK": "{clock_file}", "STATE": "{state_dir}"},
        vars={"extra": ["x", "y z"]},
    )
    adapter = CommandAdapter(config)
    adapter.reset(0)
    yield adapter
    adapter.close()


# ------------------------------------------------------------------ templates


def test_templates_fill_placeholders_groups_and_splices():
    values = {"a": "one two", "n": 3, "flag": True, "words": ["p", "q r"], "line": "prog 'x y' z", "none": None}
    assert expand_argv(["{a}", "n={n}", "{flag}", "{{literal}}"], values) == ["one two", "n=3", "true", "{literal}"]
    assert expand_argv(["{*words}", "{*line}"], values) == ["p", "q r", "prog", "x y", "z"]
    assert expand_argv(["x", ["--n", "{n}"], ["--gone", "{none}"], ["--missing", "{nope}"]], values) == [
        "x",
        "--n",
        "3",
    ]
    with pytest.raises(TemplateError, match=r"needs \{nope\}"):
        expand_argv(["{nope}"], values)


def test_arguments_stay_single_argv_elements_no_shell(echo, tmp_path):
    hostile = "a b; touch PWNED && echo $(touch PWNED2) `touch PWNED3` | cat > PWNED4"
    response = echo.call("say", {"text": hostile, "count": 2})
    argv = response["result"]["stdout"]["argv"]
    assert argv == ["say", hostile, "--count", "2", "x", "y z"]
    assert response["result"]["exit_code"] == 0
    assert not [p for p in tmp_path.rglob("PWNED*")], "a shell ran part of an argument"
    # an optional group is left out when its argument is absent
    assert echo.call("say", {"text": "t"})["result"]["stdout"]["argv"] == ["say", "t", "x", "y z"]


def test_missing_argument_is_an_error_response_naming_the_placeholder(echo):
    response = echo.call("say", {})
    assert response["error"]["kind"] == "argument_missing"
    assert "{text}" in response["error"]["message"]


def test_unknown_operation_is_an_error_response(echo):
    assert echo.call("fly", {})["error"]["kind"] == "unknown_operation"


def test_clock_reaches_the_tool_by_file_and_placeholder(echo):
    assert echo.call("now", {})["result"]["stdout"]["clock"] == "0"
    assert echo.set_clock(1500) == []
    out = echo.call("now", {})["result"]["stdout"]
    assert out["clock"] == "1500" and out["argv"] == ["--now=1500"]


def test_reset_gives_a_fresh_state_directory_and_run_token(echo):
    first = echo.call("now", {})["result"]["stdout"]
    Path(first["state"], "leftover").write_text("x")
    echo.reset(250)
    second = echo.call("now", {})["result"]["stdout"]
    assert second["state"] != first["state"] and os.listdir(second["state"]) == []
    assert not Path(first["state"]).exists()
    assert second["token"] and second["token"] != first["token"]
    assert second["clock"] == "250"


def test_describe_comes_from_the_config_and_options_override(tmp_path):
    config = write_config(
        tmp_path,
        {"op": {"argv": ["true"]}},
        profile="p1",
        parameters={"limit": 3},
        capabilities={"concurrent": True},
        vars={"tool": "mytool"},
    )
    adapter = CommandAdapter(config, profile="strict", tool="other")
    try:
        assert adapter.describe() == {
            "name": "fixture",
            "version": "0.1",
            "profile": "strict",
            "parameters": {"limit": 3},
            "capabilities": {"concurrent": True},
        }
        assert adapter.vars["tool"] == "other"
    finally:
        adapter.close()
    with pytest.raises(CommandConfigError, match="'colour' is not a var"):
        command_factory(config, {"colour": "red"})


# ------------------------------------------------------- what goes wrong


def test_timeout_is_reported_and_the_process_group_killed(tmp_path):
    tool = write_tool(
        tmp_path,
        "hang",
        """
        import os, subprocess, sys, time
        child = subprocess.Popen(
            [sys.executable, "-c", "import sys, time; time.sleep(60); open(sys.argv[1], 'w')", sys.argv[1] + ".child"]
        )
        open(sys.argv[1], "w").write(f"{os.getpid()} {child.pid}")
        time.sleep(60)
        open(sys.argv[1] + ".tool", "w")
    """,
    )
    pids = tmp_path / "pids"
    config = write_config(tmp_path, {"wait": {"argv": ["{python}", str(tool), str(pids)], "timeout_s": 1}})
    adapter = CommandAdapter(config)
    try:
        adapter.reset(0)
        response = adapter.call("wait", {})
        # cut short: neither the command nor its child got to the end of its sleep
        assert not (tmp_path / "pids.tool").exists() and not (tmp_path / "pids.child").exists()
    finally:
        adapter.close()
    assert response["error"]["kind"] == "command_timeout"
    assert "did not finish within 1s" in response["error"]["message"] and str(tool) in response["error"]["message"]
    for pid in map(int, pids.read_text().split()):
        assert not _alive(pid), f"process {pid} of the timed-out command is still running"


@pytest.mark.slow
def test_a_background_process_holding_stdout_is_named(tmp_path):
    tool = write_tool(
        tmp_path,
        "holder",
        """
        import subprocess, sys
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True)
        print("{}")
    """,
    )
    config = write_config(tmp_path, {"go": {"argv": ["{python}", str(tool)], "timeout_s": 1}})
    adapter = CommandAdapter(config)
    try:
        adapter.reset(0)
        response = adapter.call("go", {})
    finally:
        adapter.close()  # also kills the detached sleeper (it carries the run token)
    assert response["error"]["kind"] == "command_timeout"
    assert "stdout/stderr stayed open" in response["error"]["message"]


def test_crashes_and_exit_codes(tmp_path):
    tool = write_tool(
        tmp_path,
        "crash",
        """
        import os, signal, sys
        sys.stderr.write("about to fail\\n"); sys.stderr.flush()
        if sys.argv[1] == "segv":
            os.kill(os.getpid(), signal.SIGSEGV)
        print('{"ok": false}')
        sys.exit(int(sys.argv[1]))
    """,
    )
    config = write_config(tmp_path, {"run": {"argv": ["{python}", str(tool), "{how}"]}})
    adapter = CommandAdapter(config)
    try:
        adapter.reset(0)
        killed = adapter.call("run", {"how": "segv"})
        exited = adapter.call("run", {"how": 3})
    finally:
        adapter.close()
    assert killed["error"]["kind"] == "command_killed"
    assert "SIGSEGV" in killed["error"]["message"] and "about to fail" in killed["error"]["message"]
    assert exited["result"] == {"exit_code": 3, "stdout": {"ok": False}, "stderr": "about to fail\n"}


def test_missing_and_non_executable_programs(tmp_path):
    plain = tmp_path / "not-executable"
    plain.write_text("#!/bin/sh\necho hi\n")
    plain.chmod(0o644)
    config = write_config(
        tmp_path, {"missing": {"argv": [str(tmp_path / "no-such-tool"), "x"]}, "plain": {"argv": [str(plain)]}}
    )
    adapter = CommandAdapter(config)
    try:
        adapter.reset(0)
        missing, plain_response = adapter.call("missing", {}), adapter.call("plain", {})
    finally:
        adapter.close()
    assert missing["error"]["kind"] == "command_not_found"
    assert "no-such-tool" in missing["error"]["message"]
    assert plain_response["error"]["kind"] == "command_not_executable"


def test_non_json_stdout_is_kept_as_text():
    out = observe(0, b"Usage: tool job status ID\n", b"")
    assert out["stdout"] is None and out["stdout_text"] == "Usage: tool job status ID\n"
    assert "not one JSON document" in out["stdout_error"] and "Usage: tool job status ID" in out["stdout_error"]
    assert "stdout_text" not in observe(0, b'{"a": 1}', b"")


def test_non_json_stdout_fails_the_spec_schema_with_the_text(tmp_path):
    config = write_config(tmp_path, {"job_status": {"argv": ["{python}", "-c", "print('Usage: tool job status ID')"]}})
    report = run_conformance(RunConfig(spec_path=SPEC, adapter_cli=str(config), only=("E1",), report_dir=None))
    assert report["verdict"] == "fail"
    failure = report["scenarios"][0]["failure"]
    assert failure["kind"] == "schema"
    assert "stdout is not one JSON document" in failure["message"] and "Usage: tool job status ID" in failure["message"]


# ---------------------------------------------------------- config errors


@pytest.mark.parametrize(
    "text, expected",
    [
        ("command_adapter: 1\noperations: [\n", r"adapter\.yaml:\d+: not valid YAML/JSON"),
        (
            "command_adapter: 1\nimplementation: {name: t, version: '1'}\noperations:\n  op:\n    argv: [tool, 5]\n",
            r"adapter\.yaml:5: operations\.op\.argv\[1\]: 5 is not of type 'string'.*fix: each argv element is a string.*quote numbers",
        ),
        (
            "command_adapter: 1\nimplementation: {name: t, version: '1'}\noperatons: {}\n",
            r"adapter\.yaml:\d+: .*unknown key\(s\) 'operatons'",
        ),
        (
            "command_adapter: 1\nimplementation: {name: t, version: 1.0}\noperations: {op: {argv: [x]}}\n",
            r"adapter\.yaml:2: implementation\.version: 1\.0 is not of type 'string' \(fix: the tool's version as a string",
        ),
        (
            "command_adapter: 1\nimplementation: {name: t, version: '1'}\nvars: {state_dir: /tmp}\noperations: {op: {argv: [x]}}\n",
            r"adapter\.yaml:3: vars\.state_dir: 'state_dir' is a built-in placeholder",
        ),
        (
            "command_adapter: 1\nimplementation: {name: t, version: '1'}\nenv: {X: '{target}'}\noperations: {op: {argv: [x]}}\n",
            r"adapter\.yaml:3: env\.X: refers to \{target\}, which is neither a var nor a built-in",
        ),
        ("- just\n- a list\n", r"must hold a mapping"),
    ],
)
def test_bad_config_files_say_where_and_how_to_fix(tmp_path, text, expected):
    path = tmp_path / "adapter.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(CommandConfigError, match=expected):
        load_command_config(path)


def test_cli_reports_a_bad_config_without_traceback(tmp_path):
    path = tmp_path / "adapter.yaml"
    path.write_text("command_adapter: 2\nimplementation: {name: t, version: '1'}\noperations: {op: {argv: [x]}}\n")
    proc = subprocess.run(
        [
            PY,
            "-m",
            "conformance.cli",
            "run",
            SPEC,
            "--adapter-cli",
            str(path),
            "--no-stateful",
            "--report-dir",
            str(tmp_path / "r"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "adapter.yaml:1: command_adapter: 1 was expected" in proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    missing = subprocess.run(
        [PY, "-m", "conformance.cli", "run", SPEC, "--adapter-cli", str(tmp_path / "nope.yaml"), "--adapter", "x:y"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert missing.returncode == 2 and "cannot be combined with --adapter" in missing.stderr


# ------------------------------------------------------- leftover workers


def test_reset_and_close_kill_detached_leftovers(tmp_path):
    tool = write_tool(
        tmp_path,
        "spawner",
        """
        import json, os, sys, time
        if os.fork() == 0:          # a detached worker: new session, stdio on /dev/null
            os.setsid()
            if os.fork():
                os._exit(0)
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            with open(sys.argv[1] + ".tmp", "w") as handle:  # whole or not at all: the parent reads it
                handle.write(str(os.getpid()))
            os.replace(sys.argv[1] + ".tmp", sys.argv[1])
            time.sleep(120)
            os._exit(0)
        deadline = time.time() + 5
        while not os.path.exists(sys.argv[1]) and time.time() < deadline:
            time.sleep(0.01)
        print(json.dumps({"worker": int(open(sys.argv[1]).read())}))
    """,
    )
    config = write_config(tmp_path, {"spawn": {"argv": ["{python}", str(tool), "{run_dir}/pid"]}})
    adapter = CommandAdapter(config)
    try:
        adapter.reset(0)
        first = adapter.call("spawn", {})["result"]["stdout"]["worker"]
        assert _alive(first), "the fixture's worker should outlive its command"
        adapter.reset(0)
        assert _gone_soon(first), "reset left the previous run's worker running"
        second = adapter.call("spawn", {})["result"]["stdout"]["worker"]
        assert _alive(second)
    finally:
        adapter.close()
    assert _gone_soon(second), "close left a worker running"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _gone_soon(pid: int) -> bool:
    deadline = time.monotonic() + 10  # a loaded machine may take a while to reap it
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.02)
    return False


# ------------------------------------- commands taken from arguments (docs/trust-model.md)

PRINTER = """
    import json, shlex, sys
    me = shlex.join([sys.executable, sys.argv[0]])
    if sys.argv[1] == "describe":            # prints a command of its own, and echoes its input
        print(json.dumps({"own_command": f"{me} ran", "echo_command": sys.argv[2], "status": sys.argv[2],
                          "words_command": [sys.executable, sys.argv[0], "listed"], "plain": f"{me} plain"}))
    else:
        print(json.dumps({"ran": sys.argv[1:]}))
"""


@pytest.fixture
def printer(tmp_path):
    tool = write_tool(tmp_path, "printer", PRINTER)
    config = write_config(
        tmp_path,
        {
            "describe": {"argv": ["{*tool}", "describe", "{text}"]},
            "run": {"argv": ["{*command}"]},
            "run_allowed": {"argv": ["{*command}"], "allowed_prefixes": [["{*tool}", "ok"]]},
        },
        vars={"tool": ["{python}", str(tool)]},
    )
    adapter = CommandAdapter(config)
    adapter.reset(0)
    yield adapter, tool
    adapter.close()


def test_a_command_runs_only_when_the_tool_printed_it_in_this_run(printer, tmp_path):
    adapter, tool = printer
    with pytest.raises(InputRefused, match=r"run: refused to run the command line in argument `command`"):
        adapter.call("run", {"command": f"touch {tmp_path / 'PWNED'}"})
    out = adapter.call("describe", {"text": "hello"})["result"]["stdout"]
    assert adapter.call("run", {"command": out["own_command"]})["result"]["stdout"] == {"ran": ["ran"]}
    assert adapter.call("run", {"command": out["words_command"]})["result"]["stdout"] == {
        "ran": ["listed"]
    }  # a list too
    adapter.reset(0)  # a new run: what the tool printed before is not this run's
    with pytest.raises(InputRefused):
        adapter.call("run", {"command": out["own_command"]})
    assert not (tmp_path / "PWNED").exists()


def test_a_tool_echoing_its_input_does_not_launder_it_into_a_command(printer, tmp_path):
    adapter, _ = printer
    evil = f"touch {tmp_path / 'PWNED'}"
    assert adapter.call("describe", {"text": evil})["result"]["stdout"]["echo_command"] == evil
    with pytest.raises(InputRefused):
        adapter.call("run", {"command": evil})
    assert not (tmp_path / "PWNED").exists()


def _trust_check(trust, command: str) -> list[str]:
    return trust.check("run", ["{*command}"], {"command": command}, {}, shlex.split(command), [], "cli.yaml")


def test_the_trust_check_never_forgets_a_tainted_word(tmp_path):
    """Issue 64: many argument words after a tainted one used to evict it, and
    the tool echoing the old input later was trusted. Nothing is evicted now:
    past the bound no printed line is trusted until the next reset."""
    from conformance.adapters.command_trust import MAX_REMEMBERED, CommandTrust

    evil = f"touch {tmp_path / 'PWNED'}"
    trust = CommandTrust()
    trust.note_arguments({"text": evil})
    for start in range(0, MAX_REMEMBERED + 10, 5_000):  # a flood of distinct words, call after call
        trust.note_arguments({"text": " ".join(f"w{i}" for i in range(start, start + 5_000))})
    trust.note_output({"echo_command": evil})  # a later answer echoing the first input
    with pytest.raises(InputRefused, match="more than the check remembers"):
        _trust_check(trust, evil)
    trust.note_output({"own_command": "tool status 1"})  # even the tool's own lines: fail closed
    with pytest.raises(InputRefused, match="no printed line is trusted"):
        _trust_check(trust, "tool status 1")
    trust.clear()  # a reset starts a new run
    trust.note_output({"own_command": "tool status 1"})
    assert _trust_check(trust, "tool status 1") == ["command"]


def test_the_trust_check_bounds_printed_lines_failing_closed():
    from conformance.adapters.command_trust import MAX_REMEMBERED, CommandTrust

    trust = CommandTrust()
    trust.note_output({"own_command": "tool first"})
    trust.note_output({"list": [{"x_command": f"tool {i}"} for i in range(MAX_REMEMBERED)]})
    assert trust.full
    with pytest.raises(InputRefused):
        _trust_check(trust, "tool first")  # remembered, but the check no longer trusts anything


@pytest.mark.parametrize("quoted", ["'to''uch' {x}", '"touch" {x}', "to\\uch {x}", "'touch' '{x}'"])
def test_an_echo_laundered_through_quoting_is_not_a_command(printer, tmp_path, quoted):
    """The words handed in are compared with the printed words: quoting that
    shlex removes does not hide the program the tool was given."""
    adapter, _ = printer
    target = tmp_path / "PWNED"
    given = quoted.format(x=target)
    echoed = adapter.call("describe", {"text": given})["result"]["stdout"]["echo_command"]
    assert shlex.split(echoed)[0] == "touch"
    with pytest.raises(InputRefused):
        adapter.call("run", {"command": f"touch {target}"})
    with pytest.raises(InputRefused):
        adapter.call("run", {"command": echoed})
    assert not target.exists()


def test_only_command_fields_count_as_printed_commands(printer, tmp_path):
    """A status, an error code or any other string the tool prints is not a
    command line: only fields named `command` or `*_command` are."""
    adapter, _ = printer
    out = adapter.call("describe", {"text": "hello"})["result"]["stdout"]
    with pytest.raises(InputRefused):
        adapter.call("run", {"command": out["plain"]})
    assert adapter.call("run", {"command": out["own_command"]})["result"]["stdout"] == {"ran": ["ran"]}


def test_allowed_prefixes_let_a_config_name_what_else_may_run(printer, tmp_path):
    adapter, tool = printer
    ok = shlex.join([sys.executable, str(tool), "ok", "x"])
    assert adapter.call("run_allowed", {"command": ok})["result"]["stdout"] == {"ran": ["ok", "x"]}
    with pytest.raises(InputRefused, match="starting with"):
        adapter.call("run_allowed", {"command": shlex.join([sys.executable, str(tool), "other"])})


def test_an_argument_never_replaces_a_var_or_built_in(printer, tmp_path):
    adapter, tool = printer
    out = adapter.call("describe", {"text": "t", "tool": ["touch", str(tmp_path / "PWNED")], "python": "/bin/false"})[
        "result"
    ]
    assert out["exit_code"] == 0 and out["stdout"]["status"] == "t"
    assert not (tmp_path / "PWNED").exists()


def test_values_a_command_line_cannot_carry_are_refused(echo):
    with pytest.raises(InputRefused, match=r"argument `text` holds a NUL byte"):
        echo.call("say", {"text": "a\x00b"})
    with pytest.raises(InputRefused, match=r"argument `text` holds text the operating system cannot encode"):
        echo.call("say", {"text": "a\ud800b"})
    with pytest.raises(InputRefused, match=r"argument `text` is \d+ bytes"):
        echo.call("say", {"text": "x" * 200_000})


def test_allowed_prefixes_may_use_only_vars_and_built_ins(tmp_path):
    path = tmp_path / "adapter.yaml"
    path.write_text(
        "command_adapter: 1\nimplementation: {name: t, version: '1'}\n"
        "operations:\n  op:\n    argv: ['{*command}']\n    allowed_prefixes: [['{command}']]\n"
    )
    with pytest.raises(
        CommandConfigError,
        match=r"adapter\.yaml:6: operations\.op\.allowed_prefixes\[0\]: refers "
        r"to \{command\}.*vars and built-ins only",
    ):
        load_command_config(path)

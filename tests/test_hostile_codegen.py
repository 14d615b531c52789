"""Files a user receives, round 4 (issue 64): spec text never becomes code.

`conformance init` writes an adapter and a pytest file from a spec, then
imports or starts the adapter. A spec someone sent carries titles,
descriptions, operation and argument names holding quotes, newlines,
carriage returns, U+2028, ``*/`` and backticks around code that would create
a marker file. On every transport the files still parse, the spec text sits
only in comments and string literals, and the marker is never created. The
same text shows escaped in the terminal, summary.md and junit.xml."""

from __future__ import annotations

import dataclasses
import io
import json
import shutil
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conformance.reporting import render_junit_xml, render_summary_markdown
from conformance.reporting._format import visible
from conformance.reporting.console import SafeConsole
from conformance.scaffold import TRANSPORTS, check_scaffold, method_names, plan_scaffold, write_scaffold
from statemachines import load_spec

ROOT = Path(__file__).resolve().parents[1]
NODE = shutil.which("node")
MARKER_NAME = "PWNED"


def payloads(marker: Path) -> tuple[str, str]:
    """Python and JavaScript code that creates ``marker`` if it ever runs."""
    python = f"__import__('pathlib').Path({str(marker)!r}).write_text('x')"
    javascript = f"require('fs').writeFileSync({json.dumps(str(marker))}, 'x')"
    return python, javascript


def hostile_texts(marker: Path) -> list[str]:
    """Text breaking out of a docstring, a string, a comment or a template literal."""
    py, js = payloads(marker)
    return [
        f'x"""\n{py}\n"""',
        f"x'''\n{py}\n'''",
        f"x\r{py}\r",
        f"x\n{py}  #",
        f'x"\n{py}\n"',
        f"x\\\n{py}",
        f"x */ {js} /*",
        f"x`; {js}; `",
        f"x${{{js}}}",
        f"x\u2028{js}\u2028//",
        f"x\u2029{js}",
        f"x\n{js}\n//",
        f"x\x85{py}",
        "x\x1b]0;owned\x07\x1b[2J\u202edesrever\x00",
    ]


def hostile_spec(directory: Path) -> Path:
    """thread-jobs with hostile text in its title, a description, a profile's
    description, and in the names, summaries and argument names of added
    operations (two of them mapping to the same identifier, one a keyword)."""
    marker = directory / MARKER_NAME
    py, js = payloads(marker)
    text = (ROOT / "spec/thread-jobs.yaml").read_text(encoding="utf-8")
    shutil.copy(ROOT / "spec/thread-jobs.scenarios.yaml", directory)

    def sub(old: str, new: str) -> None:
        nonlocal text
        assert text.count(old) == 1, old
        text = text.replace(old, new)

    sub("title: Thread-scoped background tool jobs\n", f"title: {json.dumps(''.join(hostile_texts(marker)))}\n")
    sub(
        "    description: The runtime defaults written in the lifecycle's own specification.\n",
        f"    description: {json.dumps(hostile_texts(marker)[0] + hostile_texts(marker)[9])}\n",
    )
    op = {
        "summary": "".join(hostile_texts(marker)),
        "args": {
            "type": "object",
            "properties": {f'a"""\n{py}\n': {"type": "string"}, f"b'\n{js}": {"enum": [f"\n{py}", f"*/{js}"]}},
        },
        "steps": [{"result": "{}"}],
    }
    names = [f'evil"):\n    {py}\n#\u2028{js}\n', f"e`${{{js}}}`*/", "evil-2", "evil_2", "class", "9lives", "ünï"]
    added = "".join(f"  {json.dumps(name)}: {json.dumps(op)}\n" for name in names)
    sub("\noperations:\n", "\noperations:\n" + added)
    path = directory / "hostile.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def python_tokens_hold_spec_text_only_as_data(source: str, needle: str, spec) -> None:
    """Every token holding ``needle`` is a comment, a string literal, or one
    of the checked ASCII method names made of operation names."""
    methods = set(method_names(spec).values())
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if needle in token.string:
            assert token.type in (tokenize.COMMENT, tokenize.STRING) or token.string in methods, token


def node_check(path: Path) -> None:
    proc = subprocess.run([NODE or "node", "--check", str(path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


@pytest.fixture(scope="module")
def spec_dir(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("hostile-spec")
    hostile_spec(directory)
    return directory


@pytest.mark.parametrize("transport", list(TRANSPORTS))
def test_init_from_a_hostile_spec_runs_no_spec_code(spec_dir, tmp_path, transport):
    if transport == "stdio-node" and NODE is None:
        pytest.skip("Node.js is not installed")
    spec_path = spec_dir / "hostile.yaml"
    marker = spec_dir / MARKER_NAME
    spec = load_spec(str(spec_path))  # `validate` accepts it: it is data
    scaffold = plan_scaffold(spec, str(spec_path), transport)
    written = write_scaffold(scaffold, tmp_path)
    for path in written:
        if path.suffix == ".py":
            source = path.read_text(encoding="utf-8")
            compile(source, str(path), "exec")  # parses, without running
            python_tokens_hold_spec_text_only_as_data(source, MARKER_NAME, spec)
        else:
            node_check(path)
    adapter_file = next(name for name in scaffold.files if not name.startswith("test_"))
    assert check_scaffold(spec, str(spec_path), transport, tmp_path, adapter_file) is None  # imported / started
    assert not marker.exists(), f"{transport}: spec text ran as code"


def test_init_command_from_a_hostile_spec_runs_no_spec_code(spec_dir, tmp_path):
    """The front door, end to end: exit 0, the adapter answers its handshake,
    and the terminal shows the title's control characters escaped."""
    proc = subprocess.run(
        [sys.executable, "-m", "conformance.cli", "init", str(spec_dir / "hostile.yaml"), "--dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "starts and answers the kit's handshake" in proc.stdout
    assert "\x1b" not in proc.stdout + proc.stderr and "\x07" not in proc.stdout + proc.stderr
    assert not (spec_dir / MARKER_NAME).exists()


def test_operation_names_become_distinct_ascii_identifiers(spec_dir):
    names = method_names(load_spec(str(spec_dir / "hostile.yaml")))
    assert len(set(names.values())) == len(names)
    assert all(name.isascii() and name.isidentifier() for name in names.values())
    assert names["evil-2"] != names["evil_2"]


HOSTILE_ALPHABET = st.sampled_from(list("\"'`\\\n\r\x00\x1b\x07\x85\u2028\u2029\u202e#*/${}();: ab") + ["\U0001f600"])


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(
    title=st.text(HOSTILE_ALPHABET, max_size=40),
    operation=st.text(HOSTILE_ALPHABET, min_size=1, max_size=20),
    summary=st.text(HOSTILE_ALPHABET, max_size=40),
)
def test_any_title_and_operation_name_stay_data(spec_dir, title, operation, summary):
    """Any title, operation name and summary: every Python file compiles and
    holds the text only in comments and literals; the generated table maps
    the exact operation name (repr round-trips it)."""
    base = load_spec_cached(spec_dir)
    first = next(iter(base.operations.values()))
    op = dataclasses.replace(first, name=operation, summary=summary + MARKER_NAME)
    spec = dataclasses.replace(base, title=title + MARKER_NAME, operations={operation: op})
    for transport in ("python", "stdio-python"):
        for name, source in plan_scaffold(spec, "s.yaml", transport).files.items():
            code = compile(source, name, "exec")
            assert code is not None
            python_tokens_hold_spec_text_only_as_data(source, MARKER_NAME, spec)
    js = plan_scaffold(spec, "s.yaml", "stdio-node").files
    node = next(source for name, source in js.items() if name.endswith(".js"))
    assert all(line.lstrip().startswith("//") for line in node.splitlines() if MARKER_NAME in line)
    assert json.dumps(operation) in node


_CACHE: dict[Path, object] = {}


def load_spec_cached(directory: Path):
    if directory not in _CACHE:
        _CACHE[directory] = load_spec(str(directory / "hostile.yaml"))
    return _CACHE[directory]


# ------------------------------------------------------------------ terminal and Markdown

CONTROL = "\x1b]0;owned\x07\x1b[31m\r\x08\x9b2J\u202e\u2066\x00"


def _report_with(text: str) -> dict:
    return {
        "verdict": "error",
        "spec": {"id": "x", "version": "1.0.0", "title": text, "path": "s.yaml"},
        "implementation": {"name": text, "version": text},
        "scenarios": [],
        "problems": [{"kind": "adapter", "message": text, "where": text}],
    }


def _assert_no_controls(out: str) -> None:
    for char in CONTROL:
        assert char.isprintable() or char not in out, (char, out)


def test_markdown_and_junit_show_control_characters_escaped():
    report = _report_with(f"title{CONTROL}end")
    markdown = render_summary_markdown(report)
    _assert_no_controls(markdown)
    assert "\\x1b]0;owned\\x07" in markdown and "\\u202e" in markdown
    _assert_no_controls(render_junit_xml(report))


def test_console_shows_control_characters_escaped_and_keeps_its_own_styles():
    from rich.text import Text

    out = io.StringIO()
    console = SafeConsole(file=out, force_terminal=True, color_system="standard", width=200)
    console.print(Text("FAIL", style="bold red") + Text(f" {CONTROL} "))
    console.print(f"plain {CONTROL}", markup=False)
    text = out.getvalue()
    assert "\x1b[1;31mFAIL" in text  # the kit's own style survives
    assert "\x1b]" not in text and "\x07" not in text and "\u202e" not in text and "\x9b" not in text
    assert "\\x1b]0;owned" in text  # (rich itself drops BEL, BS, CR)


@given(st.text(max_size=60))
@settings(max_examples=100, deadline=None, derandomize=True)
def test_visible_escapes_every_unprintable_character(text):
    shown = visible(text, keep="")
    assert shown.isprintable()
    assert visible(text) == text or not text.isprintable()


def test_plain_progress_lines_show_control_characters_escaped():
    from conformance.progress import PlainProgress

    stream = io.StringIO()
    PlainProgress(stream)._say(f"scenario {CONTROL}: fail")
    _assert_no_controls(stream.getvalue().removesuffix("\n"))
    assert stream.getvalue().count("\n") == 1


def test_the_cli_consoles_read_no_markup_in_received_text():
    out = io.StringIO()
    console = SafeConsole(file=out, force_terminal=True, color_system="standard", width=200, highlight=False)
    console.print("profile [link=https://evil.example]x[/link] [bold red]PASS[/] :warning:")
    text = out.getvalue()
    assert "[link=https://evil.example]x[/link]" in text and "\x1b]8" not in text and ":warning:" in text

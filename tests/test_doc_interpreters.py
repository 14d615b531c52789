"""No doc or example tells a user to start a program that needs the kit with
whichever `python` comes first on PATH: that interpreter may lack the kit
(issue 9), so commands name the environment's own (`.venv/bin/python`)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# `--adapter-cmd "python x.py"`, `--adapter-cmd='python3 -m x'`, `adapter_cmd="python x.py"`
BARE = re.compile(r"""adapter[-_]cmd\s*[= ]\s*["']?python3?\s""")


def documents() -> list[Path]:
    found = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    for pattern in ("*.md", "*.py", "*.js"):
        found += sorted((ROOT / "examples").rglob(pattern))
    found += sorted((ROOT / "conformance").rglob("*.py"))
    return [p for p in found if "node_modules" not in p.parts]


def test_the_documents_are_found():
    names = {p.relative_to(ROOT).as_posix() for p in documents()}
    assert {"README.md", "examples/python-stdio/README.md", "examples/python-stdio/adapter.py"} <= names


def test_no_adapter_command_starts_a_bare_python():
    bad = [
        f"{p.relative_to(ROOT)}:{n}: {line.strip()}"
        for p in documents()
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if BARE.search(line)
    ]
    assert not bad, "commands that depend on which python is on PATH:\n" + "\n".join(bad)


def test_the_pattern_catches_what_it_is_for():
    assert BARE.search('conformance run x --adapter-cmd "python examples/python-stdio/adapter.py"')
    assert BARE.search("adapter_cmd='python3 -m my.adapter'")
    assert not BARE.search('--adapter-cmd ".venv/bin/python examples/python-stdio/adapter.py"')
    assert not BARE.search('--adapter-cmd "node adapter.js"')

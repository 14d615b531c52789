"""The oh-my-pi example (examples/real-systems/oh-my-pi/): what CI can check
without the upstream package, which it cannot fetch. The adapter and the
build say plainly what is missing or wrong, exit 2, and never start without
a bundle; the profiles the adapter may declare are profiles of the spec."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from statemachines import load_spec

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "real-systems" / "oh-my-pi"
NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(NODE is None, reason="node is not installed on this machine")


def _node(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([NODE, *args], cwd=cwd, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


def test_the_adapter_without_a_bundle_says_how_to_build_one(tmp_path):
    proc = _node(str(EXAMPLE / "adapter.mjs"), "--bundle-dir", str(tmp_path / "nowhere"))
    assert proc.returncode == 2
    assert f"no bundle in {tmp_path / 'nowhere'}" in proc.stderr and "node build.mjs --upstream" in proc.stderr
    assert proc.stdout == ""


@pytest.mark.parametrize(
    "args, said",
    [
        (["--profile", "oh-my-pi-19"], 'unknown profile "oh-my-pi-19"'),
        (["--max-running", "0"], "--max-running must be within 1..100"),
        (["--declare", "ids"], "--declare needs NAME=VALUE"),
        (["--bundle-dir"], "--bundle-dir needs a value"),
    ],
)
def test_the_adapter_refuses_bad_flags(args, said):
    proc = _node(str(EXAMPLE / "adapter.mjs"), *args)
    assert proc.returncode == 2 and said in proc.stderr, proc.stderr


@pytest.mark.skipif(
    not (EXAMPLE / "node_modules" / "esbuild").exists(), reason="esbuild is not installed (npm install in the example)"
)
def test_the_build_names_what_is_not_an_unpacked_package(tmp_path):
    proc = _node(str(EXAMPLE / "build.mjs"), "--upstream", str(tmp_path))
    assert proc.returncode == 2
    assert f"{tmp_path / 'package.json'} does not exist: is {tmp_path} the unpacked package?" in proc.stderr


def test_the_adapters_profiles_are_the_specs():
    source = (EXAMPLE / "adapter.mjs").read_text()
    declared = re.search(r"const PROFILES = \[([^\]]*)\]", source)
    assert declared
    names = {name.strip().strip("'") for name in declared.group(1).split(",")} - {"none"}
    assert names == {"oh-my-pi", "oh-my-pi-18"}
    assert names <= set(load_spec(ROOT / "spec" / "async-jobs.yaml").profiles)

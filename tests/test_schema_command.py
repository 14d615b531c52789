"""`conformance schema` prints the kit's JSON Schemas; every spec file names its schema for editors."""

import json
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from conformance.schema_files import SCHEMA_NAMES, schema_json
from statemachines.load.source import load_yaml_file

ROOT = Path(__file__).resolve().parent.parent
HEADER = re.compile(r"\A# yaml-language-server: \$schema=(\S+)\n")


def _conformance(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "conformance.cli", *args], capture_output=True, text=True, cwd=cwd, timeout=120
    )


@pytest.mark.parametrize("name", SCHEMA_NAMES)
def test_schema_command_prints_a_valid_json_schema(name):
    proc = _conformance("schema", name)
    assert proc.returncode == 0, proc.stderr
    schema = json.loads(proc.stdout)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert proc.stdout == schema_json(name)


def test_protocol_schema_accepts_protocol_lines_and_rejects_others():
    validator = jsonschema.Draft202012Validator(json.loads(schema_json("protocol")))
    assert validator.is_valid({"id": 1, "type": "reset", "now_ms": 0})
    assert validator.is_valid({"id": 3, "error": {"kind": "not_implemented", "message": "start_job"}, "effects": []})
    assert not validator.is_valid({"id": 1, "type": "reset"})
    assert not validator.is_valid({"type": "call", "operation": "x", "args": {}})


def test_schema_output_file_and_bad_name(tmp_path):
    target = tmp_path / "spec.schema.json"
    proc = _conformance("schema", "spec", "-o", str(target))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(target.read_text())["$schema"].startswith("https://json-schema.org/")
    proc = _conformance("schema", "specs")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "'specs' is not one of" in proc.stderr


SPEC_FILES = sorted((ROOT / "spec").glob("*.yaml"))


@pytest.mark.parametrize("path", SPEC_FILES, ids=[p.name for p in SPEC_FILES])
def test_every_spec_file_names_the_schema_it_validates_against(path):
    match = HEADER.match(path.read_text(encoding="utf-8"))
    assert match, f"{path.name} must start with '# yaml-language-server: $schema=...'"
    schema_file = (path.parent / match.group(1)).resolve()
    assert schema_file.is_file(), f"{path.name} points at {match.group(1)}, which does not exist"
    schema = json.loads(schema_file.read_text(encoding="utf-8"))
    data, _ = load_yaml_file(str(path))  # the kit's loader: YAML 1.2 booleans, as editors read it
    is_fragment = "format" not in data
    assert schema_file.name == ("lifecycle-spec-fragment.schema.json" if is_fragment else "lifecycle-spec.schema.json")
    errors = [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(data)]
    assert errors == []


def test_repository_schema_files_are_what_the_command_prints():
    # The files editors read in this repository cannot drift from the kit's own schema.
    assert json.loads((ROOT / "spec/lifecycle-spec.schema.json").read_text()) == json.loads(schema_json("spec"))
    assert (ROOT / "spec/lifecycle-spec-fragment.schema.json").read_text() == schema_json("spec-fragment")


def test_fragment_schema_still_rejects_unknown_keys():
    validator = jsonschema.Draft202012Validator(json.loads(schema_json("spec-fragment")))
    assert validator.is_valid({"scenarios": []})
    assert not validator.is_valid({"scenarioz": []})

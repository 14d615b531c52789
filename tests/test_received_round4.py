"""Files a user receives, round 4 (issue 64), beyond generated code: no
stale verdict after an interrupted or failed ``merge-reports``; the GitHub
Action's outputs cannot be added to or overridden by an input; mutants
files and references named by a spec give file:line, never an internal
error."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
from click.testing import CliRunner

from conformance.cli import cli
from conformance.engine.interrupts import Interrupted

ROOT = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------ merge-reports: no stale verdict


def _old_pass(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text('{"verdict": "pass", "exit_code": 0}')  # an earlier merge's verdict
    (out / "summary.md").write_text("# PASS\n")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_merge_leaves_its_own_verdict_not_the_old_one(tmp_path, monkeypatch, signum):
    """The signal handler raises Interrupted wherever the merge stands: here,
    while a shard's report is read."""

    def interrupted(path):
        raise Interrupted(signum)

    monkeypatch.setattr("conformance.engine.shards.load_shard_report", interrupted)
    out = tmp_path / "merged"
    _old_pass(out)
    shard = tmp_path / "s1"
    shard.mkdir()
    result = CliRunner().invoke(cli, ["merge-reports", str(out), str(shard)])
    assert result.exit_code == 128 + signum, result.output
    report = json.loads((out / "report.json").read_text())
    assert report["verdict"] == "interrupted" and report["exit_code"] == 128 + signum
    assert "PASS" not in (out / "summary.md").read_text()


def test_a_merge_that_fails_leaves_verdict_error(tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr("conformance.engine.shards.load_shard_report", lambda path: ({}, str(path)))
    monkeypatch.setattr("conformance.engine.shards.merge_reports", broken)
    out = tmp_path / "merged"
    _old_pass(out)
    shard = tmp_path / "s1"
    shard.mkdir()
    result = CliRunner().invoke(cli, ["merge-reports", str(out), str(shard)])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    report = json.loads((out / "report.json").read_text())
    assert report["verdict"] == "error" and "disk on fire" in json.dumps(report["problems"])


def test_out_dir_that_is_a_shard_is_refused_before_anything_is_removed(tmp_path):
    shard = tmp_path / "s1"
    _old_pass(shard)
    for named in (shard, shard / "report.json"):
        result = CliRunner().invoke(cli, ["merge-reports", str(shard), str(named)])
        assert result.exit_code == 2 and "report directory of a shard" in result.output
        assert json.loads((shard / "report.json").read_text())["verdict"] == "pass"


# ------------------------------------------------------------------ file:line, never an internal error

BAD_INDEXES = ["²", "¹0", "٣", "9" * 5000, "-1", "+1", " 1", "1_0", "0x1", "1e3", "", "99999999999999999999"]


def _spec_with_mutant(directory: Path, index: str) -> Path:
    """thread-jobs, its mutants file holding one mutant whose pointer has ``index`` for a list index."""
    import shutil

    shutil.copy(ROOT / "spec/thread-jobs.yaml", directory)
    shutil.copy(ROOT / "spec/thread-jobs.scenarios.yaml", directory)
    (directory / "mutants").mkdir(exist_ok=True)
    (directory / "mutants/thread-jobs.yaml").write_text(
        "spec: thread-jobs\nmutants:\n"
        "  - name: odd_pointer\n    description: a pointer part that is not an index\n"
        "    caught_by: {kind: invariant, subject: terminal_has_completion_time}\n    shortest: 2\n"
        f"    edits:\n      - at: {json.dumps(f'/operations/observe_outcome/steps/{index}/do/2/set/fields/completed_at')}\n"
        '        was: now\n        becomes: "null"\n',
        encoding="utf-8",
    )
    return directory / "thread-jobs.yaml"


@pytest.mark.parametrize("index", BAD_INDEXES)
def test_a_mutant_pointer_part_that_is_not_an_ascii_index_is_refused_at_its_line(tmp_path, index):
    from statemachines import SpecError, load_spec
    from statemachines.tools.spec_mutants import load_spec_mutants, mutated_spec

    spec = load_spec(str(_spec_with_mutant(tmp_path, index)))
    (mutant,) = load_spec_mutants(spec)
    with pytest.raises(SpecError) as caught:
        mutated_spec(spec, mutant)
    message = str(caught.value.problems[0])
    assert f"{tmp_path / 'mutants/thread-jobs.yaml'}:" in message and "is no index of the list there" in message
    assert len(message) < 1000  # a 5,000-digit part is shown shortened


def test_check_spec_mutants_with_a_bad_pointer_says_where(tmp_path):
    spec = _spec_with_mutant(tmp_path, "²")
    result = CliRunner().invoke(cli, ["check-spec", str(spec), "--mutants", "--depth", "1"])
    assert "Traceback" not in result.output and "internal error" not in result.output, result.output
    assert "mutants/thread-jobs.yaml:" in result.output and "is no index" in result.output


@pytest.mark.parametrize("part", ["²", "9" * 5000, "01", "-0", "1"])
def test_list_index_takes_ascii_digits_only(part):
    from statemachines.load.source import list_index

    expected = int(part) if part in ("01", "1") else None
    assert list_index(part, 5) == expected


IMPORT_ENDINGS = [
    "import sys\nsys.exit(3)\n",
    "raise SystemExit\n",
    "raise SystemExit('bye')\n",
    "raise KeyboardInterrupt\n",
    "raise GeneratorExit\n",
    "import os\nraise RecursionError\n",
]


@pytest.mark.parametrize("body", IMPORT_ENDINGS)
def test_a_module_whose_import_exits_is_an_adapter_load_error(tmp_path, monkeypatch, body):
    from conformance.adapters.python import resolve_target
    from conformance.errors import AdapterLoadError

    name = f"exits_on_import_{IMPORT_ENDINGS.index(body)}"
    (tmp_path / f"{name}.py").write_text(body)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(AdapterLoadError, match=f"importing '{name}' failed"):
        resolve_target(f"{name}:Adapter")


def test_a_spec_naming_a_program_module_as_its_reference_is_refused(tmp_path):
    """``lifecycle_references.async_cli.__main__`` calls sys.exit when imported:
    a spec naming it got an internal SystemExit. A ``__main__`` module is a
    program, never a reference a spec may name."""
    import shutil

    text = (ROOT / "spec/thread-jobs.yaml").read_text(encoding="utf-8")
    text = text.replace(
        "reference: lifecycle_references.thread_jobs:ReferenceAdapter",
        "reference: lifecycle_references.async_cli.__main__:main",
    )
    (tmp_path / "t.yaml").write_text(text, encoding="utf-8")
    shutil.copy(ROOT / "spec/thread-jobs.scenarios.yaml", tmp_path)
    result = CliRunner().invoke(cli, ["run", str(tmp_path / "t.yaml"), "--report-dir", str(tmp_path / "r")])
    assert result.exit_code == 2, result.output
    assert "internal error" not in result.output and "a spec cannot choose code" in result.output
    assert f"{tmp_path / 't.yaml'}:" in result.output  # file:line of implementations.reference
    assert json.loads((tmp_path / "r/report.json").read_text())["verdict"] == "error"


def test_the_kit_s_own_import_guard_lets_a_real_signal_through(tmp_path, monkeypatch):
    from conformance.adapters.python import resolve_target

    (tmp_path / "signalled_import.py").write_text(
        "import signal\nfrom conformance.engine.interrupts import Interrupted\nraise Interrupted(signal.SIGTERM)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(Interrupted):
        resolve_target("signalled_import:Adapter")


HUGE = "9" * 5000


@pytest.mark.parametrize("key", [f"job-{HUGE}", "job-٣", "job-²", f"{HUGE}", "job-" + "1" * 19])
def test_keys_an_implementation_issues_never_break_the_key_shapes(key):
    """Keys come from the implementation's answers: a 5,000-digit or
    non-ASCII number in one is a key like any other, never a ValueError."""
    from conformance.engine.key_shapes import near_miss, reshaped, shaped_key

    for pick in range(3):
        shaped = shaped_key([key, "job-7"], pick)
        assert shaped is None or isinstance(shaped, str)
        miss = near_miss([key], pick)
        assert miss is None or isinstance(miss, str)
    for value in (key[:-1], key[-1], f"0{key}", key.upper(), f"x{key}"):
        again = reshaped(value, key, "job-8")
        assert again is None or isinstance(again, str)


@pytest.mark.parametrize("path", [f"jobs[{HUGE}].id", "jobs[٣].id", "jobs[²]", "jobs[99999999999999999999]"])
def test_paths_with_odd_indexes_are_looked_up_not_crashed_on(path):
    from conformance.engine.compare import without_path

    answer = {"jobs": [{"id": "a"}]}
    assert without_path(answer, path) == answer

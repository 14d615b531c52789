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

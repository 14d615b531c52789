"""Where `conformance` keeps Hypothesis's working files (its table of Unicode
categories, its temporary files): in the user's cache directory, not under
``.hypothesis`` in the directory the command runs in
(``cli.entry.hypothesis_files_in_cache``)."""

import os
from pathlib import Path

import pytest
from cli_result import kit

from conformance.cli.entry import hypothesis_files_in_cache

pytestmark = pytest.mark.hypothesis  # the runs explore: tests/hypothesis_marker.py


def _run(cwd: Path, env: dict) -> None:
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        proc = kit("run", "thread-jobs", "--profile", "quick", "--no-scenarios", "--report-dir", "out", cwd=cwd)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_run_leaves_no_hypothesis_directory_where_it_runs_and_works_the_table_out_once(tmp_path):
    cache, here = tmp_path / "cache", tmp_path / "project"
    here.mkdir()
    _run(here, {"XDG_CACHE_HOME": str(cache), "CONFORMANCE_WORKERS": "2"})  # the workers too
    assert sorted(p.name for p in here.iterdir()) == ["out"]
    tables = list((cache / "lifecycle-conformance" / "hypothesis").rglob("charmap.json.gz"))
    assert len(tables) == 1, list(cache.rglob("*"))


def test_hypothesis_storage_directory_still_decides(tmp_path):
    chosen, here = tmp_path / "chosen", tmp_path / "project"
    here.mkdir()
    _run(here, {"XDG_CACHE_HOME": str(tmp_path / "cache"), "HYPOTHESIS_STORAGE_DIRECTORY": str(chosen)})
    assert list(chosen.rglob("charmap.json.gz")) and not (tmp_path / "cache").exists()
    assert sorted(p.name for p in here.iterdir()) == ["out"]


def test_without_a_writable_cache_a_temporary_directory_is_used(tmp_path, monkeypatch):
    (tmp_path / "file").write_text("not a directory", encoding="utf-8")
    environ = {"XDG_CACHE_HOME": str(tmp_path / "file")}
    used = hypothesis_files_in_cache(environ)
    assert used is not None and used.is_dir() and not used.is_relative_to(tmp_path)
    assert environ["HYPOTHESIS_STORAGE_DIRECTORY"] == str(used)
    used.rmdir()  # the command removes it at exit

    environ = {"HYPOTHESIS_STORAGE_DIRECTORY": "x", "XDG_CACHE_HOME": str(tmp_path / "cache")}
    assert hypothesis_files_in_cache(environ) is None and environ["HYPOTHESIS_STORAGE_DIRECTORY"] == "x"
    environ = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    assert hypothesis_files_in_cache(environ) == tmp_path / "cache" / "lifecycle-conformance" / "hypothesis"
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # a relative XDG_CACHE_HOME is ignored, as XDG says
    assert hypothesis_files_in_cache({"XDG_CACHE_HOME": "relative"}) == (
        tmp_path / "home" / ".cache" / "lifecycle-conformance" / "hypothesis"
    )

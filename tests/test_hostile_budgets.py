"""Files a user receives, round 4 (issue 64, items 2 and 3): every command
that explores, loads or compares a received spec is bounded by a budget of
its own, and a revision reaches git only as a verified commit.

Each class of the issue has its case: a scope wider than the kit's
ceilings, one state whose expansion alone never ends, one fragment listed
many times, a whole spec over its caps, a deviation's `when` that is
expensive at every evaluation, a forged shard naming such a spec, a hostile
``--rev`` and an alias bomb in git. Bounded by counts; where a budget is
time, a small one is passed to the kit and only the exit code and the
message are checked."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from conformance.cli import cli
from statemachines import SpecError, load_spec
from statemachines.load.source import MAX_INCLUDES, MAX_WHOLE_SPEC_BYTES, MAX_WHOLE_SPEC_NODES
from statemachines.tools.check import check_spec, scope_of
from statemachines.tools.search_budget import CEILINGS, SearchBudget

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "spec"
WIDE_SCOPE = """check:
  scope:
    parameters: {retention_limit: 1, max_bytes: 4, max_lines: 2}
    pools: {thread_id: [%(threads)s], tool_call_id: [%(calls)s], tool_name: [search]}
    args:
      complete_sync: {result: [done]}
      start_job: {job_id: [%(jobs)s]}
      cancel_job: {requested_by: [user]}
    skip: [complete_sync, observe_progress, observe_llm_error, list_jobs, inspect_job, retry_job, observe_outcome]
    max_depth: 1000
    max_records: 100
    max_states: 1000000000
"""


def kit(*args, cwd=ROOT, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k != "CONFORMANCE_DEBUG"}
    full.update({"COLUMNS": "1000", **(env or {})})
    return subprocess.run(
        [sys.executable, "-P", "-m", "conformance.cli", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=full,
        timeout=timeout,
    )


def clean(text: str) -> str:
    assert "Traceback" not in text and "internal error" not in text and "MemoryError" not in text, text
    return " ".join(text.split())


def wide_thread_jobs(where: Path, values: int = 1000) -> Path:
    """thread-jobs with a check.scope far over the kit's ceilings."""
    where.mkdir(parents=True, exist_ok=True)
    for name in ("thread-jobs.yaml", "thread-jobs.scenarios.yaml"):
        shutil.copy(SPEC / name, where / name)
    (where / "mutants").mkdir(exist_ok=True)
    shutil.copy(SPEC / "mutants" / "thread-jobs.yaml", where / "mutants" / "thread-jobs.yaml")
    path = where / "thread-jobs.yaml"
    text = path.read_text()
    start, end = text.index("\ncheck:\n") + 1, text.index("\nlint:\n") + 1
    scope = WIDE_SCOPE % {
        "threads": ", ".join(f"t{i}" for i in range(values)),
        "calls": ", ".join(f"c{i}" for i in range(values)),
        "jobs": ", ".join(f"j{i}" for i in range(values)),
    }
    path.write_text(text[:start] + scope + "\n" + text[end:])
    return path


# ------------------------------------------------------------ a received scope: the kit's ceilings
def test_a_received_scope_cannot_raise_the_kits_ceilings(tmp_path):
    spec = load_spec(wide_thread_jobs(tmp_path))
    scope, problems = scope_of(spec)
    assert problems == []
    assert (scope.max_states, scope.max_depth, scope.max_records) == (
        CEILINGS["max_states"],
        CEILINGS["max_depth"],
        CEILINGS["max_records"],
    )
    assert len(scope.pools["thread_id"]) == len(scope.pools["tool_call_id"]) == CEILINGS["values"]
    said = " ".join(scope.ceilinged)
    assert "check.scope.max_states 1,000,000,000 is over the kit's ceiling" in said and "--max-states" in said
    assert "pool thread_id lists 1,000 values" in said and "--max-values" in said
    # The user raises them by naming a bound.
    mine, _ = scope_of(spec, {"max_states": 10**9, "max_depth": 50, "max_values": 1000})
    assert (mine.max_states, mine.max_depth, len(mine.pools["thread_id"])) == (10**9, 50, 1000)


def test_max_states_holds_inside_the_expansion_of_one_state(tmp_path):
    """A billion moves from the first state (job ids named in the scope are
    not interchangeable, so each makes a state of its own): the bound on
    states stops the search within it, not after it."""
    spec = load_spec(wide_thread_jobs(tmp_path))
    report = check_spec(spec, {"max_states": 3, "max_values": 1000})
    assert report.stats.states <= 3 and report.stats.stopped == "max_states 3", report.stats
    assert report.stats.transitions < 1000, report.stats  # the first state alone has 10**9 start_job moves
    assert report.stats.exhausted is None  # a bound the user named, not a budget that ran out


def test_one_state_that_never_finishes_expanding_meets_the_time_budget(tmp_path):
    spec = load_spec(wide_thread_jobs(tmp_path))
    budget = SearchBudget(time_limit_s=0.3)
    report = check_spec(spec, {"max_values": 1000, "max_depth": 1}, budget=budget)
    assert report.stats.exhausted == "its time limit of 0.3 s", report.stats
    assert not report.stats.complete and report.stats.states >= 1


def test_check_spec_on_a_wide_scope_exits_2_with_what_it_found_and_a_progress_line(tmp_path):
    path = wide_thread_jobs(tmp_path)
    proc = kit(
        "check-spec", path, "--time-limit", "1", "--max-values", "1000", env={"CONFORMANCE_PROGRESS_INTERVAL": "0.2"}
    )
    text = clean(proc.stdout + proc.stderr)
    assert proc.returncode == 2, text
    assert "the search ran out of its time limit of 1 s; what it found so far is shown" in text, text
    assert "states/s); stopped at its time limit" in text, text
    assert "… check-spec" in proc.stderr and " states, " in proc.stderr, proc.stderr  # the progress line


def test_check_spec_json_says_the_ceilings_and_what_ran_out(tmp_path):
    path = wide_thread_jobs(tmp_path)
    result = CliRunner().invoke(cli, ["check-spec", str(path), "--time-limit", "0.5", "--json"])
    assert result.exit_code == 2, result.output
    [found] = json.loads(result.stdout)
    assert found["exhausted"] == "its time limit of 0.5 s" and found["ceilinged"], found
    assert found["scope"]["max_states"] == CEILINGS["max_states"]


def test_lint_search_of_a_wide_scope_is_bounded_and_exits_2(tmp_path, monkeypatch):
    import statemachines.tools.lint as lint

    monkeypatch.setattr(lint, "SEARCH_TIME_LIMIT_S", 0.3)
    path = wide_thread_jobs(tmp_path, values=32)
    report = lint.lint_spec(path)
    assert report.exhausted == "its time limit of 0.3 s" and report.problems == []
    result = CliRunner().invoke(cli, ["lint", str(path)])
    assert result.exit_code == 2 and "the search ran out of its time limit of 0.3 s" in clean(result.output)


def test_diff_of_a_wide_scope_ends_within_its_time_limit_with_the_partial_markdown(tmp_path):
    new = wide_thread_jobs(tmp_path / "new")
    out = tmp_path / "diff.md"
    result = CliRunner().invoke(
        cli, ["diff", str(SPEC / "thread-jobs.yaml"), str(new), "--time-limit", "0.5", "--output", str(out)]
    )
    text = clean(result.output)
    assert result.exit_code == 2, text
    assert "diff: the search ran out of its time limit of 0.5 s" in text
    markdown = out.read_text()
    assert "### Behaviour that changed" in markdown and "the list below is partial" in markdown
    assert "over the kit's ceiling" in markdown  # the scope note


# ------------------------------------------------------------ loading: once per file, whole-spec caps
def _spec_including(tmp_path: Path, entries: list[str]) -> Path:
    for name in ("thread-jobs.yaml", "thread-jobs.scenarios.yaml"):
        shutil.copy(SPEC / name, tmp_path / name)
    path = tmp_path / "thread-jobs.yaml"
    text = path.read_text()
    listed = "include: [" + ", ".join(json.dumps(e) for e in entries) + "]\n"
    path.write_text(text.replace("include: [thread-jobs.scenarios.yaml]\n", listed, 1))
    assert listed in path.read_text()
    return path


@pytest.fixture
def parses(monkeypatch) -> list[str]:
    """The files the spec loader parses, in order."""
    import statemachines.model.compiler as compiler

    seen: list[str] = []
    real = compiler.load_yaml_text

    def counted(text, file, *args, **kwargs):
        seen.append(file)
        return real(text, file, *args, **kwargs)

    monkeypatch.setattr(compiler, "load_yaml_text", counted)
    return seen


def test_a_fragment_listed_100_times_is_parsed_once(tmp_path, parses):
    path = _spec_including(tmp_path, ["thread-jobs.scenarios.yaml"] * 100)
    with pytest.raises(SpecError) as raised:
        load_spec(path)
    assert len(parses) == 2, parses  # the spec and its one fragment
    repeats = [p for p in raised.value.problems if "names the same file as include entry 1" in p.message]
    assert len(repeats) == 99 and all(p.file == str(path) and p.line for p in repeats)


def test_an_include_list_over_the_cap_reads_nothing(tmp_path, parses):
    path = _spec_including(tmp_path, [f"f{i}.yaml" for i in range(70_000)])
    with pytest.raises(SpecError, match=f"lists 70,000 entries, over the limit of {MAX_INCLUDES}"):
        load_spec(path)
    assert parses == [str(path)]


def _fragment(path: Path, values: int) -> None:
    path.write_text("definitions:\n  " + path.stem + ": [" + ", ".join(["0"] * values) + "]\n")


def test_fragments_over_the_whole_spec_values_are_refused(tmp_path):
    per = MAX_WHOLE_SPEC_NODES // 3
    names = [f"big{i}.yaml" for i in range(4)]
    for name in names:
        _fragment(tmp_path / name, per)
    path = _spec_including(tmp_path, ["thread-jobs.scenarios.yaml", *names])
    with pytest.raises(SpecError) as raised:
        load_spec(path)
    said = [p.message for p in raised.value.problems]
    assert any(f"expand to more than {MAX_WHOLE_SPEC_NODES} values in all" in m for m in said), said[:5]


def test_fragments_over_the_whole_spec_bytes_are_refused(tmp_path):
    names = [f"long{i}.yaml" for i in range(5)]
    for name in names:
        (tmp_path / name).write_text("definitions:\n  " + name[:-5] + ": '" + "x" * 1_900_000 + "'\n")
    path = _spec_including(tmp_path, ["thread-jobs.scenarios.yaml", *names])
    with pytest.raises(SpecError) as raised:
        load_spec(path)
    said = " ".join(p.message for p in raised.value.problems)
    assert f"over {MAX_WHOLE_SPEC_BYTES:,} bytes in all" in said, said[:400]


# ------------------------------------------------------------ expression cost per command
SLOW_WHEN = "size(indices(repeat('x', 30000)).filter(i, i % 7 == 0)) < 0"


@pytest.mark.hypothesis  # the run it starts explores
def test_an_expensive_avoid_when_ends_a_run_with_exit_2_and_a_report(tmp_path):
    deviations = tmp_path / "deviations.yaml"
    deviations.write_text(
        "deviations: 1\nspec: thread-jobs\nentries:\n  - id: SLOW\n    reason: hostile\n"
        f'    avoid:\n      operation: start_job\n      when: "{SLOW_WHEN}"\n'
    )
    proc = kit(
        "run",
        "spec/thread-jobs.yaml",
        "--profile",
        "quick",
        "--deviations",
        deviations,
        "--report-dir",
        tmp_path / "r",
        env={"CONFORMANCE_EXPRESSION_BUDGET_S": "0.3"},
    )
    text = clean(proc.stdout + proc.stderr)
    assert proc.returncode == 2, text
    assert "spent its cost budget" in text, text
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert report["verdict"] == "error"


def test_the_expression_budget_is_per_command_not_per_evaluation():
    from statemachines import RunCostError
    from statemachines.language.expressions import compile_expression, run_cost_budget

    slow = compile_expression(SLOW_WHEN, "deviations.yaml:7")
    evaluated = []
    with run_cost_budget(0.05), pytest.raises(RunCostError, match="deviations.yaml:7: .*spent its cost budget"):
        while len(evaluated) < 10_000:  # each evaluation is within its own budget
            evaluated.append(slow.evaluate({}))
    assert len(evaluated) >= 1 and not any(evaluated)
    assert slow.evaluate({}) is False  # outside a command: each evaluation's own budget only


def _heavy_spec(where: Path, invariants: int = 40) -> Path:
    """thread-jobs with constant invariants that each cost most of an evaluation's budget."""
    for name in ("thread-jobs.yaml", "thread-jobs.scenarios.yaml"):
        shutil.copy(SPEC / name, where / name)
    spec = where / "thread-jobs.yaml"
    added = "".join(
        f'  - id: heavy{i}\n    description: costly\n    check: "{SLOW_WHEN.replace("< 0", ">= 0")}"\n'
        for i in range(invariants)
    )
    spec.write_text(spec.read_text().replace("\ninvariants:\n", "\ninvariants:\n" + added, 1))
    return spec


def test_merge_reports_is_bounded_for_a_heavy_spec_a_forged_shard_ships(tmp_path):
    shard = tmp_path / "s1"
    proc = kit(
        "run", "spec/thread-jobs.yaml", "--no-stateful", "--scenario", "N1", "--shard", "1/1", "--report-dir", shard
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    _heavy_spec(shard)
    report = json.loads((shard / "report.json").read_text())
    report["spec"]["path"] = "s1/thread-jobs.yaml"
    (shard / "report.json").write_text(json.dumps(report))
    merged = kit("merge-reports", "out", "s1", cwd=tmp_path, env={"CONFORMANCE_EXPRESSION_BUDGET_S": "0.3"})
    text = clean(merged.stdout + merged.stderr)
    assert merged.returncode == 2, text
    out = json.loads((tmp_path / "out" / "report.json").read_text())
    assert out["verdict"] == "error" and any("s1/thread-jobs.yaml" in p["message"] for p in out["problems"]), out


# ------------------------------------------------------------ diff --rev: git
pytestmark_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _repo(tmp_path: Path) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    for name in ("thread-jobs.yaml", "thread-jobs.scenarios.yaml"):
        shutil.copy(SPEC / name, tmp_path / name)
    _commit(tmp_path)
    return tmp_path / "thread-jobs.yaml"


def _commit(where: Path) -> None:
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "spec"]):
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(where), *args],
            check=True,
            capture_output=True,
        )


@pytestmark_git
@pytest.mark.parametrize(
    "rev",
    [
        "--output={out}/w",
        "-o{out}/w",
        "--output={out}/w^{{commit}}",
        "HEAD --output={out}/w",
        "HEAD:thread-jobs.yaml",
        "",
    ],
)
def test_a_hostile_rev_is_refused_before_git_takes_it_as_an_option(tmp_path, rev):
    """``git show --output=OUT/w:./thread-jobs.yaml`` wrote a file into the
    directory ``OUT/w:.`` before revisions were verified."""
    path = _repo(tmp_path / "repo")
    out = tmp_path / "out"
    (out / "w:.").mkdir(parents=True)
    result = CliRunner().invoke(cli, ["diff", str(path), f"--rev={rev.format(out=out)}", "--no-behaviour"])
    text = clean(result.output)
    assert result.exit_code == 2, text
    assert "is not a revision" in text or "names no commit" in text, text
    assert [p for p in out.rglob("*") if not p.is_dir()] == []


@pytestmark_git
def test_an_alias_bomb_in_the_old_version_is_refused_by_the_caps(tmp_path):
    path = _repo(tmp_path)
    bomb = ["bomb_a: &a [x, x, x, x, x, x, x, x, x, x]"]
    bomb += [f"bomb_{c}: &{c} [{', '.join([f'*{p}'] * 10)}]" for p, c in zip("abcdefgh", "bcdefghi")]
    main = path.read_text()
    path.write_text("\n".join(bomb) + "\n" + main)
    _commit(tmp_path)
    path.write_text(main)
    result = CliRunner().invoke(cli, ["diff", str(path), "--rev", "HEAD", "--no-behaviour"])
    text = clean(result.output)
    assert result.exit_code == 2 and "values (YAML aliases repeated" in text and "@HEAD" in text, text


@pytestmark_git
def test_thousands_of_include_entries_in_git_spawn_no_git_process_each(tmp_path, monkeypatch):
    import conformance.spec_revision as revision

    path = _repo(tmp_path)
    main = path.read_text()
    entries = ", ".join(f"f{i}.yaml" for i in range(3000))
    path.write_text(main.replace("include: [thread-jobs.scenarios.yaml]", f"include: [{entries}]", 1))
    _commit(tmp_path)
    path.write_text(main)
    started: list[list[str]] = []
    real = subprocess.Popen

    def counted(args, *rest, **kwargs):
        started.append(list(args))
        return real(args, *rest, **kwargs)

    monkeypatch.setattr(revision.subprocess, "Popen", counted)
    with pytest.raises(SpecError, match=f"lists 3,000 files, over the limit of {MAX_INCLUDES}"):
        revision.load_spec_at_revision(path, "HEAD")
    assert len(started) == 2, started  # rev-parse, then the spec itself


@pytestmark_git
def test_a_fragment_listed_twice_in_git_is_read_once(tmp_path, monkeypatch):
    import conformance.spec_revision as revision

    path = _repo(tmp_path)
    main = path.read_text()
    twice = "include: [thread-jobs.scenarios.yaml, thread-jobs.scenarios.yaml]"
    path.write_text(main.replace("include: [thread-jobs.scenarios.yaml]", twice, 1))
    _commit(tmp_path)
    shows: list[str] = []
    real = revision._show

    def counted(directory, commit, rev, name):
        shows.append(name)
        return real(directory, commit, rev, name)

    monkeypatch.setattr(revision, "_show", counted)
    with pytest.raises(SpecError, match="names the same file as include entry 1"):
        revision.load_spec_at_revision(path, "HEAD")
    assert shows == ["thread-jobs.yaml", "thread-jobs.scenarios.yaml"]


def test_a_runs_search_of_a_wide_scope_is_bounded_in_moves(tmp_path):
    """A run counts transition pairs over the spec's scope (search_counts):
    its bound is in moves too, so one wide state whose moves all lead to
    one state (the pools' values are interchangeable) cannot hold the run."""
    from statemachines.tools.check import MOVES_PER_STATE, search_counts

    path = wide_thread_jobs(tmp_path, values=32)
    text = path.read_text().replace("tool_name: [search]", "tool_name: [" + ", ".join(f"n{i}" for i in range(32)) + "]")
    others = "start_job, begin_turn, turn_boundary, cancel_job, restart"
    text = text.replace("skip: [complete_sync, ", f"skip: [{others}, ", 1)
    path.write_text(text)
    counts = search_counts(load_spec(path), max_states=3)
    taken = sum(counts["outcomes"].values())
    assert 2 * MOVES_PER_STATE < taken <= 3 * MOVES_PER_STATE + 1, taken  # the first state alone has 32**3

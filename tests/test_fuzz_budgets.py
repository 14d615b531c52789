"""Property-based fuzzing of what a received spec's scope and a typed
revision may ask for (issue 64, items 2, 3 and 6): whatever a spec's
``check.scope`` holds, the search's scope stays within the kit's ceilings
(or the spec is refused with a problem); whatever ``--rev`` holds, git
gets a verified commit id or nothing, and no file is written."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from statemachines import SpecError, load_spec
from statemachines.tools.check import scope_of
from statemachines.tools.search_budget import CEILINGS

pytestmark = pytest.mark.hypothesis  # drives Hypothesis: tests/hypothesis_marker.py

ROOT = Path(__file__).resolve().parents[1]
FUZZ = settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
SPEC = load_spec(ROOT / "spec" / "thread-jobs.yaml")

counts = st.one_of(st.integers(-5, 50), st.integers(10**5, 2**63 - 1), st.booleans(), st.text(max_size=3))
value_lists = st.one_of(
    st.lists(st.text(min_size=1, max_size=4), max_size=60),
    st.integers(0, 5000).map(lambda n: [f"v{i}" for i in range(n)]),
)
scopes = st.fixed_dictionaries(
    {},
    optional={
        "max_depth": counts,
        "max_records": counts,
        "max_states": counts,
        "pools": st.fixed_dictionaries({}, optional={"thread_id": value_lists, "tool_call_id": value_lists}),
        "advance_ms": st.lists(st.integers(0, 10**6), max_size=80),
        "unknown_keys": value_lists,
        "generated": value_lists,
        "args": st.fixed_dictionaries({}, optional={"start_job": st.fixed_dictionaries({"job_id": value_lists})}),
    },
)


@FUZZ
@given(raw=scopes)
def test_a_received_scope_stays_within_the_kits_ceilings(raw):
    scope, problems = scope_of(SPEC, raw=raw)
    if problems:
        return  # refused, with what is wrong (a negative bound, a word for a number)
    assert scope.max_depth <= CEILINGS["max_depth"] and scope.max_records <= CEILINGS["max_records"]
    assert scope.max_states <= CEILINGS["max_states"]
    lists = [*scope.pools.values(), scope.advance_ms, scope.unknown_keys, scope.generated]
    lists += [values for op in scope.args.values() for values in op.values()]
    assert all(len(values) <= CEILINGS["values"] for values in lists)
    for name in ("max_depth", "max_records", "max_states"):
        asked = raw.get(name)
        if isinstance(asked, int) and not isinstance(asked, bool) and asked > CEILINGS[name]:
            assert any(note.startswith(f"check.scope.{name} ") for note in scope.ceilinged)  # the cut is said


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    where = tmp_path_factory.mktemp("repo")
    (where / "a.yaml").write_text("format: lifecycle-spec/1\n")
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "a"]):
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(where), *args],
            check=True,
            capture_output=True,
        )
    return where


revisions = st.one_of(
    st.text(max_size=30),
    st.sampled_from(["-", "--", "--output=", "-o", "--end-of-options", "HEAD", "HEAD~0", "@", "HEAD^{tree}"]).flatmap(
        lambda head: st.text(max_size=12).map(lambda tail: head + tail)
    ),
)


@FUZZ
@given(rev=revisions)
def test_a_typed_revision_reaches_git_only_as_a_verified_commit(repo, rev):
    from conformance.spec_revision import verified_commit

    def files() -> list[Path]:  # what git could write to: beside the repository, in it, here
        return sorted(p for p in [*repo.parent.rglob("*"), *Path.cwd().iterdir()] if ".git" not in p.parts)

    before = files()
    try:
        commit = verified_commit(repo, rev)
    except SpecError as exc:
        assert exc.problems and "--rev" in exc.problems[0].message
    else:
        assert not rev.startswith("-") and len(commit) in (40, 64) and set(commit) <= set("0123456789abcdef")
    assert files() == before

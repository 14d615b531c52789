"""Pools seed the draw; the schema bounds it (issue 63): pool-drawn arguments
also get near misses of their values and values of their JSON Schema, each
within that schema."""

import unicodedata
from pathlib import Path

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conformance.engine.key_shapes import reshaped, value_variants
from conformance.engine.pool_draws import FILE_NAME_CHARS
from conformance.engine.profiles import BEYOND_POOLS
from conformance.engine.reduce import _renamed
from conformance.engine.stateful import Explorer
from statemachines import file_name_arguments, load_spec, resolve_parameters
from statemachines.tools.limits import strip_hints

pytestmark = pytest.mark.hypothesis  # drives Hypothesis: tests/hypothesis_marker.py

ROOT = Path(__file__).resolve().parent.parent
ID_SCHEMA = {"type": "string", "pattern": "^[A-Za-z0-9_.-]{1,16}$"}


def test_near_misses_of_a_pool_value_are_the_shapes_a_lenient_comparison_confuses():
    found = value_variants("build", lambda v: True)
    assert found[:3] == ["BUILD", "buildé", "builde\u0301"]  # another case; composed and decomposed
    assert unicodedata.normalize("NFC", found[2]) == found[1] != found[2]
    assert "ｂｕｉｌｄ" in found and unicodedata.normalize("NFKC", "ｂｕｉｌｄ") == "build"  # full width
    assert {" build", "build ", "\tbuild", "./build", "x/build"} <= set(found)
    assert found[-1] == ("build" * 13)[:64]  # the longest of the lengths tried that is allowed
    assert "build" not in found
    # a value with composed letters gets its other forms
    assert "Cafe\u0301" in value_variants("Café", lambda v: True)


def test_near_misses_stay_inside_the_schema():
    allowed = jsonschema.Draft202012Validator(ID_SCHEMA).is_valid
    # a preferred id: another case and the 16 characters its pattern allows, nothing else
    assert value_variants("build", allowed) == ["BUILD", "buildbuildbuildb"]
    assert value_variants("build", lambda v: True, paths=False, lengths=(8,))[-1] == "buildbui"
    assert not any("/" in v for v in value_variants("build", lambda v: True, paths=False))


def test_a_replay_renames_a_pool_value_s_near_misses_along():
    names = {"build-2": "build-3"}
    sent = ["BUILD-2", "build-2\u00e9", "build-2e\u0301", "ｂｕｉｌｄ－２", "\tbuild-2", "build-2build-2bu"]
    assert _renamed(sent, names) == [
        "BUILD-3",
        "build-3\u00e9",
        "build-3e\u0301",
        "ｂｕｉｌｄ－３",
        "\tbuild-3",
        "build-3build-3bu",
    ]
    assert reshaped("Cafe\u0301", "Café", "Thé") == "The\u0301"  # another normalisation form
    assert reshaped("zzz", "build-2", "build-3") is None


def _pooled(explorer: Explorer, op: str, prop: str):
    _, names, kinds = explorer.args_plan(op)
    kind = kinds[names.index(prop)]
    return kind if kind[0] == "pool" else kind[2]


def test_pool_drawn_arguments_leave_the_pool_within_their_schema():
    spec = load_spec(ROOT / "spec" / "async-jobs.yaml")
    explorer = Explorer(spec, spec.default_parameters(), concurrent=False, beyond_pools=50)
    schemas = spec.operations["start_job"].args_schema["properties"]
    seen: dict[str, set] = {"id": set(), "label": set(), "duration_ms": set()}
    valid = {prop: jsonschema.Draft202012Validator(strip_hints(schemas[prop])).is_valid for prop in seen}
    kinds = {prop: _pooled(explorer, "start_job", prop) for prop in seen}
    drawers = {prop: explorer.beyond.drawer(kind[2]) for prop, kind in kinds.items()}

    @settings(max_examples=150, database=None, derandomize=True, deadline=None)
    @given(st.data())
    def draws(data):
        explorer.begin_example()
        for _ in range(4):
            for prop in seen:
                kind = kinds[prop]
                value = explorer.beyond.resolve(drawers[prop](data.conjecture_data), kind[1], kind[2])
                assert valid[prop](value), (prop, value)
                seen[prop].add(value)

    draws()
    pools = spec.exploration.pools
    assert "BUILD" in seen["id"] and "builde\u0301" in seen["label"]
    for prop, pool in (("id", "preferred_id"), ("label", "label"), ("duration_ms", "duration_ms")):
        assert seen[prop] - set(pools[pool]), prop  # values beyond the pool
        assert set(pools[pool]) & seen[prop], prop  # and the pool's own
    counts = explorer.beyond.report()
    assert counts["share"] == 50 and counts["near_miss"] > 0 and counts["schema"] > 0 and counts["pool"] > 0


def test_without_a_share_the_pools_values_alone_are_drawn():
    spec = load_spec(ROOT / "spec" / "async-jobs.yaml")
    explorer = Explorer(spec, spec.default_parameters(), concurrent=False, beyond_pools=0)
    kind = _pooled(explorer, "start_job", "label")
    drawer = explorer.beyond.drawer(kind[2])
    values = set()

    @settings(max_examples=100, database=None, derandomize=True, deadline=None)
    @given(st.data())
    def draws(data):
        values.add(explorer.beyond.resolve(drawer(data.conjecture_data), *kind[1:]))

    draws()
    assert values == set(spec.exploration.pools["label"])


def test_an_argument_in_a_file_name_is_never_a_path_nor_long():
    spec = load_spec(ROOT / "spec" / "thread-jobs.yaml")
    assert ("start_job", "tool_name") not in file_name_arguments(spec, spec.default_parameters())
    params, _ = resolve_parameters(spec, "runtime-code")
    assert ("start_job", "tool_name") in file_name_arguments(spec, params)  # spill_file_name: {tool_name}-...
    explorer = Explorer(spec, params, concurrent=False, beyond_pools=50)
    kind = _pooled(explorer, "start_job", "tool_name")
    assert kind[2].file_name
    variants = explorer.beyond._variants_for("search", kind[2])
    assert "SEARCH" in variants and not any("/" in v or len(v) > FILE_NAME_CHARS for v in variants)
    thread = _pooled(explorer, "start_job", "thread_id")
    assert "./t1" in explorer.beyond._variants_for("t1", thread[2])  # a thread id names no file


def test_the_share_is_bounded_on_the_command_line():
    from click.testing import CliRunner

    from conformance.cli.common import cli

    result = CliRunner().invoke(cli, ["run", "async-jobs", "--beyond-pools", "80"])
    assert result.exit_code == 2 and "--beyond-pools" in result.output


def test_the_exploration_line_says_what_left_the_pools():
    from conformance.reporting._format import beyond_pools_line

    line = beyond_pools_line({"share": 12, "pool": 90, "near_miss": 7, "schema": 3})
    assert line == "beyond pools 12 %: 7 near misses and 3 schema values of 100 pool draws"
    assert beyond_pools_line({}) is None and beyond_pools_line(None) is None


@pytest.mark.slow
@pytest.mark.parametrize("share", [None, 0, 12])
def test_the_share_is_set_per_run_and_reported(tmp_path, share):
    from conformance.engine.runner import RunConfig, run_conformance

    report = run_conformance(
        RunConfig(
            spec_path=str(ROOT / "spec" / "async-jobs.yaml"),
            adapter_options={"profile": "job-manager"},
            profile="quick",
            scenarios=False,
            report_dir=str(tmp_path),
            beyond_pools=share,
        )
    )
    stateful = report["stateful"]
    assert stateful["verdict"] == "pass", stateful.get("failure")
    beyond = stateful["beyond_pools"]
    assert beyond["share"] == (BEYOND_POOLS if share is None else share)
    assert beyond["pool"] > 0
    if beyond["share"] == 0:
        assert beyond["near_miss"] == beyond["schema"] == 0
    else:
        assert beyond["near_miss"] > 0
    summary = (tmp_path / "summary.md").read_text()
    assert f"beyond pools {beyond['share']} %" in summary


def test_a_run_in_parts_sums_each_part_s_draws_beyond_the_pools():
    from conformance.engine.shards import combine_stateful

    parts = [
        {
            "verdict": "pass",
            "examples": 5,
            "steps": 50,
            "part": {"index": index, "count": 2, "seed": index},
            "beyond_pools": {"share": 12, "pool": pool, "near_miss": near, "schema": drawn},
        }
        for index, pool, near, drawn in ((1, 80, 6, 3), (2, 70, 5, 2))
    ]
    combined = combine_stateful(parts, seed=1)
    assert combined["beyond_pools"] == {"share": 12, "pool": 150, "near_miss": 11, "schema": 5}
    assert "beyond_pools" not in combine_stateful([{**p, "beyond_pools": {}} for p in parts], seed=1)

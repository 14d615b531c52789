"""docs/real-systems.md shows, per runtime and version, what a run shows
today: how many scenarios apply under each profile is read from the specs
here, so a spec change that leaves a figure behind fails (issue 62). The
pass and fail figures come from runs against the upstream packages, which
CI cannot reach; what can be checked is that they add up, and that every
scenario listed as failing applies under the profile and exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conformance.engine.scenarios import not_applicable_ids
from statemachines import load_spec
from statemachines.load.params import resolve_parameters

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "real-systems.md"
SPECS = ("async-jobs", "thread-jobs", "process-sessions")


def _rows() -> list[list[str]]:
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## What was checked, against which upstream version", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "`" in line.split("|")[2]]
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows]


def _spec_with(profile: str):
    for name in SPECS:
        spec = load_spec(ROOT / "spec" / f"{name}.yaml")
        if profile in spec.profiles:
            return spec
    raise AssertionError(f"docs/real-systems.md names profile {profile!r}, which no bundled spec has")


ROWS = _rows()


def test_the_table_lists_every_real_systems_profile():
    profiles = {row[1].strip("`") for row in ROWS}
    assert {"oh-my-pi", "oh-my-pi-18", "psi-runtime", "defect", "openclaw"} <= profiles


@pytest.mark.parametrize("row", ROWS, ids=[f"{r[1].strip('`')}:{r[0][:40]}" for r in ROWS])
def test_the_scenario_figures_are_todays(row):
    profile, figures = row[1].strip("`"), row[3]
    spec = _spec_with(profile)
    params, _ = resolve_parameters(spec, profile, None)
    not_applicable = set(not_applicable_ids(spec, params, {"concurrent": True}))
    applies = [s.id for s in spec.scenarios if s.id not in not_applicable]
    said_apply = re.search(r"(\d+) apply", figures)
    said_not = re.search(r"(\d+) not applicable", figures)
    assert said_apply and said_not, f"{profile}: no 'N apply; M not applicable' in {figures!r}"
    assert int(said_apply.group(1)) == len(applies), f"{profile}: {len(applies)} scenarios apply today"
    assert int(said_not.group(1)) == len(not_applicable), f"{profile}: {len(not_applicable)} are not applicable today"
    run = re.search(r"(\d+) pass, (\d+) fails? \(([^)]*)\)", figures)
    if run:
        passed, failed, ids = int(run.group(1)), int(run.group(2)), [i.strip() for i in run.group(3).split(",")]
        assert passed + failed == len(applies)
        assert len(ids) == failed and len(set(ids)) == failed
        assert set(ids) <= set(applies), f"{profile}: listed as failing but not applicable: {set(ids) - set(applies)}"

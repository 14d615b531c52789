"""The oh-my-pi-18 profile's readings (issue 62), each checked both ways:
the reference under the profile passes the scenarios of 18.x's readings,
and with the other value of each parameter declared it passes the
scenarios of that other reading, which the profile leaves not applicable."""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.engine.runner import RunConfig, run_conformance

ROOT = Path(__file__).resolve().parent.parent
SPEC = str(ROOT / "spec" / "async-jobs.yaml")

THE_PROFILES_READINGS = {"JM-W6", "JM-W8", "JM-R6", "JM-W10", "JM-W12", "JM-R7"}
THE_OTHER_READINGS = {"JM-W7", "JM-W8", "JM-W9", "JM-W11", "JM-W13"}
OTHER_VALUES = {
    "consumed_retention_ms": "-1",
    "consumed_text": "kept",
    "delivery_order": "queue",
    "cancel_eviction": "on_cancel",
    "preferred_ids": "false",
}


@pytest.mark.parametrize(
    "declared, expected",
    [({}, THE_PROFILES_READINGS), (OTHER_VALUES, THE_OTHER_READINGS)],
    ids=["oh-my-pi-18", "the-other-values"],
)
def test_each_reading_is_checked_on_its_side(tmp_path, declared, expected):
    report = run_conformance(
        RunConfig(
            spec_path=SPEC,
            adapter_options={"profile": "oh-my-pi-18", **declared},
            stateful=False,
            report_dir=str(tmp_path),
        )
    )
    verdicts = {s["id"]: s["verdict"] for s in report["scenarios"]}
    assert report["verdict"] == "pass", [s for s in report["scenarios"] if s["verdict"] != "pass"]
    assert expected <= set(verdicts), expected - set(verdicts)
    not_applicable = {s["id"] for s in report["not_applicable"]["scenarios"]}
    assert (THE_PROFILES_READINGS | THE_OTHER_READINGS) - expected - {"JM-W8"} <= not_applicable

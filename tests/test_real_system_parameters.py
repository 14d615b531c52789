"""Issue 11: every parameter that lets a spec say what a real system does is
demanded by the kit from the YAML alone. In a copy of the spec whose default
is changed (no Python edited), the reference, still doing the old default,
fails; declaring the new value, it passes again."""
import re
import shutil
from pathlib import Path

import pytest

from conformance.engine.runner import RunConfig, run_conformance

ROOT = Path(__file__).resolve().parent.parent
SPEC_DIR = ROOT / "spec"
FRAGMENTS = {"thread-jobs": ["thread-jobs.scenarios.yaml"],
             "async-jobs": ["async-jobs.job-manager.scenarios.yaml", "async-jobs.task-table.scenarios.yaml"]}

# (spec, parameter, the default in the copy, what the YAML says today, options of the
# reference in both runs, whether only the exploration can tell the two apart)
CASES = [
    ("thread-jobs", "second_start_error", "tool_call_resolved", "job_exists_for_tool_call", {}, False),
    ("thread-jobs", "unknown_job_text", "job_not_found", "not_found_in_thread", {}, False),
    ("thread-jobs", "spill_at", "injection", "outcome", {}, False),
    ("thread-jobs", "keep_payload", "true", "false", {}, False),
    ("thread-jobs", "payload_size", "serialised", "raw", {}, True),
    ("thread-jobs", "spill_file_content", "json", "payload", {}, False),
    ("async-jobs", "empty_poll", "nothing", "absent", {}, False),
    ("async-jobs", "empty_text", "omitted", "returned", {}, False),
    ("async-jobs", "drained_cancel_status", "body_outcome", "table_status", {"profile": "task-table"}, False),
    ("async-jobs", "id_counter_start", "0", "1", {"profile": "task-table"}, False),
]


def _copy_with_default(tmp_path: Path, spec: str, name: str, new: str) -> Path:
    for fragment in FRAGMENTS[spec]:
        shutil.copy(SPEC_DIR / fragment, tmp_path)
    text = (SPEC_DIR / f"{spec}.yaml").read_text()
    pattern = rf"(\n  {name}:\n    type: \w+\n    default: )[^\n]+"
    changed, count = re.subn(pattern, rf"\g<1>{new}", text)
    assert count == 1, f"parameter {name} not found in {spec}.yaml"
    path = tmp_path / f"{spec}.yaml"
    path.write_text(changed)
    return path


def _run(path: Path, tmp_path: Path, options: dict, stateful: bool, label: str) -> dict:
    return run_conformance(RunConfig(spec_path=str(path), profile="quick", seed=1, adapter_options=options,
                                     stateful=stateful, report_dir=str(tmp_path / label)))


@pytest.mark.parametrize("spec, name, new, old, options, exploration_only", CASES,
                         ids=[f"{c[0]}:{c[1]}" for c in CASES])
def test_changing_the_default_in_yaml_changes_what_is_demanded(tmp_path, spec, name, new, old, options,
                                                               exploration_only):
    path = _copy_with_default(tmp_path, spec, name, new)
    failing = _run(path, tmp_path, options, stateful=exploration_only, label="old")
    assert failing["parameters"][name] != old and failing["verdict"] == "fail", (
        f"the reference doing {name}={old} passed a spec whose default is {new}")
    if not exploration_only:
        assert any(s["verdict"] == "fail" for s in failing["scenarios"])
    declaring = _run(path, tmp_path, {**options, name: new}, stateful=True, label="new")
    assert str(declaring["implementation"]["parameters"][name]).lower() == new
    assert declaring["verdict"] == "pass", (
        [s for s in declaring["scenarios"] if s["verdict"] not in ("pass", "skip")],
        (declaring.get("stateful") or {}).get("failure"))

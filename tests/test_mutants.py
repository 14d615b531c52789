"""Every shipped mutant of the reference is killed — by the scenario matrix and
by the stateful exploration alone."""
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.mutants import load_mutants, run_mutant
from statemachines import load_spec

ROOT = Path(__file__).resolve().parent.parent
SPEC = str(ROOT / "spec" / "thread-jobs.yaml")
SPECS_WITH_MUTANTS = {}
for _path in sorted((ROOT / "spec").glob("*.yaml")):
    if ".scenarios." not in _path.name:
        _target = load_spec(_path).implementations.get("mutants")
        if _target:
            SPECS_WITH_MUTANTS[str(_path)] = load_mutants(_target)
CASES = [(spec, name) for spec, mutants in SPECS_WITH_MUTANTS.items() for name in sorted(mutants)]


# Each spec ships enough realistic bugs; a spec driving a real command-line
# tool (every step a process) may ship fewer.
MINIMUM_MUTANTS = {"async-command": 6}


@pytest.mark.parametrize("spec", sorted(SPECS_WITH_MUTANTS), ids=lambda p: Path(p).stem)
def test_there_are_enough_mutants(spec):
    assert len(SPECS_WITH_MUTANTS[spec]) >= MINIMUM_MUTANTS.get(Path(spec).stem, 10)


@pytest.mark.parametrize("spec, name", CASES, ids=[f"{Path(s).stem}:{n}" for s, n in CASES])
def test_mutant_is_killed_by_scenarios_and_by_exploration_alone(spec, name):
    # The ci profile is what `conformance run` and `conformance mutants` use by default.
    result = run_mutant(spec, name, SPECS_WITH_MUTANTS[spec][name], profile="ci", seed=1, timeout_s=10)
    assert result.error is None, result.error
    assert result.killed_by_scenarios, f"{name} survived every scenario"
    assert result.found_by_exploration, f"{name} was not found by the stateful exploration alone"


def test_mutants_command_prints_a_table_and_gates_on_kills(tmp_path):
    proc = subprocess.run([sys.executable, "-P", "-m", "conformance.cli", "mutants", SPEC, "--profile", "quick",
                           "--only", "list_cross_thread", "--only", "restart_keeps_jobs"],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "list_cross_thread" in proc.stdout and "restart_keeps_jobs" in proc.stdout
    assert "2/2 killed; exploration alone found 2/2" in proc.stdout

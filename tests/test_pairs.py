"""Finer coverage (conformance/engine/pairs.py): transition pairs and
(state, operation, outcome) triples counted by the model, what is reachable
under the parameters, the ``transition-pairs`` gate and "never reached"."""

import json
from pathlib import Path

from click.testing import CliRunner

from conformance.cli import cli
from conformance.engine.coverage import parse_min_coverage
from conformance.engine.pairs import never_reached, pair_categories, reachable
from conformance.reporting import validate_report
from statemachines import Model, load_spec

ROOT = Path(__file__).resolve().parent.parent
SPEC = str(ROOT / "spec" / "thread-jobs.yaml")


def test_reachable_pairs_chain_transitions_of_the_table():
    spec = load_spec(SPEC)
    pairs = reachable(spec, spec.default_parameters()).pairs
    assert "running -request_cancel-> pending_cancel then pending_cancel -finish-> cancelled" in pairs
    for pair in pairs:  # each first transition ends where the second starts
        first, second = pair.split(" then ")
        assert first.rsplit("-> ", 1)[1] == second.split(" -", 1)[0]
    assert not any(p.startswith("running -finish-> completed then") for p in pairs)  # a terminal state ends it


def test_the_model_counts_a_pair_per_record_and_a_triple_per_call():
    spec = load_spec(SPEC)
    model = Model(spec, spec.default_parameters())
    model.reset()
    started = model.predict("start_job", {"thread_id": "t1", "tool_call_id": "c1", "tool_name": "x", "job_id": "j1"})
    assert started.ok, started.error
    model.predict("cancel_job", {"thread_id": "t1", "job_id": "j1", "requested_by": "user"})
    model.predict("cancel_job", {"thread_id": "t1", "job_id": "nope", "requested_by": "user"})
    counts = model.coverage.as_dict()
    assert counts["triples"].get("running: cancel_job -> ok") == 1, counts["triples"]
    assert counts["triples"].get("(no record): cancel_job -> not_found_in_thread") == 1, counts["triples"]
    assert not counts["pairs"]  # one transition so far
    moved = [t for t in counts["transitions"] if t.startswith("pending_cancel")]
    assert not moved or counts["pairs"]


def test_categories_and_never_reached_name_what_the_run_missed():
    spec = load_spec(SPEC)
    params = spec.default_parameters()
    all_pairs = reachable(spec, params).pairs
    hit, missed = all_pairs[0], all_pairs[1:]
    first = hit.split(" then ")[0]
    counts = {"pairs": {hit: 2}, "transitions": {first: 5}, "triples": {"running: cancel_job -> ok": 1}}
    cats = pair_categories(spec, counts, params)
    assert cats["transition-pairs"]["covered"] == 1 and cats["transition-pairs"]["missed"] == list(missed)
    assert cats["triples"]["covered"] == 1 and cats["triples"]["total"] > 10
    lines = never_reached(spec, counts, params)
    assert lines and all("never reached" in line for line in lines)
    assert not any(line.startswith(hit + ":") for line in lines)
    # each line says how often the run took each half of the pair
    assert lines[0].endswith("(the first transition was taken 5 time(s), the second 0)"), lines[0]


def test_gate_on_transition_pairs(tmp_path):
    assert parse_min_coverage(["transition-pairs=80", "pairs=10"]) == {"transition-pairs": 10.0}
    args = ["run", SPEC, "--no-stateful", "--workers", "1", "--report-dir", str(tmp_path)]
    result = CliRunner().invoke(cli, [*args, "--min-coverage", "transition-pairs=100", "--scenario", "B1"])
    report = json.loads((tmp_path / "report.json").read_text())
    validate_report(report)
    coverage = report["coverage"]
    assert coverage["reachable"]["transition-pairs"] == list(reachable(load_spec(SPEC), report["parameters"]).pairs)
    gate = coverage["gates"][0]
    assert gate["category"] == "transition-pairs" and not gate["passed"], coverage["gates"]
    assert result.exit_code == 1, result.output
    assert "Transition pairs reached:" in result.output
    assert coverage["never_reached"] and "Never reached" in (tmp_path / "summary.md").read_text()


def test_a_run_without_the_exploration_leaves_never_reached_off_the_console(tmp_path):
    """A replay or a run of scenarios alone was never meant to reach the rare
    combinations: the console does not list them as gaps; summary.md and
    report.json still do."""
    args = ["run", SPEC, "--no-stateful", "--workers", "1", "--report-dir", str(tmp_path), "--scenario", "B1"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["coverage"]["never_reached"]
    assert "Transition pairs reached:" in result.output
    assert "never reached" not in result.output
    assert "Never reached" in (tmp_path / "summary.md").read_text()


def test_a_lifecycle_without_transition_pairs_says_so_instead_of_zero_of_zero():
    """async-command's jobs end once (running, then a terminal state): there is
    no pair of transitions to reach, and "reached: 0/0" read like a gap."""
    from rich.console import Console

    from conformance.reporting.console import _print_pairs

    console = Console(record=True, width=200)
    categories = {"transition-pairs": {"covered": 0, "total": 0}, "triples": {"covered": 13, "total": 14}}
    _print_pairs(console, {"categories": categories})
    text = console.export_text()
    assert "Transition pairs: none (no record of this lifecycle changes state twice)" in text, text
    assert "0/0" not in text and "triples: 13/14" in text, text

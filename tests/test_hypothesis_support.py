"""The kit's ties to Hypothesis beyond its public API (engine/hypothesis_support.py):
each guarded, and a Hypothesis without the primitives the exploration draws with
is refused by name, with what to install."""

from __future__ import annotations

import subprocess
import sys

import hypothesis
import pytest
from hypothesis import strategies as st

from conformance.engine import choices, hypothesis_support
from conformance.engine.hypothesis_support import HypothesisUnsupported, check_conjecture_api
from conformance.engine.stateful import exploration_test

pytestmark = pytest.mark.hypothesis  # drives Hypothesis: tests/hypothesis_marker.py


def test_the_installed_hypothesis_has_every_primitive_the_exploration_draws_with():
    check_conjecture_api()  # raises when one is missing


def test_a_hypothesis_without_a_primitive_is_refused_by_name_with_what_to_install():
    class OldData:
        def draw_integer(self): ...

    with pytest.raises(HypothesisUnsupported) as caught:
        check_conjecture_api(OldData)
    message = str(caught.value)
    assert hypothesis.__version__ in message
    assert "ConjectureData.start_span" in message and "ConjectureData.draw_string" in message
    assert f'pip install "hypothesis>={hypothesis_support.LOWEST_TESTED},' in message


def test_building_the_exploration_test_checks_the_primitives_first(monkeypatch):
    monkeypatch.setattr(hypothesis_support, "CONJECTURE_METHODS", ("draw_integer", "draw_from_the_future"))
    with pytest.raises(HypothesisUnsupported, match="draw_from_the_future"):
        exploration_test(
            lambda: None, lambda data: None, step_count=1, settings=hypothesis.settings(max_examples=1), key="k"
        )


def test_the_step_label_is_a_64_bit_integer_fixed_by_its_name():
    label = hypothesis_support.span_label("conformance exploration step")
    assert label == hypothesis_support.span_label("conformance exploration step")
    assert 0 <= label < 2**64 and label != hypothesis_support.span_label("another")


def test_the_choice_budget_falls_back_when_hypothesis_moves_it(monkeypatch):
    assert hypothesis_support.buffer_size() > 0
    monkeypatch.setitem(sys.modules, "hypothesis.internal.conjecture.engine", None)
    assert hypothesis_support.buffer_size() == 8 * 1024


def test_text_falls_back_to_the_public_strategy_without_interval_sets(monkeypatch):
    monkeypatch.setitem(sys.modules, "hypothesis.internal.intervalsets", None)
    assert hypothesis_support.string_intervals("ab") is None
    drawer = choices.text("ab", 5)
    seen: list[str] = []

    @hypothesis.settings(max_examples=20, database=None)
    @hypothesis.given(st.data())
    def draw(data):
        seen.append(drawer(hypothesis_support.conjecture_data(data)))

    draw()
    assert seen and all(set(value) <= {"a", "b"} and len(value) <= 5 for value in seen)


def test_a_run_under_a_hypothesis_without_the_primitives_is_an_environment_error(monkeypatch):
    from conformance.engine.runner import RunConfig, run_conformance

    monkeypatch.setattr(hypothesis_support, "CONJECTURE_METHODS", ("draw_from_the_future",))
    report = run_conformance(RunConfig(spec_path="thread-jobs", scenarios=False, profile="quick", report_dir=None))
    assert (report["verdict"], report["exit_code"]) == ("error", 2)
    (problem,) = [p for p in report["problems"] if p["kind"] == "environment-error"]
    assert "ConjectureData.draw_from_the_future" in problem["message"]
    assert "pip install" in problem["message"]


def test_the_cli_loads_hypothesis_only_for_a_run_that_explores(tmp_path):
    # Loading Hypothesis (and what it loads: pytest, trio where installed) is about half of the
    # command line's start-up; validate, check-spec, docs, specs and a run of scenarios alone
    # never draw an example, so they do without it.
    code = (
        "import sys\n"
        "from conformance.cli import cli\n"
        "from conformance.engine.runner import RunConfig, run_conformance\n"
        "assert 'hypothesis' not in sys.modules, 'loaded at start'\n"
        "report = run_conformance(RunConfig('thread-jobs', only=('N1',), report_dir=None))\n"
        "assert report['verdict'] == 'pass', report['verdict']\n"
        "assert 'hypothesis' not in sys.modules, 'loaded by a run of one scenario'\n"
        "from conformance.engine.stateful import PROFILES\n"
        "from conformance.engine.profiles import PROFILES as SAME\n"
        "assert PROFILES is SAME and 'hypothesis' in sys.modules\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stdout + done.stderr

"""report.html and the model's trail: what a failing run's page shows, read as
text (the browser's view is tests/test_report_page_browser.py)."""

from __future__ import annotations

import json
import re
from html import escape
from html.parser import HTMLParser
from pathlib import Path

import pytest
from test_counterexamples import _mutant_factory, _sequential

from conformance.engine.model_trail import model_trail
from conformance.engine.runner import RunConfig, run_conformance
from conformance.reporting import render_html_report, render_summary_markdown
from conformance.reporting.svg_diagram import lifecycle_edges
from conformance.specs import resolve_spec
from statemachines import load_spec

pytestmark = pytest.mark.hypothesis  # the failing run explores

VOID = {"meta", "br", "hr", "img", "input", "link", "path", "rect", "circle", "marker"}


class _Structure(HTMLParser):
    """Every element closed in order; every reference the page makes."""

    def __init__(self) -> None:
        super().__init__()
        self.open: list[str] = []
        self.errors: list[str] = []
        self.references: list[str] = []

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name in ("src", "href", "action", "data") or (name == "style" and "url(" in (value or "")):
                self.references.append(f"{name}={value}")
        if tag not in VOID:
            self.open.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag not in VOID:
            self.open.pop()

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        if not self.open or self.open[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.open[-1] if self.open else 'nothing'}")
            return
        self.open.pop()


def _structure(page: str) -> _Structure:
    parser = _Structure()
    parser.feed(page)
    parser.close()
    return parser


@pytest.fixture(scope="module")
def failing(tmp_path_factory) -> dict:
    """A failing quick run against a shipped mutant: its report (the page is beside it)."""
    out = tmp_path_factory.mktemp("late_report_reopens")
    config = RunConfig(
        spec_path="thread-jobs",
        adapter_factory=_sequential(_mutant_factory("thread-jobs", "late_report_reopens")),
        adapter_label="late_report_reopens",
        scenarios=False,
        profile="quick",
        report_dir=str(out),
    )
    report = run_conformance(config)
    assert report["stateful"]["verdict"] == "fail"
    return {"report": report, "dir": out}


def test_a_failing_run_writes_one_self_contained_valid_page(failing):
    page = (failing["dir"] / "report.html").read_text(encoding="utf-8")
    parsed = _structure(page)
    assert parsed.errors == [] and parsed.open == []
    # only links within the page: no script, style sheet, font or image from elsewhere
    assert all(ref.startswith("href=#") for ref in parsed.references), parsed.references
    assert not re.search(r"@import|https?://(?!www\.w3\.org/2000/svg)", page)


def test_each_step_carries_what_the_model_held_after_it(failing):
    failure = json.loads((failing["dir"] / "report.json").read_text(encoding="utf-8"))["stateful"]["failure"]
    steps = failure["steps"]
    assert all("model" in step for step in steps)
    diverged = next(step for step in steps if step["index"] == failure["step"])
    field = failure["path"].rsplit(".", 1)[-1]
    # the record the failing step read holds what the model expected where the answer differs
    read = [r for r in diverged["model"]["records"] if str(r.get("job_id")) in diverged["model"]["read"]]
    assert read and read[0][field] == failure["expected"] != failure["observed"]
    assert any(step["model"]["transitions"] for step in steps)  # the path the failure walked


def test_the_page_steps_through_the_counterexample_to_the_record_that_differs(failing):
    failure = failing["report"]["stateful"]["failure"]
    page = (failing["dir"] / "report.html").read_text(encoding="utf-8")
    panels = re.findall(r'<li class="step[^"]*" data-step="(\d+)"', page)
    assert len(panels) >= len(failure["steps"])
    diverged = re.search(r'<li class="step diverged".*?(?=<li class="step|</ol>)', page, re.S).group(0)
    cell = re.search(r'<td class="differs">([^<]*)</td>', diverged)
    assert cell and json.loads(cell.group(1).replace("&quot;", '"')) == failure["expected"]
    assert "What differs at" in diverged
    assert failure["replay"].split()[0] in page and 'class="copy"' in page


def test_summary_md_has_the_model_at_the_diverging_step(failing):
    text = (failing["dir"] / "summary.md").read_text(encoding="utf-8")
    assert "**The model at step" in text
    assert f'"{failing["report"]["stateful"]["failure"]["expected"]}"' in text.split("**The model at step", 1)[1]


def test_a_passing_page_shows_every_transition_reached_or_never(tmp_path):
    spec = load_spec(resolve_spec("thread-jobs"))
    ref = spec.implementations["reference"]
    report = run_conformance(
        RunConfig(spec_path="thread-jobs", adapter=ref, scenarios=True, stateful=False, report_dir=str(tmp_path))
    )
    assert report["verdict"] == "pass"
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    taken = report["coverage"]["transitions"]
    for edge in lifecycle_edges(report["spec"]["lifecycle"]):
        drawn = re.search(rf'<g class="edge([^"]*)" id="edge-\d+" data-edge="{re.escape(escape(edge.name))}">', page)
        assert drawn, edge.name
        assert ("never" in drawn.group(1)) == (not taken.get(edge.name)), edge.name


def test_received_text_is_escaped_and_control_characters_shown(failing):
    report = json.loads((failing["dir"] / "report.json").read_text(encoding="utf-8"))
    report["spec"]["title"] = 'x</title><script>alert(1)</script>\x1b]0;owned\x07'
    report["stateful"]["failure"]["message"] = "<img src=x onerror=alert(1)>"
    page = render_html_report(report)
    assert "<script>alert" not in page and "<img src=x" not in page and "\x1b" not in page and "\x07" not in page
    assert "\\x1b" in page and "&lt;script&gt;" in page
    assert _structure(page).errors == []


def test_the_page_stays_small_for_a_huge_failure(failing):
    report = json.loads((failing["dir"] / "report.json").read_text(encoding="utf-8"))
    failure = report["stateful"]["failure"]
    big = {"result": {"text": "y" * 200_000}, "effects": []}
    failure["steps"] = [
        {"index": i, "operation": "list_jobs", "args": {"thread_id": "t1"}, "observed": big} for i in range(100_000)
    ]
    report["coverage"]["categories"]["transitions"]["missed"] = [f"a -t{i}-> b" for i in range(50_000)]
    page = render_html_report(report)
    assert len(page.encode()) < 3_000_000
    assert "step(s) left out" in page


def test_the_trail_follows_the_answers_and_stops_where_the_model_cannot():
    spec = load_spec(resolve_spec("thread-jobs"))
    from statemachines import resolve_parameters

    params, _ = resolve_parameters(spec, None, {})
    start = {"thread_id": "t1", "tool_call_id": "a", "tool_name": "a"}
    steps = [
        {
            "operation": "start_job",
            "args": start,
            "observed": {"result": {"mode": "background", "job_id": "job-7", "status": "running"}, "effects": []},
        },
        {
            "operation": "cancel_job",
            "args": {"thread_id": "t1", "job_id": "job-7", "requested_by": "user"},
            "observed": {"result": {}, "effects": []},
        },
    ]
    trail = model_trail(spec, params, steps)
    assert trail[0].changed == ["job-7"] and trail[0].records[0]["status"] == "running"  # the id it chose
    assert trail[1].transitions == ["running -request_cancel-> pending_cancel"]
    assert trail[1].read == ["job-7"] and trail[1].records[0]["status"] == "pending_cancel"


def test_markdown_without_a_trail_is_as_before(failing):
    report = json.loads((failing["dir"] / "report.json").read_text(encoding="utf-8"))
    for step in report["stateful"]["failure"]["steps"]:
        step.pop("model", None)
    assert "**The model at step" not in render_summary_markdown(report)


def test_observability_writes_hypothesis_test_cases_with_the_steps_features(tmp_path):
    path = tmp_path / "observed" / "testcases.jsonl"
    config = RunConfig(
        spec_path="thread-jobs",
        adapter_factory=_sequential(_mutant_factory("thread-jobs", "late_report_reopens")),
        adapter_label="late_report_reopens",
        scenarios=False,
        profile="quick",
        report_dir=str(tmp_path / "reports"),
        observations=str(path),
    )
    run_conformance(config)
    cases = [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines()]
    tests = [c for c in cases if c.get("type") == "test_case"]
    assert tests and {"passed", "failed"} <= {c["status"] for c in tests}
    features = {f for c in tests for f in c["features"]}
    assert any(f.startswith("operation: start_job") for f in features)
    assert any(f.startswith("outcome: ") for f in features)
    assert any(f.startswith("transition: running -") for f in features)


def test_every_term_names_a_section_the_docs_have():
    from importlib import resources

    from conformance.reporting.html_report import GLOSSARY

    for term, (_, doc, section) in GLOSSARY.items():
        text = resources.files("conformance.docs").joinpath(f"{doc}.md").read_text(encoding="utf-8")
        headings = {line.lstrip("#").strip() for line in text.splitlines() if line.startswith("#")}
        assert section in headings, (term, doc, section)

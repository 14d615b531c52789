"""junit.xml: one <testsuite> per run, one <testcase> per check.

Layout follows the Ant/Jenkins JUnit format that GitLab, GitHub test
reporters, Jenkins and Azure all read: <testsuites> > <testsuite> >
<testcase> with <failure>, <error> or <skipped> children.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from ._format import deviation_lines, failure_text, first_line, ordered_scenarios, replay_for, visible

__all__ = ["render_junit_xml"]

# Characters XML 1.0 forbids even when escaped; implementations can put
# them in messages, and one of them makes the whole file unparsable.
_XML_ILLEGAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _clean(text) -> str:
    """Forbidden characters replaced, other control characters escaped (visible)."""
    return visible(_XML_ILLEGAL.sub("\ufffd", "" if text is None else str(text)))


def _seconds(value) -> str:
    return f"{float(value or 0):.3f}"


def _testcase(parent: ET.Element, name: str, classname: str, duration) -> ET.Element:
    return ET.SubElement(parent, "testcase", name=_clean(name), classname=_clean(classname), time=_seconds(duration))


def _outcome(
    case: ET.Element, verdict: str | None, failure: dict | None, report: dict, note: str | None = None
) -> None:
    if verdict == "skip":
        ET.SubElement(case, "skipped", message=_clean(note or first_line((failure or {}).get("message"), "skipped")))
    elif verdict == "interrupted":  # the run's own testcase carries the interrupt as an error
        ET.SubElement(case, "skipped", message="interrupted before it finished")
    elif verdict in ("fail", "error"):
        tag = "failure" if verdict == "fail" else "error"
        elem = ET.SubElement(
            case,
            tag,
            message=_clean(first_line((failure or {}).get("message"), verdict)),
            type=_clean((failure or {}).get("kind") or verdict),
        )
        elem.text = _clean(failure_text(failure, report))


# The element a run's own testcase carries when no check carries its verdict.
_RUN_TAGS = {"fail": "failure", "error": "error", "interrupted": "error", "not-reproducing": "error"}
_COUNT_NAMES = {"failure": "failures", "error": "errors", "skipped": "skipped"}


def render_junit_xml(report: dict) -> str:
    spec = report.get("spec") or {}
    suite_name = spec.get("id") or "conformance"
    suite = ET.Element("testsuite", name=_clean(suite_name))
    _add_properties(suite, report)
    _add_scenario_cases(suite, suite_name, report)
    _add_stateful_cases(suite, suite_name, report)
    _add_coverage_case(suite, suite_name, report)
    _add_run_problems(suite, suite_name, report)

    counts = _counts(suite)
    time = _seconds(report.get("duration_s"))
    suite.attrib.update({k: str(v) for k, v in counts.items()})
    suite.set("time", time)
    if report.get("started_at"):
        # The Ant schema wants a timestamp without a zone; the report is UTC.
        suite.set("timestamp", _clean(str(report["started_at"]).removesuffix("Z")))

    root = ET.Element("testsuites", name=_clean(suite_name), time=time)
    root.attrib.update({k: str(v) for k, v in counts.items()})
    root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _add_properties(suite: ET.Element, report: dict) -> None:
    spec = report.get("spec") or {}
    impl = report.get("implementation") or {}
    stateful = report.get("stateful") or {}
    props = ET.SubElement(suite, "properties")  # dropped below if it stays empty
    for key, value in (
        ("spec.version", spec.get("version")),
        ("spec.path", spec.get("path")),
        ("implementation.name", impl.get("name")),
        ("implementation.version", impl.get("version")),
        ("implementation.profile", impl.get("profile")),
        ("verdict", report.get("verdict")),
        ("exit_code", report.get("exit_code")),
        ("seed", stateful.get("seed")),
        ("replay", report.get("replay")),
    ):
        if value is not None:
            ET.SubElement(props, "property", name=key, value=_clean(value))
    for line in deviation_lines(report):  # accepted deviations are listed wherever the verdict is read
        ET.SubElement(props, "property", name=f"deviation.{line.split(':', 1)[0]}", value=_clean(line))
    if not len(props):
        suite.remove(props)  # some schemas want at least one <property>


def _add_scenario_cases(suite: ET.Element, suite_name: str, report: dict) -> None:
    for s in ordered_scenarios(report):
        case = _testcase(
            suite,
            f"{s.get('id')} {s.get('title') or ''}".strip(),
            f"{suite_name}.{s.get('category') or 'scenario'}",
            s.get("duration_s"),
        )
        _outcome(case, s.get("verdict"), s.get("failure"), report, s.get("note"))


def _add_stateful_cases(suite: ET.Element, suite_name: str, report: dict) -> None:
    stateful = report.get("stateful") or {}
    case = _testcase(suite, "stateful exploration", f"{suite_name}.stateful", stateful.get("duration_s"))
    if report.get("stateful") is None:
        ET.SubElement(case, "skipped", message="stateful exploration was not run")
        return
    _outcome(case, stateful.get("verdict"), stateful.get("failure"), report)
    for number, failure in enumerate(stateful.get("more_failures") or [], 2):  # --max-failures
        extra = _testcase(suite, f"stateful exploration (distinct failure {number})", f"{suite_name}.stateful", 0)
        _outcome(extra, "fail", failure, report)


def _add_coverage_case(suite: ET.Element, suite_name: str, report: dict) -> None:
    coverage = report.get("coverage") or {}
    if coverage.get("gates"):  # --min-coverage: a check of its own, so CI lists it by name
        case = _testcase(suite, "coverage gate", f"{suite_name}.coverage", 0)
        _outcome(case, "fail" if coverage.get("failure") else "pass", coverage.get("failure"), report)


def _add_run_problems(suite: ET.Element, suite_name: str, report: dict) -> None:
    """A run can fail or error outside any check (adapter would not load,
    nondeterminism). CI must not show that as green, so the problems become
    a testcase of their own whenever no check carries the verdict."""
    problems = report.get("problems") or []
    problem_text = "\n".join(
        f"[{p.get('kind')}] {p.get('message')}" + (f" ({p['where']})" if p.get("where") else "") for p in problems
    )
    verdict = report.get("verdict")
    tag = _RUN_TAGS.get(verdict) if verdict else None
    if tag and suite.find(f"testcase/{tag}") is None:
        case = _testcase(suite, "conformance run", f"{suite_name}.run", report.get("duration_s"))
        first = problems[0] if problems else {}
        elem = ET.SubElement(
            case,
            tag,
            message=_clean(first_line(first.get("message"), f"run verdict: {verdict}")),
            type=_clean(first.get("kind") or verdict),
        )
        replay = replay_for(None, report)
        elem.text = _clean((problem_text or f"run verdict: {verdict}") + (f"\n\nreplay: {replay}" if replay else ""))
    elif problems:
        ET.SubElement(suite, "system-err").text = _clean(problem_text)


def _counts(suite: ET.Element) -> dict[str, int]:
    counts = {"tests": len(suite.findall("testcase"))}
    for tag, name in _COUNT_NAMES.items():
        counts[name] = len(suite.findall(f"testcase/{tag}"))
    return counts

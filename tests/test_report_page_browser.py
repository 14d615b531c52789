"""report.html as a person uses it: opened in a real headless Chromium (Debian's
package, driven by Playwright), with scripts on and off.

Needs /usr/bin/chromium (or CHROMIUM) and the `playwright` package (the test
extra); without them the tests are skipped, except in CI (CI=true), where
.ci/run installs Chromium and a missing browser is a failure."""

from __future__ import annotations

import os
import shutil
import struct
import zlib

import pytest
from test_counterexamples import _mutant_factory, _sequential

from conformance.engine.runner import RunConfig, run_conformance

pytestmark = [pytest.mark.hypothesis, pytest.mark.xdist_group("browser")]

CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _browser_or_skip():
    missing = None
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing = "the playwright package is not installed (pip install '.[test]')"
    if missing is None and not os.path.exists(CHROMIUM):
        missing = f"no Chromium at {CHROMIUM} (apt-get install chromium)"
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"CI must open report.html in Chromium: {missing}")
        pytest.skip(missing)
    return sync_playwright


@pytest.fixture(scope="module")
def page_file(tmp_path_factory):
    out = tmp_path_factory.mktemp("page")
    report = run_conformance(
        RunConfig(
            spec_path="thread-jobs",
            adapter_factory=_sequential(_mutant_factory("thread-jobs", "cancel_finished_job")),
            adapter_label="cancel_finished_job",
            scenarios=False,
            profile="quick",
            report_dir=str(out),
        )
    )
    assert report["stateful"]["verdict"] == "fail"
    return out / "report.html", report["stateful"]["failure"]


@pytest.fixture(scope="module")
def browser():
    sync_playwright = _browser_or_skip()
    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield launched
        launched.close()


def _png_colours(png: bytes) -> int:
    """How many distinct pixel rows a PNG has: more than one means something is drawn."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    chunks, at = {}, 8
    while at < len(png):
        length, kind = struct.unpack(">I4s", png[at : at + 8])
        chunks.setdefault(kind, b"")
        chunks[kind] += png[at + 8 : at + 8 + length]
        at += 12 + length
    width, height, depth, colour = struct.unpack(">IIBB", chunks[b"IHDR"][:10])
    raw = zlib.decompress(chunks[b"IDAT"])
    row = 1 + width * {2: 3, 6: 4}.get(colour, 4) * depth // 8
    return len({raw[i * row + 1 : (i + 1) * row] for i in range(height)})


def test_the_stepper_walks_the_counterexample_to_the_record_that_differs(browser, page_file):
    path, failure = page_file
    page = browser.new_page()
    page.goto(path.as_uri())
    stepper = page.locator(".stepper").first
    total = len(failure["steps"])
    assert stepper.locator(".step-label").text_content() == f"Step 1 of {total}"
    assert stepper.locator(".step.shown").count() == 1  # one step at a time
    for n in range(2, total + 1):
        stepper.locator(".step-next").click()
        assert stepper.locator(".step-label").text_content() == f"Step {n} of {total}"
    shown = stepper.locator(".step.shown")
    assert "parts from the model here" in shown.locator("h4").text_content()
    assert shown.locator("td.differs").text_content() == f'"{failure["expected"]}"'
    stepper.locator(".step-prev").click()
    stepper.locator(".step-diverged").click()
    assert "diverged" in (stepper.locator(".step.shown").get_attribute("class") or "")
    page.close()


def test_the_steps_light_their_transitions_on_the_diagram(browser, page_file):
    path, failure = page_file
    page = browser.new_page()
    page.goto(path.as_uri() + "#step-1")
    stepper = page.locator(".stepper").first
    seen = set()
    for _ in failure["steps"]:
        seen |= set(page.eval_on_selector_all("g.edge.current", "els => els.map(e => e.dataset.edge)"))
        stepper.locator(".step-next").click()
    taken = {t for s in failure["steps"] for t in (s.get("model") or {}).get("transitions") or []}
    assert taken and seen == taken
    page.close()


def test_the_copy_button_copies_the_replay_command(browser, page_file):
    path, failure = page_file
    context = browser.new_context()
    page = context.new_page()
    page.goto(path.as_uri())
    button = page.locator("button.copy").first
    assert button.is_visible()
    button.click()
    page.wait_for_function("() => document.querySelector('button.copy').dataset.copied !== undefined")
    assert button.get_attribute("data-copied") == failure["replay"]
    assert button.text_content() == "Copied"
    context.close()


def test_with_scripts_off_every_step_is_there_and_the_screenshot_is_not_blank(browser, page_file):
    path, failure = page_file
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    page.goto(path.as_uri())
    steps = page.locator(".stepper").first.locator(".step")
    assert steps.count() == len(failure["steps"])
    assert all(steps.nth(i).is_visible() for i in range(steps.count()))
    assert page.locator("svg.lifecycle g.state").count() >= 2
    assert not page.locator("button.copy").first.is_visible()  # it works only with scripts
    png = page.screenshot(full_page=True)
    assert len(png) > 10_000 and _png_colours(png) > 50
    context.close()

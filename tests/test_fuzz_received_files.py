"""Property-based fuzzing of every kind of file a user receives (issue 34,
item 8): specs and fragments, replay files, deviations files, traces and
shard reports. Hypothesis writes structurally plausible documents with
hostile values in them (integers past 64 bits and past Python's 4,300
digits, impossible dates, deep nesting, long strings, odd paths: absolute,
``../`` escapes, a symbolic link to a secret, a dangling link, a FIFO,
``/dev/zero``). Whatever it writes, the kit answers in-process with a value
or its own error naming the file -- never another exception, never a hang
(an alarm fails the example), never the secret's content -- and the front
doors that write reports (check-trace, merge-reports) write one with exit
code 0, 1 or 2."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conformance.engine.deviations import DeviationsError, load_deviations
from conformance.engine.runner import RunConfig, new_report
from conformance.engine.shards import ShardError, load_shard_report, shard_info
from statemachines import SpecError, load_spec
from statemachines.model.compiler import load_replay_file

pytestmark = pytest.mark.hypothesis  # drives Hypothesis: tests/hypothesis_marker.py

ROOT = Path(__file__).resolve().parents[1]
SECRET = "SECRET_TOKEN_34_DO_NOT_READ"
FUZZ = settings(
    max_examples=12,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)


class Raw(str):
    """Text written into a document as it is (a number JSON cannot print, deep brackets)."""


def dump(value) -> str:
    """Flow-style YAML (JSON, with Raw text as it is)."""
    if isinstance(value, Raw):
        return str(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(str(k))}: {dump(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(dump(v) for v in value) + "]"
    return json.dumps(value)


ODD_PATHS = [
    "/proc/self/environ",
    "/dev/zero",
    "../outside/secret.yaml",
    "link.yaml",
    "dangling.yaml",
    "fifo.yaml",
    "/etc/passwd",
    "values/../../outside/secret.yaml",
    "counterexample-stateful.yaml",
]
HOSTILE_RAW = [
    "9" * 5000,
    str(2**63),
    str(-(2**63) - 1),
    "0x8000000000000000",
    "1e999999",
    "2026-02-30",
    "2026-13-01",
    "[" * 3000 + "]" * 3000,
    "{" + '"a": {' * 200 + "}" * 201,
]
scalars = st.one_of(
    st.integers(-(2**70), 2**70),
    st.booleans(),
    st.none(),
    st.text(max_size=20),
    st.sampled_from(ODD_PATHS),
    st.sampled_from(HOSTILE_RAW).map(Raw),
    st.integers(0, 300_000).map(lambda n: "x" * n),
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)


@contextlib.contextmanager
def no_hang(seconds: float = 20.0):
    """Fail instead of waiting forever (a FIFO opened, /dev/zero read)."""

    def alarm(signum, frame):
        raise AssertionError(f"the kit did not answer in {seconds} s: a hang")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def playground(base: Path) -> Path:
    """A fresh directory with the odd entries ODD_PATHS names, and a secret beside it."""
    root = Path(tempfile.mkdtemp(dir=base))
    (root / "outside").mkdir()
    (root / "outside" / "secret.yaml").write_text(f"{SECRET}: 1\n")
    work = root / "work"
    work.mkdir()
    (work / "link.yaml").symlink_to(root / "outside" / "secret.yaml")
    (work / "dangling.yaml").symlink_to(root / "outside" / "nothing.yaml")
    os.mkfifo(work / "fifo.yaml")
    return work


_OPENED: list | None = None  # (path, flags) of every open while a fuzzed call runs


def _audit(event: str, args: tuple) -> None:
    if event == "open" and _OPENED is not None and isinstance(args[0], (str, bytes, os.PathLike)):
        _OPENED.append((os.fsdecode(args[0]), args[2] if len(args) > 2 and isinstance(args[2], int) else 0))


sys.addaudithook(_audit)  # records only while a test says so (no_hang)


def read_outside(work: Path, opened: list) -> list[str]:
    """What was opened, following links, outside the example's directory and the
    kit's own files: the secret, /proc, /dev/zero ... (an O_NOFOLLOW open of a
    link fails, so it reads nothing)."""
    outside = str(work.parent / "outside")
    bad = []
    for path, flags in opened:
        if flags & getattr(os, "O_NOFOLLOW", 0) and os.path.islink(path):
            continue
        real = os.path.realpath(path)
        if real.startswith(outside) or real.startswith(("/proc", "/dev/zero", "/etc/passwd")):
            bad.append(path)
    return bad


@contextlib.contextmanager
def watching(work: Path):
    """Fail when the kit opens anything the document names outside what the user named."""
    global _OPENED
    _OPENED = []
    try:
        with no_hang():
            yield
    finally:
        opened, _OPENED = _OPENED, None
    assert not read_outside(work, opened), read_outside(work, opened)


def no_secret(*texts: str) -> None:
    for text in texts:
        assert SECRET not in text, text[:500]


@pytest.fixture(scope="module")
def spec():
    return load_spec(ROOT / "spec" / "thread-jobs.yaml")


OPERATIONS = ["start_job", "inspect_job", "cancel_job", "begin_turn", "no_such_op", ""]


# ------------------------------------------------------------ spec and fragments
def _pick(text: str) -> int:
    """A deterministic index from a drawn text (str hashes change per process)."""
    return sum(map(ord, text))


@pytest.mark.slow
@FUZZ
@given(where=st.lists(st.text("abcdefghij", min_size=1, max_size=10), min_size=1, max_size=3), value=values)
def test_fuzz_a_spec_with_a_hostile_value_anywhere(tmp_path, where, value):
    """A copy of a bundled spec with one value replaced (or added) somewhere."""
    import yaml

    work = playground(tmp_path)
    data = yaml.safe_load((ROOT / "spec" / "thread-jobs.yaml").read_text())
    shutil.copy(ROOT / "spec" / "thread-jobs.scenarios.yaml", work)
    node = data
    keys = list(data)
    for part in where[:-1]:
        key = keys[_pick(part) % len(keys)] if isinstance(node, dict) and keys else part
        if not isinstance(node, dict):
            break
        node = node.setdefault(key, {})
        keys = list(node) if isinstance(node, dict) else []
    if isinstance(node, dict):
        node[where[-1] if not node else list(node)[_pick(where[-1]) % len(node)]] = value
    path = work / "spec.yaml"
    path.write_text(dump(data))
    with watching(work):
        try:
            load_spec(path)
        except SpecError as exc:
            assert str(path) in str(exc) or "spec.yaml" in str(exc), str(exc)[:300]
            no_secret(str(exc))


@FUZZ
@given(include=st.lists(st.sampled_from(ODD_PATHS) | st.text(max_size=12), min_size=1, max_size=3), body=values)
def test_fuzz_a_fragment_and_its_includes(tmp_path, include, body):
    """A fragment-shaped YAML file: odd include paths and hostile bodies load
    to data or to a SpecError at a file:line; links, FIFOs and devices are
    never followed or opened."""
    from statemachines.model.compiler import load_spec_data

    work = playground(tmp_path)
    path = work / "fragment.yaml"
    path.write_text(f"include: {dump(include)}\nscenarios: {dump(body)}\n")
    with watching(work):
        try:
            load_spec_data(path)
        except SpecError as exc:
            assert "fragment.yaml" in str(exc), str(exc)[:300]
            no_secret(str(exc))


# ------------------------------------------------------------ replay files
@FUZZ
@given(
    steps=st.lists(
        st.fixed_dictionaries(
            {"call": st.sampled_from(OPERATIONS) | values, "args": values}, optional={"advance_ms": values}
        ),
        min_size=0,
        max_size=4,
    ),
    extra=values,
)
def test_fuzz_a_replay_file(tmp_path, spec, steps, extra):
    work = playground(tmp_path)
    path = work / "replay.yaml"
    path.write_text(dump({"id": "fuzz", "steps": steps, "note": extra}))
    with watching(work):
        try:
            load_replay_file(spec, path)
        except SpecError as exc:
            assert "replay.yaml" in str(exc), str(exc)[:300]
            no_secret(str(exc))


# ------------------------------------------------------------ deviations files
@FUZZ
@given(
    entries=st.lists(
        st.fixed_dictionaries(
            {"id": st.text(max_size=8) | values, "reason": values},
            optional={
                "expires": st.sampled_from(["2026-02-30", "2099-01-01", "2020-01-01"]).map(Raw) | values,
                "accept": st.fixed_dictionaries({"path": values}, optional={"operation": values, "where": values}),
                "avoid": values,
            },
        ),
        max_size=3,
    )
)
def test_fuzz_a_deviations_file(tmp_path, spec, entries):
    work = playground(tmp_path)
    path = work / "deviations.yaml"
    path.write_text(dump({"deviations": 1, "entries": entries}))
    with watching(work):
        try:
            load_deviations(path, spec=spec)
        except (DeviationsError, SpecError) as exc:
            assert "deviations.yaml" in str(exc), str(exc)[:300]
            no_secret(str(exc))


# ------------------------------------------------------------ traces
trace_events = st.one_of(
    st.fixed_dictionaries({"call": st.sampled_from(OPERATIONS) | values, "args": values, "result": values}),
    st.fixed_dictionaries({"call": st.sampled_from(OPERATIONS), "args": values, "error": values}),
    st.fixed_dictionaries({"clock_ms": st.integers(-5, 2**64) | st.sampled_from(HOSTILE_RAW).map(Raw)}),
    st.just({"reset": True}),
    st.sampled_from(HOSTILE_RAW).map(Raw),
    st.just(Raw("not json at all")),
)


@FUZZ
@given(events=st.lists(trace_events, max_size=5), header=st.booleans())
def test_fuzz_a_trace(tmp_path, events, header):
    from conformance.traces import check_trace_run  # it loads the spec once (load_spec_once)

    work = playground(tmp_path)
    trace = work / "t.jsonl"
    lines = ['{"trace": 1, "spec": {"id": "thread-jobs"}}'] if header else []
    trace.write_text("\n".join(lines + [dump(e) for e in events]) + "\n")
    out = work / "reports"
    with watching(work):
        report = check_trace_run("thread-jobs", [str(trace)], str(out))
    assert (report["verdict"], report["exit_code"]) in (("pass", 0), ("fail", 1), ("error", 2)), report
    assert json.loads((out / "report.json").read_text())["verdict"] == report["verdict"]
    no_secret(json.dumps(report["problems"]))


# ------------------------------------------------------------ shard reports
def base_shard_report(failure_file: str | None) -> dict:
    report = new_report(RunConfig(spec_path="spec/thread-jobs.yaml"))
    report["verdict"], report["exit_code"] = ("fail", 1) if failure_file else ("pass", 0)
    report["spec"].update({"id": "thread-jobs", "version": "2.0.3"})
    report["shard"] = shard_info(1, 1, seed=1, profile="ci", rerun="conformance run x", min_coverage={})
    if failure_file:
        report["stateful"] = {
            "verdict": "fail",
            "failure": {"kind": "divergence", "message": "m", "counterexample_file": failure_file},
        }
    return report


@FUZZ
@given(
    failure_file=st.none() | st.sampled_from(ODD_PATHS),
    value_entry=st.none() | st.sampled_from(["link", "fifo", "dangling", "forged", "dir-link"]),
    field=st.sampled_from(["spec", "shard", "parameters", "problems", "duration_s", "stateful", None]),
    value=values,
)
def test_fuzz_a_shard_report(tmp_path, spec, failure_file, value_entry, field, value):
    from conformance.cli.replay import _merge_loaded
    from conformance.engine.runner import write_report_files

    work = playground(tmp_path)
    shard = work / "shard"
    shard.mkdir()
    report = base_shard_report(failure_file)
    if field is not None:
        report[field] = value
    (shard / "report.json").write_text(dump(report))
    if failure_file == "counterexample-stateful.yaml":
        (shard / failure_file).symlink_to(work.parent / "outside" / "secret.yaml")
    digest = "0" * 64
    if value_entry == "dir-link":
        (shard / "values").symlink_to(work.parent / "outside")
    elif value_entry is not None:
        (shard / "values").mkdir()
        entry = shard / "values" / f"sha256-{digest}.txt"
        if value_entry == "link":
            entry.symlink_to(work.parent / "outside" / "secret.yaml")
        elif value_entry == "fifo":
            os.mkfifo(entry)
        elif value_entry == "dangling":
            entry.symlink_to(work / "nothing")
        else:
            entry.write_text(SECRET)
    out = work / "merged"
    loaded, refused = [], []
    with watching(work):
        try:
            loaded.append(load_shard_report(shard))
        except ShardError as exc:
            refused.append(str(exc))
        merged = _merge_loaded(loaded, refused, str(out), spec, [])
        write_report_files(merged, str(out))
    assert (merged["verdict"], merged["exit_code"]) in (("pass", 0), ("fail", 1), ("error", 2)), merged
    assert json.loads((out / "report.json").read_text())["verdict"] == merged["verdict"]
    for path in out.rglob("*"):
        if path.is_file():
            no_secret(path.read_text(errors="replace"))

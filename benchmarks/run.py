#!/usr/bin/env python3
"""Performance benchmarks of the conformance kit, measured in one run.

    .venv/bin/python benchmarks/run.py            # readable table, then the JSON object
    .venv/bin/python benchmarks/run.py --json     # one JSON object on stdout, nothing else
    .venv/bin/python benchmarks/run.py --quick    # smaller sizes (a smoke test, not a measurement)
    .venv/bin/python benchmarks/run.py --skip-ci-run

Metrics (see benchmarks/README.md for the details):

kit_steps_per_s
    The generated stateful suite (prepare() + run_stateful(): model, comparisons,
    probes, schema and invariant checks) against the reference implementation,
    in steps as the kit counts them (StatefulOutcome.steps) per second of
    run_stateful(). Spec loading and adapter start-up are not timed.
kit_calls_per_s
    The same runs' adapter calls made one at a time (plain calls, each call of
    a batch, probes; not the calls of concurrent groups) per second. Read it
    beside kit_steps_per_s: a step is one call or a batch of dozens, so a spec
    whose exploration draws heavy batches explores fewer steps per second for
    as many calls. Not a target.
bare_steps_per_s
    The same steps (same Explorer action list and argument strategies, the
    kit's own runner, same Hypothesis settings and seed), carried out by calling the
    ReferenceAdapter directly: no model, no comparison, no probe, no checks.
overhead_ratio
    kit_steps_per_s / bare_steps_per_s (target >= 0.5).
model_cost_ratio_100k_vs_100
    Per-operation cost of Model.predict with 100,000 live jobs over the cost
    with 100 live jobs, for a fixed mix of operations on one thread of ordinary
    size (target <= 2).
ci_wall_s
    Wall time of ``conformance run spec/thread-jobs.yaml --profile ci`` as a
    subprocess (target < 60 s); the median of --ci-rounds runs (default 3).
workers_speedup, cli_ci_wall_s
    ci_wall_s over the median wall time of the same run with ``--workers 2``,
    the two run in alternating rounds (target >= 1.6 on 2 cores); and the wall
    time of the bundled CLI reference's ci run with ``--workers 2``
    (``conformance run spec/async-command.yaml``, target <= 300 s).
trace_events_per_s, trace_peak_rss_mb, trace_rss_ratio_vs_tenth
    ``conformance check-trace`` (a subprocess) over one long conforming
    thread-jobs trace (benchmarks/trace_load.py; 1,000,000 events, 5,000 with
    --quick; --trace-events N): events checked per second, the checker's peak
    resident memory, and that peak over the peak for a tenth of the events
    (about 1 when memory does not grow with the trace's length).
peer_steps_per_s, peer_ratio
    A hand-written Hypothesis machine with its own plain model
    (benchmarks/peer_machine.py) against the same reference, with the same
    budget, settings and seed; the kit and it run in alternating rounds
    (--peer-rounds, default 3) and the medians are compared:
    peer_ratio = kit steps/s / peer steps/s (target >= 1.1).
peer_ratio_over_seeds
    The same comparison once at each of --peer-seeds seeds (default 5, from
    --seed on): the median kit rate over the median peer rate. Not a target:
    it says whether peer_ratio holds beyond the one seed it is measured at.
check_spec_states_per_s
    ``conformance check-spec``'s explorer (statemachines.tools.check) over
    thread-jobs' declared scope (depth 3 with --quick): distinct states per
    second of the breadth-first search, in process; its states, transitions
    and time are in details.check_spec. Not a target: read it beside
    kit_steps_per_s (issue 37: a complete scope within 60 s per spec).
mutant_seed_kills_mean
    The mean number of seeds (of 1-5) at which each shipped mutant of
    benchmarks/seed_kills.py's SUBSET (the in-process mutants whose kill
    depended on the seed before steering, issue 36's four missed classes and
    a few long ones) is killed by the ci exploration alone, without scenarios
    or shrinking (goal 5.0; ``benchmarks/seed_kills.py --all`` for every
    in-process mutant, ``--ablation`` for each steering choice switched off).
mutant_length_ratio_max, mutant_lengths_over_1_5
    The same runs, each failure then shrunk and reduced as ``conformance
    run`` does by default (counts of examples and replays, so a seed's result
    does not depend on the machine's load): the largest ratio of a
    counterexample's steps to its mutant's declared shortest over every
    (mutant, seed) killed, and how many of those pairs exceed 1.5 times it
    (issue 33: none). Each pair's steps, ratio and reduction note are in
    details.seed_kills.lengths. Not measured with --quick (null).
kit_ttff_median_s, peer_ttff_median_s, ttff_ratio
    Time to first failure on each shipped thread-jobs mutant the peer covers:
    the kit's exploration (no shrinking) vs the peer's (no shrink phase), same
    seed and budget; medians over the mutants and their quotient (target <= 1).
    --skip-peer leaves these out.

Progress goes to stderr. Exit code 0 when every measurement ran (whether or
not the targets are met), 2 when one could not run (e.g. the kit failed).
Stateful runs that Hypothesis aborts as flaky (FlakyStrategyDefinition: races
in concurrent groups change later draws) are retried, see --attempts and
benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SPEC_PATH = ROOT / "spec" / "thread-jobs.yaml"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import hypothesis  # noqa: E402  # after the sys.path insert above
from hypothesis import HealthCheck, Verbosity  # noqa: E402  # after the sys.path insert above
from hypothesis import settings as Settings  # noqa: E402  # after the sys.path insert above
from hypothesis.errors import Flaky  # noqa: E402  # after the sys.path insert above

from conformance.engine.runner import RunConfig, prepare  # noqa: E402  # after the sys.path insert above
from conformance.engine.stateful import (  # noqa: E402  # after the sys.path insert above
    PROFILES,
    Driver,
    Explorer,
    carry_out,
    exploration_test,
    run_stateful,
)
from statemachines import Model, Spec, load_spec  # noqa: E402  # after the sys.path insert above
from statemachines.model.steps import Reset  # noqa: E402  # after the sys.path insert above

TARGETS = {
    "overhead_ratio": {"op": ">=", "value": 0.5},
    "model_cost_ratio_100k_vs_100": {"op": "<=", "value": 2.0},
    "ci_wall_s": {"op": "<", "value": 60.0},
    "peer_ratio": {"op": ">=", "value": 1.1},
    # the kit's median time to first failure over the peer's at most (kit median <= peer median)
    "ttff_ratio": {"op": "<=", "value": 1.0},
    # wall time of the ci run with 1 worker / with 2 (`run --workers 2`, docs/ci.md)
    "workers_speedup": {"op": ">=", "value": 1.6},
    # the bundled CLI reference (spec async-command, one process per operation), ci profile, --workers 2
    "cli_ci_wall_s": {"op": "<=", "value": 300.0},
    # a failing run (a task table whose same-instant completions come out in start order) over a
    # passing run of the same implementation without the bug, both whole `conformance run`s (issue 33)
    "failing_to_passing_wall_ratio": {"op": "<=", "value": 2.0},
}

# Sizes. "full" is the measurement; "quick" only checks that everything runs.
FULL = {
    "profile": "ci",
    "model_sizes": (100, 100_000),
    "model_reps": 50,  # repetitions of the operation mix per timed round
    "model_rounds": 7,  # timed rounds per size; the median round is reported
    "warmup_examples": 5,
}
QUICK = {
    "profile": "quick",
    "model_sizes": (100, 10_000),
    "model_reps": 10,
    "model_rounds": 3,
    "warmup_examples": 2,
}
JOBS_PER_THREAD = 100  # how the live jobs are spread over threads in the model benchmark


class BenchmarkError(Exception):
    pass


class _Flaky(Exception):
    """A stateful run Hypothesis gave up on because the same choices produced
    different draws (a race resolved differently on replay): retried."""

    def __init__(self, message: str, steps: int = 0, examples: int = 0, seconds: float = 0.0):
        super().__init__(message)
        self.attempt = {"error": message, "steps": steps, "examples": examples, "seconds": round(seconds, 3)}


WARNINGS: list[str] = []


def with_retries(measure, attempts: int, what: str, partial=None) -> dict:
    """Run ``measure()``; when Hypothesis aborts it as flaky, run it again (up to
    ``attempts`` times in all). Aborted attempts are kept in the result. When
    every attempt aborts, ``partial(attempts)`` builds the result from them (or
    the benchmark fails when there is no ``partial``)."""
    failed = []
    for attempt in range(1, attempts + 1):
        try:
            result = measure()
        except _Flaky as exc:
            failed.append(exc.attempt)
            log(f"{what}: attempt {attempt} aborted ({exc}); " + ("retrying" if attempt < attempts else "giving up"))
            continue
        result["completed"] = True
        result["aborted_attempts"] = failed
        return result
    if partial is None:
        raise BenchmarkError(f"{what}: every one of {attempts} attempts was aborted as flaky: {failed[-1]['error']}")
    WARNINGS.append(
        f"{what}: all {attempts} attempts were aborted by Hypothesis as flaky "
        f"(FlakyStrategyDefinition); the reported figures come from the aborted attempts"
    )
    result = partial(failed)
    result["completed"] = False
    result["aborted_attempts"] = failed
    return result


def _rate_from_aborted(failed: list[dict]) -> dict:
    """The longest aborted attempt, as a rate: the steps it ran were real work."""
    best = max(failed, key=lambda a: a["steps"])
    if not best["steps"] or not best["seconds"]:
        raise BenchmarkError(f"no usable attempt: {best['error']}")
    return {
        "steps": best["steps"],
        "examples": best["examples"],
        "seconds": best["seconds"],
        "steps_per_s": best["steps"] / best["seconds"],
    }


def log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def hypothesis_settings(max_examples: int, step_count: int) -> Settings:
    """Exactly the settings conformance.engine.stateful.run_stateful uses."""
    return Settings(
        max_examples=max_examples,
        stateful_step_count=step_count,
        deadline=None,
        database=None,
        verbosity=Verbosity.quiet,
        print_blob=False,
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,
    )


# --------------------------------------------------------------------------- kit
STDIO_EXAMPLE = ROOT / "examples" / "python-stdio" / "adapter.py"


def _one_at_a_time_reference():
    """The reference, declaring no concurrency (as the stdio example does)."""
    from lifecycle_references.thread_jobs import ReferenceAdapter

    class OneAtATime(ReferenceAdapter):
        def describe(self) -> dict:
            return {**super().describe(), "capabilities": {"concurrent": False}}

    return OneAtATime()


def measure_kit(profile: str, seed: int, adapter_cmd: str | None = None, one_at_a_time: bool = False) -> dict:
    """run_stateful() against the reference implementation, as the CLI runs it
    (minus the scenarios and the reports). Spec loading is outside the timing.
    With ``adapter_cmd``, the same reference is driven through the stdio
    protocol (examples/python-stdio wraps it)."""
    prepared = prepare(
        RunConfig(
            spec_path=str(SPEC_PATH),
            profile=profile,
            seed=seed,
            report_dir=None,
            adapter_cmd=adapter_cmd,
            adapter_factory=_one_at_a_time_reference if one_at_a_time else None,
            adapter_label="reference (no concurrency)" if one_at_a_time else None,
        )
    )
    session = prepared.session
    capabilities = prepared.identity.get("capabilities") or {}
    try:
        calls_before = session.calls
        started = time.perf_counter()
        outcome = run_stateful(prepared.spec, session, profile=profile, seed=seed, capabilities=capabilities)
        seconds = time.perf_counter() - started
        adapter_calls = session.calls - calls_before
    finally:
        session.close()
    if outcome.verdict != "pass":
        message = outcome.failure.message if outcome.failure else outcome.verdict
        if outcome.failure is not None and outcome.failure.kind == "nondeterminism":
            raise _Flaky(f"kit: {message.splitlines()[0]}", outcome.steps, outcome.examples, seconds)
        raise BenchmarkError(f"the kit's stateful run did not pass against the reference: {message}")
    return {
        "steps": outcome.steps,
        "examples": outcome.examples,
        "seconds": round(seconds, 4),
        "steps_per_s": outcome.steps / seconds,
        # calls made through Session._invoke (plain calls, batch calls, probes);
        # the calls of concurrent groups go through the thread pool and are not counted
        "sequential_adapter_calls": adapter_calls,
    }


# -------------------------------------------------------------------------- bare
@dataclass
class _BareStats:
    examples: int = 0
    steps: int = 0
    adapter_calls: int = 0


class _Records:
    def __init__(self) -> None:
        self.records: dict = {}


class _LiveKeys:
    """What the kit's Explorer reads from its model to prefer live keys
    (``field``, ``spec.lifecycle.terminal``, ``store.records``), kept from the
    implementation's answers instead of a model: every result object carrying
    the entity key and the lifecycle field records that entity's state.
    Evictions are not visible in answers, so evicted entities stay known here."""

    def __init__(self, spec: Spec) -> None:
        self.spec, self.field, self.key = spec, spec.lifecycle.field, spec.entity.key
        self.store = _Records()

    def clear(self) -> None:
        self.store.records.clear()

    def note(self, node) -> None:
        if isinstance(node, dict):
            key, state = node.get(self.key), node.get(self.field)
            if isinstance(key, str) and isinstance(state, str):
                self.store.records[key] = {self.field: state}
            for value in node.values():
                if isinstance(value, (dict, list)):
                    self.note(value)
        elif isinstance(node, list):
            for value in node:
                self.note(value)


def build_bare_example(spec: Spec, params: dict, explorer: Explorer, adapter, stats: _BareStats, concurrency: str):
    """The kit's example (conformance.engine.stateful.build_example) with the session
    replaced by direct adapter calls: the same draws in the same order, the same
    adapter calls for plain steps, batches, clock moves and concurrent groups;
    no model, no comparison, no probe, no schema or invariant checks."""
    key_field = spec.entity.key
    live = _LiveKeys(spec)
    explorer.model = live  # the Explorer prefers live keys; here they come from the answers
    # operations that forget everything (the spec's `reset` step), so live keys are cleared
    resets = {name for name, op in spec.operations.items() if any(isinstance(step, Reset) for step in op.steps)}

    class BareDriver(Driver):
        """The kit's actions, carried out by calling the adapter directly."""

        def __init__(self, machine):
            self.machine = machine

        def call(self, operation: str, args: dict) -> dict:
            stats.adapter_calls += 1
            response = adapter.call(operation, args)
            self.machine._note(operation, response)
            return response

        def advance(self, ms: int) -> None:
            self.machine.now += int(ms)
            adapter.set_clock(self.machine.now)

        def concurrently(self, calls: list, lead: int = -1) -> None:
            stats.adapter_calls += len(calls)
            if concurrency == "sequential":
                responses = [adapter.call(op, args) for op, args in calls]
            else:  # daemon threads and a barrier, as Session.call_concurrently
                barrier = threading.Barrier(len(calls))
                boxes: list = [None] * len(calls)

                def run(i, op, args):
                    try:
                        barrier.wait(timeout=10.0)
                    except threading.BrokenBarrierError:
                        pass
                    boxes[i] = adapter.call(op, args)

                threads = [
                    threading.Thread(target=run, args=(i, op, args), daemon=True) for i, (op, args) in enumerate(calls)
                ]
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join(timeout=10.0)
                responses = boxes
            for (op, _), response in zip(calls, responses):
                self.machine._note(op, response)

    class BareExample:
        def __init__(self):
            adapter.reset(0)
            live.clear()
            explorer.begin_example()  # as the kit's example: a swarm drawn with its first step
            stats.examples += 1
            self.now = 0
            self.keys: list = []
            self.seen: list = []
            self.batches = 0
            self.driver = BareDriver(self)

        # The kit learns entity keys from its model; without a model, take them
        # from the answers (a created or touched entity's key in the result).
        def _note(self, operation: str, response) -> None:
            result = response.get("result") if isinstance(response, dict) else None
            if operation in resets and result is not None:
                live.clear()
            if isinstance(result, dict):
                key = result.get(key_field)
                if isinstance(key, str):
                    self.seen.append(key)
                live.note(result)

        def _note_keys(self) -> None:
            # at the same point as the kit: after each step
            for key in self.seen:
                if key not in self.keys:
                    self.keys.append(key)
            self.seen.clear()

        def step(self, step):
            stats.steps += 1
            carry_out(explorer, step, self, self.driver)  # the kit's own action mix and draws
            self._note_keys()

        def teardown(self):
            pass

    return BareExample


def measure_bare(profile: str, seed: int, concurrency: str, max_examples: int | None = None) -> dict:
    """The bare machine with the same settings and seed as run_stateful(profile, seed)."""
    from lifecycle_references.thread_jobs import ReferenceAdapter

    spec = load_spec(str(SPEC_PATH))
    config = PROFILES[profile]
    adapter = ReferenceAdapter()
    identity = adapter.describe()
    # the parameters the kit would use: spec defaults (the reference declares none)
    params = spec.default_parameters()
    stats = _BareStats()
    try:
        started = time.perf_counter()
        explorer = Explorer(spec, params, bool((identity.get("capabilities") or {}).get("concurrent")))
        example = build_bare_example(spec, params, explorer, adapter, stats, concurrency)
        # the kit's own runner (conformance.engine.stateful.exploration_test): the same loop and draws
        test = exploration_test(
            example,
            explorer.draw_step,
            step_count=config["stateful_step_count"],
            settings=hypothesis_settings(
                max_examples if max_examples is not None else config["max_examples"], config["stateful_step_count"]
            ),
            key="bare",
            seed=seed,
        )
        try:
            test()
        except Flaky as exc:
            raise _Flaky(
                f"bare: {type(exc).__name__}: {str(exc).splitlines()[0]}",
                stats.steps,
                stats.examples,
                time.perf_counter() - started,
            ) from None
        seconds = time.perf_counter() - started
    finally:
        adapter.close()
    return {
        "steps": stats.steps,
        "examples": stats.examples,
        "seconds": round(seconds, 4),
        "steps_per_s": stats.steps / seconds,
        "adapter_calls": stats.adapter_calls,
    }


def warm_up(profile: str, seed: int, concurrency: str, examples: int) -> None:
    """Pay one-off costs (imports, lazily built strategies, CEL and jsonschema
    caches) before either side is timed."""
    config = PROFILES[profile]
    try:
        measure_bare(profile, seed + 1, concurrency, max_examples=examples)
    except _Flaky as exc:  # only warming up: what ran is enough
        log(f"warm-up (bare): {exc}")
    prepared = prepare(RunConfig(spec_path=str(SPEC_PATH), profile=profile, seed=seed + 1, report_dir=None))
    try:
        from conformance.engine.stateful import _Stats, build_example

        explorer = Explorer(
            prepared.spec,
            prepared.session.params,
            bool((prepared.identity.get("capabilities") or {}).get("concurrent")),
        )
        test = exploration_test(
            build_example(prepared.spec, prepared.session, explorer, _Stats()),
            explorer.draw_step,
            step_count=config["stateful_step_count"],
            key="warm-up",
            seed=seed + 1,
            settings=hypothesis_settings(examples, config["stateful_step_count"]),
        )
        try:
            test()
        except Flaky as exc:
            log(f"warm-up (kit): {type(exc).__name__}")
    finally:
        prepared.session.close()


def profile_kit(profile: str, seed: int, path: str) -> None:
    """One extra kit run under cProfile (never part of the reported numbers)."""
    import cProfile
    import io
    import pstats

    log(f"cProfile of a kit run -> {path}")
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        measure_kit(profile, seed)
    except _Flaky as exc:  # the profile of an aborted run still shows where the time goes
        log(f"the profiled run was aborted as flaky: {exc}")
    finally:
        profiler.disable()
    profiler.dump_stats(path)
    text = io.StringIO()
    stats = pstats.Stats(profiler, stream=text)
    stats.sort_stats("tottime").print_stats(20)
    stats.sort_stats("cumulative").print_stats(r"conformance|statemachines", 25)
    print(text.getvalue(), file=sys.stderr)


# -------------------------------------------------------------------------- peer
# A hand-written Hypothesis machine with its own model (benchmarks/peer_machine.py):
# what a team would write instead of the kit, measured on the same reference,
# with the same budget and Hypothesis settings.
def measure_peer(profile: str, seed: int, adapter_factory=None, shrink: bool = True) -> dict:
    """The peer machine against the reference (or ``adapter_factory``), with
    the settings run_stateful uses for ``profile``; the seed fixed."""
    from peer_machine import run_peer  # beside this script

    from lifecycle_references.thread_jobs import ReferenceAdapter

    config = PROFILES[profile]
    outcome = run_peer(
        adapter_factory or ReferenceAdapter,
        max_examples=config["max_examples"],
        step_count=config["stateful_step_count"],
        seed=seed,
        shrink=shrink,
        settings=hypothesis_settings(config["max_examples"], config["stateful_step_count"]),
    )
    if adapter_factory is None and outcome.verdict != "pass":
        raise BenchmarkError(f"the peer machine did not pass against the reference: {outcome.failure}")
    return {
        "verdict": outcome.verdict,
        "steps": outcome.steps,
        "examples": outcome.examples,
        "seconds": round(outcome.seconds, 4),
        "steps_per_s": outcome.steps / outcome.seconds,
        "adapter_calls": outcome.calls,
        "first_failure_s": outcome.first_failure_s,
        "failure": outcome.failure,
    }


def measure_peer_rounds(profile: str, seed: int, rounds: int, attempts: int) -> dict:
    """Kit and peer in alternating rounds (kit, peer, kit, peer, ...) so that
    changing machine load affects both alike; medians of the rounds."""
    kit_runs, peer_runs = [], []
    for i in range(rounds):
        log(f"peer comparison: kit stateful run, profile {profile}, seed {seed} ({i + 1}/{rounds})")
        kit_runs.append(
            with_retries(lambda: measure_kit(profile, seed), attempts, "kit (peer comparison)", _rate_from_aborted)
        )
        log(f"peer comparison: peer machine, profile {profile}, seed {seed} ({i + 1}/{rounds})")
        peer_runs.append(measure_peer(profile, seed))
    kit_sps = statistics.median(r["steps_per_s"] for r in kit_runs)
    peer_sps = statistics.median(r["steps_per_s"] for r in peer_runs)
    return {
        "kit_steps_per_s": kit_sps,
        "peer_steps_per_s": peer_sps,
        "ratio": kit_sps / peer_sps,
        "rounds": rounds,
        "kit_runs": kit_runs,
        "peer_runs": peer_runs,
    }


def measure_peer_seeds(profile: str, seeds: list[int], attempts: int) -> dict:
    """Kit and peer once each at every one of ``seeds`` (kit, peer, in turn).
    One seed's rate moves with the mix of steps it happens to generate (more
    batches, bigger threads), on either side; the medians over several seeds
    say whether the kit is faster in general, not just at the seed measured."""
    rows = []
    for seed in seeds:
        log(f"peer comparison across seeds: kit, then peer, seed {seed}")
        kit = with_retries(
            lambda seed=seed: measure_kit(profile, seed), attempts, f"kit (seed {seed})", _rate_from_aborted
        )
        peer = measure_peer(profile, seed)
        rows.append(
            {
                "seed": seed,
                "kit_steps_per_s": round(kit["steps_per_s"], 2),
                "peer_steps_per_s": round(peer["steps_per_s"], 2),
                "ratio": round(kit["steps_per_s"] / peer["steps_per_s"], 4),
            }
        )
    kit_sps = statistics.median(r["kit_steps_per_s"] for r in rows)
    peer_sps = statistics.median(r["peer_steps_per_s"] for r in rows)
    return {
        "ratio": kit_sps / peer_sps,
        "kit_median_steps_per_s": kit_sps,
        "peer_median_steps_per_s": peer_sps,
        "median_of_ratios": statistics.median(r["ratio"] for r in rows),
        "seeds": rows,
    }


def _first_failure_clock(session) -> dict:
    """Note the moment the session first reports a failure (of a call, a clock
    move, a concurrent group, the probe or the model's invariants): the kit's
    time to first failure, whatever Hypothesis does afterwards."""
    from conformance.engine.failures import Failure

    seen: dict = {}
    for name in ("call", "advance", "call_concurrently", "probe", "check_model_invariants"):
        method = getattr(session, name, None)
        if method is None:
            continue

        def wrapped(*args, _method=method, **kwargs):
            out = _method(*args, **kwargs)
            failure = out[1] if isinstance(out, tuple) and len(out) == 2 else out
            if isinstance(failure, Failure) and "at" not in seen:
                seen["at"] = time.perf_counter()
            return out

        setattr(session, name, wrapped)
    return seen


def kit_ttff(profile: str, seed: int, name: str, mutant) -> dict:
    """The kit's exploration (run_stateful, no scenarios) against one mutant,
    with shrinking off (shrink_s=0; run_stateful then stops at the first
    failure Hypothesis's shrinker reproduces); seconds from the start of the
    exploration to the first failure the session reported."""
    prepared = prepare(
        RunConfig(
            spec_path=str(SPEC_PATH),
            profile=profile,
            seed=seed,
            report_dir=None,
            adapter_factory=mutant.factory,
            adapter_label=f"mutant:{name}",
        )
    )
    session = prepared.session
    seen = _first_failure_clock(session)
    try:
        started = time.perf_counter()
        outcome = run_stateful(
            prepared.spec,
            session,
            profile=profile,
            seed=seed,
            shrink_s=0,
            capabilities=prepared.identity.get("capabilities") or {},
        )
        seconds = time.perf_counter() - started
    finally:
        session.close()
    found = outcome.verdict == "fail"
    first = seen["at"] - started if found and "at" in seen else (seconds if found else None)
    return {
        "found": found,
        "ttff_s": None if first is None else round(first, 4),
        "seconds": round(seconds, 4),
        "examples": outcome.examples,
        "steps": outcome.steps,
        "failure_kind": outcome.failure.kind if outcome.failure else None,
    }


def measure_ttff(profile: str, seed: int) -> dict:
    """Time to first failure, kit vs peer, for every shipped mutant the peer
    covers; per mutant the kit runs first, then the peer (the same seed and
    budget). A side that finds nothing within the budget counts as infinitely
    slow for the median (its row says found: false, ttff_s: null)."""
    from peer_machine import COVERS

    from lifecycle_references.thread_jobs.mutants import MUTANTS

    rows = []
    for name in COVERS:
        mutant = MUTANTS[name]
        log(f"time to first failure: {name} (kit, then peer)")
        kit = kit_ttff(profile, seed, name, mutant)
        peer = measure_peer(profile, seed, adapter_factory=mutant.factory, shrink=False)
        peer_found = peer["verdict"] == "fail"
        rows.append(
            {
                "mutant": name,
                "kit_ttff_s": kit["ttff_s"],
                "peer_ttff_s": round(peer["first_failure_s"], 4)
                if peer_found and peer["first_failure_s"] is not None
                else None,
                "kit_found": kit["found"],
                "peer_found": peer_found,
                "kit": kit,
                "peer": {k: peer[k] for k in ("steps", "examples", "seconds", "failure")},
            }
        )

    def median(side: str):
        values = [
            r[f"{side}_ttff_s"] if r[f"{side}_found"] and r[f"{side}_ttff_s"] is not None else float("inf")
            for r in rows
        ]
        value = statistics.median(values) if values else None
        return None if value is None or value == float("inf") else value

    kit_median, peer_median = median("kit"), median("peer")
    return {
        "kit_ttff_median_s": kit_median,
        "peer_ttff_median_s": peer_median,
        "ratio": kit_median / peer_median if kit_median is not None and peer_median else None,
        "kit_found": sum(r["kit_found"] for r in rows),
        "peer_found": sum(r["peer_found"] for r in rows),
        "kit_faster": sum(
            1 for r in rows if r["kit_found"] and (not r["peer_found"] or r["kit_ttff_s"] <= r["peer_ttff_s"])
        ),
        "mutants": rows,
    }


# ------------------------------------------------------------- failing vs passing
FAILING_MUTANT = "task-table.fires_in_start_order"  # async-jobs: same-instant completions in start order


def _whole_run(profile: str, seed: int, factory, label: str, report_dir: str) -> dict:
    """One whole run (scenarios, exploration, reduction, the hunt for more
    failures at the CLI's default --max-failures 3, reports), in this process."""
    from conformance.engine.runner import run_conformance

    started = time.perf_counter()
    report = run_conformance(
        RunConfig(
            spec_path="async-jobs",
            adapter_factory=factory,
            adapter_label=label,
            adapter_options={"profile": "task-table"},
            profile=profile,
            seed=seed,
            report_dir=report_dir,
            max_failures=3,
        )
    )
    stateful = report.get("stateful") or {}
    causes = [f for f in [stateful.get("failure"), *(stateful.get("more_failures") or [])] if f]
    return {
        "wall_s": round(time.perf_counter() - started, 3),
        "verdict": report["verdict"],
        "failures": len(causes),
        "symptoms": sum(len(f.get("symptoms") or []) for f in causes),
        "headline_steps": len(causes[0].get("steps") or []) if causes else None,
    }


def measure_failing_vs_passing(profile: str, seed: int) -> dict:
    """A failing run against the task table with one ordering bug and a
    passing run of the same table without it: wall times and their ratio."""
    import functools

    from conformance.mutants import load_mutants

    spec = load_spec(str(ROOT / "spec" / "async-jobs.yaml"))
    mutant = load_mutants(spec.implementations["mutants"])[FAILING_MUTANT]
    reference = _reference_factory(spec)
    with tempfile.TemporaryDirectory(prefix="bench-failing-") as tmp:
        log(f"whole run against the task table, passing (profile {profile}, seed {seed})")
        passing = _whole_run(profile, seed, functools.partial(reference, profile="task-table"), "reference", f"{tmp}/p")
        log(f"whole run against the task table with {FAILING_MUTANT} (profile {profile}, seed {seed})")
        failing = _whole_run(profile, seed, functools.partial(mutant.factory, profile="task-table"), "bug", f"{tmp}/f")
    if passing["verdict"] != "pass" or failing["verdict"] != "fail":
        raise BenchmarkError(
            f"failing-vs-passing: expected pass and fail, got {passing['verdict']}, {failing['verdict']}"
        )
    return {"passing": passing, "failing": failing, "ratio": round(failing["wall_s"] / passing["wall_s"], 4)}


def _reference_factory(spec: Spec):
    from conformance.adapters.python import resolve_target

    return resolve_target(spec.implementations["reference"])


# ------------------------------------------------------------------------- model
def _mix(i: int, thread: str) -> list[tuple[str, dict]]:
    """One repetition of the per-operation mix, all on ``thread``. It is steady
    state: the job it starts is finished, injected, and later evicted by the
    retention policy, so the thread keeps its size whatever the repetitions."""
    job = f"bench-{i}"
    return [
        ("start_job", {"thread_id": thread, "tool_call_id": f"bench-call-{i}", "tool_name": "search", "job_id": job}),
        ("inspect_job", {"thread_id": thread, "job_id": job}),
        ("cancel_job", {"thread_id": thread, "job_id": job, "requested_by": "user"}),
        ("observe_outcome", {"job_id": job, "outcome": "completed", "payload": "done"}),
        ("turn_boundary", {"thread_id": thread}),
        ("list_jobs", {"thread_id": thread}),
    ]


MIX_OPERATIONS = [op for op, _ in _mix(0, "t")]


def _filled_model(spec: Spec, params: dict, live_jobs: int) -> tuple[Model, str, float]:
    model = Model(spec, params)
    model.reset(0)
    started = time.perf_counter()
    for i in range(live_jobs):
        thread = f"thread-{i // JOBS_PER_THREAD}"
        prediction = model.predict(
            "start_job",
            {
                "thread_id": thread,
                "tool_call_id": f"call-{i}",
                "tool_name": "build" if i % 2 else "search",
                "job_id": f"job-{i}",
            },
        )
        if not prediction.ok:
            raise BenchmarkError(f"filling the model failed at job {i}: {prediction.error}")
    fill_s = time.perf_counter() - started
    if len(model.store) != live_jobs:
        raise BenchmarkError(f"expected {live_jobs} live jobs in the model, found {len(model.store)}")
    return model, "thread-0", fill_s


def _run_mix(
    model: Model, thread: str, start: int, reps: int, per_op: dict | None = None, check: bool = False
) -> float:
    """Run ``reps`` repetitions of the mix; return the seconds spent in predict()
    (per operation in ``per_op`` when given)."""
    calls = [c for i in range(start, start + reps) for c in _mix(i, thread)]
    predict, clock = model.predict, time.perf_counter
    total = 0.0
    for op, args in calls:
        began = clock()
        prediction = predict(op, args)
        spent = clock() - began
        total += spent
        if per_op is not None:
            per_op[op] = per_op.get(op, 0.0) + spent
        if check and not prediction.ok:
            raise BenchmarkError(f"the model benchmark's mix must succeed; {op}{args} -> {prediction.error}")
    return total


def measure_check_spec(quick: bool) -> dict:
    """check-spec's exhaustive search over thread-jobs' declared scope, in process."""
    from statemachines import load_spec
    from statemachines.tools.check import check_spec

    spec = load_spec(str(ROOT / "spec" / "thread-jobs.yaml"))
    log("check-spec over thread-jobs' declared scope" + (" (depth 3)" if quick else ""))
    report = check_spec(spec, {"max_depth": 3} if quick else None)
    if report.problems or report.violations:
        raise BenchmarkError(f"check-spec found problems in thread-jobs: {report.problems or report.violations}")
    data = report.to_dict()
    keys = ("states", "transitions", "depth", "seconds", "states_per_second", "complete")
    return {key: data[key] for key in keys}


def measure_model(sizes: tuple[int, int], reps: int, rounds: int) -> dict:
    """Per-operation cost of Model.predict at two sizes. Both models are built
    first, then timed rounds alternate between them, so drifting machine load
    affects both sizes alike; the median round of each is reported."""
    spec = load_spec(str(SPEC_PATH))
    params = spec.default_parameters()
    sides = {}
    for name, live_jobs in zip(("small", "big"), sizes):
        log(f"model: filling with {live_jobs} running jobs ({JOBS_PER_THREAD} per thread)")
        model, thread, fill_s = _filled_model(spec, params, live_jobs)
        warm = max(reps // 2, 10)
        _run_mix(model, thread, 0, warm, check=True)  # warm-up; also checks that every call succeeds
        sides[name] = {
            "model": model,
            "thread": thread,
            "next": warm,
            "rounds": [],
            "per_op": {},
            "out": {
                "running_jobs_filled": live_jobs,
                "fill_s": round(fill_s, 3),
                "fill_us_per_start_job": round(fill_s / live_jobs * 1e6, 2),
            },
        }
    log(f"model: {rounds} alternating rounds of {reps} x {len(MIX_OPERATIONS)} operations per size")
    for _ in range(rounds):
        for side in sides.values():
            per_op: dict = {}
            seconds = _run_mix(side["model"], side["thread"], side["next"], reps, per_op)
            side["next"] += reps
            side["rounds"].append(seconds / (reps * len(MIX_OPERATIONS)))
            for op, spent in per_op.items():
                side["per_op"].setdefault(op, []).append(spent / reps)
    result = {}
    for name, side in sides.items():
        model, thread = side["model"], side["thread"]
        out = side["out"]
        out["live_jobs"] = len(model.store)
        out["target_thread_jobs"] = sum(1 for _ in model.store.in_scope(thread))
        out["per_op_us_rounds"] = [round(x * 1e6, 2) for x in side["rounds"]]
        out["per_op_us"] = round(statistics.median(side["rounds"]) * 1e6, 3)
        # per call of that operation, median round
        out["by_operation_us"] = {op: round(statistics.median(t) * 1e6, 2) for op, t in side["per_op"].items()}
        result[name] = out
    sides.clear()
    gc.collect()
    result["ratio"] = result["big"]["per_op_us"] / result["small"]["per_op_us"]
    # The mix's cost is dominated by its most expensive operation; per-operation
    # ratios show whether any single operation scales with the total job count.
    result["ratio_by_operation"] = {
        op: round(result["big"]["by_operation_us"][op] / result["small"]["by_operation_us"][op], 3)
        for op in MIX_OPERATIONS
    }
    result["ratio_by_operation_geomean"] = round(statistics.geometric_mean(result["ratio_by_operation"].values()), 4)
    return result


# ---------------------------------------------------------------------------- ci
def measure_ci_run(spec: str = "spec/thread-jobs.yaml", workers: int | None = None) -> dict:
    """One ``conformance run --profile ci`` subprocess (``workers``: with
    ``--workers N``; else in one process); raises _Flaky when its only
    problem is a stateful run Hypothesis aborted as flaky (see with_retries)."""
    exe = shutil.which("conformance")
    cmd = [exe] if exe else [sys.executable, "-c", "from conformance.cli import main; main()"]
    env = {k: v for k, v in os.environ.items() if k != "CONFORMANCE_WORKERS"}
    with tempfile.TemporaryDirectory(prefix="bench-ci-") as report_dir:
        cmd += ["run", spec, "--profile", "ci", "--report-dir", report_dir]
        cmd += ["--workers", str(workers or 1)]  # one process unless asked (the default is a worker per core)
        started = time.perf_counter()
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env)
        wall = time.perf_counter() - started
        try:
            report = json.loads((Path(report_dir) / "report.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            report = None
    stateful = (report or {}).get("stateful") or {}
    if proc.returncode != 0:
        scenarios_ok = report is not None and all(
            s.get("verdict") in ("pass", "skip", "skipped") for s in report.get("scenarios", [])
        )
        failure = stateful.get("failure") or {}
        if scenarios_ok and failure.get("kind") == "nondeterminism":
            raise _Flaky(
                f"ci run: exit {proc.returncode}, {failure.get('message', '').splitlines()[0]}",
                stateful.get("steps", 0),
                stateful.get("examples", 0),
                wall,
            )
        raise BenchmarkError(
            f"`conformance run` exited {proc.returncode}: {(proc.stderr.strip() or proc.stdout.strip())[-2000:]}"
        )
    out = {
        "wall_s": wall,
        "exit_code": proc.returncode,
        "command": f"conformance run {spec} --profile ci --report-dir <tmp>" + f" --workers {workers or 1}",
    }
    if report is not None:
        out["report_duration_s"] = report.get("duration_s")
        out["stateful_steps"] = stateful.get("steps")
        out["stateful_examples"] = stateful.get("examples")
        out["stateful_duration_s"] = stateful.get("duration_s")
    return out


def measure_ci_rounds(rounds: int, attempts: int, *, with_workers: bool) -> tuple[dict, dict | None]:
    """The ci run in one process and (``with_workers``) with ``--workers 2``,
    in alternating rounds so that changing machine load affects both alike:
    each side's run of median wall time, with every round's wall time under
    ``rounds_wall_s`` (a single run of about three seconds moves by a tenth
    of a second between runs, as much as the speed-up's margin)."""
    ones, twos = [], []
    for i in range(rounds):
        log(f"conformance run --profile ci (subprocess) ({i + 1}/{rounds})")
        ones.append(
            with_retries(
                measure_ci_run,
                attempts,
                "ci run",
                lambda failed: {
                    "wall_s": None,
                    "exit_code": 1,
                    "command": "conformance run spec/thread-jobs.yaml --profile ci --report-dir <tmp>",
                },
            )
        )
        if with_workers:
            log(f"conformance run --profile ci --workers 2 (subprocess) ({i + 1}/{rounds})")
            twos.append(
                with_retries(
                    lambda: measure_ci_run(workers=2), attempts, "ci run, 2 workers", lambda failed: {"wall_s": None}
                )
            )
    return _median_run(ones), (_median_run(twos) if with_workers else None)


def _median_run(runs: list[dict]) -> dict:
    """The run of median wall time (the lower middle one of an even count),
    noting every run's wall time; a run without one (it never completed)
    makes the whole measurement missing."""
    walls = [run["wall_s"] for run in runs]
    if any(wall is None for wall in walls):
        return {**runs[0], "wall_s": None, "rounds_wall_s": walls}
    middle = sorted(runs, key=lambda run: run["wall_s"])[(len(runs) - 1) // 2]
    return {**middle, "rounds_wall_s": [round(wall, 3) for wall in walls]}


# ----------------------------------------------------------------------- output
def _calls_per_s(runs: list[dict]) -> float | None:
    """The median of the runs' sequential adapter calls per second, rounded
    (None when every run was aborted as flaky: an aborted run has no call count)."""
    rates = [r["sequential_adapter_calls"] / r["seconds"] for r in runs if "sequential_adapter_calls" in r]
    return round(statistics.median(rates), 2) if rates else None


def _round(value, digits: int = 4):
    return None if value is None else round(value, digits)


def _meets(name: str, value) -> bool | None:
    if value is None:
        return None
    target = TARGETS[name]
    return {">=": value >= target["value"], "<=": value <= target["value"], "<": value < target["value"]}[target["op"]]


def machine_info() -> dict:
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = None
    return {
        "cpu_count": os.cpu_count(),
        "usable_cpus": usable,
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "hypothesis": hypothesis.__version__,
        "load_average": load,
    }


def render_table(result: dict) -> str:
    rows = [("metric", "value", "target", "meets")]
    meets = result["meets_targets"]

    def fmt(value, unit=""):
        return "skipped" if value is None else (f"{value:,.3f}{unit}" if isinstance(value, float) else f"{value}{unit}")

    for name, unit in (
        ("kit_steps_per_s", ""),
        ("kit_calls_per_s", ""),
        ("bare_steps_per_s", ""),
        ("overhead_ratio", ""),
        ("model_cost_ratio_100k_vs_100", ""),
        ("check_spec_states_per_s", ""),
        ("ci_wall_s", " s"),
        ("peer_steps_per_s", ""),
        ("peer_ratio", ""),
        ("peer_ratio_over_seeds", ""),
        ("kit_ttff_median_s", " s"),
        ("peer_ttff_median_s", " s"),
        ("ttff_ratio", ""),
        ("workers_speedup", ""),
        ("cli_ci_wall_s", " s"),
        ("failing_to_passing_wall_ratio", ""),
        ("mutant_seed_kills_mean", ""),
        ("mutant_length_ratio_max", ""),
        ("mutant_lengths_over_1_5", ""),
    ):
        target = TARGETS.get(name)
        rows.append(
            (
                name,
                fmt(result[name], unit),
                f"{target['op']} {target['value']:g}" if target else "",
                "" if name not in meets else {True: "yes", False: "NO", None: "-"}[meets[name]],
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    d = result["details"]
    s = result["settings"]
    lines.append("")
    lines.append(
        f"stateful: profile {s['profile']} ({s['max_examples']} examples x {s['stateful_step_count']} steps), "
        f"seed {result['seed']}, bare concurrency: {s['bare_concurrency']}"
    )
    lines.append(f"  kit : {d['kit']['steps']} steps / {d['kit']['examples']} examples in {d['kit']['seconds']:.2f} s")
    lines.append(
        f"  bare: {d['bare']['steps']} steps / {d['bare']['examples']} examples in {d['bare']['seconds']:.2f} s"
    )
    m = d["model"]
    lines.append(
        f"model: {m['small']['running_jobs_filled']:,} vs {m['big']['running_jobs_filled']:,} running jobs "
        f"({JOBS_PER_THREAD} per thread): {m['small']['per_op_us']:,.1f} vs {m['big']['per_op_us']:,.1f} "
        f"us per operation (median round)"
    )
    for op in MIX_OPERATIONS:
        lines.append(
            f"  {op:<16} {m['small']['by_operation_us'][op]:>10,.1f} us  {m['big']['by_operation_us'][op]:>10,.1f} us"
            f"  x{m['ratio_by_operation'][op]:.2f}"
        )
    for side in ("kit", "bare"):
        if d[side].get("aborted_attempts"):
            lines.append(
                f"  {side}: {len(d[side]['aborted_attempts'])} attempt(s) aborted by Hypothesis as flaky, "
                f"then {'completed' if d[side]['completed'] else 'gave up (rate of the longest aborted attempt)'}"
            )
    if d.get("ci"):
        ci = d["ci"]
        took = "no complete run" if ci["wall_s"] is None else f"exit {ci['exit_code']} in {ci['wall_s']:.2f} s"
        aborted = f" after {len(ci['aborted_attempts'])} aborted attempt(s)" if ci.get("aborted_attempts") else ""
        lines.append(f"ci run: {ci['command']} -> {took}{aborted}")
    if d.get("peer"):
        p = d["peer"]
        kit_rates = ", ".join(f"{r['steps_per_s']:.1f}" for r in p["kit_runs"])
        peer_rates = ", ".join(f"{r['steps_per_s']:.1f}" for r in p["peer_runs"])
        lines.append(
            f"peer (benchmarks/peer_machine.py), {p['rounds']} alternating round(s): "
            f"kit {kit_rates} steps/s, peer {peer_rates} steps/s"
        )
    if d.get("ttff"):
        t = d["ttff"]
        lines.append(
            f"time to first failure ({t['kit_found']} found by the kit, {t['peer_found']} by the peer, "
            f"kit as fast or faster on {t['kit_faster']} of {len(t['mutants'])}):"
        )
        for row in t["mutants"]:
            lines.append(
                f"  {row['mutant']:<24} kit {fmt(row['kit_ttff_s'], ' s') if row['kit_found'] else 'not found':>10}"
                f"   peer {fmt(row['peer_ttff_s'], ' s') if row['peer_found'] else 'not found':>10}"
            )
    over = (d.get("seed_kills") or {}).get("over_limit")
    if over:
        lines.append(f"counterexamples over {d['seed_kills']['length_limit']:g} times their mutant's shortest:")
        lines.extend(f"  {row}" for row in over)
    if d.get("traces"):
        t = d["traces"]
        lines.append(
            f"check-trace: {t['full']['events']:,} events at {t['full']['events_per_s']:,.0f}/s, peak "
            f"{t['full']['peak_rss_mb']:,.1f} MB ({t['tenth']['events']:,} events: "
            f"{t['tenth']['peak_rss_mb']:,.1f} MB; ratio {t['rss_ratio_vs_tenth']:.2f})"
        )
    lines.append(
        f"machine: {result['machine']['usable_cpus']} usable cpus, Python {result['machine']['python']}, "
        f"load average {result['machine']['load_average_at_start']} -> {result['machine']['load_average_at_end']}"
    )
    for warning in result["warnings"]:
        lines.append(f"WARNING: {warning}")
    return "\n".join(lines)


def _check_trace_subprocess(path: Path, report_dir: Path) -> tuple[float, float, int]:
    """(wall seconds, peak RSS in MB, exit code) of one check-trace run."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "conformance.cli",
            "check-trace",
            "thread-jobs",
            str(path),
            "--report-dir",
            str(report_dir),
            "-q",
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_maxrss / 1024.0, proc.returncode


def measure_traces(events: int) -> dict:
    """check-trace over a long trace, and over a tenth of it for the memory ratio."""
    from trace_load import write_trace  # beside this script

    with tempfile.TemporaryDirectory(prefix="trace-bench-") as tmp:
        results = {}
        for label, count in (("tenth", max(1, events // 10)), ("full", events)):
            path = Path(tmp) / f"{label}.jsonl"
            log(f"check-trace over {count} events (writing the trace with the reference)")
            written = write_trace(path, count)
            wall, rss_mb, code = _check_trace_subprocess(path, Path(tmp) / f"reports-{label}")
            if code != 0:
                raise BenchmarkError(f"check-trace exited {code} on a conforming trace of {written} events")
            results[label] = {
                "events": written,
                "wall_s": round(wall, 3),
                "events_per_s": round(written / wall, 1),
                "peak_rss_mb": round(rss_mb, 1),
            }
    return {**results, "rss_ratio_vs_tenth": round(results["full"]["peak_rss_mb"] / results["tenth"]["peak_rss_mb"], 4)}


def measure_subset_kills(args: argparse.Namespace) -> dict:
    """benchmarks/seed_kills.py's figures on its subset: the seeds that kill
    each mutant and the length of each seed's counterexample (with --quick,
    the subset's first mutant of each spec at seeds 1-2, and the kills
    alone: measuring every mutant, or shrinking and reducing every failure,
    is not a smoke test's work); empty with --skip-seed-kills."""
    from seed_kills import SEEDS, SUBSET, measure_seed_kills  # beside this script

    if args.skip_seed_kills:
        return {}
    if args.quick:
        log(
            "seeds 1-2 that kill the first mutant of each spec in benchmarks/seed_kills.py's subset (exploration alone, ci)"
        )
        firsts = {spec: names[:1] for spec, names in SUBSET.items()}
        return measure_seed_kills(firsts, seeds=(1, 2), log=log, lengths=False)
    log(
        "seeds 1-5 that kill each mutant of benchmarks/seed_kills.py's subset (exploration alone, ci), "
        "and the steps of each seed's shrunk and reduced counterexample over the mutant's shortest"
    )
    return measure_seed_kills(SUBSET, seeds=SEEDS, log=log)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--json", action="store_true", help="print only the JSON object on stdout")
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke test (not a measurement)")
    parser.add_argument("--skip-ci-run", action="store_true", help="do not time `conformance run --profile ci`")
    parser.add_argument(
        "--skip-workers",
        action="store_true",
        help="do not time the ci runs with --workers 2 (workers_speedup, cli_ci_wall_s; --skip-ci-run skips them too)",
    )
    parser.add_argument("--seed", type=int, default=1, help="seed of both stateful runs (default 1, as the CLI)")
    parser.add_argument(
        "--profile",
        choices=sorted(PROFILES),
        default=None,
        help="stateful profile for kit and bare (default: ci; quick with --quick)",
    )
    parser.add_argument(
        "--bare-concurrency",
        choices=("pool", "sequential"),
        default="pool",
        help="how the bare machine runs concurrent groups: the kit's thread pool and "
        "barrier (default) or one call after another",
    )
    parser.add_argument(
        "--repeats", type=int, default=1, help="timed kit/bare runs (alternating); the medians are reported"
    )
    parser.add_argument(
        "--attempts",
        type=int,
        default=5,
        help="tries per stateful run (kit, bare, ci run) when Hypothesis aborts it as flaky "
        "(default 5); aborted attempts are listed in details",
    )
    parser.add_argument(
        "--trace-events",
        type=int,
        default=None,
        help="events in the check-trace benchmark's trace (default 1,000,000; 5,000 with --quick)",
    )
    parser.add_argument("--skip-traces", action="store_true", help="do not time `conformance check-trace`")
    parser.add_argument(
        "--skip-seed-kills", action="store_true", help="do not count the seeds that kill each mutant of the subset"
    )
    parser.add_argument(
        "--skip-failing",
        action="store_true",
        help="do not time a failing run against a passing one (failing_to_passing_wall_ratio)",
    )
    parser.add_argument(
        "--skip-peer",
        action="store_true",
        help="do not measure the hand-written peer machine (peer_steps_per_s, peer_ratio, "
        "time to first failure on the mutants)",
    )
    parser.add_argument(
        "--ci-rounds",
        type=int,
        default=None,
        help="alternating 1-worker/2-worker `conformance run --profile ci` rounds for ci_wall_s "
        "and workers_speedup (default 3; 1 with --quick)",
    )
    parser.add_argument(
        "--peer-rounds",
        type=int,
        default=None,
        help="alternating kit/peer rounds for peer_ratio (default 3; 1 with --quick)",
    )
    parser.add_argument(
        "--peer-seeds",
        type=int,
        default=None,
        help="also compare kit and peer once at each of this many seeds from --seed on, for "
        "peer_ratio_over_seeds (default 5; 0 leaves it out; 2 with --quick)",
    )
    parser.add_argument(
        "--cprofile",
        metavar="FILE",
        help="after the measurements, profile one more (untimed) kit run with cProfile, "
        "write the stats to FILE and print the top functions to stderr",
    )
    args = parser.parse_args(argv)

    sizes = dict(QUICK if args.quick else FULL)
    profile = args.profile or sizes["profile"]
    seed = args.seed
    machine = machine_info()  # load average before the run: other work on the machine skews the numbers
    try:
        log(f"warm-up ({sizes['warmup_examples']} examples each)")
        warm_up(profile, seed, args.bare_concurrency, sizes["warmup_examples"])
        kit_runs, bare_runs = [], []
        for repeat in range(max(1, args.repeats)):
            log(f"kit stateful run, profile {profile}, seed {seed} ({repeat + 1}/{args.repeats})")
            kit_runs.append(with_retries(lambda: measure_kit(profile, seed), args.attempts, "kit", _rate_from_aborted))
            log(f"bare stateful run, profile {profile}, seed {seed} ({repeat + 1}/{args.repeats})")
            bare_runs.append(
                with_retries(
                    lambda: measure_bare(profile, seed, args.bare_concurrency),
                    args.attempts,
                    "bare",
                    _rate_from_aborted,
                )
            )
        kit_sps = statistics.median(r["steps_per_s"] for r in kit_runs)
        bare_sps = statistics.median(r["steps_per_s"] for r in bare_runs)
        # The same reference, the same kit, through the stdio protocol. The stdio
        # example answers one request at a time (no concurrent groups), so the
        # in-process side is measured again under the same capability.
        log(f"kit stateful run through stdio ({STDIO_EXAMPLE.relative_to(ROOT)}), profile {profile}, seed {seed}")
        stdio = with_retries(
            lambda: measure_kit(profile, seed, f"{shlex.quote(sys.executable)} {shlex.quote(str(STDIO_EXAMPLE))}"),
            args.attempts,
            "stdio",
            _rate_from_aborted,
        )
        log(f"kit stateful run in process, concurrency off, profile {profile}, seed {seed}")
        inproc = with_retries(
            lambda: measure_kit(profile, seed, one_at_a_time=True),
            args.attempts,
            "in-process (no concurrency)",
            _rate_from_aborted,
        )
        model = measure_model(sizes["model_sizes"], sizes["model_reps"], sizes["model_rounds"])
        check = measure_check_spec(args.quick)
        ci = workers = cli = None
        if not args.skip_ci_run:
            ci, workers = measure_ci_rounds(
                max(1, args.ci_rounds or (1 if args.quick else 3)), args.attempts, with_workers=not args.skip_workers
            )
        if workers is not None:
            log("conformance run spec/async-command.yaml --profile ci --workers 2 (the CLI reference)")
            cli = with_retries(
                lambda: measure_ci_run("spec/async-command.yaml", workers=2),
                args.attempts,
                "CLI reference ci run, 2 workers",
                lambda failed: {"wall_s": None},
            )
        peer = ttff = peer_seeds = None
        if not args.skip_peer:
            peer = measure_peer_rounds(
                profile, seed, max(1, args.peer_rounds or (1 if args.quick else 3)), args.attempts
            )
            ttff = measure_ttff(profile, seed)
            count = args.peer_seeds if args.peer_seeds is not None else (2 if args.quick else 5)
            if count > 0:
                peer_seeds = measure_peer_seeds(profile, list(range(seed, seed + count)), args.attempts)
        failing = None
        if not args.skip_failing:
            failing = measure_failing_vs_passing(profile, seed)
        traces = None
        if not args.skip_traces:
            traces = measure_traces(args.trace_events or (5_000 if args.quick else 1_000_000))
        kills = measure_subset_kills(args)
        if args.cprofile:
            profile_kit(profile, seed, args.cprofile)
    except BenchmarkError as exc:
        print(f"benchmark failed: {exc}", file=sys.stderr)
        return 2

    overhead = kit_sps / bare_sps
    result = {
        "kit_steps_per_s": round(kit_sps, 2),
        "kit_calls_per_s": _calls_per_s(kit_runs),
        "bare_steps_per_s": round(bare_sps, 2),
        "overhead_ratio": round(overhead, 4),
        "model_cost_ratio_100k_vs_100": round(model["ratio"], 4),
        "check_spec_states_per_s": check["states_per_second"],
        "ci_wall_s": None if ci is None or ci["wall_s"] is None else round(ci["wall_s"], 3),
        "stdio_steps_per_s": round(stdio["steps_per_s"], 2),
        "inprocess_steps_per_s": round(inproc["steps_per_s"], 2),
        "stdio_vs_inprocess_ratio": round(stdio["steps_per_s"] / inproc["steps_per_s"], 4),
        "peer_steps_per_s": round(peer["peer_steps_per_s"], 2) if peer else None,
        "peer_ratio": round(peer["ratio"], 4) if peer else None,
        "peer_ratio_over_seeds": round(peer_seeds["ratio"], 4) if peer_seeds else None,
        "kit_ttff_median_s": _round(ttff["kit_ttff_median_s"]) if ttff else None,
        "peer_ttff_median_s": _round(ttff["peer_ttff_median_s"]) if ttff else None,
        "ttff_ratio": _round(ttff["ratio"]) if ttff else None,
        "workers_speedup": (
            round(ci["wall_s"] / workers["wall_s"], 4)
            if ci and workers and ci["wall_s"] and workers["wall_s"]
            else None
        ),
        "cli_ci_wall_s": None if cli is None or cli["wall_s"] is None else round(cli["wall_s"], 3),
        "failing_to_passing_wall_ratio": failing["ratio"] if failing else None,
        "trace_events": traces["full"]["events"] if traces else None,
        "trace_events_per_s": traces["full"]["events_per_s"] if traces else None,
        "trace_peak_rss_mb": traces["full"]["peak_rss_mb"] if traces else None,
        "trace_rss_ratio_vs_tenth": traces["rss_ratio_vs_tenth"] if traces else None,
        "mutant_seed_kills_mean": kills.get("mean_seeds_killed"),
        "mutant_length_ratio_max": kills.get("length_ratio_max"),
        "mutant_lengths_over_1_5": kills.get("lengths_over_limit"),
        "targets": TARGETS,
        "meets_targets": {},
        "machine": {
            **{k: v for k, v in machine.items() if k != "load_average"},
            "load_average_at_start": machine["load_average"],
            "load_average_at_end": machine_info()["load_average"],
        },
        "seed": seed,
        "quick": bool(args.quick),
        "settings": {
            "profile": profile,
            "max_examples": PROFILES[profile]["max_examples"],
            "stateful_step_count": PROFILES[profile]["stateful_step_count"],
            "hypothesis": {
                "deadline": None,
                "database": None,
                "verbosity": "quiet",
                "suppress_health_check": "all",
                "report_multiple_bugs": False,
            },
            "bare_concurrency": args.bare_concurrency,
            "repeats": max(1, args.repeats),
            "attempts": args.attempts,
            "warmup_examples": sizes["warmup_examples"],
            "model": {
                "live_jobs": list(sizes["model_sizes"]),
                "jobs_per_thread": JOBS_PER_THREAD,
                "mix": MIX_OPERATIONS,
                "reps_per_round": sizes["model_reps"],
                "rounds": sizes["model_rounds"],
                "statistic": "median round",
            },
            "ci_command": "conformance run spec/thread-jobs.yaml --profile ci --report-dir <tmp>",
            "peer": None
            if peer is None
            else {
                "rounds": peer["rounds"],
                "order": "kit, peer, kit, peer, ...",
                "statistic": "median round",
                "ttff": "per mutant: kit exploration (shrink_s=0) then peer (phases without shrink), same seed "
                "and budget; a side that finds nothing counts as infinitely slow for the median",
            },
        },
        "details": {
            "kit": {**kit_runs[len(kit_runs) // 2], "runs": kit_runs} if len(kit_runs) > 1 else kit_runs[0],
            "bare": {**bare_runs[len(bare_runs) // 2], "runs": bare_runs} if len(bare_runs) > 1 else bare_runs[0],
            "model": model,
            "check_spec": check,
            "failing_vs_passing": failing,
            "ci": ci,
            "workers": workers,
            "cli": cli,
            "stdio": stdio,
            "inprocess_no_concurrency": inproc,
            "traces": traces,
            "peer": peer,
            "peer_seeds": peer_seeds,
            "ttff": ttff,
            "seed_kills": kills,
        },
    }
    for name in TARGETS:
        result["meets_targets"][name] = _meets(name, result[name])
    result["warnings"] = list(WARNINGS)

    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(render_table(result))
        print()
        print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

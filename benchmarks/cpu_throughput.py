#!/usr/bin/env python3
"""Steps per CPU second of the ci exploration against a spec's reference,
for two or more checkouts side by side, in alternating rounds.

    .venv/bin/python benchmarks/cpu_throughput.py . /tmp/before     # this tree against another checkout
    .venv/bin/python benchmarks/cpu_throughput.py . /tmp/before --rounds 3 --spec task-progress
    .venv/bin/python benchmarks/cpu_throughput.py --one .           # one tree's figures (what each round runs)

``kit_steps_per_s`` in benchmarks/run.py is wall time: on a machine shared
with other work it moves by a third between identical runs. This counts the
process's CPU seconds (every thread's) instead, over the ci exploration at
seeds 1-5 (``--seeds``), so that two checkouts compared in alternating rounds
on a loaded machine still compare. Each tree runs in its own process with
that tree first on ``PYTHONPATH`` and its own ``spec/`` (a checkout made by
``git worktree add /tmp/before <commit>``); the interpreter is this one, so
the installed dependencies are the same. Steps are as the kit counts them
(a batch is one); calls are the ones made one at a time (plain calls, each
call of a batch, probes; not the calls of concurrent groups), as in
benchmarks/run.py.

Prints one line per tree and round, then one JSON object: per tree, the
steps and calls per CPU second pooled over its seeds and rounds, and each
tree's figure over the first's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["measure_tree", "compare"]


def measure_tree(root: Path, spec: str, seeds: list[int], profile: str = "ci") -> dict:
    """The exploration of ``spec`` at each seed, in this process (which must
    have ``root`` first on its path): steps, calls and CPU seconds."""
    from conformance.engine.runner import RunConfig, prepare
    from conformance.engine.stateful import run_stateful

    _warm_up(root, spec, seeds[0])
    runs = []
    for seed in seeds:
        prepared = prepare(
            RunConfig(spec_path=str(root / "spec" / f"{spec}.yaml"), profile=profile, seed=seed, report_dir=None)
        )
        session = prepared.session
        capabilities = prepared.identity.get("capabilities") or {}
        calls, cpu = session.calls, time.process_time()
        try:
            outcome = run_stateful(prepared.spec, session, profile=profile, seed=seed, capabilities=capabilities)
            cpu, calls = time.process_time() - cpu, session.calls - calls
        finally:
            session.close()
        if outcome.verdict != "pass":
            message = outcome.failure.message if outcome.failure else outcome.verdict
            raise SystemExit(f"{root}: the {profile} exploration at seed {seed} did not pass: {message}")
        runs.append({"seed": seed, "steps": outcome.steps, "calls": calls, "cpu_s": round(cpu, 3)})
    return {"tree": str(root), "profile": profile, "runs": runs}


def _warm_up(root: Path, spec: str, seed: int) -> None:
    """One untimed quick exploration: a checkout's first run builds
    Hypothesis's character tables into its own ``.hypothesis/`` (seconds of
    CPU), which would otherwise count against a fresh checkout's first round."""
    from conformance.engine.runner import RunConfig, prepare
    from conformance.engine.stateful import run_stateful

    prepared = prepare(
        RunConfig(spec_path=str(root / "spec" / f"{spec}.yaml"), profile="quick", seed=seed, report_dir=None)
    )
    try:
        run_stateful(
            prepared.spec,
            prepared.session,
            profile="quick",
            seed=seed,
            capabilities=prepared.identity.get("capabilities") or {},
        )
    finally:
        prepared.session.close()


def _one_round(root: Path, spec: str, seeds: list[int], profile: str) -> dict:
    """``measure_tree`` in a child process whose path starts with ``root``."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
    }
    args = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--one",
        str(root),
        "--spec",
        spec,
        "--profile",
        profile,
        "--seeds",
        *map(str, seeds),
    ]
    done = subprocess.run(args, env=env, cwd=root, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{root}: {done.stderr.strip().splitlines()[-1] if done.stderr.strip() else done.returncode}")
    return json.loads(done.stdout)


def compare(roots: list[Path], spec: str, seeds: list[int], rounds: int, profile: str = "ci") -> dict:
    """Alternating rounds over ``roots``; per tree the pooled figures, and
    each over the first tree's."""
    totals: dict[str, dict] = {str(root): {"steps": 0, "calls": 0, "cpu_s": 0.0, "rounds": []} for root in roots}
    for number in range(1, rounds + 1):
        for root in roots:
            measured = _one_round(root, spec, seeds, profile)
            steps = sum(run["steps"] for run in measured["runs"])
            calls = sum(run["calls"] for run in measured["runs"])
            cpu = sum(run["cpu_s"] for run in measured["runs"])
            total = totals[str(root)]
            total["profile"] = measured["profile"]  # as the child ran it
            total["steps"] += steps
            total["calls"] += calls
            total["cpu_s"] += cpu
            total["rounds"].append(round(steps / cpu))
            print(
                f"round {number} {root}: {steps / cpu:.0f} steps/CPU-s, {calls / cpu:.0f} calls/CPU-s", file=sys.stderr
            )
    first = totals[str(roots[0])]
    result = {"spec": spec, "profile": profile, "seeds": seeds, "rounds": rounds, "trees": {}}
    for name, total in totals.items():
        sps, cps = total["steps"] / total["cpu_s"], total["calls"] / total["cpu_s"]
        result["trees"][name] = {
            "profile": total["profile"],
            "steps_per_cpu_s": round(sps),
            "calls_per_cpu_s": round(cps),
            "steps_per_cpu_s_by_round": total["rounds"],
            "steps_ratio_to_first": round(sps / (first["steps"] / first["cpu_s"]), 3),
        }
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs="*", type=Path, help="checkouts to compare; the first is the baseline")
    parser.add_argument("--one", type=Path, help="measure this tree in this process (what each round runs)")
    parser.add_argument("--spec", default="thread-jobs", help="a spec each tree ships in spec/ (default thread-jobs)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds (default 2)")
    parser.add_argument("--profile", default="ci", help="the exploration's profile (default ci; quick: a smoke test)")
    args = parser.parse_args(argv)
    if args.one is not None:
        print(json.dumps(measure_tree(args.one.resolve(), args.spec, args.seeds, args.profile)))
        return 0
    if not args.trees:
        parser.error("name one or more checkouts to compare, or --one TREE")
    print(
        json.dumps(
            compare([tree.resolve() for tree in args.trees], args.spec, args.seeds, args.rounds, args.profile), indent=2
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

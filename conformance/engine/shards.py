"""A run in parts: CI shards (``run --shard I/N``), parallel workers
(``run --workers N``) and ``conformance merge-reports``.

What a part is (docs/ci.md, "Shards and workers"):

* the scenario matrix, split by estimated cost (``scenario_cost``: calls and
  concurrent groups, times the runs of a scenario that races calls): the
  costliest scenario first, each to the part with the least cost so far (the
  lowest-numbered part on a tie), so the parts take about as long as one
  another; the same spec, parameters and capabilities always give the same
  split;
* the exploration: the profile's examples split into N parts as evenly as
  they go (part I runs ``examples // N`` plus one of the remainder), each a
  Hypothesis run of its own with the seed ``part_seed(seed, I, N)`` (the run's
  seed itself when N is 1; otherwise derived from seed, I and N, so the parts
  explore disjoint seeds and never one another's ``--max-failures`` seeds).

A run of N parts is the same whether the parts run one after another in one
process (``RunConfig(exploration_parts=N)``), as N worker processes
(``--workers N``) or as N CI jobs (``--shard I/N``) merged by
``merge-reports``: same scenarios, same examples, same seeds, so the same
verdict, coverage and failures. ``--workers 1`` and ``--shard 1/1`` are a
plain run.

Merging combines what each part found: scenario entries in matrix order,
exploration examples, steps and coverage counts summed, coverage categories
and ``--min-coverage`` gates worked out again from the summed counts (a shard
never applies the gates to its part alone), distinct failures (kind,
operation, path) in part order with their counterexample files renumbered,
and one verdict.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import stat
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ..errors import ConformanceError
from ..reporting.safe_files import write_atomic
from .failures import NOT_REPRODUCING

__all__ = [
    "ShardError",
    "parse_shard",
    "part_seed",
    "part_examples",
    "shard_items",
    "claim_item",
    "combine_stateful",
    "place_counterexamples",
    "load_shard_report",
    "vet_counterexamples",
    "REPORT_LIMIT",
    "COUNTEREXAMPLE_LIMIT",
    "VALUE_LIMIT",
    "check_shards",
    "merge_reports",
    "merge_deviations",
    "shard_info",
]


class ShardError(ConformanceError):
    """Shard reports that cannot be merged, or a shard that cannot be named."""


def parse_shard(text: str) -> tuple[int, int]:
    """``"2/4"`` -> (2, 4); ValueError saying how to write it."""
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", str(text))
    if not match:
        raise ValueError(f"--shard {text!r}: write I/N, the I-th of N parts, e.g. 1/4")
    index, count = int(match.group(1)), int(match.group(2))
    if count < 1 or not 1 <= index <= count:
        raise ValueError(f"--shard {text!r}: I must be between 1 and N (N at least 1), e.g. 1/4 ... 4/4")
    return index, count


def part_seed(seed: int, index: int, count: int) -> int:
    """The exploration seed of part ``index`` of ``count``: ``seed`` for a run
    in one part, else a 32-bit number derived from all three."""
    if count == 1:
        return seed
    digest = hashlib.sha256(f"lifecycle-conformance part {seed} {index}/{count}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


def part_examples(total: int, index: int, count: int) -> int:
    """Examples of part ``index`` of ``count`` when ``total`` are split: the
    first ``total % count`` parts get one more."""
    return total // count + (1 if index <= total % count else 0)


def shard_items(items: Iterable, index: int, count: int, cost: Callable[[Any], float] | None = None) -> list:
    """The items of part ``index`` of ``count``, in their order. Without
    ``cost``: every count-th, from index - 1. With it: a split by cost (the
    longest-first rule): the costliest item first (the earlier of equal
    ones), each to the part whose items cost least so far (the lower index of
    equal ones)."""
    items = list(items)
    if cost is None:
        return [item for position, item in enumerate(items) if position % count == index - 1]
    costs = [cost(item) for item in items]
    loads, part_of = [0.0] * count, [0] * len(items)
    for position in sorted(range(len(items)), key=lambda p: (-costs[p], p)):
        part = min(range(count), key=lambda k: (loads[k], k))
        part_of[position] = part
        loads[part] += costs[position]
    return [item for position, item in enumerate(items) if part_of[position] == index - 1]


def _counts_sum(dicts: Iterable[dict | None]) -> dict:
    out: dict = {}
    for counts in dicts:
        for name, n in (counts or {}).items():
            out[name] = out.get(name, 0) + n
    return dict(sorted(out.items()))


_COUNTS = ("operations", "outcomes", "transitions", "states", "policies", "races", "limits", "pairs", "triples")


def _combine_coverage(coverages: list[dict | None]) -> dict | None:
    present = [c for c in coverages if c]
    if not present:
        return None
    out: dict[str, dict | list] = {key: _counts_sum(c.get(key) for c in present) for key in _COUNTS}
    # uncovered: what no part exercised (each item is one key, so this is exact)
    first, rest = present[0].get("uncovered") or [], [set(c.get("uncovered") or []) for c in present[1:]]
    out["uncovered"] = [item for item in first if all(item in other for other in rest)]
    return out


def claim_item(directory: str | Path, key: str) -> bool:
    """Claim ``key`` in ``directory`` (shared by the workers of one run):
    True for the first caller of all processes, False for every later one.
    The claim is a file created only if it does not exist, which the file
    system does atomically (on every system, for any number of processes)."""
    name = hashlib.sha256(key.encode("utf-8")).hexdigest()[:32]
    try:
        os.close(
            os.open(
                os.path.join(directory, name),
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0),
                0o644,
            )
        )
    except FileExistsError:
        return False
    return True


def _distinct_failures(parts: list[dict], spec: Any = None) -> list[dict]:
    """The failures of ``parts`` (each part's ``failure``, then its
    ``more_failures``), one per cause (engine/causes.py ``join_parts``),
    shortest first."""
    from .causes import join_parts, steps_by_operation

    heads = [f for part in parts for f in [part.get("failure"), *(part.get("more_failures") or [])] if f]
    return join_parts(heads, steps_by_operation(spec) if spec is not None else None)


def _part_entry(part: dict) -> dict:
    """What the combined entry's ``parts`` says of one part."""
    return {key: part.get(key) for key in ("verdict", "examples", "steps", "duration_s")} | {
        "index": part["part"]["index"],
        "count": part["part"]["count"],
        "seed": part["part"]["seed"],
    }


def combine_stateful(parts: list[dict], seed: int, spec: Any = None) -> dict:
    """One exploration entry from its parts' entries (each a report's
    ``stateful`` of one part, with ``part: {index, count, seed}``), in part
    order: examples, steps, coverage and draws beyond the pools summed; the failures, one per cause,
    shortest first (``failure``, then ``more_failures``; ``spec``, when given,
    tells which operations share their steps); the verdict ``error`` if a
    part could not run, else ``fail`` if one failed, else ``pass``."""
    parts = sorted(parts, key=lambda p: p["part"]["index"])
    failures = _distinct_failures(parts, spec)  # shortest first, as each part orders its own
    verdicts = [p["verdict"] for p in parts]
    verdict = next((v for v in ("interrupted", "error", "fail") if v in verdicts), "pass")
    out = {
        "verdict": verdict,
        "profile": parts[0].get("profile"),
        "seed": seed,
        "examples": sum(p.get("examples") or 0 for p in parts),
        "steps": sum(p.get("steps") or 0 for p in parts),
        "duration_s": round(sum(p.get("duration_s") or 0.0 for p in parts), 3),
        "coverage": _combine_coverage([p.get("coverage") for p in parts]),
        "failure": failures[0] if failures else None,
        "parts": [_part_entry(p) for p in parts],
    }
    if len(failures) > 1:
        out["more_failures"] = failures[1:]
    beyond = [p["beyond_pools"] for p in parts if p.get("beyond_pools")]
    if beyond:  # the same share in every part; the draws of each way summed
        ways = ("pool", "near_miss", "schema")
        out["beyond_pools"] = {"share": beyond[0]["share"]} | {way: sum(b.get(way, 0) for b in beyond) for way in ways}
    outputs = [p["output"] for p in parts if p.get("output")]
    if outputs:
        out["output"] = outputs[-1]
    return out


def place_counterexamples(stateful: dict | None, out_dir: str | Path, *, move: bool) -> list[str]:
    """Give the counterexample files of ``stateful``'s failures their names in
    ``out_dir`` (``counterexample-stateful.yaml``, then ``-2``, ``-3`` ... in
    failure order), copying them there (or moving them, within one directory),
    and point each failure's file and replay command at the new path. Returns
    what could not be placed. Only regular files are read, at most
    COUNTEREXAMPLE_LIMIT bytes each (merge-reports vets the paths first:
    :func:`vet_counterexamples`)."""
    from ..reporting import read_regular

    if not stateful:
        return []
    causes = [f for f in [stateful.get("failure"), *(stateful.get("more_failures") or [])] if f]
    failures = causes + [s for f in causes for s in f.get("symptoms") or []]  # numbered as the run numbers them
    contents, problems = {}, []
    for failure in failures:
        old = failure.get("counterexample_file")
        if old and old not in contents:
            try:
                contents[old] = read_regular(old, COUNTEREXAMPLE_LIMIT)
            except OSError as exc:
                problems.append(f"could not read the counterexample {old}: {exc.strerror or exc}")
    out = Path(out_dir)
    if move:
        for old in contents:
            Path(old).unlink(missing_ok=True)
    for number, failure in enumerate(failures, 1):
        old = failure.get("counterexample_file")
        if not old or old not in contents:
            continue
        new = str(out / ("counterexample-stateful.yaml" if number == 1 else f"counterexample-stateful-{number}.yaml"))
        try:
            out.mkdir(parents=True, exist_ok=True)
            write_atomic(new, contents[old])
        except OSError as exc:
            problems.append(f"could not write the counterexample {new}: {exc.strerror or exc}")
            continue
        failure["counterexample_file"] = new
        if failure.get("replay"):
            failure["replay"] = failure["replay"].replace(shlex.quote(old), shlex.quote(new))
    return problems


def vet_counterexamples(report: dict, directory: Path, where: Path) -> None:
    """Point every counterexample file a shard's report names at that name in
    the shard's own directory, or raise ShardError naming it: only the file
    name counts (the path was the shard machine's), it must be a
    ``counterexample-*.yaml`` name, and the file there a regular file (no
    symbolic link, FIFO or device) of at most COUNTEREXAMPLE_LIMIT bytes."""
    stateful = report.get("stateful") or {}
    for failure in [stateful.get("failure"), *(stateful.get("more_failures") or [])]:
        if not isinstance(failure, dict) or not failure.get("counterexample_file"):
            continue
        named = str(failure["counterexample_file"])
        name = os.path.basename(named)
        if ".." in Path(named).parts or not _COUNTEREXAMPLE_NAME.fullmatch(name):
            raise ShardError(
                f"{where}: refused: failure.counterexample_file {named!r} is not a counterexample file of "
                f"the shard's directory; merge-reports reads only counterexample-*.yaml files there"
            )
        path = directory / name
        problem = _not_regular(path, COUNTEREXAMPLE_LIMIT)
        if problem:
            raise ShardError(f"{where}: refused: failure.counterexample_file {named!r}: {path} {problem}")
        failure["counterexample_file"] = str(path)


def _not_regular(path: Path, limit: int) -> str | None:
    """Why ``path`` is not a regular file of at most ``limit`` bytes (lstat: a link is not followed)."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None  # reported as a file that could not be read, the merge goes on
    except OSError as exc:
        return f"cannot be examined ({exc.strerror or exc})"
    if not stat.S_ISREG(info.st_mode):
        return "is not a regular file (a symbolic link, FIFO, device or directory); it was not read"
    if info.st_size > limit:
        return f"is {info.st_size} bytes, more than the {limit} merge-reports reads from one file"
    return None


def shard_info(index: int, count: int, *, seed: int, profile: str, rerun: str, min_coverage: dict) -> dict:
    """The ``shard`` field of a shard's report: which part it is, of what run."""
    return {
        "index": index,
        "count": count,
        "seed": seed,
        "profile": profile,
        "rerun": rerun,
        "min_coverage": dict(min_coverage),
    }


REPORT_LIMIT = 64 * 1024 * 1024  # bytes of a shard's report.json
COUNTEREXAMPLE_LIMIT = 16 * 1024 * 1024  # bytes of one counterexample file a shard wrote
VALUE_LIMIT = 64 * 1024 * 1024  # bytes of the values a shard stored (values/sha256-*), all of them: bounded.STORE_LIMIT
_COUNTEREXAMPLE_NAME = re.compile(r"counterexample-[A-Za-z0-9_.-]{1,120}\.yaml")
_VALUE_NAME = re.compile(r"sha256-([0-9a-f]{64})\.(txt|json)")


def load_shard_report(where: str | Path) -> tuple[dict, Path]:
    """A shard's report.json (a report directory, or the file) and its
    directory. Only a regular file is read (no symbolic link, FIFO or
    device), at most REPORT_LIMIT bytes, and it must be a report the kit
    writes (its JSON Schema): ShardError naming the file otherwise."""
    from ..reporting import UnsafeFile, read_regular, validate_report

    path = Path(where)
    if path.is_dir():
        path = path / "report.json"
    if not os.path.lexists(path):
        raise ShardError(
            f"{where}: no report.json there (give the --report-dir of a `conformance run --shard I/N`, "
            f"or its report.json)"
        )
    try:
        report = json.loads(read_regular(path, REPORT_LIMIT).decode("utf-8"))
    except UnsafeFile as exc:
        raise ShardError(f"{path}: refused: {exc}; give the report directory a shard wrote") from None
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        said = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)[:300]
        raise ShardError(
            f"{path}: not a readable report ({said}); re-run that shard or download its report again"
        ) from None
    if not isinstance(report, dict) or not isinstance(report.get("shard"), dict):
        raise ShardError(
            f"{path}: not a shard's report (it has no `shard` field); merge the reports of "
            f"`conformance run --shard I/N`, one per I"
        )
    problems = _shape_problems(report, validate_report)
    if problems:
        raise ShardError(
            f"{path}: not a report the kit writes ({'; '.join(problems[:3])}); re-run that shard "
            f"or download its report again"
        )
    return report, path.parent


def _shape_problems(report: dict, validate: Callable[[dict], list]) -> list[str]:
    """Where a shard's report breaks the report schema (and the fields merging relies on)."""
    try:
        problems = [str(p)[:200] for p in validate(report)]
    except RecursionError:
        return ["nested too deeply"]
    shard = report["shard"]
    for key in ("index", "count", "seed"):
        value = shard.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 2**63:
            problems.append(f"shard.{key} is not an integer of 0 to 2**63-1")
    if not isinstance(shard.get("rerun"), str):
        problems.append("shard.rerun is not a string")
    return problems


def _identity(report: dict) -> dict:
    implementation = report.get("implementation") or {}
    shard = report["shard"]
    return {
        "spec": (report["spec"].get("id"), report["spec"].get("version")),
        "implementation": (implementation.get("adapter"), implementation.get("name"), implementation.get("version")),
        "parameters": json.dumps(report.get("parameters"), sort_keys=True, default=str),
        "profile": shard.get("profile"),
        "seed": shard.get("seed"),
        "count": shard.get("count"),
        "min_coverage": json.dumps(shard.get("min_coverage") or {}, sort_keys=True),
    }


_SAID = {
    "spec": "specs (id, version)",
    "implementation": "implementations (adapter, name, version)",
    "parameters": "parameters",
    "profile": "profiles",
    "seed": "seeds",
    "count": "shard counts (the N of I/N)",
    "min_coverage": "--min-coverage gates",
}


def check_shards(loaded: list[tuple[dict, Path]], *, allow_missing: bool = False) -> int:
    """Refuse shards of different runs, duplicates and (unless ``allow_missing``)
    missing ones; return N."""
    if not loaded:
        raise ShardError("no shard reports given; name each shard's report directory (or report.json)")
    # A shard that stopped before it knew its implementation (an error) cannot be told apart by it.
    started = [(r, d) for r, d in loaded if r.get("implementation") and (r.get("spec") or {}).get("id")]
    if started:
        _check_one_run(started)
    counts = {r["shard"]["count"] for r, _ in loaded}
    if len(counts) > 1:
        raise ShardError(
            f"the shards were cut into different numbers of parts ({sorted(counts)}); merge the "
            f"shards of one run, all with the same N in --shard I/N"
        )
    count = counts.pop()
    by_index: dict[int, Path] = {}
    for report, directory in loaded:
        index = report["shard"]["index"]
        if index in by_index:
            raise ShardError(
                f"shard {index}/{count} is given twice ({by_index[index]} and {directory}); give each "
                f"shard's report once"
            )
        by_index[index] = directory
    missing = [i for i in range(1, count + 1) if i not in by_index]
    if missing and not allow_missing:
        raise ShardError(
            f"shard(s) {', '.join(f'{i}/{count}' for i in missing)} missing: give the report of every "
            f"shard 1/{count} ... {count}/{count} (re-run a shard that did not finish)"
        )
    return count


def _check_one_run(started: list[tuple[dict, Path]]) -> None:
    """Refuse shards (that knew their implementation) of another run than the first."""
    reference = _identity(started[0][0])
    for report, directory in started[1:]:
        for key, value in _identity(report).items():
            if value != reference[key]:
                raise ShardError(
                    f"{directory}: this shard ran another run than {started[0][1]}: their {_SAID[key]} differ "
                    f"({reference[key]} vs {value}). Merge only the shards of one run: the same spec, "
                    f"implementation, --profile, --seed, --min-coverage and N of --shard I/N"
                )


def merge_deviations(sections: list[dict]) -> dict | None:
    """The ``deviations`` entries of several reports of one run as one: counts summed."""
    if not sections:
        return None
    out = json.loads(json.dumps(sections[0]))
    for name in ("count", "schema_count"):
        counts: dict = {}
        for section in sections:
            for entry in section.get("entries") or []:
                counts[entry["id"]] = counts.get(entry["id"], 0) + (entry.get(name) or 0)
        for entry in out.get("entries") or []:
            if name in entry:
                entry[name] = counts.get(entry["id"], entry.get(name))
    for name in ("accepted", "avoided", "schema_accepted"):
        if any(name in s for s in sections):
            out[name] = sum(s.get(name) or 0 for s in sections)
    return out


# Fields of a report that merging works out again rather than copying from the first shard.
_MERGED = (
    "shard",
    "scenarios",
    "stateful",
    "problems",
    "coverage",
    "not_applicable",
    "deviations",
    "replay",
    "verdict",
    "exit_code",
)


def merge_reports(
    loaded: list[tuple[dict, Path]], out_dir: str | Path | None, *, spec: Any = None, allow_missing: bool = False
) -> dict:
    """One report from the reports of the shards of one run (see the module's
    doc). ``spec``: the loaded spec (scenario order, coverage categories, the
    state diagram's highlight); None loads it from the reports' spec path.
    Counterexample files and stored large values are copied into ``out_dir``."""
    count = check_shards(loaded, allow_missing=allow_missing)
    for report, directory in loaded:
        vet_counterexamples(report, directory, directory / "report.json")
    loaded = sorted(loaded, key=lambda item: item[0]["shard"]["index"])
    reports = [r for r, _ in loaded]
    first = next((r for r in reports if r.get("implementation") and r["spec"].get("id")), reports[0])
    shard = first["shard"]
    spec = _spec_of_shards(first, spec)
    order = {s.id: n for n, s in enumerate(spec.scenarios)} if spec is not None else {}
    out = _copied_fields(first, reports)
    out.update(_merged_scenarios(reports, order))
    split = _split_parts(reports)
    out["stateful"] = combine_stateful(split, shard["seed"], spec) if split else None
    out["problems"] = _distinct_problems(reports)
    deviations = [r["deviations"] for r in reports if r.get("deviations")]
    if deviations:
        out["deviations"] = merge_deviations(deviations)
    coverage, gate_failed = _merged_coverage(reports, out, spec, shard, count)
    if coverage is not None:
        out["coverage"] = coverage
    out["verdict"], out["exit_code"] = _merged_verdict(reports, gate_failed)
    out["replay"] = f"{shard['rerun']}{_workers(count)}" if out["verdict"] == "fail" else None
    if spec is not None and (out.get("spec") or {}).get("lifecycle") is not None:
        out["spec"]["lifecycle"]["highlight"] = _highlight(spec, out)
    if out_dir is not None:
        _copy_files(loaded, out, out_dir)
    return out


def _copied_fields(first: dict, reports: list[dict]) -> dict:
    """The fields of the merged report taken from the first shard (copies),
    with the earliest start and the longest duration of all."""
    out = {key: json.loads(json.dumps(value)) for key, value in first.items() if key not in _MERGED}
    out["started_at"] = min((r["started_at"] for r in reports if r.get("started_at")), default=None)
    out["duration_s"] = max((r.get("duration_s") or 0.0 for r in reports), default=0.0)
    return out


def _copy_files(loaded: list[tuple[dict, Path]], out: dict, out_dir: str | Path) -> None:
    """Copy the shards' stored values and counterexample files into
    ``out_dir``; what could not be copied becomes a problem of ``out``."""
    for _, directory in loaded:
        _copy_values(directory, Path(out_dir))
    for problem in place_counterexamples(out["stateful"], out_dir, move=False):
        out["problems"].append({"kind": "report-error", "where": str(out_dir), "message": problem})


def _spec_of_shards(first: dict, spec: Any) -> Any:
    """The spec the shards ran: ``spec`` when given, else the one at the
    reports' spec path (None without one); ShardError when it cannot be
    loaded or is another spec than the shards ran."""
    from statemachines import load_spec

    from ..specs import resolve_spec

    ran = first["spec"]
    if spec is None and ran.get("path"):
        try:
            path = resolve_spec(_spec_path_named(str(ran["path"])))
            if not stat.S_ISREG(os.stat(path).st_mode):  # a FIFO or device a forged report names: never opened
                raise ShardError(f"{path} is not a regular file")
            spec = load_spec(path)
        except Exception as exc:
            raise ShardError(
                f"could not load the spec the shards ran ({ran['path']}: "
                f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}); run merge-reports "
                f"where that path resolves, or name the spec with --spec"
            ) from None
    if spec is not None and ran.get("id") and (spec.id, spec.version) != (ran["id"], ran["version"]):
        raise ShardError(
            f"the spec given is {spec.id} {spec.version} but the shards ran {ran['id']} "
            f"{ran['version']}; name the spec the shards ran"
        )
    return spec


def _spec_path_named(named: str) -> str:
    """The spec path a shard's report names, if merge-reports may read it: an
    installed spec's name, or a path that stays in the working directory
    (links resolved): a report is a received file, it does not choose what
    is read."""
    if ".." in Path(named).parts:
        raise ShardError(f"{named!r} leaves the working directory")
    here = os.path.realpath(os.getcwd()) + os.sep
    if (os.path.isabs(named) or os.path.lexists(named)) and not os.path.realpath(named).startswith(here):
        raise ShardError(f"{named!r} is not a file inside the working directory")
    return named


def _merged_scenarios(reports: list[dict], order: dict[str, int]) -> dict:
    """The merged report's ``scenarios`` (and ``not_applicable``, when a shard
    had some), in matrix order."""
    scenarios = [s for r in reports for s in r.get("scenarios") or []]
    out: dict[str, Any] = {"scenarios": sorted(scenarios, key=lambda s: order.get(s["id"], len(order)))}
    not_applicable = [s for r in reports for s in (r.get("not_applicable") or {}).get("scenarios") or []]
    operations: dict[str, dict] = {}
    for r in reports:
        for entry in (r.get("not_applicable") or {}).get("operations") or []:
            operations.setdefault(entry["operation"], entry)
    if not_applicable or operations:
        profile = next(r["not_applicable"]["profile"] for r in reports if r.get("not_applicable"))
        out["not_applicable"] = {
            "profile": profile,
            "scenarios": sorted(not_applicable, key=lambda s: order.get(s["id"], len(order))),
        }
        if operations:
            out["not_applicable"]["operations"] = [operations[name] for name in sorted(operations)]
    return out


def _distinct_problems(reports: list[dict]) -> list[dict]:
    """The shards' problems, each (kind, where, message) once, in shard order."""
    problems, seen = [], set()
    for report in reports:
        for problem in report.get("problems") or []:
            key = (problem.get("kind"), problem.get("where"), problem.get("message"))
            if key not in seen:
                seen.add(key)
                problems.append(problem)
    return problems


def _merged_bound(coverages: list[dict]):
    """The largest of the shards' bounds on the records a test creates (None: a shard does not say)."""
    from .applicability import bound_from_dict

    bounds = [bound_from_dict(c.get("bound")) for c in coverages]
    known = [b for b in bounds if b is not None and b.max_records is not None]
    if not known or len(known) < len(bounds):
        return None
    return max(known, key=lambda b: b.max_records or 0)


def _merged_coverage(reports: list[dict], out: dict, spec: Any, shard: dict, count: int) -> tuple[dict | None, bool]:
    """The merged report's ``coverage`` (None when no shard has one), its
    categories and ``--min-coverage`` gates worked out again from the summed
    counts; and whether a gate failed."""
    from .applicability import bound_to_dict
    from .coverage import check_gates, coverage_categories
    from .pairs import pairs_report

    coverages = [r["coverage"] for r in reports if r.get("coverage")]
    if not coverages:
        return None, False
    counts = {key: _counts_sum(c.get(key) for c in coverages) for key in _COUNTS}
    bound = None
    if spec is not None:
        concurrent = bool(((out.get("implementation") or {}).get("capabilities") or {}).get("concurrent"))
        bound = _merged_bound(coverages)
        categories = coverage_categories(spec, counts, out.get("parameters") or {}, concurrent, bound)
    else:  # without the spec: an item is covered when a shard covered it
        categories = _combine_categories([c["categories"] for c in coverages])
    gates, failure = check_gates(categories, shard.get("min_coverage") or {})
    if failure is not None:
        failure.replay = f"{shard['rerun']}{_workers(count)} " + " ".join(
            f"--min-coverage {g['category']}={g['minimum']:g}" for g in gates
        )
    coverage = {
        "categories": categories,
        **{key: counts[key] for key in _COUNTS},
        **({"bound": bound_to_dict(bound)} if bound is not None else {}),
        **(pairs_report(spec, counts, out.get("parameters") or {}) if spec is not None else {}),
        "gates": gates,
        "failure": failure.to_dict() if failure else None,
    }
    return coverage, failure is not None


def _merged_verdict(reports: list[dict], gate_failed: bool) -> tuple[str, int]:
    """The merged report's verdict and exit code: interrupted (as the first
    interrupted shard exited), else error, else fail (a shard's or a gate's),
    else not-reproducing (a shard's), else pass."""
    interrupted = next((r for r in reports if r.get("verdict") == "interrupted"), None)
    if interrupted is not None:
        return "interrupted", interrupted.get("exit_code", 130)
    verdicts = [r.get("verdict") for r in reports]
    if "error" in verdicts:
        return "error", 2
    if "fail" in verdicts or gate_failed:
        return "fail", 1
    if NOT_REPRODUCING in verdicts:  # a kept scenario did not reach its recorded state
        return NOT_REPRODUCING, 3
    return "pass", 0


def _highlight(spec: Any, out: dict) -> Any:
    """The state diagram's highlight: the focus of the merged report's first
    failed check that is not a coverage gate."""
    from ..reporting._format import failed_checks
    from .coverage import failure_focus

    focus = next((f for _, f in failed_checks(out) if f and f.get("kind") != "coverage"), None)
    return failure_focus(spec, focus)


def _split_parts(reports: list[dict]) -> list[dict]:
    """Each shard's exploration entry as the one part it ran."""
    out = []
    for report in reports:
        stateful = report.get("stateful")
        if not stateful:
            continue
        part = (stateful.get("parts") or [None])[0]
        if part is None:  # a shard stopped before its exploration recorded its part
            shard = report["shard"]
            part = {
                "index": shard["index"],
                "count": shard["count"],
                "seed": part_seed(shard["seed"], shard["index"], shard["count"]),
            }
        out.append(dict(stateful, part={"index": part["index"], "count": part["count"], "seed": part["seed"]}))
    return out


def _combine_categories(categories: list[dict]) -> dict:
    out = {}
    for name, entry in categories[0].items():
        missed = [m for m in entry["missed"] if all(m in (c.get(name) or {}).get("missed", []) for c in categories)]
        total = entry["total"]
        covered = total - len(missed)
        out[name] = {
            "total": total,
            "covered": covered,
            "percent": round(100.0 * covered / total, 1) if total else 100.0,
            "missed": missed,
            "not_applicable": entry.get("not_applicable") or [],  # the same in every shard of one run
        }
    return out


def _workers(count: int) -> str:
    return f" --workers {count}" if count > 1 else ""


def _copy_values(source: Path, target: Path) -> None:
    """Large values the shard stored (``values/sha256-*``): named by their
    digest, so copies of the same value are one file. Only regular files of
    a real ``values/`` directory are read (never a symbolic link, FIFO or
    device), each at most VALUE_LIMIT bytes and holding what its name's
    digest says; ShardError names anything else."""
    from ..reporting import VALUES_DIR, UnsafeFile, read_regular, real_directory

    values = source / VALUES_DIR
    if not os.path.lexists(values):
        return
    if not stat.S_ISDIR(os.lstat(values).st_mode):
        raise ShardError(f"{values}: refused: not a directory (a symbolic link?); merge-reports does not follow it")
    total = 0
    for entry in sorted(os.scandir(values), key=lambda e: e.name):
        match = _VALUE_NAME.fullmatch(entry.name)
        if not match:
            continue
        path = values / entry.name
        try:
            data = read_regular(path, VALUE_LIMIT)
        except UnsafeFile as exc:
            raise ShardError(f"{path}: refused: {exc}") from None
        total += len(data)
        if total > VALUE_LIMIT:
            raise ShardError(f"{values}: refused: its values hold more than the {VALUE_LIMIT} bytes a report keeps")
        if hashlib.sha256(data).hexdigest() != match.group(1):
            raise ShardError(f"{path}: refused: its content does not have the digest its name says")
        destination = real_directory(target / VALUES_DIR) / entry.name
        if not os.path.lexists(destination):
            write_atomic(destination, data)

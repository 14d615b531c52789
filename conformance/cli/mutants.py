"""``conformance mutants``: the kit against every mutant a spec ships
(conformance/mutants.py runs one), a table per profile run."""

from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import click
from rich.table import Table
from rich.text import Text

from statemachines import Spec, SpecError, load_spec

from ..engine.session import DEFAULT_TIMEOUT_S
from ..errors import AdapterLoadError
from ..specs import spec_target_problem
from .common import ExplorationProfile, Seconds, cli, console, errors, parse_seed, spec_file

if TYPE_CHECKING:
    from ..mutants import MutantResult

__all__ = ["mutants"]


@cli.command()
@click.argument("spec", type=click.Path(dir_okay=False))
@click.option(
    "--profile",
    type=ExplorationProfile(),
    default="ci",
    show_default=True,
    help="How much stateful exploration: quick, ci or deep.",
)
@click.option("--seed", default="1", show_default=True)
@click.option("--only", "only", multiple=True, metavar="NAME", help="Run only these mutants.")
@click.option(
    "--adapter-opt",
    "adapter_opts",
    multiple=True,
    metavar="KEY=VALUE",
    help="Keyword option passed to every mutant, as `conformance run` passes it to the reference "
    "(repeatable); profile=NAME checks the mutants under that profile of the spec.",
)
@click.option(
    "--all-profiles",
    is_flag=True,
    help="Run every mutant under the spec's defaults and under each profile of the spec its "
    "implementation offers, one table per profile.",
)
@click.option("--timeout", "timeout_s", type=Seconds(), default=DEFAULT_TIMEOUT_S, show_default=True)
def mutants(
    spec: str,
    profile: str,
    seed: str,
    only: tuple[str, ...],
    adapter_opts: tuple[str, ...],
    all_profiles: bool,
    timeout_s: float,
) -> None:
    """Run the kit against every mutant SPEC ships (a file or an installed
    spec's name); exit 0 only if all are killed (in every profile run), 1 if
    one survives, 2 for a spec or loading error. A mutant whose
    implementation does not offer the chosen profile is listed as not
    applicable there."""
    loaded, target = _spec_with_mutants(spec)
    options = _adapter_options(adapter_opts, loaded, all_profiles)
    table_of_mutants = _mutants_of(target)
    unknown = [n for n in only if n not in table_of_mutants]
    if unknown:
        raise click.UsageError(f"unknown mutant(s): {', '.join(unknown)} (known: {', '.join(table_of_mutants)})")
    hunt = _Hunt(
        spec_arg=spec,
        spec=loaded,
        chosen=[(n, m) for n, m in table_of_mutants.items() if not only or n in only],
        profile=profile,
        seed=parse_seed(seed),
        timeout_s=timeout_s,
        all_profiles=all_profiles,
    )
    runs = _profile_runs(options, loaded, all_profiles)
    for spec_profile, run_options in runs:
        _show(hunt, spec_profile, _run_under(hunt, spec_profile, run_options))
    if not hunt.applicable_anywhere:
        errors.print("no mutant applies: none starts with these adapter options", markup=False)
        sys.exit(2)
    if len(runs) > 1:
        console.print(
            "every profile: " + (f"survived: {', '.join(hunt.survived)}" if hunt.survived else "all killed"),
            highlight=False,
            markup=False,
        )
    sys.exit(1 if hunt.survived else 0)


@dataclass
class _Hunt:
    """One ``mutants`` command: what it runs, and what it found so far."""

    spec_arg: str  # as given (a file or an installed spec's name)
    spec: Spec
    chosen: list[tuple[str, Any]]  # (name, mutant)
    profile: str  # of the exploration
    seed: int
    timeout_s: float
    all_profiles: bool
    survived: list[str] = field(default_factory=list)  # "name (profile)"
    applicable_anywhere: int = 0  # profile runs in which some mutant ran


@dataclass
class _ProfileRun:
    """The mutants under one profile of the spec: each one's result, and those
    whose implementation does not start there (name, why)."""

    results: list[MutantResult] = field(default_factory=list)
    not_applicable: list[tuple[str, str | None]] = field(default_factory=list)


def _spec_with_mutants(spec: str) -> tuple[Spec, str]:
    """The spec, and where its mutants are; exit 2 when it does not load or
    names none the kit may load."""
    try:
        loaded = load_spec(spec_file(spec))
    except SpecError as exc:
        errors.print(str(exc), markup=False)
        sys.exit(2)
    target = loaded.implementations.get("mutants")
    if not target:
        errors.print(f"spec {loaded.id} ships no mutants (implementations.mutants)", markup=False)
        sys.exit(2)
    problem = spec_target_problem(
        target, "mutants", loaded
    )  # a spec is data: it names only trusted code (docs/trust-model.md)
    if problem:
        errors.print(problem, markup=False)
        sys.exit(2)
    return loaded, target


def _adapter_options(adapter_opts: tuple[str, ...], spec: Spec, all_profiles: bool) -> dict[str, str]:
    """--adapter-opt parsed; profile=NAME must be a profile of the spec, and not with --all-profiles."""
    from ..adapters.python import parse_options

    try:
        options = parse_options(adapter_opts)
    except AdapterLoadError as exc:
        raise click.UsageError(str(exc)) from None
    chosen_profile = options.get("profile")
    if all_profiles and chosen_profile is not None:
        raise click.UsageError("give either --all-profiles or --adapter-opt profile=NAME, not both")
    if chosen_profile is not None and chosen_profile not in spec.profiles:
        raise click.UsageError(
            f"spec {spec.id} has no profile {chosen_profile!r} (its profiles: "
            f"{', '.join(sorted(spec.profiles)) or 'none'})"
        )
    return options


def _mutants_of(target: str) -> dict:
    from ..mutants import load_mutants

    try:
        return load_mutants(target)
    except AdapterLoadError as exc:
        errors.print(str(exc), markup=False)
        sys.exit(2)


def _profile_runs(options: dict[str, str], spec: Spec, all_profiles: bool) -> list[tuple[str | None, dict]]:
    """(profile of the spec or None for its defaults, the adapter options) of each table."""
    if all_profiles:
        return [(None, dict(options))] + [(p, {**options, "profile": p}) for p in sorted(spec.profiles)]
    return [(options.get("profile"), options)]


def _run_under(hunt: _Hunt, spec_profile: str | None, run_options: dict) -> _ProfileRun:
    from ..mutants import declared_profile, run_mutant

    run = _ProfileRun()
    for index, (name, mutant) in enumerate(hunt.chosen, 1):
        starts, declared = declared_profile(mutant, run_options, hunt.timeout_s)
        if not starts:
            run.not_applicable.append((name, declared))
            continue
        if spec_profile is None and hunt.all_profiles and declared in hunt.spec.profiles:
            continue  # its implementation's default is a profile of the spec: it runs there
        label = f"mutant {index}/{len(hunt.chosen)}: {name}" + (f" under {spec_profile}" if spec_profile else "")
        if not console.is_terminal:
            errors.print(f"progress: {label}", markup=False)
        with console.status(label) if console.is_terminal else contextlib.nullcontext():
            run.results.append(
                run_mutant(
                    hunt.spec_arg,
                    name,
                    mutant,
                    profile=hunt.profile,
                    seed=hunt.seed,
                    timeout_s=hunt.timeout_s,
                    options=run_options,
                )
            )
    return run


def _show(hunt: _Hunt, spec_profile: str | None, run: _ProfileRun) -> None:
    """One profile's table (or why none), its mutants not applicable there; the
    survivors are noted in ``hunt``."""
    under = spec_profile or "the spec's defaults"
    if run.results:
        hunt.applicable_anywhere += 1
        _print_mutants(
            run.results, f"Mutants of {hunt.spec.id} under {under} (exploration {hunt.profile}, seed {hunt.seed})"
        )
        hunt.survived += [
            f"{r.name}" + (f" ({spec_profile})" if spec_profile else "") for r in run.results if not r.killed
        ]
    elif not run.not_applicable:  # each declares a profile of the spec by default, and runs under it
        console.print(
            f"no mutant runs under {under}: each runs under the profile its implementation declares",
            highlight=False,
            markup=False,
        )
    if run.not_applicable:
        names = ", ".join(name for name, _ in run.not_applicable)
        console.print(
            f"not applicable under {under} (their implementation does not start with these options): "
            f"{names}; e.g. {run.not_applicable[0][1]}",
            highlight=False,
            markup=False,
        )


def _print_mutants(results: list[MutantResult], title: str) -> None:
    """One profile's mutants as a table, then how many were killed."""
    table = Table(title=title)
    for column in ("mutant", "killed", "by scenarios", "by exploration alone", "bug"):
        table.add_column(column, overflow="fold")
    for r in results:
        table.add_row(
            Text(r.name),
            Text("killed", style="green") if r.killed else Text("SURVIVED", style="red"),
            Text(", ".join(r.killed_by_scenarios))
            if r.killed_by_scenarios
            else Text(f"error: {r.error}" if r.error else "—", style="red" if r.error else ""),
            Text(f"yes ({r.exploration_kind})") if r.found_by_exploration else Text("no", style="yellow"),
            Text(r.description),
        )
    console.print(table)
    survived = [r.name for r in results if not r.killed]
    missed = [r.name for r in results if not r.found_by_exploration]
    console.print(
        f"{len(results) - len(survived)}/{len(results)} killed; exploration alone found "
        f"{len(results) - len(missed)}/{len(results)}" + (f"; survived: {', '.join(survived)}" if survived else ""),
        highlight=False,
    )

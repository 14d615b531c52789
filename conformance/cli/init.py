"""``conformance init``: an adapter skeleton for a spec, and a pytest file
running it (conformance/scaffold.py writes them)."""

from __future__ import annotations

import os
import sys

import click
from rich.text import Text

from statemachines import SpecError, load_spec

from ..scaffold import TRANSPORTS
from .common import cli, console, errors, spec_file

__all__ = ["init"]


@cli.command()
@click.argument("spec")
@click.option(
    "--transport",
    type=click.Choice(list(TRANSPORTS)),
    default="python",
    show_default=True,
    help="python: an Adapter class in the kit's process; stdio-python / stdio-node: a program "
    "speaking the stdio protocol.",
)
@click.option(
    "--dir",
    "directory",
    default=".",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Where to write the adapter and its pytest file.",
)
@click.option(
    "--profile",
    default=None,
    metavar="NAME",
    help="A profile of the spec for the adapter to declare; its header then shows the values declaring it sets.",
)
@click.option("--force", is_flag=True, help="Overwrite files the scaffold would replace.")
def init(spec: str, transport: str, directory: str, profile: str | None, force: bool) -> None:
    """Write an adapter skeleton for SPEC (a bundled spec's name or a path) and a
    pytest file running it: every operation stubbed, answering not_implemented,
    with a comment naming its args, result and errors. It runs as written."""
    import shlex
    import shutil

    from ..scaffold import ScaffoldError, check_scaffold, plan_scaffold, write_scaffold

    path = spec_file(spec)
    try:
        loaded = load_spec(path)
    except SpecError as exc:
        errors.print(Text(f"✗ {spec}", style="bold red") + Text(f": {len(exc.problems)} problem(s)"))
        for problem in exc.problems:
            errors.print(Text(f"  {problem}"))
        sys.exit(2)
    # A bundled name stays a name; a path is written relative to the target directory.
    spec_ref = spec if path != spec else os.path.relpath(os.path.abspath(path), os.path.abspath(directory))
    try:
        scaffold = plan_scaffold(loaded, spec_ref, transport, profile=profile)
        written = write_scaffold(scaffold, directory, force=force)
    except ScaffoldError as exc:
        errors.print(f"error: {exc}", markup=False)
        sys.exit(2)
    here = plan_scaffold(
        loaded,
        spec_ref,
        transport,
        profile=profile,
        python=shlex.quote(sys.executable),
        pytest=f"{shlex.quote(sys.executable)} -m pytest",
    )
    for file in written:
        console.print(Text("✓ ", style="green") + Text(f"wrote {file}"))
    console.print(
        f"{len(loaded.operations)} operations of {loaded.id} {loaded.version} stubbed; each answers "
        f"not_implemented until you connect it. Run it now, from {directory}:",
        highlight=False,
    )
    console.print(f"  {here.run_command}\n  {here.test_command}", highlight=False, soft_wrap=True)
    _print_profiles(loaded, profile)
    adapter_file = next(name for name in scaffold.files if not name.startswith("test_"))
    trouble = check_scaffold(loaded, path, transport, directory, adapter_file)
    if trouble is None:
        console.print(Text("✓ ", style="green") + Text(f"{adapter_file} starts and answers the kit's handshake"))
    else:
        hint = " (is Node.js installed?)" if transport == "stdio-node" and shutil.which("node") is None else ""
        errors.print(f"warning: {adapter_file} was written but does not start yet{hint}: {trouble}", markup=False)


def _print_profiles(spec, profile: str | None) -> None:
    """The declared profile's values, or the profiles there are to declare."""
    from ..scaffold import profile_summary

    if profile is not None:
        console.print(f"The adapter declares {profile_summary(spec, profile)} (listed in its header).", highlight=False)
    elif spec.profiles:
        console.print(
            f"{spec.id} has profiles {', '.join(spec.profiles)}: `init --profile NAME` writes an adapter "
            f"declaring one; declaring a profile sets its parameter values (listed in the adapter's header).",
            highlight=False,
        )

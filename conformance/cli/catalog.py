"""What the kit ships: ``specs`` (the installed specs, nameable instead of
a path), ``docs`` (its documents) and ``schema`` (JSON Schemas for editors)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from rich.table import Table
from rich.text import Text

from statemachines import SpecError, load_spec

from ..reporting.safe_files import open_new
from ..schema_files import SCHEMA_NAMES
from ..specs import bundled_specs, changelog_path, changelog_versions
from .common import cli, console, spec_file

__all__ = ["list_specs", "show_docs", "schema"]


def _changelog_summary(path) -> str:
    """The versions a spec's changelog covers and its newest major change, in a few words."""
    found = changelog_path(path)
    if found is None:
        return "—"
    versions = changelog_versions(found.read_text(encoding="utf-8"))
    majors = [version for version, rest in versions if "major" in rest]
    newest = versions[0][0] if versions else "?"
    return f"{len(versions)} versions to {newest}" + (f"; major {majors[0]}" if majors else "")


def _print_changelog(spec: str) -> None:
    path = spec_file(spec)
    found = changelog_path(path)
    if found is None:
        raise click.UsageError(
            f"{spec} has no changelog: a spec's changelog is the file beside it named "
            f"{Path(path).name.removesuffix('.yaml')}.changelog.md"
        )
    click.echo(found.read_text(encoding="utf-8"), nl=False)


@cli.command("specs")
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
@click.option(
    "--changelog",
    "changelog",
    metavar="SPEC",
    default=None,
    help="Print SPEC's changelog instead: what changed in each version, and for a major "
    "change what an implementation must re-check.",
)
def list_specs(as_json: bool, changelog: str | None) -> None:
    """List the installed specs that can be named instead of a path: this
    kit's own and those other packages contribute (entry point group
    lifecycle_conformance.specs), each with what its changelog covers."""
    import json

    if changelog is not None:
        _print_changelog(changelog)
        return
    rows: list[dict[str, Any]] = []
    for entry in bundled_specs():
        try:
            spec = load_spec(entry.path)
        except SpecError as exc:
            rows.append(
                {
                    "name": entry.name,
                    "error": f"{len(exc.problems)} problem(s); run `conformance validate {entry.name}`",
                    "source": entry.source,
                }
            )
            continue
        rows.append(
            {
                "name": entry.name,
                "id": spec.id,
                "version": spec.version,
                "title": spec.title,
                "profiles": sorted(spec.profiles),
                "operations": len(spec.operations),
                "scenarios": len(spec.scenarios),
                "reference": spec.implementations.get("reference"),
                "mutants": spec.implementations.get("mutants"),
                "source": entry.source,
                "path": str(entry.path),
                "changelog": str(changelog_path(entry.path) or "") or None,
                "changes": _changelog_summary(entry.path),
            }
        )
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    table = Table(title="Installed specs (name them instead of a path: conformance run NAME)")
    for column in ("name", "version", "profiles", "operations", "scenarios", "bundled reference", "changelog"):
        table.add_column(column, overflow="fold")
    for row in rows:
        if "error" in row:
            blank = [Text("")] * 5
            table.add_row(Text(row["name"]), Text(row["error"], style="red"), *blank)
            continue
        table.add_row(
            Text(row["name"]),
            Text(row["version"]),
            Text(", ".join(row["profiles"]) or "—"),
            Text(str(row["operations"])),
            Text(str(row["scenarios"])),
            Text(row["reference"] or "—"),
            Text(row["changes"]),
        )
    console.print(table)
    console.print("What changed in each version: conformance specs --changelog NAME", highlight=False)


@cli.command("docs")
@click.argument("name", required=False)
def show_docs(name: str | None) -> None:
    """Print one of the kit's documents (the protocol for --adapter-cmd, the
    command adapter's config, the contracts), or list them without NAME."""
    from importlib import resources

    shipped = {
        entry.name.removesuffix(".md"): entry
        for entry in resources.files("conformance.docs").iterdir()
        if entry.name.endswith(".md")
    }
    if name is None:
        for doc in sorted(shipped):
            first = shipped[doc].read_text(encoding="utf-8").lstrip().splitlines()[0].lstrip("# ")
            console.print(f"{doc:<28} {first}", markup=False)
        console.print("print one with: conformance docs NAME", markup=False)
        return
    key = name.removesuffix(".md").removeprefix("docs/")
    if key not in shipped:
        raise click.UsageError(f"no document {name!r} (shipped: {', '.join(sorted(shipped))})")
    click.echo(shipped[key].read_text(encoding="utf-8"))


@cli.command()
@click.argument("name", type=click.Choice(SCHEMA_NAMES))
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write the schema to this file instead of printing it.",
)
def schema(name: str, output: str | None) -> None:
    """Print the JSON Schema of a spec file (spec-fragment: a file a spec
    includes), report.json, the stdio protocol's messages or a command adapter config (for editors: save it and point
    `# yaml-language-server: $schema=<file>` at it)."""
    from ..schema_files import schema_json

    text = schema_json(name)
    if output is None:
        click.echo(text, nl=False)
        return
    try:
        with open_new(output) as handle:
            handle.write(text)
    except OSError as exc:
        raise click.UsageError(f"cannot write {output}: {exc.strerror}") from None
    console.print(f"wrote the {name} schema to {output}", highlight=False)

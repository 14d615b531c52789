"""The reference implementation of spec/async-command.yaml as the kit runs it:
the real command-line tool ``lifecycle_references.async_cli``, driven by the
command adapter through its bundled config. The spec names
``ReferenceAdapter`` and ``MUTANTS`` here (``conformance/reference/`` may not
import the command adapter, so the glue lives outside it)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from conformance.adapters.command import CommandAdapter
from .mutants import MUTANT_TABLE
from ..mutant import Mutant

__all__ = ["CONFIG", "ReferenceAdapter", "MUTANTS"]

CONFIG = Path(__file__).resolve().parent / "adapter.yaml"


def ReferenceAdapter(**options: Any) -> CommandAdapter:  # noqa: N802 - named like the other references' classes
    """The reference tool behind the command adapter; options as for --adapter-opt (profile, vars)."""
    return CommandAdapter(CONFIG, **options)


def _mutant_factory(name: str) -> Callable[..., CommandAdapter]:
    def build(**options: Any) -> CommandAdapter:
        return CommandAdapter(CONFIG, extra_env={"ASYNC_CLI_MUTANT": name}, **options)
    return build


MUTANTS: dict[str, Mutant] = {
    name: Mutant(name, description, _mutant_factory(name)) for name, description in MUTANT_TABLE
}

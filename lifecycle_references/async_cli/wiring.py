"""The reference implementation of spec/async-command.yaml as the kit runs it:
the real command-line tool ``lifecycle_references.async_cli``, driven by the
command adapter through its bundled config. The spec names
``ReferenceAdapter`` and ``MUTANTS`` here (``conformance/reference/`` may not
import the command adapter, so the glue lives outside it)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from conformance.adapters.command import CommandAdapter

from ..mutant import Mutant
from .mutants import MUTANT_TABLE

__all__ = ["CONFIG", "ReferenceAdapter", "MUTANTS"]

CONFIG = Path(__file__).resolve().parent / "adapter.yaml"


def ReferenceAdapter(**options: Any) -> CommandAdapter:
    """The reference tool behind the command adapter; options as for --adapter-opt (profile, vars)."""
    return CommandAdapter(CONFIG, **options)


def _mutant_factory(name: str) -> Callable[..., CommandAdapter]:
    def build(**options: Any) -> CommandAdapter:
        return CommandAdapter(CONFIG, extra_env={"ASYNC_CLI_MUTANT": name}, **options)

    return build


# Steps of the shortest counterexample for each bug (Mutant.shortest), as a
# counterexample file counts them; tests/test_mutants.py holds the kit's
# reduced counterexamples to 1.5 times these.
SHORTEST: dict[str, int] = {
    'running_exits_zero': 2,
    'cancelled_not_terminal': 2,
    'no_duration_meta': 1,
    'timeout_not_failed': 3,
    'ok_follows_exit_code': 2,
    'status_command_not_installed': 2,
    'cancel_finished_changes_it': 3,
    'not_found_exits_one': 1,
    'unlocked_state': 1,
    'status_trusts_worker': 3,
    'work_at_timeout_times_out': 3,
    'timeout_one_ms_late': 3,
    'late_look_times_out': 3,
    'poll_interval_backs_off': 3,
    'terminal_poll_interval_zero': 2,
    'recancel_no_warning': 3,
    'cancel_check_then_act': 2,
    'next_id_crashes': 1,
    'abbreviated_ids': 2,
    'id_number_alias': 2,
}

MUTANTS: dict[str, Mutant] = {
    name: Mutant(name, description, _mutant_factory(name), SHORTEST[name]) for name, description in MUTANT_TABLE
}

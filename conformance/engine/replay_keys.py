"""When two step lists replay the same way: a key for a reduction's memory.

A replay (engine/reduce.py ``replay_steps``) sends each step's arguments
with the names an earlier step's implementation chose (its ``chosen``
values) replaced by what the implementation chooses in this replay. Two
lists that differ only in the names they *recorded* for those choices
(``job-5`` in one, ``job-4`` in the other, with every later mention
following) therefore send the same calls to a deterministic implementation
and end the same way. A reduction meets such pairs all the time: a round
that starts again from the replay's own names (``in_own_names``) tries the
very candidates the round before tried, renamed.

``replay_key`` gives both lists one key: every recorded choice becomes a
marker naming the step and the position that chose it. It gives a key only where that
can hold, and None otherwise: a list racing calls (a replay may go another
way), or a name recorded by two steps (a replay maps a recorded name to one
choice only). One more condition needs the replay: every choice a later step
may mention was made in it (a refused start chose nothing, and a mention of
its recorded name goes out as written). ``choices_made`` tells, from the
steps and the replay's own steps; only a list whose replay made them may
stand for the others of its key.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["choices_made", "replay_key"]


class _Unsure(Exception):
    """The list's replays may not depend on its steps alone."""


def replay_key(steps: list[dict]) -> str | None:
    """One text for step lists whose replays send the same calls (see the
    module's docstring), another for lists that differ otherwise; None when
    the steps cannot tell."""
    chosen_by: dict[str, list[int]] = {}
    out: list[Any] = []
    try:
        for index, step in enumerate(steps):
            if "concurrently" in step:
                return None
            if "advance_ms" in step:
                out.append(["advance", step["advance_ms"]])
                continue
            out.append(["call", step.get("call"), _marked(step.get("args"), chosen_by)])
            for position, name in enumerate(step.get("chosen") or ()):
                if not isinstance(name, str) or name in chosen_by:
                    return None
                chosen_by[name] = [index, position]
    except _Unsure:
        return None
    return json.dumps(out, sort_keys=True, default=repr)


def choices_made(steps: list[dict], replayed: list[dict]) -> bool:
    """Whether a replay (``replayed``: its steps, as engine/reduce.py's
    ``steps_of_trace`` gives them) chose a name for every name ``steps``
    recorded, in the steps it ran."""
    return all(
        len(again.get("chosen") or ()) >= len(step.get("chosen") or ())
        for step, again in zip(steps, replayed)
        if "call" in step
    )


def _marked(value: Any, chosen_by: dict[str, list[int]]) -> Any:
    """``value`` with every string an earlier step chose replaced by a marker
    of that choice: a dict under a key no argument has."""
    if isinstance(value, str):
        return {_MARK: chosen_by[value]} if value in chosen_by else value
    if isinstance(value, dict):
        if _MARK in value:
            raise _Unsure
        return {k: _marked(v, chosen_by) for k, v in value.items()}
    if isinstance(value, list):
        return [_marked(v, chosen_by) for v in value]
    return value


_MARK = "\x00chosen"

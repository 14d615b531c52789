"""Every tie of the kit to Hypothesis beyond its public API, in one place.

The exploration (``stateful.py``, ``choices.py``) draws its steps as
Hypothesis's primitive choices on ``ConjectureData`` (``draw_integer``,
``draw_string``, ``draw_boolean``, spans): three times cheaper than nested
strategies, and no public API offers them. They exist, unchanged, in every
release from ``LOWEST_TESTED`` to ``NEWEST_TESTED`` (CI runs the fast tier at
both ends: ``.ci/run``). A Hypothesis without one of them is refused by
``check_conjecture_api`` with the names missing and what to install, before
anything runs; everything else here has a fallback:

- the label of an exploration step's span is worked out here (a 64-bit
  integer from the name), not taken from Hypothesis;
- the choice budget an example stays under (``buffer_size``) falls back to
  Hypothesis's long-standing 8 KiB;
- a string's characters (``string_intervals``) fall back to a nested
  ``st.text`` draw when Hypothesis's interval sets are not there;
- the attributes ``@given`` reads from a test for its seed, its example
  database key and whether it prints its arguments (``fix_seed``,
  ``key_database``, ``quiet_arguments``) are set in one place; the public
  ``@seed`` would switch the example database off.

Hypothesis's observability (its JSON-lines test case observations, which
Tyche reads) is asked whether it is on (``observing``) and given a callback
that writes the observations to a file of the run's (``observations_to``);
both fall back to "off" on a Hypothesis without them.

Hypothesis's draws of constants from loaded modules are switched off in
``stateful._draws_of_the_seed_alone``, itself guarded; its generation-time
mutator (``fresh_examples_only``) here, likewise.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import hypothesis

from ..errors import HypothesisUnsupported

__all__ = [
    "LOWEST_TESTED",
    "NEWEST_TESTED",
    "CONJECTURE_METHODS",
    "HypothesisUnsupported",
    "check_conjecture_api",
    "conjecture_data",
    "span_label",
    "buffer_size",
    "string_intervals",
    "fix_seed",
    "key_database",
    "quiet_arguments",
    "fresh_examples_only",
    "observing",
    "observations_to",
]

LOWEST_TESTED = "6.140.2"  # pyproject's lower bound (HypoFuzz 25.11's too)
NEWEST_TESTED = "6.170.17"
CONJECTURE_METHODS = ("draw_integer", "draw_string", "draw_boolean", "start_span", "stop_span")
_DEFAULT_BUFFER_SIZE = 8 * 1024


def check_conjecture_api(data_class: Any = None) -> None:
    """Raise ``HypothesisUnsupported`` when Hypothesis's ``ConjectureData``
    (or ``data_class``) lacks a method the exploration draws with."""
    if data_class is None:
        try:
            from hypothesis.internal.conjecture.data import ConjectureData as data_class
        except ImportError:
            data_class = None
    missing = [name for name in CONJECTURE_METHODS if not hasattr(data_class, name)]
    if missing:
        raise HypothesisUnsupported(
            f"Hypothesis {hypothesis.__version__} has no ConjectureData.{', ConjectureData.'.join(missing)}, "
            f"which the kit's exploration draws its steps with; the kit is tested with Hypothesis "
            f"{LOWEST_TESTED} to {NEWEST_TESTED}: install one of those "
            f'(pip install "hypothesis>={LOWEST_TESTED},<={NEWEST_TESTED}") and report the new release '
            f"to the kit's maintainers"
        )


def conjecture_data(data: Any) -> Any:
    """The ``ConjectureData`` behind ``st.data()``'s draw object."""
    return data.conjecture_data


def span_label(name: str) -> int:
    """A span's label: a 64-bit integer worked out from its name."""
    return int.from_bytes(hashlib.sha384(name.encode("utf-8")).digest()[:8], "big")


def buffer_size() -> int:
    """How many choices an example may make before Hypothesis stops it."""
    try:
        from hypothesis.internal.conjecture.engine import BUFFER_SIZE
    except ImportError:
        return _DEFAULT_BUFFER_SIZE
    return int(BUFFER_SIZE)


def string_intervals(alphabet: str) -> Any:
    """Hypothesis's set of ``alphabet``'s characters, for ``draw_string``;
    None when this Hypothesis has none (draw through ``st.text`` then)."""
    try:
        from hypothesis.internal.intervalsets import IntervalSet
    except ImportError:
        return None
    return IntervalSet.from_string(alphabet)


def fix_seed(test: Any, seed: int) -> None:
    """Fix a ``@given`` test's randomness, keeping its example database on."""
    test._hypothesis_internal_use_seed = seed


def key_database(inner_test: Any, key: bytes) -> None:
    """Store a ``@given`` test's examples under ``key`` in the example database."""
    inner_test._hypothesis_internal_add_digest = key


def quiet_arguments(test: Any) -> None:
    """A failing ``@given`` test does not print its drawn arguments (the kit reports the steps)."""
    test._hypothesis_internal_print_given_args = False


@contextmanager
def fresh_examples_only(enabled: bool = True) -> Iterator[None]:
    """While it lasts (and ``enabled``), Hypothesis's generation runs no
    mutations of the examples it generated.

    After each new valid example, Hypothesis runs up to six more made from
    it by copying one span over another of the same label: for the
    exploration, one step written over another, the rest of the example
    unchanged. A run of 100 examples then holds about 15 drawn afresh, each
    with a handful of near copies, and a combination none of those 15 drew
    (one of task-progress's 43 derived races, at seed 3) is never tried.
    Without the mutator every example is drawn afresh (engine/steering.py:
    ``SteeringChoices.fresh_examples``, with the measurements). Shrinking
    and the example database are untouched. A Hypothesis without the
    mutator: nothing to switch off."""
    try:
        from hypothesis.internal.conjecture.engine import ConjectureRunner

        mutate = ConjectureRunner.generate_mutations_from
    except (ImportError, AttributeError):
        yield
        return
    if not enabled or getattr(mutate, "_conformance_off", False):  # off, or switched off already
        yield
        return

    def none(self: Any, data: Any) -> None:
        return None

    none._conformance_off = True  # type: ignore[attr-defined]  # a marker read above
    ConjectureRunner.generate_mutations_from = none  # type: ignore[method-assign]  # restored below
    try:
        yield
    finally:
        ConjectureRunner.generate_mutations_from = mutate  # type: ignore[method-assign]  # as it was


def observing() -> bool:
    """Whether Hypothesis's observability is on (its own switch, the
    environment variable, or ``observations_to``): then each step of the
    exploration names its features (``stateful``)."""
    try:
        from hypothesis.internal import observability
    except ImportError:  # pragma: no cover - every tested release has it
        return False
    enabled = getattr(observability, "observability_enabled", None)
    if enabled is not None:
        return bool(enabled())
    return bool(getattr(observability, "TESTCASE_CALLBACKS", None))  # releases before the function


def _observation_json(observation: Any) -> Any:
    try:
        from hypothesis.strategies._internal.utils import to_jsonable

        return to_jsonable(observation, avoid_realization=False)
    except (ImportError, TypeError):  # an older signature, or none: the dataclass as it is
        plain = dataclasses.is_dataclass(observation) and not isinstance(observation, type)
        return dataclasses.asdict(observation) if plain else observation


@contextmanager
def observations_to(path: str) -> Iterator[bool]:
    """While inside: every observation Hypothesis makes is appended to
    ``path`` as one JSON line (Hypothesis's observability format; processes of
    one run append to the same file). Yields False, writing nothing, on a
    Hypothesis without observability callbacks."""
    try:
        from hypothesis.internal import observability
    except ImportError:  # pragma: no cover
        yield False
        return
    add = getattr(observability, "add_observability_callback", None)
    remove = getattr(observability, "remove_observability_callback", None)
    if add is None or remove is None:
        yield False
        return
    lock = threading.Lock()
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)

    def deliver(observation: Any, thread_id: int | None = None) -> None:
        line = (json.dumps(_observation_json(observation), default=str) + "\n").encode()
        with lock:
            os.write(fd, line)  # one write per line: lines of processes appending together stay whole

    add(deliver, all_threads=True)
    try:
        yield True
    finally:
        remove(deliver)
        os.close(fd)

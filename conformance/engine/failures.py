"""What a failed check says: a stable kind, a human message, and the evidence."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = [
    "Failure",
    "FAILURE_KINDS",
    "NOT_IMPLEMENTED",
    "NOT_REPRODUCING",
    "INPUT_REFUSED",
    "DATA_ERRORS",
    "signature",
    "same_bug",
]

FAILURE_KINDS = (
    "divergence",  # the implementation did something other than the model predicts
    "expectation",  # a scenario's written expectation does not hold
    "schema",  # a result or effect breaks the operation's JSON Schema
    "implementation-error",  # the implementation raised or answered something malformed
    "timeout",  # an operation did not answer in time
    "invariant",  # an observed invariant (e.g. at most one injection per job) broke
    "linearizability",  # concurrent calls match no sequential order of the model
    "nondeterminism",  # the same steps gave different answers when replayed
    "spec-error",  # the spec contradicts itself (its model breaks its own invariant)
    "not-implemented",  # the implementation answered an error of kind NOT_IMPLEMENTED (a stub)
    "coverage",  # the run exercised less of the spec than --min-coverage asks
    "input-refused",  # an adapter refused a call's arguments before anything ran (docs/trust-model.md)
    "not-reproducing",  # a replayed call answered in another kind than recorded: the failure's state was not reached
)

# A replay (or a scenario kept from one) whose recorded call now answers in
# another kind (a result where the recording had an error, or the reverse)
# while the model agrees: it never reached the state the failure was in, so
# its passing says nothing about a fix. The run's verdict is `not-reproducing`,
# exit code 3 (engine/runner.py), never `pass`.
NOT_REPRODUCING = "not-reproducing"

# A step whose input was refused (a replay file naming a command the tool did
# not print, a NUL byte a command line cannot carry): the input is at fault,
# not the implementation.
INPUT_REFUSED = "input-refused"

# Failures that say the run could not be carried out as written (the spec's
# own expressions or model broke, or its input was refused): the run's verdict
# is `error` with exit code 2, never a verdict on the implementation.
DATA_ERRORS = frozenset({"spec-error", INPUT_REFUSED})

# A failure's headline (a counterexample file's summary line) keeps this many
# characters of the message's first line; the reports hold the whole message.
HEADLINE_LIMIT = 2000

# The error kind an implementation answers for an operation it does not
# implement yet (every stub `conformance init` writes). The kit reports it as
# "operation X is not implemented" before comparing with the model, so the
# kind is reserved: no spec can expect it as a rejection.
NOT_IMPLEMENTED = "not_implemented"


@dataclass
class Failure:
    kind: str
    message: str
    step: int | None = None
    operation: str | None = None
    args: Any = None
    expected: Any = None
    observed: Any = None
    path: str | None = None
    steps: list = field(default_factory=list)
    seed: int | None = None
    replay: str | None = None
    counterexample_file: str | None = None
    # Other failures the kit showed to share this one's cause (engine/causes.py),
    # each as a report lists a failure; this one, the shortest, is their headline.
    symptoms: list = field(default_factory=list)
    # A race (kind "linearizability"): where the sequential order that came
    # closest first differed, ``{"call": i, "operation": name}`` (no "call":
    # the look at the state after the race); ``path``, ``expected`` and
    # ``observed`` are that difference's.
    closest: dict | None = None

    def to_dict(self) -> dict:
        return _without_empty(asdict(self))

    def headline(self, limit: int = HEADLINE_LIMIT) -> str:
        """The message's first line, cut past ``limit`` characters: it may
        quote a whole answer of the implementation, of any size."""
        if not self.message:
            return self.kind
        end = self.message.find("\n")
        length = len(self.message) if end < 0 else end
        if length <= limit:
            return self.message[:length]
        return f"{self.message[:limit]}… [truncated: {length:,} characters in all]"


def _without_empty(entry: dict) -> dict:
    """A failure as a report lists it: its optional fields (and its
    symptoms') only where they say something."""
    for optional in ("symptoms", "closest"):
        if not entry.get(optional):
            entry.pop(optional, None)
    for symptom in entry.get("symptoms") or []:
        if isinstance(symptom, dict):
            _without_empty(symptom)
    return entry


def signature(failure: Failure | dict) -> tuple:
    """What makes two failures the same bug: kind, operation and path (list
    indexes aside), of a Failure or of a failure as a report lists it."""
    if isinstance(failure, dict):
        kind, operation, path = failure.get("kind"), failure.get("operation"), failure.get("path")
    else:
        kind, operation, path = failure.kind, failure.operation, failure.path
    return kind, operation, (re.sub(r"\[\d+\]", "[*]", path) if path else None)


# The kinds of failure that are one operation's wrong answer (its result, its
# error, its shape): two of them on one operation may be one fault seen two ways.
ANSWER_KINDS = frozenset({"divergence", "schema", "implementation-error"})


def same_bug(one: tuple, other: tuple) -> bool:
    """Whether two failure signatures are one bug to Hypothesis's shrinking:
    the same signature, or two wrong answers of the same operation. A mutant
    that queues a running job's injection makes ``turn_boundary`` inject it
    after three steps and crash on sorting it with a finished one after five:
    one fault, and the shorter sequence is the better report. A failure of
    another operation, a race or a broken invariant is another bug (left to
    --max-failures, which lists distinct signatures). The replay reduction
    that follows uses the same rule: it may end at the shorter face of the
    fault, never at another operation's failure."""
    if one == other:
        return True
    return one[1] is not None and one[1] == other[1] and one[0] in ANSWER_KINDS and other[0] in ANSWER_KINDS

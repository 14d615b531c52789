"""The record every shipped mutant is described by."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from conformance.adapters.adapter import Adapter

__all__ = ["Mutant"]


@dataclass(frozen=True)
class Mutant:
    """A faulty variant of a reference implementation: one realistic bug."""

    name: str
    description: str  # one sentence: the bug
    factory: Callable[..., Adapter]  # (**adapter options) -> Adapter

"""Judging an implementation: the lockstep session (``session``, ``compare``,
``linearize``), the scenario matrix (``scenarios``), the generated stateful
exploration (``stateful``), failure records (``failures``), and the one
runner behind every front door (``runner``)."""

__all__: list[str] = []

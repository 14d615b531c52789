"""A reference background task table: the `task-table` profile of the async jobs contract."""

from .adapter import TaskTableAdapter

__all__ = ["TaskTableAdapter"]

"""A reference runtime for task progress: local agent tasks and backgrounded main-session tasks."""

from .adapter import ReferenceAdapter

__all__ = ["ReferenceAdapter"]

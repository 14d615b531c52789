"""A reference runtime for thread jobs: background tool jobs scoped to a chat thread."""

from .adapter import ReferenceAdapter

__all__ = ["ReferenceAdapter"]

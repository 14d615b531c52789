"""A reference runtime for process sessions: a shell tool's background exec sessions."""

from .adapter import ReferenceAdapter

__all__ = ["ReferenceAdapter"]

"""A reference runtime for the job-manager profile of the async-jobs contract:
an async job registry with a follow-up delivery queue, and the ``job`` tool."""

from .adapter import JobManagerAdapter

__all__ = ["JobManagerAdapter"]

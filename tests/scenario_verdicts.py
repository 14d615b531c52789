"""What a scenario's report entry says about conformance, for tests that run a
correct implementation: a scenario that races calls may pass, or may not
have met the race window in any of its runs (verdict skip, its
``race_windows`` met 0: the kit could not race the calls on this machine;
not a failure, and not a pass either)."""

from __future__ import annotations

__all__ = ["conforms", "race_not_exercised"]


def race_not_exercised(entry: dict) -> bool:
    windows = entry.get("race_windows")
    return entry.get("verdict") == "skip" and isinstance(windows, dict) and windows.get("met") == 0


def conforms(entry: dict) -> bool:
    """Passed, or raced calls that never met the race window."""
    return entry.get("verdict") == "pass" or race_not_exercised(entry)

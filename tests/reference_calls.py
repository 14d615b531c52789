"""Calling a reference adapter in the reference tests: a call expected to
succeed, one expected to be refused, and a whole call sequence on a fresh
instance (to compare a mutant's behaviour with the reference's)."""

from __future__ import annotations

__all__ = ["err", "observe", "ok"]


def ok(a, op, **args):
    """Call and expect success; return (result, effects)."""
    response = a.call(op, args)
    assert "error" not in response, response
    return response["result"], response["effects"]


def err(a, op, **args):
    """Call and expect an error without effects; return (kind, message)."""
    response = a.call(op, args)
    assert "result" not in response, response
    assert response["effects"] == []
    return response["error"]["kind"], response["error"]["message"]


def observe(factory, scenario):
    """Run ``scenario(adapter)`` on a fresh adapter from ``factory`` and return what it returns."""
    a = factory()
    try:
        return scenario(a)
    finally:
        a.close()

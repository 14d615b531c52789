#!/usr/bin/env python3
"""A minimal adapter program for the conformance kit's stdio protocol (v1).

It reads one JSON request per line on stdin and writes one JSON response per
line on stdout (see docs/adapter-protocol.md). Here the implementation under
test is the kit's own Python reference runtime for the thread-jobs spec;
replace ``implementation`` and ``handle`` with calls into your code.

    conformance run spec/thread-jobs.yaml --adapter-cmd ".venv/bin/python examples/python-stdio/adapter.py"
"""

import json
import sys

from lifecycle_references.thread_jobs import ReferenceAdapter

SPEC = {"id": "thread-jobs", "version": "2.0.0"}

implementation = ReferenceAdapter()


def handle(request: dict) -> dict:
    """The answer to one request, without its id."""
    kind = request["type"]
    if kind == "hello":
        me = implementation.describe()
        return {
            "protocol": 1,
            "implementation": {"name": me["name"], "version": me["version"]},
            "specs": [{**SPEC, "profile": me["profile"], "parameters": me["parameters"]}],
            "capabilities": {"concurrent": False},
        }  # one request at a time
    if kind == "reset":
        implementation.reset(request["now_ms"])
        return {"ok": True}
    if kind == "clock":
        return {"ok": True, "effects": implementation.set_clock(request["now_ms"])}
    if kind == "call":
        # {"result": ..., "effects": [...]} or {"error": {"kind", "message"}, "effects": [...]}
        return implementation.call(request["operation"], request["args"])
    if kind == "bye":
        implementation.close()
        return {"ok": True}
    return {"error": {"kind": "unknown_request", "message": f"unknown request type {kind!r}"}}


def main() -> None:
    for line in sys.stdin:
        request = json.loads(line)
        response = {"id": request["id"], **handle(request)}
        sys.stdout.write(json.dumps(response) + "\n")
        sys.stdout.flush()  # the kit waits for each answer
        if request["type"] == "bye":
            break


if __name__ == "__main__":
    main()

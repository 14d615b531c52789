"""Checking concurrent calls: their observed answers must equal what the model
predicts for SOME sequential order of the same calls."""
from __future__ import annotations

import json

from statemachines import ExpressionError, ObservationError

from .compare import compare
from .failures import Failure

__all__ = ["linearize", "SEARCH_BUDGET"]

SEARCH_BUDGET = 20_000  # model predictions tried before the search gives up


def _short(value, limit: int = 160) -> str:
    text = json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _summary(response) -> str:
    """One line for a response: the result or error, and its effects by name."""
    if not isinstance(response, dict):
        return _short(response)
    head = (f"error {response['error'].get('kind')}" if isinstance(response.get("error"), dict)
            else f"result {_short(response.get('result'))}")
    names: dict = {}
    for effect in response.get("effects") or []:
        name = effect.get("effect") if isinstance(effect, dict) else "?"
        names[name] = names.get(name, 0) + 1
    effects = ", ".join(f"{n}×{c}" for n, c in names.items()) or "no effects"
    return f"{head}; {effects}"


def _key_positions(followups: list, key: str) -> dict:
    """Where each entity key first appears in the probes' answers (list order)."""
    positions: dict = {}

    def walk(node):
        if isinstance(node, dict):
            if isinstance(node.get(key), str):
                positions.setdefault(node[key], len(positions))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    for _, _, response in followups:
        walk(response)
    return positions


def linearize(session, calls: list[tuple[str, dict]], responses: list[dict], index: int,
              followups: list | None = None) -> Failure | None:
    """Find a sequential order matching every response (and then the follow-up
    probe answers); leave the model in that order's end state. Return a
    Failure when none exists."""

    if session.acceptor("", {}) is not None:
        # An order the implementation matches exactly comes first; only when
        # there is none may accepted deviations explain the answers (else an
        # accepted refusal could pick an order the implementation never took).
        exact = _linearize(session, calls, responses, index, followups, accepting=False)
        if exact is None:
            return None
    return _linearize(session, calls, responses, index, followups, accepting=True)


def _linearize(session, calls: list[tuple[str, dict]], responses: list[dict], index: int,
               followups: list | None, *, accepting: bool) -> Failure | None:
    model = session.model
    followups = followups or []

    def acceptor(op: str, args: dict):
        return session.acceptor(op, args) if accepting else None
    key = session.spec.entity.key
    positions = _key_positions(followups, key)

    def hint(i: int) -> tuple:
        response = responses[i] or {}
        value = (response.get("result") or {}).get(key) if isinstance(response.get("result"), dict) else None
        value = value if value is not None else calls[i][1].get(key)
        return (positions.get(value, len(positions)), i)

    order_hint = sorted(range(len(calls)), key=hint)
    start = model.snapshot()
    budget = [SEARCH_BUDGET]
    best: dict = {"depth": -1, "order": [], "diff": None}

    def settled(order: list[int]) -> bool:
        for op, args, response in followups:
            snap = model.snapshot()
            prediction = model.predict(op, args, response)
            model.restore(snap)
            diff = compare(prediction, response, accept=acceptor(op, args))
            if diff:
                if len(order) >= best["depth"]:
                    best.update(depth=len(order), order=list(order), diff=diff)
                return False
        return True

    def search(remaining: list[int], order: list[int]) -> bool:
        if not remaining:
            return settled(order)
        tried: set = set()
        for i in remaining:
            op, args = calls[i]
            signature = json.dumps([op, args, responses[i]], sort_keys=True, default=str)
            if signature in tried:
                continue  # identical calls with identical answers are interchangeable
            tried.add(signature)
            if budget[0] <= 0:
                return False
            budget[0] -= 1
            snap = model.snapshot()
            try:
                prediction = model.predict(op, args, responses[i])
                diff = compare(prediction, responses[i], accept=acceptor(op, args))
            except ObservationError as exc:
                diff = ("(observation)", None, responses[i], str(exc))
            except ExpressionError as exc:
                diff = ("(spec)", None, None, str(exc))
            if diff is None:
                if search([j for j in remaining if j != i], order + [i]):
                    return True
            elif len(order) > best["depth"]:
                best.update(depth=len(order), order=order + [i], diff=diff)
            model.restore(snap)
        return False

    if search(order_hint, []):
        return None
    model.restore(start)
    # The first line names the calls and where the closest order broke: the rule at stake.
    names = list(dict.fromkeys(op for op, _ in calls))
    racing = " and ".join(f"{op} ×{sum(1 for o, _ in calls if o == op)}" if sum(1 for o, _ in calls if o == op) > 1
                          else op for op in names)
    head = f"{racing} at once: {len(calls)} concurrent calls match no sequential order of the spec's model"
    if best["diff"] is not None:
        path, expected, observed, reason = best["diff"]
        head += f" (closest: call {best['order'][-1]}, {calls[best['order'][-1]][0]}: {path}: {reason})"
    lines = [head + "."]
    for i, ((op, args), response) in enumerate(zip(calls, responses)):
        lines.append(f"  call {i}: {op}({_short(args)}) -> {_summary(response)}")
    if best["diff"] is not None:
        order = " then ".join(f"call {i}" for i in best["order"])
        lines.append(f"Closest order tried: {order}; it first differs at {path}: {reason}")
    if budget[0] <= 0:
        lines.append(f"(the search stopped after {SEARCH_BUDGET} attempts)")
    diff = best["diff"] or (None, None, None, None)
    return Failure(kind="linearizability", message="\n".join(lines), step=index,
                   expected=diff[1], observed=diff[2], path=diff[0],
                   steps=[dict(s) for s in session.trace])

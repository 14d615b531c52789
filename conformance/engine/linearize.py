"""Checking concurrent calls: their observed answers must equal what the model
predicts for SOME sequential order of the same calls.

Several orders may match every answer and the probe after them and still
end in different states: two calls racing on one record, whose difference
(which payload won) no answer so far shows. The check goes on from the
first such order and keeps what it needs to try the others (``RaceOutcome``):
when a later step contradicts the order it chose, the session tries each
other end state, replaying the steps since the race (``other_end_states``),
before it reports a failure."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass, field

from statemachines import ExpressionError, ObservationError

from .compare import compare, observation_problem, records_left
from .failures import Failure

__all__ = ["linearize", "other_end_states", "RaceOutcome", "SEARCH_BUDGET", "MAX_LATER_STEPS", "MAX_OPEN_RACES"]

SEARCH_BUDGET = 20_000  # model predictions tried before the search gives up
MAX_ORDERS = 24  # orders of one group tried again when a later step contradicts the chosen one
MAX_LATER_STEPS = 400  # steps after a race kept to re-check another order against; past it, the choice stands
MAX_OPEN_RACES = 3  # concurrent groups whose orders stay open at once (the newest ones)


@dataclass
class RaceOutcome:
    """What a concurrent group left to decide later: the model's state before
    it, the calls and answers, the probe answers after it, and the end states
    already tried (the chosen order's first). ``later`` collects the steps
    checked since, each ``(operation, args or now_ms, answer)``, or
    ``(None, (calls, answers, probe answers, trace index), None)`` for a later
    concurrent group (replayed by finding an order for it again)."""

    start: tuple
    calls: list
    responses: list
    followups: list
    accepting: bool
    order: list  # the order chosen first
    tried: list | None = None  # fingerprints of the end states adopted so far (worked out when first needed)
    later: list = field(default_factory=list)
    previous: RaceOutcome | None = None  # the group before, whose orders are still open too
    index: int | None = None  # the group's place in the session's trace (None: a group checked again)
    made: dict = field(default_factory=dict)  # call -> the values it chose in the order other_end_states gave last

    def adopt(self, session, order: list[int]) -> None:
        """Another order of the group explains the steps since: the trace
        says so, with the values each call chose in it (``_note_choices``),
        so a reduction runs the calls in it and renames what they create."""
        _note_choices(session, self.index, self.made, order)

    def chain(self) -> Iterator[RaceOutcome]:
        """This outcome and the earlier ones still open, newest first."""
        outcome: RaceOutcome | None = self
        while outcome is not None:
            yield outcome
            outcome = outcome.previous


def fingerprint(model) -> str:
    """The model's state as one string (records, tables, counters; not coverage)."""
    records = sorted(json.dumps(r, sort_keys=True, default=str) for r in model.store.all())
    return json.dumps([model.now, records, model.tables, model.counters], sort_keys=True, default=str)


def other_end_states(session, outcome: RaceOutcome):
    """Each end state of another order of the group's calls that matches every
    answer and the probe after it, not yet tried (at most ``MAX_ORDERS``
    orders): the model's snapshot and the order. The model is left wherever
    the last try left it."""
    model = session.model
    calls, responses = outcome.calls, outcome.responses

    def acceptor(op, args):
        return session.acceptor(op, args) if outcome.accepting else None

    if outcome.tried is None:  # the first order's end state: worked out again only now, not after every group
        model.restore(outcome.start)
        for i in outcome.order:
            _matches(model, calls[i][0], calls[i][1], responses[i], acceptor)
        outcome.tried = [fingerprint(model)]
    for order in itertools.islice(itertools.permutations(range(len(calls))), MAX_ORDERS):
        model.restore(outcome.start)
        made: dict[int, list] = {}
        if not all(_made(model, calls[i], responses[i], acceptor, made, i) for i in order):
            continue
        end = model.snapshot()
        if not all(
            _matches(model, op, args, response, acceptor, keep=False) for op, args, response in outcome.followups
        ):
            continue
        mark = fingerprint(model)
        if mark in outcome.tried:
            continue
        outcome.tried.append(mark)
        outcome.made = made
        yield end, list(order)


def _made(model, call: tuple[str, dict], response, acceptor, made: dict[int, list], i: int) -> bool:
    """Whether the model predicts call ``i``'s answer (and takes the step); the
    values it chose go to ``made[i]``."""
    got: list = []
    if not _matches(model, call[0], call[1], response, acceptor, chosen=got):
        return False
    made[i] = got[0]
    return True


def _matches(model, op, args, response, acceptor, *, keep: bool = True, chosen: list | None = None) -> bool:
    """Whether the model predicts ``response`` (and takes the step, with
    ``keep``); the prediction's chosen values are appended to ``chosen`` when
    it does."""
    try:
        prediction = model.predict(op, args, response) if keep else model.peek(op, args, response)
        if compare(prediction, response, accept=acceptor(op, args)) is not None:
            return False
    except (ObservationError, ExpressionError):
        return False
    if chosen is not None:
        chosen.append(list(prediction.chosen))
    return True


def _note_choices(session, index: int | None, made: dict[int, list], order: list[int]) -> None:
    """Each call of the group at ``index`` in the trace gets the values the
    model met it choosing (generated ids, paths) in the order adopted, as a
    plain call does: a replay that runs the group's calls one by one, or in
    another order, renames them to what it creates (engine/reduce.py). The
    group gets that order (``order``: call positions, the first to take
    effect first), so a replay that runs them one by one takes them in it
    and reaches the state the answers showed."""
    entry = _group_entry(session, index)
    if entry is None:
        return
    group = entry["concurrently"]
    for i, values in made.items():
        if i < len(group):
            if values:
                group[i]["chosen"] = values
            else:
                group[i].pop("chosen", None)  # none in this order, whatever an order tried before chose
    if sorted(order) == list(range(len(group))):
        entry["order"] = list(order)


def _group_entry(session, index: int | None) -> dict | None:
    """The concurrent group's entry at ``index`` in the session's trace, if it is one."""
    entry = session.trace[index] if index is not None and index < len(session.trace) else None
    return entry if isinstance(entry, dict) and entry.get("concurrently") else None


def _short(value, limit: int = 160) -> str:
    text = json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _summary(response) -> str:
    """One line for a response: the result or error, and its effects by name."""
    if not isinstance(response, dict):
        return _short(response)
    head = (
        f"error {response['error'].get('kind')}"
        if isinstance(response.get("error"), dict)
        else f"result {_short(response.get('result'))}"
    )
    names: dict = {}
    for effect in response.get("effects") or []:
        name = effect.get("effect") if isinstance(effect, dict) else "?"
        names[name] = names.get(name, 0) + 1
    effects = ", ".join(f"{n}×{c}" for n, c in names.items()) or "no effects"
    return f"{head}; {effects}"


def _closest(best: dict) -> dict | None:
    """Where the closest order first differed, as a failure records it: the
    racing call's index, or none for a look at the state after the race."""
    if best["diff"] is None:
        return None
    call, operation = best["at"]
    return {"operation": operation} if call is None else {"call": call, "operation": operation}


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


def linearize(
    session, calls: list[tuple[str, dict]], responses: list[dict], index: int | None, followups: list | None = None
) -> Failure | None:
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


def _linearize(
    session,
    calls: list[tuple[str, dict]],
    responses: list[dict],
    index: int | None,
    followups: list | None,
    *,
    accepting: bool,
) -> Failure | None:
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
    # identical calls with identical answers are interchangeable: tried once at each point of an
    # order (worked out when the search first needs them: most groups match their first order)
    signatures: list = []
    start = model.snapshot()
    budget = [SEARCH_BUDGET]
    best: dict = {"depth": -1, "order": [], "diff": None}
    chosen: list[int] = []
    made: dict[int, list] = {}  # call -> the values its prediction chose, in the order being tried

    def settled(order: list[int]) -> bool:
        for op, args, response in followups:
            prediction = model.peek(op, args, response)
            diff = compare(prediction, response, accept=acceptor(op, args))
            if diff:
                if len(order) >= best["depth"]:
                    best.update(
                        depth=len(order), order=list(order), diff=diff, seen=(prediction, response), at=(None, op)
                    )
                return False
        return True

    def search(remaining: list[int], order: list[int]) -> bool:
        if not remaining:
            if settled(order):
                chosen[:] = order
                return True
            return False
        tried: set = set()
        if not signatures:
            signatures[:] = [
                json.dumps([op, args, response], sort_keys=True, default=str)
                for (op, args), response in zip(calls, responses)
            ]
        for i in remaining:
            op, args = calls[i]
            signature = signatures[i]
            if signature in tried:
                continue  # identical calls with identical answers are interchangeable
            tried.add(signature)
            if budget[0] <= 0:
                return False
            budget[0] -= 1
            snap = model.snapshot()
            seen = None
            try:
                prediction = model.predict(op, args, responses[i])
                diff = compare(prediction, responses[i], accept=acceptor(op, args))
                seen = (prediction, responses[i])
                made[i] = list(prediction.chosen)  # the final order predicts every call again
            except ObservationError as exc:
                diff = ("(observation)", None, responses[i], observation_problem(exc, responses[i]))
            except ExpressionError as exc:
                diff = ("(spec)", None, None, str(exc))
            if diff is None:
                if search([j for j in remaining if j != i], order + [i]):
                    return True
            elif len(order) > best["depth"]:
                best.update(depth=len(order), order=order + [i], diff=diff, seen=seen, at=(i, op))
            model.restore(snap, again=False)
        return False

    def straight(order: list[int]) -> bool:
        """The search's first order, tried with no snapshot on the way: most
        groups match it, and the search would choose it first too."""
        for i in order:
            if not _made(model, calls[i], responses[i], acceptor, made, i):
                return False
        return settled(order)

    if straight(order_hint):
        chosen[:] = order_hint
        session.race_outcome = RaceOutcome(
            start, list(calls), list(responses), list(followups), accepting, chosen, index=index
        )
        _note_choices(session, index, made, chosen)
        return None
    model.restore(start)
    if search(order_hint, []):
        session.race_outcome = RaceOutcome(
            start, list(calls), list(responses), list(followups), accepting, chosen, index=index
        )
        _note_choices(session, index, made, chosen)
        return None
    model.restore(start)
    # The first line names the calls and where the closest order broke: the rule at stake.
    names = list(dict.fromkeys(op for op, _ in calls))
    racing = " and ".join(
        f"{op} ×{sum(1 for o, _ in calls if o == op)}" if sum(1 for o, _ in calls if o == op) > 1 else op
        for op in names
    )
    head = f"{racing} at once: {len(calls)} concurrent calls match no sequential order of the spec's model"
    if best["diff"] is not None:
        path, expected, observed, reason = best["diff"]
        call, operation = best["at"]
        where = f"call {call}, {operation}" if call is not None else f"the {operation} after them"
        head += f" (closest: {where}: {path}: {reason})"
    lines = [head + "."]
    for i, ((op, args), response) in enumerate(zip(calls, responses)):
        lines.append(f"  call {i}: {op}({_short(args)}) -> {_summary(response)}")
    if best["diff"] is not None:
        order = " then ".join(f"call {i}" for i in best["order"])
        lines.append(f"Closest order tried: {order}; it first differs at {path}: {reason}")
        seen = best.get("seen")
        left = records_left(seen[0], seen[1], path, key) if seen else None
        if left:
            lines.append(f"What the closest order leaves missing or extra: {left}")
        if call is None:
            # Every racing call's answer fits that order: only the state read after
            # them differs, and it may have gone wrong before the race.
            lines.append(
                f"Every racing call's answer fits that order; only the {operation} after them differs. "
                f"The state may have gone wrong at an earlier step, not read since: a plain failure of "
                f"the same difference elsewhere in this report is the likelier cause."
            )
    if budget[0] <= 0:
        lines.append(f"(the search stopped after {SEARCH_BUDGET} attempts)")
    diff = best["diff"] or (None, None, None, None)
    return Failure(
        kind="linearizability",
        message="\n".join(lines),
        step=index,
        expected=diff[1],
        observed=diff[2],
        path=diff[0],
        steps=[dict(s) for s in session.trace],
        closest=_closest(best),
    )

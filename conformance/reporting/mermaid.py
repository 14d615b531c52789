"""A Mermaid diagram of a spec's lifecycle, drawn from what a run did.

A ``flowchart`` rather than a ``stateDiagram``: only flowcharts let edges be
dashed and coloured one by one. Each edge is one (source, trigger, dest),
labelled with the trigger and how often the run took it; edges the run never
took are dashed and grey; the states and transitions a failure is about are
drawn red. Labels carry no state names (the arrow already shows them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["mermaid_id", "mermaid_state_diagram"]

GUARD_MAX = 28

# Label text goes inside "..." in a flowchart; Mermaid still reads "#...;" as
# an entity, "%%" as a comment, and sanitises "<" as HTML. Rewrite those.
_LABEL_SUBS = (
    ("&&", " and "),
    ("||", " or "),
    ("<=", "≤"),
    (">=", "≥"),
    ("<", "﹤"),
    (">", "﹥"),
    ("#", ""),
    ("%", " pct "),
    ('"', "'"),
    ("`", "'"),
)

# Words the (case-insensitive) state-diagram lexer takes as keywords.
_KEYWORDS = {"state", "note", "class", "classdef", "scale", "statediagram", "acctitle", "accdescr"}

_STYLES = (
    "    classDef initial fill:#333,stroke:#333",
    "    classDef terminal stroke-width:3px",
    "    classDef failed fill:#fde2e2,stroke:#c62828,stroke-width:3px,color:#b71c1c",
    "    classDef untouched fill:#f5f5f5,stroke:#bbb,color:#888,stroke-dasharray:4 3",
)


def mermaid_id(name: str) -> str:
    """A state id Mermaid accepts: only [A-Za-z0-9_], no keyword."""
    ident = re.sub(r"[^A-Za-z0-9_]", "_", str(name)) or "_"
    # "default" is matched with no word boundary, so it also breaks ids such
    # as "defaulted"; a leading digit is avoided as well.
    if ident.lower() in _KEYWORDS or ident.lower().startswith("default") or ident[0].isdigit():
        ident = "s_" + ident
    return ident


def _clean(text: str) -> str:
    for old, new in _LABEL_SUBS:
        text = text.replace(old, new)
    return " ".join(text.split())


def _guard_text(guards: list[str], dest: str) -> str | None:
    """A short guard, unless it only restates the destination (``outcome == 'done'`` into ``done``)."""
    text = " or ".join(" ".join(str(g).split()) for g in guards)
    if not text or re.search(rf"(?<![A-Za-z0-9_]){re.escape(dest)}(?![A-Za-z0-9_])", text):
        return None
    return text if len(text) <= GUARD_MAX else text[: GUARD_MAX - 1] + "…"


def _times(n: int) -> str:
    return "never" if n == 0 else f"{n}×" if n < 10_000 else f"{n / 1000:.0f}k×"


class _StateIds:
    """Flowchart ids for state names, each distinct.

    Distinct names may sanitise to the same id ("a-b", "a_b"); a prefix
    keeps flowchart keywords ("end", "graph") out of ids.
    """

    def __init__(self) -> None:
        self._ids: dict[str, str] = {}

    def __call__(self, name: str) -> str:
        if name not in self._ids:
            base = candidate = "s_" + re.sub(r"[^A-Za-z0-9_]", "_", name)
            n = 2
            while candidate in self._ids.values():
                candidate, n = f"{base}_{n}", n + 1
            self._ids[name] = candidate
        return self._ids[name]


@dataclass(frozen=True)
class _Link:
    line: str
    taken: bool
    highlighted: bool


def _state_line(state: dict, ident: _StateIds) -> str:
    name = str(state["name"])
    label = _clean(name)
    shape = f'(["{label}"])' if state.get("terminal") else f'("{label}")'
    return f"    {ident(name)}{shape}"


def _start_markers(states: list[dict], ident: _StateIds) -> tuple[list[str], list[_Link]]:
    """A start dot per initial state: its node lines and its link into the state."""
    nodes, links = [], []
    for s in states:
        if s.get("initial"):
            start = ident(f"[start {s['name']}]")
            nodes.append(f"    {start}((\" \")):::initial")
            links.append(_Link(f"    {start} --> {ident(str(s['name']))}", True, False))
    return nodes, links


def _edges(transitions: list[dict], names: list[str]) -> dict[tuple[str, str, str], list[str]]:
    """(source, dest, trigger) -> its distinct guards, one entry per edge drawn."""
    edges: dict[tuple[str, str, str], list[str]] = {}
    for t in transitions:
        sources = t.get("source")
        sources = [sources] if isinstance(sources, str) else list(sources or [])
        if "*" in sources:
            sources = names
        for src in sources:
            dest = t.get("dest")
            dest = src if dest in (None, "=") else dest
            guards = edges.setdefault((str(src), str(dest), str(t.get("trigger"))), [])
            if t.get("guard") and t["guard"] not in guards:
                guards.append(t["guard"])
    return edges


def _edge_link(
    edge: tuple[str, str, str], guards: list[str], taken: dict | None, hot_moves: set[str], ident: _StateIds
) -> _Link:
    src, dest, trigger = edge
    label = _clean(trigger)
    guard = _guard_text(guards, dest)
    if guard:
        label += f" [{_clean(guard)}]"
    count = None if taken is None else int(taken.get(f"{src} -{trigger}-> {dest}", 0))
    if count is not None:
        label += f" · {_times(count)}"
    arrow = "-.->" if count == 0 else "-->"
    hot = f"{src} -{trigger}-> {dest}" in hot_moves
    return _Link(f'    {ident(src)} {arrow}|"{label}"| {ident(dest)}', count != 0, hot)


def _class_lines(states: list[dict], taken: dict | None, hot_states: set[str], ident: _StateIds) -> list[str]:
    """Terminal states; with run data, the states no run reached; the states a failure is about."""
    names = [str(s["name"]) for s in states]
    lines = []
    terminal = [ident(str(s["name"])) for s in states if s.get("terminal")]
    if terminal:
        lines.append(f"    class {','.join(terminal)} terminal")
    if taken is not None:
        reached = {str(k).rsplit("-> ", 1)[-1] for k, v in taken.items() if v}
        reached |= {str(s["name"]) for s in states if s.get("initial")}
        cold = [ident(n) for n in names if n not in reached and n not in hot_states]
        if cold:
            lines.append(f"    class {','.join(cold)} untouched")
    failed = [ident(n) for n in names if n in hot_states]
    if failed:
        lines.append(f"    class {','.join(failed)} failed")
    return lines


def _link_style_lines(links: list[_Link]) -> list[str]:
    lines = []
    for index, link in enumerate(links):  # linkStyle counts links in the order they were drawn
        if link.highlighted:
            lines.append(f"    linkStyle {index} stroke:#c62828,stroke-width:3px,color:#b71c1c")
        elif not link.taken:
            lines.append(f"    linkStyle {index} stroke:#aaa,color:#888")
    return lines


def mermaid_state_diagram(lifecycle: dict | None, taken: dict | None = None) -> str:
    """Diagram source (without the ```mermaid fence) for a report's ``spec.lifecycle``.

    ``taken`` maps "source -trigger-> dest" to how often the run took it
    (None: no run data; nothing is dashed or counted). ``lifecycle["highlight"]``
    names the states and transitions of a failure. A source of ``"*"`` means
    every state; a null dest is an internal transition (a self-loop).
    """
    lifecycle = lifecycle or {}
    states = [s for s in lifecycle.get("states") or [] if s.get("name") is not None]
    names = [str(s["name"]) for s in states]
    highlight = lifecycle.get("highlight") or {}
    hot_states = {str(s) for s in highlight.get("states") or []}
    hot_moves = {str(t) for t in highlight.get("transitions") or []}
    ident = _StateIds()

    lines = ["flowchart LR"] + [_state_line(s, ident) for s in states]

    edges = _edges(lifecycle.get("transitions") or [], names)
    markers, links = _start_markers(states, ident)
    lines += markers
    links += [_edge_link(edge, guards, taken, hot_moves, ident) for edge, guards in edges.items()]
    lines += [link.line for link in links]

    lines += list(_STYLES)
    lines += _class_lines(states, taken, hot_states, ident)
    lines += _link_style_lines(links)
    return "\n".join(lines) + "\n"

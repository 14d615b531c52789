"""The lifecycle as an inline SVG state diagram, for report.html.

Drawn from a report's ``spec.lifecycle`` alone (no library, no network):
states in columns by their distance from an initial state, each transition
an arrow labelled with its trigger and how often the run took it. Arrows the
run never took are dashed and grey and say "never"; the transitions a failure
walked are red, numbered by the step that took them. Each arrow carries
``data-edge`` (its "source -trigger-> dest" name) so the page's stepper can
light up the ones the current step took.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from html import escape

__all__ = ["Edge", "lifecycle_edges", "svg_state_diagram"]

NODE_W, NODE_H = 150, 40
COL_GAP, ROW_GAP = 270, 90
MARGIN = 50


@dataclass(frozen=True)
class Edge:
    source: str
    trigger: str
    dest: str

    @property
    def name(self) -> str:
        return f"{self.source} -{self.trigger}-> {self.dest}"


def lifecycle_edges(lifecycle: dict) -> list[Edge]:
    """Every (source, trigger, dest) the lifecycle declares, once each; a
    source of ``*`` is every state, a null dest a self-loop."""
    names = [str(s["name"]) for s in lifecycle.get("states") or [] if s.get("name") is not None]
    edges: list[Edge] = []
    for t in lifecycle.get("transitions") or []:
        sources = t.get("source")
        sources = [sources] if isinstance(sources, str) else list(sources or [])
        for src in names if "*" in sources else sources:
            dest = t.get("dest")
            edge = Edge(str(src), str(t.get("trigger")), str(src if dest in (None, "=") else dest))
            if edge not in edges:
                edges.append(edge)
    return edges


def _layers(names: list[str], initial: list[str], edges: list[Edge]) -> dict[str, int]:
    """Each state's column: the longest way to it from an initial state along
    edges that do not close a cycle (breadth-first order decides which do);
    states no edge reaches come last."""
    order = {name: 0 for name in initial}
    queue = deque(initial)
    while queue:
        here = queue.popleft()
        for e in edges:
            if e.source == here and e.dest in names and e.dest not in order:
                order[e.dest] = len(order)
                queue.append(e.dest)
    forward = [e for e in edges if e.source in order and e.dest in order and order[e.source] < order[e.dest]]
    depth = {name: 0 for name in initial}
    for name in sorted(order, key=order.__getitem__):
        for e in forward:
            if e.dest == name and e.source in depth:
                depth[name] = max(depth.get(name, 0), depth[e.source] + 1)
    last = max(depth.values(), default=-1) + 1
    return {name: depth.get(name, last) for name in names}


def _positions(names: list[str], layers: dict[str, int]) -> dict[str, tuple[float, float]]:
    rows: dict[int, int] = {}
    out = {}
    for name in names:
        col = layers[name]
        row = rows.get(col, 0)
        rows[col] = row + 1
        out[name] = (MARGIN + col * COL_GAP + NODE_W / 2, MARGIN + row * ROW_GAP + NODE_H / 2)
    return out


def _times(n: int | None) -> str:
    if n is None:
        return ""
    return "never" if n == 0 else f"{n}×" if n < 10_000 else f"{n / 1000:.0f}k×"


def _border(x: float, y: float, tx: float, ty: float) -> tuple[float, float]:
    """Where the line from a node's centre (x, y) toward (tx, ty) leaves its box."""
    dx, dy = tx - x, ty - y
    if dx == 0 and dy == 0:
        return x, y
    scale = min((NODE_W / 2) / abs(dx) if dx else math.inf, (NODE_H / 2) / abs(dy) if dy else math.inf)
    return x + dx * scale, y + dy * scale


def _crosses(a: tuple[float, float], b: tuple[float, float], boxes: list[tuple[float, float]]) -> bool:
    """Whether the straight line from box a to box b passes through another box."""
    for t in (i / 24 for i in range(1, 24)):
        x, y = a[0] + (b[0] - a[0]) * t, a[1] + (b[1] - a[1]) * t
        if any(
            abs(x - bx) < NODE_W / 2 + 6 and abs(y - by) < NODE_H / 2 + 6 for bx, by in boxes if (bx, by) not in (a, b)
        ):
            return True
    return False


def _edge_path(a: tuple[float, float], b: tuple[float, float], bend: float, t: float = 0.5) -> tuple[str, float, float]:
    """An SVG path from box a to box b bent by ``bend`` pixels, and its
    label's place: the curve's point at ``t`` (0 at a, 1 at b)."""
    if a == b:  # a self-loop above the box
        x, y = a[0], a[1] - NODE_H / 2
        lift = 34 + bend
        return (
            f"M {x - 22:.1f} {y:.1f} C {x - 40:.1f} {y - lift:.1f} {x + 40:.1f} {y - lift:.1f} {x + 22:.1f} {y:.1f}",
            x,
            y - lift + 6,
        )
    mx, my = (a[0] + b[0]) / 2, (a[1] + b[1]) / 2
    dx, dy = b[0] - a[0], b[1] - a[1]
    length = math.hypot(dx, dy) or 1
    cx, cy = mx - dy / length * bend, my + dx / length * bend
    sx, sy = _border(a[0], a[1], cx, cy)
    ex, ey = _border(b[0], b[1], cx, cy)
    u = 1 - t
    lx, ly = u * u * sx + 2 * u * t * cx + t * t * ex, u * u * sy + 2 * u * t * cy + t * t * ey
    return f"M {sx:.1f} {sy:.1f} Q {cx:.1f} {cy:.1f} {ex:.1f} {ey:.1f}", lx, ly


def _state_svg(state: dict, at: tuple[float, float], reached: bool | None, hot: bool) -> str:
    name = str(state["name"])
    x, y = at[0] - NODE_W / 2, at[1] - NODE_H / 2
    classes = ["state"]
    classes += ["initial"] if state.get("initial") else []
    classes += ["terminal"] if state.get("terminal") else []
    classes += ["unreached"] if reached is False else []
    classes += ["hot"] if hot else []
    title = name + (" (initial)" if state.get("initial") else "") + (" (terminal)" if state.get("terminal") else "")
    if reached is False:
        title += ": never reached by this run"
    parts = [f'<g class="{" ".join(classes)}" data-state="{escape(name)}"><title>{escape(title)}</title>']
    parts.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{NODE_W}" height="{NODE_H}" rx="18"/>')
    if state.get("terminal"):
        parts.append(
            f'<rect class="inner" x="{x + 4:.1f}" y="{y + 4:.1f}" width="{NODE_W - 8}" height="{NODE_H - 8}" rx="14"/>'
        )
    label = name if len(name) <= 20 else name[:19] + "…"
    parts.append(f'<text x="{at[0]:.1f}" y="{at[1] + 5:.1f}">{escape(label)}</text>')
    if state.get("initial"):
        parts.append(f'<circle class="start" cx="{x - 22:.1f}" cy="{at[1]:.1f}" r="7"/>')
        parts.append(
            f'<path class="edge" d="M {x - 15:.1f} {at[1]:.1f} L {x:.1f} {at[1]:.1f}" marker-end="url(#arrow)"/>'
        )
    return "".join(parts) + "</g>"


def svg_state_diagram(lifecycle: dict | None, taken: dict | None, path: dict[str, list[int]] | None = None) -> str:
    """The diagram as one ``<svg>`` element. ``taken``: "source -trigger->
    dest" -> how often the run took it (None: no counts); ``path``: the same
    names -> the steps of the headline failure that took them (drawn red)."""
    lifecycle = lifecycle or {}
    states = [s for s in lifecycle.get("states") or [] if s.get("name") is not None]
    names = [str(s["name"]) for s in states]
    edges = [e for e in lifecycle_edges(lifecycle) if e.source in names and e.dest in names]
    initial = [str(s["name"]) for s in states if s.get("initial")] or names[:1]
    at = _positions(names, _layers(names, initial, edges))
    path = path or {}
    reached = None if taken is None else {e.dest for e in edges if taken.get(e.name)} | set(initial)
    hot = {e.source for e in edges if e.name in path} | {e.dest for e in edges if e.name in path}
    width = max((p[0] for p in at.values()), default=0) + NODE_W / 2 + MARGIN + 40
    height = max((p[1] for p in at.values()), default=0) + NODE_H / 2 + MARGIN
    out = [
        f'<svg class="lifecycle" xmlns="http://www.w3.org/2000/svg" viewBox="0 -30 {width:.0f} {height + 30:.0f}" '
        f'width="{width:.0f}" role="img" aria-label="the lifecycle as a state diagram">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="10" markerHeight="10" '
        'markerUnits="userSpaceOnUse" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z"/></marker>'
        '<marker id="arrow-hot" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="10" markerHeight="10" '
        'markerUnits="userSpaceOnUse" orient="auto-start-reverse"><path class="hot" d="M 0 0 L 10 5 L 0 10 z"/></marker></defs>',
    ]
    most = max((int(v) for v in (taken or {}).values()), default=0)
    seen: dict[tuple[str, str], int] = {}
    for number, e in enumerate(edges):
        pair = (min(e.source, e.dest), max(e.source, e.dest))
        k = seen.get(pair, 0)
        seen[pair] = k + 1
        bend = (k + 1) // 2 * 28 * (1 if k % 2 else -1) if e.source != e.dest else k * 18
        if e.source != e.dest and k == 0 and at[e.source][0] >= at[e.dest][0]:
            bend = 40  # going back a column: bend away from the forward arrows
        elif e.source != e.dest and k == 0 and _crosses(at[e.source], at[e.dest], list(at.values())):
            bend = -70  # around the box in the way
        fan = sum(1 for other in edges if other.source == e.source and other.dest != e.source) > 2
        d, lx, ly = _edge_path(at[e.source], at[e.dest], bend, 0.7 if fan else 0.5)
        count = None if taken is None else int(taken.get(e.name, 0))
        steps = path.get(e.name) or []
        classes = ["edge"] + (["never"] if count == 0 else []) + (["hot"] if steps else [])
        weight = 1.2 if not count or not most else 1.2 + 3.5 * math.log1p(count) / math.log1p(most)
        label = e.trigger + (f" · {_times(count)}" if count is not None else "")
        if steps:
            label += " · step " + ", ".join(str(s) for s in steps[:4]) + ("…" if len(steps) > 4 else "")
        tip = e.name + ("" if count is None else f": taken {count} time(s) by this run")
        marker = "arrow-hot" if steps else "arrow"
        out.append(
            f'<g class="{" ".join(classes)}" id="edge-{number}" data-edge="{escape(e.name)}">'
            f"<title>{escape(tip)}</title>"
            f'<path d="{d}" style="stroke-width:{weight:.1f}px" marker-end="url(#{marker})"/>'
            f'<text x="{lx:.1f}" y="{ly - 4:.1f}">{escape(label)}</text></g>'
        )
    for s in states:
        name = str(s["name"])
        out.append(_state_svg(s, at[name], None if reached is None else name in reached, name in hot))
    return "".join(out) + "</svg>"

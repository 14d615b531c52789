"""Mermaid ``stateDiagram-v2`` text for a spec's lifecycle."""
from __future__ import annotations

import re

__all__ = ["mermaid_id", "mermaid_state_diagram"]

GUARD_MAX = 40

# Mermaid's state-diagram lexer ends a label at ":" ";" or newline, treats
# "%%" as a comment start and "#...;" as an entity, and the label is then
# HTML-sanitised, so "<" could swallow text as a tag. Rewrite those.
_LABEL_SUBS = (("&&", " and "), ("||", " or "), ("<=", "≤"), (">=", "≥"), ("<", "﹤"), (">", "﹥"),
               (":", " "), (";", ","), ("#", ""), ("%", " pct "), ('"', "'"))


# Words the (case-insensitive) lexer takes as keywords when followed by
# whitespace or ":", as a bare state declaration or an edge end would be.
_KEYWORDS = {"state", "note", "class", "classdef", "scale", "statediagram", "acctitle", "accdescr"}


def mermaid_id(name: str) -> str:
    """A state id Mermaid accepts: only [A-Za-z0-9_], no keyword."""
    ident = re.sub(r"[^A-Za-z0-9_]", "_", str(name)) or "_"
    # "default" is matched with no word boundary, so it also breaks ids such
    # as "defaulted"; a leading digit is avoided as well.
    if ident.lower() in _KEYWORDS or ident.lower().startswith("default") or ident[0].isdigit():
        ident = "s_" + ident
    return ident


def _label(trigger: str, guard: str | None) -> str:
    text = str(trigger)
    if guard:
        guard = " ".join(str(guard).split())
        if len(guard) > GUARD_MAX:
            guard = guard[: GUARD_MAX - 1] + "…"
        text += f" [{guard}]"
    for old, new in _LABEL_SUBS:
        text = text.replace(old, new)
    return " ".join(text.split())


def mermaid_state_diagram(lifecycle: dict | None) -> str:
    """Diagram source (without the ```mermaid fence) for ``spec.lifecycle``.

    ``[*] --> s`` for initial states, ``s --> [*]`` for terminal ones and one
    edge per (source, dest, trigger), labelled with the trigger and its
    shortened guard. A source of ``"*"`` means every state; a null dest is an
    internal transition and is drawn as a self-loop.
    """
    lifecycle = lifecycle or {}
    states = [s for s in lifecycle.get("states") or [] if s.get("name") is not None]
    names = [str(s["name"]) for s in states]
    ids: dict[str, str] = {}

    def ident(name: str) -> str:
        # Distinct names may sanitise to the same id ("a-b", "a_b").
        if name not in ids:
            base = candidate = mermaid_id(name)
            n = 2
            while candidate in ids.values():
                candidate, n = f"{base}_{n}", n + 1
            ids[name] = candidate
        return ids[name]

    lines = ["stateDiagram-v2"]
    for name in names:
        sid = ident(name)
        # Declare every state so unreachable ones still show; keep the real
        # name as the label when sanitising changed it.
        lines.append(f"    {sid}" if sid == name else f'    state "{name.replace(chr(34), chr(39))}" as {sid}')
    for s in states:
        if s.get("initial"):
            lines.append(f"    [*] --> {ident(str(s['name']))}")

    edges: dict[tuple[str, str, str], list[str]] = {}
    for t in lifecycle.get("transitions") or []:
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
    for (src, dest, trigger), guards in edges.items():
        lines.append(f"    {ident(src)} --> {ident(dest)} : {_label(trigger, ' or '.join(guards))}")

    for s in states:
        if s.get("terminal"):
            lines.append(f"    {ident(str(s['name']))} --> [*]")
    return "\n".join(lines) + "\n"

"""report.html: one self-contained page of a run, for a person who never saw the kit.

Rendered from the report dict alone, like the other writers: no network, no
external file (styles, script and the SVG diagram are inline), so it opens
from a CI artifact or a mail attachment. Everything is in the page with
scripts off (every step listed); with scripts on, the headline
counterexample becomes a stepper (one step at a time, the transitions it took
lit on the diagram; ``#step-N`` opens step N) and the replay command gets a
copy button. All received text is escaped, control characters made visible.
Bounded like summary.md: long step lists are cut in the middle, values
clipped (whole ones are in report.json).
"""

from __future__ import annotations

import json
import re
from html import escape
from typing import Any

from ._format import deviation_lines, failed_checks, ordered_scenarios, replay_for, verdict_counts
from .difference import describe_difference
from .svg_diagram import svg_state_diagram

__all__ = ["render_html_report"]

STEPS_HEAD, STEPS_TAIL = 10, 30  # a longer failure's middle steps are left out (report.json has them)
VALUE_CHARS = 3000  # of one value shown
LIST_ITEMS = 200  # of one coverage list shown
MODEL_COLUMNS = 12  # fields of the model's records shown
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")

# Each term the page uses, linked to a short note at its foot and to the
# section of the kit's docs (`conformance docs NAME`) that says more.
GLOSSARY = {
    "verdict": ("The run's result: pass, fail or error; its exit code gates CI.", "running", "Exit codes"),
    "scenario": (
        "A case of the spec's N/E/B matrix (nominal, edge, boundary), run in lockstep with the model.",
        "spec-language",
        "`scenarios`",
    ),
    "exploration": (
        "Hypothesis drawing sequences of calls from the spec's operations, each step checked against the model.",
        "running",
        "Steering the exploration",
    ),
    "counterexample": (
        "The shortest sequence of steps found that makes the implementation part from the model.",
        "running",
        "After a failure: shrinking, reduction, causes",
    ),
    "divergence": (
        "The implementation answered other than the model predicts at the same step.",
        "running",
        "After a failure: shrinking, reduction, causes",
    ),
    "symptom": (
        "A longer failure the kit showed to share the headline's cause: not another bug.",
        "running",
        "After a failure: shrinking, reduction, causes",
    ),
    "model": (
        "The executable form of the spec: what a conforming implementation holds and answers after each step.",
        "spec-language",
        "Concepts",
    ),
    "deviation": (
        "A difference a team decided to keep (a deviations file): counted and listed, never silent.",
        "deviations",
        "Never silent",
    ),
    "not-applicable": (
        "A scenario or coverage item the implementation's declared parameters make impossible, with the reason.",
        "running",
        "Coverage gates and what is not applicable",
    ),
    "coverage": (
        "What the run exercised: transitions, states, operations, pairs, races; --min-coverage gates on it.",
        "running",
        "Coverage gates and what is not applicable",
    ),
    "replay": (
        "The command that runs a counterexample again against the implementation.",
        "running",
        "After a failure: shrinking, reduction, causes",
    ),
}

_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1200px;padding:0 20px 40px;color:#1d1d1f}
h1{font-size:22px;margin:18px 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #ddd}
h3{font-size:15px;margin:16px 0 6px}code,pre{font:12.5px/1.4 ui-monospace,monospace}
pre{background:#f6f8fa;padding:8px;overflow:auto;max-height:360px;white-space:pre-wrap;word-break:break-all}
.badge{display:inline-block;padding:2px 10px;border-radius:10px;font-weight:600;color:#fff}
.pass{background:#2e7d32}.fail{background:#c62828}.error{background:#ef6c00}.skip,.stale{background:#757575}
table{border-collapse:collapse;margin:6px 0}td,th{border:1px solid #ddd;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#f3f3f3}.term{text-decoration:underline dotted}.muted{color:#777}
svg.lifecycle{max-width:100%;height:auto;background:#fcfcfc;border:1px solid #eee}
.state rect{fill:#fff;stroke:#333;stroke-width:1.5}.state.terminal rect.inner{fill:none}
.state text{text-anchor:middle;font-size:13px}.state.unreached rect{stroke:#bbb;stroke-dasharray:4 3;fill:#f5f5f5}
.state.unreached text{fill:#999}.state.hot rect{stroke:#c62828;stroke-width:2.5}.start{fill:#333}
.edge path{fill:none;stroke:#555}.edge text{font-size:11px;text-anchor:middle;fill:#333;paint-order:stroke;stroke:#fcfcfc;stroke-width:3px}
.edge.never path{stroke:#aaa;stroke-dasharray:5 4}.edge.never text{fill:#999}
.edge.hot path{stroke:#c62828}.edge.hot text{fill:#b71c1c;font-weight:600}path.hot{fill:#c62828}
.edge.current path{stroke:#1565c0;stroke-width:5px!important}.edge.current text{fill:#0d47a1}
marker path{fill:#555}
.steps{list-style:none;padding:0}.step{border:1px solid #ddd;border-radius:6px;margin:8px 0;padding:8px 12px}
.step.diverged{border:2px solid #c62828}.step h4{margin:0 0 6px;font-size:14px}
.diff{background:#fdecea;border-left:4px solid #c62828;padding:4px 8px;margin:6px 0}
.cols{display:grid;grid-template-columns:1fr 1fr;gap:10px}
tr.changed td{background:#fff8e1}tr.read td{background:#e3f2fd}td.differs{background:#fdecea;font-weight:700;outline:2px solid #c62828}
.controls{display:flex;gap:8px;align-items:center;margin:8px 0}button{font:inherit;padding:3px 10px;cursor:pointer}
.js .step{display:none}.js .step.shown{display:block}
.gate-fail{color:#c62828;font-weight:600}.wide{overflow-x:auto}
"""

_SCRIPT = """
(function(){
document.documentElement.classList.add('js');
function stepper(box){
 var steps=[].slice.call(box.querySelectorAll('.step'));
 var label=box.querySelector('.step-label');
 var current=0;
 function show(i){
  current=Math.max(0,Math.min(steps.length-1,i));
  steps.forEach(function(s,k){s.classList.toggle('shown',k===current);});
  var lit=(steps[current].getAttribute('data-edges')||'').split('|').filter(Boolean);
  [].forEach.call(document.querySelectorAll('g.edge'),function(g){
   g.classList.toggle('current',lit.indexOf(g.getAttribute('data-edge'))>=0);});
  label.textContent='Step '+(current+1)+' of '+steps.length;
 }
 if(!steps.length)return null;
 box.querySelector('.step-controls').hidden=false;
 box.querySelector('.step-prev').onclick=function(){show(current-1);};
 box.querySelector('.step-next').onclick=function(){show(current+1);};
 box.querySelector('.step-diverged').onclick=function(){
  var d=steps.findIndex(function(s){return s.classList.contains('diverged');});show(d<0?steps.length-1:d);};
 show(0);
 return show;
}
var boxes=[].slice.call(document.querySelectorAll('.stepper')).map(stepper);
var m=/#step-(\\d+)/.exec(location.hash);
if(boxes[0]){boxes[0](m?parseInt(m[1],10)-1:0);}
[].forEach.call(document.querySelectorAll('button.copy'),function(b){b.hidden=false;b.onclick=function(){
 var text=document.getElementById(b.getAttribute('data-target')).textContent;
 function done(){b.textContent='Copied';b.setAttribute('data-copied',text);}
 function fallback(){var t=document.createElement('textarea');t.value=text;document.body.appendChild(t);t.select();
  try{document.execCommand('copy');}catch(e){}document.body.removeChild(t);done();}
 if(navigator.clipboard&&navigator.clipboard.writeText){navigator.clipboard.writeText(text).then(done,fallback);}else{fallback();}};});
})();
"""


def _t(value: Any) -> str:
    """Received text as HTML: escaped, control characters shown as \\xNN."""
    text = str(value)
    return escape(_CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text), quote=True)


def _json(value: Any, limit: int = VALUE_CHARS) -> str:
    text = json.dumps(value, ensure_ascii=False, indent=2, default=str)
    if len(text) > limit:
        text = text[: limit - 1] + f"… ({len(text):,} characters: the whole value is in report.json)"
    return _t(text)


def _term(key: str, text: str | None = None) -> str:
    return f'<a class="term" href="#term-{key}">{_t(text or key.replace("-", " "))}</a>'


def _badge(verdict: Any) -> str:
    v = str(verdict or "error")
    return f'<span class="badge {_t(v)}">{_t(v.upper())}</span>'


def _header(report: dict) -> list[str]:
    spec = report.get("spec") or {}
    impl = report.get("implementation") or {}
    counts = verdict_counts(report.get("scenarios") or [])
    stateful = report.get("stateful") or {}
    title = f"{spec.get('id', '?')} {spec.get('version', '')}".strip()
    out = [f"<h1>Conformance: {_t(title)} {_badge(report.get('verdict'))}</h1>"]
    if spec.get("title"):
        out.append(f"<p>{_t(spec['title'])}</p>")
    who = " ".join(str(impl.get(k)) for k in ("name", "version") if impl.get(k)) or impl.get("adapter") or "?"
    profile = (report.get("not_applicable") or {}).get("profile") or impl.get("profile") or "default"
    out.append(
        f"<p>Implementation <b>{_t(who)}</b> (parameter profile <code>{_t(profile)}</code>); "
        f"{_term('verdict')} {_t(report.get('verdict'))}, exit code {_t(report.get('exit_code'))}; "
        f"{_term('scenario', 'scenarios')}: {counts['pass']} passed, {counts['fail']} failed, "
        f"{counts['error']} errors, {counts['skip']} skipped; "
        f"{_term('exploration')}: {_t(stateful.get('verdict', 'not run'))}"
        + (
            f" ({_t(stateful.get('examples'))} examples, {_t(stateful.get('steps'))} steps, profile "
            f"{_t(stateful.get('profile'))}, seed {_t(stateful.get('seed'))})"
            if stateful
            else ""
        )
        + ".</p>"
    )
    return out


def _replay_block(command: str | None, ident: str) -> list[str]:
    if not command:
        return []
    return [
        f"<p>{_term('replay', 'Replay')} it:</p>",
        f'<pre id="{ident}">{_t(command)}</pre>',
        f'<button class="copy" data-target="{ident}" hidden>Copy the command</button>',
    ]


def _edges_of(step: dict) -> list[str]:
    return [str(t) for t in (step.get("model") or {}).get("transitions") or []]


def _call_line(step: dict) -> str:
    if "advance_ms" in step:
        return f"the clock moves on {_t(step['advance_ms'])} ms"
    if "concurrently" in step:
        return "concurrently: " + " | ".join(_call_line(c) for c in step["concurrently"])
    args = ", ".join(f"{_t(k)}={_t(json.dumps(v, ensure_ascii=False))}" for k, v in (step.get("args") or {}).items())
    return f"<code>{_t(step.get('operation', '?'))}({args})</code>"


def _records_table(model: dict, failure: dict, diverged: bool) -> str:
    records = [r for r in model.get("records") or [] if isinstance(r, dict)]
    if not records:
        return "<p class=muted>The model holds no records after this step.</p>"
    columns = list(dict.fromkeys(k for r in records for k in r))[:MODEL_COLUMNS]
    read, changed = set(model.get("read") or []), set(model.get("changed") or [])
    field = str(failure.get("path") or "").rsplit(".", 1)[-1]
    expected = failure.get("expected")
    rows = ["<table><tr>" + "".join(f"<th>{_t(c)}</th>" for c in columns) + "</tr>"]
    for r in records:
        key = str(r.get(columns[0])) if columns else ""
        keyed = {str(v) for v in r.values() if isinstance(v, (str, int))}
        kind = "changed" if keyed & changed else "read" if keyed & read else ""
        cells = []
        for c in columns:
            hit = diverged and kind and c == field and r.get(c) == expected and not isinstance(expected, (dict, list))
            cls = ' class="differs"' if hit else ""
            cells.append(f"<td{cls}>{_t(json.dumps(r.get(c), ensure_ascii=False))[:300]}</td>")
        rows.append(f'<tr class="{kind}" data-key="{_t(key)}">' + "".join(cells) + "</tr>")
    more = int(model.get("more_records") or 0)
    tail = f"<p class=muted>… and {more} more record(s).</p>" if more else ""
    return '<div class="wide">' + "".join(rows) + "</table></div>" + tail


def _step_panel(n: int, total: int, step: dict, failure: dict) -> str:
    diverged = step.get("index") == failure.get("step")
    model = step.get("model") or {}
    edges = _edges_of(step)
    out = [
        f'<li class="step{" diverged" if diverged else ""}" data-step="{n}" data-edges="{_t("|".join(edges))}">',
        f"<h4>Step {n} of {total}: {_call_line(step)}"
        + (' <span class="badge fail">the implementation parts from the model here</span>' if diverged else "")
        + "</h4>",
    ]
    if diverged and failure.get("path"):
        found = describe_difference(failure.get("expected"), failure.get("observed"))
        lines = "".join(f"<li>{_t(line)}</li>" for line in found.lines)
        out.append(f'<div class="diff">What differs at <code>{_t(failure["path"])}</code>:<ul>{lines}</ul></div>')
    observed = step.get("observed")
    out.append('<div class="cols"><div><b>The implementation answered</b>')
    out.append(f"<pre>{_json(observed)}</pre></div>")
    if model:
        out.append(f"<div><b>The {_term('model')} expected</b><pre>{_json(model.get('expected'))}</pre></div></div>")
        if edges:
            out.append("<p>Transitions: " + ", ".join(f"<code>{_t(e)}</code>" for e in edges) + "</p>")
        if model.get("note"):
            out.append(f"<p class=muted>{_t(model['note'])}</p>")
        out.append("<p><b>The model's records after the step</b> (those it read or changed first)</p>")
        out.append(_records_table(model, failure, diverged))
    else:
        out.append("<div class=muted>(the model's state is not recorded for this step)</div></div>")
    return "".join(out) + "</li>"


def _stepper(failure: dict) -> list[str]:
    steps = [s for s in failure.get("steps") or [] if isinstance(s, dict)]
    if not steps:
        return []
    numbered = list(enumerate(steps, 1))
    cut = len(steps) > STEPS_HEAD + STEPS_TAIL + 1
    if cut:
        numbered = numbered[:STEPS_HEAD] + numbered[-STEPS_TAIL:]
    out = [
        f"<h3>The {_term('counterexample')}, step by step</h3>",
        '<div class="stepper"><div class="controls step-controls" hidden><button class="step-prev">◀ Previous</button>'
        '<span class="step-label"></span><button class="step-next">Next ▶</button>'
        '<button class="step-diverged">Go to the diverging step</button></div>',
        '<ol class="steps">',
    ]
    for position, (n, step) in enumerate(numbered):
        if cut and position == STEPS_HEAD:
            out.append(
                f"<li class=muted>… {len(steps) - STEPS_HEAD - STEPS_TAIL} step(s) left out (all in report.json)</li>"
            )
        out.append(_step_panel(n, len(steps), step, failure))
    return out + ["</ol></div>"]


def _failure_block(label: str, failure: dict | None, report: dict, ident: str, *, stepper: bool) -> list[str]:
    failure = failure or {}
    kind = failure.get("kind", "?")
    message = str(failure.get("message") or "")
    headline, _, rest = message.partition("\n")
    out = [
        f"<h3>{_t(label)}</h3>",
        f"<p><b>{_term('divergence', kind) if kind == 'divergence' else _t(kind)}</b>: {_t(headline)}</p>",
    ]
    if rest.strip():
        out.append(f"<details><summary>The whole message</summary><pre>{_t(rest.strip())}</pre></details>")
    if stepper:
        out += _stepper(failure)
    out += _replay_block(replay_for(failure, report), ident)
    return out


def _failures(report: dict) -> list[str]:
    stateful = report.get("stateful") or {}
    headline = stateful.get("failure")
    out: list[str] = []
    if headline:
        out += ["<h2>The failure</h2>"] + _failure_block(
            "Stateful exploration", headline, report, "replay-0", stepper=True
        )
        symptoms = headline.get("symptoms") or []
        if symptoms:
            out.append(f"<h3>Its {_term('symptom', 'symptoms')} (the same cause, longer)</h3><ul>")
            out += [
                f"<li>{_t(str(s.get('message', '')).splitlines()[0] if s.get('message') else s.get('kind'))}</li>"
                for s in symptoms
            ]
            out.append("</ul>")
    others = [(label, f) for label, f in failed_checks(report) if f is not headline and "symptom" not in label]
    if others:
        out.append("<h2>Other failures</h2>")
        for number, (label, failure) in enumerate(others, 1):
            out += _failure_block(label, failure, report, f"replay-{number}", stepper=True)
    return out


def _scenarios(report: dict) -> list[str]:
    scenarios = ordered_scenarios(report)
    if not scenarios:
        return []
    rank = {"fail": 0, "error": 1}
    out = [
        f"<h2>{_term('scenario', 'Scenarios')}</h2><table><tr><th>id</th><th>category</th><th>title</th><th>verdict</th></tr>"
    ]
    for s in sorted(scenarios, key=lambda s: rank.get(str(s.get("verdict")), 2)):
        out.append(
            f"<tr><td>{_t(s.get('id'))}</td><td>{_t(s.get('category', ''))}</td><td>{_t(s.get('title', ''))}</td>"
            f"<td>{_badge(s.get('verdict'))}</td></tr>"
        )
    out.append("</table>")
    skipped = (report.get("not_applicable") or {}).get("scenarios") or []
    if skipped:
        out.append(f"<h3>{_term('not-applicable', 'Not applicable')} under this profile</h3><ul>")
        out += [
            f"<li><b>{_t(s.get('id'))}</b> {_t(s.get('title', ''))}: {_t(s.get('reason', ''))}</li>" for s in skipped
        ]
        out.append("</ul>")
    return out


def _deviations(report: dict) -> list[str]:
    lines = deviation_lines(report)
    if not lines:
        return []
    return (
        [f"<h2>Accepted {_term('deviation', 'deviations')}</h2><ul>"]
        + [f"<li>{_t(line)}</li>" for line in lines]
        + ["</ul>"]
    )


def _coverage(report: dict) -> list[str]:
    coverage = report.get("coverage") or {}
    categories = coverage.get("categories") or {}
    if not categories:
        return []
    out = [
        f"<h2>{_term('coverage', 'Coverage')}</h2><table><tr><th>category</th><th>covered</th><th>never reached</th><th>not applicable</th></tr>"
    ]
    for name, c in categories.items():
        missed = [str(m) for m in c.get("missed") or []]
        na = c.get("not_applicable") or []
        na_text = "; ".join(
            f"{n.get('item', n)}: {n.get('reason', '')}" if isinstance(n, dict) else str(n) for n in na[:LIST_ITEMS]
        )
        out.append(
            f"<tr><td>{_t(name)}</td><td>{_t(c.get('covered'))}/{_t(c.get('total'))} ({_t(c.get('percent'))} %)</td>"
            f"<td>{_t('; '.join(missed[:LIST_ITEMS]) + (' …' if len(missed) > LIST_ITEMS else ''))}</td><td>{_t(na_text)}</td></tr>"
        )
    out.append("</table>")
    if coverage.get("failure"):
        out.append(
            f'<p class="gate-fail">Coverage gate failed: {_t((coverage["failure"] or {}).get("message", ""))}</p>'
        )
    for gate in coverage.get("gates") or []:
        out.append(f"<p>Gate: {_t(gate)}</p>")
    return out


def _diagram(report: dict) -> list[str]:
    lifecycle = (report.get("spec") or {}).get("lifecycle")
    if not lifecycle:
        return []
    taken = (report.get("coverage") or {}).get("transitions")
    path: dict[str, list[int]] = {}
    headline = (report.get("stateful") or {}).get("failure") or next((f for _, f in failed_checks(report) if f), None)
    for n, step in enumerate((headline or {}).get("steps") or [], 1):
        for edge in _edges_of(step):
            path.setdefault(edge, []).append(n)
    legend = (
        "Each arrow is a transition, with how often this run took it; dashed grey arrows and states were never "
        "reached; red arrows are the failure's path, with the steps that took them."
    )
    return ["<h2>The lifecycle</h2>", f"<p class=muted>{legend}</p>", svg_state_diagram(lifecycle, taken, path)]


def _problems(report: dict) -> list[str]:
    problems = report.get("problems") or []
    if not problems:
        return []
    out = ["<h2>Problems</h2><ul>"]
    out += [
        f"<li><b>{_t(p.get('kind'))}</b> {_t(p.get('where') or '')}: <pre>{_t(p.get('message', ''))}</pre></li>"
        for p in problems
    ]
    return out + ["</ul>"]


def _glossary() -> list[str]:
    out = ['<h2>Terms</h2><dl class="glossary">']
    for key, (text, doc, section) in GLOSSARY.items():
        out.append(
            f'<dt id="term-{key}">{_t(key.replace("-", " "))}</dt><dd>{_t(text)} '
            f'<span class="muted">More: <code>conformance docs {doc}</code>, section “{_t(section)}”.</span></dd>'
        )
    return out + ["</dl>"]


def render_html_report(report: dict) -> str:
    """The whole page, as text."""
    spec = report.get("spec") or {}
    body = (
        _header(report)
        + _failures(report)
        + _diagram(report)
        + _scenarios(report)
        + _deviations(report)
        + _coverage(report)
        + _problems(report)
        + (
            ["<h2>Replay the run</h2>"] + _replay_block(report.get("replay"), "replay-run")
            if report.get("replay")
            else []
        )
        + _glossary()
    )
    title = f"Conformance report: {spec.get('id', '?')} ({report.get('verdict', '?')})"
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{_t(title)}</title>"
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<style>{_STYLE}</style></head><body>\n" + "\n".join(body) + f"\n<script>{_SCRIPT}</script>\n</body></html>\n"
    )

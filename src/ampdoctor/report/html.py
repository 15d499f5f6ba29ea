"""HTML rendering: one self-contained page for every report (lint, audit, compare, rope): inline CSS, inline SVG
charts drawn here from the report's `Chart`s, tables sortable by a click on a column header (a few lines of inline
script). Nothing is fetched: the file opens offline, in any browser."""

from __future__ import annotations

import html
import math
from typing import Any, Iterable, Sequence

from ampdoctor.core import Finding
from ampdoctor.report.model import Chart, Report, Series, Table, cause_chain, report_summary, root_cause
from ampdoctor.report.renderer import Renderer
from ampdoctor.report.text import write_candidates_text, write_statistics

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#17becf", "#bcbd22")
WIDTH, HEIGHT = 960, 360
LEFT, RIGHT, TOP, BOTTOM = 70, 170, 30, 90

CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#1d2330;background:#fafbfc}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px}.summary{color:#555;margin-bottom:12px}
dl.info{display:grid;grid-template-columns:max-content auto;gap:2px 14px;margin:8px 0}dl.info dt{font-weight:600}dl.info dd{margin:0}
table{border-collapse:collapse;background:#fff;margin:6px 0 16px;font-size:13px}
th,td{border:1px solid #d9dde3;padding:4px 8px;text-align:left;vertical-align:top}td{max-width:42ch;overflow-wrap:break-word}
th{background:#eef1f5;cursor:pointer;user-select:none;white-space:nowrap}th.asc:after{content:" \\25B2"}th.desc:after{content:" \\25BC"}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.sev-error{color:#b00020;font-weight:600}.sev-warning{color:#a15c00;font-weight:600}.sev-info{color:#00639b}
.fix{color:#2d6a2d}.chart{background:#fff;border:1px solid #d9dde3;margin:8px 0 18px}.error{color:#b00020}
.root-cause{background:#fff;border:2px solid #b00020;border-radius:4px;padding:4px 16px 8px;margin:12px 0 20px}
.root-cause h2{margin-top:10px}.root-cause ol{padding-left:22px}.root-cause .step{font-weight:600}
"""

SCRIPT = """
document.querySelectorAll('table.sortable th').forEach(function(th, col){
  th.addEventListener('click', function(){
    var table = th.closest('table'), body = table.tBodies[0], rows = Array.from(body.rows);
    var asc = !th.classList.contains('asc');
    table.querySelectorAll('th').forEach(function(h){h.classList.remove('asc','desc');});
    th.classList.add(asc ? 'asc' : 'desc');
    function key(r){var t = r.cells[th.cellIndex].textContent.trim(), n = parseFloat(t); return isNaN(n) ? t : n;}
    rows.sort(function(a, b){var x = key(a), y = key(b);
      if (typeof x === typeof y) return (x < y ? -1 : x > y ? 1 : 0) * (asc ? 1 : -1);
      return typeof x === 'number' ? -1 : 1;});
    rows.forEach(function(r){body.appendChild(r);});
  });
});
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return text in ("-", "inf", "-inf")
    return True


def _table(title: str, columns: Sequence[str], rows: Iterable[Sequence[str]], *, raw: bool = False) -> str:
    head = "".join(f"<th>{_e(c)}</th>" for c in columns)
    body = []
    for row in rows:
        cells = "".join(f'<td class="num">{_e(c)}</td>' if _is_number(str(c)) else f"<td>{c if raw else _e(c)}</td>" for c in row)
        body.append(f"<tr>{cells}</tr>")
    return f'<h2>{_e(title)}</h2>\n<table class="sortable"><thead><tr>{head}</tr></thead><tbody>\n' + "\n".join(body) + "\n</tbody></table>"


def _where(f: Finding) -> str:
    loc = f.location
    if loc.file:
        return loc.file + (f":{loc.line}" if loc.line else "")
    return str(loc)


def _findings(findings: Sequence[Finding], title: str = "Findings") -> str:
    rows = []
    for f in findings:
        sev = f'<span class="sev-{f.severity.value}">{_e(f.severity.value)}</span>'
        rows.append((sev, _e(f.rule_id), _e(f.name), _e(_where(f)), _e(f.message), f'<span class="fix">{_e(f.fix)}</span>'))
    return _table(f"{title} ({len(findings)})", ("severity", "rule", "name", "where", "message", "fix"), rows, raw=True)


def _root_cause(f: Finding) -> str:
    """The failing run's root cause first: the rule, what happened, the chain from the failing op back to the origin
    (each step's file:line, module and op), and the fix."""
    steps = "".join(f'<li><span class="step">{_e(step)}</span> {_e(loc)}</li>' for step, loc in cause_chain(f))
    return (f'<section class="root-cause"><h2>Root cause: <span class="sev-{f.severity.value}">{_e(f.severity.value)}</span> '
            f"{_e(f.rule_id)} {_e(f.name)}</h2>\n<p>{_e(f.message)}</p>\n<ol>{steps}</ol>\n"
            f'<p class="fix">fix: {_e(f.fix)}</p></section>')


# --- charts ----------------------------------------------------------------------------------------


class _Scale:
    """Maps data values to pixels, linearly or by log10 (non-positive values have no place on a log axis)."""

    def __init__(self, values: Iterable[float], lo_px: float, hi_px: float, log: bool) -> None:
        finite = [v for v in values if math.isfinite(v) and (v > 0 or not log)]
        self.log = log
        if log:
            finite = [math.log10(v) for v in finite]
        lo, hi = (min(finite), max(finite)) if finite else (0.0, 1.0)
        if log:
            lo, hi = math.floor(lo), math.ceil(hi)
        elif lo > 0:
            lo = 0.0
        if hi - lo < 1e-12:
            hi = lo + 1.0
        self.lo, self.hi, self.lo_px, self.hi_px = lo, hi, lo_px, hi_px

    def __call__(self, value: float) -> float | None:
        if not math.isfinite(value) or (self.log and value <= 0):
            return None
        v = math.log10(value) if self.log else value
        return self.lo_px + (v - self.lo) / (self.hi - self.lo) * (self.hi_px - self.lo_px)

    def ticks(self) -> list[tuple[float, str]]:
        if self.log:
            step = max(1, math.ceil((self.hi - self.lo) / 8))
            return [(10.0**e, f"1e{e:d}") for e in range(int(self.lo), int(self.hi) + 1, step)]
        return [(self.lo + (self.hi - self.lo) * i / 5, f"{self.lo + (self.hi - self.lo) * i / 5:.4g}") for i in range(6)]


# Line series also differ by dash, so that a series drawn over another with the same values (two bf16 tables with
# the same error) leaves the one under it visible in its gaps.
DASHES = ("", "8 4", "3 3", "12 4 3 4", "6 6", "2 5")


def _dash(i: int) -> str:
    return f' stroke-dasharray="{DASHES[i % len(DASHES)]}"' if DASHES[i % len(DASHES)] else ""


def _frame(chart: Chart, y: _Scale) -> list[str]:
    x0, x1, y0, y1 = LEFT, WIDTH - RIGHT, HEIGHT - BOTTOM, TOP
    out = [f'<path d="M{x0} {y1} V{y0} H{x1}" stroke="#333" fill="none"/>']
    for value, label in y.ticks():
        py = y(value)
        if py is not None:
            out.append(f'<path d="M{x0 - 4} {py:.1f} H{x1}" stroke="#e3e6ea" fill="none"/>')
            out.append(f'<text x="{x0 - 6}" y="{py + 4:.1f}" text-anchor="end" font-size="11">{_e(label)}</text>')
    out.append(f'<text x="{WIDTH / 2 - RIGHT / 2}" y="18" text-anchor="middle" font-size="14" font-weight="600">{_e(chart.title)}</text>')
    out.append(f'<text x="16" y="{(y0 + y1) / 2}" transform="rotate(-90 16 {(y0 + y1) / 2})" text-anchor="middle" font-size="12">{_e(chart.y_label)}</text>')
    out.append(f'<text x="{(x0 + x1) / 2}" y="{HEIGHT - 6}" text-anchor="middle" font-size="12">{_e(chart.x_label)}</text>')
    for i, s in enumerate(chart.series):
        ly = TOP + 14 + 18 * i
        key = f'stroke-width="3"{_dash(i)}' if chart.kind == "line" else 'stroke-width="6"'
        out.append(f'<path d="M{x1 + 12} {ly} h22" stroke="{PALETTE[i % len(PALETTE)]}" {key} fill="none"/>')
        out.append(f'<text x="{x1 + 40}" y="{ly + 4}" font-size="12">{_e(s.name)}</text>')
    return out


def _bars(chart: Chart, y: _Scale) -> list[str]:
    labels = list(dict.fromkeys(x for s in chart.series for x in s.x))
    x0, x1, base = LEFT, WIDTH - RIGHT, HEIGHT - BOTTOM
    group = (x1 - x0) / max(1, len(labels))
    width = group * 0.8 / max(1, len(chart.series))
    out = []
    for i, s in enumerate(chart.series):
        values = dict(zip(s.x, s.y))
        for j, label in enumerate(labels):
            top = y(values.get(label, math.nan))
            if top is None:
                continue
            left = x0 + group * j + group * 0.1 + width * i
            out.append(f'<path d="M{left:.1f} {base} V{top:.1f} h{width:.1f} V{base} Z" fill="{PALETTE[i % len(PALETTE)]}">'
                       f'<title>{_e(s.name)} {_e(label)}: {values[label]:.3g}</title></path>')
    step = max(1, math.ceil(len(labels) / 40))
    for j, label in enumerate(labels[::step]):
        cx = x0 + group * (j * step + 0.5)
        text = str(label) if len(str(label)) <= 22 else "…" + str(label)[-21:]
        out.append(f'<text x="{cx:.1f}" y="{base + 12}" transform="rotate(35 {cx:.1f} {base + 12})" font-size="10">{_e(text)}</text>')
    return out


def _lines(chart: Chart, y: _Scale) -> list[str]:
    xs = [float(x) for s in chart.series for x in s.x]
    x = _Scale(xs, LEFT, WIDTH - RIGHT, chart.log_x)
    out = []
    for i, s in enumerate(chart.series):
        points = [(x(float(a)), y(b)) for a, b in zip(s.x, s.y)]
        d = " ".join(f"{'M' if k == 0 else 'L'}{px:.1f} {py:.1f}" for k, (px, py) in enumerate(p for p in points if None not in p))
        if d:
            out.append(f'<path d="{d}" stroke="{PALETTE[i % len(PALETTE)]}" stroke-width="1.8"{_dash(i)} fill="none"><title>{_e(s.name)}</title></path>')
    for value, label in x.ticks():
        px = x(value)
        if px is not None:
            out.append(f'<text x="{px:.1f}" y="{HEIGHT - BOTTOM + 16}" text-anchor="middle" font-size="11">{_e(label)}</text>')
    return out


def render_chart(chart: Chart) -> str:
    """One chart as an inline SVG element."""
    y = _Scale([v for s in chart.series for v in s.y], HEIGHT - BOTTOM, TOP, chart.log_y)
    body = _frame(chart, y) + (_bars(chart, y) if chart.kind == "bar" else _lines(chart, y))
    return (f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" '
            f'role="img" aria-label="{_e(chart.title)}">\n' + "\n".join(body) + "\n</svg>")


# Columns of a table that hold value ranges per module (the audit's value watch): drawn as a chart when present.
RANGE_COLUMNS = ("amax", "absmax", "max abs", "min", "max")


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return math.nan


def table_charts(table: Table) -> list[Chart]:
    """A "value ranges by module" chart for a table with amax/min/max columns."""
    wanted = [i for i, c in enumerate(table.columns) if c.lower() in RANGE_COLUMNS]
    if not wanted or not table.rows:
        return []
    labels = tuple(row[0] for row in table.rows)
    series = tuple(Series(table.columns[i], labels, tuple(abs(_number(row[i])) for row in table.rows)) for i in wanted)
    return [Chart(f"{table.title}: by module", "bar", series, x_label=table.columns[0], y_label="|value|")]


def _info_value(value: object) -> str:
    """A list (notes, recorded steps) as lines or a comma list, never as Python's repr."""
    if isinstance(value, (list, tuple)):
        if all(isinstance(v, (int, float)) for v in value):
            return _e(", ".join(map(str, value)))
        return "<br>".join(_e(v) for v in value)
    return _e(value)


def render_html(report: Report) -> str:
    info = report.info.to_dict()
    title = str(info.pop("title", None) or f"ampdoctor {info.get('command') or ''} report".replace("  ", " "))
    parts = [f"<h1>{_e(title)}</h1>", f'<div class="summary">{_e(report_summary(report))}</div>']
    root = root_cause(report)
    if root is not None:  # a failing run opens with its root cause; the context and everything else follow
        parts.append(_root_cause(root))
    info.pop("summary_caveats", None)  # already in the summary line
    if info:
        parts.append('<dl class="info">' + "".join(f"<dt>{_e(k)}</dt><dd>{_info_value(v)}</dd>" for k, v in info.items()) + "</dl>")
    parts += [f'<p class="error">error: {_e(e)}</p>' for e in report.errors]
    charts = list(report.charts) + [c for t in report.tables for c in table_charts(t)]
    parts += [render_chart(c) for c in charts]
    if report.findings or not report.tables:
        parts.append(_findings([f for f in report.user_findings if f is not root], "Other findings" if root is not None else "Findings"))
    inside = [f for f in report.library_findings if f is not root]
    if inside:
        parts.append(_findings(inside, "Inside installed libraries (not your code)"))
    parts += [_table(t.title, t.columns, t.rows) for t in report.tables]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{_e(title)}</title><style>{CSS}</style></head>\n<body>\n" + "\n".join(parts) + f"\n<script>{SCRIPT}</script>\n</body></html>\n")


# explain's candidates and lint's statistics have no page of their own: they are written as text.
RENDERER = Renderer("html", lambda report, stream, full: stream.write(render_html(report)), ".html", "HTML",
                    write_candidates=write_candidates_text, write_statistics=write_statistics)

"""The output formats, by name: one line per format. Adding a format is one renderer module (which defines its
`RENDERER`) plus one `register` line here; `write_report` and the CLI's `--format` choices read this registry."""

from __future__ import annotations

from typing import IO

from ampdoctor.report import html, json_format, sarif, text
from ampdoctor.report.model import Report
from ampdoctor.report.renderer import Renderer

_RENDERERS: dict[str, Renderer] = {}


def register(renderer: Renderer) -> Renderer:
    """Add `renderer` under its name (replacing one of that name); returns it."""
    _RENDERERS[renderer.name] = renderer
    return renderer


def unregister(name: str) -> None:
    _RENDERERS.pop(name, None)


register(text.RENDERER)
register(json_format.RENDERER)
register(sarif.RENDERER)
register(html.RENDERER)


def formats(kind: str | None = None) -> tuple[str, ...]:
    """The registered format names, in registration order; with `kind`, those that can render that kind of report."""
    return tuple(name for name, r in _RENDERERS.items() if kind is None or kind in r.kinds)


def renderer(name: str) -> Renderer:
    try:
        return _RENDERERS[name]
    except KeyError:
        raise ValueError(f"unknown format {name!r}: expected one of {', '.join(_RENDERERS)}") from None


def write_report(report: Report, fmt: str, stream: IO[str], *, full: bool = False) -> None:
    """Render in `fmt` to `stream`; text is coloured only when `stream` is a terminal, and groups repeated layers
    in tables unless `full` (the other formats always carry every row)."""
    renderer(fmt).write(report, stream, full)

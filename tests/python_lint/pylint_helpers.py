import textwrap

from ampdoctor.lint.python import lint_source


def hits(code: str, rule: str | None = None) -> list[tuple[str, int]]:
    """(rule name, line) of every finding for `code` (dedented; line 1 is the first line after the opening quotes)."""
    findings, error = lint_source(textwrap.dedent(code).lstrip("\n"))
    assert error is None, error
    return sorted(((f.name, f.location.line) for f in findings if rule is None or f.name == rule), key=lambda h: (h[1], h[0]))

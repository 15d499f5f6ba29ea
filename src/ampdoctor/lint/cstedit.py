"""The LibCST edits that several rules' rewrites (`core.registry.code_fix`) share. LibCST is imported only when a
rewrite runs: lint itself never needs it."""

from __future__ import annotations

from typing import Any, Mapping


def dotted(node: Any) -> str | None:
    """``torch.cuda.amp.autocast`` for that chain of attributes on a name; None for anything else."""
    parts = []
    while type(node).__name__ == "Attribute":
        parts.append(node.attr.value)
        node = node.value
    if type(node).__name__ != "Name":
        return None
    parts.append(node.value)
    return ".".join(reversed(parts))


def keyword(call: Any, name: str) -> Any | None:
    """The argument ``name=...`` of a call, if it has one."""
    return next((a for a in call.args if a.keyword is not None and a.keyword.value == name), None)


def with_keyword(call: Any, name: str, value: Any) -> Any:
    """The call with ``name=value``: the argument's value replaced where it has one, else a last argument added in
    the call's own layout (after a trailing comma, on a line of its own as the others are)."""
    import libcst as cst

    present = keyword(call, name)
    if present is not None:
        return call.with_changes(args=[a.with_changes(value=value) if a is present else a for a in call.args])
    tight = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))
    added = cst.Arg(value=value, keyword=cst.Name(name), equal=tight)
    if not call.args:
        return call.with_changes(args=[added])
    *head, last = call.args
    comma = last.comma
    if not isinstance(comma, cst.Comma):
        return call.with_changes(args=[*head, last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))), added])
    # A trailing comma: the last argument keeps it (and a comment after it), then breaks to the next argument as the
    # arguments before it do; the new argument takes the trailing comma with the break to the closing parenthesis.
    between = head[-1].comma.whitespace_after if head and isinstance(head[-1].comma, cst.Comma) else call.whitespace_before_args
    after = comma.whitespace_after
    if isinstance(after, cst.ParenthesizedWhitespace):
        kept = comma.with_changes(whitespace_after=after.with_changes(indent=between.indent, last_line=between.last_line)
                                  if isinstance(between, cst.ParenthesizedWhitespace) else cst.SimpleWhitespace(" "))
        closing = comma.with_changes(whitespace_after=after.with_changes(first_line=cst.TrailingWhitespace(), empty_lines=[]))
    else:
        kept, closing = comma.with_changes(whitespace_after=cst.SimpleWhitespace(" ")), comma
    return call.with_changes(args=[*head, last.with_changes(comma=kept), added.with_changes(comma=closing)])


def imports_torch(module: Any) -> bool:
    """Does the module bind the name `torch` (``import torch`` at its top level): a rewrite may then spell
    ``torch.bfloat16``."""
    import libcst as cst

    for stmt in module.body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.Import) and any(
                        a.asname is None and dotted(a.name) is not None and dotted(a.name).split(".")[0] == "torch" for a in small.names):
                    return True
    return False


def asked(lines: Mapping[int, tuple[Mapping[str, Any], ...]], line: int, key: str) -> Any | None:
    """What every finding at `line` says the rewrite should use for `key`; None where one says nothing or two
    disagree (two calls on one line that the detector judged apart)."""
    values = {repr(d.get(key)): d.get(key) for d in lines.get(line, ())}
    return next(iter(values.values())) if len(values) == 1 else None

"""How the audit names things in reports, without torch: dtypes, ops and the user's files."""

from __future__ import annotations

import os
from typing import Any, Iterable

from ampdoctor.dtypes import name_of


def dtypes_text(dts: Iterable[Any]) -> str:
    """``fp32, bf16``."""
    return ", ".join(name_of(d) for d in dts)


def op_name(func: Any) -> str:
    """``aten::bmm`` for an OpOverload."""
    try:
        return func._schema.name
    except AttributeError:
        return str(func)


def relpath(path: str) -> str:
    """`path` relative to the working directory when it is inside it (reports name the user's files as they typed them)."""
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def module_label(name: str | None) -> str:
    """A module path as the module table prints it: "" is the root module, None no module at all."""
    if name is None:
        return "<outside modules>"
    return name or "<root>"

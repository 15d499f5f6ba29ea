"""`ampdoctor lint --fix` and `--diff`: the safe, mechanical rewrites rules register (`core.registry.code_fix`),
applied on LibCST's concrete syntax tree so that formatting and comments stay as they are, only at the lines of
findings the settings select and no inline ignore suppressed. A file that does not parse is never rewritten; a
rewrite that would not parse is dropped."""

from __future__ import annotations

import ast
import difflib
import os
import tempfile
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from ampdoctor.core.model import Finding
from ampdoctor.core.registry import fixes


@dataclass(frozen=True)
class Rewrite:
    path: str
    before: str
    after: str
    rules: tuple[str, ...]  # the rules whose rewrite changed the file

    def diff(self) -> str:
        return "".join(difflib.unified_diff(self.before.splitlines(keepends=True), self.after.splitlines(keepends=True),
                                            fromfile=f"a/{self.path.lstrip('/')}", tofile=f"b/{self.path.lstrip('/')}"))


def rewrites(findings: Iterable[Finding]) -> list[Rewrite]:
    """What the registered fixes would change, file by file, for these findings."""
    import libcst as cst

    registered = fixes()
    by_file: dict[str, dict[str, dict[int, tuple[Mapping[str, Any], ...]]]] = defaultdict(lambda: defaultdict(dict))
    for f in findings:
        if f.rule_id in registered and f.location.file and f.location.file.endswith(".py") and f.location.line:
            at = by_file[f.location.file][f.rule_id]
            at[f.location.line] = (*at.get(f.location.line, ()), f.details)
    out = []
    for path, rules in sorted(by_file.items()):
        try:
            before = Path(path).read_text(encoding="utf-8")
            module = cst.parse_module(before)
        except (OSError, UnicodeDecodeError, cst.ParserSyntaxError):
            continue
        after, changed = before, []
        for rule_id, lines in sorted(rules.items()):
            module = registered[rule_id](module, lines)
            if module.code != after:  # the rules named are those whose rewrite changed something
                after = module.code
                changed.append(rule_id)
        if after != before and _parses(after):
            out.append(Rewrite(path, before, after, tuple(changed)))
    return out


def _parses(text: str) -> bool:
    try:
        ast.parse(text)
        return True
    except (SyntaxError, ValueError):
        return False


def apply(rewrite: Rewrite) -> None:
    """Write atomically, keeping the file's mode."""
    target = Path(rewrite.path)
    mode = target.stat().st_mode
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    with os.fdopen(fd, "w", encoding="utf-8", newline="") as out:
        out.write(rewrite.after)
    os.chmod(tmp, mode & 0o7777)
    os.replace(tmp, target)

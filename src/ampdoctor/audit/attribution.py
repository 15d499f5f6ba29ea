"""Whose code a runtime finding is about, and how many times it was seen.

- A finding whose origin (else its location) is a line of an installed library is about the library, not the
  user's code: it is attributed to the library ("inside transformers' modeling_gpt2.py: ..."), carries the user's
  call into the library as a related place, and is a note (info) whatever the rule's severity in the user's code.
- A failing step is one finding: other findings whose place lies on the root cause's chain (the failing op, the
  ops that carried the stray dtype to it, where it entered) fold into the root cause.
- The same finding at one line seen again (on other layers, on other steps, in the backward) is one finding with a
  count; so is a finding with no line (a buffer scan's) told of each layer's copy of one module.
"""

from __future__ import annotations

import os
import re
from dataclasses import replace
from typing import Any, Callable, Iterable

from ampdoctor.audit.dispatch import is_library_path, library_name
from ampdoctor.audit.fields import BACKWARD
from ampdoctor.audit.provenance import Trace, _walk_back
from ampdoctor.core.model import Finding, Location, Severity

LIBRARY_SEVERITY = Severity.INFO
_SHOWN_PLACES = 4  # modules named in a repeated finding's message; the rest are counted
_LAYER_INDEX = re.compile(r"(?:^|(?<=\.))\d+(?=\.|$)")  # `blocks.3.attn` -> `blocks.#.attn`


def _place(loc: Location | None) -> tuple | None:
    return (loc.file, loc.line, loc.op) if loc is not None and loc.file and loc.line else None


def attributed(f: Finding, trace: Trace) -> Finding:
    """`f` attributed to the installed library whose line did it; unchanged when that line is the user's. The root
    cause of a failure is not attributed (only the user's call is added beside it)."""
    src = f.origin if f.origin is not None else f.location
    if not src.file or not is_library_path(os.path.abspath(src.file)) or f.library is not None:
        return f
    lib = library_name(os.path.abspath(src.file)) or "an installed library"
    related = f.related
    user = trace.user_call(f.location.module)
    if user is not None and user not in related:
        related = (*related, user)
    if f.details.get("root_cause"):
        # A crash is the user's to fix wherever it surfaced (a stray dtype made upstream, often by the user's own
        # cast): it keeps its severity and stays with the user's findings, with the user's call beside the chain.
        return replace(f, related=related)
    owner = f"{lib}'" if lib.endswith("s") else f"{lib}'s"
    return replace(f, message=f"inside {owner} {os.path.basename(src.file)}: {f.message}", severity=LIBRARY_SEVERITY, related=related,
                   library=lib, details={**f.details, "rule_severity": f.severity.value})


def chain_places(trace: Trace, starts: Iterable[tuple[Any, int]], compute: Any, limit: int = 2000) -> set[tuple]:
    """The places (file, line, op) of the ops that carried a failing op's stray operands to it: from its operands
    not in the `compute` dtype back through the ops that made them in that stray dtype."""
    places: set[tuple] = set()
    for s, visit in _walk_back([p for d, p in starts if d != compute], limit):
        place = _place(trace.location(s))
        if place is not None:
            places.add(place)
        for d, p in trace.float_inputs(s):
            if d != compute and p >= 0:
                visit(p)
    return places


def chain_tensors(trace: Trace, starts: Iterable[tuple[Any, int]], is_layer: Callable[[int], bool], limit: int = 200) -> set[str]:
    """The named tensors (buffers, parameters, tensor attributes) a failing op's operands were computed from: from each
    operand back through the ops that made it in its own dtype, stopping at a layer (`is_layer(seq)`: a matmul with a
    module's weight) and at an op fed by a layer's output (a residual add, an activation): the rotary `inv_freq` a
    bf16 cos/sin table came from is on the failure's chain; a table that rotated the queries whose scores met an
    fp32 mask, or the weights of every layer before, are not."""
    names: set[str] = set()
    for dtype, start in starts:
        named = trace.named_of(start)
        if named is not None:
            names.add(named[0])
        for s, visit in _walk_back([start], limit):
            if is_layer(s):
                continue
            ins = trace.float_inputs(s)
            if any(p >= 0 and is_layer(trace.source(p)) for d, p in ins if d == dtype):
                continue
            for d, p in ins:
                named = trace.named_of(p)
                if named is not None:
                    names.add(named[0])
                elif p >= 0 and d == dtype:
                    visit(p)
    return names


def folded_into(root: Finding, findings: list[Finding], places: set[tuple], tensors: set[str] = frozenset()) -> list[Finding]:
    """`findings` with those whose place is on the root cause's chain folded into it (named in its details), and
    those about a named tensor the chain was computed from, or its copy in another layer (`tensors`,
    `chain_tensors`: a buffer scan's finding, which has no line)."""
    places = places | {p for p in (_place(root.location), _place(root.origin), *(_place(r) for r in root.related)) if p}
    shapes = {_layer_shape(t) for t in tensors}  # the same buffer of another layer is the same defect
    kept, folded = [], []
    for f in findings:
        on_chain = _place(f.location) in places or (f.location.line is None and _layer_shape(f.details.get("tensor")) in shapes)
        if f is not root and on_chain:
            folded.append(f"{f.rule_id} {f.name} at {f.location}")
        else:
            kept.append(f)
    if not folded:
        return findings
    merged = replace(root, details={**root.details, "folded": folded})
    return [merged if f is root else f for f in kept]


def _occurrence(f: Finding) -> tuple:
    """The order occurrences of one finding are told in: forward before backward, then by module (layers by number)."""
    module = f.location.module or ""
    return (f.location.phase != "forward", tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in module.split(".")))


def _grouped(findings: list[Finding]) -> tuple[list[Any], dict[tuple, list[Finding]]]:
    """The findings in order, those at one line (of one rule, severity and op) as one group under its key."""
    groups: dict[tuple, list[Finding]] = {}
    order: list[Any] = []
    for f in findings:
        place = _place(f.location)
        layered = _layered(f) if place is None else None
        if layered is not None:
            groups.setdefault(layered, [])
            if not groups[layered]:
                order.append(layered)
            groups[layered].append(f)
            continue
        if place is None or f.details.get("root_cause"):
            order.append(f)
            continue
        # other ops at one line are other findings; the backward's ops (placed at the forward's line) are not
        key = (f.rule_id, f.severity, f.library, *place[:2], None if f.location.phase == BACKWARD else place[2])
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(f)
    for key in [k for k in order if isinstance(k, tuple) and k[-1] is None]:
        forward = next((k for k in order if isinstance(k, tuple) and k[:-1] == key[:-1] and k[-1] is not None), None)
        if forward is not None:
            groups[forward] += groups.pop(key)
            order.remove(key)
    return order, groups


def _layer_shape(name: str | None) -> str | None:
    return _LAYER_INDEX.sub("#", name) if name else None


def _layered(f: Finding) -> tuple | None:
    """The key of a finding with no line that repeats on each layer: what it says with its module's layer numbers
    taken out (`rotary table blocks.#.attn.pos_enc.inv_freq ...`); None where its module has no layer number."""
    module = f.location.module
    if not module or f.details.get("root_cause"):
        return None
    shape = _layer_shape(module)
    if shape == module:
        return None
    # the module's path where the message names it, not its digits inside other words ("bf16", "[4]")
    said = re.sub(rf"(?<![\w.]){re.escape(module)}(?=[.\s]|$)", shape, f.message)
    return ("layers", f.rule_id, f.severity, f.library, f.location.label, shape, said)


def one_per_place(findings: list[Finding]) -> list[Finding]:
    """A finding repeated at one line (the same rule, severity and op, on other layers or other steps, and in the
    backward of that line's op) is one finding with a count (details `count`, `modules`, and `each`: every one's
    details). A finding with no line told again for each layer's copy of one module (a buffer scan's) is one finding
    the same way; other findings with no line are left as they are."""
    order, groups = _grouped(findings)
    out = []
    for item in order:
        if isinstance(item, Finding):
            out.append(item)
            continue
        same = sorted(groups[item], key=_occurrence)
        first = same[0]
        if len(same) == 1:
            out.append(first)
            continue
        modules = list(dict.fromkeys(f.location.module for f in same if f.location.module is not None))
        named = f"{', '.join(modules[:_SHOWN_PLACES])}{f' and {len(modules) - _SHOWN_PLACES} more' if len(modules) > _SHOWN_PLACES else ''}"
        if item[0] == "layers":
            seen = f"the same in {len(same)} copies of this module: {named}"
        else:
            seen = f"seen {len(same)} times at this line{f' in {named}' if modules else ''}"
        out.append(replace(first, message=f"{first.message} [{seen}]",
                           details={**first.details, "count": len(same), "modules": modules, "each": [dict(f.details) for f in same]}))
    return out

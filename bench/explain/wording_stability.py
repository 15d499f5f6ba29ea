"""How steady are explain's wording-fallback answers when the catalog changes? Tune texts only.

Each signature and context pattern of the catalog is left out in turn (a perturbation of the index the wording
fallback ranks by), and every tune text whose first answer is no confident signature match is explained again with
the signatures' reading unchanged and only the wording index perturbed. A text the left-out pattern matches is not
counted for that pattern (its answers change for a reason). Printed: how many (pattern, text) pairs changed their
first three answers, their first answer, and their first three among rules other than the perturbed one ("unrelated":
a change that pattern had nothing to do with).

    PYTHONPATH=src python bench/explain/wording_stability.py
"""

from __future__ import annotations

import importlib
import re
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Iterator

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import explain_bench  # noqa: E402

from ampdoctor.core import Rule, Signature, catalog  # noqa: E402

ex = importlib.import_module("ampdoctor.explain")


def perturbations(rules: tuple[Rule, ...]) -> Iterator[tuple[str, Signature, tuple[Rule, ...]]]:
    """(rule id, the pattern left out, the catalog without it), for every signature and context pattern."""
    for i, rule in enumerate(rules):
        for field in ("signatures", "context"):
            patterns = getattr(rule, field)
            for j, sig in enumerate(patterns):
                changed = replace(rule, **{field: patterns[:j] + patterns[j + 1:]})
                yield rule.id, sig, rules[:i] + (changed,) + rules[i + 1:]


def main() -> int:
    start = time.time()
    rules = tuple(catalog())
    tune = [e for e in explain_bench.load() if e.split == "tune"]
    # explain's candidates before the wording fallback is asked
    watched = [(e, s) for e in tune if not (s := ex.explain(e.text, rules=rules, closest=False, limit=None)) or s[0].guess]
    base = {e.name: tuple(c.rule.id for c in ex._with_closest(s, e.text, rules)[:3]) for e, s in watched}
    pairs = changed = first = unrelated = 0
    for rid, sig, pool in perturbations(rules):
        for entry, scored in watched:
            if re.search(sig.pattern, entry.text, re.IGNORECASE):
                continue
            pairs += 1
            now = tuple(c.rule.id for c in ex._with_closest(scored, entry.text, pool)[:3])
            was = base[entry.name]
            if now != was:
                changed += 1
                first += now[:1] != was[:1]
                unrelated += rid not in now and rid not in was
    print(f"{len(watched)} tune texts reach the wording fallback, {pairs} (pattern left out, text) pairs: first three "
          f"changed {changed}, first answer changed {first}, unrelated changes {unrelated} ({time.time() - start:.0f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

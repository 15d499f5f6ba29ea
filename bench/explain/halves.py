"""How would `ampdoctor explain` do on tune texts its catalog had not been fitted to? A simulation inside the tune split.

The tune texts of bench/explain/corpus.yaml are split in two halves by a second hash of their names (the held-out
split is never read here). For each half B, the catalog is reduced to what the other half A could have taught: every
signature, context pattern, `unless` and `doubt` that matches some text of B and no text of A is left out (as if it
had been written for B), the patterns that match no tune text at all stay (they were written from the rules'
mechanisms). B's texts are then explained with that catalog and counted like explain_bench.py counts: top-1, top-3,
confident answers and confident wrong answers. A change to the ranking or to the guess rules is checked on both halves
this way; a change chosen looking at one half should leave the other with no confident wrong answer.

This measures the catalog's fit, not the calibration's: the guess rules in explain.py stay as they are (replay.py
--calibration replays them over the corpus's history instead).

    python bench/explain/halves.py [--show]
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from dataclasses import replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))  # benchdocs

import explain_bench  # noqa: E402

from ampdoctor.core import Rule, Signature, catalog  # noqa: E402
from ampdoctor.explain import _in_english, _search  # noqa: E402


def half(name: str) -> int:
    """A text's half of the tune split: a hash of its name other than the one that fixed the split."""
    return int(hashlib.sha256(f"half:{name}".encode()).hexdigest(), 16) % 2


def _matches_any(sig: Signature, texts: list[str]) -> bool:
    return any(_search(sig, t) for t in texts)


def fitted_without(pool: tuple[Rule, ...], taught: list[str], left_out: list[str]) -> tuple[Rule, ...]:
    """The rules with every pattern that matches a `left_out` text and no `taught` text taken away."""
    def kept(sig: Signature) -> bool:
        return _matches_any(sig, taught) or not _matches_any(sig, left_out)

    def trimmed(sig: Signature) -> Signature:
        for field in ("unless", "doubt"):
            if getattr(sig, field) and not kept(Signature(getattr(sig, field))):
                sig = replace(sig, **{field: ""})
        return sig

    return tuple(replace(rule, signatures=tuple(trimmed(s) for s in rule.signatures if kept(s)),
                         context=tuple(c for c in rule.context if kept(c))) for rule in pool)


def measure(entries: list[explain_bench.Entry], pool: tuple[Rule, ...] | None = None) -> list[dict]:
    """One row per half: texts, patterns left out, top-1, top-3, confident, confident wrong (and which)."""
    pool = catalog() if pool is None else pool
    tune = [e for e in entries if e.split == "tune"]
    rows = []
    for b in (0, 1):
        taught = [_in_english(e.text) for e in tune if half(e.name) != b]
        shown = [e for e in tune if half(e.name) == b]
        reduced = fitted_without(pool, taught, [_in_english(e.text) for e in shown])
        outcomes = explain_bench.measure(shown, rules=reduced)
        rows.append({"half": b, "n": len(shown),
                     "left out": sum(len(r.signatures) for r in pool) - sum(len(r.signatures) for r in reduced),
                     "top-1": sum(o.top1 for o in outcomes), "top-3": sum(o.top3 for o in outcomes),
                     "confident": sum(bool(o.answers) and not o.guess for o in outcomes),
                     "confident wrong": [o.entry.name for o in outcomes if o.confident_wrong]})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--show", action="store_true", help="name the texts answered wrong with confidence")
    args = parser.parse_args(argv)
    for row in measure(explain_bench.load()):
        wrong = row["confident wrong"]
        print(f"half {row['half']}: {row['n']} texts, {row['left out']} signatures left out; top-1 {row['top-1']}, "
              f"top-3 {row['top-3']}, confident {row['confident']}, confident wrong {len(wrong)}")
        if args.show:
            print("".join(f"  {name}\n" for name in wrong), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())

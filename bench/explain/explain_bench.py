"""`ampdoctor explain` on real error texts: is the rule that explains each text its first answer, among its first
three, and is a wrong first answer ever given without being marked a guess?

bench/explain/corpus.yaml holds error texts and log excerpts from public issue trackers, each labelled with the rule
whose cause it is: a catalog id, an id reserved for a rule family not yet in the catalog (RESERVED), or ``none``
where no rule of the catalog is the cause. For each text:

* **top-1**: the first candidate is the labelled rule; for a ``none`` text, explain gives no candidate or only a
  guess. **top-3**: the labelled rule is among the first three candidates (``none``: as top-1).
* **confident wrong**: the first candidate is not the labelled rule and explain did not mark it as a guess.
* **guesses**: texts whose first candidate explain marked as a guess.

Each table has a row per split: ``all`` counts every text; ``catalog`` leaves out the texts labelled with a
reserved id (explain cannot know those rules yet); ``pending`` counts every text again with the regexes of
bench/explain/pending_signatures.yaml standing in for the reserved rules, as if their catalog entries had landed.
The split (tune 2/3, heldout 1/3) is `benchdocs.split_of(name)`, fixed before explain's answers were seen;
signatures were changed while looking at the tune split only.

``--quick`` runs a handful of entries and writes no docs.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # benchdocs

import benchdocs  # noqa: E402

from ampdoctor.core import Rule, Severity, Signature, catalog  # noqa: E402
from ampdoctor.explain import explain  # noqa: E402

CORPUS = HERE / "corpus.yaml"
PENDING = HERE / "pending_signatures.yaml"
# Rule families other branches are adding; their texts are labelled with these ids before the catalog has them.
RESERVED: frozenset[str] = frozenset()  # every family of the corpus now has its catalog rule
QUICK = ("pytorch-unscale-bf16-grads", "kohya-fp16-requires-gpu", "neox-rotary-bf16-bmm", "d3po-unet-unscale-fp16",
         "apex-mask-fill-minus-1e9-half", "glm4-v100-vllm-bf16")
HEADER = ["split", "texts counted", "n", "top-1", "top-3", "confident wrong", "guesses"]


@dataclass(frozen=True)
class Entry:
    name: str
    url: str
    rule: str
    text: str

    @property
    def split(self) -> str:
        return benchdocs.split_of(self.name)


@dataclass(frozen=True)
class Outcome:
    entry: Entry
    answers: tuple[str, ...]
    guess: bool

    @property
    def top1(self) -> bool:
        if self.entry.rule == "none":
            return not self.answers or self.guess
        return bool(self.answers) and self.answers[0] == self.entry.rule

    @property
    def top3(self) -> bool:
        if self.entry.rule == "none":
            return self.top1
        return self.entry.rule in self.answers[:3]

    @property
    def confident_wrong(self) -> bool:
        return bool(self.answers) and not self.guess and self.answers[0] != self.entry.rule


def load(path: Path = CORPUS) -> list[Entry]:
    entries = [Entry(e["name"], e["url"], str(e["rule"]), e["text"]) for e in yaml.safe_load(path.read_text())]
    names = [e.name for e in entries]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise SystemExit(f"duplicate corpus names: {dup}")
    known = {r.id for r in catalog()} | RESERVED | {"none"}
    unknown = sorted({e.rule for e in entries} - known)
    if unknown:
        raise SystemExit(f"corpus labels that are neither catalog nor reserved ids: {unknown}")
    return entries


def pending_rules(path: Path = PENDING) -> tuple[Rule, ...]:
    """The reserved rules as explain would see them once they land: their id and the regexes learned for them."""
    if not path.exists():
        return ()
    data = yaml.safe_load(path.read_text()) or {}
    return tuple(Rule(id=rid, name=f"pending-{rid.lower()}", severity=Severity.WARNING, summary="", why="", fix="",
                      sources=(), signatures=tuple(Signature(p) for p in patterns), detectors=("explain",))
                 for rid, patterns in sorted(data.items()))


def measure(entries: list[Entry], rules: tuple[Rule, ...] | None = None) -> list[Outcome]:
    out = []
    for e in entries:
        cands = explain(e.text, limit=3, rules=rules)
        out.append(Outcome(e, tuple(c.rule.id for c in cands), bool(cands) and cands[0].guess))
    return out


def pct(n: int, d: int) -> str:
    return f"{n}/{d} ({100 * n / d:.0f}%)" if d else "-"


def rows(label: str, outcomes: list[Outcome]) -> list[list[object]]:
    table = []
    for split in ("tune", "heldout"):
        part = [o for o in outcomes if o.entry.split == split]
        n = len(part)
        table.append([split, label, n, pct(sum(o.top1 for o in part), n), pct(sum(o.top3 for o in part), n),
                      sum(o.confident_wrong for o in part), sum(o.guess for o in part)])
    return table


def misses(outcomes: list[Outcome], split: str) -> list[list[object]]:
    return [[o.entry.name, o.entry.rule, ", ".join(o.answers) or "-", "a guess" if o.guess else "",
             "CONFIDENT WRONG" if o.confident_wrong else ""] for o in outcomes if not o.top1 and o.entry.split == split]


def render(entries: list[Entry], show: str | None) -> str:
    everything = measure(entries)
    catalog_only = [o for o in everything if o.entry.rule not in RESERVED]
    with_pending = measure(entries, rules=catalog() + pending_rules())
    table = rows("all", everything) + rows("catalog", catalog_only) + rows("pending", with_pending)
    parts = [benchdocs.markdown_table(HEADER, table)]
    if show:
        parts += ["", f"{show} texts whose first answer is not the labelled rule:", "",
                  benchdocs.markdown_table(["text", "rule", "explain's first three", "", ""], misses(everything, show))]
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--show", choices=("tune", "heldout"), help="list the texts of a split that explain does not answer right")
    parser.add_argument("--quick", action="store_true", help="a handful of entries; no docs")
    parser.add_argument("--no-docs", action="store_true", help="do not write docs/benchmarks.md")
    args = parser.parse_args(argv)

    start = time.time()
    entries = load(args.corpus)
    if args.quick:
        entries = [e for e in entries if e.name in QUICK]
    text = render(entries, args.show or ("tune" if args.quick else None))
    print(text)
    if not args.quick and not args.no_docs:
        reserved = sum(e.rule in RESERVED for e in entries)
        none = sum(e.rule == "none" for e in entries)
        body = "\n\n".join([
            benchdocs.stamp(time.time() - start),
            f"{len(entries)} error texts from public issue trackers (bench/explain/corpus.yaml): {reserved} labelled "
            f"with a rule family not yet in the catalog, {none} whose cause is no catalog rule. Split by "
            "`sha256(name) % 3` (0: heldout). Rows: `all` every text; `catalog` without the texts of rules not yet "
            "in the catalog; `pending` every text, with bench/explain/pending_signatures.yaml standing in for those "
            "rules. A `none` text counts as right when explain answers nothing or only a guess.",
            text])
        benchdocs.write_block("explain", "## explain on real error texts (bench/explain/explain_bench.py)", body)
    if args.quick:  # the handful (a reserved rule's through its pending patterns) must be answered right
        outcomes = measure(entries, rules=catalog() + pending_rules())
        return 0 if all(o.top1 and not o.confident_wrong for o in outcomes) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Terminal rendering of `explain` candidates."""

from __future__ import annotations

from typing import IO, Sequence

from rich.console import Console
from rich.padding import Padding
from rich.text import Text

from ampdoctor.explain import Candidate


def write_candidates(candidates: Sequence[Candidate], stream: IO[str], *, color: bool | None = None, hidden: int = 0) -> None:
    """`hidden`: candidates left out (weaker fits, or beyond --limit), said at the end."""
    # A terminal gets its own width, and wrapped lines are indented under their field; files and pipes get one line
    # per field (no wrapping mid-command).
    tty = stream.isatty()
    console = Console(file=stream, force_terminal=color, no_color=color is False, width=None if tty else 100, highlight=False, soft_wrap=not tty)

    def field(label: str, body: Text, style: str = "bold") -> None:
        line = Text(label, style=style) + body
        console.print(Padding(line, (0, 0, 0, 3)) if tty else Text("   ") + line)

    if not candidates:
        console.print(
            "No rule in the ampdoctor catalog matches this text. If it comes from a training run, record the "
            "dtype flow of one step to find where it goes wrong:\n  ampdoctor run --policy bf16-mixed <your train script>"
        )
        return
    if all(c.basis == "wording" for c in candidates):
        console.print(
            "No signature in the ampdoctor catalog matches this text. The rules below are only the closest to its "
            "wording: guesses to check, not a diagnosis.\n"
        )
    for rank, cand in enumerate(candidates, 1):
        head = Text(f"{rank}. ", style="bold")
        if cand.guess:
            head.append("a guess: ", style="bold")
        head.append(f"{cand.rule.id} {cand.rule.name}", style="bold red" if rank == 1 else "bold yellow")
        head.append(f"  (score {cand.score:.2f})", style="dim")
        console.print(head)
        field("why it matches: ", Text(cand.reason))
        if cand.location is not None:
            field("raised at: ", Text(str(cand.location)))
        field("root cause: ", Text(cand.rule.why))
        field("fix: ", Text(cand.rule.fix), "bold green")
        field("confirm with: ", Text(cand.confirm, style="cyan"))
        console.print()
    if hidden:
        console.print(Text(f"{hidden} weaker candidate{'s' if hidden > 1 else ''} not shown (--all lists them)", style="dim"))

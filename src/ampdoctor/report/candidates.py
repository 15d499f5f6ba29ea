"""Terminal rendering of `explain` candidates."""

from __future__ import annotations

from typing import IO, Sequence

from rich.console import Console
from rich.text import Text

from ampdoctor.explain import Candidate


def write_candidates(candidates: Sequence[Candidate], stream: IO[str], *, color: bool | None = None) -> None:
    console = Console(file=stream, force_terminal=color, no_color=color is False, width=100, highlight=False)
    if not candidates:
        console.print(
            "No rule in the ampdoctor catalog matches this text. If it comes from a training run, record the "
            "dtype flow of one step to find where it goes wrong:\n  ampdoctor run --policy bf16-mixed <your train script>"
        )
        return
    for rank, cand in enumerate(candidates, 1):
        head = Text(f"{rank}. ", style="bold")
        head.append(f"{cand.rule.id} {cand.rule.name}", style="bold red" if rank == 1 else "bold yellow")
        head.append(f"  (score {cand.score:.2f})", style="dim")
        console.print(head)
        console.print(Text("   why it matches: ", style="bold") + Text(cand.reason))
        if cand.location is not None:
            console.print(Text("   raised at: ", style="bold") + Text(str(cand.location)))
        console.print(Text("   root cause: ", style="bold") + Text(cand.rule.why))
        console.print(Text("   fix: ", style="bold green") + Text(cand.rule.fix))
        console.print(Text("   confirm with: ", style="bold") + Text(cand.confirm, style="cyan"))
        console.print()

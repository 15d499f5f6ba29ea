"""The one protocol every framework reader implements, and the registry lookups over it.

A framework is one module in `ampdoctor.frameworks` that ends with ``READER = Reader(...)`` and one line in
`ampdoctor.frameworks.READERS`. Everything lint, export and the integrations need from a framework goes through
the `Reader`: how to recognise its config (`detect`), what run it describes (`read` → `Reading`), how several files
of one run combine (`read_group`: NeoX merges a folder's YAML files, SimpleTuner's env and json are one set of
options), how a config that another one points at is read as the pointing one fills it in (`read_referenced`:
DeepSpeed files named by accelerate, HF or Lightning), and how a `Policy` is written in its syntax (`export`).
Callers never name a framework: they ask the registry.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from ampdoctor.frameworks.base import Reading, Reference
from ampdoctor.frameworks.located import Document
from ampdoctor.report import ReportError

if TYPE_CHECKING:
    from ampdoctor.policy import Policy

# Exceptions a reader raises on a value of a shape its framework would itself reject (a list where a number goes).
READ_ERRORS = (TypeError, ValueError, AttributeError, KeyError, IndexError, RecursionError)


@dataclass(frozen=True)
class Reader:
    """A framework's config reader. Only `name` is required: an export-only target (FSDP, written in Python) has
    no `detect`/`read`, a reader of a framework that cannot be configured for a policy has no `export`."""

    name: str  # the framework as readings and messages name it ("deepspeed", "gpt-neox")
    detect: Callable[[Document], bool] | None = None
    read: Callable[[Document], Reading] | None = None
    # Several documents of one folder that the framework reads as one run -> their readings (default: one each).
    read_group: Callable[[list[Document], list[ReportError]], list[Reading]] | None = None
    # A document another config points at (`Reference.reader` names this reader), read as the pointing one fills it.
    read_referenced: Callable[[Document, Reading, Reference], Reading] | None = None
    # Policy -> (the config as data, what it cannot express); for syntax "python", (the code as text, ...).
    export: Callable[[Policy], tuple[Any, list[str]]] | None = None
    syntax: str = "yaml"  # of the exported fragment: json, yaml, toml or python
    label: str = ""  # how messages name the framework's config ("DeepSpeed"); default: `name`
    key: str = ""  # the name `export --to` and `from_config` take ("neox" for "gpt-neox"); default: `name`
    # A framework configured by an object in code (FSDP's MixedPrecisionPolicy): the object for a policy (needs
    # torch), and the policy an object runs.
    build: Callable[[Policy], Any] | None = None
    policy_of: Callable[[Any], Policy | None] | None = None
    # The launchers whose config may start this framework's run and decide its sharding (the HF Trainer's under
    # `accelerate launch --config_file`): their readers' names.
    launched_by: tuple[str, ...] = ()

    @property
    def title(self) -> str:
        return self.label or self.name

    @property
    def target(self) -> str:
        return self.key or self.name

    def recognises(self, doc: Document) -> bool:
        if self.detect is None:
            return False
        try:
            return bool(self.detect(doc))
        except (TypeError, AttributeError, ValueError):
            return False

    def read_safely(self, doc: Document, errors: list[ReportError]) -> Reading | None:
        """`read`, with a value the framework itself would reject reported as an input error at the file."""
        assert self.read is not None, f"{self.name} has no reader"
        try:
            return self.read(doc)
        except READ_ERRORS as exc:
            errors.append(ReportError(doc.file, f"cannot interpret this {self.name} config: {type(exc).__name__}: {exc}"))
            return None

    def read_all(self, docs: list[Document], errors: list[ReportError]) -> list[Reading]:
        """The readings of this framework's documents of one folder."""
        if self.read_group is not None:
            return self.read_group(docs, errors)
        return [cfg for doc in docs if (cfg := self.read_safely(doc, errors)) is not None]

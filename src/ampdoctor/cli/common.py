"""What every command shares: the usage error, where output goes, the output options, policy parsing."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from typing import IO, TYPE_CHECKING, Any, Callable, Iterator

from ampdoctor.report import FINDINGS, Report, formats, renderer, write_report

if TYPE_CHECKING:
    from ampdoctor.policy import Policy


class UsageError(Exception):
    """Bad arguments or unreadable input: printed as one line, exit 2."""


def at_least(minimum: int) -> Callable[[str], int]:
    """An argparse type: a whole number no smaller than `minimum` (a count of steps, workers, positions...)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{value} is below the least allowed value, {minimum}")
        return value
    parse.__name__ = f"at least {minimum}"  # what argparse names in its 'invalid ... value' message
    return parse


@contextlib.contextmanager
def output(path: str | None) -> Iterator[IO[str]]:
    if path is None:
        yield sys.stdout
        return
    try:
        with open(path, "w", encoding="utf-8") as fh:
            yield fh
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror}") from None
    except ValueError as exc:  # a NUL byte in the name
        raise UsageError(f"cannot write {path!r}: {exc}") from None


def check_writable(path: str | None) -> None:
    """Fail now if the report could not be written to `path` (a missing folder, no permission, a directory)."""
    if path is None:
        return
    target = os.path.abspath(path)
    folder = os.path.dirname(target)
    if os.path.isdir(target):
        raise UsageError(f"cannot write {path}: it is a directory")
    if not os.path.isdir(folder):
        raise UsageError(f"cannot write {path}: no such directory {folder}")
    if not os.access(target if os.path.exists(target) else folder, os.W_OK):
        raise UsageError(f"cannot write {path}: permission denied")


def emit(report: Report, args: argparse.Namespace) -> None:
    """Write `report` in the format the command was asked for, through the renderer registry."""
    with output(args.output) as stream:
        write_report(report.with_info(command=args.command), args.format, stream, full=getattr(args, "full", False))


def emit_document(args: argparse.Namespace, data: Callable[[], Any], view: Callable[[IO[str]], None]) -> None:
    """The output of a command with a document of its own (rules, env, rope): the document, `data()`, in a format with
    a data form (JSON); the command's own `view` of it in the others (text)."""
    chosen = renderer(args.format)
    with output(args.output) as stream:
        if chosen.write_data is not None:
            chosen.write_data(data(), stream)
        else:
            view(stream)


class CommandParser(argparse.ArgumentParser):
    """The parser of one command (`build_parser` makes every command's parser one): arguments handed to `later` are
    added when the parser is first used (to parse, or for its help), so that what their choices name (`export`'s
    frameworks, every framework reader) is imported only for that command and never for `ampdoctor lint`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.deferred: list[Callable[[argparse.ArgumentParser], None]] = []

    def _complete(self) -> None:
        while self.deferred:
            self.deferred.pop(0)(self)

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        self._complete()
        return super().parse_known_args(args, namespace)

    def format_usage(self) -> str:
        self._complete()
        return super().format_usage()

    def format_help(self) -> str:
        self._complete()
        return super().format_help()


def later(parser: argparse.ArgumentParser, add: Callable[[argparse.ArgumentParser], None]) -> None:
    """`add(parser)` when the parser is first used, if it is a `CommandParser`; else now."""
    if isinstance(parser, CommandParser):
        parser.deferred.append(add)
    else:
        add(parser)


def add_output_options(parser: argparse.ArgumentParser, choices: tuple[str, ...] | None = None) -> None:
    """`--format` (default: every registered format that renders findings) and `--output`."""
    parser.add_argument("--format", choices=formats(FINDINGS) if choices is None else choices, default="text",
                        help="output format (default: text)")
    parser.add_argument("--output", "-o", metavar="FILE", help="write the report to FILE instead of stdout")


def parse_policy(text: str) -> "Policy":
    from ampdoctor.policy import Policy

    try:
        return Policy.parse(text)
    except ValueError as exc:
        raise UsageError(f"--policy: {exc}") from None


def load_factory(spec: str) -> tuple[object, object]:
    """`pkg.module:factory` -> what the factory returns: a (model, inputs) pair."""
    import importlib

    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise UsageError(f"{spec!r}: expected pkg.module:factory")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        factory = getattr(importlib.import_module(module_name), attr)
        made = factory()
    except Exception as exc:  # noqa: BLE001 - user code: any failure is unreadable input
        raise UsageError(f"{spec}: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}") from None
    if not (isinstance(made, tuple) and len(made) == 2):
        raise UsageError(f"{spec}: the factory must return (model, inputs), got {type(made).__name__}")
    return made

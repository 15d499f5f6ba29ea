"""Shell launchers: the command lines of a `.sh`/`.bash` script that start a Python training script (``python
train.py --bf16``, ``accelerate launch --mixed_precision bf16 train.py``, ``torchrun ... train.py --precision
bf16-mixed``, ``deepspeed train.py --deepspeed ds_config.json``, ``srun ... python -m pkg.train``), with the flags
each passes and where it passes them. A launcher is a config of the run it starts: its flags are precision evidence
for the script it launches (`lint.python.project`).

Read with `shlex`, line by line as a shell joins them (a trailing backslash continues a command); a line the
lexer cannot read (an open quote, a heredoc) is skipped, never an error: a launcher only adds evidence."""

from __future__ import annotations

import os
import posixpath
import re
import shlex
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import Iterable, Iterator, Mapping, Sequence

SHELL_SUFFIXES = frozenset({".sh", ".bash"})
# Commands that run the rest of their line (`nohup python ...`, `srun -N 2 python ...`); their own options are skipped.
_WRAPPERS = frozenset({"nohup", "exec", "time", "env", "srun", "mpirun", "mpiexec", "sudo", "stdbuf", "nice", "numactl"})
# Shell words that open the command after them (`if ...; then python train.py`, `for ...; do torchrun ...`, `! python`).
_OPENERS = frozenset({"then", "do", "else", "{", "!"})
# Launchers that take their own options before the script, and the module spelling of each.
_LAUNCHERS = frozenset({"torchrun", "deepspeed", "accelerate", "composer", "lightning"})
_LAUNCH_MODULES = frozenset({"torch.distributed.run", "torch.distributed.launch", "accelerate.commands.launch", "deepspeed.launcher.runner"})
_PYTHON = re.compile(r"^(?:.*/)?python(?:\d+(?:\.\d+)?)?$")
_ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.S)
_VAR = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)(?::?[-=+?][^}]*)?\}|([A-Za-z_][A-Za-z0-9_]*))")
# Flags taken as booleans when given with no value or with a truth word (`--bf16`, `--bf16 True`).
BOOLEAN_FLAGS = frozenset({"bf16", "fp16"})
_TRUE = frozenset({"true", "1", "yes"})
_DEEPSPEED_FLAGS = frozenset({"deepspeed", "use_deepspeed", "deepspeed_config_file"})
_FALSE = frozenset({"false", "0", "no"})


@dataclass(frozen=True)
class Flag:
    """One option on a launch line: ``--mixed_precision=bf16`` -> name "mixed_precision", value "bf16"."""

    name: str  # without dashes, "-" read as "_" (argparse's dest); a dotted name keeps its dots (`trainer.precision`)
    value: str | bool  # a bare flag is True; a truth word given to a boolean flag is a bool
    literal: bool  # written out in the launcher, not read from a shell variable
    line: int
    text: str  # as written, for messages

    @property
    def key(self) -> str:
        """The option's own name (`trainer.precision` -> `precision`)."""
        return self.name.rpartition(".")[2]


@dataclass(frozen=True)
class Launch:
    file: str  # the launcher
    line: int  # where the command starts
    script: str  # the path as written (variables the launcher sets, expanded), or a module's dotted name
    module: bool  # `python -m pkg.train`
    launcher_flags: tuple[Flag, ...]  # the launcher's own (`accelerate launch --mixed_precision bf16`)
    script_flags: tuple[Flag, ...]  # what the script is given
    # every word the script is given, variables the launcher sets put in (`train.py yamls/mpt-125m.yaml --seed 1`)
    arguments: tuple[str, ...] = ()

    @property
    def deepspeed(self) -> bool:
        """The run is handed to DeepSpeed's engine (HF's `--deepspeed ds_config.json`, `accelerate launch
        --use_deepspeed`), which runs half precision by casting the model, not under autocast."""
        return any(f.key in _DEEPSPEED_FLAGS and f.value is not False for f in (*self.launcher_flags, *self.script_flags))

    def values(self) -> Iterator[str]:
        """Every value on the line: the flags' (`--deepspeed=ds.json` too) and the script's other words (a config
        path among them)."""
        yield from (f.value for f in (*self.launcher_flags, *self.script_flags) if isinstance(f.value, str))
        yield from self.arguments


def is_launcher(path: Path) -> bool:
    return path.suffix.lower() in SHELL_SUFFIXES


def launches_in(text: str, file: str) -> list[Launch]:
    """Every command of the shell text that starts a Python script. Variables assigned at the top level before the
    command (``PRECISION=bf16``) are expanded; a value that holds one is not literal (the environment may set it)."""
    out: list[Launch] = []
    assigned: dict[str, str] = {}
    for line, command, lines in _commands(text):
        words = _words(command)
        if words is None:
            continue
        for segment in _segments(words):
            names = segment[1:] if segment[0] in ("export", "declare", "local", "readonly") else segment
            if all(_ASSIGN.match(word) for word in names):
                for word in names:  # `PRECISION=bf16`, `export ROOT=/workspace/repo`
                    name, value = _ASSIGN.match(word).groups()
                    assigned[name] = _expanded(value, assigned)[0]
                continue
            launch = _launch(segment, assigned, file, line)
            if launch is not None:
                out.append(_located(launch, lines))
    return out


def _commands(text: str) -> Iterable[tuple[int, str, list[str]]]:
    """Logical lines (a trailing backslash joins the next), each with the line it starts on and its physical lines."""
    start, parts = 0, []
    for number, raw in enumerate(text.splitlines(), 1):
        if not parts:
            start = number
        stripped = raw.rstrip()
        # a comment's trailing backslash is part of the comment: the shell joins no line to it
        if stripped.endswith("\\") and not stripped.endswith("\\\\") and not stripped.lstrip().startswith("#"):
            parts.append(stripped[:-1])
            continue
        parts.append(raw)
        yield start, " ".join(parts), parts
        parts = []
    if parts:
        yield start, " ".join(parts), parts


def _located(launch: Launch, lines: list[str]) -> Launch:
    """Each flag at the line it is written on: a command continued over lines passes its flags below its start."""
    def line_of(flag: Flag) -> int:
        word = re.compile(r"(?<!\S)" + re.escape(flag.text.split()[0]) + r"(?![\w-])")
        return next((launch.line + k for k, raw in enumerate(lines) if word.search(raw)), launch.line)
    return replace(launch, launcher_flags=tuple(replace(f, line=line_of(f)) for f in launch.launcher_flags),
                   script_flags=tuple(replace(f, line=line_of(f)) for f in launch.script_flags))


def _words(command: str) -> list[str] | None:
    """The shell words of one logical line (comments dropped, `;`, `&&`, `|` as words of their own), or None where
    the lexer cannot read it (an unbalanced quote)."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        return list(lexer)
    except ValueError:
        return None


def _segments(words: list[str]) -> Iterable[list[str]]:
    segment: list[str] = []
    for word in words:
        if word and set(word) <= set(";&|"):
            if segment:
                yield segment
            segment = []
        else:
            segment.append(word)
    if segment:
        yield segment


def _launch(words: list[str], assigned: Mapping[str, str], file: str, line: int) -> Launch | None:
    i = 0
    while i < len(words) and words[i] in _OPENERS:
        i += 1
    while i < len(words) and _ASSIGN.match(words[i]):
        i += 1  # `CUDA_VISIBLE_DEVICES=0 python ...`: assignments for this command only
    while i < len(words) and words[i] in _WRAPPERS:
        i = _past_options(words, i + 1)
        while i < len(words) and _ASSIGN.match(words[i]):
            i += 1
    if i >= len(words):
        return None
    head = words[i]
    if _PYTHON.match(head):
        i += 1
        while i < len(words) and words[i].startswith("-") and words[i] != "-m":
            i += 1  # the interpreter's own flags (`-u`, `-O`)
        if i + 1 < len(words) and words[i] == "-m":
            if words[i + 1] not in _LAUNCH_MODULES:
                return _made(words, i + 1, True, [], assigned, file, line)
            i += 2
        return _after_launcher(words, i, assigned, file, line)
    name = PurePosixPath(head).name
    if name in _LAUNCHERS:
        i += 1
        if i < len(words) and words[i] in ("launch", "run"):
            i += 1  # `accelerate launch`, `lightning run model`
        return _after_launcher(words, i, assigned, file, line)
    return None


def _past_options(words: list[str], i: int) -> int:
    """Past a wrapper's own options (`srun -N 2 --gres=gpu:8`): up to the first word that names a command."""
    while i < len(words) and (words[i].startswith("-") or (i > 0 and words[i - 1].startswith("-") and "=" not in words[i - 1]
                                                           and not _PYTHON.match(words[i]) and words[i] not in _LAUNCHERS)):
        i += 1
    return i


def _after_launcher(words: list[str], i: int, assigned: Mapping[str, str], file: str, line: int) -> Launch | None:
    """A launcher's options up to its script: the first word that ends in `.py`, or the module after `-m`/`--module`."""
    start = i
    while i < len(words):
        word = words[i]
        if word in ("-m", "--module") and i + 1 < len(words):
            return _made(words, i + 1, True, _flags(words[start:i], assigned, line), assigned, file, line)
        if _expanded(word, assigned)[0].endswith(".py") and not word.startswith("-"):
            return _made(words, i, False, _flags(words[start:i], assigned, line), assigned, file, line)
        i += 1
    return None


def _made(words: list[str], at: int, module: bool, launcher: list[Flag], assigned: Mapping[str, str], file: str,
          line: int) -> Launch | None:
    script, _ = _expanded(words[at], assigned)
    if "$" in script:
        # `$ROOT/train.py`, `$(dirname $0)/train.py`: the folders the launcher spells out after the last it does not
        parts = script.split("/")
        script = "/".join(parts[max(i for i, p in enumerate(parts) if set(p) & set("$(){}`")) + 1:])
    if not script or (module and not all(p.isidentifier() for p in script.split("."))):
        return None
    return Launch(file, line, script, module, tuple(launcher), tuple(_flags(words[at + 1:], assigned, line)),
                  tuple(_expanded(word, assigned)[0] for word in words[at + 1:]))


def _expanded(word: str, assigned: Mapping[str, str]) -> tuple[str, bool]:
    """The word with the launcher's own variables put in, and whether it was literal (held no variable)."""
    if "$" not in word:
        return word, True
    return _VAR.sub(lambda m: assigned.get(m[1] or m[2], m[0]), word), False


def _flags(words: Sequence[str], assigned: Mapping[str, str], line: int) -> list[Flag]:
    out: list[Flag] = []
    i = 0
    while i < len(words):
        word, first = words[i], i
        i += 1
        if not word.startswith("-") or word in ("-", "--"):
            continue
        raw, literal = _expanded(word, assigned)
        name, sep, value = raw.lstrip("-").partition("=")
        name = name.replace("-", "_")
        if not name:
            continue
        given: str | bool = value if sep else True
        if not sep and i < len(words) and not words[i].startswith("-"):
            following, literal_value = _expanded(words[i], assigned)
            # a boolean flag takes the next word only when it is a truth word or a variable (`--bf16 $USE_BF16`)
            boolean = following.lower() in _TRUE | _FALSE or "$" in words[i]
            if name.rpartition(".")[2] not in BOOLEAN_FLAGS or boolean:
                given, literal, i = following, literal and literal_value, i + 1
        if name.rpartition(".")[2] in BOOLEAN_FLAGS and isinstance(given, str):
            low = given.lower()
            given = True if low in _TRUE else False if low in _FALSE else given
        out.append(Flag(name, given, literal and "$" not in str(given), line, " ".join(words[first:i])))
    return out


def read_launches(path: Path) -> list[Launch]:
    """The launches of one shell script; one that cannot be read has none."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    return launches_in(text, str(path))


def launched_scripts(launchers: Sequence[Path], python: Sequence[Path], roots: Sequence[Path]) -> dict[str, list[Launch]]:
    """By Python file (as given in `python`), the launches that start it. A script path is resolved against the
    launcher's folder, the folders above it up to its project root (launchers are run from the repository root or
    from a `scripts/` folder), and last by the path's tail among the project's files (`/workspace/repo/train.py`
    in a container); a module (`-m pkg.train`) by its file."""
    by_rel: dict[str, list[Path]] = {}
    for path in python:
        parts = PurePosixPath(path.as_posix()).parts
        for i in range(len(parts)):
            by_rel.setdefault("/".join(parts[i:]), []).append(path)
    known = {p.as_posix(): p for p in python}
    out: dict[str, list[Launch]] = {}
    for launcher in launchers:
        root = innermost_root(launcher, roots)
        for launch in read_launches(launcher):
            target = _resolve(launch, Path(launcher), root, known, by_rel)
            if target is not None:
                out.setdefault(str(target), []).append(launch)
    return out


def innermost_root(path: Path, roots: Sequence[Path]) -> Path | None:
    """The innermost of the folders `roots` that holds `path` (compared as spelled: give both in one spelling)."""
    if os.name != "posix":
        return max((r for r in roots if path.is_relative_to(r)), key=lambda r: len(r.parts), default=None)
    # `is_relative_to` by parts, as it compares on POSIX, without the paths it builds: asked of every file for every
    # folder linted, it was most of the time of a re-lint of many folders
    parts = path.parts
    return max((r for r in roots if _holds(r.parts, parts)), key=lambda r: len(r.parts), default=None)


def _holds(root: tuple[str, ...], parts: tuple[str, ...]) -> bool:
    # A root of no parts ("." or "") holds every relative path and no absolute one.
    return parts[:len(root)] == root if root else not (parts and parts[0].startswith("/"))


def _resolve(launch: Launch, launcher: Path, root: Path | None, known: Mapping[str, Path],
             by_rel: Mapping[str, list[Path]]) -> Path | None:
    if launch.module:
        rels = [launch.script.replace(".", "/") + ".py", launch.script.replace(".", "/") + "/__main__.py"]
    else:
        rels = [launch.script]
    for rel in rels:
        written = PurePosixPath(rel)
        if written.is_absolute():
            written = PurePosixPath(*written.parts[1:])
        folder = launcher.parent
        while True:
            candidate = Path(folder, written)
            found = known.get(posixpath.normpath(candidate.as_posix()))  # `.` and `..` folded as the shell does
            if found is not None:
                return found
            if root is None or folder == root or not folder.is_relative_to(root) or folder == folder.parent:
                break
            folder = folder.parent
        # `/workspace/repo/train.py`: the longest tail of the path that names one file of the project
        parts = [q for q in written.parts if q not in (".", "..")]
        for i in range(len(parts)):
            tail = [p for p in by_rel.get("/".join(parts[i:]), []) if root is None or p.is_relative_to(root)]
            if tail:
                return tail[0] if len(tail) == 1 else None
    return None


def option_values(launches: Iterable[Launch]) -> tuple[tuple[str, str | bool, bool], ...]:
    """What the launches pass their script, as (option name, value, written literally), in a stable order."""
    return tuple(sorted({flag for launch in launches for flag in _passed(launch)}, key=repr))


def runs_of(launches: Iterable[Launch]) -> tuple[tuple[str, tuple[tuple[str, str | bool, bool], ...]], ...]:
    """One run per launch line: where it is (`exps/train.sh:13`, the launcher's folder and name) and what it passes
    the script, as in `option_values`."""
    return tuple(sorted({(f"{short_path(launch.file)}:{launch.line}", _passed(launch)) for launch in launches}))


def _passed(launch: Launch) -> tuple[tuple[str, str | bool, bool], ...]:
    return tuple(sorted({(f.key, f.value, f.literal) for f in launch.script_flags}, key=repr))


def short_path(path: str) -> str:
    """A path as messages cite it: its folder and file name (`exps/train.sh`)."""
    parts = PurePosixPath(Path(path).as_posix()).parts
    return "/".join(parts[-2:]) if len(parts) > 1 else path

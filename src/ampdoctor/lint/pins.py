"""The oldest torch a project supports, from its own requirement files and the install commands of its README: a
hazard of torch versions older than that cannot happen to it, and saying so would be a warning about a version it
never runs."""

from __future__ import annotations

import re
from pathlib import Path

# `torch>=2.1`, `torch==2.4.0`, `torch~=2.2`, `"torch >= 2.0, < 3"`; not `torchvision`.
_PIN = re.compile(r"(?<![\w.-])torch\s*(?:\[[^\]]*\])?\s*(>=|==|~=|>|===)\s*(\d+)\.(\d+)")
_FILES = ("pyproject.toml", "setup.py", "setup.cfg", "environment.yml", "environment.yaml")
# A README's install steps (`pip install torch==2.1.2 ...`, `conda install pytorch==2.1.2 ...`) pin the torch the
# project is set up with; only the lines that run an installer are read there, not prose about other versions.
_READMES = ("README.md", "README.rst")
_INSTALL = re.compile(r"\b(?:pip3?|conda|mamba|uv)\b[^\n]*\binstall\b")
_CONDA_PIN = re.compile(r"(?<![\w.-])pytorch\s*(==|=|>=)\s*(\d+)\.(\d+)")
# Beyond this size a file in the root is data, not a requirement list.
_MAX_BYTES = 256 * 1024


def torch_floor(root: Path) -> tuple[tuple[int, int], str] | None:
    """((major, minor), "file:line") of the lowest torch version `root`'s requirement files (and its README's install
    commands) allow, when every torch requirement in them sets a lower bound; None when none does (or the root has no
    such file)."""
    floors: list[tuple[tuple[int, int], str]] = []
    for path in _candidates(root):
        try:
            if path.stat().st_size > _MAX_BYTES:
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        readme = path.name in _READMES
        for n, line in enumerate(text.splitlines(), 1):
            if (line.lstrip().startswith("#") and not readme) or (readme and not _INSTALL.search(line)):
                continue
            for m in [*_PIN.finditer(line), *(_CONDA_PIN.finditer(line) if readme else ())]:
                version = (int(m.group(2)), int(m.group(3)) + (1 if m.group(1) == ">" else 0))
                floors.append((version, f"{path.name}:{n}"))
    return min(floors) if floors else None


def _candidates(root: Path) -> list[Path]:
    try:
        names = [root / name for name in (*_FILES, *_READMES)]
        names += sorted(root.glob("requirements*.txt"))
        names += sorted((root / "requirements").glob("*.txt")) if (root / "requirements").is_dir() else []
        return [p for p in names if p.is_file()]
    except OSError:
        return []

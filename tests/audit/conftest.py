import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
INCIDENTS = os.path.join(ROOT, "examples", "incidents")


@pytest.fixture
def incident():
    def path(name: str) -> str:
        return os.path.join(INCIDENTS, name)

    return path


def line_of(path: str, text: str) -> int:
    """The last line of `path` containing `text` (docstrings quote the buggy line first)."""
    with open(path, encoding="utf-8") as fh:
        hits = [number for number, line in enumerate(fh, 1) if text in line]
    assert hits, f"{text!r} not in {path}"
    return hits[-1]


@pytest.fixture(name="line_of")
def line_of_fixture():
    return line_of

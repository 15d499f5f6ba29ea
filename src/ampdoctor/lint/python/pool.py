"""Work spread over worker processes, in interleaved chunks, with the cycle collector paused."""

from __future__ import annotations

import contextlib
import functools
import gc
import os
from concurrent.futures import ProcessPoolExecutor
from typing import Any, Callable

# Below this many files a process pool costs more than it saves.
PARALLEL_MIN_FILES = 24


@contextlib.contextmanager
def _cycle_collector_paused():
    """ASTs are big acyclic object graphs that reference counting frees on its own. With torch imported the
    heap holds ~170k tracked objects, and every collection that AST allocation triggers rescans them: that
    doubled the time to lint the transformers tree (docs/benchmarks.md). Pause only the cycle collector."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _chunk(fn: Callable[..., Any], items: list[tuple]) -> list[Any]:
    with _cycle_collector_paused():
        return [fn(*item) for item in items]


def run(fn: Callable[..., Any], items: list[tuple], jobs: int, warm: Callable[[], Any] | None = None) -> list[Any]:
    """`fn(*item)` for each item, in worker processes; the results in the order of the items. `warm`, called here
    before the workers start, loads what every call needs (modules, tables): forked workers inherit it instead of
    each loading it again, once per pool."""
    workers = _workers(len(items), jobs)
    if workers <= 1:
        return _chunk(fn, items)
    if warm is not None:
        warm()
    # Interleaved chunks so that big files (one model family sits together) spread over the workers.
    n_chunks = workers * 16
    chunks = [items[i::n_chunks] for i in range(n_chunks)]
    out: list[Any] = [None] * len(items)
    # the results unpickled here are as acyclic as the trees were, and as many
    with _cycle_collector_paused(), ProcessPoolExecutor(max_workers=workers) as pool:
        for i, results in enumerate(pool.map(functools.partial(_chunk, fn), chunks)):
            out[i::n_chunks] = results
    return out


def run_rest(fn: Callable[..., Any], items: list[tuple], jobs: int, here: Callable[..., Any],
             warm: Callable[[], Any] | None = None) -> list[Any]:
    """`fn(*item)` for each item, as `run`; where `here(*item)` already has the result (not None: a cheap answer,
    as a stored one), it is taken in this process, and only the other items go to the workers."""
    with _cycle_collector_paused():
        out = [here(*item) for item in items]
    todo = [i for i, r in enumerate(out) if r is None]
    for i, result in zip(todo, run(fn, [items[i] for i in todo], jobs, warm)):
        out[i] = result
    return out


def _workers(n: int, jobs: int) -> int:
    workers = jobs or os.cpu_count() or 1
    return 1 if n < PARALLEL_MIN_FILES else workers


def chunk_order(n: int, jobs: int) -> list[int]:
    """The order in which `_run`'s chunks hold `n` items: files are reported in it (`checked`), chunk by chunk."""
    workers = _workers(n, jobs)
    if workers <= 1:
        return list(range(n))
    n_chunks = workers * 16
    return [j for i in range(n_chunks) for j in range(i, n, n_chunks)]

"""Run a script or module the way `python script.py args` / `python -m mod args` would (same
`sys.argv`, `__main__`, `sys.path[0]`, cwd) under an audit, and always produce the report."""

from __future__ import annotations

import os
import runpy
import sys
import sysconfig
import traceback
from dataclasses import dataclass
from typing import Callable, Sequence

from ampdoctor.audit.observe import Observed
from ampdoctor.audit.session import Audit
from ampdoctor.policy import Policy
from ampdoctor.report import Report

_HERE = os.path.dirname(os.path.abspath(__file__))


class ScriptNotFound(ValueError):
    pass


@dataclass(frozen=True)
class RunResult:
    report: Report
    # The script's own exit status: 0 when it ran to the end, its SystemExit code, or 1 when it raised.
    exit_code: int
    exception: BaseException | None
    observed: Observed | None = None  # the policy and facts the script was seen to run with


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


# Frames that exist only because the step ran under the audit's dispatch mode, or under runpy.
_AUDIT_FRAMES = ("runpy.py", "<frozen runpy>", "_python_dispatch.py", "torch/_ops.py", "torch/_compile.py",
                 "torch/_dynamo/eval_frame.py")


def _library_roots() -> tuple[str, ...]:
    """Where installed code lives (the standard library, site-packages): frames there are not the user's."""
    paths = sysconfig.get_paths()
    roots = {os.path.realpath(paths[k]) + os.sep for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    roots.update(os.path.realpath(p) + os.sep for p in sys.path if p.endswith(("site-packages", "dist-packages")))
    return tuple(sorted(roots, key=len, reverse=True))  # the most specific first: a venv nests site-packages in its stdlib


def _package_of(filename: str, roots: tuple[str, ...]) -> str | None:
    """The installed package a frame's file belongs to ("torch"), or None for the user's own code."""
    real = os.path.realpath(filename)
    for root in roots:
        if real.startswith(root):
            return real[len(root):].split(os.sep, 1)[0].removesuffix(".py") or None
    return None


def _print_user_traceback(exc: BaseException, verbose: bool = False) -> None:
    """The script's traceback as Python would print it, without runpy's and ampdoctor's frames; unless `verbose`,
    also without library frames (torch's module-call machinery is dozens of lines users take for a crash in
    ampdoctor), except the innermost frame, where the error surfaced."""
    te = traceback.TracebackException(type(exc), exc, exc.__traceback__)
    frames = [f for f in te.stack if not (f.filename.startswith(_HERE) or f.filename.endswith(_AUDIT_FRAMES))]
    hidden: dict[str, int] = {}
    if not verbose and frames:
        roots = _library_roots()
        kept = []
        for f in frames[:-1]:
            package = _package_of(f.filename, roots)
            if package is None:
                kept.append(f)
            else:
                hidden[package] = hidden.get(package, 0) + 1
        frames = kept + frames[-1:]
    te.stack = traceback.StackSummary.from_list(frames)
    sys.stderr.write("".join(te.format()))
    if hidden:
        what = ", ".join(f"{n} in {package}" for package, n in sorted(hidden.items(), key=lambda kv: -kv[1]))
        sys.stderr.write(f"({sum(hidden.values())} library frames not shown: {what}; `ampdoctor run -v` shows them)\n")


def _script_root(target: str) -> str:
    path = os.path.abspath(target)
    return path if os.path.isdir(path) else os.path.dirname(path)


def _resolve(target: str, module: bool) -> tuple[str, str]:
    """(sys.argv[0], what runpy runs): a module's origin, or the script's absolute path (its `__file__` is
    absolute, as Python gives it), or a folder holding a `__main__.py`."""
    if module:
        import importlib.util

        try:
            spec = importlib.util.find_spec(target)
        except (ImportError, ValueError) as err:
            raise ScriptNotFound(f"cannot find module {target!r}: {err}") from None
        if spec is None:
            raise ScriptNotFound(f"no module named {target!r}")
        return spec.origin or target, target
    if os.path.isdir(target):
        if not os.path.isfile(os.path.join(target, "__main__.py")):
            raise ScriptNotFound(f"can't find '__main__.py' in {target!r}")
        return target, os.path.abspath(target)
    if not os.path.isfile(target):
        raise ScriptNotFound(f"can't open file {target!r}: no such file")
    return target, os.path.abspath(target)


def run(
    target: str,
    args: Sequence[str] = (),
    *,
    module: bool = False,
    policy: Policy | str | None = None,
    max_steps: int | None = 1,
    device_type: str | None = None,
    target_device: str | None = None,
    on_stop: Callable[[Audit], None] | None = None,
    verbose: bool = False,
    every: int | None = None,
) -> RunResult:
    """Run `target` (a path, or a module name with module=True) with `args` under an audit that
    stops recording after `max_steps` optimizer steps (with `every`, records one step in `every` until then); the
    script itself runs to its end."""
    # sys.path[0] as `python` sets it: the current directory for -m (also when ampdoctor runs as a console
    # script, whose own sys.path[0] is its bin folder), else the script's folder, or a folder run for its __main__.py.
    sys.path.insert(0, os.getcwd() if module else _script_root(target))
    try:
        argv0, runnable = _resolve(target, module)
    except ScriptNotFound:
        del sys.path[0]
        raise
    saved_argv, saved_main = list(sys.argv), sys.modules.get("__main__")
    sys.argv = [argv0, *args]
    holder: list[Audit] = []
    a = Audit(policy, device_type=device_type, target_device=target_device, max_steps=max_steps, every=every,
              on_stop=(lambda: on_stop(holder[0])) if on_stop else None, checked=(target,))
    holder.append(a)
    exc: BaseException | None = None
    code = 0
    try:
        a.__enter__()
        try:
            if module:
                runpy.run_module(runnable, run_name="__main__", alter_sys=True)
            else:
                runpy.run_path(runnable, run_name="__main__")
        except SystemExit as stop:
            code = _exit_code(stop.code)
        except KeyboardInterrupt as err:
            exc, code = err, 130
        except Exception as err:
            exc, code = err, 1
    finally:
        a.__exit__(type(exc) if exc else None, exc, exc.__traceback__ if exc else None)
        sys.argv = saved_argv
        del sys.path[0]
        if saved_main is not None:
            sys.modules["__main__"] = saved_main
    if exc is not None and not isinstance(exc, KeyboardInterrupt):
        _print_user_traceback(exc, verbose)
    report = a.report.with_info(script=target, script_exit_code=code, script_failed=code != 0,
                                exception=f"{type(exc).__name__}: {exc}" if exc is not None else None)
    return RunResult(report, code, exc, a.observed)

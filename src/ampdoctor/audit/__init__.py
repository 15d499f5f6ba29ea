"""Runtime dtype-flow audit: record real training steps (aten ops, modules, phases, provenance),
then check them against a `Policy` and walk a failure back to where its dtype left the policy.

The package imports torch only when `Audit`, `audit` or `audit_step` is used, so that rule modules can
read the audit's record layout (`ampdoctor.audit.fields`) where torch is not installed."""

from __future__ import annotations

from typing import Any

__all__ = ["Audit", "audit", "audit_step", "inspect_model"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from ampdoctor.audit import session

        return getattr(session, name)
    raise AttributeError(f"module 'ampdoctor.audit' has no attribute {name!r}")


class _CallablePackage(type(__import__("sys"))):  # type: ignore[misc]
    """`ampdoctor.audit(...)` is the public context manager, but importing this package (`ampdoctor.audit.session`
    does) binds the package to the attribute `ampdoctor.audit`: calling the package calls `audit`, so both work."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from ampdoctor.audit import session

        return session.audit(*args, **kwargs)


import sys as _sys  # noqa: E402

_sys.modules[__name__].__class__ = _CallablePackage

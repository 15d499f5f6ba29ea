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

"""Runtime dtype-flow audit: record real training steps (aten ops, modules, phases, provenance),
then check them against a `Policy` and walk a failure back to where its dtype left the policy."""

from ampdoctor.audit.session import Audit, audit, audit_step

__all__ = ["Audit", "audit", "audit_step"]

"""ampdoctor: BF16 mixed-precision training for PyTorch, correct by construction and diagnosed when it is not.

The static part of the API (`Policy`, rules, `explain`, reports) works without torch; the runtime part
(`audit`, `PrecisionStep`, `RotaryEmbedding`, `fix`, `compare`) is imported on first use and needs torch.
"""

from __future__ import annotations

from typing import Any

from ampdoctor._version import __version__
from ampdoctor.core import Finding, Location, Rule, Severity, catalog, get_rule
from ampdoctor.explain import Candidate, explain
from ampdoctor.facts import RunFacts
from ampdoctor.policy import Policy
from ampdoctor.report import Report

# Public names that need torch: name -> the module that defines it.
_RUNTIME = {
    "Audit": "ampdoctor.audit.session", "audit": "ampdoctor.audit.session", "audit_step": "ampdoctor.audit.session",
    "inspect_model": "ampdoctor.audit.session",
    "RotaryEmbedding": "ampdoctor.nn", "apply_rotary": "ampdoctor.nn",
    "PrecisionStep": "ampdoctor.train", "StepResult": "ampdoctor.train",
    "fix": "ampdoctor.fix",
    "compare": "ampdoctor.numerics",
}


def __getattr__(name: str) -> Any:
    module = _RUNTIME.get(name)
    if module is None:
        raise AttributeError(f"module 'ampdoctor' has no attribute {name!r}")
    import importlib

    from ampdoctor._requires import require_torch

    require_torch(f"ampdoctor.{name}")
    loaded = importlib.import_module(module)
    return loaded if module.endswith(f".{name}") else getattr(loaded, name)


__all__ = [
    "Audit", "audit", "audit_step", "Candidate", "Finding", "Location", "Policy", "PrecisionStep", "Report", "RotaryEmbedding", "Rule",
    "RunFacts", "Severity", "StepResult", "__version__", "apply_rotary", "catalog", "compare", "inspect_model", "explain", "fix", "get_rule",
]

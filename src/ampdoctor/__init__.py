"""ampdoctor: BF16 mixed-precision training for PyTorch, correct by construction and diagnosed when it is not."""

__version__ = "0.1.0"

from ampdoctor import fix  # noqa: E402
from ampdoctor.audit import Audit, audit, audit_step  # noqa: E402
from ampdoctor.explain import Candidate, explain  # noqa: E402
from ampdoctor.nn import RotaryEmbedding, apply_rotary  # noqa: E402
from ampdoctor.policy import Policy  # noqa: E402
from ampdoctor.report import Report  # noqa: E402
from ampdoctor.rules import Finding, Location, Rule, Severity, catalog, get_rule  # noqa: E402
from ampdoctor.train import PrecisionStep, StepResult  # noqa: E402

__all__ = [
    "Audit", "audit", "audit_step", "Candidate", "Finding", "Location", "Policy", "PrecisionStep", "Report", "RotaryEmbedding", "Rule", "Severity",
    "StepResult", "__version__", "apply_rotary", "catalog", "explain", "fix", "get_rule",
]

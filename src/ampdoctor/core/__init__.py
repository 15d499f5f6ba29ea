"""The floor every detector stands on: findings and locations (`model`), the rule catalog (`catalog`, read from
the rules' `catalog.yaml`), the detector registry and its loader (`registry`), and the policy engine that asks
the policy-level rules (`engine`). Nothing here imports a rule module or a layer above; the registry's loader
is the one way up (see `registry.RULES_PACKAGE`)."""

from ampdoctor.core.catalog import catalog, finding, get_rule
from ampdoctor.core.model import Finding, Location, Rule, Severity, Signature, Source

__all__ = ["Finding", "Location", "Rule", "Severity", "Signature", "Source", "catalog", "finding", "get_rule"]

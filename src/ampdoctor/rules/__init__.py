"""The rule catalog and the types detectors report with."""

from ampdoctor.rules.catalog import catalog, finding, get_rule
from ampdoctor.rules.model import Finding, Location, Rule, Severity, Signature, Source

__all__ = ["Finding", "Location", "Rule", "Severity", "Signature", "Source", "catalog", "finding", "get_rule"]

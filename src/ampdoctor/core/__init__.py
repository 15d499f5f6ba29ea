"""The rule catalog and the types detectors report with."""

from ampdoctor.core.catalog import catalog, finding, get_rule
from ampdoctor.core.model import Finding, Location, Rule, Severity, Signature, Source

__all__ = ["Finding", "Location", "Rule", "Severity", "Signature", "Source", "catalog", "finding", "get_rule"]

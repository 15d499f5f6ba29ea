"""Asking the policy-level rules: every registered ``policy`` predicate over one ``(policy, facts)``, with a
`Places` that says where each Policy field and fact was decided (a config key, an op of the audit, or just
"the policy" for `Policy.validate()`). Config lint, `Policy.validate()`, the audit and `PrecisionStep` all
come through `check_policy`, so the same input gets the same verdict wherever it is asked."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Iterable, Mapping

from ampdoctor.core.catalog import finding_of
from ampdoctor.core.model import Finding, Location
from ampdoctor.core.registry import detectors

if TYPE_CHECKING:
    from ampdoctor.facts import RunFacts
    from ampdoctor.policy import Policy


class Places:
    """Where each Policy field or fact was decided, by name; `default` for the rest."""

    def __init__(self, locations: Mapping[str, Location] | None = None, default: Location | None = None) -> None:
        self.locations = dict(locations or {})
        self.default = default or Location()

    def __call__(self, name: str) -> Location:
        return self.locations.get(name) or self.default

    def has(self, name: str) -> bool:
        return name in self.locations

    def others(self, here: Location, *names: str | Location) -> tuple[Location, ...]:
        """Related places worth naming: those of `names` that have a file and are not `here`."""
        out: list[Location] = []
        for item in names:
            loc = self(item) if isinstance(item, str) else item
            if loc.file and (loc.file, loc.line) != (here.file, here.line) and loc not in out:
                out.append(loc)
        return tuple(out)


def check_policy(policy: "Policy | None", facts: "RunFacts", places: Places | None = None) -> list[Finding]:
    """Findings of every policy-level rule for this policy (None: left to something outside the input) and facts."""
    at = places or Places(default=Location(label=f"policy {policy}" if policy is not None else "run"))
    out: list[Finding] = []
    for detector in detectors("policy"):
        for hit in detector.fn(policy, facts, at):
            out.append(finding_of(detector.rule_id, hit if hit.location is not None else replace(hit, location=at.default)))
    return out


def rules_fired(findings: Iterable[Finding]) -> list[str]:
    """The ids of the rules in `findings`, sorted and unique: the verdict compared across paths."""
    return sorted({f.rule_id for f in findings})

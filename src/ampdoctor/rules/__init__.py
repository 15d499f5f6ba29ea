"""The rules' detectors, one module per rule (``ampNNN_<name>.py``), and the catalog they share (``catalog.yaml``).

This package is the top floor: nothing imports a rule module except the registry's loader
(`ampdoctor.core.registry`), which imports them all by name when detectors are first asked for. The
vocabulary rules are written in (findings, locations, the catalog, the registry, the policy engine) is
`ampdoctor.core`.
"""

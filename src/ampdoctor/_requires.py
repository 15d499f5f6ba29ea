"""Optional dependencies: the static path (lint, explain, rules, Policy) never imports torch; the runtime
parts say in one line how to get it when it is missing."""

from __future__ import annotations

import importlib.util

INSTALL_TORCH = "pip install torch  (or: pip install 'ampdoctor[torch]')"


class MissingDependency(ImportError):
    """A feature needs a package that is not installed; the message says how to install it."""


def require_torch(feature: str) -> None:
    """Raise `MissingDependency` naming `feature` when torch cannot be imported."""
    if importlib.util.find_spec("torch") is None:
        raise MissingDependency(f"{feature} needs PyTorch, which is not installed: {INSTALL_TORCH}")

"""Static checks: configs and Python source."""

from ampdoctor.lint.engine import lint_paths
from ampdoctor.lint.settings import LintSettings, SettingsError, load_settings

__all__ = ["LintSettings", "SettingsError", "lint_paths", "load_settings"]

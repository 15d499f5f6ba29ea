"""Static checks: configs and Python source."""

from ampdoctor.lint.engine import exit_code, lint_paths
from ampdoctor.lint.settings import LintSettings, SettingsError, load_settings

__all__ = ["LintSettings", "SettingsError", "exit_code", "lint_paths", "load_settings"]

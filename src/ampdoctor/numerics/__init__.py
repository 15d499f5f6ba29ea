"""Numerics: where low precision costs accuracy. `compare` measures every module's error against a float64
reference; `rope_report` measures RoPE variants against float64 tables. Needs torch."""

from ampdoctor.numerics.divergence import CompareResult, ModuleError, NumericsContext, UpdateUnderflow, compare
from ampdoctor.numerics.metrics import ErrorStats, error_stats

__all__ = ["CompareResult", "ErrorStats", "ModuleError", "NumericsContext", "UpdateUnderflow", "compare", "error_stats"]

"""The `Report` of a comparison: findings, the per-module table, the update-underflow table and their charts."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Iterable, Mapping

from ampdoctor.report import Report, ReportInfo, Table
from ampdoctor.report.model import Chart, Series

if TYPE_CHECKING:
    from ampdoctor.core import Finding
    from ampdoctor.numerics.divergence import ModuleError, NumericsContext
    from ampdoctor.numerics.rope import RopeReport


def number(value: float | None) -> str:
    """Three significant digits; '-' where nothing was compared."""
    if value is None:
        return "-"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"{value:.3g}"


def _ordered(modules: Iterable["ModuleError"]) -> list["ModuleError"]:
    """Leaves by local error (largest first), then the containers in module order."""
    mods = list(modules)
    leaves = sorted((m for m in mods if m.leaf), key=lambda m: -(m.local_error if m.local_error is not None else -1.0))
    return leaves + [m for m in mods if not m.leaf]


COLUMNS = ("module", "type", "leaf", "local error", "forward error", "forward max-abs", "forward SQNR dB", "grad error",
           "param grad error", "input dtypes")


def module_table(ctx: "NumericsContext") -> Table:
    rows = tuple((
        m.name or "<root>", m.type, "yes" if m.leaf else "no", number(m.local_error), number(m.forward_error),
        number(m.forward.max_abs if m.forward else None), number(m.forward.sqnr_db if m.forward else None),
        number(m.grad_error), number(m.param_grad_error), ",".join(sorted(set(m.input_dtypes))) or "-",
    ) for m in _ordered(ctx.modules))
    return Table(f"Error per module against the {ctx.reference} reference (relative L2)", COLUMNS, rows)


def update_table(ctx: "NumericsContext") -> Table:
    rows = tuple((u.parameter, u.dtype, number(u.lost_fraction), str(u.considered))
                 for u in sorted(ctx.updates, key=lambda u: -u.lost_fraction))
    return Table(f"Updates lost when added in the params dtype (one AdamW step, lr={ctx.lr:g})",
                 ("parameter", "dtype", "lost fraction", "elements updated"), rows)


def _positive(values: Iterable[float | None]) -> tuple[float, ...]:
    """Values for a log axis: None (nothing compared) and exact zeros become NaN, which the charts skip."""
    return tuple(v if v is not None and v > 0 and math.isfinite(v) else math.nan for v in values)


def error_chart(ctx: "NumericsContext") -> Chart:
    leaves = [m for m in ctx.modules if m.leaf]
    names = tuple(m.name or "<root>" for m in leaves)
    return Chart("Error by module (leaf modules in call order)", "bar", (
        Series("local error", names, _positive(m.local_error for m in leaves)),
        Series("forward error", names, _positive(m.forward_error for m in leaves)),
        Series("grad error", names, _positive(m.grad_error for m in leaves)),
    ), x_label="module", y_label="relative L2 error")


def underflow_chart(ctx: "NumericsContext") -> Chart:
    names = tuple(u.parameter for u in ctx.updates)
    return Chart("Updates lost in the params dtype, by parameter", "bar",
                 (Series("lost fraction", names, tuple(u.lost_fraction for u in ctx.updates)),),
                 x_label="parameter", y_label="fraction of updated elements", log_y=False)


def compare_report(ctx: "NumericsContext", findings: Iterable["Finding"], losses: Mapping[str, float]) -> Report:
    charts = [error_chart(ctx)]
    if any(u.lost_fraction > 0 for u in ctx.updates):
        charts.append(underflow_chart(ctx))
    hot = ctx.hotspots()
    info = ReportInfo(title=f"ampdoctor compare: {ctx.policy.preset_name or ctx.policy} against {ctx.reference}",
                      policy=str(ctx.policy), policy_source="given", reference=ctx.reference,
                      loss_reference=losses["reference"], loss_policy=losses["policy"],
                      top_local_error=f"{hot[0].name or '<root>'} ({number(hot[0].local_error)})" if hot else None)
    return Report.of(findings, tables=(module_table(ctx), update_table(ctx)), checked=("model",), info=info, charts=tuple(charts))


def rope_view(result: "RopeReport") -> Report:
    """The RoPE report as a `Report`: one row per variant, error vs position, violation per position range."""
    ranges = [v.label for v in result.variants[0].violations] if result.variants else []
    columns = ("variant", "cos max error", "cos mean error", "logit max error", "logit mean error",
               *(f"violation max {r}" for r in ranges), "what it is")
    rows = tuple((v.name, number(v.cos_max_error), number(v.cos_mean_error), number(v.logit_max_error), number(v.logit_mean_error),
                  *(number(x.max) for x in v.violations), v.description) for v in result.variants)
    scaling = f", scaling {dict(result.scaling)}" if result.scaling else ""
    spec = f"head_dim {result.head_dim}, base {result.base:g}, positions 0..{result.max_position - 1}{scaling}"
    by_position = Chart("cos/sin error against float64 vs position", "line", tuple(
        Series(v.name, tuple(p for p, _ in v.by_position), _positive(e for _, e in v.by_position)) for v in result.variants),
        x_label="position", y_label="max |error| in bucket")
    violation = Chart("Relative-position violation by position range", "bar", tuple(
        Series(v.name, tuple(x.label for x in v.violations), _positive(x.max for x in v.violations)) for v in result.variants),
        x_label="position range", y_label="max |logit(q@P+r, k@P) - logit(q@r, k@0)|")
    info = ReportInfo(title=f"ampdoctor rope: {spec}", rope=spec)
    return Report(tables=(Table(f"RoPE variants against float64 ({spec})", columns, rows),), info=info, charts=(by_position, violation))

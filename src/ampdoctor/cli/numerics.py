"""Numerics against a float64 reference: `ampdoctor compare` (each module's error under a policy) and
`ampdoctor rope` (RoPE tables and logits of the common variants)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ampdoctor._requires import require_torch
from ampdoctor.cli.common import UsageError, add_output_options, emit, emit_document, load_factory, parse_policy
from ampdoctor.report import DOCUMENT, MEASUREMENTS, Report, ReportInfo, exit_code, formats, write_report


def add_compare(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="measure each module's error under a policy against a float64 reference")
    p.add_argument("factory", nargs="?", metavar="pkg.module:factory", help="a function returning (model, inputs)")
    p.add_argument("--hf-config", metavar="CONFIG_JSON", help="a transformers config.json (random weights)")
    p.add_argument("--policy", default="bf16-mixed", help="the precision policy to measure (default: bf16-mixed)")
    p.add_argument("--reference", choices=("fp64", "fp32"), default="fp64", help="the reference dtype (default: fp64)")
    p.add_argument("--seq-len", type=int, default=32, metavar="N", help="sequence length for --hf-config (default 32)")
    p.add_argument("--compiled", action="store_true",
                   help="also run each module compiled (torch.compile) and name those whose numbers differ from eager (slow)")
    p.add_argument("--fail-on", choices=("error", "warning", "info"), default="error", help="lowest severity that fails (default: error)")
    add_output_options(p, formats(MEASUREMENTS))
    p.set_defaults(func=_cmd_compare)


def _cmd_compare(args: argparse.Namespace) -> int:
    require_torch("ampdoctor compare")
    from ampdoctor.core import Severity
    from ampdoctor.numerics import compare

    policy = parse_policy(args.policy)
    if bool(args.factory) == bool(args.hf_config):
        raise UsageError("compare needs a model: pkg.module:factory or --hf-config config.json (one of them)")
    if args.hf_config:
        from ampdoctor.audit.hf import ConfigError
        from ampdoctor.numerics.hf import hf_model_and_inputs

        if args.seq_len < 1:
            raise UsageError("--seq-len must be at least 1")
        try:
            model, inputs = hf_model_and_inputs(args.hf_config, seq_len=args.seq_len)
        except ConfigError as exc:
            raise UsageError(str(exc)) from None
    else:
        model, inputs = load_factory(args.factory)
    try:
        result = compare(model, inputs, policy=policy, reference=args.reference, compiled=args.compiled)
    except Exception as exc:  # noqa: BLE001 - the model's step failed: a report that says so, exit 1 (as `run` does)
        report = Report(checked=("model",), info=ReportInfo(command="compare", policy=str(policy), policy_source="given", script_failed=True,
                                                          exception=f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"))
        emit(report, args)
        return exit_code(report, Severity.parse(args.fail_on), program_code=1)
    emit(result.report, args)
    return exit_code(result.report, Severity.parse(args.fail_on))


def add_rope(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("rope", help="RoPE table and logit error of the common variants against float64")
    p.add_argument("--head-dim", type=int, default=128, metavar="N", help="rotary dimension (default 128)")
    p.add_argument("--base", type=float, default=10000.0, help="RoPE base theta (default 10000)")
    p.add_argument("--max-position", type=int, default=4096, metavar="N", help="positions 0..N-1 (default 4096)")
    p.add_argument("--scaling", metavar="JSON", help='an HF rope_scaling dict, e.g. \'{"rope_type": "llama3", "factor": 8}\'')
    p.add_argument("--model", metavar="pkg.module:factory", help="also measure the rotary modules inside this model")
    p.add_argument("--html", metavar="FILE", help="also write the report as HTML to FILE")
    add_output_options(p, formats(DOCUMENT))
    p.set_defaults(func=_cmd_rope)


def _cmd_rope(args: argparse.Namespace) -> int:
    require_torch("ampdoctor rope")
    from ampdoctor.numerics.rope import rope_report
    from ampdoctor.numerics.views import rope_view
    from ampdoctor.report.html import render_html

    try:
        scaling = json.loads(args.scaling) if args.scaling else None
    except ValueError as exc:
        raise UsageError(f"--scaling: not JSON: {exc}") from None
    if scaling is not None and not isinstance(scaling, dict):
        raise UsageError("--scaling: expected a JSON object")
    model = load_factory(args.model)[0] if args.model else None
    try:
        result = rope_report(args.head_dim, args.base, args.max_position, scaling, model=model)  # type: ignore[arg-type]
    except (ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"rope: {exc}") from None
    report = rope_view(result).with_info(command="rope")
    if args.html:
        try:
            Path(args.html).write_text(render_html(report), encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot write {args.html}: {exc.strerror}") from None
    emit_document(args, result.to_dict, lambda stream: write_report(report, args.format, stream))
    return 0

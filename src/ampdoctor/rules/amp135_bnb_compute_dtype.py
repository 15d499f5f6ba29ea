"""AMP135 bnb-compute-dtype: bitsandbytes 4-bit layers compute in another dtype than the run.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP135`)."""

from __future__ import annotations

import ast
from typing import Iterator

from ampdoctor.core.engine import Places
from ampdoctor.core.registry import Hit, code_check, policy_check
from ampdoctor.dtypes import BF16, FP16, FP32, HALF
from ampdoctor.facts import RunFacts
from ampdoctor.lint.python.context import CodeHit, Context, assigned_name
from ampdoctor.lint.python.dataflow import describe
from ampdoctor.lint.python.resolve import keyword, last_identifier
from ampdoctor.policy import Policy


def consequence(compute: str, run: str) -> str:
    """What a 4-bit layer computing in `compute` does to activations of a run in `run`."""
    if compute == FP32:
        return "every 4-bit layer upcasts its half input to fp32 and dequantizes to fp32: slow, and no more accurate"
    if compute == FP16 and run == BF16:
        return "every 4-bit layer casts the bf16 activations to fp16, where values beyond 65504 overflow to inf"
    return f"every 4-bit layer rounds the {run} activations to {compute} and back"


@policy_check("AMP135")
def bnb_compute_dtype_config(policy: Policy | None, facts: RunFacts, at: Places) -> Iterator[Hit]:
    # bitsandbytes #650, #1515: a compute dtype that is not the run's dtype.
    compute = facts.quant_compute_dtype
    run = policy.compute if policy is not None and policy.compute in HALF else facts.model_dtype
    if compute is None or run not in HALF or compute == run:
        return
    here = at("quant_compute_dtype")
    yield Hit(f"bnb_4bit_compute_dtype is {compute} in a {run} run: {consequence(compute, run)}", here,
              related=at.others(here, "compute", "model_dtype"))


def _run_dtype(ctx: Context, config: ast.Call) -> tuple[frozenset | None, ast.AST | None]:
    """The dtype the quantized model runs in: `torch_dtype=`/`dtype=` of the call loading it with this config, else the
    one half mode turned on in the same scope (``TrainingArguments(bf16=True)``). Failing both, a `from_pretrained` here
    that names no dtype answers (None, that call): the file loads the model itself, in the loader's default
    (transformers' 4-bit quantizer fills a missing torch_dtype with fp16), so no other file's training precision is
    this model's."""
    name = assigned_name(ctx, config)
    scope = ctx.src.scope(config)
    calls = [c for c in ctx.src.calls if ctx.src.scope(c) is scope]  # a name like `bnb_config` means another object elsewhere
    loaded_here = None
    for call in calls:
        given = keyword(call, "quantization_config")
        if given is config or (name is not None and given is not None and last_identifier(given) == name):
            dtype = keyword(call, "torch_dtype") or keyword(call, "dtype")
            found = ctx.flow.dtype_of(dtype, ctx.src.scope(call)) if dtype is not None else None
            if found:
                return found, dtype
            if dtype is None and last_identifier(call.func) == "from_pretrained":
                loaded_here = call
    modes = {(kw.arg, call) for call in calls for kw in call.keywords
             if kw.arg in ("bf16", "fp16") and isinstance(kw.value, ast.Constant) and kw.value.value is True}
    if len({mode for mode, _ in modes}) == 1:
        mode, call = modes.pop()
        return frozenset({mode}), call
    return None, loaded_here


def _written_out(ctx: Context, given: ast.AST) -> bool:
    """Is the compute dtype written in the call itself (``torch.float16``, ``"float16"``), not read from an object
    that other code fills (``model_args.compute_dtype``, assigned fp16 in an unrelated branch)?"""
    return ctx.qualname(given) in ("torch.float16", "torch.half") or isinstance(given, ast.Constant)


def _project_run(ctx: Context) -> tuple[frozenset | None, str]:
    """The project's training precision, where the file fixes none: bf16 when every training config of the project
    (and every training context that reaches this file) trains in bf16 and none in fp16."""
    project = ctx.project
    if project.trains_bf16 is not None and project.precisions == frozenset({BF16}):
        return frozenset({BF16}), project.trains_bf16.describe()
    return None, ""


@code_check("AMP135", triggers=("BitsAndBytesConfig",), also=(("load_in_4bit", "bnb_4bit_compute_dtype"),), project=True)
def bnb_compute_dtype_code(ctx: Context) -> Iterator[CodeHit]:
    for call in ctx.src.calls:
        if last_identifier(call.func) != "BitsAndBytesConfig":
            continue
        given = keyword(call, "bnb_4bit_compute_dtype")
        if given is None:
            continue  # the default (fp32) is left to the runtime warning: the model's own dtype is often set elsewhere
        compute = ctx.flow.dtype_of(given, ctx.src.scope(call))
        run, where = _run_dtype(ctx, call)
        said = f"line {where.lineno}" if where is not None else ""
        if not run and where is None and compute == frozenset({FP16}) and _written_out(ctx, given):
            # alignment-handbook PR #107: `bnb_4bit_compute_dtype=torch.float16` written as a constant in a helper,
            # while every recipe of the project trains in bf16. Only a hard-coded fp16 is judged so: an fp32 compute
            # dtype is slow, not wrong, and a project that also trains in fp16 may mean it. A file that loads the model
            # itself (`where`, a from_pretrained with no dtype) has decided its dtype: the project's runs are not it.
            run, said = _project_run(ctx)
        if not compute or not run or len(compute) != 1 or len(run) != 1 or not run <= HALF or compute == run:
            continue
        (c,), (r,) = compute, run
        yield given, (f"bnb_4bit_compute_dtype is {describe(compute)} but the model runs in {describe(run)} ({said}): "
                      f"{consequence(c, r)}; pass the model's dtype")

"""AMP129 bf16-to-numpy: A bf16 tensor is passed to NumPy, which has no bfloat16 dtype.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP129`)."""

from __future__ import annotations

import ast
from typing import Iterator

from ampdoctor.core.registry import code_check
from ampdoctor.lint.python.context import CodeHit, Context
from ampdoctor.lint.python.dataflow import describe
from ampdoctor.lint.python.resolve import last_identifier


@code_check("AMP129", triggers=("numpy", "np."), also=(("bfloat16", "bf16"),))
def bf16_to_numpy(ctx: Context) -> Iterator[CodeHit]:
    # pytorch #110285: NumPy has no bfloat16; `.numpy()` raises "Got unsupported ScalarType BFloat16".
    for call in ctx.src.calls:
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr == "numpy" and not call.args and ctx.qualname(func) is None:
            tensor = func.value
        elif (ctx.qualname(func) or "").split(".")[0] == "numpy" and last_identifier(func) in ("asarray", "array") and call.args:
            tensor = call.args[0]
        else:
            continue
        dtypes = ctx.flow.tensor_dtype(tensor, ctx.src.scope(call))
        if dtypes and "bf16" in dtypes and not ctx.facts.expects_error(call):  # a test that the crash happens
            yield call, f"`{ast.unparse(tensor)[:50]}` is {describe(dtypes)} and NumPy has no bfloat16; call `.float()` first"


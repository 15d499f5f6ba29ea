"""AMP204 low-precision-sensitive-op: A numerically sensitive op (softmax, norm, exp/log, cumsum, sum, trig) runs in half precision.

Every detector of this rule; its documentation is the catalog entry (`ampdoctor rules AMP204`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

from ampdoctor.audit.evidence import Phase
from ampdoctor.core.registry import Hit, runtime_check
from ampdoctor.dtypes import name_of

if TYPE_CHECKING:
    from ampdoctor.audit.analysis import RuntimeContext



# Ops autocast runs in fp32 on each device type (the names autocast registers, as they reach the dispatcher after
# decomposition). CUDA's list is torch's AT_FORALL_FP32; CPU's is much shorter: softmax, layer_norm, exp... stay in
# bf16 under CPU autocast.
_COMMON_FP32 = {
    "nll_loss", "nll_loss2d", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "kl_div", "binary_cross_entropy",
    "binary_cross_entropy_with_logits", "poisson_nll_loss", "cosine_embedding_loss", "hinge_embedding_loss",
    "margin_ranking_loss", "multilabel_margin_loss", "soft_margin_loss", "triplet_margin_loss", "multi_margin_loss",
    "prod", "cdist",
}
AUTOCAST_FP32 = {
    "cpu": frozenset(_COMMON_FP32),
    "cuda": frozenset(_COMMON_FP32 | {
        "acos", "asin", "cosh", "sinh", "tan", "erfinv", "exp", "expm1", "log", "log10", "log2", "log1p", "reciprocal",
        "rsqrt", "pow", "softplus", "layer_norm", "rms_norm", "group_norm", "frobenius_norm", "nuclear_norm",
        "cosine_similarity", "dist", "pdist", "renorm", "logsumexp", "softmax", "log_softmax", "cumprod", "cumsum",
        "sum", "linalg_vector_norm", "linalg_matrix_norm",
    }),
}
# Ops given a dtype to compute in (autocast's `fp32_set_opt_dtype` list): one with a half input and an fp32 result ran in fp32.
_TAKE_DTYPE = frozenset({"softmax", "log_softmax", "cumprod", "cumsum", "sum", "prod", "linalg_vector_norm", "linalg_matrix_norm"})
_DISPATCH_ALIASES = {
    "_softmax": "softmax", "_log_softmax": "log_softmax", "native_layer_norm": "layer_norm", "native_group_norm": "group_norm",
    "_fused_rms_norm": "rms_norm", "nll_loss_forward": "nll_loss", "nll_loss2d_forward": "nll_loss2d",
}


def autocast_op(name: str) -> str:
    """The autocast name of a dispatched op (`aten::_softmax` -> `softmax`)."""
    short = name.split("::", 1)[-1]
    return _DISPATCH_ALIASES.get(short, short)


@runtime_check("AMP204")
def sensitive_ops_in_half(ctx: RuntimeContext) -> Iterator[Hit]:
    device = ctx.device if ctx.device in AUTOCAST_FP32 else "cuda"
    fp32_ops = AUTOCAST_FP32[device]
    t = ctx.trace
    hits = []
    # the kinds of op autocast runs in fp32 (asked once per kind of op, not per op)
    for op in t.ops_named(lambda name: autocast_op(name) in fp32_ops, Phase.FORWARD):
        if op.out_dtypes is None:
            continue
        if op.seq == ctx.loss_log_probs:
            continue  # the loss's log-probabilities: AMP125's
        ins = t.float_inputs(op.seq)
        # A half input with an fp32 result of an op that takes a dtype was computed in fp32: `x.sum(dtype=torch.float32)`,
        # and CUDA's softmax and log_softmax given one (autocast's own way of keeping them fp32) read half and
        # accumulate in fp32. Other ops (`torch.exp(x, out=fp32_buffer)`) compute in half and cast.
        if ins and ins[0][0] in ctx.HALF and (autocast_op(t.op(op.seq)) not in _TAKE_DTYPE or any(d in ctx.HALF for d in op.out_dtypes)):
            hits.append(op.seq)
    for _, seqs in ctx.grouped(hits, lambda s: (t.op_at(s).module, t.op(s))).items():
        first = seqs[0]
        op = t.op(first)
        yield Hit(f"{op} runs in {name_of(t.float_inputs(first)[0][0])} ({len(seqs)} call{'s' if len(seqs) > 1 else ''}); "
                  f"{device.upper()} autocast would run {autocast_op(op)} in fp32",
                  t.location(first), details={"device_type": device, "calls": len(seqs)})

"""The audit's checks: each reads the finished `Trace` and returns findings for one catalog rule."""

from __future__ import annotations

import re
import traceback
from collections import Counter, defaultdict
from types import TracebackType
from typing import Any, Iterable

import torch

from ampdoctor.audit.provenance import FLOATS, HALF, TABLE_NAME, Trace, dtypes_text
from ampdoctor.audit.recorder import AUTOCAST, BACKWARD, EXTRA, FORWARD, FUNC, IN_DT, IN_PROD, INNER, MOD, OPTIMIZER, OUT_DT, PHASE
from ampdoctor.audit.watch import MATMUL_OPS, matmul_flops
from ampdoctor.explain import explain_findings
from ampdoctor.policy import Policy, dtype_name, is_half
from ampdoctor.report import Report, Table
from ampdoctor.rules import Finding, Location, Severity, finding

# Ops autocast runs in fp32 on each device type (the names autocast registers, as they reach the
# dispatcher after decomposition). CUDA's list is torch's AT_FORALL_FP32; CPU's is much shorter:
# softmax, layer_norm, exp... stay in bf16 under CPU autocast.
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
_DISPATCH_ALIASES = {
    "_softmax": "softmax", "_log_softmax": "log_softmax", "native_layer_norm": "layer_norm", "native_group_norm": "group_norm",
    "_fused_rms_norm": "rms_norm", "nll_loss_forward": "nll_loss", "nll_loss2d_forward": "nll_loss2d",
}
_REDUCING_COLLECTIVES = re.compile(r"c10d::(allreduce|all_reduce|reduce_scatter|reduce)")
_SDPA = re.compile(r"aten::_?scaled_dot_product")
FP32_MATMUL_SHARE = 0.01
ROUNDED_UPDATE_SHARE = 0.01


def autocast_op(name: str) -> str:
    short = name.split("::", 1)[-1]
    return _DISPATCH_ALIASES.get(short, short)


class Checks:
    def __init__(self, trace: Trace, policy: Policy, target_device: str) -> None:
        self.t = trace
        self.policy = policy
        self.device = target_device if target_device in AUTOCAST_FP32 else "cuda"
        self.records = trace.records
        self.half_compute = is_half(policy.compute)
        self.tainted_failure: set[int] = set()

    # --- helpers ----------------------------------------------------------------------------------

    def _grouped(self, seqs: Iterable[int], key: Any) -> dict[Any, list[int]]:
        groups: dict[Any, list[int]] = defaultdict(list)
        for s in seqs:
            groups[key(s)].append(s)
        return groups

    def _made_in(self, seq: int, dtype: Any) -> list[Location]:
        out = []
        for d, p in self.t.float_inputs(seq):
            if d == dtype:
                out.append(self.t.location(self.t.source(p), f"{dtype_name(d)} operand made here") if p >= 0 else self.t.leaf_location(-p, d))
        return out

    # --- implicit-dtype-promotion ----------------------------------------------------------------

    def promotion_taint(self) -> dict[int, int]:
        """seq -> the promotion it descends from, following the promoted (wide) dtype forward."""
        taint: dict[int, int] = {}
        for r in self.records:
            s = r[0]
            if r[OUT_DT] is None and r[PHASE] != FORWARD:
                continue
            if r[PHASE] == FORWARD and self.t.is_promotion(s):
                taint[s] = s
                continue
            for d, p in zip(r[IN_DT], r[IN_PROD]):
                if p is not None and p >= 0 and p in taint and d not in HALF:
                    taint[s] = taint[p]
                    break
        return taint

    def promotions(self, failure_seq: int | None) -> list[Finding]:
        if not self.half_compute:
            return []
        taint = self.promotion_taint()
        flagged: dict[int, str] = {}
        for r in self.records:
            s = r[0]
            if r[PHASE] != FORWARD or taint.get(s) != s:
                continue
            if not r[AUTOCAST]:
                flagged[s] = "outside autocast, so nothing casts it back to the compute dtype"
        for r in self.records:
            s = r[0]
            src = next((taint[p] for p in r[IN_PROD] if p is not None and p >= 0 and p in taint), None)
            if src is None:
                continue
            if s == failure_seq:
                flagged.setdefault(src, f"the promoted tensor reaches the failing {self.t.op(s)}")
                self.tainted_failure.add(src)
            elif r[FUNC] in MATMUL_OPS and r[OUT_DT] and r[OUT_DT][0] == torch.float32 and r[PHASE] == FORWARD:
                flagged.setdefault(src, f"the promoted tensor feeds an fp32 {self.t.op(s)}")
        out = []
        groups = self._grouped(flagged, lambda s: (self.records[s][MOD], self.t.op(s), self.records[s][IN_DT]))
        for (mod, op, _), seqs in groups.items():
            first = seqs[0]
            ins = self.t.float_inputs(first)
            wide = self.t.out_dtype(first)
            half = next(d for d, _ in ins if d in HALF)
            made = self._made_in(first, wide)
            where = "; ".join(f"{dtype_name(wide)} operand from {self.t.describe(p, d)}" for d, p in ins if d == wide)
            out.append(finding(
                "implicit-dtype-promotion",
                f"{op} mixes {dtypes_text(sorted({d for d, _ in ins}, key=str))} and returns {dtype_name(wide)} under compute={dtype_name(self.policy.compute)}: "
                f"{flagged[first]} ({where}; {len(seqs)} call{'s' if len(seqs) > 1 else ''})",
                self.t.location(first),
                related=made,
                details={"calls": len(seqs), "output": dtype_name(wide), "half": dtype_name(half)},
            ))
        return out

    # --- rope -------------------------------------------------------------------------------------

    def rope_mismatch(self) -> list[Finding]:
        hits = []
        for r in self.records:
            s = r[0]
            if r[PHASE] != FORWARD or r[OUT_DT] is None:
                continue
            ins = self.t.float_inputs(s)
            if len({d for d, _ in ins}) < 2:
                continue
            trig = [(d, p) for d, p in ins if self.t.is_trig(p)]
            other = [(d, p) for d, p in ins if not self.t.is_trig(p)]
            if not trig or not other or {d for d, _ in trig} == {d for d, _ in other}:
                continue
            table_half_x_wide = any(d in HALF for d, _ in trig) and any(d not in HALF for d, _ in other)
            if r[AUTOCAST] and not table_half_x_wide:
                continue  # under autocast an fp32 table against bf16 q/k is promotion autocast undoes later
            hits.append(s)
        out = []
        for (mod, op), seqs in self._grouped(hits, lambda s: (self.records[s][MOD], self.t.op(s))).items():
            first = seqs[0]
            ins = self.t.float_inputs(first)
            x = next((d, p) for d, p in ins if not self.t.is_trig(p))
            c = next((d, p) for d, p in ins if self.t.is_trig(p))
            out.append(finding(
                "rope-dtype-mismatch",
                f"{op} applies a {dtype_name(c[0])} cos/sin table ({self.t.describe(c[1], c[0])}) to a {dtype_name(x[0])} input "
                f"({self.t.describe(x[1], x[0])}); the result is {dtype_name(self.t.out_dtype(first))}",
                self.t.location(first),
                origin=self.t.location(self.t.source(c[1])) if c[1] >= 0 else self.t.leaf_location(-c[1], c[0]),
                severity=Severity.WARNING,
                details={"calls": len(seqs), "x": dtype_name(x[0]), "table": dtype_name(c[0])},
            ))
        return out

    def rope_cache(self) -> list[Finding]:
        out = []
        seen: set[tuple[int, str]] = set()
        for idx, name, dtype, shape, when, ref in self.t.rec.module_scans:
            if dtype not in HALF or (idx, name) in seen or not TABLE_NAME.search(name):
                continue
            seen.add((idx, name))
            mod = self.t.module(idx)
            full = f"{mod}.{name}" if mod else name
            out.append(finding(
                "rope-cache-low-precision",
                f"rotary table {full} {list(shape)} is {dtype_name(dtype)} ({when} the step): positions and angles lose precision; keep it fp32",
                Location(module=mod, label=name),
                details={"tensor": full, "dtype": dtype_name(dtype), "seen": when},
            ))
        angles = [r[0] for r in self.records if r[EXTRA] and r[EXTRA][0] == "angle" and r[EXTRA][1] > 256]
        for (mod, op), seqs in self._grouped(angles, lambda s: (self.records[s][MOD], self.t.op(s))).items():
            first = seqs[0]
            top = max(self.records[s][EXTRA][1] for s in seqs)
            out.append(finding(
                "rope-cache-low-precision",
                f"{op} computes a rotary table in {dtype_name(self.records[first][IN_DT][0])} from angles up to {top:g}, beyond exact half precision",
                self.t.location(first),
                details={"max_angle": top},
            ))
        return out

    def positions(self) -> list[Finding]:
        hits = [r[0] for r in self.records if r[EXTRA] and r[EXTRA][0] == "positions"]
        out = []
        for (mod, line), seqs in self._grouped(hits, lambda s: (self.records[s][MOD], self.t.line(s))).items():
            first = seqs[0]
            _, top, kind = self.records[first][EXTRA]
            dt = self.t.out_dtype(first)
            out.append(finding(
                "low-precision-positions",
                f"integer values up to {top:g} {'created by arange' if kind == 'arange' else 'cast'} in {dtype_name(dt)}, which is exact only up to "
                f"{256 if dt == torch.bfloat16 else 2048}: neighbouring positions collapse",
                self.t.location(first),
                details={"max": top, "dtype": dtype_name(dt)},
            ))
        return out

    # --- scaler, grads, optimizer, loss -----------------------------------------------------------

    def grad_scaler(self) -> list[Finding]:
        hits = [r[0] for r in self.records if self.t.op(r[0]) in ("aten::_amp_foreach_non_finite_check_and_unscale_", "aten::_amp_update_scale_")]
        if not hits:
            return []
        grads = {d for s in hits for d, _ in self.t.float_inputs(s) if d in HALF}
        bf16 = torch.bfloat16 in grads or self.policy.compute == torch.bfloat16 or torch.bfloat16 in self.t.rec.autocast_dtypes
        if not bf16:
            return []
        first = hits[0]
        why = []
        if torch.bfloat16 in grads:
            why.append("it unscales bf16 gradients")
        if torch.bfloat16 in self.t.rec.autocast_dtypes:
            why.append("autocast computes in bf16")
        elif self.policy.compute == torch.bfloat16:
            why.append("the policy computes in bf16")
        return [finding(
            "grad-scaler-with-bf16",
            f"GradScaler is active although {' and '.join(why)}: bf16 has fp32's range and needs no loss scaling; "
            "on CUDA unscale_ raises '_amp_foreach_non_finite_check_and_unscale_cuda not implemented for BFloat16' (on CPU it runs silently)",
            self.t.location(first),
            details={"ops": len(hits)},
        )]

    def grads(self) -> list[Finding]:
        out = []
        bad: dict[int, tuple] = {}
        for when, passes, pid, gdt, pdt in self.t.rec.grad_events:
            if gdt != pdt and pid not in bad:
                bad[pid] = (when, passes, gdt, pdt)
        accum = defaultdict(list)
        for r in self.records:
            ex = r[EXTRA]
            if r[PHASE] == BACKWARD and ex and ex[0] == "accumulate":
                dts = {d for d, p in zip(r[IN_DT], r[IN_PROD]) if p is not None}
                if len(dts) > 1:
                    accum[ex[1]].append(r[0])
        pids = list(dict.fromkeys(list(bad) + list(accum)))
        if pids:
            names = [self.t.param_name(p) for p in pids]
            pid = pids[0]
            if pid in bad:
                when, passes, gdt, pdt = bad[pid]
            else:
                s = accum[pid][0]
                pdt, gdt = self.records[s][IN_DT][0], next(d for d in self.records[s][IN_DT] if d != self.records[s][IN_DT][0])
                when = "backward"
            acc_text = ""
            if accum:
                s = next(iter(accum.values()))[0]
                acc_text = f"; backward then accumulated {dtypes_text(sorted(set(self.records[s][IN_DT]), key=str))} gradients into it"
            cast = self._grad_cast(gdt)
            out.append(finding(
                "grad-dtype-mismatch",
                f"{len(names)} parameter(s) hold a {dtype_name(gdt)} .grad for a {dtype_name(pdt)} parameter ({when}){acc_text}: "
                f"{', '.join(names[:4])}{' ...' if len(names) > 4 else ''}",
                cast or Location(module=names[0].rpartition('.')[0], label=names[0].rpartition('.')[2], phase=OPTIMIZER),
                related=[Location(module=n.rpartition('.')[0], label=n.rpartition('.')[2]) for n in names[:4]] if cast else [],
                details={"params": names, "grad": dtype_name(gdt), "param": dtype_name(pdt), "accumulated": bool(accum)},
            ))
        for ev in self.t.rec.opt_events:
            if ev["backward_passes"] > 1:
                half = sorted({dtype_name(g) for w, _, _, g, _ in self.t.rec.grad_events if w == "optimizer step" and g in HALF})
                if half:
                    file, line = ev["frame"][0].co_filename if ev["frame"][0] else None, ev["frame"][1]
                    out.append(finding(
                        "bf16-grad-accumulation",
                        f"{ev['backward_passes']} backward passes were accumulated into {'/'.join(half)} .grad before {ev['optimizer']}.step()",
                        Location(file=file, line=line or None, phase=OPTIMIZER),
                        details={"micro_batches": ev["backward_passes"]},
                    ))
                    break
        return out

    def _grad_cast(self, dtype: Any) -> Location | None:
        """The user's own cast of a gradient (incident 3: `param.grad.data = param.grad.data.to(fp32)`)."""
        for r in self.records:
            if r[PHASE] == OPTIMIZER and self.t.op(r[0]) == "aten::_to_copy" and r[OUT_DT] and r[OUT_DT][0] == dtype and r[IN_DT][0] != dtype:
                return self.t.location(r[0], "a .grad is cast here")
        return None

    def optimizer(self) -> list[Finding]:
        out = []
        for ev in self.t.rec.opt_events:
            file = ev["frame"][0].co_filename if ev["frame"][0] else None
            where = Location(file=file, line=ev["frame"][1] or None, phase=OPTIMIZER, op=f"{ev['optimizer']}.step")
            if ev["considered"]:
                share = ev["unchanged"] / ev["considered"]
                if share >= ROUNDED_UPDATE_SHARE:
                    out.append(finding(
                        "pure-bf16-optimizer",
                        f"{share:.1%} of the half-precision parameter elements with a non-zero gradient did not change in {ev['optimizer']}.step(): "
                        "their update was below half an ulp and rounded away",
                        where,
                        details={"unchanged_fraction": round(share, 4), "sampled_elements": ev["considered"]},
                    ))
            low = sorted({(k, dtype_name(d)) for (k, d) in ev["state_dtypes"] if d in HALF})
            if low:
                out.append(finding(
                    "low-precision-optimizer-state",
                    f"{ev['optimizer']} keeps its state in half precision: {', '.join(f'{k}={d}' for k, d in low)}",
                    where,
                    details={"state": [f"{k}={d}" for k, d in low]},
                ))
            break
        return out

    def master_weights(self) -> list[Finding]:
        if not self.t.rec.autocast_dtypes & set(HALF):
            return []
        trainable = [ref() for ref in self.t.rec.params.values()]
        trainable = [p for p in trainable if p is not None and p.requires_grad]
        if trainable and all(p.dtype in HALF for p in trainable):
            return [finding(
                "mixed-precision-without-master-weights",
                f"autocast is on but all {len(trainable)} trainable parameters are already {dtype_name(trainable[0].dtype)}: there is no fp32 master copy",
                Location(module="", phase=FORWARD),
            )]
        return []

    def params_vs_policy(self) -> list[Finding]:
        params = [ref() for ref in self.t.rec.params.values()]
        params = [p for p in params if p is not None and p.requires_grad and p.dtype in FLOATS]
        off = Counter(p.dtype for p in params if p.dtype != self.policy.params)
        if not off:
            return []
        dt, n = off.most_common(1)[0]
        return [finding(
            "precision-config-mismatch",
            f"the policy says params={dtype_name(self.policy.params)} but {n} of {len(params)} trainable parameters are {dtype_name(dt)}",
            Location(module="", label=f"policy {self.policy}"),
            severity=Severity.WARNING,
            details={"policy_params": dtype_name(self.policy.params), "found": {dtype_name(k): v for k, v in off.items()}},
        )]

    def loss(self) -> list[Finding]:
        out = []
        for r in self.records:
            ex = r[EXTRA]
            if not (ex and ex[0] == "loss"):
                continue
            prod, dtype = ex[1], ex[2]
            real = prod
            while real is not None and real >= 0 and self.t.op(real) in ("aten::_to_copy", "aten::view", "aten::squeeze", "aten::clone", "aten::detach"):
                real = next((p for p in self.records[real][IN_PROD] if p is not None), None)
            real_dt = self.t.out_dtype(real) if real is not None and real >= 0 else dtype
            if dtype in HALF or real_dt in HALF:
                loc = self.t.location(real if real is not None and real >= 0 else r[0])
                out.append(finding(
                    "loss-low-precision",
                    f"the loss is computed in {dtype_name(real_dt)} by {self.t.op(real) if real is not None and real >= 0 else 'an op outside the audit'}"
                    + (f" (then cast to {dtype_name(dtype)})" if dtype != real_dt else "")
                    + ": its value and gradient are quantized",
                    loc,
                ))
            break
        return out

    # --- matmuls, sensitive ops, collectives, mixed halves, masks ---------------------------------

    def fp32_matmuls(self) -> list[Finding]:
        if not self.half_compute:
            return []
        matmuls = [r for r in self.records if r[EXTRA] and r[EXTRA][0] == "flops" and r[OUT_DT]]
        if not any(r[OUT_DT][0] == torch.float32 for r in matmuls):
            return []
        total = 0
        per: dict[Any, list] = defaultdict(lambda: [0, None])
        for r in matmuls:
            n = matmul_flops(r[EXTRA])
            total += n
            if r[OUT_DT][0] == torch.float32:
                entry = per[(r[MOD], r[PHASE])]
                entry[0] += n
                entry[1] = entry[1] if entry[1] is not None else r[0]
        out = []
        if not total:
            return out
        for (mod, phase), (flops, first) in sorted(per.items(), key=lambda kv: -kv[1][0]):
            share = flops / total
            if share >= FP32_MATMUL_SHARE:
                out.append(finding(
                    "fp32-matmul-in-bf16-policy",
                    f"{share:.1%} of the step's matmul FLOPs ({flops:.3g}) run in fp32 here under compute={dtype_name(self.policy.compute)}",
                    self.t.location(first),
                    details={"fp32_flops": flops, "share": round(share, 4), "total_flops": total},
                ))
        return out

    def sensitive_ops(self) -> list[Finding]:
        fp32_ops = AUTOCAST_FP32[self.device]
        hits = []
        for r in self.records:
            if r[PHASE] != FORWARD or r[OUT_DT] is None:
                continue
            ins = self.t.float_inputs(r[0])
            if ins and ins[0][0] in HALF and autocast_op(self.t.op(r[0])) in fp32_ops:
                hits.append(r[0])
        out = []
        for (mod, op), seqs in self._grouped(hits, lambda s: (self.records[s][MOD], self.t.op(s))).items():
            first = seqs[0]
            out.append(finding(
                "low-precision-sensitive-op",
                f"{op} runs in {dtype_name(self.t.float_inputs(first)[0][0])} ({len(seqs)} call{'s' if len(seqs) > 1 else ''}); "
                f"{self.device.upper()} autocast would run {autocast_op(op)} in fp32",
                self.t.location(first),
                details={"device_type": self.device, "calls": len(seqs)},
            ))
        return out

    def collectives(self) -> list[Finding]:
        out = []
        seen = set()
        for r in self.records:
            name = self.t.op(r[0])
            if not _REDUCING_COLLECTIVES.match(name):
                continue
            dts = {d for d, p in zip(r[IN_DT], r[IN_PROD]) if p is not None}
            wrong = sorted((d for d in dts if d != self.policy.reduce), key=str)
            if wrong and (name, tuple(wrong)) not in seen:
                seen.add((name, tuple(wrong)))
                out.append(finding(
                    "collective-dtype-mismatch",
                    f"{name} reduces {dtypes_text(wrong)} tensors but the policy's reduce dtype is {dtype_name(self.policy.reduce)}",
                    self.t.location(r[0]),
                ))
        return out

    def mixed_halves(self) -> list[Finding]:
        for r in self.records:
            dts = {d for d, p in zip(r[IN_DT], r[IN_PROD]) if p is not None}
            if torch.bfloat16 in dts and torch.float16 in dts:
                return [finding("mixed-half-dtypes", f"{self.t.op(r[0])} receives both bf16 and fp16 tensors", self.t.location(r[0]))]
        return []

    def attn_masks(self) -> list[Finding]:
        for r in self.records:
            if r[PHASE] != FORWARD or not _SDPA.match(self.t.op(r[0])):
                continue
            fl = [d for d, p in zip(r[IN_DT], r[IN_PROD]) if p is not None]
            if len(fl) >= 4 and fl[3] != fl[0]:
                return [finding("attn-mask-dtype-mismatch", f"{self.t.op(r[0])} gets a {dtype_name(fl[3])} attention mask for {dtype_name(fl[0])} queries", self.t.location(r[0]))]
        return []

    def run(self, failure_seq: int | None) -> list[Finding]:
        out: list[Finding] = []
        for check in (
            lambda: self.promotions(failure_seq), self.rope_mismatch, self.rope_cache, self.positions, self.grad_scaler, self.grads,
            self.optimizer, self.master_weights, self.params_vs_policy, self.loss, self.fp32_matmuls, self.sensitive_ops,
            self.collectives, self.mixed_halves, self.attn_masks,
        ):
            out.extend(check())
        return out


# --- failures -------------------------------------------------------------------------------------


def failure_findings(trace: Trace, policy: Policy, exc: BaseException) -> list[Finding]:
    """The failing op (or the Python frame that raised) with the provenance chain to its origin,
    then `explain` on the exception text for the rules the chain did not report."""
    rec = trace.rec
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    out: list[Finding] = []
    failure = rec.failure
    where: Location | None = None
    if failure is not None and _same_exception(failure.exc, exc):
        s = failure.seq
        where = trace.location(s)
        ins = trace.float_inputs(s)
        out.extend(_chain_finding(trace, policy, ins, where, f"{trace.op(s)} failed on {dtypes_text(d for d, _ in ins)} inputs"))
    else:
        boundary = _boundary(trace, exc)
        if boundary is not None:
            where, tensors = boundary
            ins = [(t.dtype, trace.rec.producer_of(t) if trace.rec.producer_of(t) >= 0 else -id(t)) for _, t in tensors]
            names = ", ".join(f"{n}={dtype_name(t.dtype)}" for n, t in tensors)
            out.extend(_chain_finding(trace, policy, ins, where, f"{where.op} raised {type(exc).__name__} with tensor arguments {names}"))
    # explain's candidates for a rule the chain already reported would repeat it without the chain.
    chained = {f.rule_id for f in out}
    out.extend(f for f in explain_findings(text, location=where) if f.rule_id not in chained)
    return out


def _same_exception(recorded: BaseException, raised: BaseException) -> bool:
    e: BaseException | None = raised
    for _ in range(8):
        if e is None:
            return False
        if e is recorded:
            return True
        e = e.__cause__ or e.__context__
    return False


def _boundary(trace: Trace, exc: BaseException) -> tuple[Location, list[tuple[str, torch.Tensor]]] | None:
    """A Python-level failure (a kernel wrapper's assert): the innermost user frame's tensor arguments."""
    tb: TracebackType | None = exc.__traceback__
    frames = []
    while tb is not None:
        frames.append(tb)
        tb = tb.tb_next
    for tb in reversed(frames[-3:]):
        frame = tb.tb_frame
        tensors = [(k, v) for k, v in frame.f_locals.items() if isinstance(v, torch.Tensor) and v.dtype in FLOATS]
        if len({t.dtype for _, t in tensors}) > 1:
            module = None
            for outer in reversed(frames):
                m = outer.tb_frame.f_locals.get("self")
                if isinstance(m, torch.nn.Module):
                    idx = trace.rec._module_index.get(id(m))
                    module = trace.module(idx) if idx is not None else None
                    break
            code = frame.f_code
            from ampdoctor.audit.provenance import _relpath

            return Location(file=_relpath(code.co_filename), line=tb.tb_lineno, module=module, op=f"{code.co_name}()", phase=FORWARD), tensors
    return None


def _chain_finding(trace: Trace, policy: Policy, ins: list[tuple[Any, int]], where: Location, head: str) -> list[Finding]:
    dts = {d for d, _ in ins}
    if len(dts) < 2:
        return []
    trig = [(d, p) for d, p in ins if trace.is_trig(p)]
    other = [(d, p) for d, p in ins if not trace.is_trig(p)]
    compute = policy.compute
    if trig and other and {d for d, _ in trig} != {d for d, _ in other}:
        tdt, tp = trig[0]
        xdt, xp = other[0]
        related = [trace.location(trace.source(xp), f"{dtype_name(xdt)} input made here") if xp >= 0 else trace.leaf_location(-xp, xdt)]
        if tdt in HALF:
            origin_seq, operands = trace.table_origin(tp)
            why = f"the cos/sin table is {dtype_name(tdt)} while the input is {dtype_name(xdt)}; the table was made in {dtype_name(tdt)}"
        else:
            origin_seq, operands = trace.divergence([xp], xdt, tdt)
            why = f"the input is {dtype_name(xdt)} while the cos/sin table is {dtype_name(tdt)}"
        origin = trace.location(origin_seq, "origin") if origin_seq is not None else (trace.location(tp) if tp >= 0 else trace.leaf_location(-tp, tdt))
        related += [trace.location(trace.source(p)) if p >= 0 else trace.leaf_location(-p, d) for p, d in operands]
        if tp >= 0:
            related.append(trace.location(trace.source(tp), "cos/sin table made here"))
        return [finding("rope-dtype-mismatch", f"{head}: {why} (origin {origin.op} in {origin.module or '<no module>'})", where,
                        origin=origin, related=related, severity=Severity.ERROR,
                        details={"input": dtype_name(xdt), "table": dtype_name(tdt)})]
    odd_candidates = [d for d in dts if d != compute] or sorted(dts, key=str)
    odd = odd_candidates[0]
    origin_seq, operands = trace.divergence([p for d, p in ins if d == odd], odd, compute if compute in dts else next(d for d in dts if d != odd))
    if origin_seq is None:
        leaf = next((p for d, p in ins if d == odd and p < 0), None)
        origin = trace.leaf_location(-leaf, odd) if leaf is not None else None
        related: list[Location] = []
        chain = f"the {dtype_name(odd)} operand is {trace.describe(leaf, odd)}" if leaf is not None else ""
    else:
        origin = trace.location(origin_seq, "origin")
        related = [trace.location(trace.source(p), f"{dtype_name(d)} operand made here") if p >= 0 else trace.leaf_location(-p, d) for p, d in operands]
        made = "; ".join(f"its {dtype_name(d)} operand is {trace.describe(p, d)}" for p, d in operands)
        kind = "cast" if trace.op(origin_seq) == "aten::_to_copy" else "promotion"
        chain = (f"the {dtype_name(odd)} operand descends from a {kind} at {trace.op(origin_seq)} in {origin.module or '<no module>'}, "
                 f"where a {dtype_name(compute)} activation became {dtype_name(odd)}" + (f" ({made})" if made else ""))
    rule = "implicit-dtype-promotion"
    return [finding(rule, f"{head}: {chain}", where, origin=origin, related=related, severity=Severity.ERROR,
                    details={"odd_dtype": dtype_name(odd), "compute": dtype_name(compute)})]


# --- the module table -----------------------------------------------------------------------------


def module_table(trace: Trace) -> Table:
    rec = trace.rec
    ops: dict[int, Counter] = defaultdict(Counter)
    casts: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    records = trace.records
    n = len(records)
    for i, r in enumerate(records):
        mod = r[MOD]
        if r[OUT_DT]:
            fl = [d for d in r[OUT_DT] if d in FLOATS]
            if fl:
                ops[mod][dtype_name(fl[0])] += 1
        if r[PHASE] == FORWARD and r[OUT_DT] and trace.op(i) == "aten::_to_copy":
            by_autocast = False
            if r[AUTOCAST] and r[INNER] is not None:
                # autocast casts an op's inputs from inside that op's call: the cast and the op it
                # feeds share the Python frame and instruction.
                for j in range(i + 1, min(i + 8, n)):
                    q = records[j]
                    if q[INNER] != r[INNER]:
                        break
                    if trace.op(j) != "aten::_to_copy" and i in (q[IN_PROD] or ()):
                        by_autocast = True
                        break
                    if trace.op(j) != "aten::_to_copy" and any(p is not None and p >= 0 and records[p][INNER] == r[INNER] and trace.op(p) == "aten::_to_copy" for p in q[IN_PROD]):
                        by_autocast = True
                        break
            casts[mod][0 if by_autocast else 1] += 1
    grads: dict[int, set] = defaultdict(set)
    params: dict[int, set] = defaultdict(set)
    buffers: dict[int, set] = defaultdict(set)
    for idx, m in enumerate(trace.modules):
        if m is None:
            continue
        for p in m.parameters(recurse=False):
            params[idx].add(dtype_name(p.dtype))
            if p.grad is not None:
                grads[idx].add(dtype_name(p.grad.dtype))
        for b in m.buffers(recurse=False):
            if b.dtype in FLOATS:
                buffers[idx].add(dtype_name(b.dtype))
    rows = []
    order = sorted(set(range(len(rec.modules))) | ({k for k in ops if k >= 0}), key=lambda i: trace.names[i] or "")
    for idx in order:
        info = rec.modules[idx]
        name = trace.names[idx] or "<root>"
        rows.append((
            name or "<root>",
            ",".join(sorted(params[idx])) or "-",
            ",".join(sorted(buffers[idx])) or "-",
            ",".join(sorted(dtype_name(d) for d in info.inputs)) or "-",
            ",".join(sorted(dtype_name(d) for d in info.outputs)) or "-",
            ",".join(sorted(grads[idx])) or "-",
            " ".join(f"{k}:{v}" for k, v in sorted(ops[idx].items())) or "-",
            str(casts[idx][0]),
            str(casts[idx][1]),
        ))
    if -1 in ops:
        rows.append(("<outside modules>", "-", "-", "-", "-", "-", " ".join(f"{k}:{v}" for k, v in sorted(ops[-1].items())), str(casts[-1][0]), str(casts[-1][1])))
    return Table(
        "Per-module dtypes (runtime audit)",
        ("module", "params", "buffers", "inputs", "outputs", "grads", "ops by dtype", "autocast casts", "user casts"),
        tuple(rows),
    )


def analyze(rec: Any, policy: Policy, *, target_device: str, model: torch.nn.Module | None, exc: BaseException | None, checked: tuple[str, ...]) -> Report:
    trace = Trace(rec, model)
    checks = Checks(trace, policy, target_device)
    failure_seq = rec.failure.seq if (exc is not None and rec.failure is not None and _same_exception(rec.failure.exc, exc)) else None
    findings = checks.run(failure_seq)
    if exc is not None:
        findings = failure_findings(trace, policy, exc) + findings
    # A failing op's promotion is reported once, as the error with its chain.
    if exc is not None and failure_seq is not None:
        errs = [f for f in findings if f.name == "implicit-dtype-promotion" and f.severity == Severity.ERROR]
        if errs and errs[0].origin is not None:
            findings = [f for f in findings if not (f.name == "implicit-dtype-promotion" and f.severity != Severity.ERROR and f.location.module == errs[0].origin.module and f.location.op == errs[0].origin.op)]
    return Report.of(findings, tables=(module_table(trace),), checked=checked)

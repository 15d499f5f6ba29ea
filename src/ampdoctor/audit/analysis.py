"""After the step: name the recording (`Trace`), observe the policy that ran, and ask the rules.

Two kinds of rule answer here: the policy-level predicates of every rule, over the observed `Policy` and
`RunFacts` (the same predicates config lint and `Policy.validate()` ask), and the runtime detectors, over
the op records. Where a rule has both and its runtime detector found evidence, the evidence is kept and
the predicate's more general finding dropped, so a rule speaks once. A failure is diagnosed by the runtime
detectors that recognise it (the provenance chain) and by `explain` on the exception text.
"""

from __future__ import annotations

import functools
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace
from operator import itemgetter
from typing import Any, Callable, Iterable, Iterator

from ampdoctor import dtypes
from ampdoctor.audit.attribution import attributed, chain_places, chain_tensors, folded_into, one_per_place
from ampdoctor.audit.evidence import Op, Tag
from ampdoctor.audit.failure import FailureSite, failure_site, is_dtype_mismatch, is_rope_failure, raise_site, raised_by_meta_function
from ampdoctor.audit.fields import AUTOCAST, BACKWARD, FORWARD, FUNC, IN_DT, IN_PROD, INNER, MOD, OPTIMIZER, OUT_DT, PHASE
from ampdoctor.audit.modules import own_tensors
from ampdoctor.audit.names import module_label, relpath
from ampdoctor.audit.observe import Observed, observe
from ampdoctor.audit.provenance import FLOATS, HALF, Trace
from ampdoctor.audit.ranges import ValueFlow, value_table
from ampdoctor.audit.watch import MATMUL_OPS, matmul_flops
from ampdoctor.core.catalog import finding_of
from ampdoctor.core.engine import Places, check_policy
from ampdoctor.core.model import Finding, Location, Severity
from ampdoctor.core.registry import detectors
from ampdoctor.explain import explain_findings
from ampdoctor.policy import Policy
from ampdoctor.report import ErrorKind, Report, ReportError, ReportInfo, Table

# A plain optimizer on half weights is reported when at least this share of sampled updates rounded away.
ROUNDED_UPDATE_SHARE = 0.01
# How many ops back from a cos/sin its angles are looked for (transposes, the cat of two halves, an interleave).
ANGLE_REACH = 64

_LOG_SOFTMAX = frozenset({"aten::_log_softmax", "aten::log_softmax"})


@dataclass
class RuntimeContext:
    """What a runtime rule sees: the named recording, the policy the run is judged against (given by the user,
    else the observed one), what was observed, the device whose autocast lists apply, and the failure."""

    trace: Trace
    policy: Policy
    observed: Observed
    device: str
    failure: FailureSite | None = None
    exception: BaseException | None = None
    policy_given: bool = False  # the user named the policy (else it is the observed one)
    ran_on: str = "cpu"  # the device type the recorded step ran on (`device` is the one whose autocast judges it)
    # torch dtypes, so that rule modules need not import torch
    HALF: frozenset = frozenset(HALF)
    FP32: Any = field(default_factory=lambda: dtypes.to_torch(dtypes.FP32))
    BF16: Any = field(default_factory=lambda: dtypes.to_torch(dtypes.BF16))
    FP16: Any = field(default_factory=lambda: dtypes.to_torch(dtypes.FP16))
    matmul_ops: frozenset = MATMUL_OPS  # ids of the ops whose FLOPs are recorded

    @functools.cached_property
    def values(self) -> ValueFlow:
        """The value watch's statistics: ranges, non-finite origins, overflowing and flushing casts."""
        return ValueFlow(self.trace)

    @property
    def loss_scaled(self) -> bool:
        """A dynamic loss scaler (GradScaler) ran: it skips steps whose gradients overflowed, by design."""
        observed = self.observed.policy
        return observed is not None and observed.loss_scale == "dynamic"

    def matmul_flops(self, extra: tuple) -> int:
        return matmul_flops(extra)

    def made_by_matmul(self, seq: int) -> bool:
        """The op at `seq` is a matmul: walks of angles stop there."""
        return self.trace.records[seq][FUNC] in self.matmul_ops

    def applies_weight(self, seq: int) -> bool:
        """The op at `seq` is a matmul with a module's tensor (a layer's weight, as it is, as autocast cast it or as a
        parametrization computes it from its parts) for an operand: a layer, where what the model computes begins."""
        t = self.trace
        return self.made_by_matmul(seq) and any(t.carried_from(p) is not None or t.computed_from_named(p)
                                                for _, p in t.float_inputs(seq))

    @functools.cached_property
    def loss_log_probs(self) -> int | None:
        """The half-precision log_softmax an fp32 loss is made from (AMP125's finding; AMP204 leaves it to it): the
        nearest one upstream of the loss, before any layer (one behind a layer's weights, a gate inside the model, is
        the model's arithmetic; a matmul of the loss's own, log-probabilities times advantages, is no layer).
        Under autocast only where the judging device's autocast keeps it half too: CUDA autocast upcasts an explicit
        `F.log_softmax` but keeps `F.cross_entropy`'s in the logits' dtype (it passes log_softmax that dtype; seen on
        an H100, torch 2.11), so on a CUDA run a half one is cross_entropy's; CPU autocast upcasts `cross_entropy_loss`
        as a whole and keeps an explicit `F.log_softmax` half, which a CPU run judged for CUDA leaves to AMP204."""
        t = self.trace
        loss = next((op.extra[1] for op in t.tagged(Tag.LOSS)), None)
        if loss is None or loss < 0 or t.out_dtype(loss) in self.HALF:
            return None
        for s in t.upstream([loss], through=lambda s: not self.applies_weight(s)):
            op = t.op_at(s)
            if t.op(s) not in _LOG_SOFTMAX or op.phase != FORWARD:
                continue
            if t.out_dtype(s) in self.HALF:
                return None if op.autocast and self.ran_on != "cuda" and self.device == "cuda" else s
            if self.ran_on != "cuda" and self.device == "cuda" and self.autocast_upcast(s) is not None:
                return s  # CPU autocast upcast cross_entropy_loss; CUDA's keeps its log_softmax half
        return None

    def autocast_upcast(self, seq: int) -> Any:
        """The half dtype of the logits whose log_softmax (op `seq`) CPU autocast's policy for a whole
        `F.cross_entropy` upcast: the cast, the log_softmax and the nll_loss after it all run inside that one call
        (one frame and instruction). None otherwise: a cast the code wrote (`logits.float()`), or an explicit
        `log_softmax(x, dtype=torch.float32)` fed to a separate `nll_loss`, which CUDA computes in fp32 too."""
        t = self.trace
        ins = t.float_inputs(seq)
        op = t.op_at(seq)
        if not ins or ins[0][1] < 0 or not op.autocast or op.inner is None:
            return None
        cast = t.op_at(ins[0][1])
        if t.op(cast.seq) != "aten::_to_copy" or cast.inner != op.inner:
            return None
        after = range(seq + 1, min(seq + 8, len(t.records)))
        if not any(t.op(j).startswith("aten::nll_loss") and t.op_at(j).inner == op.inner and seq in t.op_at(j).producers for j in after):
            return None
        src = t.float_inputs(cast.seq)
        return src[0][0] if src and src[0][0] in self.HALF else None

    def failure_is_dtype_mismatch(self) -> bool:
        """The step failed because operands' dtypes disagree (not a shape error, a missing kernel...)."""
        return is_dtype_mismatch(self.exception)

    def in_attention_kernel(self, seq: int) -> bool:
        """Op `seq` is an attention kernel's own, run on half q/k/v (`calls`): CPU's math path upcasts them to fp32
        for its bmm and softmax and adds the mask there. Its dtypes are the kernel's choice, not the caller's."""
        call = self.trace.attention_call_of(seq)
        return call is not None and call.compute in self.HALF

    def failure_is_rotary(self) -> bool:
        """The step failed where a cos/sin table met an operand of another dtype (incidents 1 and 5)."""
        return self.failure is not None and is_rope_failure(self.trace, self.failure.inputs)

    def unconverted_input(self) -> tuple[Any, str, Any] | None:
        """The step failed in a module whose weights are one dtype on an operand of another dtype that never was the
        weights' dtype inside the model (no promotion or cast made it): the batch entered the model unconverted.
        Returns (the operand's dtype, the module's name, the weights' dtype)."""
        found = self._failing_weights()
        if found is None:
            return None
        index, weight, odd, _ = found
        t = self.trace
        assert self.failure is not None
        if not t.from_outside([p for d, p in self.failure.inputs if d == odd], odd):
            return None  # a cast, a constant or a named tensor of the model gave it that dtype (AMP201)
        return odd, module_label(t.module(index)), weight

    def adapter_boundary(self) -> tuple[str, Any, Any, int] | None:
        """The step failed on a dtype mismatch inside an adapter (a module named as LoRA/adapter layers are) whose
        other operand got its dtype from a cast or promotion inside the model: (the adapter's name, its weights'
        dtype, the operand's dtype, the op that gave it that dtype)."""
        found = self._failing_weights()
        if found is None:
            return None
        index, weight, odd, origin = found
        name = self.trace.module(index) or ""
        if not any(ADAPTER_NAME.fullmatch(part) for part in name.split(".")):
            return None
        if origin is None or not self._in_model(origin) or self.trace.out_dtype(origin) != odd:
            return None  # the operand came into the model so (AMP131), or no op of the model gave it that dtype
        return name, weight, odd, origin

    def adapter_buffer(self) -> tuple[str, Any, str, Any] | None:
        """The step failed on a dtype mismatch inside an adapted layer (a module whose trainable parameters are one
        dtype beside frozen ones of another: the base it adapts) between an operand of the trainable dtype and a
        buffer of that layer left in the frozen dtype: a cast of the adapter's parameters (an fp32 upcast) that left
        its buffers behind. Returns (the layer's name, the trainable dtype, the buffer's name, the buffer's dtype)."""
        site = self.failure
        if site is None or len({d for d, _ in site.inputs}) != 2 or not self.failure_is_dtype_mismatch():
            return None
        t = self.trace
        index = self._failing_module(site)
        module = t.modules[index] if index >= 0 else None
        if module is None:
            return None
        trained = {p.dtype for p in module.parameters() if p.requires_grad}
        frozen = {p.dtype for p in module.parameters() if not p.requires_grad}
        weight = next(iter(trained)) if len(trained) == 1 else None
        if weight is None or weight not in {d for d, _ in site.inputs}:
            return None
        name = t.module(index) or ""
        found = self._own_buffer(module, name, [(d, p) for d, p in site.inputs if d != weight and d in frozen])
        return (name, weight, *found) if found is not None else None

    def _own_buffer(self, module: Any, name: str, operands: list[tuple[Any, int]]) -> tuple[str, Any] | None:
        """(its name, its dtype) of the first operand whose values are a buffer of `module` (named `name`), in the
        dtype the buffer has."""
        by_id = {id(b): b.dtype for b in module.buffers()}  # a buffer shared by several layers has one of their names
        by_name = {f"{name}.{n}" if name else n: b.dtype for n, b in module.named_buffers()}
        for d, p in operands:
            named = self.trace.named_of(p)
            if named is not None and d in (by_name.get(named[0]), by_id.get(-named[1] if named[1] is not None else 0)):
                return named[0], d
        return None

    def _failing_weights(self) -> tuple[int, Any, Any, int | None] | None:
        """A dtype failure of two float dtypes in a module whose own weights are one of them: (the module, the
        weights' dtype, the other dtype, the op where an activation of the weights' dtype became the other, if any)."""
        site = self.failure
        if site is None or len({d for d, _ in site.inputs}) != 2 or self.failure_is_rotary() or not self.failure_is_dtype_mismatch():
            return None
        t = self.trace
        index = self._failing_module(site)
        module = t.modules[index] if index >= 0 else None
        own = {p.dtype for p in module.parameters(recurse=False)} if module is not None else set()
        if len(own) != 1 or not own <= {d for d, _ in site.inputs}:
            return None
        weight = own.pop()
        odd = next(d for d, _ in site.inputs if d != weight)
        origin, _ = t.divergence([p for d, p in site.inputs if d == odd], odd, weight)
        return index, weight, odd, origin

    def _failing_module(self, site: FailureSite) -> int:
        """The failing op's module; a failure before dispatch (a conv's dtype check) names it in its place."""
        t = self.trace
        if site.seq is not None:
            index = t.records[site.seq][MOD]
            return index if index is not None else -1
        return t.names.index(site.where.module) if site.where.module in t.names else -1

    def _in_model(self, seq: int) -> bool:
        index = self.trace.records[seq][MOD]
        return index is not None and index >= 0

    def rounded_updates(self) -> Iterator[tuple[float, Location, dict]]:
        """Measured, not guessed: the share of half-precision parameter elements with a non-zero gradient that the
        first optimizer step left bit-identical, when it is large enough to matter (`ROUNDED_UPDATE_SHARE`). An
        optimizer with an fp32 master copy keeps those updates there: an unchanged half weight is then no lost update."""
        if self.observed.facts.master_weights == "optimizer":
            return
        for ev in self.trace.optimizer_steps[:1]:
            if not ev.considered:
                return
            share = ev.unchanged / ev.considered
            if share >= ROUNDED_UPDATE_SHARE:
                code, line = ev.frame
                where = Location(file=relpath(code.co_filename) if code else None, line=line or None, phase=OPTIMIZER, op=f"{ev.optimizer}.step")
                yield share, where, {"unchanged_fraction": round(share, 4), "sampled_elements": ev.considered, "optimizer": ev.optimizer}

    @property
    def half_compute(self) -> bool:
        return self.policy.compute in dtypes.HALF

    def torch_dtype(self, name: str) -> Any:
        return dtypes.to_torch(name)

    def grouped(self, seqs: Iterable[int], key: Callable[[int], Any]) -> dict[Any, list[int]]:
        groups: dict[Any, list[int]] = defaultdict(list)
        for s in seqs:
            groups[key(s)].append(s)
        return groups

    def made_in(self, seq: int, dtype: Any) -> list[Location]:
        """Where the operands of op `seq` that have `dtype` were made."""
        t = self.trace
        return [t.location(t.source(p), f"{dtypes.name_of(d)} operand made here") if p >= 0 else t.leaf_location(-p, d)
                for d, p in t.float_inputs(seq) if d == dtype]

    def operand_location(self, prod: int, dtype: Any, label: str | None = None) -> Location:
        t = self.trace
        return t.location(t.source(prod), label) if prod >= 0 else t.leaf_location(-prod, dtype)

    @functools.cached_property
    def autocast_angles(self) -> dict[int, tuple[int, list[int]]]:
        """Rotary angles autocast computed in half precision (AMP101): a matmul that autocast ran in bf16/fp16 on
        positions it cast from fp32 (`Trace.integer_valued`), whose result reaches a cos/sin within `ANGLE_REACH`
        ops. The matmul's seq -> (autocast's cast of the positions, the cos/sin ops it reaches). The cast and the
        half cos/sin are this one cause: AMP103 and AMP002 leave them to AMP101."""
        t = self.trace
        found: dict[int, tuple[int, list[int]]] = {}
        for op in t.ops_named(("aten::cos", "aten::sin"), FORWARD):
            # angles end at the matmul that made them: the walk does not go past one
            inputs = [p for _, p in t.float_inputs(op.seq)]
            for s in t.upstream(inputs, ANGLE_REACH, through=lambda s: not self.made_by_matmul(s)):
                if not self.made_by_matmul(s):
                    continue
                cast = self._autocast_positions(s)
                if cast is not None:
                    found.setdefault(s, (cast, []))[1].append(op.seq)
        return found

    def _autocast_positions(self, seq: int) -> int | None:
        """The cast by which autocast turned fp32 positions into an operand of the half matmul `seq`, if it did."""
        t = self.trace
        if not t.records[seq][AUTOCAST] or t.out_dtype(seq) not in HALF:
            return None
        for _, p in t.float_inputs(seq):
            cast = t.source(p) if p >= 0 else p
            if cast < 0 or t.op(cast) != "aten::_to_copy" or not t.records[cast][AUTOCAST] or t.out_dtype(cast) not in HALF:
                continue
            ins = t.float_inputs(cast)
            if ins and ins[0][0] not in HALF and t.integer_valued(ins[0][1]):
                return cast
        return None

    @functools.cached_property
    def promotions(self) -> list[Op]:
        """The forward ops that promote (`Trace.is_promotion`), in order."""
        t = self.trace
        return [op for op in t.mixed(FORWARD) if t.is_promotion(op.record[0])]

    @functools.cached_property
    def _promoting(self) -> tuple[frozenset[int], int, dict[int, int | None]]:
        """The promoting seqs, the first of them (nothing before it descends from one), and `promoted_from`'s answers."""
        promoting = frozenset(op.record[0] for op in self.promotions)
        return promoting, min(promoting, default=len(self.trace.records)), {}

    def promoted_from(self, seq: int) -> int | None:
        """The forward promotion op `seq` descends from, following the promoted (wide) dtype forward: a promotion
        descends from itself; another op from the promotion of its first input, in order, that is not half and descends
        from one; None for none (and for an op that raised outside the forward). Asked only of the ops a rule reads (the
        operands of fp32 matmuls), walking back from them: each op's answer is worked out once."""
        promoting, first, known = self._promoting
        records, half = self.trace.records, self.HALF
        todo = [seq]
        while todo:
            s = todo[-1]
            if s in known:
                todo.pop()
                continue
            r = records[s]
            if s < first or (r[OUT_DT] is None and r[PHASE] != FORWARD):
                known[s] = None
            elif s in promoting:
                known[s] = s
            else:
                # the first input, in order, that is not half and descends from a promotion; inputs not worked out yet first
                ins = [p for d, p in zip(r[IN_DT], r[IN_PROD]) if p is not None and p >= first and d not in half]
                missing = [p for p in ins if p not in known]
                if missing:
                    todo.extend(reversed(missing))
                    continue
                known[s] = next((known[p] for p in ins if known[p] is not None), None)
            todo.pop()
        return known[seq]


def _runtime_findings(ctx: RuntimeContext) -> list[Finding]:
    out: list[Finding] = []
    for detector in detectors("runtime"):
        out.extend(finding_of(detector.rule_id, hit) for hit in detector.fn(ctx))
    return out


def _policy_findings(observed: Observed, already: set[str]) -> list[Finding]:
    """The policy-level rules over what ran; a rule whose runtime detector already reported is not repeated."""
    if observed.policy is None:
        return []
    places = Places(observed.locations, Location(module="", label=f"observed policy {observed.policy}"))
    return [f for f in check_policy(observed.policy, observed.facts, places) if f.rule_id not in already]


@dataclass(frozen=True)
class Analysis:
    report: Report
    observed: Observed  # the policy and facts the run was observed to have


def analyze(rec: Any, policy: Policy | None, *, target_device: str, model: Any, exc: BaseException | None, checked: tuple[str, ...],
            judge_policy: bool = True) -> Analysis:
    """The report of a finished recording; `policy` None judges the run by the policy it was observed to run.
    `judge_policy=False` asks only the runtime detectors (a model inspected at rest runs no policy yet)."""
    trace = Trace(rec, model)
    observed = observe(trace)
    judged = policy or observed.policy or Policy.preset("fp32")
    ctx = RuntimeContext(trace, judged, observed, target_device, failure_site(trace, exc), exc, policy_given=policy is not None,
                         ran_on=getattr(rec, "device_type", target_device))
    found = _runtime_findings(ctx)
    if judge_policy:
        found += _policy_findings(observed, {f.rule_id for f in found})
    if exc is not None:
        found = _with_explanation(found, exc, ctx)
    found = one_per_place([attributed(f, trace) for f in found])
    info = ReportInfo(policy=str(judged), policy_source="given" if policy is not None else ("inferred" if observed.policy else "default"))
    if judge_policy:
        info = replace(info, **coverage_notes(rec))
    if rec.every:
        info = replace(info, recorded_steps=tuple(rec.recorded_steps), notes=(*info.notes, sampling_note(rec)))
    if exc is not None and raised_by_meta_function(exc) and not any(f.severity == Severity.ERROR for f in found):
        info = replace(info, notes=(*info.notes, META_NOTE))
    values = value_table(ctx.values, judged.compute)
    tables = (module_table(trace),) + ((values,) if values is not None else ())
    return Analysis(Report.of(found, tables=tables, checked=checked, info=info), observed)


def sampling_note(rec: Any) -> str:
    """What a sampled audit saw: one optimizer step in `every`, the others ran with nothing recorded."""
    shown = ", ".join(map(str, rec.recorded_steps[:8])) + (", ..." if len(rec.recorded_steps) > 8 else "")
    skipped = (f"; {rec.samples_skipped} sample(s) not taken because the step before ended with another dispatch mode "
               "entered above the audit's, or inside backward" if rec.samples_skipped else "")
    return (f"sampled: {len(rec.recorded_steps)} of {rec.steps_seen} optimizer steps recorded (one in {rec.every}: "
            f"{shown or 'none'}); the steps between ran unrecorded, and what happens only there was not seen{skipped}")


# A failure inside torch's meta function of an op (what fake tensors run) that the run explains by no root cause: it
# may be the fake run's, not the model's.
META_NOTE = ("the check that failed is in torch's fake-tensor (meta) rules for the op, which can be stricter than its "
             "CPU and CUDA kernels: step the model on real tensors (a smaller config, without --fake) to tell whether the "
             "model or the fake run fails")


def coverage_notes(rec: Any) -> dict[str, list[str]]:
    """What a recording without an optimizer step could not check, for the report's `notes` and summary line: a
    bare "no findings" would read as a clean bill for the update, the optimizer state and gradient accumulation."""
    if rec.optimizer_steps or rec.opt_events:
        return {}
    if not rec.records:
        return {"notes": ["no op ran under the audit (no forward, backward or optimizer step was seen): nothing about "
                          "the training step was checked, only the modules and parameters entered, if any"],
                "summary_caveats": ["no op was recorded"]}
    backward = BACKWARD in map(itemgetter(PHASE), rec.records)
    ran = "forward and backward" if backward else "forward"
    return {"notes": [f"no optimizer step was seen{'' if backward else ' (and no backward pass)'}: only the {ran} ops recorded "
                      "were checked; the parameter update, the optimizer's state dtypes and gradient accumulation across "
                      "micro-batches were not"],
            "summary_caveats": ["no optimizer step was seen"]}


def _with_explanation(found: list[Finding], exc: BaseException, ctx: RuntimeContext) -> list[Finding]:
    """One failure, one finding. The recorded chain to the failing op (a runtime detector's error at the failure)
    is the root cause when there is one; otherwise explain's best candidate for the exception text is, placed at
    the failure, when the run corroborates it (operands of two float dtypes met at the failure, or what usually
    comes with the error is in the text). Explain's other candidates are named on the root cause, not listed; the
    findings whose place lies on the root cause's chain fold into it; no rule is reported twice at one place."""
    import traceback

    site = ctx.failure
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    where = site.where if site is not None else raise_site(exc)
    known = {g.rule_id for g in found}
    explained = _corroborated(explain_findings(text, location=where), site)
    # a finding about the failure stands at the failing op, or names it beside the line to change
    at_failure = [f for f in found if f.severity is Severity.ERROR and any(_same_place(p, where) for p in (f.location, *f.related))] \
        if where is not None else []
    new = [e for e in explained if e.rule_id not in known]
    root = _root_cause(found, explained, at_failure, new)
    if root is None:
        return _unique_per_place(found)
    symptoms = {id(f) for f in at_failure}
    rooted = _rooted(found + ([root] if any(root is e for e in new) else []), root, symptoms, explained)
    root = next(f for f in rooted if f.details.get("root_cause"))
    places = chain_places(ctx.trace, site.inputs, ctx.policy.compute_dtype) if site is not None else set()
    tensors = chain_tensors(ctx.trace, site.inputs, ctx.applies_weight) if site is not None else set()
    return _unique_per_place(folded_into(root, rooted, places, tensors))


def _corroborated(explained: list[Finding], site: FailureSite | None) -> list[Finding]:
    """Explain's readings of the error text that the run bears out: operands of two float dtypes met at the failure,
    or what usually comes with the error is in the text too."""
    mixed = site is not None and len({d for d, _ in site.inputs}) > 1
    return [replace(e, details={k: v for k, v in e.details.items() if k != "context_matched"})
            for e in explained if mixed or e.details.get("context_matched", True)]


def _rooted(findings: list[Finding], root: Finding, symptoms: set[int], explained: list[Finding]) -> list[Finding]:
    """The root cause marked (with the other rules explain matched), the other errors about the failure demoted."""
    matched = [e.rule_id for e in explained if e is not root]
    out = []
    for f in findings:
        if f is root:
            f = replace(f, details={**f.details, "root_cause": True, **({"also_matches": matched} if matched else {})})
        elif id(f) in symptoms and f.severity is Severity.ERROR:
            f = _demoted(f, f in explained)
        out.append(f)
    return out


def _root_cause(found: list[Finding], explained: list[Finding], at_failure: list[Finding], new: list[Finding]) -> Finding | None:
    if at_failure:
        return at_failure[0]
    if new:
        return new[0]
    if explained:  # explain's best candidate was already found by a detector: that finding is the root cause
        return next((f for f in found if f.rule_id == explained[0].rule_id), None)
    return None


def _demoted(f: Finding, from_explain: bool) -> Finding:
    """A symptom of the failure the root cause explains: never a second error."""
    return replace(f, severity=Severity.INFO if from_explain else Severity.WARNING)


def _same_place(a: Location, b: Location) -> bool:
    return (a.file, a.line, a.op) == (b.file, b.line, b.op)


def _unique_per_place(found: list[Finding]) -> list[Finding]:
    """A rule speaks once per place: of two findings of one rule at one place, the more severe stays."""
    best: dict[tuple, Finding] = {}
    for f in found:
        key = (f.rule_id, f.location.file, f.location.line, f.location.module, f.location.op)
        if key not in best or f.severity.rank > best[key].severity.rank:
            best[key] = f
    return [f for f in found if best[(f.rule_id, f.location.file, f.location.line, f.location.module, f.location.op)] is f]


def analysis_failed(err: BaseException, checked: tuple[str, ...]) -> Report:
    """The report of an analysis that raised: the audit must never take the user's program down with it."""
    import traceback

    frame = traceback.extract_tb(err.__traceback__)[-1].name if err.__traceback__ else "?"
    return Report(checked=checked, errors=(ReportError("ampdoctor audit", f"failed to analyse the recording: {type(err).__name__}: {err} ({frame})",
                                                             kind=ErrorKind.INTERNAL),))


# Module names of adapters: PEFT's `lora_A`/`lora_B`/`lora_embedding_A`, `lora_down`/`lora_up` of diffusion LoRA code,
# `adapter`/`adapters`, IA3's and VeRA's vectors.
ADAPTER_NAME = re.compile(r"(lora|adapter|ia3|vera|dora|lokr|loha)(_?[a-z]*(_[ab])?)?s?(_\w+)?", re.IGNORECASE)


# --- the module table -----------------------------------------------------------------------------


def _cast_counts(trace: Trace) -> dict[int, list[int]]:
    """Per module: [casts autocast made, casts the user's code made] in the forward."""
    casts: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    records = trace.records
    copies = trace.fids_named(("aten::_to_copy",))
    for op in trace.ops_of(copies, FORWARD):
        r = op.record
        if r[OUT_DT]:
            casts[r[MOD]][0 if _cast_by_autocast(records, r, copies) else 1] += 1
    return casts


def _cast_by_autocast(records: list[tuple], r: tuple, copies: set[int]) -> bool:
    """Did autocast make this cast? Autocast casts an op's inputs from inside that op's call: the cast and the op it
    feeds (the next op that is not a cast, within a few records) share the Python frame and instruction."""
    inner = r[INNER]
    if not r[AUTOCAST] or inner is None:
        return False
    i = r[0]
    for q in records[i + 1:i + 8]:
        if q[INNER] != inner:
            return False
        if q[FUNC] not in copies and (i in (q[IN_PROD] or ()) or any(
                p is not None and p >= 0 and records[p][INNER] == inner and records[p][FUNC] in copies for p in q[IN_PROD])):
            return True
    return False


def _tensor_dtypes(trace: Trace) -> tuple[dict[int, set], dict[int, set], dict[int, set]]:
    params: dict[int, set] = defaultdict(set)
    grads: dict[int, set] = defaultdict(set)
    buffers: dict[int, set] = defaultdict(set)
    for idx, m in enumerate(trace.modules):
        if m is None:
            continue
        own_params, own_buffers = own_tensors(m)
        for p in own_params:
            params[idx].add(dtypes.name_of(p.dtype))
            if p.grad is not None:
                grads[idx].add(dtypes.name_of(p.grad.dtype))
        for b in own_buffers:
            if b.dtype in FLOATS:
                buffers[idx].add(dtypes.name_of(b.dtype))
    return params, grads, buffers


def _ops_by_dtype(trace: Trace) -> dict[int, Counter]:
    """Per module: how many ops made a result of each float dtype (their first float output's)."""
    records = trace.records
    ops: dict[int, Counter] = defaultdict(Counter)
    named: dict[tuple | None, str | None] = {}  # records share their output dtype tuples: each named once
    # counted per (module, output dtypes) in C, then named per distinct output dtypes
    for (mod, out), count in Counter(zip(map(itemgetter(MOD), records), map(itemgetter(OUT_DT), records))).items():
        if out not in named:
            fl = [d for d in out or () if d in FLOATS]
            named[out] = dtypes.name_of(fl[0]) if fl else None
        name = named[out]
        if name is not None:
            ops[mod][name] += count
    return ops


def _joined(values: Iterable[str]) -> str:
    return ",".join(sorted(values)) or "-"


def _counted(ops: Counter | None) -> str:
    return " ".join(f"{k}:{v}" for k, v in sorted(ops.items())) if ops else "-"


def module_table(trace: Trace) -> Table:
    ops = _ops_by_dtype(trace)
    casts = _cast_counts(trace)
    params, grads, buffers = _tensor_dtypes(trace)
    name_of = dtypes.name_of
    none = ()
    no_casts = (0, 0)
    rows = []
    infos = trace.rec.modules
    names = trace.names
    order = sorted(set(range(len(infos))) | {k for k in ops if k >= 0}, key=lambda i: names[i] or "")
    for idx in order:
        info = infos[idx]
        if trace.records and not info.calls and idx not in ops:
            continue  # scanned at the step's start (its buffers), never run: nothing to show in a table of what ran
        cast = casts.get(idx, no_casts)
        rows.append((
            names[idx] or "<root>", _joined(params.get(idx, none)), _joined(buffers.get(idx, none)), _joined(map(name_of, info.inputs)),
            _joined(map(name_of, info.outputs)), _joined(grads.get(idx, none)), _counted(ops.get(idx)), str(cast[0]), str(cast[1]),
        ))
    if -1 in ops:
        cast = casts.get(-1, no_casts)
        rows.append(("<outside modules>", "-", "-", "-", "-", "-", _counted(ops[-1]), str(cast[0]), str(cast[1])))
    return Table(
        "Per-module dtypes (runtime audit)",
        ("module", "params", "buffers", "inputs", "outputs", "grads", "ops by dtype", "autocast casts", "user casts"),
        tuple(rows),
    )


"""What the recorder attributes each op to: module, phase and user line, without touching the graph."""

import sys

import torch
from torch import nn

from ampdoctor.audit import audit
from ampdoctor.audit.fields import BACKWARD, EXTRA, FORWARD, IN_DT, IN_PROD, MOD, PHASE
from ampdoctor.audit.provenance import Trace


def test_backward_ops_are_attributed_to_the_module_that_ran_their_forward():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    x = torch.randn(3, 4)
    with audit("fp32", model=model) as a:
        model(x).sum().backward()
    trace = Trace(a.recorder, model)
    backward = [(trace.op(r[0]), trace.module(r[MOD])) for r in trace.records if r[PHASE] == BACKWARD]
    assert ("aten::threshold_backward", "1") in backward
    assert {m for op, m in backward if op == "aten::mm"} == {"0", "2"}
    # grad w.r.t. layer 2's input and weight; layer 0's input needs none
    assert sum(1 for op, m in backward if (op, m) == ("aten::mm", "2")) == 2
    assert sum(1 for op, m in backward if (op, m) == ("aten::mm", "0")) == 1
    # AccumulateGrad into each of the 4 parameters, outside any module
    accumulate = [r for r in trace.records if r[PHASE] == BACKWARD and r[EXTRA] and r[EXTRA][0] == "accumulate"]
    assert sorted(r[EXTRA][1] for r in accumulate) == sorted(id(p) for p in model.parameters())
    assert all(r[MOD] == -1 for r in accumulate)


def test_the_audit_writes_nothing_on_the_autograd_graph():
    lin = nn.Linear(4, 4)
    with audit("fp32"):
        h = lin(torch.randn(2, 4))
        y = (h * 2).sum()
    y.backward()
    assert dict(h.grad_fn.metadata) == {} and dict(y.grad_fn.metadata) == {}


def test_ops_inside_torch_modules_are_located_at_the_user_line_that_called_the_model():
    model = nn.Sequential(nn.Sequential(nn.Linear(4, 4)), nn.ReLU())
    x = torch.randn(2, 4)
    with audit("fp32", model=model) as a:
        call_line = sys._getframe().f_lineno + 1
        out = model(x)
        out.sum()
    sum_line = call_line + 1
    trace = Trace(a.recorder, model)
    forward = {trace.op(r[0]): r[0] for r in trace.records if r[PHASE] == FORWARD}
    addmm = trace.location(forward["aten::addmm"])
    assert (addmm.module, addmm.line) == ("0.0", call_line) and addmm.file.endswith("test_audit_recorder.py")
    assert trace.location(forward["aten::relu"]).line == call_line
    assert trace.location(forward["aten::sum"]).line == sum_line
    # the model's first caller, as the module table's `caller` records it
    assert a.recorder.modules[0].caller[1] == call_line


def test_attention_calls_are_seen_with_the_dtypes_their_caller_gave_and_their_kernels_ops():
    from torch.overrides import _get_current_function_mode_stack

    q = torch.randn(2, 2, 8, 4, dtype=torch.bfloat16, requires_grad=True)
    mask = torch.zeros(8, 8)
    with audit("bf16-mixed") as a:
        # dropout: CPU's math path, whose own ops upcast q/k/v to fp32
        out = nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=mask, dropout_p=0.5)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            nn.functional.scaled_dot_product_attention(q.float(), q.float(), q.float())
        out.float().sum().backward()
    assert _get_current_function_mode_stack() == []  # the function mode is gone with the audit
    trace = Trace(a.recorder)
    first, second = trace.attention_calls
    assert (first.query, first.key, first.value, first.mask, first.autocast) == (torch.bfloat16,) * 3 + (torch.float32, None)
    assert (second.query, second.autocast, second.compute) == (torch.float32, torch.bfloat16, torch.bfloat16)
    inside = [r[0] for r in trace.records if trace.attention_call_of(r[0]) is first]
    assert inside[0] == first.start and first.start < first.end
    fp32_bmm = [s for s in range(first.start, first.end) if trace.op(s) == "aten::bmm" and trace.out_dtype(s) == torch.float32]
    assert fp32_bmm  # the kernel's own fp32 matmuls, which are not the caller's
    # backward matmuls of the kernel belong to the call that built their nodes
    assert any(trace.attention_call_of(r[0]) is first for r in trace.records if r[PHASE] == BACKWARD and trace.op(r[0]) == "aten::bmm")


def test_the_function_mode_leaves_with_the_audit_when_the_step_raises():
    from torch.overrides import _get_current_function_mode_stack

    q = torch.randn(1, 1, 4, 4)
    try:
        with audit("fp32"):
            nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=torch.zeros(4, 4, dtype=torch.bfloat16))
    except RuntimeError:
        pass
    assert _get_current_function_mode_stack() == []


def test_the_reads_at_the_end_of_the_recording_do_not_pass_through_the_attention_call_watch(monkeypatch):
    """The final `.grad` snapshot and buffer scans read every parameter and buffer: the call watch's function mode
    is off the stack by then, so none of those reads goes through it (thousands of reads in a large model)."""
    from ampdoctor.audit.calls import CallWatch
    from ampdoctor.audit.evidence import When
    from ampdoctor.audit.recorder import Recorder

    seen: list = []
    real_watch = CallWatch.__torch_function__
    real_snapshot = Recorder.snapshot_grads
    ending = []

    def watch(self, func, types, args=(), kwargs=None):
        if ending:
            seen.append(func)
        return real_watch(self, func, types, args, kwargs)

    def snapshot(self, when):
        if when == When.END:
            ending.append(when)  # from here on to the end of the test, every read is one of the end's
        return real_snapshot(self, when)

    monkeypatch.setattr(CallWatch, "__torch_function__", watch)
    monkeypatch.setattr(Recorder, "snapshot_grads", snapshot)
    model = nn.Sequential(nn.Linear(4, 4), nn.LayerNorm(4), nn.Linear(4, 2))
    with audit("fp32") as a:
        model(torch.randn(3, 4)).sum().backward()
    assert ending and a.recorder.grad_events  # the final snapshot ran and read every parameter's `.grad`
    assert seen == []


def test_observed_collectives_and_reduce_dtype_come_from_the_recorded_collective(tmp_path):
    # the observation asks which op kinds were recorded before walking the trace for a collective: a recorded
    # all_reduce must still be found, its dtype read as the reduce dtype
    import torch.distributed as dist

    from ampdoctor.audit.session import Audit

    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/store", rank=0, world_size=1)
    try:
        model = torch.nn.Linear(4, 4)
        with Audit("fp32", model=model, device_type="cpu") as a:
            loss = model(torch.randn(2, 4)).sum()
            loss.backward()
            grad = model.weight.grad.to(torch.bfloat16)
            dist.all_reduce(grad)
    finally:
        dist.destroy_process_group()
    assert [c.op for c in a.observed.collectives] and all(c.dtypes == ("bf16",) for c in a.observed.collectives)
    assert a.observed.policy.reduce == "bf16"


class _ReplacesItsTable(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.register_buffer("table", torch.randn(8, dim), persistent=False)

    def forward(self, x):
        self.table = self.table.to(dtype=x.dtype)  # the scanned fp32 table dies here
        return x + self.table[: x.shape[1]]


def test_a_live_tensor_under_the_id_of_a_replaced_buffer_is_not_that_buffer(monkeypatch):
    # The replaced buffer is named by the id it had when scanned; once it died, CPython may give that id to any new
    # tensor. A tensor a recorded op made, alive under that id, is that new tensor, not the model's buffer.
    import weakref

    from ampdoctor.audit.recorder import Recorder

    monkeypatch.setattr(Recorder, "release", lambda self: None)  # keep the record's maps for the Trace below
    model = _ReplacesItsTable(16)
    with audit("bf16-mixed", model=model) as a:
        out = model(torch.randn(2, 8, 16, dtype=torch.bfloat16))
        kept = out * 2
    rec = a.recorder
    [old] = [s for s in rec.module_scans if s.name == "table" and s.when == "before"]
    assert old.ref() is None and old.prod < 0
    seq = rec.producers[id(kept)]
    # as if the loss had been allocated where the old table was
    rec.produced[-old.prod], rec.producers[-old.prod] = weakref.ref(kept), seq
    trace = Trace(rec, model)
    assert trace.named_seq.get(seq) is None
    assert trace.leaf_names[-old.prod].endswith("table")  # reads of the old table are still named


def test_a_leaf_read_after_a_replaced_buffer_died_is_not_that_buffer(monkeypatch):
    # The same id reuse for a tensor that no recorded op made (an input built outside torch's dispatcher): only the
    # reads made before the buffer died are the buffer's.
    from ampdoctor.audit.recorder import Recorder

    monkeypatch.setattr(Recorder, "release", lambda self: None)
    model = _ReplacesItsTable(16)
    outside = torch.randn(8, 16, dtype=torch.bfloat16)
    with audit("bf16-mixed", model=model) as a:
        out = model(torch.randn(2, 8, 16, dtype=torch.bfloat16))
        late = outside * 2
    rec = a.recorder
    [old] = [s for s in rec.module_scans if s.name == "table" and s.when == "before"]
    assert old.ref() is None and old.prod in rec.leaf_deaths
    reads = [i for i, r in enumerate(rec.records) if old.prod in r[IN_PROD]]
    assert reads and all(i < rec.leaf_deaths[old.prod] for i in reads)  # the table was read before it died
    late_seq = rec.producers[id(late)]
    assert late_seq >= rec.leaf_deaths[old.prod]
    # as if `outside` had been allocated where the old table was
    r = rec.records[late_seq]
    rec.records[late_seq] = (*r[:IN_PROD], tuple(old.prod if p == -id(outside) else p for p in r[IN_PROD]), *r[IN_PROD + 1:])
    trace = Trace(rec, model)
    assert all(trace.named_of(p) is None for _, p in trace.float_inputs(late_seq))
    assert any((trace.named_of(p) or ("",))[0].endswith("table") for i in reads for _, p in trace.float_inputs(i))
    assert trace.leaf_key(outside) == -id(outside)  # a live tensor under an id no scanned tensor had keeps its key
    del out


def test_a_held_leaf_under_a_dead_buffers_id_keeps_its_own_name_and_leaves_the_buffer_its_reads(monkeypatch):
    # A tensor the model holds at the end, under the id of a scanned buffer that died during the step, is a newer
    # tensor: its reads (after the death) are named after it, and the buffer's reads (before) stay the buffer's.
    import dataclasses

    from ampdoctor.audit.recorder import Recorder

    monkeypatch.setattr(Recorder, "release", lambda self: None)
    model = _ReplacesItsTable(16)
    model.extra = torch.randn(8, 16, dtype=torch.bfloat16)  # made before the audit: a leaf
    with audit("bf16-mixed", model=model) as a:
        out = model(torch.randn(2, 8, 16, dtype=torch.bfloat16))
        late = model.extra * 2
    rec = a.recorder
    [i] = [k for k, s in enumerate(rec.module_scans) if s.name == "table" and s.when == "before"]
    old, key = rec.module_scans[i], -id(model.extra)
    assert old.ref() is None and old.prod in rec.leaf_deaths
    # as if `extra` had been allocated where the old table was: the table's scan and reads carry extra's id
    rec.module_scans[i] = dataclasses.replace(old, prod=key)
    rec.leaf_deaths[key] = rec.leaf_deaths.pop(old.prod)
    for k, r in enumerate(rec.records):
        rec.records[k] = (*r[:IN_PROD], tuple(key if p == old.prod else p for p in r[IN_PROD]), *r[IN_PROD + 1:])
    reads = [k for k, r in enumerate(rec.records) if key in r[IN_PROD]]
    late_seq = rec.producers[id(late)]
    trace = Trace(rec, model)
    names = {(trace.named_of(p) or ("",))[0] for k in reads if k != late_seq for _, p in trace.float_inputs(k)}
    assert any(n.endswith("table") for n in names) and not any(n.endswith("extra") for n in names)
    [(name, _)] = [trace.named_of(p) for _, p in trace.float_inputs(late_seq)]
    assert name.endswith("extra")
    del out


def test_a_live_tensor_at_a_failure_under_a_dead_buffers_id_is_known_by_the_key_of_its_reads(monkeypatch):
    # A Python-level failure names its operands by what the record calls them: a live tensor that no recorded op made,
    # under the id of a scanned buffer that died before, is read in the record under a key set apart from the
    # buffer's, and the failure's inputs must use that same key (else the walk from the failure finds no reads).
    import pytest

    from ampdoctor.audit.failure import failure_site
    from ampdoctor.audit.recorder import Recorder

    monkeypatch.setattr(Recorder, "release", lambda self: None)
    low, high = torch.randn(4, dtype=torch.bfloat16), torch.randn(4)  # made before the audit: leaves

    def combine(a, b):
        raise ValueError("operands disagree")

    with pytest.raises(ValueError) as raised:
        with audit("bf16-mixed") as a:
            doubled = high * 2  # a read of `high`
            combine(low, high)
    rec = a.recorder
    seq = rec.producers[id(doubled)]
    rec.leaf_deaths[-id(high)] = seq  # as if a scanned buffer under `high`'s id had died just before that read
    trace = Trace(rec)
    [read] = [p for _, p in trace.float_inputs(seq) if p < 0]
    assert read != -id(high)  # set apart from the dead buffer's key
    site = failure_site(trace, raised.value)
    assert site is not None and (torch.float32, read) in site.inputs


def test_a_parameter_changed_in_place_is_named_at_every_op_that_changed_it(monkeypatch):
    # Built inside the audit, a Linear's weight is made by its in-place initialisation and changed again by the
    # optimizer: the forward reads the tensor the initialisation made, which is the named weight all along.
    from ampdoctor.audit.recorder import Recorder

    monkeypatch.setattr(Recorder, "release", lambda self: None)  # keep the record's maps for the Trace below
    with audit("fp32") as a:
        layer = nn.Linear(4, 3)
        optimizer = torch.optim.SGD(layer.parameters(), lr=0.1)
        layer(torch.randn(2, 4)).sum().backward()
        optimizer.step()
    trace = Trace(a.recorder, layer)
    [mm] = [op.seq for op in trace.ops(FORWARD) if trace.op(op.seq) == "aten::addmm"]
    names = {(trace.named_of(p) or ("",))[0] for _, p in trace.float_inputs(mm)}
    assert {"weight", "bias"} <= names


def test_a_finished_recorder_goes_with_its_audit_without_waiting_for_a_collection():
    # Its records are ~10^5 tracked tuples in a large step: held in a reference cycle, they would wait for a cyclic
    # collection, which walks every one of them (the autocast wrappers close over the recorder).
    import gc
    import weakref

    model = nn.Linear(4, 4)
    with audit("bf16-mixed", model=model) as a:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            model(torch.randn(2, 4)).float().sum().backward()
    assert a.recorder.records and a.report is not None
    recorder = weakref.ref(a.recorder)
    enabled = gc.isenabled()
    gc.disable()
    try:
        del a
        assert recorder() is None
    finally:
        if enabled:
            gc.enable()


def test_the_mixed_ops_are_the_ops_whose_inputs_have_several_dtypes_in_order_and_by_phase():
    """`Trace.mixed` (what the mixed-input rules walk) leaves out no op whose inputs differ in dtype, float or not."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 2).to(torch.bfloat16))
    x = torch.randn(3, 4)
    with audit("fp32", model=model) as a:
        out = model[1](model[0](x).to(torch.bfloat16)).float() * torch.ones(2)
        (out.sum() + torch.arange(2)[1]).backward()
    trace = Trace(a.recorder, model)
    for phase in (None, FORWARD, BACKWARD):
        want = [r[0] for r in trace.records if len(set(r[IN_DT])) > 1 and phase in (None, r[PHASE])]
        assert [op.seq for op in trace.mixed(phase)] == want
    assert any(len(set(r[IN_DT])) > 1 and r[PHASE] == FORWARD for r in trace.records)


def test_the_trace_selections_keep_every_op_of_the_kinds_asked_in_order():
    """`Trace.ops_named`/`ops_of`, `mixed` and `tagged` pick in C what a walk over every op would pick, in the same order."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    x = torch.randn(3, 4, dtype=torch.float64)
    with audit("fp32", model=model) as a:
        (model(x.float()) * x[:, :2]).sum().backward()  # an fp32 result times an fp64 input: mixed dtypes
    trace = Trace(a.recorder, model)
    for phase in (None, FORWARD, BACKWARD):
        every = list(trace.ops(phase))
        assert [op.seq for op in trace.ops_named({"aten::mm", "aten::addmm"}, phase)] == \
            [op.seq for op in every if trace.op(op.seq) in ("aten::mm", "aten::addmm")]
        assert [op.seq for op in trace.ops_named(lambda name: name.endswith("mm"), phase)] == \
            [op.seq for op in every if trace.op(op.seq).endswith("mm")]
        assert [op.seq for op in trace.mixed(phase)] == [op.seq for op in every if trace.dtype_kinds(op.seq) > 1]
    assert [op.seq for op in trace.ops_named(("aten::addmm",), BACKWARD)] == []
    assert list(trace.ops_of(set(), FORWARD)) == []
    assert any(True for _ in trace.mixed(FORWARD))
    accumulate = [op.seq for op in trace.ops() if op.extra and op.extra[0] == "accumulate"]
    assert [op.seq for op in trace.tagged("accumulate")] == accumulate and len(accumulate) == 4


def test_own_tensors_lists_what_the_module_lists():
    """`modules.own_tensors` reads a module's dicts as `parameters(recurse=False)`/`buffers(recurse=False)` list them
    (a tensor under two names once, in order), and asks a class that lists them its own way."""
    from ampdoctor.audit.modules import own_tensors

    lin = nn.Linear(2, 2)
    lin.register_buffer("scale", torch.ones(2))
    lin.register_buffer("absent", None)
    lin.register_parameter("again", lin.weight)  # the weight under a second name
    assert own_tensors(lin) == (list(lin.parameters(recurse=False)), list(lin.buffers(recurse=False)))
    assert [id(p) for p in own_tensors(lin)[0]] == [id(lin.weight), id(lin.bias)]

    class Hidden(nn.Linear):
        def parameters(self, recurse=True):
            yield self.weight

    hidden = Hidden(2, 2)
    assert [id(p) for p in own_tensors(hidden)[0]] == [id(hidden.weight)]


class _PassThrough(torch.Tensor):
    """A tensor subclass with a torch function override of its own (every call handled in Python, as the subclasses of
    quantization libraries do), passing each through."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return super().__torch_function__(func, types, args, kwargs or {})


def test_module_hooks_read_dtypes_without_passing_them_through_function_modes(monkeypatch):
    """A module hook reads the dtype of each input and output with torch function handling off: under the attention-call
    watch's function mode (and a program's own), each read would otherwise be a Python call through every mode. The
    dtypes are the tensors' own, for plain tensors, parameters, fake tensors and subclasses with an override."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.overrides import TorchFunctionMode

    from ampdoctor.audit import modules

    class Counting(TorchFunctionMode):
        def __init__(self):
            super().__init__()
            self.from_hooks = 0

        def __torch_function__(self, func, types, args=(), kwargs=None):
            if sys._getframe(1).f_code.co_filename == modules.__file__:  # a read the module tracking made
                self.from_hooks += 1
            return func(*args, **(kwargs or {}))

    with FakeTensorMode():
        fake = [torch.empty(2, dtype=torch.bfloat16), torch.empty(2, dtype=torch.int64)]
    kinds = [torch.ones(2, dtype=torch.float16), nn.Parameter(torch.ones(2)), *fake,
             torch.ones(2, dtype=torch.bfloat16).as_subclass(_PassThrough), torch.ones(2, dtype=torch.float64)]
    with Counting() as mode:
        read = modules._float_dtypes(kinds)
    assert mode.from_hooks == 0
    assert read == {t.dtype for t in kinds if t.dtype.is_floating_point} == {torch.float16, torch.float32, torch.bfloat16, torch.float64}

    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
    with Counting() as mode, audit("fp32") as a:
        model(torch.randn(3, 4)).sum().backward()
    assert mode.from_hooks == 0
    assert all(info.inputs == {torch.float32} and info.outputs == {torch.float32} for info in a.recorder.modules)

"""`compare`: where a precision policy costs accuracy, module by module, against a float64 (or fp32) reference.

One step (forward, loss, backward) runs twice on copies of the model: under the reference dtype with autocast off,
and under the policy (params cast to its params dtype, autocast to its compute dtype). Every module's first call is
recorded in both. Per module:

- ``forward_error``: its output under the policy against its reference output (everything upstream included);
- ``local_error``: the module alone, run under the policy on the *reference* inputs cast to the dtypes it received in
  the policy run, against its reference output: the error it adds by itself, so a culprit ranks above the modules
  downstream of it that only inherit its error;
- ``grad_error``: the gradient of the loss with respect to its output; ``param_grad_error``: its own parameters'
  gradients.

All are relative L2 errors, with max-abs and SQNR (dB) in the `ErrorStats`. Update underflow: one AdamW step on the
policy's gradients, computed in float64, added to the weights as stored in the params dtype: the fraction of elements
whose update rounds away (below half an ulp) — the pure-bf16 hazard (AMP119), measured per parameter.

Both runs use eval mode, so dropout draws no different masks in the two runs.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping

import torch
from torch import nn

from ampdoctor import dtypes
from ampdoctor.core.catalog import finding_of
from ampdoctor.core.registry import detectors
from ampdoctor.numerics.capture import Call, Recorder, cast_like, output_grad
from ampdoctor.numerics.metrics import ErrorStats, compare_values, error_stats, float_leaves
from ampdoctor.policy import Policy
from ampdoctor.report import Report

REFERENCES = {"fp64": torch.float64, "fp32": torch.float32}
LossFn = Callable[[Any], torch.Tensor]


@dataclass(frozen=True)
class ModuleError:
    """One module's errors against the reference; a stat is None where there was nothing to compare (no floating
    output, no gradient, no own parameters)."""

    name: str
    type: str
    leaf: bool
    calls: int
    input_dtypes: tuple[str, ...]
    forward: ErrorStats | None
    local: ErrorStats | None
    grad: ErrorStats | None
    param_grad: ErrorStats | None
    # With `compare(..., compiled=True)`: the module compiled with torch.compile, run on the same inputs, against the
    # reference (`compiled`) and against its eager output (`eager_vs_compiled`); None where it was not compiled.
    compiled: ErrorStats | None = None
    eager_vs_compiled: ErrorStats | None = None

    @property
    def forward_error(self) -> float | None:
        return self.forward.rel_l2 if self.forward else None

    @property
    def local_error(self) -> float | None:
        return self.local.rel_l2 if self.local else None

    @property
    def grad_error(self) -> float | None:
        return self.grad.rel_l2 if self.grad else None

    @property
    def param_grad_error(self) -> float | None:
        return self.param_grad.rel_l2 if self.param_grad else None

    def to_dict(self) -> dict[str, Any]:
        stats = {k: (getattr(self, k).to_dict() if getattr(self, k) else None)
                 for k in ("forward", "local", "grad", "param_grad", "compiled", "eager_vs_compiled")}
        return {"name": self.name, "type": self.type, "leaf": self.leaf, "calls": self.calls, "input_dtypes": list(self.input_dtypes), **stats}


@dataclass(frozen=True)
class UpdateUnderflow:
    """Of `considered` elements of `parameter` with a non-zero update, the fraction `lost_fraction` left the weight
    unchanged when the update was added in `dtype`."""

    parameter: str
    module: str
    dtype: str
    lost_fraction: float
    considered: int

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class NumericsContext:
    """What the `numerics` detectors of the rules read."""

    policy: Policy
    reference: str
    modules: tuple[ModuleError, ...]
    updates: tuple[UpdateUnderflow, ...]
    lr: float

    def hotspots(self) -> list[ModuleError]:
        """Leaf modules by local error, largest first: the modules that add the most error by themselves."""
        leaves = [m for m in self.modules if m.leaf and m.local_error is not None]
        return sorted(leaves, key=lambda m: -m.local_error)  # type: ignore[operator]


@dataclass(frozen=True)
class CompareResult:
    policy: Policy
    reference: str
    modules: tuple[ModuleError, ...]
    updates: tuple[UpdateUnderflow, ...]
    loss: Mapping[str, float]
    report: Report
    lr: float = 1e-4
    extra: Mapping[str, Any] = field(default_factory=dict)

    def module(self, name: str) -> ModuleError:
        for m in self.modules:
            if m.name == name:
                return m
        raise KeyError(f"no module named {name!r} ran in the compared step")

    def hotspots(self) -> list[ModuleError]:
        return NumericsContext(self.policy, self.reference, self.modules, self.updates, self.lr).hotspots()

    def to_dict(self) -> dict[str, Any]:
        return {"policy": str(self.policy), "reference": self.reference, "loss": dict(self.loss),
                "modules": [m.to_dict() for m in self.modules], "updates": [u.to_dict() for u in self.updates]}

    def to_html(self, path: str | Path) -> Path:
        from ampdoctor.report.html import render_html

        out = Path(path)
        out.write_text(render_html(self.report), encoding="utf-8")
        return out


# --- running the two steps -------------------------------------------------------------------------


def _call(model: nn.Module, inputs: Any) -> Any:
    if isinstance(inputs, Mapping):
        return model(**inputs)
    if isinstance(inputs, (tuple, list)):
        return model(*inputs)
    return model(inputs)


def _cast_inputs(inputs: Any, dtype: torch.dtype) -> Any:
    if isinstance(inputs, torch.Tensor):
        return inputs.to(dtype) if inputs.is_floating_point() else inputs
    if isinstance(inputs, Mapping):
        return {k: _cast_inputs(v, dtype) for k, v in inputs.items()}
    if isinstance(inputs, (tuple, list)):
        return type(inputs)(_cast_inputs(v, dtype) for v in inputs)
    return inputs


def default_loss(output: Any) -> torch.Tensor:
    """The model's own loss when it returns one (HF ``output.loss``), else the mean square of its floating outputs,
    summed, in at least fp32."""
    loss = output.get("loss") if isinstance(output, Mapping) else getattr(output, "loss", None)
    if isinstance(loss, torch.Tensor) and loss.is_floating_point():
        return loss
    leaves = list(float_leaves(output))
    if not leaves:
        raise ValueError("the model returned no floating tensor: pass loss_fn")
    return sum((t.to(torch.promote_types(t.dtype, torch.float32)).square().mean() for t in leaves), torch.zeros(()))


@dataclass
class _Run:
    model: nn.Module
    calls: dict[str, Call]
    loss: float


def _step(model: nn.Module, inputs: Any, autocast: Any, loss_fn: LossFn) -> _Run:
    with Recorder(model) as rec:
        with autocast:
            output = _call(model, inputs)
        loss = loss_fn(output)
        if not (isinstance(loss, torch.Tensor) and loss.numel() == 1):
            raise ValueError("loss_fn must return a scalar tensor")
        if loss.requires_grad:
            loss.backward()
    return _Run(model, rec.calls, float(loss.detach()))


def _local_error(module: nn.Module, ref: Call, pol: Call, autocast: Any) -> ErrorStats | None:
    args = cast_like(ref.args, pol.args)
    kwargs = cast_like(ref.kwargs, pol.kwargs)
    try:
        with torch.no_grad(), autocast:
            out = module(*args, **kwargs)
    except Exception:  # noqa: BLE001 - a module that cannot be re-run alone (state, hooks) has no local error
        return None
    return compare_values(out, ref.output)


def _compiled_errors(module: nn.Module, ref: Call, pol: Call, autocast: Any) -> tuple[ErrorStats | None, ErrorStats | None]:
    """The module compiled (inductor fuses elementwise chains and keeps their intermediates in fp32 where eager
    rounds each one to the compute dtype), run on the reference's inputs as the policy received them: its error
    against the reference, and its difference from the eager module on the same inputs."""
    args, kwargs = cast_like(ref.args, pol.args), cast_like(ref.kwargs, pol.kwargs)
    try:
        fn = torch.compile(module, dynamic=False)
        with torch.no_grad(), autocast:
            eager = module(*args, **kwargs)
            compiled = fn(*args, **kwargs)
    except Exception:  # noqa: BLE001 - a module that cannot be compiled or re-run alone is not compared
        return None, None
    return compare_values(compiled, ref.output), compare_values(compiled, eager)


def _compilable(module: nn.Module) -> bool:
    """Modules whose own forward has arithmetic to fuse: a torch.nn leaf (Linear, Embedding, LayerNorm, Dropout) is
    one library kernel either way."""
    own_code = not type(module).__module__.startswith("torch.nn.")
    return own_code or any(True for _ in module.children())


def _with_compiled(errors: list[ModuleError], ref: _Run, pol: _Run, autocast_of: Callable[[], Any]) -> list[ModuleError]:
    modules = dict(pol.model.named_modules())
    out = []
    for m in errors:
        module = modules[m.name]
        if m.local is not None and _compilable(module):
            compiled, diff = _compiled_errors(module, ref.calls[m.name], pol.calls[m.name], autocast_of())
            m = replace(m, compiled=compiled, eager_vs_compiled=diff)
        out.append(m)
    return out


def _param_grad(module: nn.Module) -> torch.Tensor | None:
    grads = [p.grad.reshape(-1).to(torch.float64) for p in module.parameters(recurse=False) if p.grad is not None]
    return torch.cat(grads) if grads else None


def _stats(approx: torch.Tensor | None, reference: torch.Tensor | None) -> ErrorStats | None:
    if approx is None or reference is None or approx.numel() != reference.numel():
        return None
    return error_stats(approx, reference)


def _module_errors(ref: _Run, pol: _Run, autocast_of: Callable[[], Any]) -> list[ModuleError]:
    ref_modules = dict(ref.model.named_modules())
    out = []
    for name, module in pol.model.named_modules():
        if name not in pol.calls or name not in ref.calls:
            continue
        rc, pc = ref.calls[name], pol.calls[name]
        # A leaf of the step: no child module of it ran (a container whose children were bypassed counts as one).
        leaf = not any((f"{name}.{child}" if name else child) in pol.calls for child, _ in module.named_children())
        out.append(ModuleError(
            name=name, type=type(module).__name__, leaf=leaf, calls=pc.calls, input_dtypes=pc.input_dtypes,
            forward=compare_values(pc.output, rc.output), local=_local_error(module, rc, pc, autocast_of()),
            grad=_stats(output_grad(pc), output_grad(rc)),
            param_grad=_stats(_param_grad(module), _param_grad(ref_modules[name])),
        ))
    return out


# --- update underflow ------------------------------------------------------------------------------


def update_underflow(model: nn.Module, dtype: torch.dtype, lr: float = 1e-4) -> list[UpdateUnderflow]:
    """One AdamW step (default hyper-parameters, learning rate `lr`) on `model`'s current gradients, computed in
    float64; per parameter with a gradient, the fraction of elements whose update is lost when added to the weight
    stored in `dtype` (the sum rounds back to the same value)."""
    owners = {id(p): name for name, m in model.named_modules() for p in m.parameters(recurse=False)}
    named = [(n, p) for n, p in model.named_parameters() if p.grad is not None]
    if not named:
        return []
    shadow = [nn.Parameter(p.detach().to(torch.float64)) for _, p in named]
    for s, (_, p) in zip(shadow, named):
        s.grad = p.grad.detach().to(torch.float64)
    torch.optim.AdamW(shadow, lr=lr, foreach=False).step()
    out = []
    for s, (name, p) in zip(shadow, named):
        stored = p.detach().to(dtype)
        update = s.detach() - p.detach().to(torch.float64)
        moving = update != 0
        considered = int(moving.sum())
        if considered == 0:
            continue
        lost = ((stored.to(torch.float64) + update).to(dtype) == stored) & moving
        out.append(UpdateUnderflow(name, owners.get(id(p), ""), dtypes.name_of(dtype) or str(dtype), float(lost.sum()) / considered, considered))
    return out


# --- the public function ---------------------------------------------------------------------------


def _findings(ctx: NumericsContext) -> list[Any]:
    return [finding_of(d.rule_id, hit) for d in detectors("numerics") for hit in d.fn(ctx)]


def compare(
    model: nn.Module,
    inputs: Any,
    policy: Policy | str = "bf16-mixed",
    reference: str = "fp64",
    loss_fn: LossFn | None = None,
    *,
    lr: float = 1e-4,
    compiled: bool = False,
) -> CompareResult:
    """Run one step of `model` on `inputs` (a tuple of positional arguments, a dict of keyword arguments, or one
    tensor) under `reference` and under `policy`, and measure where the policy costs accuracy (module docstring).
    `model` itself is not changed: both runs use copies. ``loss_fn(output) -> scalar`` defaults to `default_loss`.
    With `compiled`, each module with arithmetic of its own is also compiled (torch.compile) and run on the same
    inputs, to name the modules whose compiled numbers differ from eager ones (slow: one compilation each)."""
    pol = policy if isinstance(policy, Policy) else Policy.parse(policy)
    if reference not in REFERENCES:
        raise ValueError(f"unknown reference {reference!r}: expected one of {', '.join(REFERENCES)}")
    ref_dtype = REFERENCES[reference]
    first = next(model.parameters(), None)
    device_type = first.device.type if first is not None else "cpu"
    loss = loss_fn or default_loss

    ref_model = copy.deepcopy(model).to(ref_dtype).eval()
    pol_model = copy.deepcopy(model).to(pol.param_dtype).eval()
    torch.manual_seed(0)
    ref = _step(ref_model, _cast_inputs(inputs, ref_dtype), torch.autocast(device_type, enabled=False), loss)
    torch.manual_seed(0)
    run = _step(pol_model, inputs, pol.autocast(device_type), loss)
    errors = _module_errors(ref, run, lambda: pol.autocast(device_type))
    modules = tuple(_with_compiled(errors, ref, run, lambda: pol.autocast(device_type)) if compiled else errors)
    updates = tuple(update_underflow(pol_model, pol.param_dtype, lr))
    ctx = NumericsContext(pol, reference, modules, updates, lr)
    from ampdoctor.numerics.views import compare_report

    losses = {"reference": ref.loss, "policy": run.loss}
    report = compare_report(ctx, _findings(ctx), losses)
    return CompareResult(pol, reference, modules, updates, losses, report, lr)


"""`PrecisionStep`: one optimizer step over micro-batches, wired from a `Policy` so the five incidents cannot happen.

- autocast to ``policy.compute`` with the dtype always given (AMP107); the loss is computed outside autocast on
  fp32 outputs (AMP125);
- a GradScaler only for fp16 compute with loss scaling, never for bf16 (incident 4, AMP004);
- gradients accumulated across micro-batches in ``policy.grad_accum``: in ``.grad`` when that is the parameter
  dtype, else in separate buffers written back once before the update. ``.grad`` itself is never retyped, so
  autograd never meets a mismatched ``.grad`` (incident 3) and bf16 sums do not round at every micro-batch (AMP117);
- parameters must be in ``policy.params`` (AMP128), and rotary tables are made exact and cast-immune with
  `ampdoctor.fix.rope` (incident 2, AMP002); the rotary math of `ampdoctor.nn` accepts mixed dtypes (incidents 1, 5).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

import torch
from torch import nn

from ampdoctor import fix
from ampdoctor.core import Severity
from ampdoctor.dtypes import HALF, name_of
from ampdoctor.facts import RunFacts
from ampdoctor.policy import Policy

Forward = Callable[[nn.Module, Any], Any]
LossFn = Callable[[Any, Any], torch.Tensor]


@dataclass(frozen=True)
class StepResult:
    loss: float  # mean fp32 loss over the micro-batches
    micro_batches: int
    skipped: bool  # fp16 loss scaling found inf/NaN gradients and skipped the update
    grad_norm: float | None  # before clipping, when max_grad_norm is set


def default_forward(model: nn.Module, inputs: Any) -> Any:
    """``model(x)`` for a tensor, ``model(*xs)`` for a tuple/list, ``model(**kw)`` for a mapping."""
    if isinstance(inputs, Mapping):
        return model(**inputs)
    if isinstance(inputs, (tuple, list)):
        return model(*inputs)
    return model(inputs)


def to_fp32(output: Any) -> Any:
    """Floating tensors in ``output`` (nested tuples, lists, mappings) upcast to fp32; everything else as is."""
    if isinstance(output, torch.Tensor):
        return output.float() if output.is_floating_point() and output.dtype != torch.float64 else output
    if isinstance(output, Mapping):
        return {key: to_fp32(value) for key, value in output.items()}
    if isinstance(output, (tuple, list)):
        return type(output)(to_fp32(value) for value in output)
    return output


class PrecisionStep:
    """Run ``step(micro_batches)``: each micro-batch is ``(inputs, target)``; returns a `StepResult`.

    ``forward(model, inputs)`` runs under the policy's autocast (default: `default_forward`); ``loss_fn(outputs,
    target)`` runs outside it, on outputs upcast to fp32, and must return a scalar fp32 loss. The micro-batch
    losses are averaged, so the update equals one over the concatenated batch for mean-reduced losses.
    """

    def __init__(
        self,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        policy: Policy | str = "bf16-mixed",
        loss_fn: LossFn | None = None,
        *,
        forward: Forward = default_forward,
        device_type: str | None = None,
        max_grad_norm: float | None = None,
        fix_rope: bool = True,
    ) -> None:
        if loss_fn is None:
            raise TypeError("PrecisionStep needs loss_fn(outputs, target) -> scalar loss")
        self.policy = Policy.parse(policy) if isinstance(policy, str) else policy
        if not isinstance(self.policy, Policy):
            raise TypeError(f"policy must be a Policy or a policy string, got {type(policy).__name__}")
        self.model, self.optimizer, self.loss_fn, self.forward = model, optimizer, loss_fn, forward
        self._check_policy()
        self.params = self._trainable_params()
        first = next(iter(model.parameters()))
        self.device_type = device_type or first.device.type
        if max_grad_norm is not None and not max_grad_norm > 0:
            raise ValueError(f"max_grad_norm must be positive, got {max_grad_norm}")
        self.max_grad_norm = max_grad_norm
        self.scaler = self.policy.grad_scaler(self.device_type)
        # Separate accumulation buffers only when .grad (always in the parameter dtype) is the wrong dtype to sum in.
        self.separate_accumulation = self.policy.grad_accum != self.policy.params
        self.rope_fixes = fix.rope(model) if fix_rope else []

    def facts(self) -> RunFacts:
        """What this step knows of its run: it trains with this optimizer, autocasts exactly when compute is a half
        dtype other than the parameters', and the world size when torch.distributed is initialised. How many
        micro-batches it accumulates is known per call only."""
        world = None
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            world = torch.distributed.get_world_size()
        kind = "plain" if type(self.optimizer).__module__.startswith("torch.optim") else None
        autocast = self.policy.compute in HALF and self.policy.compute != self.policy.params
        return RunFacts(trains=True, optimizer=type(self.optimizer).__name__, optimizer_kind=kind, world_size=world, autocast=autocast)

    def _check_policy(self) -> None:
        findings = self.policy.validate(facts=self.facts())
        errors = [f for f in findings if f.severity == Severity.ERROR]
        if errors:
            raise ValueError(f"policy {self.policy} cannot train correctly: " + "; ".join(f"[{f.name}] {f.message}" for f in errors))
        for f in findings:
            warnings.warn(f"ampdoctor [{f.name}] {f.message}", RuntimeWarning, stacklevel=3)

    def _trainable_params(self) -> list[nn.Parameter]:
        in_model = {id(p) for p in self.model.parameters()}
        params = [p for group in self.optimizer.param_groups for p in group["params"]]
        if not params:
            raise ValueError("the optimizer has no parameters")
        strangers = sum(id(p) not in in_model for p in params)
        if strangers:
            raise ValueError(f"{strangers} optimizer parameter(s) do not belong to the model")
        names = {id(p): name for name, p in self.model.named_parameters()}
        wrong = [(names[id(p)], name_of(p.dtype)) for p in params if name_of(p.dtype) != self.policy.params]
        if wrong:
            name, dtype = wrong[0]
            raise ValueError(
                f"parameter {name!r} is {dtype} ({len(wrong)} trainable parameter(s) in all), but the policy "
                f"says params={self.policy.params}: load the model in {self.policy.params} and let "
                f"autocast run compute={self.policy.compute}, or pick a policy with params={dtype}"
            )
        return params

    def _loss(self, inputs: Any, target: Any) -> torch.Tensor:
        with self.policy.autocast(self.device_type):
            outputs = self.forward(self.model, inputs)
        with torch.autocast(self.device_type, enabled=False):
            loss = self.loss_fn(to_fp32(outputs), target)
        if not isinstance(loss, torch.Tensor) or loss.dim() != 0:
            shape = tuple(loss.shape) if isinstance(loss, torch.Tensor) else type(loss).__name__
            raise ValueError(f"loss_fn must return a scalar tensor, got {shape}")
        if loss.dtype not in (torch.float32, torch.float64):
            raise TypeError(
                f"loss_fn returned a {name_of(loss.dtype)} loss from fp32 outputs; compute it in fp32 "
                "(a bf16 loss rounds to 1/128 of its value, rule loss-low-precision)"
            )
        return loss

    def __call__(self, micro_batches: Iterable[tuple[Any, Any]]) -> StepResult:
        batches = list(micro_batches)
        if not batches:
            raise ValueError("PrecisionStep needs at least one (inputs, target) micro-batch")
        self.optimizer.zero_grad(set_to_none=True)
        sums: dict[int, torch.Tensor] = {}
        total = torch.zeros((), dtype=torch.float64)
        for batch in batches:
            if not isinstance(batch, (tuple, list)) or len(batch) != 2:
                raise ValueError(f"each micro-batch must be an (inputs, target) pair, got {type(batch).__name__}")
            loss = self._loss(*batch)
            total += loss.detach().double().cpu()
            scaled = loss / len(batches)
            (self.scaler.scale(scaled) if self.scaler is not None else scaled).backward()
            if self.separate_accumulation:
                for p in self.params:
                    if p.grad is not None:
                        grad = p.grad.to(self.policy.grad_accum_dtype)
                        sums[id(p)] = sums[id(p)] + grad if id(p) in sums else grad
                        p.grad = None
        if self.separate_accumulation:
            for p in self.params:
                if id(p) in sums:
                    p.grad = sums[id(p)].to(p.dtype)  # one rounding, of the whole sum
        return self._update(float(total) / len(batches), len(batches))

    def _update(self, loss: float, count: int) -> StepResult:
        if self.scaler is not None:
            self.scaler.unscale_(self.optimizer)
        grad_norm = None
        if self.max_grad_norm is not None:
            grad_norm = float(torch.nn.utils.clip_grad_norm_(self.params, self.max_grad_norm))
        skipped = False
        if self.scaler is not None:
            scale = self.scaler.get_scale()
            self.scaler.step(self.optimizer)
            self.scaler.update()
            skipped = self.scaler.get_scale() < scale
        else:
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return StepResult(loss, count, skipped, grad_norm)

"""`audit()`: record real training steps and report what the dtype flow did against a `Policy`."""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, Callable

import torch

from ampdoctor import dtypes
from ampdoctor.audit.observe import Observed
from ampdoctor.audit.recorder import Recorder
from ampdoctor.policy import Policy
from ampdoctor.report import Report, ReportInfo


def _policy(policy: Policy | str | None) -> Policy | None:
    if policy is None or isinstance(policy, Policy):
        return policy
    return Policy.parse(policy)


def default_device_type() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


class Audit:
    """``with Audit(policy="bf16-mixed") as a: <forward, loss, backward, optimizer step>`` then
    ``a.report``. Restores every hook and mode it installs on exit, also when the step raises;
    the exception is diagnosed in the report and then propagates unchanged. Without a policy the run is
    judged by the policy it is observed to run (autocast dtype, parameter dtypes, scaler).

    One audit records at a time in a process: the module, optimizer and autocast hooks it installs are
    process-wide, so entering a second audit while one is recording (nested, or in another thread) raises
    `RuntimeError` naming the one that records, before anything is installed. The recording audit ignores what
    other threads do (their modules, optimizer steps and autocast contexts; their ops never reach its dispatch
    mode), so its report holds only the steps of the thread that entered it. Everything it installs is removed on
    exit, also when the step raises or the report cannot be built."""

    def __init__(
        self,
        policy: Policy | str | None = None,
        *,
        model: torch.nn.Module | None = None,
        device_type: str | None = None,
        target_device: str | None = None,
        max_steps: int | None = None,
        on_stop: Callable[[], None] | None = None,
        checked: tuple[str, ...] = (),
        watch_values: bool | str = True,  # False: no value watch; "exact": read every element of large results
        every: int | None = None,  # record one optimizer step in `every` (up to max_steps of them), the rest run free
    ) -> None:
        self.policy = _policy(policy)
        self.model = model
        self.device_type = device_type or default_device_type()
        self.target_device = target_device or self.device_type
        self.checked = checked or ("training step",)
        self.recorder = Recorder(device_type=self.device_type, max_steps=max_steps, on_stop=on_stop, watch_values=watch_values,
                                 every=every)
        self.recorder.label = f"ampdoctor.audit of {', '.join(self.checked)}"
        self._report: Report | None = None
        self.exception: BaseException | None = None
        self.observed: Observed | None = None  # the policy and facts the run was seen to have

    @property
    def report(self) -> Report:
        if self._report is None:
            raise RuntimeError("the audit's report exists once its `with` block has exited")
        return self._report

    def __enter__(self) -> "Audit":
        self.recorder.__enter__()
        if self.model is not None:
            try:
                self.recorder.scan_tree(self.model)
            except BaseException:
                self.recorder.__exit__(None, None, None)
                raise
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> bool:
        from ampdoctor.audit.analysis import analysis_failed

        self.exception = exc if isinstance(exc, Exception) else None
        try:
            self.recorder.__exit__(exc_type, exc, tb)  # removes every hook and patch, whatever happens in it
        except Exception as err:  # ending the recording failed: reported, never raised into the user's program
            self._report = analysis_failed(err, self.checked)
            self.recorder.release()
            return False
        try:
            self._report = self.build_report(self.exception)
        finally:
            self.recorder.release()
        return False

    def build_report(self, exc: BaseException | None) -> Report:
        from ampdoctor.audit.analysis import analysis_failed, analyze

        try:
            done = analyze(self.recorder, self.policy, target_device=self.target_device, model=self.model, exc=exc, checked=self.checked)
        except Exception as err:  # the audit must never take the user's program down with it
            return analysis_failed(err, self.checked)
        self.observed = done.observed
        return done.report

    def stop(self) -> None:
        self.recorder.stop()


def audit(policy: Policy | str | None = None, **kwargs: Any) -> Audit:
    """``with ampdoctor.audit(policy="bf16-mixed") as a: ...`` then ``a.report``; without a policy, the run is
    judged by the one it is observed to run.

    One audit records at a time per process: a second `audit()` entered while one records (nested, or from
    another thread) raises `RuntimeError` naming the recording one, and installs nothing. The recording audit
    sees only the thread that entered it (and autograd's threads running its backward); other threads' steps are
    ignored, not mixed into its report. Every hook and patch it installs (module and optimizer hooks, the autocast
    `__enter__`/`__exit__` wrappers, the dispatch mode) is removed when its `with` block exits, also when the
    block raises."""
    return Audit(policy, **kwargs)


def inspect_model(model: torch.nn.Module, policy: Policy | str | None = None, *, device_type: str | None = None) -> Report:
    """The checks a model needs no step for, at rest: its buffers and tensor attributes (half rotary tables and
    `inv_freq`) and parameters, asked of the same runtime detectors a step audit asks. No op runs, no hook is
    installed; the policy-level rules wait for a step, where the policy that runs can be seen."""
    from ampdoctor.audit.analysis import analysis_failed, analyze

    dev = device_type or next((p.device.type for p in model.parameters()), default_device_type())
    recorder = Recorder(device_type=dev)
    for module in model.modules():
        recorder.scan_module(recorder.module_index(module), "before")
    checked = (f"model {type(model).__name__} at rest",)
    try:
        report = analyze(recorder, _policy(policy), target_device=dev, model=model, exc=None, checked=checked, judge_policy=False).report
        # A model at rest runs no policy: the one analyze() would infer from its weights alone says nothing.
        return dataclasses.replace(report, info=ReportInfo())
    except Exception as err:  # the inspection must never take the user's program down with it
        return analysis_failed(err, checked)
    finally:
        recorder.release()


def _default_loss(output: Any, batch: Any) -> torch.Tensor:
    loss = getattr(output, "loss", None)
    if loss is None and isinstance(output, dict):
        loss = output.get("loss")
    if loss is None and isinstance(output, torch.Tensor) and output.dim() == 0:
        loss = output
    if loss is None:
        raise ValueError("the model returned no loss: pass loss_fn(output, batch) -> scalar tensor")
    return loss


def _step(model: torch.nn.Module, batch: Any, loss_fn: Callable[[Any, Any], torch.Tensor] | None, optimizer: Any,
          autocast: Any) -> tuple[Any, torch.Tensor]:
    with autocast:
        if isinstance(batch, dict):
            output = model(**batch)
        elif isinstance(batch, (list, tuple)):
            output = model(*batch)
        else:
            output = model(batch)
        loss = (loss_fn or _default_loss)(output, batch)
    loss.backward()
    if optimizer is not None:
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return output, loss


def audit_step(
    model: torch.nn.Module,
    batch: Any,
    loss_fn: Callable[[Any, Any], torch.Tensor] | None = None,
    optimizer: torch.optim.Optimizer | None = None,
    policy: Policy | str = "bf16-mixed",
    *,
    device_type: str | None = None,
    target_device: str | None = None,
    reraise: bool = True,
) -> Audit:
    """Run and audit one training step the way `policy` says: autocast to the compute dtype when the
    parameters are wider than it, then loss, backward and (if given) the optimizer step. A step that raises is
    diagnosed in the report; the exception then propagates, or with ``reraise=False`` stays in `Audit.exception`
    (the run contract of the CLI: a report and an exit code, never a traceback)."""
    pol = _policy(policy) or Policy.preset("bf16-mixed")
    dev = device_type or next((p.device.type for p in model.parameters()), default_device_type())
    params = next((dtypes.name_of(p.dtype) for p in model.parameters()), pol.params)
    use_autocast = pol.compute in dtypes.HALF and params != pol.compute
    a = Audit(pol, model=model, device_type=dev, target_device=target_device, checked=(f"train step of {type(model).__name__}",))
    try:
        with a:
            output, loss = _step(model, batch, loss_fn, optimizer, torch.autocast(dev, dtype=pol.compute_dtype) if use_autocast else contextlib.nullcontext())
    except Exception:
        if reraise:
            raise
        return a
    a.output = output  # type: ignore[attr-defined]
    a.loss = loss  # type: ignore[attr-defined]
    return a

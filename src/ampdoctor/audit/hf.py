"""Audit one train step of a transformers model built from a config (random init, no download),
on real tensors or on fake ones (`FakeTensorMode`: no memory for weights, so a 70B config audits
on a laptop)."""

from __future__ import annotations

import contextlib
import gc
import json
import os
from typing import Any

import torch

from ampdoctor import dtypes
from ampdoctor.audit.session import Audit, audit_step
from ampdoctor.policy import Policy


class ConfigError(ValueError):
    pass


def _one_line(err: BaseException, limit: int = 400) -> str:
    text = " ".join(str(err).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def load_config(path: str) -> Any:
    try:
        import transformers
    except ImportError:
        raise ConfigError("auditing a transformers config needs transformers: pip install 'ampdoctor[transformers]'") from None
    if not os.path.isfile(path):
        raise ConfigError(f"cannot read {path}: no such file")
    try:
        with open(path, encoding="utf-8") as fh:
            raw = json.load(fh)
    except (OSError, ValueError) as err:
        raise ConfigError(f"cannot read {path}: {err}") from None
    if not isinstance(raw, dict) or "model_type" not in raw:
        raise ConfigError(f"{path}: not a transformers config (no \"model_type\")")
    model_type = raw.pop("model_type")
    try:
        return transformers.AutoConfig.for_model(model_type, **raw)
    # User JSON reaches transformers' validators, which raise their own exception types (e.g.
    # huggingface_hub's StrictDataclassFieldValidationError): every one of them is a bad config.
    except Exception as err:  # noqa: BLE001
        raise ConfigError(f"{path}: invalid config: {type(err).__name__}: {_one_line(err)}") from None


def build_model(config: Any, policy: Policy) -> torch.nn.Module:
    import transformers

    try:
        model = transformers.AutoModelForCausalLM.from_config(config)
    except Exception as err:  # noqa: BLE001  - inconsistent sizes fail anywhere in the model's __init__
        raise ConfigError(f"cannot build a causal LM from this config: {type(err).__name__}: {_one_line(err)}") from None
    # The model is audited as the policy holds it: from_config follows the config's own `torch_dtype`
    # (a bf16 checkpoint's config builds bf16 weights), which would be the config's policy, not the one judged.
    # Half params are made as users make them, `model.to(dtype)`, buffers included.
    if policy.params in dtypes.HALF or any(p.is_floating_point() and p.dtype != policy.param_dtype for p in model.parameters()):
        _cast(model, policy.param_dtype)
    model.train()
    return model


def _cast(model: torch.nn.Module, dtype: torch.dtype) -> None:
    """`model.to(dtype)` for floating params and buffers, assigning new tensors: `Module.to`
    cannot swap fake parameters in place."""
    with torch.no_grad():
        for m in model.modules():
            for k, p in list(m._parameters.items()):
                if p is not None and p.is_floating_point():
                    m._parameters[k] = torch.nn.Parameter(p.to(dtype), requires_grad=p.requires_grad)
            for k, b in list(m._buffers.items()):
                if b is not None and b.is_floating_point():
                    m._buffers[k] = b.to(dtype)


def _vocab_size(config: Any) -> int:
    """The vocabulary the token ids are drawn from: the text model's (a composite config's top-level `vocab_size`,
    where there is one, can be larger than the embedding the ids reach)."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    return int(getattr(text, "vocab_size", None) or getattr(config, "vocab_size", None) or 32000)


@contextlib.contextmanager
def _collector_paused() -> Any:
    """Automatic garbage collection off for a fake audit, as it was after. The recording keeps a few objects per op
    (its record, a weakref to each result), about 200,000 for a 70B step: they trigger collections that also promote
    the step's own short-lived objects, until a full collection walks every object of the process (a tenth of the
    audit's time). Fake tensors hold no memory, so nothing waits on those collections.

    Turned back on, the collector would first walk every object the audit made (they are all young), though nearly
    all of them are alive (the records, which the report holds) or freed by reference counting when the audit goes:
    about 100,000 objects for a 70B step, walked to collect the step's few cycles. They are filed as old instead
    (`gc.freeze` then `gc.unfreeze` moves every tracked object to the oldest generation, in constant time), where
    the next full collection finds those cycles. Only where nothing was frozen before: `unfreeze` would also let go
    of the objects a program froze itself (a server that forks)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            if gc.get_freeze_count() == 0:
                gc.freeze()
                gc.unfreeze()
            gc.enable()


def audit_hf_config(
    path: str,
    *,
    policy: Policy | str = "bf16-mixed",
    fake: bool = False,
    seq_len: int = 128,
    batch_size: int = 1,
    optimizer: bool | None = None,
    device_type: str = "cpu",
    target_device: str | None = None,
    reraise: bool = True,
) -> Audit:
    """Build the model from `path` and audit one step: forward, loss, backward and (by default on
    real tensors only) an AdamW step. A step that raises is diagnosed in the report; with ``reraise=False`` the
    exception stays in `Audit.exception` instead of propagating."""
    pol = policy if isinstance(policy, Policy) else Policy.parse(policy)
    config = load_config(path)
    mode = contextlib.nullcontext()
    if fake:
        from ampdoctor.audit.fakes import FaithfulFakeTensorMode

        mode = FaithfulFakeTensorMode(allow_non_fake_inputs=False)
    with mode, _collector_paused() if fake else contextlib.nullcontext():
        torch.manual_seed(0)
        model = build_model(config, pol)
        vocab = _vocab_size(config)
        ids = torch.randint(0, vocab, (batch_size, seq_len))
        batch = {"input_ids": ids, "labels": ids}
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False) if (optimizer if optimizer is not None else not fake) else None
        return audit_step(model, batch, optimizer=opt, policy=pol, device_type=device_type, target_device=target_device, reraise=reraise)

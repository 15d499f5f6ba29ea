"""Fault injectors for bench/archsweep: one per rule with a runtime detector.

An injector is ``fn(model, config, batch, step) -> None | str``: it plants its rule's fault into a freshly built
model (buffers, hooks, dtypes) and/or into the step (policy, autocast dtype, micro-batches, loss, optimizer),
and returns None, or a sentence saying why the fault cannot be planted into this architecture (then it is
counted as not injectable, not as a miss). Every injection is a fault a user really makes, kept as small as
the rule's trigger allows; the docstring says which.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket

import torch
import torch.nn.functional as F

INJECTORS: dict = {}


def injector(rule: str):
    def deco(fn):
        INJECTORS[rule] = fn
        return fn

    return deco


# ------------------------------------------------------------------------------------------------ helpers

_ROTARY_BUFFERS = ("inv_freq", "cos_cached", "sin_cached", "_cos_cached", "_sin_cached", "cos", "sin", "freqs", "freqs_cis")


def rotary_modules(model):
    return [(n, m) for n, m in model.named_modules() if "rotary" in type(m).__name__.lower() or n.endswith("rotary_emb")]


def rotary_buffers(model):
    """(module, buffer name) of the floating rotary tables of the model."""
    out = []
    for name, m in model.named_modules():
        for k, b in m._buffers.items():
            if b is not None and b.is_floating_point() and (k in _ROTARY_BUFFERS or "inv_freq" in k or k.endswith("_cached")):
                out.append((m, k))
    return out


def _embedding_hook(model, step, fn):
    """A forward hook on the input embeddings that replaces their output by fn(output); a reason if impossible."""
    try:
        emb = model.get_input_embeddings()
    except Exception:  # noqa: BLE001
        emb = None
    if emb is None:
        return "no input embeddings (get_input_embeddings)"

    fired = []

    def hook(module, args, out):
        if not isinstance(out, torch.Tensor) or not out.is_floating_point():
            return out
        fired.append(1)
        return fn(out)

    emb.register_forward_hook(hook)
    step.check = lambda: None if fired else "the input embeddings module never ran with a float output (called another way)"
    return None


def _lm_loss(logits, labels):
    return F.cross_entropy(logits.flatten(0, -2)[: labels.numel()], labels.flatten()[: logits.flatten(0, -2).shape[0]])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ------------------------------------------------------------------------------------------------ injectors


@injector("AMP001")
def params_not_as_policy(model, cfg, batch, step):
    """The run is audited as bf16-mixed (fp32 params) but the model was cast to bf16 (`model.to(bf16)`, no autocast)."""
    model.to(torch.bfloat16)
    step.autocast_dtype = None


@injector("AMP002")
def rotary_tables_bf16(model, cfg, batch, step):
    """The rotary `inv_freq` / cos / sin buffers cast to bf16 (what `model.to(bf16)` or `.bfloat16()` on a module does)."""
    bufs = rotary_buffers(model)
    if not bufs:
        return "no rotary inv_freq/cos/sin buffer"
    for m, k in bufs:
        m._buffers[k] = m._buffers[k].to(torch.bfloat16)


@injector("AMP003")
def grads_recast_between_micro_batches(model, cfg, batch, step):
    """Two micro-batches; after the first backward, the .grad of every parameter is recast to fp16 (e.g. a hook that
    compresses gradients), so the second accumulates into a .grad of another dtype than its fp32 parameter."""
    step.micro = 2

    def recast(model, i):
        if i == 0:
            for p in model.parameters():
                if p.grad is not None:
                    p.grad.data = p.grad.data.to(torch.float16)  # ampdoctor: ignore[AMP003] (the injected fault)

    step.after_backward.append(recast)


@injector("AMP005")
def rotary_table_other_dtype(model, cfg, batch, step):
    """fp32 training (no autocast) whose rotary embedding computes its cos/sin in bf16 (a table made by a module
    cast to bf16): a bf16 table meets fp32 q/k. (Under bf16 autocast a half table meets bf16 q/k, no mismatch;
    an fp16 table there is AMP121.)"""
    mods = [m for _, m in rotary_modules(model) if not list(m.children())]
    if not mods:
        return "no rotary embedding module"

    fired = []

    def hook(module, args, out):
        if isinstance(out, tuple) and len(out) == 2 and all(isinstance(t, torch.Tensor) and t.is_floating_point() for t in out):
            c, s = out
            fired.append(1)
            return (torch.cos(torch.acos(c.clamp(-1, 1)).to(torch.bfloat16)), torch.sin(torch.asin(s.clamp(-1, 1)).to(torch.bfloat16)))
        return out

    for m in mods:
        m.register_forward_hook(hook)
    step.autocast_dtype = None
    step.policy = "fp32"
    step.check = lambda: None if fired else "the rotary module returns no real (cos, sin) pair (complex freqs_cis or another layout)"


@injector("AMP101")
def rope_angles_under_autocast(model, cfg, batch, step):
    """The rotary embedding computes its angles as transformers did before PR #29285: `inv_freq @ position_ids.float()`
    under the step's bf16 autocast (no `autocast(enabled=False)` around them), then cos/sin of them. Where the
    module's own (cos, sin) have another layout (partial or multi-axis rotary), it keeps its own."""
    mods = [m for _, m in rotary_modules(model) if not list(m.children()) and isinstance(getattr(m, "inv_freq", None), torch.Tensor)]
    if not mods:
        return "no rotary embedding module with an inv_freq buffer"
    fired = []

    def under_autocast(module):
        own = module.forward

        def forward(x, position_ids, *args, **kwargs):
            cos, sin = own(x, position_ids, *args, **kwargs)
            if not isinstance(position_ids, torch.Tensor) or position_ids.is_floating_point() or position_ids.dim() != 2:
                return cos, sin
            inv = module.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
            freqs = (inv @ position_ids[:, None, :].float()).transpose(1, 2)
            emb = torch.cat((freqs, freqs), dim=-1)
            if emb.shape != cos.shape:
                return cos, sin
            fired.append(1)
            scale = getattr(module, "attention_scaling", 1.0)
            return (emb.cos() * scale).to(x.dtype), (emb.sin() * scale).to(x.dtype)

        return forward

    for m in mods:
        m.forward = under_autocast(m)
    step.check = lambda: None if fired else "the rotary module returns no (cos, sin) of inv_freq x position_ids in the Llama layout"


@injector("AMP103")
def positions_in_bf16(model, cfg, batch, step):
    """Position ids 1000..1015 cast to bf16 before the rotary embedding (bf16 is exact for integers up to 256)."""
    mods = [m for _, m in rotary_modules(model) if not list(m.children())]
    if not mods:
        return "no rotary embedding module"
    batch["position_ids"] = torch.arange(1000, 1000 + batch["input_ids"].shape[1]).expand_as(batch["input_ids"]).clone()

    seen = []

    def pre(module, args, kwargs):
        seen.extend(1 for a in list(args) + list(kwargs.values()) if isinstance(a, torch.Tensor) and not a.is_floating_point() and a.dim() == 2)
        args = tuple(a.to(torch.bfloat16) if isinstance(a, torch.Tensor) and not a.is_floating_point() and a.dim() == 2 else a for a in args)
        kwargs = {k: (v.to(torch.bfloat16) if k == "position_ids" and isinstance(v, torch.Tensor) else v) for k, v in kwargs.items()}
        return args, kwargs

    for m in mods:
        m.register_forward_pre_hook(pre, with_kwargs=True)
    step.check = lambda: None if seen else "the rotary module gets no integer position_ids"


@injector("AMP117")
def grads_accumulated_in_bf16(model, cfg, batch, step):
    """Two micro-batches; after the first backward the .grad is kept in bf16 (a memory saving), so the second
    backward accumulates into bf16 gradients; they are cast back to fp32 for the fp32 optimizer step."""
    step.micro = 2

    def recast(model, i):
        for p in model.parameters():
            if p.grad is not None:  # kept in bf16 between micro-batches, back to fp32 for the optimizer
                p.grad.data = p.grad.data.to(torch.bfloat16 if i < step.micro - 1 else torch.float32)  # ampdoctor: ignore[AMP003] (the injected fault)

    step.after_backward.append(recast)


@injector("AMP119")
def pure_bf16_adamw(model, cfg, batch, step):
    """Pure bf16 training: the model cast to bf16, no autocast, AdamW at lr 1e-5 (updates below half a bf16 ulp)."""
    model.to(torch.bfloat16)
    step.autocast_dtype = None
    step.policy = None
    step.lr = 1e-5


@injector("AMP121")
def bf16_meets_fp16(model, cfg, batch, step):
    """An fp16 tensor (a table made in fp16) added to a bf16 activation."""
    return _embedding_hook(model, step, lambda x: (x.to(torch.bfloat16) + torch.zeros(x.shape[-1], dtype=torch.float16)).to(x.dtype))


@injector("AMP122")
def sdpa_mask_other_dtype(model, cfg, batch, step):
    """Attention through `F.scaled_dot_product_attention` with an fp32 additive mask for bf16 queries (the mask not
    cast to the compute dtype)."""
    real = F.scaled_dot_product_attention
    used = {"n": 0}

    def sdpa(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, **kw):
        used["n"] += 1
        if attn_mask is None or attn_mask.dtype == torch.bool:
            L, S = q.shape[-2], k.shape[-2]
            mask = torch.zeros(L, S, dtype=torch.float32)
            if is_causal:
                mask = mask.masked_fill(torch.ones(L, S, dtype=torch.bool).triu(1), float("-inf"))
            if attn_mask is not None:
                mask = mask.masked_fill(~attn_mask, float("-inf"))
            attn_mask, is_causal = mask, False
        else:
            attn_mask = attn_mask.float()
        with torch.autocast("cpu", enabled=False):
            q, k, v = (t.to(torch.bfloat16) for t in (q, k, v))
            return real(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, **kw)

    @contextlib.contextmanager
    def around():
        F.scaled_dot_product_attention = sdpa
        torch.nn.functional.scaled_dot_product_attention = sdpa
        try:
            yield
        finally:
            F.scaled_dot_product_attention = real

    if getattr(cfg, "_attn_implementation", None) not in ("sdpa", None):
        return f"attention implementation {cfg._attn_implementation!r}, not sdpa"
    step.around = around
    step.check = lambda: None if used["n"] else "the model does not call F.scaled_dot_product_attention"


@injector("AMP125")
def loss_in_bf16(model, cfg, batch, step):
    """The loss computed from bf16 logits outside autocast, in one of its two forms by the architecture's name (so
    that each detector meets half the architectures): `cross_entropy(logits.bfloat16(), labels)`, a bf16 loss; or
    a policy-gradient loss, fp32 by its final cast, made of `log_softmax` taken of the bf16 logits."""
    log_probs_form = hashlib.sha256(str(getattr(cfg, "model_type", "")).encode()).digest()[0] % 2 == 1

    def loss_fn(out, batch):
        logits = getattr(out, "logits", None)
        if logits is None:
            raise RuntimeError("no logits")
        with torch.autocast("cpu", enabled=False):
            if not log_probs_form:
                return _lm_loss(logits.to(torch.bfloat16), batch["labels"])
            flat = logits.to(torch.bfloat16).flatten(0, -2)
            labels = batch["labels"].flatten()[: flat.shape[0]]
            taken = torch.log_softmax(flat[: labels.numel()], dim=-1).gather(-1, labels.clamp(min=0)[:, None])
            advantages = torch.linspace(-1.0, 1.0, labels.numel())
            return -(taken.squeeze(-1).float() * advantages).mean()

    step.loss_fn = loss_fn


@injector("AMP128")
def autocast_over_bf16_weights(model, cfg, batch, step):
    """bf16 autocast over a model already cast to bf16 (no fp32 master weights), AdamW at lr 1e-5."""
    model.to(torch.bfloat16)
    step.policy = None
    step.lr = 1e-5


@injector("AMP201")
def fp32_table_on_bf16_path(model, cfg, batch, step):
    """bf16-true training (the model cast to bf16, no autocast) with an fp32 table (a buffer left in fp32) added to
    the embeddings' output: the sum silently promotes to fp32, and the next bf16 layer fails on it (or computes
    in fp32)."""
    model.to(torch.bfloat16)
    step.autocast_dtype = None
    step.policy = "bf16-true"

    def fn(x):
        # Made at each call, not kept between calls: the unaudited run before the audited one (on a deep copy that
        # shares this hook) would otherwise make it, and the audited run would get it as a tensor from outside.
        return x + torch.randn(x.shape[-1], generator=torch.Generator().manual_seed(0)) * 0.01

    return _embedding_hook(model, step, fn)


@injector("AMP203")
def lm_head_in_fp32(model, cfg, batch, step):
    """The output projection run outside autocast in fp32 (`with autocast(enabled=False): head(x.float())`), a
    fifth or more of the step's matmul FLOPs at these sizes."""
    try:
        head = model.get_output_embeddings()
    except Exception:  # noqa: BLE001
        head = None
    if not isinstance(head, torch.nn.Linear):
        return "no nn.Linear output embeddings"
    real = head.forward
    fired = []

    def forward(x):
        fired.append(1)
        with torch.autocast("cpu", enabled=False):
            return real(x.float())

    head.forward = forward
    step.check = lambda: None if fired else "the output embeddings module is not called (its weight is used directly)"


@injector("AMP204")
def aux_loss_in_half(model, cfg, batch, step):
    """An auxiliary loss (an MSE regularizer on the embeddings) computed in bf16 outside autocast; CPU autocast runs
    mse_loss in fp32. (A norm in half is no finding on CPU: CPU autocast itself runs layer_norm in bf16.)"""

    def fn(x):
        with torch.autocast("cpu", enabled=False):
            aux = F.mse_loss(x.to(torch.bfloat16), torch.zeros_like(x, dtype=torch.bfloat16))
        return x + 0.0 * aux.to(x.dtype)

    return _embedding_hook(model, step, fn)


@injector("AMP205")
def bf16_all_reduce(model, cfg, batch, step):
    """Gradients all-reduced in bf16 on a one-rank gloo group (policy reduce=fp32)."""
    import torch.distributed as dist

    @contextlib.contextmanager
    def around():
        started = False
        if not dist.is_initialized():
            os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
            os.environ["MASTER_PORT"] = str(_free_port())
            dist.init_process_group("gloo", rank=0, world_size=1)
            started = True
        try:
            yield
        finally:
            if started:
                dist.destroy_process_group()

    def reduce(model, i):
        for p in model.parameters():
            if p.grad is not None:
                g = p.grad.to(torch.bfloat16)
                dist.all_reduce(g)
                p.grad.copy_(g)

    step.around = around
    step.after_backward.append(reduce)


@injector("AMP212")
def fp16_overflow(model, cfg, batch, step):
    """fp16 autocast without a loss scaler, and the first projection's weights 1e6 times too large (a bad init or
    an unscaled checkpoint): its fp16 matmul overflows 65504 from finite inputs."""
    step.autocast_dtype = "float16"
    step.policy = "fp16-mixed"
    head = None
    with contextlib.suppress(Exception):
        head = model.get_output_embeddings()
    other = ("audio", "vision", "speech", "image", "visual", "acoustic", "conformer", "codec")
    mods = [(n, m) for n, m in model.named_modules() if m is not head and type(m).__name__ in ("Linear", "Conv1D")
            and isinstance(getattr(m, "weight", None), torch.Tensor) and m.weight.dim() == 2]
    mods.sort(key=lambda nm: any(o in nm[0].lower() for o in other))  # text layers first (multimodal models)
    if not mods:
        return "no Linear/Conv1D layer"
    m = mods[0][1]
    with torch.no_grad():
        m.weight.mul_(1e6)
    fired = []
    m.register_forward_hook(lambda *a: fired.append(1))
    step.check = lambda: None if fired else f"the scaled layer {mods[0][0]} does not run on text inputs"
    return None


@injector("AMP213")
def gradients_underflow(model, cfg, batch, step):
    """The loss scaled down by 1e-38 (a wrong normalization): the fp32 gradients cast to bf16 in backward flush to zero."""

    def loss_fn(out, batch):
        return out.loss * 1e-38

    step.loss_fn = loss_fn


@injector("AMP214")
def non_finite_activation(model, cfg, batch, step):
    """A log of zero reaches the embeddings' output (log(0) * 0 = nan): the first non-finite value of the run."""

    def fn(x):
        return x * (1 + 0 * torch.zeros((), dtype=x.dtype).log())

    return _embedding_hook(model, step, fn)


@injector("AMP131")
def fp32_embeddings_into_bf16_model(model, cfg, batch, step):
    """A model cast to bf16 and run without autocast, given its input as embeddings computed in fp32 (a projector
    or an embedding table kept in fp32 outside the model): nothing casts them to the model's dtype."""
    import inspect

    emb = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    if emb is None or "inputs_embeds" not in inspect.signature(model.forward).parameters:
        return "the model takes no inputs_embeds"
    with torch.no_grad():
        embeds = emb(batch["input_ids"]).float()
    if not embeds.is_floating_point():
        return "the input embeddings are not float"
    model.to(torch.bfloat16)
    batch["inputs_embeds"] = embeds
    del batch["input_ids"]
    if "labels" in batch and "decoder_input_ids" not in batch and hasattr(model, "prepare_decoder_input_ids_from_labels"):
        # an encoder-decoder that derives its decoder inputs from `input_ids` (FSMT) has none left to derive them from
        batch["decoder_input_ids"] = model.prepare_decoder_input_ids_from_labels(labels=batch["labels"])
    step.autocast_dtype = None
    step.policy = "bf16-true"
    ran = []
    model.register_forward_hook(lambda *_: ran.append(1))
    # A model that casts what it is given to its own dtype (T5's norms) has no mismatch to find: not planted.
    step.check = lambda: "the model casts its input embeddings to its own dtype (the forward ran)" if ran else None


class _UpcastingLora(torch.nn.Module):
    """A LoRA wrapper written for fp32 adapters: it upcasts its input for them."""

    def __init__(self, base, rank=4):
        super().__init__()
        self.base = base
        self.lora_A = torch.nn.Linear(base.in_features, rank, bias=False, dtype=base.weight.dtype)
        self.lora_B = torch.nn.Linear(rank, base.out_features, bias=False, dtype=base.weight.dtype)

    def forward(self, x):
        return self.base(x) + self.lora_B(self.lora_A(x.float())).to(x.dtype)


@injector("AMP127")
def adapter_input_upcast(model, cfg, batch, step):
    """A LoRA layer that upcasts its input for fp32 adapters, in a model (adapters included) cast to bf16 and run
    without autocast: the fp32 input meets the bf16 adapter weights."""
    layers = [(n, m) for n, m in model.named_modules() if any(isinstance(c, torch.nn.Linear) for c in m.children())]
    target = next(((parent, child_name, child) for _, parent in layers for child_name, child in parent.named_children()
                   if isinstance(child, torch.nn.Linear) and child.in_features > 1), None)
    if target is None:
        return "no nn.Linear to adapt"
    parent, name, linear = target
    setattr(parent, name, _UpcastingLora(linear))
    model.to(torch.bfloat16)
    step.autocast_dtype = None
    step.policy = "bf16-true"


NOT_INJECTABLE = {}

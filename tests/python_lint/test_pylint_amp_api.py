"""grad-scaler-with-bf16, deprecated-cuda-amp, autocast-without-dtype, custom-function-without-custom-fwd,
low-precision-reduce: positive and negative cases on realistic training code."""

from pylint_helpers import hits

RULE = "grad-scaler-with-bf16"


def test_ungated_scaler_in_bf16_autocast_script_is_flagged():
    code = """
    import torch
    scaler = torch.amp.GradScaler("cuda")
    for x, y in loader:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x, y)
        scaler.scale(loss).backward()
    """
    assert hits(code, RULE) == [(RULE, 2)]


def test_scaler_gated_on_mixed_precision_flag_only_is_flagged_incident_4():
    # h2o-llmstudio #628: `mixed_precision` says nothing about fp16, the backbone is bf16.
    code = """
    import torch
    from torch.cuda.amp import GradScaler as Scaler
    backbone = AutoModel.from_pretrained(name, torch_dtype=torch.bfloat16)
    scaler = Scaler(enabled=cfg.environment.mixed_precision)
    """
    assert hits(code, RULE) == [(RULE, 4)]


def test_scaler_with_maybe_bf16_dtype_variable_is_flagged():
    code = """
    import torch as T
    dtype = T.bfloat16 if args.bf16 else T.float16
    scaler = T.cuda.amp.GradScaler()
    with T.autocast("cuda", dtype=dtype):
        pass
    """
    assert hits(code, RULE) == [(RULE, 3)]


def test_scaler_enabled_only_for_bf16_is_flagged():
    code = """
    import torch
    dtype = torch.bfloat16
    scaler = torch.amp.GradScaler("cuda", enabled=dtype == torch.bfloat16)
    """
    assert hits(code, RULE) == [(RULE, 3)]


def test_gated_scalers_are_not_flagged():
    code = """
    import torch
    from torch.amp import GradScaler
    dtype = torch.bfloat16 if args.bf16 else torch.float16
    use_scaler = dtype == torch.float16
    a = GradScaler("cuda", enabled=(dtype == torch.float16))
    b = GradScaler("cuda", enabled=args.fp16)
    c = GradScaler("cuda", enabled=use_fp16)
    d = GradScaler("cuda", enabled=cfg.environment.mixed_precision_dtype == "float16")
    e = GradScaler("cuda") if args.fp16 else None
    f = GradScaler("cuda", enabled=use_scaler)
    g = None if args.bf16 else GradScaler("cuda")
    h = GradScaler("cuda", enabled=dtype != torch.bfloat16)
    if dtype == torch.float16:
        i = GradScaler("cuda")
    if args.precision == "bf16":
        j = None
    else:
        j = GradScaler("cuda")


    def make_scaler(precision):
        if precision != "fp16":
            return None
        return GradScaler("cuda")
    """
    assert hits(code, RULE) == []


def test_scaler_in_plain_fp16_script_is_not_flagged():
    code = """
    import torch
    scaler = torch.cuda.amp.GradScaler()
    with torch.autocast("cuda", dtype=torch.float16):
        loss = model(x)
    """
    assert hits(code, RULE) == []


def test_deprecated_cuda_amp_imports_calls_and_decorators():
    code = """
    import torch
    from torch.cuda.amp import autocast, GradScaler
    from torch.cuda import amp
    import torch.cuda.amp as tamp

    class Fn(torch.autograd.Function):
        @staticmethod
        @torch.cuda.amp.custom_fwd(cast_inputs=torch.float32)
        def forward(ctx, x):
            return x

    with amp.autocast(dtype=torch.bfloat16):
        pass
    s = tamp.GradScaler(enabled=False)
    """
    assert hits(code, "deprecated-cuda-amp") == [("deprecated-cuda-amp", 2), ("deprecated-cuda-amp", 8),
                                                 ("deprecated-cuda-amp", 12), ("deprecated-cuda-amp", 14)]


def test_torch_amp_and_mere_references_are_not_deprecated():
    code = """
    import torch
    from torch.amp import autocast, GradScaler
    SUPPORTED = [torch.cuda.amp.autocast, torch.amp.autocast]
    with autocast("cuda", dtype=torch.bfloat16):
        pass
    """
    assert hits(code, "deprecated-cuda-amp") == []


def test_autocast_without_dtype_on_cuda():
    code = """
    import torch
    from torch import autocast
    with torch.autocast("cuda"):
        pass
    with autocast(device_type=device.type, enabled=args.amp):
        pass
    with torch.cuda.amp.autocast():
        pass
    with torch.amp.autocast("cuda" if cuda else "cpu"):
        pass
    model.to(torch.bfloat16)
    """
    rule = "autocast-without-dtype"
    assert hits(code, rule) == [(rule, 3), (rule, 5), (rule, 7), (rule, 9)]
    # Nothing says bf16: fp16 is what the author asked for.
    assert hits(code.replace("model.to(torch.bfloat16)", ""), rule) == []
    # An unconditional GradScaler: deliberate fp16 AMP.
    assert hits(code.replace("model.to(torch.bfloat16)", "model.to(torch.bfloat16)\n    scaler = torch.amp.GradScaler()"), rule) == []


def test_autocast_with_dtype_disabled_or_on_cpu_is_fine():
    code = """
    import torch
    with torch.autocast("cuda", torch.bfloat16):
        pass
    with torch.autocast(device_type="cuda", dtype=dtype):
        pass
    with torch.autocast(device_type=x.device.type, enabled=False):
        pass
    with torch.cuda.amp.autocast(False):
        pass
    with torch.autocast("cpu"):
        pass
    with torch.autocast(**kwargs):
        pass
    """
    assert hits(code, "autocast-without-dtype") == []


def test_custom_function_without_custom_fwd_under_bf16_autocast():
    code = """
    import torch

    class RoIAlign(torch.autograd.Function):
        @staticmethod
        def forward(ctx, features, rois):
            return roi_align_cuda.forward(features, rois)

    class Fused(torch.autograd.Function):
        @staticmethod
        @torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)
        def forward(ctx, x):
            return fused_cuda.forward(x)

    def train_step(model, x):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            return RoIAlign.apply(model(x), rois)
    """
    rule = "custom-function-without-custom-fwd"
    assert hits(code, rule) == [(rule, 5)]


def test_custom_function_in_file_without_autocast_is_not_flagged():
    code = """
    from torch.autograd import Function

    class Scale(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2
    """
    assert hits(code, "custom-function-without-custom-fwd") == []


def test_fsdp_mixed_precision_reduce_dtype():
    code = """
    import torch
    from torch.distributed.fsdp import MixedPrecision
    bf16 = MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=torch.bfloat16, buffer_dtype=torch.bfloat16)
    missing = MixedPrecision(param_dtype=torch.bfloat16)
    good = MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    fp32 = MixedPrecision(param_dtype=torch.float32)
    """
    rule = "low-precision-reduce"
    assert hits(code, rule) == [(rule, 3), (rule, 4)]

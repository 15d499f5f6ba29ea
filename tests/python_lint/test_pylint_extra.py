"""rope-under-autocast, custom-bwd-dtype, norm-low-precision, adapter-dtype-mismatch."""

import textwrap

import torch
from pylint_helpers import hits

# --- rope-under-autocast (AMP101) -------------------------------------------------------------------------------


def test_autocast_keeps_mul_and_outer_in_fp32_but_not_matmul():
    # The fact the rule rests on: autocast downcasts matmuls even of fp32 operands, not elementwise products.
    inv_freq, pos = torch.rand(8), torch.arange(4096).float()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert (inv_freq[None, :, None].float() @ pos[None, None, :].float()).dtype == torch.bfloat16
        assert torch.matmul(inv_freq[:, None], pos[None, :]).dtype == torch.bfloat16
        assert torch.outer(pos, inv_freq).dtype == torch.float32
        assert (pos[:, None] * inv_freq[None, :]).dtype == torch.float32
        with torch.autocast("cpu", enabled=False):
            assert (inv_freq[None, :, None] @ pos[None, None, :]).dtype == torch.float32


def test_pre_29285_llama_rotary_in_a_file_that_trains_under_autocast():
    code = """
    import torch

    class LlamaRotaryEmbedding(torch.nn.Module):
        @torch.no_grad()
        def forward(self, x, position_ids):
            inv_freq_expanded = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
            position_ids_expanded = position_ids[:, None, :].float()
            freqs = (inv_freq_expanded.float() @ position_ids_expanded.float()).transpose(1, 2)
            emb = torch.cat((freqs, freqs), dim=-1)
            return emb.cos().to(x.dtype), emb.sin().to(x.dtype)

    def train_step(model, batch):
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            return model(**batch).loss
    """
    rule = "rope-under-autocast"
    assert hits(code, rule) == [(rule, 8)]


def test_rope_under_a_half_mode_the_command_line_offers_says_it_may_be_enabled():
    # The evidence must say what lint knows: the half mode is one the command line offers, off by default.
    from ampdoctor.lint.python import lint_source

    code = """
    import argparse
    import torch
    from accelerate import Accelerator

    def rope(position_ids, inv_freq):
        angles = position_ids[:, :, None].float() @ inv_freq[None, None, :].float()
        return torch.cos(angles), torch.sin(angles)

    parser = argparse.ArgumentParser()
    parser.add_argument("--mixed_precision", type=str, default="no", choices=["no", "fp16", "bf16"])
    args = parser.parse_args()
    accelerator = Accelerator(mixed_precision=args.mixed_precision)
    """
    findings, _ = lint_source(textwrap.dedent(code).lstrip("\n"))
    [f] = [f for f in findings if f.name == "rope-under-autocast"]
    assert "may enable mixed precision" in f.message and "enables autocast" not in f.message


def test_rope_helper_with_einsum_and_aliased_torch_in_a_file_that_guards_attention():
    code = """
    import torch as T
    from torch import autocast

    def rope_angles(positions, inv_freq):
        angles = T.einsum("bik,kj->bij", positions.float()[..., None], inv_freq[None])
        return T.cos(angles), T.sin(angles)

    def attention_probs(q, k):
        with autocast(q.device.type, enabled=False):
            return (q.float() @ k.float().transpose(-1, -2)).softmax(-1)
    """
    rule = "rope-under-autocast"
    assert hits(code, rule) == [(rule, 5)]


def test_rope_module_by_class_name_matmul_in_helper_under_accelerate():
    code = """
    import torch
    from accelerate import Accelerator

    class RoPE(torch.nn.Module):
        def angles(self, t):
            return torch.matmul(t[:, None].float(), self.freqs[None, :])

    accelerator = Accelerator(mixed_precision="bf16")
    """
    rule = "rope-under-autocast"
    assert hits(code, rule) == [(rule, 6)]


def test_rope_with_autocast_disabled_or_elementwise_is_fine():
    code = """
    import torch
    from transformers.utils.generic import maybe_autocast

    class LlamaRotaryEmbedding(torch.nn.Module):
        def forward(self, x, position_ids):
            inv_freq_expanded = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
            with torch.autocast(device_type=x.device.type, enabled=False):
                freqs = (inv_freq_expanded.float() @ position_ids[:, None, :].float()).transpose(1, 2)
                emb = torch.cat((freqs, freqs), dim=-1)
            return emb.cos(), emb.sin()

    class Ernie4_5RotaryEmbedding(torch.nn.Module):
        def forward(self, x, position_ids):
            with maybe_autocast(device_type=x.device.type, enabled=False):  # Force float32
                freqs = (self.inv_freq[None, :, None].float() @ position_ids[:, None, :].float()).transpose(1, 2)
            return freqs.cos(), freqs.sin()

    class DecoratedRotary(torch.nn.Module):
        @torch.amp.autocast("cuda", enabled=False)
        def forward(self, t):
            freqs = t[:, None].float() @ self.inv_freq[None, :]
            return freqs.cos(), freqs.sin()

    class Llama5Rotary(torch.nn.Module):
        def forward(self, x, position_ids):
            freqs = position_ids[..., None].float() * self.inv_freq.to(device=x.device, dtype=torch.float)
            outer = torch.outer(position_ids[0].float(), self.inv_freq)
            return freqs.cos(), outer.sin()

    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(batch)
    """
    assert hits(code, "rope-under-autocast") == []


def test_rope_matmul_in_a_library_file_without_autocast_is_not_reported():
    code = """
    import torch

    class LlamaRotaryEmbedding(torch.nn.Module):
        def forward(self, x, position_ids):
            freqs = (self.inv_freq[None, :, None].float() @ position_ids[:, None, :].float()).transpose(1, 2)
            return freqs.cos(), freqs.sin()
    """
    not_rope = """
    import torch

    def project(x, freq_weight):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            return x @ freq_weight   # nothing here takes a cosine: a learned projection, not RoPE angles
    """
    assert hits(code, "rope-under-autocast") == []
    assert hits(not_rope, "rope-under-autocast") == []


# --- custom-bwd-dtype (AMP109) ----------------------------------------------------------------------------------


def test_old_custom_bwd_in_a_bf16_file_pytorch_87979():
    code = """
    import torch
    from torch.cuda.amp import custom_fwd, custom_bwd

    class MyMM(torch.autograd.Function):
        @staticmethod
        @custom_fwd
        def forward(ctx, a, b):
            ctx.save_for_backward(a, b)
            return a.mm(b)

        @staticmethod
        @custom_bwd
        def backward(ctx, grad):
            a, b = ctx.saved_tensors
            return grad.mm(b.t()), a.t().mm(grad)

    with torch.autocast("cuda", dtype=torch.bfloat16):
        out = MyMM.apply(x, w)
    """
    rule = "custom-bwd-dtype"
    assert hits(code, rule) == [(rule, 12)]


def test_old_custom_bwd_through_module_alias_and_bf16_string():
    code = """
    import torch.cuda.amp as cuda_amp
    from torch.autograd import Function

    PRECISION = "bf16"

    class FusedGelu(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return gelu_fwd(x)

        @staticmethod
        @cuda_amp.custom_bwd
        def backward(ctx, grad):
            return gelu_bwd(grad, *ctx.saved_tensors)
    """
    rule = "custom-bwd-dtype"
    assert hits(code, rule) == [(rule, 13)]


def test_new_custom_bwd_fp16_files_cast_inputs_and_version_switches_are_fine():
    new_api = """
    import torch

    class MyMM(torch.autograd.Function):
        @staticmethod
        @torch.amp.custom_fwd(device_type="cuda")
        def forward(ctx, a, b):
            return a.mm(b)

        @staticmethod
        @torch.amp.custom_bwd(device_type="cuda")
        def backward(ctx, grad):
            return grad, grad

    dtype = torch.bfloat16
    """
    fp16_only = """
    import torch

    class MyMM(torch.autograd.Function):
        @staticmethod
        @torch.cuda.amp.custom_bwd
        def backward(ctx, grad):
            return grad

    with torch.autocast("cuda", dtype=torch.float16):
        pass
    """
    cast_inputs = """
    import torch

    class FP32Op(torch.autograd.Function):
        @staticmethod
        @torch.cuda.amp.custom_fwd(cast_inputs=torch.float32)
        def forward(ctx, x):
            return x

        @staticmethod
        @torch.cuda.amp.custom_bwd
        def backward(ctx, grad):
            return grad

    x = x.to(torch.bfloat16)
    """
    switch = """
    import torch
    try:
        from torch.amp import custom_bwd
    except ImportError:
        from torch.cuda.amp import custom_bwd

    class Op(torch.autograd.Function):
        @staticmethod
        @custom_bwd
        def backward(ctx, grad):
            return grad

    x = x.to(torch.bfloat16)
    """
    for code in (new_api, fp16_only, cast_inputs, switch):
        assert hits(code, "custom-bwd-dtype") == []


# --- norm-low-precision (AMP123) -------------------------------------------------------------------------------


def test_rmsnorm_without_upcast_in_a_bf16_model_file():
    code = """
    import torch
    from torch import nn

    class RMSNorm(nn.Module):
        def __init__(self, dim, eps=1e-6):
            super().__init__()
            self.eps = eps
            self.weight = nn.Parameter(torch.ones(dim))

        def forward(self, x):
            variance = x.pow(2).mean(-1, keepdim=True)
            return self.weight * x * torch.rsqrt(variance + self.eps)

    model = Transformer(cfg).to(torch.bfloat16)
    """
    rule = "norm-low-precision"
    assert hits(code, rule) == [(rule, 11)]


def test_layernorm_helper_and_squared_product_with_half_evidence():
    code = """
    import torch as T

    def rms_norm(h, weight, eps=1e-5):
        ms = T.mean(h * h, dim=-1, keepdim=True)
        return h * T.rsqrt(ms + eps) * weight

    class ChannelLayerNorm(T.nn.Module):
        def forward(self, x):
            mu = x.mean(1, keepdim=True)
            var = (x - mu).pow(2).mean(1, keepdim=True)
            return (x - mu) / T.sqrt(var + self.eps)

    def load(path):
        return T.load(path).half()
    """
    rule = "norm-low-precision"
    assert hits(code, rule) == [(rule, 4), (rule, 10)]


def test_norm_of_an_explicit_bf16_tensor_is_reported_even_with_upcasts_elsewhere():
    code = """
    import torch

    class QKNorm(torch.nn.Module):
        def forward(self, q, k):
            qb = q.to(torch.bfloat16)
            var = qb.var(-1, keepdim=True, unbiased=False)
            k = k.float()
            return qb / torch.sqrt(var + 1e-6), k
    """
    rule = "norm-low-precision"
    assert hits(code, rule) == [(rule, 6)]


def test_a_norm_in_half_is_as_severe_as_what_half_does_to_its_variance():
    # torch reduces half inputs with an fp32 accumulator: fp16 squares overflow past 256 (a warning); bf16 squares
    # only round, and a variance call squares inside the accumulator (notes, saying by how much)
    from ampdoctor.lint.python import lint_source

    def amp123(norm: str, setup: str) -> list[tuple[str, str]]:
        code = textwrap.dedent(f"""
            import torch

            class RMSNorm(torch.nn.Module):
                def forward(self, x):
                    variance = {norm}
                    return x * torch.rsqrt(variance + 1e-6)
        """) + setup + "\n"
        findings, error = lint_source(code)
        assert error is None, error
        return [(f.severity.value, f.message) for f in findings if f.rule_id == "AMP123"]

    squares, var = "(x * x).mean(-1, keepdim=True)", "x.var(-1, keepdim=True, unbiased=False)"
    bf16, fp16 = "model = RMSNorm().to(torch.bfloat16)", "model = RMSNorm().half()"
    [(severity, message)] = amp123(squares, fp16)
    assert severity == "warning" and "overflow to inf past |x| = 256" in message
    [(severity, message)] = amp123(squares, bf16)
    assert severity == "info" and "0.4%" in message
    for setup in (bf16, fp16):
        [(severity, message)] = amp123(var, setup)
        assert severity == "info" and "accumulates it in fp32" in message
    # autocast without a dtype computes in fp16 on CUDA: fp16 squares are possible
    [(severity, _)] = amp123(squares, bf16 + "\nwith torch.autocast('cuda'):\n    model(torch.ones(2))")
    assert severity == "warning"


def test_a_norm_module_is_used_where_the_file_calls_the_attribute_it_is_built_into():
    # Under fp16 autocast alone a norm of the residual stream squares in fp32: no finding. `torch.norm(...)` and a
    # tensor's `.norm(2)` elsewhere in the file are no uses of the module built into `self.norm`.
    from ampdoctor.lint.python import lint_source

    code = textwrap.dedent("""
        import torch

        class RMSNorm(torch.nn.Module):
            def forward(self, x):
                return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6)

        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = torch.nn.Embedding(16, 8)
                self.norm = RMSNorm()
                self.head = torch.nn.Linear(8, 16)

            def forward(self, idx):
                return self.head(self.norm(self.embed(idx)))

        def grad_norm(model):
            return torch.norm(torch.stack([p.grad.norm(2) for p in model.parameters()]), 2)

        model = Net().cuda()
        with torch.autocast("cuda", dtype=torch.float16):
            model(torch.zeros(2, 4, dtype=torch.long).cuda()).sum().backward()
    """)
    findings, error = lint_source(code)
    assert error is None, error
    assert [f for f in findings if f.rule_id == "AMP123"] == []


def test_hf_llama_and_gemma_norms_and_non_norm_means_are_fine():
    code = """
    import torch
    from torch import nn

    class LlamaRMSNorm(nn.Module):
        def forward(self, hidden_states):
            input_dtype = hidden_states.dtype
            hidden_states = hidden_states.to(torch.float32)
            variance = hidden_states.pow(2).mean(-1, keepdim=True)
            hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
            return self.weight * hidden_states.to(input_dtype)

    class GemmaRMSNorm(nn.Module):
        def _norm(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

        def forward(self, x):
            output = self._norm(x.float())
            return (output * (1.0 + self.weight.float())).type_as(x)

    class T5LayerNorm(nn.Module):
        def forward(self, hidden_states):
            variance = hidden_states.pow(2).mean(-1, keepdim=True, dtype=torch.float32)
            return self.weight * hidden_states * torch.rsqrt(variance + self.eps)

    def mse(pred, target):
        return (pred - target).pow(2).mean()

    model = model.to(torch.bfloat16)
    """
    assert hits(code, "norm-low-precision") == []


def test_norm_without_upcast_in_a_file_with_no_half_precision_is_not_reported():
    code = """
    import torch

    class RMSNorm(torch.nn.Module):
        def forward(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
    """
    assert hits(code, "norm-low-precision") == []


# --- adapter-dtype-mismatch (AMP127) ---------------------------------------------------------------------------


def test_peft_model_cast_to_bf16_after_get_peft_model():
    code = """
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")
    model = get_peft_model(model, LoraConfig(r=16, target_modules=["q_proj", "v_proj"]))
    model.to(torch.bfloat16)
    model.print_trainable_parameters()
    """
    rule = "adapter-dtype-mismatch"
    assert hits(code, rule) == [(rule, 7)]


def test_peft_cast_in_a_helper_chained_and_after_peftmodel_from_pretrained():
    code = """
    import peft
    import torch as T
    from peft import PeftModel

    DTYPE = T.bfloat16

    def build(base, cfg):
        lora = peft.get_peft_model(base, cfg)
        return lora.to("cuda", dtype=DTYPE)

    def chained(base, cfg):
        return peft.get_peft_model(base, cfg).half()

    def resume(base, path):
        model = PeftModel.from_pretrained(base, path, is_trainable=True)
        model = model.bfloat16()
        return model
    """
    rule = "adapter-dtype-mismatch"
    assert hits(code, rule) == [(rule, 9), (rule, 12), (rule, 16)]


def test_dtype_at_load_casts_before_peft_and_autocast_training_are_fine():
    code = """
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B", torch_dtype=torch.bfloat16)
    model = model.to(torch.bfloat16)
    model = get_peft_model(model, LoraConfig(r=16))
    model.to("cuda")
    other = base.to(torch.bfloat16)
    """
    with_autocast = """
    import torch
    from peft import get_peft_model

    model = get_peft_model(model, config).to(torch.bfloat16)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(**batch).loss
    """
    assert hits(code, "adapter-dtype-mismatch") == []
    assert hits(with_autocast, "adapter-dtype-mismatch") == []


def test_variance_after_a_conversion_to_a_chosen_dtype_or_in_numpy_is_not_reported():
    code = """
    import numpy as np
    import torch

    def native_group_norm(input, weight, bias, eps):
        computation_dtype = get_computation_dtype(input.dtype)
        input_acc = input.to(dtype=computation_dtype)
        input_reshaped = torch.reshape(input_acc, [n, g, -1])
        var, mean = torch.var_mean(input_reshaped, dim=-1, unbiased=False, keepdim=True)
        return (input_reshaped - mean) * torch.rsqrt(var + eps)

    def reference_rms_norm(inp, eps):
        return inp / np.sqrt((inp ** 2).mean(axis=-1, keepdims=True) + eps)

    class LSHSelfAttention(torch.nn.Module):
        def _len_norm(self, x, epsilon=1e-6):
            variance = torch.mean(x**2, -1, keepdim=True)
            return x * torch.rsqrt(variance + epsilon)

    if query_key_dots.dtype == torch.float16:
        mask_value = mask_value.half()
    """
    assert hits(code, "norm-low-precision") == []


def test_a_class_method_is_its_last_definition():
    """A redefined method is the one Python keeps: judging the first would read code that never runs."""
    import ast

    from ampdoctor.lint.python.resolve import method

    cls = ast.parse("class F:\n    def forward(self):\n        return 1\n    def forward(self, x):\n        return x\n").body[0]
    assert isinstance(cls, ast.ClassDef)
    found = method(cls, "forward")
    assert found is not None and found.lineno == 4 and method(cls, "backward") is None

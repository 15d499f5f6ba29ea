"""grad-dtype-mismatch, softmax-low-precision, loss-low-precision, pure-bf16-optimizer, bf16-to-numpy."""

import textwrap

from pylint_helpers import hits

from ampdoctor.lint.python import lint_source

NANOGPT_BF16 = """
import torch
import torch.nn as nn
import torch.nn.functional as F

class CausalSelfAttention(nn.Module):
    def forward(self, x):
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = F.softmax(att, dim=-1)
        probs = torch.softmax(att, dim=-1, dtype=torch.float32).to(q.dtype)
        return att @ v

class GPT(nn.Module):
    def forward(self, idx, targets=None):
        x = self.transformer(idx)
        logits = self.lm_head(x)
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss

model = GPT(config).to(torch.bfloat16)
optimizer = torch.optim.AdamW(model.parameters(), lr=6e-4)
optimizer.step()
"""


def test_pure_bf16_nanogpt_softmax_loss_and_optimizer():
    assert hits(NANOGPT_BF16) == [("softmax-low-precision", 9), ("loss-low-precision", 17), ("pure-bf16-optimizer", 21)]


def test_same_model_under_autocast_is_fine():
    code = NANOGPT_BF16.replace("model = GPT(config).to(torch.bfloat16)", "model = GPT(config)") + (
        "with torch.autocast('cuda', dtype=torch.bfloat16):\n    logits, loss = model(x, y)\n")
    assert hits(code) == []


def test_loss_on_float_logits_is_fine_in_cast_model():
    code = NANOGPT_BF16.replace("logits = self.lm_head(x)", "logits = self.lm_head(x).float()")
    assert hits(code, "loss-low-precision") == []


def test_loss_on_output_of_cast_model_and_known_half_logits():
    code = """
    import torch
    import torch.nn.functional as F
    model = AutoModelForCausalLM.from_pretrained(name, torch_dtype=torch.bfloat16)
    criterion = torch.nn.CrossEntropyLoss()
    out = model(input_ids)
    loss = criterion(out.logits, labels)
    loss2 = F.cross_entropy(out.logits.float(), labels)
    """
    assert hits(code, "loss-low-precision") == [("loss-low-precision", 6)]


def test_grad_retyped_in_place_incident_3():
    code = """
    import torch

    def train(transformer, loader, args):
        transformer.to(torch.bfloat16)
        for batch in loader:
            loss = transformer(batch).mean()
            loss.backward()
            for param in transformer.parameters():
                if args.gradient_precision == "fp32":
                    param.grad.data = param.grad.data.to(torch.float32)
                    p.grad = p.grad.detach().bfloat16()
    """
    rule = "grad-dtype-mismatch"
    assert hits(code, rule) == [(rule, 10), (rule, 11)]
    # Without the cast nothing makes the parameters half: widening their .grad is no error (the bf16 .grad of
    # line 10 still is, whatever the parameters are not).
    assert hits(code.replace("transformer.to(torch.bfloat16)", "transformer.train()"), rule) == [(rule, 11)]


def test_grad_copied_into_fp32_master_or_cast_to_param_dtype_is_fine():
    code = """
    import torch

    def step(model_params, master_params):
        for p, master in zip(model_params, master_params):
            master.grad = p.grad.float()
            p.grad = p.grad.to(p.dtype)
            p.grad = p.grad.to(p.device)
    """
    assert hits(code, "grad-dtype-mismatch") == []


def test_bf16_to_numpy():
    code = """
    import numpy as np
    import torch
    preds = logits.bfloat16()
    a = preds.cpu().numpy()
    b = np.asarray(preds)
    c = preds.float().cpu().numpy()
    model = model.to(torch.bfloat16)
    d = model(x).detach().cpu().numpy()
    """
    rule = "bf16-to-numpy"
    assert hits(code, rule) == [(rule, 4), (rule, 5), (rule, 8)]


def test_fp16_and_unknown_tensors_to_numpy_are_fine():
    code = """
    import torch
    h = x.half().numpy()
    u = y.cpu().numpy()
    """
    assert hits(code, "bf16-to-numpy") == []


def test_pure_bf16_needs_bf16_weights_before_a_plain_optimizer():
    code = """
    import torch
    import bitsandbytes as bnb
    opt0 = torch.optim.AdamW(model.parameters())
    model = model.to(torch.bfloat16)
    opt1 = bnb.optim.AdamW8bit(model.parameters())
    """
    assert hits(code, "pure-bf16-optimizer") == []


def test_amp125_message_names_a_whole_expression():
    """A long logits expression is not cut in the middle of the suggested fix: the tensor it reshapes is upcast."""
    code = textwrap.dedent("""
        import torch
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained("m", torch_dtype=torch.bfloat16)


        def score(inputs, labels):
            logits = model(**inputs).logits
            shift_logits = logits[..., :-1, :].contiguous()
            loss_fct = torch.nn.CrossEntropyLoss(reduction="none")
            return loss_fct(shift_logits.view(-1, shift_logits.size(-1)), labels.view(-1))
    """)
    findings, error = lint_source(code)
    assert error is None
    messages = [f.message for f in findings if f.name == "loss-low-precision"]
    assert messages and all("use `shift_logits.float()`" in m for m in messages), messages

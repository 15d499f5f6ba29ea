"""Runtime reproduction of peft-vera-buffers-half: PEFT's own package (VeRA, `get_peft_model` with its default
autocast_adapter_dtype=True), imported unmodified from the extracted tree (argv[1]/src), on a tiny bf16 Llama from
transformers (random weights, built as from_pretrained(torch_dtype=bf16) builds it); one training step of the
adapter under ``ampdoctor.audit(policy="bf16-true")``. A step that raises is part of the measurement: the findings
are printed as JSON either way."""

import json
import sys
from pathlib import Path

import torch
from transformers import LlamaConfig, LlamaForCausalLM

import ampdoctor

sys.path.insert(0, str(Path(sys.argv[1]) / "src"))
from peft import VeraConfig, get_peft_model  # noqa: E402

torch.manual_seed(0)
cfg = LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                  num_key_value_heads=2, max_position_embeddings=64)
model = get_peft_model(LlamaForCausalLM._from_config(cfg, dtype=torch.bfloat16),
                       VeraConfig(r=8, target_modules=["q_proj", "v_proj"]))
opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
ids = torch.randint(0, 128, (2, 16))
audit = ampdoctor.audit(policy="bf16-true", model=model)
try:
    with audit:
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
except Exception as exc:  # the bug's crash: the audit's report says where and why
    print(f"step raised {type(exc).__name__}: {exc}", file=sys.stderr)
print(json.dumps([[f.rule_id, getattr(f.severity, "value", str(f.severity))] for f in audit.report.findings]))
if "-v" in sys.argv:
    print("\n".join(f"{f.rule_id} {f.severity} {f.location} | {f.message}" for f in audit.report.findings))

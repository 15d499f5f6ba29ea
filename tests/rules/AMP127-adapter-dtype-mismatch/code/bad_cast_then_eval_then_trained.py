# The model is put in eval mode for a first validation pass, then trained: the half adapters meet the optimizer.
import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM


def run(loader, steps):
    base = AutoModelForCausalLM.from_pretrained("org/base")
    model = get_peft_model(base, LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"]))
    model.to(torch.bfloat16)  # ampdoctor: expect[AMP127]
    model.eval()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    model.train()
    for _, batch in zip(range(steps), loader):
        loss = model(**batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()

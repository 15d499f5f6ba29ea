# A cast after get_peft_model in a script that trains under bf16 autocast: autocast reconciles the adapter and
# base dtypes in every matmul (the setup of huggingface/peft#971 with autocast on).
import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM

base = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")
model = get_peft_model(base, LoraConfig(r=16, target_modules=["q_proj", "v_proj"])).to(torch.bfloat16)


def train_step(batch, optimizer):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(**batch).loss
    loss.backward()
    optimizer.step()

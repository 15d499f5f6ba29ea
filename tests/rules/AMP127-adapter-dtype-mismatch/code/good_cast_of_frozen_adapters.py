# Adapters loaded without `is_trainable=True` are frozen by PEFT for inference: casting the model to half afterwards
# meets no optimizer, so no trainable adapter leaves fp32.
import torch
from peft import AutoPeftModelForCausalLM, PeftModel
from transformers import AutoModelForCausalLM


def load(base: str, adapters: str):
    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base), adapters)
    model.half()
    model.eval()
    return model


def load_merged(path: str):
    model = AutoPeftModelForCausalLM.from_pretrained(path, is_trainable=False)
    model = model.to(torch.bfloat16)
    return model

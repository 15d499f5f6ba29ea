# The name is rebound, but to another PEFT wrap: the cast after it still casts trainable adapters.
import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM


def build(base: str):
    model = AutoModelForCausalLM.from_pretrained(base)
    model = get_peft_model(model, LoraConfig(r=8))
    model.print_trainable_parameters()
    model = get_peft_model(model.base_model.model, LoraConfig(r=16))
    model.to(torch.bfloat16)  # ampdoctor: expect[AMP127]
    return model

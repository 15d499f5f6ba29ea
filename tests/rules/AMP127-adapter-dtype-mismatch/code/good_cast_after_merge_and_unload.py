# Adapters merged into the base before the cast: `merge_and_unload()` returns a plain model, so the half cast
# after it casts no adapter (an inference loader).
import torch
from peft import PeftModel
from transformers import AutoModelForCausalLM


def load(base: str, adapters: str):
    model = AutoModelForCausalLM.from_pretrained(base, torch_dtype=torch.float16)
    model = PeftModel.from_pretrained(model, adapters)
    model = model.merge_and_unload()
    model.to(torch.float16)
    return model

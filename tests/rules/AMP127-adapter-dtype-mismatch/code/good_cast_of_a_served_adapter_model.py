# A worker that answers requests: it rebuilds the LoRA model, loads the trained adapter weights into it, casts the
# whole model to half for speed and puts it in eval mode. Nothing in the module trains, so no optimizer ever steps the
# half adapters.
import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM


class Worker:
    def __init__(self, base_path, adapter_file, use_bf16=True):
        base = AutoModelForCausalLM.from_pretrained(base_path)
        self.model = get_peft_model(base, LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"]))
        self.model.load_state_dict(torch.load(adapter_file, map_location="cpu"), strict=False)
        if use_bf16:
            self.model.bfloat16()
        else:
            self.model.half()
        self.model.eval()

    @torch.no_grad()
    def answer(self, input_ids):
        return self.model.generate(input_ids=input_ids, max_new_tokens=64)

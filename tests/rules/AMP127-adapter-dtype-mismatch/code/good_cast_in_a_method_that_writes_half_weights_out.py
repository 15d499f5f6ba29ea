# The adapters train in fp32; `write_out` runs after training and writes the weights out in fp16: it casts, saves,
# and takes no step, so no optimizer ever meets the half adapters.
import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM


class LoraModule(torch.nn.Module):
    def __init__(self, base: str):
        super().__init__()
        self.llm = get_peft_model(AutoModelForCausalLM.from_pretrained(base), LoraConfig(r=8))

    def forward(self, **batch):
        return self.llm(**batch)

    def write_out(self, out_dir: str, fp32: bool = False):
        if not fp32:
            self.llm.half()
        self.llm.save_pretrained(out_dir)

    def write_state(self, path: str):
        self.llm.to(torch.bfloat16)
        torch.save(self.llm.state_dict(), path)

# A save between steps that casts the live model: the checkpoint is fp16, and so are the adapters the next steps
# train, outside autocast.
import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM


class LoraModule(torch.nn.Module):
    def __init__(self, base: str):
        super().__init__()
        self.llm = get_peft_model(AutoModelForCausalLM.from_pretrained(base), LoraConfig(r=8))

    def save_and_go_on(self, out_dir: str, batch, optimizer):
        self.llm.half()  # ampdoctor: expect[AMP127]
        self.llm.save_pretrained(out_dir)
        loss = self.llm(**batch).loss
        loss.backward()
        optimizer.step()

    def cast_then_save_another(self, other, path: str):
        self.llm.to(torch.float16)  # ampdoctor: expect[AMP127]
        torch.save(other.state_dict(), path)

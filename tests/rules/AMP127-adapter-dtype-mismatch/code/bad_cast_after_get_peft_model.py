# huggingface/peft#2421 / axolotl-ai-cloud/axolotl#3310: PEFT >= 0.11 keeps the adapters fp32 (PR #1706); casting the
# wrapped model afterwards casts the trainable LoRA weights to bf16 too, and the forward runs without autocast.
import torch
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import AutoModelForCausalLM

base = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")
model = get_peft_model(base, LoraConfig(r=16, lora_alpha=32, target_modules=["q_proj", "v_proj"]))
model.to(torch.bfloat16)  # ampdoctor: expect[AMP127]
model.print_trainable_parameters()


def resume(path):
    resumed = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B"), path, is_trainable=True)
    resumed = resumed.bfloat16()  # ampdoctor: expect[AMP127]
    return resumed


def resume_when_asked(path, train: bool):
    # `is_trainable` from the caller: the adapters may be trained
    from peft import AutoPeftModelForCausalLM

    model = AutoPeftModelForCausalLM.from_pretrained(path, is_trainable=train)
    model.half()  # ampdoctor: expect[AMP127]
    return model

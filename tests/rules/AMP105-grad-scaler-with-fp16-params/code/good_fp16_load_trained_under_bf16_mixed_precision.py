# A model loaded in fp16 and trained with accelerate set to bf16 mixed precision: bf16 autocast scales no loss, so
# no GradScaler meets the fp16 gradients (the fp16 weights are another matter: AMP128 reads master weights).
import torch
from accelerate import Accelerator
from transformers import AutoModelForCausalLM


def main(args, loader):
    accelerator = Accelerator(mixed_precision="bf16")
    model = AutoModelForCausalLM.from_pretrained(args.model, torch_dtype=torch.float16)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    for batch in loader:
        accelerator.backward(model(**batch).loss)
        optimizer.step()
        optimizer.zero_grad()

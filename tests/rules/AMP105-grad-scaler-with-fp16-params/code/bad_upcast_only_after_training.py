# The model goes back to fp32 only to be saved, after the training loop: during training the adapters added to
# the fp16 base were fp16, and the GradScaler of the fp16 run refused their gradients.
import torch
from accelerate import Accelerator


def main(args, unet, lora_config, batches):
    accelerator = Accelerator(mixed_precision=args.mixed_precision)
    weight_dtype = torch.float16 if accelerator.mixed_precision == "fp16" else torch.float32
    unet.to(accelerator.device, dtype=weight_dtype)
    unet.add_adapter(lora_config)  # ampdoctor: expect[AMP105]
    optimizer = torch.optim.AdamW([p for p in unet.parameters() if p.requires_grad], lr=1e-4)
    unet, optimizer = accelerator.prepare(unet, optimizer)
    for batch in batches:
        loss = unet(batch).mean()
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
    unet = unet.to(torch.float32)
    unet.save_pretrained(args.output_dir)

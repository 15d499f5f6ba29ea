"""Incident 3 (bghira/SimpleTuner#854): `--gradient_precision=fp32` retypes `.grad` of a bf16 model after each
backward; with gradient accumulation the next backward fails with "Expected BFloat16, got Float".
`ampdoctor lint` reports grad-dtype-mismatch on line 19."""

import torch


def train(transformer, optimizer, accelerator, loader, args):
    transformer.to(accelerator.device, dtype=torch.bfloat16)
    for step, batch in enumerate(loader):
        with accelerator.accumulate(transformer):
            model_pred = transformer(batch["latents"], batch["timesteps"])
            loss = torch.nn.functional.mse_loss(model_pred.float(), batch["target"].float())
            accelerator.backward(loss)
            if args.gradient_precision == "fp32":
                for param in transformer.parameters():
                    if param.grad is not None:
                        # upcast so that the optimizer sees fp32 gradients
                        param.grad.data = param.grad.data.to(torch.float32)
            if accelerator.sync_gradients:
                accelerator.clip_grad_norm_(transformer.parameters(), args.max_grad_norm)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

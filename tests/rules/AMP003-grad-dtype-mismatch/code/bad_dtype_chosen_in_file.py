# The file chooses the weight dtype itself (bf16 unless asked otherwise) and casts the model to it positionally,
# as SimpleTuner did before its fix for bghira/SimpleTuner#854.
import torch


def main(args, transformer, loader, optimizer):
    weight_dtype = torch.bfloat16 if not args.full_precision else torch.float32
    transformer.to(args.device, weight_dtype)
    for step, batch in enumerate(loader):
        transformer(**batch).loss.backward()
        if args.gradient_precision == "fp32":
            for param in transformer.parameters():
                if param.grad is not None:
                    param.grad.data = param.grad.data.to(torch.float32)  # ampdoctor: expect[AMP003:warning]
        if step % args.gradient_accumulation_steps == 0:
            optimizer.step()
            optimizer.zero_grad()

# bghira/SimpleTuner#854 (incident 3): after every backward the trainer retypes the bf16 model's gradients to fp32;
# the next micro-batch's backward cannot accumulate a bf16 gradient into the fp32 .grad.
import torch


def train(transformer, loader, optimizer, args):
    transformer.to(torch.bfloat16)
    for step, batch in enumerate(loader):
        loss = transformer(**batch).loss / args.gradient_accumulation_steps
        loss.backward()
        if args.gradient_precision == "fp32":
            for param in transformer.parameters():
                if param.grad is not None:
                    param.grad.data = param.grad.data.to(torch.float32)  # ampdoctor: expect[AMP003:warning]
        if (step + 1) % args.gradient_accumulation_steps == 0:
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

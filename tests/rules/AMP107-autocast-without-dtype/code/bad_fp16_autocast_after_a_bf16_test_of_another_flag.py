# The bf16 cast and the autocast sit under `if` statements that test different things, so one pass can take both:
# the forward is cast to bf16 and then run under autocast's fp16 default.
import torch


def train_one_step(model, samples, targets, criterion, loss_scaler, use_deepspeed):
    if use_deepspeed:
        samples = samples.bfloat16()
    if loss_scaler is None:
        loss = criterion(model(samples), targets)
    else:
        with torch.cuda.amp.autocast():  # ampdoctor: expect[AMP107]
            loss = criterion(model(samples), targets)
    return loss

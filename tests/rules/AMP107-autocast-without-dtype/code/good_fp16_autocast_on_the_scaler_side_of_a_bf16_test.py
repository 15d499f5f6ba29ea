# The file splits its runs by a test: without a loss scaler (the DeepSpeed path) inputs are cast to bf16 by hand;
# with one (torch AMP) the forward runs under autocast's fp16 default, which the scaler is there for. The two `if`
# statements that test the scaler sit at different depths, and evaluation splits the same way on its own flag, so
# no bf16 of the file reaches an autocast.
import torch


def train_one_step(model, samples, targets, criterion, loss_scaler, fp16, masked):
    if loss_scaler is None:
        samples = samples.half() if fp16 else samples.bfloat16()
    if masked:
        if loss_scaler is None:
            loss = criterion(model(samples), targets)
        else:
            with torch.cuda.amp.autocast():
                loss = criterion(model(samples), targets)
    else:
        loss = criterion(model(samples), targets)
    return loss


@torch.no_grad()
def evaluate(model, images, ds, bf16):
    if ds:
        images = images.bfloat16() if bf16 else images.half()
        output = model(images)
    else:
        with torch.cuda.amp.autocast():
            output = model(images)
    return output

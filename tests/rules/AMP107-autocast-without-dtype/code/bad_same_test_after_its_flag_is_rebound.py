# The two `if` statements spell the same test, but the flag is rebound between them: a pass can cast to bf16 in the
# first and then take the dtype-less (fp16) autocast in the second.
import torch


def train_step(model, x, hand_cast, warmup_done):
    if hand_cast:
        x = x.bfloat16()
    hand_cast = hand_cast and not warmup_done
    if hand_cast:
        y = model(x)
    else:
        with torch.cuda.amp.autocast():  # ampdoctor: expect[AMP107]
            y = model(x)
    return y

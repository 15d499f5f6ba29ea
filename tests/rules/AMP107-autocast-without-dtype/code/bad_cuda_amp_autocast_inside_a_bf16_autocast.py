# torch.cuda.amp.autocast has fp16 as its own default, whatever autocast is around it: this block runs in fp16
# inside the bf16 one. (torch.autocast without a dtype would have taken the outer bf16.)
import torch


def train_step(model, x, y, optimizer):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        h = model.encoder(x)
        with torch.cuda.amp.autocast():  # ampdoctor: expect[AMP107]
            loss = model.head(h, y)
    loss.backward()
    optimizer.step()

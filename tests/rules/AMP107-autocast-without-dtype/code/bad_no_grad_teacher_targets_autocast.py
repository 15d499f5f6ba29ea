# Distillation in bf16: the frozen teacher runs under a dtype-less autocast, which is fp16 on CUDA, inside
# `torch.no_grad()`. No gradient flows through it, but its outputs are the student's targets: an fp16 overflow in
# the teacher becomes an inf/NaN loss. The no-grad block is part of training because the loss reads what it makes.
import torch
import torch.nn.functional as F


def train_step(student, teacher, batch, optimizer):
    with torch.no_grad():
        with torch.autocast("cuda"):  # ampdoctor: expect[AMP107]
            targets = teacher(batch)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = F.mse_loss(student(batch), targets.float())
    loss.backward()
    optimizer.step()

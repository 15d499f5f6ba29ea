# The training step states its dtype; autocast without one only wraps sampling for the validation images, which
# does not change training (a note at most).
import torch


def log_validation(pipeline, prompt):
    with torch.autocast("cuda"):
        return pipeline(prompt).images


def train_step(model, batch, optimizer):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(batch).mean()
    loss.backward()
    optimizer.step()

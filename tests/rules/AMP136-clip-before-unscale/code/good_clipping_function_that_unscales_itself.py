# Clipping helpers that take care of the scale: one is handed the scaler (and unscales inside), one is handed the
# scale (and clips at a threshold scaled alike), one is defined here and unscales before it clips.
import torch

from utils.optim import clip_grad_norm


def clip_gradients(opt, scaler, params, max_norm):
    scaler.unscale_(opt)
    return torch.nn.utils.clip_grad_norm_(params, max_norm)


def train(model, opt, loader, max_norm):
    scaler = torch.amp.GradScaler("cuda")
    for batch in loader:
        with torch.autocast("cuda", dtype=torch.float16):
            loss = model(batch).float().mean()
        scaler.scale(loss).backward()
        clip_grad_norm(model.parameters(), max_norm, scaler=scaler)
        clip_grad_norm(model.parameters(), max_norm, scale=scaler.get_scale())
        scaler.step(opt)
        scaler.update()


def train_own(model, opt, loader, max_norm):
    scaler = torch.amp.GradScaler("cuda")
    for batch in loader:
        with torch.autocast("cuda", dtype=torch.float16):
            loss = model(batch).float().mean()
        scaler.scale(loss).backward()
        clip_gradients(opt, scaler, model.parameters(), max_norm)
        scaler.step(opt)
        scaler.update()

# The only bf16 in the file is a branch of a helper that casts models to whatever dtype its caller passes: it says
# nothing of the precision this script runs in, so its autocast without a dtype contradicts nothing the file says.
import torch


def convert_models(models, dtype):
    for model in models:
        if dtype == torch.float16:
            model.half()
        elif dtype == torch.bfloat16:
            model.bfloat16()


def train(autoencoder, model, loader, opt):
    @torch.cuda.amp.autocast()
    def encode(images):
        return autoencoder.encode(images)

    for images in loader:
        with torch.no_grad():
            codes = encode(images)
        with torch.autocast("cuda"):
            loss = model(codes).float().mean()
        loss.backward()
        opt.step()

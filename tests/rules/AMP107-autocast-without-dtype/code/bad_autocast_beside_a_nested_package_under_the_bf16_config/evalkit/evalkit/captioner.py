# A package of its own (evalkit/setup.py): the outer project's config does not govern it.
import torch


class Captioner:
    def __init__(self, model):
        self.model = model.eval()

    def caption(self, image):
        return self.model.generate(image.to(torch.float32))

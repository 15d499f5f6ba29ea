# A package of its own (evalkit/setup.py) that the repository ships beside its training: the accelerate config of the
# outer project trains that project in bf16 and says nothing of how this kit runs the models it evaluates.
import torch


class Captioner:
    def __init__(self, model, tokenizer):
        self.model = model.cuda().eval()
        self.tokenizer = tokenizer

    def caption(self, image, prompt):
        with torch.cuda.amp.autocast():
            return self.model.generate(image, self.tokenizer(prompt))

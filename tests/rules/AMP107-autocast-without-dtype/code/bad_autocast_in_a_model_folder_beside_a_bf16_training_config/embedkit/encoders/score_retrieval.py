# The same encoding code in a package folder of the model's own: it may run inside the bf16 training the project
# configures, where the fp16 autocast contradicts it.
import torch


class Encoder:
    def __init__(self, net, device="cuda"):
        self.net = net.to(device).eval()

    @torch.no_grad()
    def encode(self, batches):
        vectors = []
        for batch in batches:
            with torch.cuda.amp.autocast():  # ampdoctor: expect[AMP107]
                out = self.net(**batch)
            vectors.append(torch.nn.functional.normalize(out.float(), dim=-1).cpu())
        return torch.cat(vectors)

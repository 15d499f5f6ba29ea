# An evaluation harness under eval/: it scores an embedding model and trains nothing, so the project's bf16
# training config says nothing of the precision it runs in; the fp16 autocast is a note.
import torch


class Encoder:
    def __init__(self, net, device="cuda"):
        self.net = net.to(device).eval()

    @torch.no_grad()
    def encode(self, batches):
        vectors = []
        for batch in batches:
            with torch.cuda.amp.autocast():  # ampdoctor: expect[AMP107:info]
                out = self.net(**batch)
            vectors.append(torch.nn.functional.normalize(out.float(), dim=-1).cpu())
        return torch.cat(vectors)

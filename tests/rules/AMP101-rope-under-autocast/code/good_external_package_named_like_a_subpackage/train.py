# The trainer loads HF's model (`from transformers import AutoModel`) under bf16 autocast. The project has a
# subpackage of its own named `transformers` (`pkg/models/transformers`, as diffusers does): an absolute import cannot
# name a package inside another one, so nothing of it is run under this autocast.
import torch
from transformers import AutoModel


def main(loader, path):
    model = AutoModel.from_pretrained(path)
    optimizer = torch.optim.AdamW(model.parameters())
    for batch in loader:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(**batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()

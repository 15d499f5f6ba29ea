# The trainer builds one of two models of lm/model.py, casts it to bf16 and trains it without autocast. The cast
# reaches the classes it builds and what they build; the file's pretraining head, which it never builds, is not run.
import torch

from lm.model import Classifier, TinyLM


def main(loader, task):
    if task == "lm":
        model = TinyLM()
    else:
        model = Classifier.from_pretrained("checkpoints/classifier")
    model = model.to(torch.bfloat16)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for ids, labels in loader:
        loss = model(ids, labels=labels)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()

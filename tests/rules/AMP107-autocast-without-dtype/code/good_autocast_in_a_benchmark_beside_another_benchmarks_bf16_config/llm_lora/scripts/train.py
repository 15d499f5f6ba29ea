# One benchmark of a repository of independent benchmarks: accelerate runs it in bf16 (its own configs/ folder).
from accelerate import Accelerator


def main(model, loader, optimizer):
    accelerator = Accelerator()
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    for batch in loader:
        accelerator.backward(model(**batch).loss)
        optimizer.step()

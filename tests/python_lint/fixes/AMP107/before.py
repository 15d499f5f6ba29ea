import torch
from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained("gpt2", torch_dtype=torch.bfloat16).cuda()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)


def train(loader):
    for batch in loader:
        with torch.autocast("cuda"):  # mixed precision
            loss = model(**batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()


@torch.no_grad()
def evaluate(loader):
    with torch.autocast(
        device_type="cuda",
        cache_enabled=False,
    ):
        return sum(model(**batch).loss.item() for batch in loader)

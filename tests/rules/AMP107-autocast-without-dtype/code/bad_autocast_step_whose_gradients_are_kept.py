# A warm-up step under a dtype-less (fp16) autocast in a bf16 run: its outputs are deleted, but the gradients its
# backward leaves are not cleared, and the optimizer steps on them: the fp16 pass changes the weights.
import torch


def warm_up_and_train(model, make_batch, steps):
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    with torch.autocast("cuda"):  # ampdoctor: expect[AMP107]
        out = model(make_batch())
        loss = out.float().mean()
        loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    del out, loss
    for _ in range(steps):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(make_batch()).float().mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()

# Before a bf16 training run, the largest batch that fits is found by one forward and backward pass per size under a
# dtype-less (fp16) autocast: only the peak memory is read; the outputs are deleted and the gradients cleared before
# training starts, so nothing computed in fp16 reaches the weights (a note at most).
import torch


def find_batch_size(model, make_batch, device):
    best = 1
    for size in (1, 2, 4, 8, 16):
        try:
            torch.cuda.reset_peak_memory_stats(device)
            batch = make_batch(size)
            with torch.autocast("cuda"):
                out = model(batch)
                loss = out.float().mean()
                loss.backward()
            peak = torch.cuda.max_memory_allocated(device)
            model.zero_grad(set_to_none=True)
            del batch, out, loss
            print(f"batch {size}: {peak / 2**30:.1f} GiB")
            best = size
        except torch.cuda.OutOfMemoryError:
            break
    return best


def train(model, make_batch, device, steps):
    size = find_batch_size(model, make_batch, device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(steps):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(make_batch(size)).float().mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()

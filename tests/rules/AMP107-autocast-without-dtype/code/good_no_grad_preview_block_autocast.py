# A bf16 training step that, every so often, renders preview images under a dtype-less (fp16) autocast inside a
# `torch.no_grad()` block and saves them there: nothing the block computes reaches the loss, the gradients or the
# weights, so the fp16 autocast does not change training (a note at most).
import torch


def train(model, pipeline, loader, optimizer, prompts):
    for step, batch in enumerate(loader):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(batch).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if step % 500 == 0:
            with torch.no_grad():
                with torch.autocast("cuda"):
                    images = pipeline(prompts).images
                for i, image in enumerate(images):
                    image.save(f"preview_{step}_{i}.png")

# The training loop reads its images from batches that the file's own collate function builds: it stacks them and
# makes them fp32 (`.float()`). The frozen autoencoder runs in the run's weight dtype (half whenever mixed precision is
# on), and the classifier is cast to fp16; neither call casts the item, and no autocast runs them.
import torch


def collate_examples(examples):
    images = torch.stack([ex["image"] for ex in examples])
    images = images.to(memory_format=torch.contiguous_format).float()
    return {"images": images, "ids": torch.stack([ex["ids"] for ex in examples])}


def train(args, dataset, autoencoder, denoiser, optimizer):
    weight_dtype = torch.float32
    if args.mixed_precision == "bf16":
        weight_dtype = torch.bfloat16
    elif args.mixed_precision == "fp16":
        weight_dtype = torch.float16
    autoencoder.to("cuda", dtype=weight_dtype)
    autoencoder.requires_grad_(False)
    loader = torch.utils.data.DataLoader(dataset, batch_size=4, shuffle=True, collate_fn=collate_examples)
    for step, batch in enumerate(loader):
        latents = autoencoder.encode(batch["images"].to("cuda")).latent_dist.sample()  # ampdoctor: expect[AMP131]
        loss = denoiser(latents).mean()
        loss.backward()
        optimizer.step()


def score(classifier, dataset):
    classifier = classifier.cuda().half()
    loader = torch.utils.data.DataLoader(dataset, batch_size=16, collate_fn=collate_examples)
    for batch in loader:
        print(classifier(batch["images"].cuda()).argmax(-1))  # ampdoctor: expect[AMP131]

# A probe trained under fp16 autocast on stored features: it builds no encoder, so its autocast never reaches the
# checkpoint.
import torch

from pkg.probe import LinearProbe


def main(loader):
    probe = LinearProbe()
    opt = torch.optim.SGD(probe.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cuda")
    for feats, labels in loader:
        with torch.autocast("cuda", dtype=torch.float16):
            loss = torch.nn.functional.cross_entropy(probe(feats).float(), labels)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

# A loss module moved to the GPU where it is built (`nn.CrossEntropyLoss().cuda()`, `.to(device)`) is still a loss:
# called on the logits of a model cast to fp16 without autocast, the loss is quantized to fp16's grid.
import torch
from torch import nn


class Classifier(nn.Module):
    def __init__(self, features, classes):
        super().__init__()
        self.fc = nn.Linear(features, classes)

    def forward(self, x):
        return self.fc(x)


def train(loader, device):
    model = Classifier(512, 1000).to(device).half()
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1).cuda()
    aux_criterion = nn.CrossEntropyLoss().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for images, target in loader:
        output = model(images.to(device).half())
        loss = criterion(output, target)  # ampdoctor: expect[AMP125]
        loss = loss + aux_criterion(output, target)  # ampdoctor: expect[AMP125]
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

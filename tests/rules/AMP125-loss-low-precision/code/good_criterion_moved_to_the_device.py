# The same loss modules moved to the GPU, given the logits upcast: the loss is computed in fp32.
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
        output = model(images.to(device).half()).float()
        loss = criterion(output, target)
        loss = loss + aux_criterion(output, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

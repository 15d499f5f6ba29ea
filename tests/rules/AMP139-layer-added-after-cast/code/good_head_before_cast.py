# The layer is added before the cast, cast again after, or created in the model's dtype; under autocast an fp32
# layer is cast for its matmuls.
import torch
from torch import nn
from transformers import AutoModel


def build(num_labels):
    model = AutoModel.from_pretrained("bert-base-uncased")
    model.classifier = nn.Linear(model.config.hidden_size, num_labels)
    model = model.to(torch.bfloat16)
    return model


def build_recast(net, vocab):
    net.half()
    net.head = nn.Linear(512, vocab)
    net.half()
    return net


def build_typed(net, vocab):
    net = net.to(torch.bfloat16)
    net.head = nn.Linear(512, vocab, dtype=torch.bfloat16)
    net.drop = nn.Dropout(0.1)
    return net

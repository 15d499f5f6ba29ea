# transformers PR #11572/#14181: a layer made after the model was cast to half is fp32 inside a bf16 model.
import torch
from torch import nn
from transformers import AutoModel


def build(num_labels):
    model = AutoModel.from_pretrained("bert-base-uncased", torch_dtype=torch.bfloat16)
    model.classifier = nn.Linear(model.config.hidden_size, num_labels)  # ampdoctor: expect[AMP139]
    return model


def build_local(net, vocab):
    net.half()
    net.head = nn.Sequential(nn.Dropout(0.1), nn.Linear(512, vocab))  # ampdoctor: expect[AMP139]
    return net

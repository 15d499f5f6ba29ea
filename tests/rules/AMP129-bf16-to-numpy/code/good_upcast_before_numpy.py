# The fix of pytorch/pytorch#110285: `.float()` before `.numpy()`; fp16 tensors convert as they are.
import numpy as np
import torch
from transformers import AutoModel

model = AutoModel.from_pretrained("BAAI/bge-small-en-v1.5", torch_dtype=torch.bfloat16)


@torch.no_grad()
def encode(batch):
    embeddings = model(**batch).last_hidden_state[:, 0]
    return embeddings.float().cpu().numpy()


def scores(query, docs):
    q = query.to(torch.bfloat16).float()
    half = query.half()
    return np.asarray(q) @ docs.T, half.numpy()

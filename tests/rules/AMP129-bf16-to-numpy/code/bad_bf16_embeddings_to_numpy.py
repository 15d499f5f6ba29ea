# embeddings-benchmark/mteb#1297 / pytorch/pytorch#110285: bf16 embeddings handed to NumPy, which has no bfloat16:
# "TypeError: Got unsupported ScalarType BFloat16".
import numpy as np
import torch
from transformers import AutoModel

model = AutoModel.from_pretrained("BAAI/bge-small-en-v1.5", torch_dtype=torch.bfloat16)


@torch.no_grad()
def encode(batch):
    embeddings = model(**batch).last_hidden_state[:, 0]
    return embeddings.cpu().numpy()  # ampdoctor: expect[AMP129]


def scores(query, docs):
    q = query.to(torch.bfloat16)
    return np.asarray(q) @ docs.T  # ampdoctor: expect[AMP129]

# The fix the catalog gives for Modalities PR #464: `logits.float()` before the loss of a bf16 model; under
# autocast cross_entropy already runs in fp32.
import torch
import torch.nn.functional as F
from transformers import AutoModelForSequenceClassification

model = AutoModelForSequenceClassification.from_pretrained("bert-base-uncased", torch_dtype=torch.bfloat16)
criterion = torch.nn.CrossEntropyLoss()


def step(batch, labels):
    out = model(**batch)
    return criterion(out.logits.float(), labels)


def eval_loss(batch, labels):
    logits = model(**batch).logits.float()
    return F.cross_entropy(logits, labels)

# Sources of AMP125 (sentence-transformers PR #3800, google-deepmind/optax#1020): a model loaded in bf16
# and a loss module applied to its bf16 logits.
import torch
from transformers import AutoModelForSequenceClassification

model = AutoModelForSequenceClassification.from_pretrained("bert-base-uncased", torch_dtype=torch.bfloat16)
criterion = torch.nn.CrossEntropyLoss()


def step(batch, labels):
    out = model(**batch)
    return criterion(out.logits, labels)  # ampdoctor: expect[AMP125]

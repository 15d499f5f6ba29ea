# Log-probabilities of a bf16 model's logits (no autocast), taken the other ways RL and distillation code writes them:
# the tensor method `.log_softmax(-1)`, a helper named after log_softmax that gathers the chosen tokens, and logits
# divided by a sampling temperature first (a Python number keeps the bf16 dtype).
import torch
from transformers import AutoModelForCausalLM

actor = AutoModelForCausalLM.from_pretrained("tiny-actor", torch_dtype=torch.bfloat16)


def gathered_log_softmax(scores, ids):
    return scores.log_softmax(-1).gather(-1, ids.unsqueeze(-1)).squeeze(-1)


def summed_logps(scores, ids):
    return gathered_log_softmax(scores, ids).sum(-1)


def token_logps(ids):
    scores = actor(ids).logits[:, :-1]
    return scores.log_softmax(dim=-1).gather(-1, ids[:, 1:, None])  # ampdoctor: expect[AMP125]


def chosen_logps(ids, mask):
    out = actor(input_ids=ids, attention_mask=mask)
    return gathered_log_softmax(out.logits[:, :-1], ids[:, 1:])  # ampdoctor: expect[AMP125]


def sampled_logps(ids, temperature: float = 0.7):
    scaled = actor(ids).logits / temperature
    return torch.log_softmax(scaled, dim=-1)  # ampdoctor: expect[AMP125]


def sequence_scores(ids):
    out = actor(input_ids=ids)
    return summed_logps(out.logits[:, :-1], ids[:, 1:])  # ampdoctor: expect[AMP125]

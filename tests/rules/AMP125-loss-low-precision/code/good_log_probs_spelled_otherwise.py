# The fix of bad_log_probs_spelled_otherwise.py: each spelling takes the log-probabilities of fp32 logits (an upcast,
# or log_softmax's own fp32 dtype); a temperature held in an fp32 tensor promotes the logits.
import torch
from transformers import AutoModelForCausalLM

actor = AutoModelForCausalLM.from_pretrained("tiny-actor", torch_dtype=torch.bfloat16)


def gathered_log_softmax(scores, ids):
    return scores.log_softmax(-1).gather(-1, ids.unsqueeze(-1)).squeeze(-1)


def summed_logps(scores, ids):
    return gathered_log_softmax(scores, ids).sum(-1)


def token_logps(ids):
    scores = actor(ids).logits[:, :-1]
    return scores.log_softmax(dim=-1, dtype=torch.float32).gather(-1, ids[:, 1:, None])


def chosen_logps(ids, mask):
    out = actor(input_ids=ids, attention_mask=mask)
    return gathered_log_softmax(out.logits[:, :-1].float(), ids[:, 1:])


def sampled_logps(ids, temperature: float = 0.7):
    scaled = actor(ids).logits.float() / temperature
    return torch.log_softmax(scaled, dim=-1)


def tensor_temperature_logps(ids):
    temperature = torch.full((1,), 0.7)
    scaled = actor(ids).logits / temperature
    return torch.log_softmax(scaled, dim=-1)


def sequence_scores(ids):
    out = actor(input_ids=ids)
    return summed_logps(out.logits[:, :-1].float(), ids[:, 1:])

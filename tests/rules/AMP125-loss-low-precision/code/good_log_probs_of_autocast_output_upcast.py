# The same steps with the log-softmax inside the autocast block, of upcast logits, or asked for in fp32; and a
# block that turns autocast off.
import torch
import torch.nn.functional as F


def ppo_epoch(policy, batches, old_logp, autocast_ctx):
    for ids, mask, index in batches:
        with autocast_ctx:
            res = policy(input_ids=ids, attention_mask=mask)
            logp = F.log_softmax(res.logits[:, :-1], dim=-1)
        yield torch.exp(logp - old_logp[index])


def score(model, ids):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        out = model(ids)
    return out.logits.float().log_softmax(-1)


def score_fp32(model, ids):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        out = model(ids)
    return F.log_softmax(out.logits, dim=-1, dtype=torch.float32)


def score_without_autocast(model, ids):
    with torch.autocast("cuda", enabled=False):
        out = model(ids)
    return F.log_softmax(out.logits, dim=-1)


def train_step(model, batch, optimizer, scaler):
    with torch.autocast("cuda", dtype=torch.float16):
        logits = model(batch["input"])
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), batch["target"].view(-1))
    scaler.scale(loss).backward()


def distill_step(student, teacher_probs, x):
    # an fp32 target promotes the half input: kl_div is computed in fp32
    with torch.autocast("cuda", dtype=torch.bfloat16):
        out = student(x)
    return F.kl_div(out, teacher_probs.float(), reduction="batchmean")


def grpo_log_probs(model, ids, targets, pad_id):
    # the logits are upcast where they are bound, inside the block: the loss below it gets fp32
    with torch.autocast("cuda", dtype=torch.bfloat16):
        logits = model.forward(ids).float()
    return -F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1), ignore_index=pad_id, reduction="none")


def score_upcast_by_to(model, ids):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        logits = model(ids).logits.to(torch.float32)
    return torch.log_softmax(logits, dim=-1)

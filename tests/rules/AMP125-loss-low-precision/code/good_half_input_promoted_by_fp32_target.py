# kl_div and BCE take a float target of the input's shape: an fp32 target promotes the half input, and the loss is
# computed in fp32, as for any binary op between the two.
import torch
import torch.nn.functional as F


def distill_loss(student, teacher_probs, x):
    student = student.to(torch.bfloat16)
    log_probs = student(x).log_softmax(-1)
    target = teacher_probs.float()
    return F.kl_div(log_probs, target, reduction="batchmean")

# A tracer that replays a recorded autocast state (`autocast(*saved)`): the saved arguments may say "off", so the
# call is no evidence that this file runs under half autocast, and the custom Function beside it is not judged.
import torch


class ModIndex(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, index):
        ctx.save_for_backward(index)
        return x % index

    @staticmethod
    def backward(ctx, grad):
        return grad, None


def replay(body, saved_state, *args):
    device_type, dtype, enabled, cache_enabled = saved_state
    with torch.autocast(*(device_type, dtype, enabled, cache_enabled)):
        return body(*args)

# Gradients are sent in fp16 to save bandwidth: `.grad` is retyped for the reduce, and the callback that runs when
# the reduce completes casts it back to the parameter's dtype (or drops it on the ranks that do not own it), before
# any later backward accumulates into it.
import torch
import torch.distributed as dist


class ShardedReducer:
    def __init__(self, params, reduce_fp16=True):
        self.params, self.reduce_fp16, self.handles = list(params), reduce_fp16, []

    def reduce(self, owner_rank, rank):
        for param in self.params:
            if self.reduce_fp16:
                param.grad.data = param.grad.data.half()

            def cleanup(param=param):
                if owner_rank != rank:
                    param.grad = None
                else:
                    param.grad.data = param.grad.data.to(dtype=param.dtype)

            self.handles.append((dist.reduce(param.grad.data, owner_rank, async_op=True), cleanup))

    def wait(self):
        for handle, cleanup in self.handles:
            handle.wait()
            cleanup()
        self.handles.clear()


def train_step(model, reducer, loss, bf16_params=True):
    if bf16_params:
        model.to(torch.bfloat16)
    loss.backward()
    reducer.reduce(0, dist.get_rank())
    reducer.wait()

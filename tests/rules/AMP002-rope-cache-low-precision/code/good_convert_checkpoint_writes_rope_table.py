# A checkpoint converter that stores the rotary frequencies next to the weights in the checkpoint's dtype: the
# table is written, not multiplied into any query here (conversion code: a note, `scope: compute`). The model that
# loads the file is judged where it runs.
import torch


def convert(state: dict, head_dim: int, dtype: torch.dtype, out: str) -> None:
    out_state = {name.replace("model.", ""): tensor.to(dtype) for name, tensor in state.items()}
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, head_dim, 2).float() / head_dim))
    out_state["rope.freqs"] = inv_freq.to(torch.bfloat16)
    torch.save(out_state, out)

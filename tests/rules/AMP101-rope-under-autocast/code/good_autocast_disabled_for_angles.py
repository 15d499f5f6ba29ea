# The fix of huggingface/transformers PR #29285: the angle matmul runs with autocast disabled, in fp32, even though
# the training step around it runs under bf16 autocast.
import torch


class AngleRotary(torch.nn.Module):
    def __init__(self, head_dim, theta=10000.0):
        super().__init__()
        self.register_buffer("inv_freq", theta ** -(torch.arange(0, head_dim, 2).float() / head_dim), persistent=False)

    @torch.no_grad()
    def forward(self, hidden, positions):
        freq_col = self.inv_freq[None, :, None].float().expand(positions.shape[0], -1, 1)
        pos_row = positions[:, None, :].float()
        with torch.autocast(device_type=hidden.device.type, enabled=False):
            angles = (freq_col.float() @ pos_row.float()).transpose(1, 2)
            angles = torch.cat((angles, angles), dim=-1)
            cos, sin = angles.cos(), angles.sin()
        return cos.to(hidden.dtype), sin.to(hidden.dtype)


def train_step(model, batch, optimizer):
    with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
        loss = model(**batch).loss
    loss.backward()
    optimizer.step()

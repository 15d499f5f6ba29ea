# huggingface/transformers PR #29285: before the fix, the rotary angles `inv_freq @ position_ids` were computed inside
# the caller's bf16 autocast; autocast runs matmuls in bf16 even on fp32 operands, so large positions collapse.
import torch


class AngleRotary(torch.nn.Module):
    def __init__(self, head_dim, theta=10000.0):
        super().__init__()
        self.register_buffer("inv_freq", theta ** -(torch.arange(0, head_dim, 2).float() / head_dim), persistent=False)

    @torch.no_grad()
    def forward(self, hidden, positions):
        freq_col = self.inv_freq[None, :, None].float().expand(positions.shape[0], -1, 1)
        pos_row = positions[:, None, :].float()
        angles = (freq_col @ pos_row).transpose(1, 2)  # ampdoctor: expect[AMP101]
        angles = torch.cat((angles, angles), dim=-1)
        return angles.cos().to(hidden.dtype), angles.sin().to(hidden.dtype)


def train_step(model, batch, optimizer):
    with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
        loss = model(**batch).loss
    loss.backward()
    optimizer.step()

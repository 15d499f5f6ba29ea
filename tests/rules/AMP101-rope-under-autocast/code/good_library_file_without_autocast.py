# A modeling file on its own: nothing here runs it under autocast (the rule stays silent unless the file enables
# or guards against autocast; cf. huggingface/transformers PR #29285, which fixed the library itself).
import torch


class AngleRotary(torch.nn.Module):
    def forward(self, hidden, positions):
        angles = (self.inv_freq[None, :, None].float() @ positions[:, None, :].float()).transpose(1, 2)
        angles = torch.cat((angles, angles), dim=-1)
        return angles.cos().to(hidden.dtype), angles.sin().to(hidden.dtype)

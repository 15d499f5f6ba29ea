# A modeling file on its own: nothing here runs it under autocast (the rule stays silent unless the file enables
# or guards against autocast; cf. huggingface/transformers PR #29285, which fixed the library itself).
import torch


class RotaryEmbedding(torch.nn.Module):
    def forward(self, x, position_ids):
        freqs = (self.inv_freq[None, :, None].float() @ position_ids[:, None, :].float()).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)

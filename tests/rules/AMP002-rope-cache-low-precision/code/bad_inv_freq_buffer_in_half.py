# huggingface/transformers#29496 / #25681: an `inv_freq` buffer created (or cast) in the model's half dtype; every
# angle derived from it inherits bf16's 8-bit mantissa.
import torch

MODEL_DTYPE = torch.bfloat16


class MistralRotaryEmbedding(torch.nn.Module):
    def __init__(self, dim, max_position_embeddings=4096, base=10000.0):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
        self.register_buffer("inv_freq", inv_freq.to(MODEL_DTYPE), persistent=False)  # ampdoctor: expect[AMP002]
        self.max_seq_len_cached = max_position_embeddings

    def forward(self, x, position_ids):
        freqs = position_ids[:, :, None].float() * self.inv_freq[None, None, :].float()
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)

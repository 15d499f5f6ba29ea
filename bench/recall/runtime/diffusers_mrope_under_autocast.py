"""Runtime reproduction of diffusers-mrope-under-autocast: diffusers' own Ideogram4 transformer
(transformer_ideogram4.py, whose multi-axis RoPE the fix took out of autocast), imported unmodified from the
extracted tree (argv[1]); a tiny fp32 model (random weights) trained under CPU bf16 autocast on a packed
[text][image] sequence laid out as the Ideogram4 pipeline lays it out (text positions 0.., image grid positions
(0, h, w) + IMAGE_POSITION_OFFSET); one flow-matching step under ``ampdoctor.audit(policy="bf16-mixed")``. Prints
the findings as JSON. See _diffusers.py for how the package is entered."""

import sys
from pathlib import Path

import torch
from _common import audited_step
from _diffusers import import_from_tree

import ampdoctor

ideogram4 = import_from_tree(Path(sys.argv[1]), "diffusers.models.transformers.transformer_ideogram4")

torch.manual_seed(0)
model = ideogram4.Ideogram4Transformer2DModel(in_channels=8, num_layers=1, attention_head_dim=24, num_attention_heads=2,
                                              intermediate_size=64, adaln_dim=16, llm_features_dim=16,
                                              mrope_section=(4, 4, 4))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
text, grid = 4, 16
h, w = torch.meshgrid(torch.arange(grid), torch.arange(grid), indexing="ij")
image_pos = torch.stack([torch.zeros(grid * grid, dtype=torch.long), h.reshape(-1), w.reshape(-1)], 1)
position_ids = torch.cat([torch.arange(text)[:, None].expand(text, 3), image_pos + ideogram4.IMAGE_POSITION_OFFSET])[None]
indicator = torch.tensor([ideogram4.LLM_TOKEN_INDICATOR] * text + [ideogram4.OUTPUT_IMAGE_INDICATOR] * grid * grid)[None]
seq = text + grid * grid
latents, noise = torch.randn(1, seq, 8), torch.randn(1, seq, 8)
t = torch.rand(1)


def step():
    with torch.autocast("cpu", dtype=torch.bfloat16):
        pred = model(hidden_states=t * latents + (1 - t) * noise, timestep=t, encoder_hidden_states=torch.randn(1, seq, 16),
                     position_ids=position_ids, segment_ids=torch.ones(1, seq, dtype=torch.long), indicator=indicator).sample
        loss = ((pred.float() - (latents - noise)) ** 2 * (indicator == ideogram4.OUTPUT_IMAGE_INDICATOR)[..., None]).mean()
    loss.backward()
    opt.step()


audited_step(ampdoctor.audit(policy="bf16-mixed", model=model), step)

"""Runtime reproduction of diffusers-freeu-fft-complexhalf: diffusers' own UNet2DConditionModel with FreeU enabled
(whose skip features go through utils/torch_utils.py's `fourier_filter`), imported unmodified from the extracted tree
(argv[1]); a tiny fp16 UNet (random weights) and one denoising forward, the use FreeU is for, under
``ampdoctor.audit(policy="fp16-true")``. Prints the findings as JSON. On CPU, fftn has no fp16 kernel at all (on
CUDA it returns the experimental complex32 the fix names): the step fails where the filter leaves fp16 as it is.
See _diffusers.py for how the package is entered."""

import sys
from pathlib import Path

import torch
from _common import audited_step
from _diffusers import import_from_tree

import ampdoctor

unet_module = import_from_tree(Path(sys.argv[1]), "diffusers.models.unets.unet_2d_condition")

torch.manual_seed(0)
unet = unet_module.UNet2DConditionModel(sample_size=16, in_channels=4, out_channels=4, block_out_channels=(32, 64),
                                        layers_per_block=1, down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
                                        up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"), cross_attention_dim=32,
                                        attention_head_dim=8, norm_num_groups=8).to(torch.float16)
unet.enable_freeu(s1=0.9, s2=0.2, b1=1.2, b2=1.4)
latents = torch.randn(1, 4, 16, 16, dtype=torch.float16)
text = torch.randn(1, 8, 32, dtype=torch.float16)


def step():
    with torch.no_grad():
        unet(latents, torch.tensor([10]), encoder_hidden_states=text)


audited_step(ampdoctor.audit(policy="fp16-true", model=unet), step)

"""AMP138's message says the EMA copy's dtype as the analysis knows it: a dtype the run chooses (a weight dtype that is
float32 unless mixed precision is on) is half only where the run chooses it, not "float32 or bfloat16"."""

from ampdoctor.lint.python import lint_source

RUN_CHOSEN = '''
import torch
from diffusers.training_utils import EMAModel


def main(args, unet, loader, optimizer):
    weight_dtype = torch.float32
    if args.mixed_precision == "bf16":
        weight_dtype = torch.bfloat16
    ema_unet = EMAModel(unet.parameters())
    ema_unet = ema_unet.to(weight_dtype)
    for batch in loader:
        loss = unet(batch).mean()
        loss.backward()
        optimizer.step()
        ema_unet.step(unet.parameters())
'''


def test_a_run_chosen_ema_dtype_is_said_as_half_where_the_run_chooses_it():
    findings, error = lint_source(RUN_CHOSEN, "train.py")
    assert error is None
    found = [f for f in findings if f.rule_id == "AMP138"]
    assert len(found) == 1
    assert "cast to bfloat16 where the run chooses it (else float32)" in found[0].message
    assert "float32 or" not in found[0].message

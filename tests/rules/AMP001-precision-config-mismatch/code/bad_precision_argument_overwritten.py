# Lightning-AI/litgpt PR #1802: the default is filled in, then overwritten for every caller, so `distribute(
# precision="16-true")` still ran in fp32.
import lightning as L


def distribute(model, devices=1, precision=None):
    """Set the model up for inference on `devices` in `precision`."""
    if precision is None:
        precision = "bf16-true"
    precision = "32-true"  # ampdoctor: expect[AMP001:warning]
    fabric = L.Fabric(devices=devices, precision=precision)
    return fabric.setup_module(model)

# The default is filled in only when the caller gave none; a branch-local override is the caller's choice.
import lightning as L


def distribute(model, devices=1, precision=None, quantize=None):
    if precision is None:
        precision = "bf16-true"
    if quantize is not None:
        precision = "16-true"
    fabric = L.Fabric(devices=devices, precision=precision)
    return fabric.setup_module(model)


def setup(precision="bf16-mixed"):
    print(precision)
    precision = "32-true"
    return precision

# A scaler built only for bf16 runs, in a file that casts the model to bf16: its gradients are bf16 and
# `unscale_` fails on them (the crash of h2o-llmstudio #628, reached through a bf16 branch).
import torch


def setup(model: torch.nn.Module, precision: str):
    if precision == "bf16":
        model = model.to(torch.bfloat16)
        scaler = torch.amp.GradScaler("cuda")  # ampdoctor: expect[AMP004:error]
    else:
        scaler = None
    return model, scaler

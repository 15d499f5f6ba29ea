# The same script, with a launcher that passes `--amp`: its bf16 DeepSpeed runs enter the fp16 autocast.
import argparse

import deepspeed
import torch

parser = argparse.ArgumentParser(description="forecasting")
parser.add_argument("--epochs", type=int, default=10)
parser.add_argument("--amp", action="store_true", help="use amp (--amp) for the forward")
parser.add_argument("--deepspeed_config", default="ds_config.json")
args = parser.parse_args()

model = torch.nn.Linear(32, 1)
engine, optimizer, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=args.deepspeed_config)

for epoch in range(args.epochs):
    x, y = torch.randn(8, 32).cuda(), torch.randn(8, 1).cuda()
    if args.amp:
        with torch.cuda.amp.autocast():  # ampdoctor: expect[AMP107]
            loss = torch.nn.functional.mse_loss(engine(x), y)
    else:
        loss = torch.nn.functional.mse_loss(engine(x), y)
    engine.backward(loss)
    engine.step()

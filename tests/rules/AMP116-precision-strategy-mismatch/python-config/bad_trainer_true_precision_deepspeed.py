# precision="bf16-true" with the DeepSpeed strategy, passed to the Trainer in code.
import lightning as L

trainer = L.Trainer(
    accelerator="gpu",
    devices=8,
    strategy="deepspeed_stage_2",
    precision="bf16-true",  # ampdoctor: expect[AMP116]
)

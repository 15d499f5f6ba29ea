# bf16-mixed under DDP is plain autocast over fp32 weights.
import lightning as L

trainer = L.Trainer(devices=8, strategy="ddp", precision="bf16-mixed")

from transformers import Trainer

from layers import Block

trainer = Trainer(model=Block(64), args=None)
trainer.train()

# TRL's trainers set `_peft_has_been_casted_to_bf16` only for a model they wrap with the `peft_config` they are
# given; this trainer's `peft_config` defaults to None and no file of the project passes one: its dtype-less
# autocast never runs in this project (a note, not a warning).
from contextlib import nullcontext

import torch
from trl import DPOTrainer


class PairTrainer(DPOTrainer):
    def __init__(self, model, ref_model=None, args=None, train_dataset=None, tokenizer=None, peft_config=None):
        super().__init__(model=model, ref_model=ref_model, args=args, train_dataset=train_dataset, tokenizer=tokenizer,
                         peft_config=peft_config)

    def compute_loss(self, model, inputs, return_outputs=False):
        context = torch.cuda.amp.autocast() if self._peft_has_been_casted_to_bf16 else nullcontext()
        with context:
            loss, metrics = self.get_batch_loss_metrics(model, inputs)
        return (loss, metrics) if return_outputs else loss

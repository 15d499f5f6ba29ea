# The project's own TrainingArguments subclass adds `dtype`: its training script turns it into accelerate's
# mixed_precision and loads the model in fp32, so `dtype: bfloat16` in train.json is bf16 autocast over fp32 weights,
# not weights loaded in bf16.
from dataclasses import dataclass, field

from transformers import Seq2SeqTrainingArguments


@dataclass
class SpeechTrainingArguments(Seq2SeqTrainingArguments):
    dtype: str = field(default="float32", metadata={"help": "float32, float16 or bfloat16: the mixed precision of the run"})
    audio_encoder_batch_size: int = 8


def mixed_precision(args: SpeechTrainingArguments) -> str:
    return {"float16": "fp16", "bfloat16": "bf16"}.get(args.dtype, "no")

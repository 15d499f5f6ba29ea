# The project's TrainingArguments subclass adds no `dtype`: in train.json it is TRL's ModelConfig key, the dtype the
# model is loaded in, and nothing turns on mixed precision, so AdamW steps bf16 weights with no fp32 master copy.
from dataclasses import dataclass

from transformers import Seq2SeqTrainingArguments


@dataclass
class SpeechTrainingArguments(Seq2SeqTrainingArguments):
    audio_encoder_batch_size: int = 8

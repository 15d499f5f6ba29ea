# The script never names a precision: its launcher (scripts/finetune.sh) passes HF's `--bf16 True`, which the
# TrainingArguments it parses read, so the Trainer runs the model under bf16 autocast.
from transformers import HfArgumentParser, Trainer, TrainingArguments

from pkg.model import TinyLM


def main():
    (args,) = HfArgumentParser(TrainingArguments).parse_args_into_dataclasses()
    model = TinyLM()
    Trainer(model=model, args=args).train()


if __name__ == "__main__":
    main()

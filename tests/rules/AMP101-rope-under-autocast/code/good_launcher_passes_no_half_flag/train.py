# The script never names a precision, and its launcher (scripts/finetune.sh) passes no half-precision flag: `--bf16`
# only from a shell variable, which may be anything. The Trainer runs the model in fp32.
from transformers import HfArgumentParser, Trainer, TrainingArguments

from pkg.model import TinyLM


def main():
    (args,) = HfArgumentParser(TrainingArguments).parse_args_into_dataclasses()
    model = TinyLM()
    Trainer(model=model, args=args).train()


if __name__ == "__main__":
    main()

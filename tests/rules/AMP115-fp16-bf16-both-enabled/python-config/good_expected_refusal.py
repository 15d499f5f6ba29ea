# A test that checks the refusal happens, and a config only named for type checkers: neither configures a run.
from typing import TYPE_CHECKING

import pytest
from transformers import TrainingArguments

if TYPE_CHECKING:
    EXAMPLE = TrainingArguments(output_dir="out", fp16=True, bf16=True)


def check_refusal():
    with pytest.raises(ValueError):
        TrainingArguments(output_dir="out", fp16=True, bf16=True)

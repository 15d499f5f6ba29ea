from dataclasses import dataclass, field
from typing import Optional


@dataclass
class ModelArguments:
    model_name_or_path: str = "mistralai/Mistral-7B-v0.1"
    attn_implementation: Optional[str] = field(default="flash_attention_2")
    torch_dtype: Optional[str] = field(default="bfloat16", metadata={"choices": ["bfloat16", "float16", "float32"]})

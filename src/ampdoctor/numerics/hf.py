"""A transformers model and a batch from a config.json, for `ampdoctor compare --hf-config` (random weights)."""

from __future__ import annotations

from typing import Any

import torch

from ampdoctor.audit.hf import ConfigError, _one_line, load_config


def hf_model_and_inputs(path: str, *, seq_len: int = 32, batch_size: int = 1) -> tuple[torch.nn.Module, dict[str, Any]]:
    """The causal LM `path` describes, in fp32 with seed 0, and a random batch with labels (its loss is the loss)."""
    import transformers

    config = load_config(path)
    torch.manual_seed(0)
    try:
        model = transformers.AutoModelForCausalLM.from_config(config)
    except Exception as err:  # noqa: BLE001 - inconsistent sizes fail anywhere in the model's __init__
        raise ConfigError(f"cannot build a causal LM from this config: {type(err).__name__}: {_one_line(err)}") from None
    ids = torch.randint(0, int(getattr(config, "vocab_size", 32000)), (batch_size, seq_len))
    return model, {"input_ids": ids, "labels": ids, "use_cache": False}

"""What the runtime reproductions share: a tiny transformers Llama, and one audited step whose findings are printed
as a JSON list on the last line of stdout (the bench reads that line). A step that raises is part of the
measurement (the crash is what several of the bugs did): its error goes to stderr and the findings are printed."""

import json
import sys
from typing import Callable

import torch


def tiny_llama(dtype: torch.dtype = torch.float32) -> torch.nn.Module:
    """A one-layer Llama with random weights, built in `dtype` as ``from_pretrained(torch_dtype=dtype)`` builds it
    (the rotary inv_freq buffer stays fp32, as it does there)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                      num_key_value_heads=2, max_position_embeddings=64)
    return LlamaForCausalLM._from_config(cfg, dtype=dtype)


def audited_step(audit, step: Callable[[], None]) -> None:
    """Run `step` inside `audit` and print its findings (`-v` on the command line adds one line per finding)."""
    try:
        with audit:
            step()
    except Exception as exc:
        print(f"step raised {type(exc).__name__}: {exc}", file=sys.stderr)
    findings = audit.report.findings
    if "-v" in sys.argv:
        print("\n".join(f"{f.rule_id} {f.severity} {f.location} | {f.message}" for f in findings), file=sys.stderr)
    print(json.dumps([[f.rule_id, getattr(f.severity, "value", str(f.severity))] for f in findings]))


def peft_adapter_step(extracted: str, config_of: Callable[[object], object], after: Callable[[object, torch.Tensor], None] | None = None,
                      **wrap: object) -> None:
    """PEFT's own package imported unmodified from the extracted tree (`extracted`/src): `get_peft_model` (with `wrap`)
    with the config `config_of(peft)` makes, on a tiny bf16 Llama, and one audited training step of the adapter under
    ``ampdoctor.audit(policy="bf16-true")`` (then `after(model, ids)`, inside the audit, if given)."""
    from pathlib import Path

    import ampdoctor

    sys.path.insert(0, str(Path(extracted) / "src"))
    import peft

    torch.manual_seed(0)
    model = peft.get_peft_model(tiny_llama(torch.bfloat16), config_of(peft), **wrap)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    ids = torch.randint(0, 128, (2, 16))

    def step() -> None:
        model(input_ids=ids, labels=ids).loss.backward()
        opt.step()
        if after is not None:
            after(model, ids)

    audited_step(ampdoctor.audit(policy="bf16-true", model=model), step)

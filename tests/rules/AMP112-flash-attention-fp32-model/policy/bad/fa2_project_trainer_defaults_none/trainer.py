from transformers import AutoModelForCausalLM


class PolicyTrainer:
    def __init__(self, model_id, args=None, attn_implementation="flash_attention_2", torch_dtype=None):
        init_kwargs = dict(args.model_init_kwargs or {}) if args is not None else {}
        init_kwargs.setdefault("torch_dtype", torch_dtype)
        init_kwargs["attn_implementation"] = attn_implementation
        self.model = AutoModelForCausalLM.from_pretrained(model_id, **init_kwargs)

# A NeoX checkout from PR #1311 on (EleutherAI/gpt-neox): `precision` is derived from an enabled bf16 block.
class NeoXArgs:
    def calculate_derived(self):
        if self.fp16 and self.fp16.get("enabled", False):
            if self.precision is None:
                self.update_value("precision", "fp16")
        if self.bf16 and self.bf16.get("enabled", False):
            if self.precision is None:
                self.update_value("precision", "bfloat16")

# A NeoX checkout that derives `precision` in words neither PR #1311 nor the code before it uses (a table of
# engine blocks): which version this is cannot be told from the text, so it is unknown, never taken for old.
ENGINE_PRECISION = {"fp16": "fp16", "bf16": "bfloat16"}


class NeoXArgs:
    def calculate_derived(self):
        for block, name in ENGINE_PRECISION.items():
            if (getattr(self, block) or {}).get("enabled", False) and self.precision is None:
                self.update_value("precision", name)

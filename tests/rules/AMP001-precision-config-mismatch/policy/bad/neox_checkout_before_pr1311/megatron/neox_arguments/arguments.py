# A NeoX checkout before PR #1311 (gpt-neox #1305): `precision` comes from the fp16 block only.
class NeoXArgs:
    def calculate_derived(self):
        if self.fp16 and self.fp16.get("enabled", False):
            if self.precision is None:
                self.update_value("precision", "fp16")

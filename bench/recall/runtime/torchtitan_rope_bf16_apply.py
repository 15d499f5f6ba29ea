"""Runtime reproduction of torchtitan-rope-bf16-apply: torchtitan's own rope.py, imported unmodified from the
extracted tree (argv[1]); its `RoPE` module (cos/sin backend, an fp32 cache over 320 positions) and `apply_rotary_emb_cos_sin` on bf16 q/k
(from a Linear under CPU bf16 autocast), one training step under ``ampdoctor.audit(policy="bf16-mixed")``. Prints the
findings as JSON.

rope.py imports `torchtitan.protocols.module.Module` (for its RoPE class, not used here), whose module needs
torchtitan's config system: it is stood in for by an nn.Module with an empty Config."""

import importlib.util
import json
import sys
import types
from pathlib import Path

import torch

import ampdoctor

root = Path(sys.argv[1])
for name in ("torchtitan", "torchtitan.protocols"):
    sys.modules[name] = types.ModuleType(name)
module = types.ModuleType("torchtitan.protocols.module")


class Module(torch.nn.Module):  # the stand-in: RoPE's class body reads Module.Config
    class Config:
        pass


module.Module = Module
sys.modules["torchtitan.protocols.module"] = module
spec = importlib.util.spec_from_file_location("titan_rope", root / "torchtitan/models/common/rope.py")
rope = importlib.util.module_from_spec(spec)
spec.loader.exec_module(rope)

torch.manual_seed(0)
seqlen, heads, head_dim = 320, 2, 16


class Attention(torch.nn.Module):
    """As torchtitan's models hold it: the RoPE module is a child, its fp32 `cache` a tensor attribute."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(32, 2 * heads * head_dim)
        self.rope = rope.RoPE(rope.RoPE.Config(dim=head_dim, max_seq_len=seqlen, backend="cos_sin"))

    def forward(self, x):
        q, k = self.proj(x).view(2, seqlen, heads, 2 * head_dim).chunk(2, dim=-1)
        return rope.apply_rotary_emb_cos_sin(q, k, self.rope(seqlen))


model = Attention()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
x = torch.randn(2, seqlen, 32)
with ampdoctor.audit(policy="bf16-mixed", model=model) as audit:
    with torch.autocast("cpu", dtype=torch.bfloat16):
        q, k = model(x)
        loss = (q.float() * k.float()).mean()
    loss.backward()
    opt.step()
print(json.dumps([[f.rule_id, getattr(f.severity, "value", str(f.severity))] for f in audit.report.findings]))
if "-v" in sys.argv:
    print("\n".join(f"{f.rule_id} {f.location} | {f.message}" for f in audit.report.findings))

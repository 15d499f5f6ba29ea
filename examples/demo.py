"""`make demo`: ampdoctor on the examples shipped in this repository.

Each step runs the real CLI (`python -m ampdoctor ...`) and checks its exit code, so the demo also
fails loudly when a command stops diagnosing what it should.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EX = "examples"

# (title, ampdoctor arguments, expected exit code)
STEPS: list[tuple[str, list[str], int]] = [
    ("What this machine can do for mixed precision", ["env"], 0),
    ("Incident 1 (GPT-NeoX): bf16 engine, fp32 rotary path -> bmm dtype error",
     ["explain", "--file", f"{EX}/errors/incident1_neox_bf16.log", "--limit", "2"], 0),
    ("Incident 2 (modded-nanoGPT): silent; the log alone names no cause",
     ["explain", "--file", f"{EX}/errors/incident2_nanogpt_val_loss.log"], 1),
    ("Incident 3 (SimpleTuner): --gradient_precision=fp32 on a bf16 model",
     ["explain", "--file", f"{EX}/errors/incident3_simpletuner_backward.log", "--limit", "1"], 0),
    ("Incident 4 (H2O LLM Studio): GradScaler with bf16",
     ["explain", "--file", f"{EX}/errors/incident4_h2o_gradscaler.log", "--limit", "1"], 0),
    ("Incident 5 (Qwen2.5-Omni): fp32 rotary input, bf16 cos/sin",
     ["explain", "--file", f"{EX}/errors/incident5_qwen_omni_rotary.log", "--limit", "1"], 0),
    ("Incident 1 before it runs: the NeoX config enables bf16 but leaves precision unset",
     ["lint", "--no-config", "--fail-on", "warning", f"{EX}/configs/incident1_neox"], 1),
    ("Incident 3 before it runs: SimpleTuner --gradient_precision=fp32 with a bf16 model",
     ["lint", "--no-config", "--fail-on", "warning", f"{EX}/configs/incident3_simpletuner"], 1),
    ("Incident 4 before it runs: H2O mixed precision with a bf16 backbone builds a GradScaler",
     ["lint", "--no-config", f"{EX}/configs/incident4_h2o"], 1),
    ("Across files: accelerate's YAML sets a precision beside its DeepSpeed file, which its launch refuses",
     ["lint", "--no-config", "--fail-on", "warning", f"{EX}/configs/accelerate_deepspeed_mismatch"], 1),
    ("Incidents 2-5 in code: bf16 RoPE cache, retyped .grad, ungated GradScaler, fp32 rotary input with bf16 cos/sin",
     ["lint", "--no-config", f"{EX}/code"], 1),
    ("Incident 1 at run time: the audit walks the failing bmm back to the fp32 rotary table",
     ["run", "--policy", "bf16-true", f"{EX}/incidents/incident1_neox_rotary.py"], 1),
    ("The same model done right: a bf16-mixed step with no findings",
     ["run", "--policy", "bf16-mixed", f"{EX}/incidents/correct_bf16_mixed.py"], 0),
    ("One policy, exported to DeepSpeed", ["export", "--policy", "bf16-mixed", "--to", "deepspeed"], 0),
    ("What Lightning cannot express", ["export", "--policy", "params=bf16,compute=bf16,reduce=fp32", "--to", "lightning"], 0),
]


# Incident 2 as numbers and pictures: the RoPE variants against float64, written as a self-contained HTML page.
INCIDENT2_HTML = ROOT / "out" / "incident2_rope.html"
STEPS.append(("Incident 2 measured: bf16 RoPE tables against float64, as an HTML report",
              ["rope", "--head-dim", "64", "--base", "10000", "--max-position", "8192", "--html", str(INCIDENT2_HTML)], 0))


def main() -> int:
    failed = []
    INCIDENT2_HTML.parent.mkdir(exist_ok=True)
    for title, args, expected in STEPS:
        print(f"\n\033[1m=== {title}\033[0m\n$ ampdoctor {' '.join(args)}", flush=True)
        code = subprocess.run([sys.executable, "-m", "ampdoctor", *args], cwd=ROOT).returncode
        if code != expected:
            failed.append(f"ampdoctor {' '.join(args)}: exit {code}, expected {expected}")
    if failed:
        print("\ndemo FAILED:\n  " + "\n  ".join(failed), file=sys.stderr)
        return 1
    print(f"\ndemo: {len(STEPS)} steps ran as expected; the incident-2 HTML report is {INCIDENT2_HTML}")
    print(f"next: {ROOT / 'docs' / 'getting-started.md'} (each incident: you see -> run -> fix), "
          f"{ROOT / 'docs' / 'integrations.md'} (HF Trainer, Lightning, accelerate, CI), {ROOT / 'docs' / 'rules.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
